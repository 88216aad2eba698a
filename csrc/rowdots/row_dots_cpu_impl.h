// CPU (OpenMP) gradients of row-wise dot products (row_dots.h), compiled once per instruction
// set: row_dots_cpu.cpp includes this file for the baseline ISA and row_dots_cpu_avx2.cpp for
// AVX2+FMA (where std::fma is one instruction; the baseline calls libm's, correct but slow).
//
// Thread mapping: the rows b are cut into one contiguous range per thread; a thread writes its
// rows' grad_vectors (one scaled copy of z[b] per s) and grad_z (the first product, then one
// fused multiply-add per further s) in one pass over them.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including row_dots_cpu_impl.h"
#endif

#include <cmath>
#include <cstdint>

#include "common/parallel.h"
#include "rowdots/row_dots.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Below this many output elements, one thread: a parallel region costs more than it saves.
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

template <typename T>
void row_dots_backward_typed(const RowDotsBackwardParams& p) {
  const T* __restrict__ vectors = static_cast<const T*>(p.vectors);
  const T* __restrict__ z = static_cast<const T*>(p.z);
  const T* __restrict__ grad = static_cast<const T*>(p.grad);
  T* __restrict__ grad_vectors = static_cast<T*>(p.grad_vectors);
  T* __restrict__ grad_z = static_cast<T*>(p.grad_z);
  const int64_t rows = p.rows, num_vectors = p.num_vectors, width = p.width;
  const int threads = rows * num_vectors * width < kMinParallelElements ? 1 : max_threads();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t b = 0; b < rows; ++b) {
    const T* zb = z + b * width;
    const T* vb = vectors + b * num_vectors * width;
    const T* gb = grad + b * num_vectors;
    for (int64_t s = 0; s < num_vectors; ++s) {
      T* out = grad_vectors + (b * num_vectors + s) * width;
      const T g = gb[s];
      for (int64_t e = 0; e < width; ++e) out[e] = g * zb[e];
    }
    T* out = grad_z + b * width;
    const T g0 = gb[0];
    for (int64_t e = 0; e < width; ++e) out[e] = vb[e] * g0;
    for (int64_t s = 1; s < num_vectors; ++s) {
      const T g = gb[s];
      const T* v = vb + s * width;
      for (int64_t e = 0; e < width; ++e) out[e] = std::fma(v[e], g, out[e]);
    }
  }
}

}  // namespace

void row_dots_backward(const RowDotsBackwardParams& p) {
  require_cpu_dtype(p.dtype, "row_dots_backward");
  if (p.dtype == DType::kFloat32) {
    row_dots_backward_typed<float>(p);
  } else {
    row_dots_backward_typed<double>(p);
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
