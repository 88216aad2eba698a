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
#include <vector>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/tail_tile.h"
#include "common/vec_exp.h"
#include "gat/gat.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Per-thread scratch for one row's attention terms (grown to the largest row seen).
template <typename T>
T* row_scratch(int64_t size) {
  static thread_local std::vector<T> scratch;
  if (static_cast<int64_t>(scratch.size()) < size) scratch.resize(size);
  return scratch.data();
}

template <typename T>
T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T s = T(0);
#pragma omp simd reduction(+ : s)
  for (int64_t f = 0; f < n; ++f) s += a[f] * b[f];
  return s;
}

// The rows one head gathers along a row's (or column's) edges: edge d reads
// base + index[d] * stride, i.e. h[col[e], k] (or grad_out[csc_row[s], k]).
template <typename T>
struct EdgeRows {
  const T* base;
  const int64_t* index;
  int64_t stride;
  const T* at(int64_t d) const { return base + index[d] * stride; }
};

// out[f0 : f0 + kTile] = sum over edges d of w[d * w_stride] * rows.at(d)[f0 : f0 + kTile],
// accumulated in registers; with kDots also dots[d] += <rows.at(d), other> over the tile.
template <typename T, int kTile, bool kDots>
void tile_pass(const EdgeRows<T>& rows, int64_t degree, const T* __restrict w, int64_t w_stride,
               int64_t f0, T* __restrict out, const T* __restrict other, T* __restrict dots) {
  T acc[kTile] = {};
  T o[kTile] = {};
  if constexpr (kDots) {
    for (int t = 0; t < kTile; ++t) o[t] = other[f0 + t];
  }
  for (int64_t d = 0; d < degree; ++d) {
    if (d + kPrefetchEdges < degree) prefetch_span(rows.at(d + kPrefetchEdges) + f0, kTile);
    const T* __restrict r = rows.at(d) + f0;
    const T wd = w[d * w_stride];
    for (int t = 0; t < kTile; ++t) acc[t] += wd * r[t];
    if constexpr (kDots) {
      // A simd reduction: written as a plain sum it compiles to a chain of kTile dependent
      // scalar adds per edge (float additions may not be reordered otherwise). The order is
      // fixed at compile time, so results stay identical for any thread count.
      T s = T(0);
#pragma omp simd reduction(+ : s)
      for (int t = 0; t < kTile; ++t) s += r[t] * o[t];
      dots[d] += s;
    }
  }
  for (int t = 0; t < kTile; ++t) out[f0 + t] = acc[t];
}

// tile_pass for the features [f0, F) left after the tiles (a run-time width).
template <typename T, bool kDots>
void rest_pass(const EdgeRows<T>& rows, int64_t degree, const T* __restrict w, int64_t w_stride,
               int64_t f0, int64_t F, T* __restrict out, const T* __restrict other,
               T* __restrict dots) {
  std::fill(out + f0, out + F, T(0));
  for (int64_t d = 0; d < degree; ++d) {
    const T* __restrict r = rows.at(d);
    const T wd = w[d * w_stride];
    T s = T(0);
    for (int64_t f = f0; f < F; ++f) {
      out[f] += wd * r[f];
      if constexpr (kDots) s += r[f] * other[f];
    }
    if constexpr (kDots) dots[d] += s;
  }
}

// tile_pass over all F features: register tiles of 32 elements, then the tail's multiple of 4
// (4 to 28) as one more tile, so F = 20 takes one pass over the edges rather than a 16 and a
// 4, then the last 1-3 features. (A per-edge loop over all F features would keep the
// accumulator in memory instead of registers.)
template <typename T, bool kDots>
void weighted_rows(const EdgeRows<T>& rows, int64_t degree, const T* w, int64_t w_stride, int64_t F,
                   T* out, const T* other, T* dots) {
  int64_t f0 = 0;
  for (; f0 + 32 <= F; f0 += 32) {
    tile_pass<T, 32, kDots>(rows, degree, w, w_stride, f0, out, other, dots);
  }
  f0 += tail_tile(F - f0, [&](auto width) {
    tile_pass<T, decltype(width)::value, kDots>(rows, degree, w, w_stride, f0, out, other, dots);
  });
  if (f0 < F) rest_pass<T, kDots>(rows, degree, w, w_stride, f0, F, out, other, dots);
}

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
    const EdgeRows<T> rows{h + k * F, p.col + begin, HF};
    weighted_rows<T, false>(rows, degree, w + k, H, F, out + k * F, nullptr, nullptr);
  }
}

