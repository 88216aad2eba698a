// Fused sparse neighbourhood aggregation over a CSR graph: the contract both backends share.
//
//   out[r, f] = REDUCE_{e in row r} w_e * x[col[e], f],
//   w_e = row_scale[r] * col_scale[col[e]] * weight[id(e)]   (absent factors count as 1)
//
// id(e) = edge_id[e] when edge_id is given (the transpose stores, per CSC slot, the edge's
// position in CSR order) and e otherwise. Mean and GCN normalisation are expressed through
// row_scale / col_scale, so no per-edge weight array is read for them.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

enum class AggMode : int {
  kSum = 0,  // weighted sum (mean and gcn through the scales)
  kMax = 1,  // weighted max; writes the winning edge id to arg (-1 and 0 for empty rows)
  kMaskedSum =
      2,  // backward of max on the transpose: edge e adds only where mask_arg[col, f] == id(e)
};

// Rows with more edges than this are reduced by a whole CUDA block instead of one warp.
constexpr int64_t kHubDegree = 256;

struct AggregateParams {
  const int64_t* rowptr = nullptr;    // [num_rows + 1]
  const int64_t* col = nullptr;       // [nnz]
  const int32_t* col32 = nullptr;     // [nnz] col as int32 for the CPU sum, or null
  const int64_t* edge_id = nullptr;   // [nnz] or null
  const void* weight = nullptr;       // [nnz] by edge id, dtype of x, or null
  const void* row_scale = nullptr;    // [num_rows] accumulation type, or null
  const void* col_scale = nullptr;    // [num_cols] accumulation type, or null
  const void* x = nullptr;            // [num_cols, F]
  void* out = nullptr;                // [num_rows, F]
  int64_t* arg = nullptr;             // [num_rows, F] for kMax
  const int64_t* mask_arg = nullptr;  // [num_cols, F] for kMaskedSum
  const int64_t* hub_rows = nullptr;  // CUDA only: rows with degree > kHubDegree
  int64_t num_hub_rows = 0;
  // CUDA sum only (aggregate_sum_cuda.cu): the segment plan of galfast/ops/segment_plan.py,
  // [seg_begin (S + 1) | seg_row (S) | row_seg_ptr (num_rows + 1)] in one array, with
  // S = num_segments; partial is [S, F] in the accumulation type (null when no row is split).
  // When set, col32 must be too: the kernel reads the int32 columns.
  const int64_t* segments = nullptr;
  int64_t num_segments = 0;
  void* partial = nullptr;
  int64_t num_edges = 0;  // nnz
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t num_features = 0;
  AggMode mode = AggMode::kSum;
  DType dtype = DType::kFloat32;
};

// Whether the CPU sum kernels fold col_scale into a pre-scaled copy of x (one multiply per source
// feature) instead of reading col_scale per edge. The copy pays only where a source has many
// edges: at 4 to 16 edges a source it made the forward up to 1.9x slower on two threads (the
// threads write the copy, then read each other's rows of it) and, from F = 20 on, slower on one
// thread too; at 32 the two broke even, at 200 (MovieLens-size) the copy was 4-34% faster
// (docs/benchmarks.md). Always inlined: both instruction-set builds compile it.
[[gnu::always_inline]] inline bool fold_pays(const AggregateParams& p) {
  return p.col_scale != nullptr && p.num_edges >= 32 * p.num_cols;
}

// Gradient with respect to the edge weights (an SDDMM):
//   grad_w[id(e)] = row_scale[r] * col_scale[c] * sum_f grad_out[r, f] * x[c, f]
// where for max only the features whose forward arg equals id(e) count.
struct EdgeGradParams {
  const int64_t* rowptr = nullptr;  // [num_rows + 1]
  const int64_t* row = nullptr;     // [nnz] destination row of each edge (CUDA: edge-parallel)
  const int64_t* col = nullptr;     // [nnz]
  const void* row_scale = nullptr;  // [num_rows] or null
  const void* col_scale = nullptr;  // [num_cols] or null
  const void* grad_out = nullptr;   // [num_rows, F]
  const void* x = nullptr;          // [num_cols, F]
  const int64_t* arg = nullptr;     // [num_rows, F] forward arg of max, or null
  void* grad_weight = nullptr;      // [nnz]
  int64_t num_edges = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t num_features = 0;
  DType dtype = DType::kFloat32;
};

void aggregate_cpu(const AggregateParams& p);
void edge_grad_cpu(const EdgeGradParams& p);

#ifdef GALFAST_WITH_CUDA
void aggregate_cuda(const AggregateParams& p, void* stream);
void aggregate_sum_segments_cuda(const AggregateParams& p, void* stream);
void edge_grad_cuda(const EdgeGradParams& p, void* stream);
#endif

}  // namespace galfast
