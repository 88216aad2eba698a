// Fused graph attention (GAT) over a CSR graph by destination: the contract both backends share.
//
// For every destination row i, head k and incoming edge e = (j -> i) at CSR position e:
//   z_e          = LeakyReLU(alpha_src[j, k] + alpha_dst[i, k] + alpha_edge[e, k])
//   lse[i, k]    = log sum_{e in row i} exp(z_e)                 (-inf for an empty row)
//   p_e          = exp(z_e - lse[i, k])                           (softmax over the row)
//   out[i, k, :] = sum_{e in row i} keep_e * p_e * h[j, k, :]    (0 for an empty row)
// keep_e is 1 without dropout; with dropout probability q it is 0 with probability q and
// 1 / (1 - q) otherwise, drawn from a counter-based hash of (seed, e, k), so the backward pass
// regenerates the mask instead of storing it. Nothing of size [E, H] or [E, H, F] is kept
// between the forward and the backward pass. alpha_edge (GATConv's edge-feature term, one
// value per edge and head in CSR order) is optional: null reads as 0. Sources and
// destinations may be two node sets (num_cols != num_rows: a bipartite graph).
//
// Backward (delta as in flash-attention: the softmax Jacobian contracted with out):
//   delta[i, k]           = <grad_out[i, k, :], out[i, k, :]>
//   dz_e                  = p_e * (keep_e * <grad_out[i, k, :], h[j, k, :]> - delta[i, k])
//                           * LeakyReLU'(alpha_src[j, k] + alpha_dst[i, k])
//   grad_h[j, k, :]       = sum_{e = (j -> i)} keep_e * p_e * grad_out[i, k, :]
//   grad_alpha_src[j, k]  = sum_{e = (j -> i)} dz_e
//   grad_alpha_dst[i, k]  = sum_{e = (j -> i)} dz_e
//   grad_alpha_edge[e, k] = dz_e                       (the edge_grad workspace, in CSR order)
// p_e is recomputed from the saved lse. Three passes: delta per row; then one pass over the
// CSC transpose (csc_edge_id maps each slot to its CSR position, the dropout counter) that
// reads grad_out[i] and h[j] once per edge for grad_h, grad_alpha_src and dz_e, parking dz_e
// in a transient [nnz, heads] workspace at the edge's CSC slot (a contiguous store per
// column: writing it at the CSR position scattered one store per edge and head); then per-row
// sums of it for grad_alpha_dst, read through csr_to_csc (the CSC slot of each CSR edge,
// cached with the transpose), which also copy dz_e out in CSR order as grad_alpha_edge. Every
// feature-sized read happens once per edge, as in the forward.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

struct GatParams {
  const int64_t* rowptr = nullptr;   // [num_rows + 1]
  const int64_t* col = nullptr;      // [nnz] source of each edge
  const void* h = nullptr;           // [num_cols, heads, features]
  const void* alpha_src = nullptr;   // [num_cols, heads], dtype of h
  const void* alpha_dst = nullptr;   // [num_rows, heads], dtype of h
  const void* alpha_edge = nullptr;  // [nnz, heads] in CSR order, dtype of h; null: no term
  void* out = nullptr;               // [num_rows, heads, features]
  void* lse = nullptr;               // [num_rows, heads], accumulation type
  int64_t num_edges = 0;             // nnz
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t heads = 0;
  int64_t features = 0;
  double negative_slope = 0.2;
  double dropout = 0.0;  // probability of dropping an attention coefficient, in [0, 1]
  uint64_t seed = 0;
  DType dtype = DType::kFloat32;
};

struct GatBackwardParams {
  const int64_t* rowptr = nullptr;       // [num_rows + 1]
  const int64_t* col = nullptr;          // [nnz]
  const int64_t* colptr = nullptr;       // [num_cols + 1] CSC transpose
  const int64_t* csc_row = nullptr;      // [nnz] destination of each CSC slot
  const int64_t* csc_edge_id = nullptr;  // [nnz] CSR position of each CSC slot
  const int64_t* csr_to_csc = nullptr;   // [nnz] CSC slot of each CSR edge (inverse of the above)
  const void* h = nullptr;               // [num_cols, heads, features]
  const void* alpha_src = nullptr;       // [num_cols, heads]
  const void* alpha_dst = nullptr;       // [num_rows, heads]
  const void* alpha_edge = nullptr;      // [nnz, heads] CSR order, or null (see GatParams)
  const void* out = nullptr;             // [num_rows, heads, features] forward result
  const void* lse = nullptr;             // [num_rows, heads] forward result, accumulation type
  const void* grad_out = nullptr;        // [num_rows, heads, features]
  void* delta = nullptr;                 // [num_rows, heads] workspace, accumulation type
  void* edge_grad = nullptr;             // [nnz, heads] dz_e by CSC slot, accumulation type
  void* grad_alpha_edge = nullptr;       // [nnz, heads] dz_e in CSR order, acc. type; null: unused
  void* grad_h = nullptr;                // [num_cols, heads, features]
  void* grad_alpha_src = nullptr;        // [num_cols, heads]
  void* grad_alpha_dst = nullptr;        // [num_rows, heads]
  int64_t num_edges = 0;                 // nnz
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t heads = 0;
  int64_t features = 0;
  double negative_slope = 0.2;
  double dropout = 0.0;
  uint64_t seed = 0;
  DType dtype = DType::kFloat32;
};

void gat_forward_cpu(const GatParams& p);
void gat_backward_cpu(const GatBackwardParams& p);

#ifdef GALFAST_WITH_CUDA
void gat_forward_cuda(const GatParams& p, void* stream);
void gat_backward_cuda(const GatBackwardParams& p, void* stream);
#endif

}  // namespace galfast
