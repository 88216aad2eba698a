// Runs the CPU sum (sum, mean and gcn) over all rows: folds col_scale into a pre-scaled copy of
// x where that pays, picks the row kernel's variant (index type, edge factor, prefetch) and
// runs it row by row (for_each_row) or, when Python passes column tiles, tile by tile
// (aggregate_sum_tiled_cpu.h). Included by aggregate_cpu_impl.h inside its instruction-set
// namespace.
//
// Thread mapping: that of for_each_row or of sum_rows_tiled; the pre-scaled copy is written by
// a static split of the source rows.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_sum_cpu.h"
#include "aggregate/aggregate_sum_tiled_cpu.h"
#include "common/parallel.h"
#include "common/prefetch.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// An uninitialised array of n T on whole cache lines (as torch aligns x: a 64-byte row then
// spans one line, not two), freed by FreeDeleter.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
T* cache_aligned_array(int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  void* p = std::aligned_alloc(kCacheLine, (bytes + kCacheLine - 1) / kCacheLine * kCacheLine);
  if (!p && bytes > 0) throw std::bad_alloc();
  return static_cast<T*>(p);
}

// Whether pre-scaling x by col_scale (one multiply per source feature) costs less than the
// per-edge gather and multiply it saves.
inline bool fold_pays(const AggregateParams& p) {
  return p.col_scale && p.num_edges >= 2 * p.num_cols;
}

template <typename T, typename Index, typename CheckChunk>
void sum_rows_by(const AggregateParams& p, const Index* col, const CheckChunk& check) {
  SumRows<T, Index> s{p.rowptr,
                      col,
                      p.edge_id,
                      static_cast<const T*>(p.weight),
                      static_cast<const T*>(p.row_scale),
                      static_cast<const T*>(p.col_scale),
                      static_cast<const T*>(p.x),
                      static_cast<T*>(p.out),
                      p.num_features};
  std::unique_ptr<T, FreeDeleter> scaled;
  if (fold_pays(p)) {
    const int64_t F = p.num_features;
    scaled.reset(cache_aligned_array<T>(p.num_cols * F));
    T* __restrict dst = scaled.get();
#pragma omp parallel for schedule(static) num_threads(max_threads())
    for (int64_t c = 0; c < p.num_cols; ++c) {
      for (int64_t k = 0; k < F; ++k) dst[c * F + k] = s.col_scale[c] * s.x[c * F + k];
    }
    s.x = scaled.get();
    s.col_scale = nullptr;
  }
  const bool factor = s.col_scale || s.weight;
  // A column tile's rows of x are in L1: nothing to prefetch.
  const bool prefetch =
      !p.tile_ptr && p.num_cols * p.num_features * int64_t(sizeof(T)) > kPrefetchFrom;
  const auto run = [&](auto kind) {
    using Kind = decltype(kind);
    if (p.tile_ptr) return sum_rows_tiled<T, Kind>(p, s, check);
    for_each_row(p.rowptr, p.num_rows, check,
                 [&](int64_t r) { sum_row<T, Kind>(s, r, p.rowptr[r], p.rowptr[r + 1]); });
  };
  if constexpr (std::is_same_v<Index, int64_t> || std::is_same_v<T, double>) {
    run(SumKind<T, Index, true, true>());  // the generic variant: see kReadsCol32
  } else if (factor) {
    prefetch ? run(SumKind<T, Index, true, true>()) : run(SumKind<T, Index, true, false>());
  } else {
    prefetch ? run(SumKind<T, Index, false, true>()) : run(SumKind<T, Index, false, false>());
  }
}

// Whether this build's sum kernel reads col32 (when given) instead of col. The AVX2 build
// specialises float with the int32 index (what Python passes on CPU) by edge factor and
// prefetch; the rest (int64 index, double) gets one generic variant (a factor of 1 where there
// is none, prefetch), the only one the baseline build (CPUs before AVX2) compiles: each
// variant adds to the build time.
#if defined(__AVX2__)
constexpr bool kReadsCol32 = true;
#else
constexpr bool kReadsCol32 = false;
#endif

template <typename T, typename CheckChunk>
void sum_rows(const AggregateParams& p, const CheckChunk& check) {
  if (kReadsCol32 && p.col32) return sum_rows_by<T>(p, p.col32, check);
  sum_rows_by<T>(p, p.col, check);
}

}  // namespace
}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