// delta[i, k] = <grad_out[i, k], out[i, k]>, written also into row i's packed terms: what
// every in-edge of row i reads in the column pass (alpha_dst, lse and delta, [3, heads]), one
// gathered run per edge there instead of three from three arrays (each a cache miss on graphs
// whose node arrays outgrow the L2).
template <typename T>
void backward_delta_row(const GatBackwardParams& p, T* __restrict terms, int64_t i) {
  const int64_t H = p.heads, F = p.features;
  const T* __restrict go = static_cast<const T*>(p.grad_out) + i * H * F;
  const T* __restrict out = static_cast<const T*>(p.out) + i * H * F;
  T* __restrict delta = static_cast<T*>(p.delta) + i * H;
  const T* __restrict a_dst = static_cast<const T*>(p.alpha_dst) + i * H;
  const T* __restrict lse = static_cast<const T*>(p.lse) + i * H;
  T* __restrict row_terms = terms + i * 3 * H;
  for (int64_t k = 0; k < H; ++k) {
    delta[k] = dot(go + k * F, out + k * F, F);
    row_terms[k] = a_dst[k];
    row_terms[H + k] = lse[k];
    row_terms[2 * H + k] = delta[k];
  }
}

// Source side, over the transpose: grad_h[j], grad_alpha_src[j], and dz_e parked in
// edge_grad at each edge's CSR position. Like the forward: every out-edge's attention is
// recomputed into scratch (one vectorised exp sweep); weighted_rows then gathers grad_out once
// per tile for both grad_h[j] = sum of keep * prob * grad_out[i] and the dots
// <grad_out[i], h[j]> the logit gradients need.
template <typename T>
void backward_col(const GatBackwardParams& p, const AttentionDropout& drop,
                  const T* __restrict terms, int64_t j) {
  const int64_t H = p.heads, F = p.features, HF = H * F;
  const T slope = static_cast<T>(p.negative_slope);
  const T* __restrict hj = static_cast<const T*>(p.h) + j * HF;
  const T* __restrict a_src = static_cast<const T*>(p.alpha_src) + j * H;
  const T* __restrict grad_out = static_cast<const T*>(p.grad_out);
  T* __restrict grad_h = static_cast<T*>(p.grad_h) + j * HF;
  T* __restrict grad_src = static_cast<T*>(p.grad_alpha_src) + j * H;
  const int64_t begin = p.colptr[j], degree = p.colptr[j + 1] - begin;
  const int64_t* __restrict rows_of = p.csc_row + begin;
  const int64_t* __restrict edge_of = p.csc_edge_id + begin;
  T* __restrict column_grad = static_cast<T*>(p.edge_grad) + begin * H;  // this column's slots
  if (degree == 0) {
    std::fill(grad_h, grad_h + HF, T(0));
    std::fill(grad_src, grad_src + H, T(0));
    return;
  }
  // Per (edge, head): prob, weight = keep * prob, the LeakyReLU slope and the row's delta.
  // The gathers come first, alone; the maths then runs as vector loops over the scratch
  // (computed next to the gathers, the logit and its slope share one unpredictable branch).
  const int64_t n = degree * H;
  T* __restrict prob = row_scratch<T>(5 * n + degree);
  T* __restrict kept = prob + n;
  T* __restrict slopes = kept + n;  // first the pre-activations
  T* __restrict deltas = slopes + n;
  T* __restrict lses = deltas + n;
  T* __restrict dz = lses + n;  // per edge of one head: the dots, then dz
  const T* __restrict a_edge = static_cast<const T*>(p.alpha_edge);
  for (int64_t d = 0; d < degree; ++d) {
    if (d + kPrefetchEdges < degree)
      prefetch_span(terms + rows_of[d + kPrefetchEdges] * 3 * H, 3 * H);
    const T* __restrict row = terms + rows_of[d] * 3 * H;
    for (int64_t k = 0; k < H; ++k) {
      slopes[d * H + k] = a_src[k] + row[k];
      lses[d * H + k] = row[H + k];
      deltas[d * H + k] = row[2 * H + k];
    }
    if (a_edge) {
      for (int64_t k = 0; k < H; ++k) slopes[d * H + k] += a_edge[edge_of[d] * H + k];
    }
  }
  for (int64_t x = 0; x < n; ++x) {
    const T pre = slopes[x];
    prob[x] = leaky_relu(pre, slope) - lses[x];
    slopes[x] = leaky_relu_grad(pre, slope);
  }
  exp_shifted(prob, n, T(0));
  const T* weight = prob;  // keep * prob: prob itself without dropout
  if (drop.active()) {
    for (int64_t d = 0; d < degree; ++d) {
      for (int64_t k = 0; k < H; ++k)
        kept[d * H + k] = prob[d * H + k] * drop.keep<T>(edge_of[d], k);
    }
    weight = kept;
  }
  for (int64_t k = 0; k < H; ++k) {
    std::fill(dz, dz + degree, T(0));
    const EdgeRows<T> rows{grad_out + k * F, rows_of, HF};
    weighted_rows<T, true>(rows, degree, weight + k, H, F, grad_h + k * F, hj + k * F, dz);
    T sum = T(0);
    for (int64_t d = 0; d < degree; ++d) {
      const int64_t dk = d * H + k;
      const T keep = drop.active() ? drop.keep<T>(edge_of[d], k) : T(1);
      dz[d] = logit_grad(EdgeAttention<T>{prob[dk], slopes[dk]}, keep, dz[d], deltas[dk]);
      sum += dz[d];
    }
    grad_src[k] = sum;
    for (int64_t d = 0; d < degree; ++d) column_grad[d * H + k] = dz[d];
  }
}

