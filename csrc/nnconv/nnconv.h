// Fused edge-conditioned convolution (NNConv) whose edge network ends in a linear layer: the
// contract both backends share.
//
// NNConv sends along edge e = (u -> v) the message x_u @ Theta_e with a per-edge matrix
// Theta_e = reshape(W h_e + b, [F_in, F_out]) (h_e the edge network's last hidden features,
// K of them). The message is bilinear in (h_e, x_u), so a node's sum over its edges can be
// taken before W is applied:
//
//   S[v, k, f] = sum_{e in row v} w_e * h[e, k] * x[col[e], f]     (K x F_in per node)
//   A[v, f]    = sum_{e in row v} w_e * x[col[e], f]               (the plain aggregate)
//   out[v]     = S[v] contracted with W  +  A[v] @ reshape(b, [F_in, F_out])
//
// with w_e = row_scale[v] (1/degree for a mean; 1 when absent). These kernels build S and A;
// the contraction with W is a dense matmul done by the caller, so no [E, F_in, F_out] tensor
// ever exists. Given grad_S = dL/dS and grad_A = dL/dA of a block of rows (the caller gets
// them from dL/dout by matmuls), the backward is:
//
//   grad_h[e, k]     = w_e * sum_f grad_S[v, k, f] * x[col[e], f]
//   edge_grad_x[e,f] = w_e * (grad_A[v, f] + sum_k grad_S[v, k, f] * h[e, k])
//   grad_x[u, f]     = sum_{e = (u -> v)} edge_grad_x[e, f]       (over the CSC, in order)
//
// The first two are written once per edge by the thread that owns the edge's row; the third
// sums a source's out-edges over the transpose, so nothing is accumulated by atomics and the
// results are bitwise identical for any thread count.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

struct NnconvParams {
  const int64_t* rowptr = nullptr;  // [num_rows + 1], rowptr[0] == 0
  const int64_t* col = nullptr;     // [num_edges] source of each edge
  const void* row_scale = nullptr;  // [num_rows] accumulation type, or null (all 1)
  const void* x = nullptr;          // [num_cols, features]
  const void* h = nullptr;          // [num_edges, hidden] in CSR order
  void* s = nullptr;                // [num_rows, hidden, features]
  void* a = nullptr;                // [num_rows, features]
  int64_t num_edges = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t hidden = 0;    // K
  int64_t features = 0;  // F_in
  DType dtype = DType::kFloat32;
};

struct NnconvEdgeGradParams {
  const int64_t* rowptr = nullptr;  // [num_rows + 1], rowptr[0] == 0
  const int64_t* col = nullptr;     // [num_edges]
  const void* row_scale = nullptr;  // [num_rows] accumulation type, or null
  const void* x = nullptr;          // [num_cols, features]
  const void* h = nullptr;          // [num_edges, hidden]
  const void* grad_s = nullptr;     // [num_rows, hidden, features]
  const void* grad_a = nullptr;     // [num_rows, features], or null (zero)
  void* grad_h = nullptr;           // [num_edges, hidden]
  void* edge_grad_x = nullptr;      // [num_edges, features]
  int64_t num_edges = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t hidden = 0;
  int64_t features = 0;
  DType dtype = DType::kFloat32;
};

// grad_x[u] = sum over the CSC slots s of source u of edge_grad_x[csc_edge_id[s]].
struct NnconvGradXParams {
  const int64_t* colptr = nullptr;       // [num_cols + 1]
  const int64_t* csc_edge_id = nullptr;  // [num_edges] CSR position of each CSC slot
  const void* edge_grad_x = nullptr;     // [num_edges, features]
  void* grad_x = nullptr;                // [num_cols, features]
  int64_t num_edges = 0;
  int64_t num_cols = 0;
  int64_t features = 0;
  DType dtype = DType::kFloat32;
};

// The CPU's whole op in one call per pass (nnconv_cpu_fused_impl.h): each thread takes tiles of
// rows, builds their S and contracts it with W right away, so a pass is one parallel region
// instead of one per block of rows plus a matmul per block (each a barrier: on a loaded machine
// with 2 threads, those barriers made the op slower than with 1).
//   forward:  out[v] = S[v] . W3, and A[v]
//   backward: grad_S[v] = grad_out[v] . W3^T (per tile, kept in cache) -> grad_h, edge_grad_x;
//             grad_W3 = sum_v S[v]^T grad_out[v], each thread owning a slice of hidden units
//             (S recomputed for its slice), summed over rows in a fixed order.
// W3 is the last edge layer's weight arranged as [hidden * features, out_features] (row
// k * F + f multiplies S[v, k, f]). Deterministic: every output element is summed in an order
// that does not depend on the thread count.
struct NnconvFusedParams {
  const int64_t* rowptr = nullptr;  // [num_rows + 1], rowptr[0] == 0
  const int64_t* col = nullptr;     // [num_edges]
  const void* row_scale = nullptr;  // [num_rows] accumulation type, or null
  const void* x = nullptr;          // [num_cols, features]
  const void* h = nullptr;          // [num_edges, hidden]
  const void* w3 = nullptr;         // [hidden * features, out_features]
  const void* w3t = nullptr;        // backward: [out_features, hidden * features]
  const void* grad_out = nullptr;   // backward: [num_rows, out_features]
  const void* grad_a = nullptr;     // backward: [num_rows, features], or null (zero)
  void* out = nullptr;              // forward: [num_rows, out_features]
  void* a = nullptr;                // forward: [num_rows, features]
  void* grad_h = nullptr;           // backward: [num_edges, hidden]
  void* edge_grad_x = nullptr;      // backward: [num_edges, features]
  void* grad_w3 = nullptr;          // backward: [hidden * features, out_features]
  int64_t num_edges = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t hidden = 0;
  int64_t features = 0;
  int64_t out_features = 0;
  DType dtype = DType::kFloat32;
};

void nnconv_fused_forward_cpu(const NnconvFusedParams& p);
void nnconv_fused_backward_cpu(const NnconvFusedParams& p);

void nnconv_forward_cpu(const NnconvParams& p);
void nnconv_edge_grad_cpu(const NnconvEdgeGradParams& p);
void nnconv_grad_x_cpu(const NnconvGradXParams& p);

#ifdef GALFAST_WITH_CUDA
void nnconv_forward_cuda(const NnconvParams& p, void* stream);
void nnconv_edge_grad_cuda(const NnconvEdgeGradParams& p, void* stream);
void nnconv_grad_x_cuda(const NnconvGradXParams& p, void* stream);
#endif

}  // namespace galfast
