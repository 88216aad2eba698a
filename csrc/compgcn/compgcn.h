// Fused CompGCN relational aggregation over a CSR graph by destination: the contract both
// backends share.
//
//   out[r, :] = sum_{e in row r} w_e * phi(x[col[e], :], rel[edge_type[e], :])
//   w_e       = row_scale[r] * col_scale[col[e]] * weight[e]   (absent factors count as 1)
// Every per-edge array is in slot order, so a transpose (or any other order) comes with its own
// permuted edge_type and weight: the kernels gather nothing through an edge-id indirection.
//
// phi is the composition: kSub a - b, kMult a * b, kCorr conj(a) * b on complex pairs (x and
// rel hold rFFT spectra as interleaved (re, im) pairs, so F is even; the caller transforms:
// circular correlation is irfft(conj(rfft(a)) * rfft(b)) and the sum over edges commutes with
// irfft), and kSource a alone (the x-gradient of kSub). Nothing of size [nnz, F] exists.
//
// Gradients. With g = grad_out:
//   x:   grad_x[c] = sum_{e = (c -> r)} w_e * phi'(g[r], rel[type(e)]) -- this same kernel on the
//        transpose, with phi' = kSource for kSub, kMult for kMult, kCorr for kCorr (the
//        gradient of conj(a) * b with respect to a is conj(g) * b).
//   rel: grad_rel[t] = sum_{e of type t} w_e * psi(g[row(e)], x[col(e)]), psi = -g (kSub),
//        g * a (kMult), g * a complex (kCorr) -- RelGradParams below, deterministic: the edges
//        come in a fixed relation-grouped order cut into chunks of a fixed size, each chunk
//        summed by one thread into its own partial row, then each relation's partials summed in
//        chunk order. No atomics; the result does not depend on the thread count.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

enum class Composition : int {
  kSub = 0,     // phi(a, b) = a - b
  kMult = 1,    // phi(a, b) = a * b
  kCorr = 2,    // phi(a, b) = conj(a) * b on (re, im) pairs
  kSource = 3,  // phi(a, b) = a (rel unread): the backward of kSub with respect to x
};

struct CompgcnParams {
  const int64_t* rowptr = nullptr;     // [num_rows + 1]
  const int64_t* col = nullptr;        // [nnz] gathered row of x per slot
  const int64_t* edge_type = nullptr;  // [nnz] relation per slot, in [0, num_rels)
  const void* weight = nullptr;        // [nnz] per slot, dtype of x, or null
  const void* row_scale = nullptr;     // [num_rows] accumulation type, or null
  const void* col_scale = nullptr;     // [num_cols] accumulation type, or null
  const void* x = nullptr;             // [num_cols, F]
  const void* rel = nullptr;           // [num_rels, F] (unread for kSource)
  void* out = nullptr;                 // [num_rows, F]
  int64_t num_edges = 0;               // nnz
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t num_rels = 0;
  int64_t num_features = 0;  // F (even for kCorr)
  Composition op = Composition::kSub;
  DType dtype = DType::kFloat32;
};

// Gradient with respect to the relation embeddings, over the edges in a relation-grouped slot
// order: chunk k covers slots [chunkptr[k], chunkptr[k + 1]), all of one relation, and relation
// t owns chunks [rel_chunkptr[t], rel_chunkptr[t + 1]).
struct RelGradParams {
  const int64_t* chunkptr = nullptr;      // [num_chunks + 1] slot offsets
  const int64_t* rel_chunkptr = nullptr;  // [num_rels + 1] chunk offsets
  const int64_t* row = nullptr;           // [nnz] destination per slot
  const int64_t* col = nullptr;           // [nnz] source per slot
  const void* weight = nullptr;           // [nnz] per slot, or null
  const void* row_scale = nullptr;        // [num_rows] or null
  const void* col_scale = nullptr;        // [num_cols] or null
  const void* grad_out = nullptr;         // [num_rows, F]
  const void* x = nullptr;                // [num_cols, F] (unread for kSub)
  void* partial = nullptr;                // [num_chunks, F] workspace, accumulation type
  void* grad_rel = nullptr;               // [num_rels, F]
  int64_t num_edges = 0;
  int64_t num_chunks = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t num_rels = 0;
  int64_t num_features = 0;
  Composition op = Composition::kSub;
  DType dtype = DType::kFloat32;
};

void compgcn_aggregate_cpu(const CompgcnParams& p);
void compgcn_rel_grad_cpu(const RelGradParams& p);

#ifdef GALFAST_WITH_CUDA
void compgcn_aggregate_cuda(const CompgcnParams& p, void* stream);
void compgcn_rel_grad_cuda(const RelGradParams& p, void* stream);
#endif

}  // namespace galfast
