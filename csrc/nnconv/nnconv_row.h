// Per-edge maths of the NNConv kernels that the CPU and CUDA backends share: the edge factor
// and a strided partial dot product (the CPU kernels take whole rows with vector lanes; CUDA
// lanes stride the features).
#pragma once

#include <cstdint>

#include "common/macros.h"
#include "nnconv/nnconv.h"

namespace galfast {

// w_e of every edge of row r: row_scale[r], or 1 without a scale.
template <typename Acc>
GALFAST_HD Acc nnconv_row_factor(const void* row_scale, int64_t r) {
  return row_scale ? static_cast<const Acc*>(row_scale)[r] : Acc(1);
}

// sum of a[i] * b[i] for i = first, first + step, ... below n, in the accumulation type: one
// lane's share of the grad_h sum over features (a = grad_S[v, k, :], b = x[u]).
template <typename Acc, typename T, typename U>
GALFAST_HD Acc strided_dot(const T* a, const U* b, int64_t n, int64_t first, int64_t step) {
  Acc sum = Acc(0);
  for (int64_t i = first; i < n; i += step) sum += static_cast<Acc>(a[i]) * static_cast<Acc>(b[i]);
  return sum;
}

}  // namespace galfast
