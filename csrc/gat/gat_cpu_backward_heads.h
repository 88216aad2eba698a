// The CPU GAT backward's column pass with all heads of an edge at once (gat_cpu_backward.h,
// for 2, 4 and 8 heads). The per-head pass walks a column's edges once per head, and with few
// features per head (8 x 3, 8 x 8) its per-(edge, head) overhead (index, weight, prefetch,
// a dot folded from lane partials) outweighed the feature work. Here grad_out is read as
// feature-major rows, [features, heads] per row (element f * H + k, written by the delta pass
// and padded with zeros to whole vectors), so that every lane of a vector keeps one head for
// the whole row: lane l of vector c holds head (c * L + l) mod H (H divides L or L divides H,
// L = lanes per vector). An edge then costs a few vertical FMAs per vector: its weights
// broadcast per head, the products with h[j] (also feature-major) added per lane into one
// partial vector per L heads, and no horizontal sum at all when H >= L.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gat_cpu_backward_heads.h"
#endif

#include <algorithm>
#include <cstdint>

#include "common/lane_sums.h"
#include "common/prefetch.h"
#include "gat/gat.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Whether the column pass takes all heads of an edge at once for this head count.
template <typename T, int kHeads>
constexpr bool kHeadsAtOnce =
    kHeads >= 2 && (kHeads % kLaneCount<T> == 0 || kLaneCount<T> % kHeads == 0);

// Vectors that hold one value per head, lane-aligned as in a feature-major row: 1 when the
// heads fit a vector (repeated), H / L otherwise.
template <typename T, int kHeads>
constexpr int kHeadVectors = kHeads > kLaneCount<T> ? kHeads / kLaneCount<T> : 1;

// Elements of one feature-major row: H * F rounded up to whole vectors.
template <typename T>
int64_t feature_major_width(int64_t heads, int64_t features) {
  constexpr int64_t kLanes = kLaneCount<T>;
  return (heads * features + kLanes - 1) / kLanes * kLanes;
}

// dst[f * H + k] = src[k * F + f], zeros up to `width`.
template <typename T, int kHeads>
void to_feature_major(const T* __restrict src, int64_t F, int64_t width, T* __restrict dst) {
  for (int64_t f = 0; f < F; ++f) {
    for (int k = 0; k < kHeads; ++k) dst[f * kHeads + k] = src[k * F + f];
  }
  std::fill(dst + kHeads * F, dst + width, T(0));
}

template <typename T, int kHeads>
void from_feature_major(const T* __restrict src, int64_t F, T* __restrict dst) {
  for (int k = 0; k < kHeads; ++k) {
    for (int64_t f = 0; f < F; ++f) dst[k * F + f] = src[f * kHeads + k];
  }
}

// v[m] lane l = values[(m * L + l) mod H]: one value per head, as the lanes of a row's vectors
// hold heads (built element by element: broadcasts, no read past the H values).
template <typename T, int kHeads>
[[gnu::always_inline]] inline void head_vectors(const T* __restrict values,
                                                LaneVec<T> (&v)[kHeadVectors<T, kHeads>]) {
  constexpr int kLanes = kLaneCount<T>;
  for (int m = 0; m < kHeadVectors<T, kHeads>; ++m) {
    for (int l = 0; l < kLanes; ++l) v[m][l] = values[(m * kLanes + l) % kHeads];
  }
}

