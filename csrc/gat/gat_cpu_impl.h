// CPU (OpenMP) fused GAT, compiled once per instruction set (gat_cpu.cpp: baseline,
// gat_cpu_avx2.cpp: -mavx2 -mfma) and chosen at run time.
// Thread mapping: rows (for the backward's transpose pass, source nodes) are cut into
// edge-balanced chunks (balanced_row_chunks) handed out dynamically; one thread owns a whole
// row. It first computes the row's [degree, heads] attention terms into per-thread scratch
// (logits, then one vectorised exp sweep), then, per head, walks the edges once per register
// tile of features (weighted_rows), so the accumulators stay in registers. The rows that edge
// d + kPrefetchEdges will gather are prefetched while edge d is processed. Every output element
// is written by one thread in CSR (or CSC) order, so results are bitwise identical for any
// thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gat_cpu_impl.h"
#endif

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/vec_exp.h"
#include "gat/gat.h"
#include "gat/gat_cpu_backward.h"
#include "gat/gat_cpu_tiles.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Row i: every (edge, head) logit into scratch, the row's maxima, one vectorised exp sweep,
// the softmax sums; the weights (dropout folded in) then drive weighted_rows per head. A
// one-pass online softmax would call exp per edge and rescale on every new maximum, which
// keeps the loop scalar and branchy.
template <typename T>
void forward_row(const GatParams& p, const AttentionDropout& drop, int64_t i) {
  const int64_t H = p.heads, F = p.features, HF = H * F;
  const T slope = static_cast<T>(p.negative_slope);
  const T* __restrict h = static_cast<const T*>(p.h);
  const T* __restrict a_src = static_cast<const T*>(p.alpha_src);
  const T* __restrict a_dst = static_cast<const T*>(p.alpha_dst) + i * H;
  T* __restrict out = static_cast<T*>(p.out) + i * HF;
  T* __restrict lse = static_cast<T*>(p.lse) + i * H;
  const int64_t begin = p.rowptr[i], degree = p.rowptr[i + 1] - begin;
  if (degree == 0) {
    std::fill(out, out + HF, T(0));
    std::fill(lse, lse + H, -std::numeric_limits<T>::infinity());
    return;
  }
  T* __restrict w = row_scratch<T>(degree * H);
  for (int64_t d = 0; d < degree; ++d) {  // the gathers alone; the maths in vector loops
    const T* __restrict src = a_src + p.col[begin + d] * H;
    for (int64_t k = 0; k < H; ++k) w[d * H + k] = src[k] + a_dst[k];
  }
  if (p.alpha_edge) {  // the row's edges are contiguous in CSR order: one vector add
    const T* __restrict a_edge = static_cast<const T*>(p.alpha_edge) + begin * H;
    for (int64_t x = 0; x < degree * H; ++x) w[x] += a_edge[x];
  }
  for (int64_t x = 0; x < degree * H; ++x) w[x] = leaky_relu(w[x], slope);
  for (int64_t k = 0; k < H; ++k) {
    T max = -std::numeric_limits<T>::infinity();
    for (int64_t d = 0; d < degree; ++d) max = std::max(max, w[d * H + k]);
    lse[k] = max;  // the shift, until the sum is known
  }
  for (int64_t d = 0; d < degree; ++d) {
    for (int64_t k = 0; k < H; ++k) w[d * H + k] -= lse[k];
  }
  exp_shifted(w, degree * H, T(0));
  for (int64_t k = 0; k < H; ++k) {
    T sum = T(0);
    for (int64_t d = 0; d < degree; ++d) sum += w[d * H + k];
    lse[k] += gat_log(sum);
    const T inv = T(1) / sum;
    if (drop.active()) {
      for (int64_t d = 0; d < degree; ++d) w[d * H + k] *= inv * drop.keep<T>(begin + d, k);
    } else {  // a loop the compiler vectorises
      for (int64_t d = 0; d < degree; ++d) w[d * H + k] *= inv;
    }
  }
  for (int64_t k = 0; k < H; ++k) {
    const EdgeRows<T> rows{h + k * F, p.col + begin, HF, degree};
    weighted_rows<T, false>(rows, degree, w + k, H, F, out + k * F, nullptr, nullptr);
  }
}

// Rows [first, last) of the CSR (the forward): edge ranges and gathered indices in bounds
// (common/csr_check.h).
inline void check_csr_rows(const char* kernel, const int64_t* rowptr, const int64_t* col,
                           int64_t num_edges, int64_t num_cols, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows(kernel, "rowptr", rowptr, first, last, num_edges);
  if (col) check_indices(kernel, "col", col, edges.begin, edges.end, num_cols);
}

template <typename T>
void forward(const GatParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  const auto check = [&](int64_t first, int64_t last) {
    check_csr_rows("gat_aggregate", p.rowptr, p.col, p.num_edges, p.num_cols, first, last);
  };
  for_each_row(p.rowptr, p.num_rows, check, [&](int64_t i) { forward_row<T>(p, drop, i); });
}

template <typename T, int kHeads>
void backward_passes(const GatBackwardParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  // The transpose's indices are checked per column and the CSC slots per row, inside the
  // passes (gat_cpu_backward.h), not per chunk.
  const auto no_edges_read = [](int64_t, int64_t) {};
  // Each pass reads what the one before wrote (delta, terms and the feature-major rows of
  // grad_out, then edge_grad). Uninitialised: every element is written before it is read.
  const int64_t width = kHeadsAtOnce<T, kHeads> ? feature_major_width<T>(p.heads, p.features) : 0;
  const std::unique_ptr<T[]> terms(new T[p.num_rows * 3 * p.heads]);  // see backward_delta_row
  const std::unique_ptr<T[]> rows_fm(new T[p.num_rows * width]);
  for_each_row(p.rowptr, p.num_rows, no_edges_read,
               [&](int64_t i) { backward_delta_row<T, kHeads>(p, terms.get(), rows_fm.get(), i); });
  for_each_row(p.colptr, p.num_cols, no_edges_read,
               [&](int64_t j) { backward_col<T, kHeads>(p, drop, terms.get(), rows_fm.get(), j); });
  for_each_row(p.rowptr, p.num_rows, no_edges_read,
               [&](int64_t i) { backward_dst_row<T, kHeads>(p, i); });
}

// The head counts GAT layers use get passes compiled for them (see gat_cpu_backward.h).
template <typename T>
void backward(const GatBackwardParams& p) {
  switch (p.heads) {
    case 1:
      return backward_passes<T, 1>(p);
    case 2:
      return backward_passes<T, 2>(p);
    case 4:
      return backward_passes<T, 4>(p);
    case 8:
      return backward_passes<T, 8>(p);
    default:
      return backward_passes<T, 0>(p);
  }
}

}  // namespace

void gat_forward(const GatParams& p) {
  if (p.dtype == DType::kFloat32) {
    forward<float>(p);
  } else {
    forward<double>(p);
  }
}

void gat_backward(const GatBackwardParams& p) {
  if (p.dtype == DType::kFloat32) {
    backward<float>(p);
  } else {
    backward<double>(p);
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
