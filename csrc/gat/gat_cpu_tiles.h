// The feature passes of the CPU GAT kernels (gat_cpu_impl.h, gat_cpu_backward.h): one head's
// weighted sum of the rows gathered along a row's (or column's) edges, kept in a register tile
// of features while the edges are walked, and for the backward's column pass also each edge's
// dot product with a fixed vector, as per-lane partial sums (common/lane_sums.h).
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gat_cpu_tiles.h"
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/lane_sums.h"
#include "common/prefetch.h"
#include "common/tail_tile.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Per-thread scratch for one row's terms (grown to the largest row seen).
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
// base + index[d] * stride, i.e. h[col[e], k] (or grad_out[csc_row[s], k]). index[d] exists
// for d < count (count >= the degree: the column pass prefetches the rows of the next columns'
// edges too, so that columns of a few edges do not start with misses).
template <typename T>
struct EdgeRows {
  const T* base;
  const int64_t* index;
  int64_t stride;
  int64_t count;
  const T* at(int64_t d) const { return base + index[d] * stride; }
};

// out[f0 : f0 + kTile] = sum over edges d of w[d * w_stride] * rows.at(d)[f0 : f0 + kTile],
// accumulated in registers; with kDots also parts[d * lanes : (d + 1) * lanes] += the products
// rows.at(d)[f0 + t] * other[f0 + t], folded into one vector of lanes (summed later by
// lane_sums, many edges at once: a per-edge horizontal sum here was a chain of dependent
// shuffles and adds per edge and head); the first tile (f0 = 0) sets parts instead of adding,
// so no one clears them.
template <typename T, int kTile, bool kDots>
void tile_pass(const EdgeRows<T>& rows, int64_t degree, const T* __restrict w, int64_t w_stride,
               int64_t f0, T* __restrict out, const T* __restrict other, T* __restrict parts) {
  // The dots read the tile as kFull whole vectors and, when kTile is not a multiple of the
  // lanes, then either the tile's last kLanes elements (overlapping the previous vector)
  // against a vector of `other` whose overlapped lanes are 0, or (a tile of 4 floats) those 4
  // in the low half; a tile of 1-3 elements (the last features) is summed as scalars.
  constexpr int kLanes = kLaneCount<T>, kFull = kTile / kLanes, kRest = kTile % kLanes;
  constexpr bool kOverlap = kRest > 0 && kFull > 0, kHalf = kRest == 4 && kFull == 0;
  static_assert(kRest == 0 || kOverlap || kHalf || kTile < 4, "tiles: 1-3 or multiples of 4");
  T acc[kTile] = {};
  LaneVec<T> o[kFull + 1] = {};
  const bool first = f0 == 0;
  if constexpr (kDots) {
    for (int c = 0; c < kFull; ++c) lane_load(o[c], other + f0 + c * kLanes);
    if constexpr (kOverlap) {
      for (int l = kLanes - kRest; l < kLanes; ++l) o[kFull][l] = other[f0 + kTile - kLanes + l];
    } else if constexpr (kHalf) {
      lane_load_low_half(o[0], other + f0);
    }
  }
  for (int64_t d = 0; d < degree; ++d) {
    if (d + kPrefetchEdges < rows.count) prefetch_span(rows.at(d + kPrefetchEdges) + f0, kTile);
    const T* __restrict r = rows.at(d) + f0;
    const T wd = w[d * w_stride];
    for (int t = 0; t < kTile; ++t) acc[t] += wd * r[t];
    if constexpr (kDots && kTile < 4) {
      // Added to lane 0 by a whole-vector load and store: lane_sums soon reloads the vector,
      // and a 32-byte load over a pending 4-byte store stalls (store forwarding fails).
      LaneVec<T> s = {};
      if (!first) lane_load(s, parts + d * kLanes);
      for (int t = 0; t < kTile; ++t) s[0] += r[t] * other[f0 + t];
      lane_store(parts + d * kLanes, s);
    } else if constexpr (kDots) {
      LaneVec<T> s = {}, x;
      if (!first) lane_load(s, parts + d * kLanes);
      for (int c = 0; c < kFull; ++c) {
        lane_load(x, r + c * kLanes);
        s += x * o[c];
      }
      if constexpr (kOverlap) {
        lane_load(x, r + kTile - kLanes);
        s += x * o[kFull];
      } else if constexpr (kHalf) {
        lane_load_low_half(x, r);
        s += x * o[0];
      }
      lane_store(parts + d * kLanes, s);
    }
  }
  for (int t = 0; t < kTile; ++t) out[f0 + t] = acc[t];
}

// tile_pass over all F features: register tiles of 32 elements (64 first with the dots: half
// the walks over the edges, each edge's index, weight and partials loaded half as often; the
// backward's column pass on Cora-size 1 x 128 took 10% less), then the tail's multiple of 4
// (4 to 28) as one more tile, so F = 20 takes one pass over the edges rather than a 16 and a
// 4, then the last 1-3 features as a tile of their own. (A per-edge loop over all F features
// would keep the accumulator in memory instead of registers.)
template <typename T, bool kDots>
void weighted_rows(const EdgeRows<T>& rows, int64_t degree, const T* w, int64_t w_stride, int64_t F,
                   T* out, const T* other, T* parts) {
  const auto pass = [&](int64_t f0, auto width) {
    tile_pass<T, decltype(width)::value, kDots>(rows, degree, w, w_stride, f0, out, other, parts);
  };
  int64_t f0 = 0;
  if constexpr (kDots) {
    for (; f0 + 64 <= F; f0 += 64) pass(f0, std::integral_constant<int, 64>());
  }
  for (; f0 + 32 <= F; f0 += 32) pass(f0, std::integral_constant<int, 32>());
  f0 += tail_tile(F - f0, [&](auto width) { pass(f0, width); });
  switch (F - f0) {
    case 3:
      return pass(f0, std::integral_constant<int, 3>());
    case 2:
      return pass(f0, std::integral_constant<int, 2>());
    case 1:
      return pass(f0, std::integral_constant<int, 1>());
  }
}

}  // namespace
}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
