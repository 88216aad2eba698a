// Training-mode batch normalisation over the rows of a contiguous [N, C] matrix (node features:
// N nodes, C channels, C small), fused: the contract of the CPU kernels.
//
// Forward, per channel c over the N rows:
//   mean[c] = sum_r x[r, c] / N,   var[c] = sum_r (x[r, c] - mean[c])^2 / N   (biased)
//   y[r, c] = (x[r, c] - mean[c]) * invstd[c] * weight[c] + bias[c],
//   invstd[c] = 1 / sqrt(var[c] + eps)                    (absent weight: 1, absent bias: 0)
// Statistics are accumulated in double for float32 too and returned in double as
// stats[0, :] = mean, stats[1, :] = var. Numerically safe in one pass over memory: each chunk of
// rows (in cache) gives its own mean and centred sum of squares by two passes over the chunk,
// and the chunks combine exactly as M2 = sum_k (M2_k + n_k (mean_k - mean)^2) (Chan et al.), so
// no sum-of-squares-minus-square-of-sums cancellation ever happens.
//
// Backward, with g = grad_y, xc = x - mean, over the rows per channel:
//   grad_bias[c]   = sum_r g[r, c]
//   grad_weight[c] = invstd[c] * sum_r g[r, c] xc[r, c]
//   grad_x[r, c]   = weight[c] invstd[c] (g[r, c] - grad_bias[c] / N
//                                         - xc[r, c] invstd[c]^2 sum_r g xc / N)
// in two passes (the two sums, then grad_x); any of the three outputs may be skipped (null).
//
// The running statistics (BatchNorm's buffers) update from stats as torch's CPU kernel does,
// in double: running_mean = (1 - m) running_mean + m mean,
// running_var = (1 - m) running_var + m var N / (N - 1).
//
// Determinism: rows are cut into chunks of a size that depends on C only, each chunk reduced by
// one thread into its own partial, and the partials combined in chunk order, so every result is
// bitwise the same for any thread count.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

struct BatchNormParams {
  const void* x = nullptr;       // [N, C], row-major
  const void* weight = nullptr;  // [C] dtype of x, or null (1)
  const void* bias = nullptr;    // [C] dtype of x, or null (0)
  void* y = nullptr;             // [N, C]
  double* stats = nullptr;       // [2, C] out: mean, biased var
  int64_t num_rows = 0;          // N
  int64_t num_channels = 0;      // C
  double eps = 1e-5;
  DType dtype = DType::kFloat32;
};

struct BatchNormBackwardParams {
  const void* x = nullptr;        // [N, C]
  const void* grad_y = nullptr;   // [N, C]
  const double* stats = nullptr;  // [2, C] the forward's
  const void* weight = nullptr;   // [C] or null (1)
  void* grad_x = nullptr;         // [N, C] or null (not wanted)
  void* grad_weight = nullptr;    // [C] or null
  void* grad_bias = nullptr;      // [C] or null
  int64_t num_rows = 0;
  int64_t num_channels = 0;
  double eps = 1e-5;
  DType dtype = DType::kFloat32;
};

struct BatchNormRunningParams {
  const double* stats = nullptr;  // [2, C] the forward's
  void* running_mean = nullptr;   // [C] or null
  void* running_var = nullptr;    // [C] or null
  int64_t num_rows = 0;           // N of the batch (> 1)
  int64_t num_channels = 0;
  double momentum = 0.1;  // the weight of this batch, in [0, 1]
  DType dtype = DType::kFloat32;
};

void batch_norm_cpu(const BatchNormParams& p);
void batch_norm_backward_cpu(const BatchNormBackwardParams& p);
void batch_norm_update_running_cpu(const BatchNormRunningParams& p);

}  // namespace galfast
