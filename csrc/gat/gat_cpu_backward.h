// The CPU GAT backward's passes (gat.h), included by gat_cpu_impl.h. Each pass is compiled for
// a head count fixed at compile time (kHeads = 1, 2, 4 or 8, what GAT layers use) or read at
// run time (kHeads = 0): with the count a constant, the per-edge loops over heads unroll and
// sums over a row stay in registers, where a run-time count left a loop with its alias checks
// and a store-to-load chain per edge (measured: the row pass 4x slower at one head).
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gat_cpu_backward.h"
#endif

#include <algorithm>
#include <cstdint>

#include "common/csr_check.h"
#include "common/lane_sums.h"
#include "common/prefetch.h"
#include "common/vec_exp.h"
#include "gat/gat.h"
#include "gat/gat_cpu_backward_heads.h"
#include "gat/gat_cpu_tiles.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// How far ahead (in edges, across row or column ends) the backward prefetches what an edge
// gathers by index: far enough to cover a miss while a few cheap edges are processed.
constexpr int64_t kPrefetchAhead = 32;

// The row pass's look-ahead: its edges cost a few cycles each, and on graphs whose [nnz, heads]
// workspace outgrows the L2 cache each gathers from L3 (MovieLens-size, one head: the
// backward 21.2 -> 19.2 ms with 128 edges against 32).
constexpr int64_t kSlotPrefetchAhead = 128;

template <int kHeads>
int64_t head_count(const GatBackwardParams& p) {
  return kHeads > 0 ? kHeads : p.heads;
}

// out[k] = sum over d < count of v[d * H + k], each in four interleaved partial sums
// (independent add chains; a fixed order, so the same for any thread count). With the head
// count a constant, all heads at once (vector adds along the rows of v).
template <typename T, int kHeads>
void head_sums(const T* __restrict v, int64_t count, int64_t H, T* __restrict out) {
  constexpr int64_t kH = kHeads > 0 ? kHeads : 1;
  for (int64_t k0 = 0; k0 < H; k0 += kH) {  // one pass with kHeads; per head otherwise
    const int64_t width = kHeads > 0 ? kHeads : 1;
    T acc[4][kH] = {};
    int64_t d = 0;
    for (; d + 4 <= count; d += 4) {
      for (int l = 0; l < 4; ++l) {
        for (int64_t k = 0; k < width; ++k) acc[l][k] += v[(d + l) * H + k0 + k];
      }
    }
    for (int64_t k = 0; k < width; ++k) {
      T sum = (acc[0][k] + acc[1][k]) + (acc[2][k] + acc[3][k]);
      for (int64_t e = d; e < count; ++e) sum += v[e * H + k0 + k];
      out[k0 + k] = sum;
    }
  }
}

// delta[i, k] = <grad_out[i, k], out[i, k]>, written also into row i's packed terms: what
// every in-edge of row i reads in the column pass (alpha_dst, lse and delta, [3, heads]), one
// gathered run per edge there instead of three from three arrays. With all heads at once in
// the column pass, grad_out[i] is also copied out as a feature-major row
// (gat_cpu_backward_heads.h).
template <typename T, int kHeads>
void backward_delta_row(const GatBackwardParams& p, T* __restrict terms, T* __restrict rows_fm,
                        int64_t i) {
  const int64_t H = head_count<kHeads>(p), F = p.features;
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
  if constexpr (kHeadsAtOnce<T, kHeads>) {
    const int64_t width = feature_major_width<T>(kHeads, F);
    to_feature_major<T, kHeads>(go, F, width, rows_fm + i * width);
  }
}

// Column j's edge range and the indices its pass gathers by, checked where the pass reads them
// (common/csr_check.h): checked per chunk of columns instead, the [nnz] index arrays were
// streamed from memory twice, ~10% of the backward on the MovieLens-size graph. csc_edge_id
// is read only for the dropout draw and the edge term.
inline EdgeRange checked_column(const GatBackwardParams& p, int64_t j) {
  const char* kernel = "gat_aggregate backward";
  const EdgeRange edges = checked_range(kernel, "colptr", p.colptr, j, p.num_edges);
  check_indices(kernel, "csc_row", p.csc_row, edges.begin, edges.end, p.num_rows);
  if (p.alpha_edge || p.dropout > 0.0) {
    check_indices(kernel, "csc_edge_id", p.csc_edge_id, edges.begin, edges.end, p.num_edges);
  }
  return edges;
}