// One tile of kVecs vectors (starting at vector v0, a multiple of kHeadVectors) of a column's
// feature-major rows, walked along its edges: grad[tile] = sum over edges of weight * row, and
// per edge the products row * hj added per lane into parts[d] (kHeadVectors vectors; added to
// what earlier tiles left there unless kFirst). The products of one edge are summed as a
// tree, the same for every edge, thread count and call.
template <typename T, int kHeads, int kVecs, bool kFirst>
void heads_tile_pass(const T* __restrict rows, const int64_t* __restrict rows_of, int64_t degree,
                     int64_t ahead, int64_t width, int64_t v0, const T* __restrict weight,
                     const T* __restrict hj, T* __restrict grad, T* __restrict parts) {
  constexpr int kLanes = kLaneCount<T>, kPer = kHeadVectors<T, kHeads>;
  static_assert(8 % kPer == 0, "tiles start at a multiple of kHeadVectors");
  LaneVec<T> acc[kVecs] = {}, hv[kVecs];
  for (int c = 0; c < kVecs; ++c) lane_load(hv[c], hj + (v0 + c) * kLanes);
  const int64_t offset = v0 * kLanes;
  for (int64_t d = 0; d < degree; ++d) {
    if (d + kPrefetchEdges < ahead) {
      prefetch_span(rows + rows_of[d + kPrefetchEdges] * width + offset, kVecs * kLanes);
    }
    const T* __restrict r = rows + rows_of[d] * width + offset;
    LaneVec<T> w[kPer];
    head_vectors<T, kHeads>(weight + d * kHeads, w);
    LaneVec<T> x[kVecs], prod[kVecs];
    for (int c = 0; c < kVecs; ++c) {
      lane_load(x[c], r + c * kLanes);
      acc[c] += w[c % kPer] * x[c];
      prod[c] = x[c] * hv[c];
    }
    // Vectors c and c + s (same heads: s is a multiple of kPer) pairwise, then pairs of pairs.
    for (int s = kPer; s < kVecs; s *= 2) {
      for (int c = 0; c + s < kVecs; ++c) {
        if (c % (2 * s) < kPer) prod[c] += prod[c + s];
      }
    }
    T* __restrict part = parts + d * kPer * kLanes;
    for (int m = 0; m < kPer && m < kVecs; ++m) {
      if constexpr (!kFirst) {
        LaneVec<T> old;
        lane_load(old, part + m * kLanes);
        prod[m] += old;
      }
      lane_store(part + m * kLanes, prod[m]);
    }
  }
  for (int c = 0; c < kVecs; ++c) lane_store(grad + (v0 + c) * kLanes, acc[c]);
}

// All vectors of the feature-major rows, in tiles of 8 vectors (the accumulators and h[j]'s
// tile in registers) and one last tile of the rest.
template <typename T, int kHeads>
void heads_feature_pass(const T* rows, const int64_t* rows_of, int64_t degree, int64_t ahead,
                        int64_t width, const T* weight, const T* hj, T* grad, T* parts) {
  const int64_t vectors = width / kLaneCount<T>;
  const auto tile = [&](int64_t v0, auto vecs) {
    constexpr int kVecs = decltype(vecs)::value;
    if (v0 == 0) {
      heads_tile_pass<T, kHeads, kVecs, true>(rows, rows_of, degree, ahead, width, v0, weight, hj,
                                              grad, parts);
    } else {
      heads_tile_pass<T, kHeads, kVecs, false>(rows, rows_of, degree, ahead, width, v0, weight, hj,
                                               grad, parts);
    }
  };
  int64_t v0 = 0;
  for (; v0 + 8 <= vectors; v0 += 8) tile(v0, std::integral_constant<int, 8>());
  switch (vectors - v0) {
    case 7:
      return tile(v0, std::integral_constant<int, 7>());
    case 6:
      return tile(v0, std::integral_constant<int, 6>());
    case 5:
      return tile(v0, std::integral_constant<int, 5>());
    case 4:
      return tile(v0, std::integral_constant<int, 4>());
    case 3:
      return tile(v0, std::integral_constant<int, 3>());
    case 2:
      return tile(v0, std::integral_constant<int, 2>());
    case 1:
      return tile(v0, std::integral_constant<int, 1>());
  }
}

// dots[d * H + k] = the lanes of parts[d] that hold head k, summed (lane order); when the heads
// fill whole vectors (H >= L) each lane is one head and parts already is dots.
template <typename T, int kHeads>
const T* head_dots(const T* __restrict parts, int64_t degree, T* __restrict dots) {
  constexpr int kLanes = kLaneCount<T>;
  if constexpr (kHeads >= kLanes) {
    return parts;
  } else {
    for (int64_t d = 0; d < degree; ++d) {
      for (int k = 0; k < kHeads; ++k) {
        T sum = parts[d * kLanes + k];
        for (int r = 1; r < kLanes / kHeads; ++r) sum += parts[d * kLanes + r * kHeads + k];
        dots[d * kHeads + k] = sum;
      }
    }
    return dots;
  }
}

}  // namespace
}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