// grad_alpha_dst[i, k] = sum of the row's dz_e in CSR order, gathered from their CSC slots
// (whole [heads] runs, prefetched ahead); dz_e is also copied out in CSR order when the edge
// term's gradient is wanted.
template <typename T>
void backward_dst_row(const GatBackwardParams& p, int64_t i) {
  const int64_t H = p.heads;
  const T* __restrict edge_grad = static_cast<const T*>(p.edge_grad);
  const int64_t* __restrict slot = p.csr_to_csc;
  T* __restrict grad_edge = static_cast<T*>(p.grad_alpha_edge);
  T* __restrict grad_dst = static_cast<T*>(p.grad_alpha_dst) + i * H;
  std::fill(grad_dst, grad_dst + H, T(0));
  const int64_t end = p.rowptr[i + 1];
  for (int64_t e = p.rowptr[i]; e < end; ++e) {
    if (e + kPrefetchEdges < end) prefetch_line<false>(edge_grad + slot[e + kPrefetchEdges] * H);
    const T* __restrict dz = edge_grad + slot[e] * H;
    for (int64_t k = 0; k < H; ++k) grad_dst[k] += dz[k];
    if (grad_edge) std::copy(dz, dz + H, grad_edge + e * H);
  }
}

// Rows [first, last) of the CSR (forward and the two row passes of the backward) or of the
// CSC (the column pass): edge ranges and gathered indices in bounds (common/csr_check.h).
inline void check_csr_rows(const char* kernel, const int64_t* rowptr, const int64_t* col,
                           int64_t num_edges, int64_t num_cols, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows(kernel, "rowptr", rowptr, first, last, num_edges);
  if (col) check_indices(kernel, "col", col, edges.begin, edges.end, num_cols);
}

inline void check_csc_columns(const GatBackwardParams& p, int64_t first, int64_t last) {
  const char* kernel = "gat_aggregate backward";
  const EdgeRange edges = checked_rows(kernel, "colptr", p.colptr, first, last, p.num_edges);
  check_indices(kernel, "csc_row", p.csc_row, edges.begin, edges.end, p.num_rows);
  check_indices(kernel, "csc_edge_id", p.csc_edge_id, edges.begin, edges.end, p.num_edges);
}

// The row pass reads dz_e at csr_to_csc[e]: those slots must be in bounds too.
inline void check_csc_slots(const GatBackwardParams& p, int64_t first, int64_t last) {
  const char* kernel = "gat_aggregate backward";
  const EdgeRange edges = checked_rows(kernel, "rowptr", p.rowptr, first, last, p.num_edges);
  check_indices(kernel, "csr_to_csc", p.csr_to_csc, edges.begin, edges.end, p.num_edges);
}

template <typename T>
void forward(const GatParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  const auto check = [&](int64_t first, int64_t last) {
    check_csr_rows("gat_aggregate", p.rowptr, p.col, p.num_edges, p.num_cols, first, last);
  };
  for_each_row(p.rowptr, p.num_rows, check, [&](int64_t i) { forward_row<T>(p, drop, i); });
}

template <typename T>
void backward(const GatBackwardParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  const auto no_edges_read = [](int64_t, int64_t) {};
  const auto check_columns = [&](int64_t first, int64_t last) {
    check_csc_columns(p, first, last);
  };
  const auto check_row_slots = [&](int64_t first, int64_t last) {
    check_csc_slots(p, first, last);
  };
  // Each pass reads what the one before wrote (delta, then edge_grad).
  std::vector<T> terms(p.num_rows * 3 * p.heads);  // see backward_delta_row
  for_each_row(p.rowptr, p.num_rows, no_edges_read,
               [&](int64_t i) { backward_delta_row<T>(p, terms.data(), i); });
  for_each_row(p.colptr, p.num_cols, check_columns,
               [&](int64_t j) { backward_col<T>(p, drop, terms.data(), j); });
  for_each_row(p.rowptr, p.num_rows, check_row_slots,
               [&](int64_t i) { backward_dst_row<T>(p, i); });
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