// Source side, over the transpose: grad_h[j], grad_alpha_src[j], and dz_e parked in
// edge_grad at each edge's CSC slot (one contiguous run per column). Like the forward: every
// out-edge's attention is recomputed into scratch (one vectorised exp sweep); then one walk
// over the edges per tile of features gathers grad_out for both grad_h[j] = sum of keep *
// prob * grad_out[i] and the dots <grad_out[i], h[j]>: for 2, 4 and 8 heads all heads of an
// edge at once on feature-major rows (rows_fm, gat_cpu_backward_heads.h), otherwise head by
// head (weighted_rows, the dots as lane partials summed 8 edges at a time); the logit
// gradients of all heads follow in one vector loop:
//   dz = (keep * prob * dot - prob * delta) * slope.
template <typename T, int kHeads>
void backward_col(const GatBackwardParams& p, const AttentionDropout& drop,
                  const T* __restrict terms, const T* __restrict rows_fm, int64_t j) {
  const int64_t H = head_count<kHeads>(p), F = p.features, HF = H * F;
  constexpr int kLanes = kLaneCount<T>;
  constexpr bool kAtOnce = kHeadsAtOnce<T, kHeads>;
  const T slope = static_cast<T>(p.negative_slope);
  const T* __restrict hj = static_cast<const T*>(p.h) + j * HF;
  const T* __restrict a_src = static_cast<const T*>(p.alpha_src) + j * H;
  const T* __restrict grad_out = static_cast<const T*>(p.grad_out);
  T* __restrict grad_h = static_cast<T*>(p.grad_h) + j * HF;
  T* __restrict grad_src = static_cast<T*>(p.grad_alpha_src) + j * H;
  const EdgeRange edges = checked_column(p, j);
  const int64_t begin = edges.begin, degree = edges.end - begin;
  const int64_t* __restrict rows_of = p.csc_row + begin;
  const int64_t* __restrict edge_of = p.csc_edge_id + begin;
  const int64_t ahead = p.num_edges - begin;  // csc_row entries from rows_of on
  T* __restrict column_grad = static_cast<T*>(p.edge_grad) + begin * H;  // this column's slots
  if (degree == 0) {
    std::fill(grad_h, grad_h + HF, T(0));
    std::fill(grad_src, grad_src + H, T(0));
    return;
  }
  // Per (edge, head), [degree, heads]: prob, weight = keep * prob, the LeakyReLU slope, the
  // row's delta and lse, the dots. The gathers come first, alone; the maths then runs as
  // vector loops over the scratch. Then the per-edge lane partials of the dots and (all heads
  // at once) h[j] and grad_h[j] as feature-major rows.
  const int64_t n = degree * H;
  const int64_t padded = (degree + kLanes - 1) / kLanes * kLanes;
  const int64_t width = kAtOnce ? feature_major_width<T>(H, F) : 0;
  const int64_t parts_size = kAtOnce ? degree * kHeadVectors<T, kHeads> * kLanes : padded * kLanes;
  T* __restrict prob = row_scratch<T>(6 * n + parts_size + 2 * width);
  T* __restrict kept = prob + n;
  T* __restrict slopes = kept + n;  // first the pre-activations
  T* __restrict deltas = slopes + n;
  T* __restrict lses = deltas + n;
  T* __restrict dots = lses + n;
  T* __restrict parts = dots + n;
  T* __restrict hj_fm = parts + parts_size;
  T* __restrict grad_fm = hj_fm + width;
  const T* __restrict a_edge = static_cast<const T*>(p.alpha_edge);
  for (int64_t d = 0; d < degree; ++d) {
    if (d + kPrefetchAhead < ahead)
      prefetch_span(terms + rows_of[d + kPrefetchAhead] * 3 * H, 3 * H);
    const T* __restrict row = terms + rows_of[d] * 3 * H;
#pragma omp simd
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
  const T* __restrict edge_dots = dots;
  if constexpr (kAtOnce) {
    if (width == 0) {
      std::fill(dots, dots + n, T(0));
    } else {
      to_feature_major<T, kHeads>(hj, F, width, hj_fm);
      heads_feature_pass<T, kHeads>(rows_fm, rows_of, degree, ahead, width, weight, hj_fm, grad_fm,
                                    parts);
      from_feature_major<T, kHeads>(grad_fm, F, grad_h);
      edge_dots = head_dots<T, kHeads>(parts, degree, dots);
    }
  } else {
    if (F == 0) std::fill(parts, parts + padded * kLanes, T(0));  // else set by the first tile
    for (int64_t k = 0; k < H; ++k) {
      const EdgeRows<T> rows{grad_out + k * F, rows_of, HF, ahead};
      weighted_rows<T, true>(rows, degree, weight + k, H, F, grad_h + k * F, hj + k * F, parts);
      for (int64_t d0 = 0; d0 < degree; d0 += kLanes) {
        T sums[kLanes];
        lane_sums(parts + d0 * kLanes, sums);
        const int64_t count = std::min<int64_t>(kLanes, degree - d0);
        for (int64_t l = 0; l < count; ++l) dots[(d0 + l) * H + k] = sums[l];
      }
    }
  }
  for (int64_t x = 0; x < n; ++x) {
    column_grad[x] = (weight[x] * edge_dots[x] - prob[x] * deltas[x]) * slopes[x];
  }
  head_sums<T, kHeads>(column_grad, degree, H, grad_src);
}

// grad_alpha_dst[i, k] = sum of the row's dz_e in CSR order, gathered from their CSC slots
// (whole [heads] runs, prefetched ahead across row ends); dz_e is also copied out in CSR order
// when the edge term's gradient is wanted.
template <typename T, int kHeads>
void backward_dst_row(const GatBackwardParams& p, int64_t i) {
  const int64_t H = head_count<kHeads>(p);
  const T* __restrict edge_grad = static_cast<const T*>(p.edge_grad);
  const int64_t* __restrict slot = p.csr_to_csc;
  T* __restrict grad_edge = static_cast<T*>(p.grad_alpha_edge);
  T* __restrict grad_dst = static_cast<T*>(p.grad_alpha_dst) + i * H;
  const char* kernel = "gat_aggregate backward";
  const auto [first, end] = checked_range(kernel, "rowptr", p.rowptr, i, p.num_edges);
  // Each slot is checked as it is read (the sign bits of slot and last - slot ORed together)
  // and clamped into range for the read, the culprit searched for after the row: a separate
  // check loop per row cost more than the row's sums on graphs of a few edges per row.
  const int64_t last = p.num_edges - 1;
  int64_t signs = 0;
  const auto checked_slot = [&](int64_t e) {
    const int64_t s = slot[e];
    signs |= s | (last - s);
    return static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(s), last));
  };
  const auto prefetch_ahead = [&](int64_t e) {
    if (e + kSlotPrefetchAhead < p.num_edges) {
      prefetch_line<false>(edge_grad + slot[e + kSlotPrefetchAhead] * H);
    }
  };
  if constexpr (kHeads > 0) {  // the sums in registers
    T sum[kHeads] = {};
    for (int64_t e = first; e < end; ++e) {
      prefetch_ahead(e);
      const T* __restrict dz = edge_grad + checked_slot(e) * kHeads;
      for (int k = 0; k < kHeads; ++k) sum[k] += dz[k];
    }
    std::copy(sum, sum + kHeads, grad_dst);
  } else {
    std::fill(grad_dst, grad_dst + H, T(0));
    for (int64_t e = first; e < end; ++e) {
      prefetch_ahead(e);
      const T* __restrict dz = edge_grad + checked_slot(e) * H;
      for (int64_t k = 0; k < H; ++k) grad_dst[k] += dz[k];
    }
  }
  if (signs < 0) check_indices(kernel, "csr_to_csc", slot, first, end, p.num_edges);
  if (grad_edge) {
    for (int64_t e = first; e < end; ++e) {
      std::copy(edge_grad + slot[e] * H, edge_grad + (slot[e] + 1) * H, grad_edge + e * H);
    }
  }
}

}  // namespace
}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
