// CPU (OpenMP) aggregation kernels, compiled once per instruction set: aggregate_cpu.cpp
// includes this file for the baseline ISA and aggregate_cpu_avx2.cpp for AVX2+FMA, each with
// GALFAST_CPU_ISA naming its namespace.
//
// Thread mapping: rows are cut into edge-balanced chunks (balanced_row_chunks) handed out
// dynamically; one thread reduces a whole row, edge by edge, and the next rows of x are
// prefetched (gathers are the bottleneck). Sums run in register tiles with several
// accumulator sets (aggregate_sum_cpu.h); max and max's backward here, float32 rows in
// register tiles of 16 features (8 in the baseline build) per pass. Each row's result
// depends only on its own edges in CSR order, so the output is bitwise identical for any
// thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including aggregate_cpu_impl.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_row.h"
#include "aggregate/aggregate_sum_cpu.h"
#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Features [f0, F) of row r for max and for the masked sum of max's backward.
template <typename T>
inline void generic_row(const AggregateParams& p, int64_t r, int64_t f0 = 0) {
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict out = static_cast<T*>(p.out) + r * F;
  std::fill(out + f0, out + F, T(0));
  const bool is_max = p.mode == AggMode::kMax;
  int64_t* __restrict arg = is_max ? p.arg + r * F : nullptr;
  if (is_max) std::fill(arg + f0, arg + F, int64_t(-1));
  for (int64_t e = begin; e < end && f0 < F; ++e) {
    if (e + kPrefetchEdges < end) prefetch_span(x + p.col[e + kPrefetchEdges] * F + f0, F - f0);
    const int64_t c = p.col[e];
    const T w = edge_factor<T, T>(p, r, c, e);
    const T* __restrict xr = x + c * F;
    const int64_t id = edge_ident(p, e);
    if (is_max) {
      // selects, not a branch a feature: a new maximum is a coin toss early in a row
      for (int64_t f = f0; f < F; ++f) {
        const T v = w * xr[f];
        const bool take = max_takes(v, out[f], arg[f]);
        out[f] = take ? v : out[f];
        arg[f] = take ? id : arg[f];
      }
    } else {
      const int64_t* __restrict mask = p.mask_arg + c * F;
      for (int64_t f = f0; f < F; ++f) out[f] += mask[f] == id ? w * xr[f] : T(0);
    }
  }
}

// Max and its backward's masked sum on float32 rows, kMaxTile features at a time: the tile's
// running values (and, for max, their edges' ids) stay in registers across the row's edges and
// are stored once; generic_row keeps them in memory, so each edge reloads what the previous
// one stored. The tile is kMaxVectors vectors of the build's native width (GCC lowers the
// compares and selects of wider vector types lane by lane). Ids are int32: the caller checks
// that num_edges fits. Each lane takes generic_row's steps in its order, so the results are
// bitwise generic_row's, which also takes the features past the last whole tile.
constexpr int kMaxLanes = kRegisterBytes / static_cast<int>(sizeof(float));
constexpr int kMaxVectors = 2;
constexpr int kMaxTile = kMaxLanes * kMaxVectors;
using FloatLanes = float __attribute__((vector_size(kMaxLanes * sizeof(float))));
using IdLanes = int32_t __attribute__((vector_size(kMaxLanes * sizeof(int32_t))));
// Unaligned loads go through may_alias types (common/lane_sums.h says why not memcpy).
using UnalignedFloats =
    float __attribute__((vector_size(sizeof(FloatLanes)), aligned(4), may_alias));
using UnalignedIds = int32_t __attribute__((vector_size(sizeof(IdLanes)), aligned(4), may_alias));

[[gnu::always_inline]] inline FloatLanes load_lanes(const float* from) {
  return *reinterpret_cast<const UnalignedFloats*>(from);
}

// The low halves of kMaxLanes int64 ids, which are the ids themselves where they lie in
// [-1, 2^31) (little-endian CPUs only; the caller checks).
[[gnu::always_inline]] inline IdLanes load_low_halves(const int64_t* from) {
  const IdLanes a = *reinterpret_cast<const UnalignedIds*>(from);
  const IdLanes b = *reinterpret_cast<const UnalignedIds*>(from + kMaxLanes / 2);
#if defined(__AVX__) && defined(__clang__)  // kRegisterBytes' condition: 8 lanes
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
#elif defined(__AVX__)
  return __builtin_shuffle(a, b, IdLanes{0, 2, 4, 6, 8, 10, 12, 14});
#elif defined(__clang__)
  return __builtin_shufflevector(a, b, 0, 2, 4, 6);
#else
  return __builtin_shuffle(a, b, IdLanes{0, 2, 4, 6});
#endif
}

inline void float_max_row(const AggregateParams& p, int64_t r) {
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  const float* __restrict x = static_cast<const float*>(p.x);
  float* __restrict out = static_cast<float*>(p.out) + r * F;
  int64_t* __restrict arg = p.arg + r * F;
  int64_t f0 = 0;
  for (; f0 + kMaxTile <= F && begin < end; f0 += kMaxTile) {
    FloatLanes best[kMaxVectors];
    IdLanes who[kMaxVectors];
    // the first edge sets the tile (max_takes' no-winner-yet term), so the later edges' steps
    // leave it out
    const float w0 = edge_factor<float, float>(p, r, p.col[begin], begin);
    const int32_t id0 = static_cast<int32_t>(edge_ident(p, begin));
#pragma GCC unroll 4
    for (int k = 0; k < kMaxVectors; ++k) {
      best[k] = load_lanes(x + p.col[begin] * F + f0 + k * kMaxLanes) * w0;
      who[k] = IdLanes{} + id0;
    }
    for (int64_t e = begin + 1; e < end; ++e) {
      if (e + kPrefetchEdges < end) prefetch_span(x + p.col[e + kPrefetchEdges] * F + f0, kMaxTile);
      const float w = edge_factor<float, float>(p, r, p.col[e], e);
      const int32_t id = static_cast<int32_t>(edge_ident(p, e));
#pragma GCC unroll 4
      for (int k = 0; k < kMaxVectors; ++k) {
        const FloatLanes v = load_lanes(x + p.col[e] * F + f0 + k * kMaxLanes) * w;
        const IdLanes take = (v > best[k]) | ((v != v) & (best[k] == best[k]));
        best[k] = take ? v : best[k];
        who[k] = take ? id : who[k];
      }
    }
    std::memcpy(out + f0, best, sizeof(best));
    for (int k = 0; k < kMaxTile; ++k) arg[f0 + k] = who[k / kMaxLanes][k % kMaxLanes];
  }
  generic_row<float>(p, r, f0);
}

inline void float_masked_sum_row(const AggregateParams& p, int64_t r) {
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  const float* __restrict x = static_cast<const float*>(p.x);
  float* __restrict out = static_cast<float*>(p.out) + r * F;
  int64_t f0 = 0;
  for (; f0 + kMaxTile <= F; f0 += kMaxTile) {
    FloatLanes sum[kMaxVectors] = {};
    for (int64_t e = begin; e < end; ++e) {
      if (e + kPrefetchEdges < end) {
        const int64_t ahead = p.col[e + kPrefetchEdges] * F + f0;
        prefetch_span(x + ahead, kMaxTile);
        prefetch_span(p.mask_arg + ahead, kMaxTile);
      }
      const int64_t c = p.col[e];
      const float w = edge_factor<float, float>(p, r, c, e);
      const int32_t id = static_cast<int32_t>(edge_ident(p, e));
#pragma GCC unroll 4
      for (int k = 0; k < kMaxVectors; ++k) {
        const FloatLanes v = load_lanes(x + c * F + f0 + k * kMaxLanes) * w;
        const IdLanes mask = load_low_halves(p.mask_arg + c * F + f0 + k * kMaxLanes);
        sum[k] += mask == id ? v : FloatLanes{};
      }
    }
    std::memcpy(out + f0, sum, sizeof(sum));
  }
  generic_row<float>(p, r, f0);
}

// Rows [first, last): their edge ranges and the indices they gather by lie in bounds
// (common/csr_check.h).
inline void check_rows(const AggregateParams& p, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows("aggregate", "rowptr", p.rowptr, first, last, p.num_edges);
  // The sum kernel reads col32 instead of col when it is given (and this build reads it); the
  // same indices, so an error names col.
  if (kReadsCol32 && p.mode == AggMode::kSum && p.col32) {
    check_indices("aggregate", "col", p.col32, edges.begin, edges.end, p.num_cols);
  } else {
    check_indices("aggregate", "col", p.col, edges.begin, edges.end, p.num_cols);
  }
  // edge_id is read only for a weight or an arg (edge_ident); an unread one costs nothing.
  if (p.edge_id && (p.weight || p.mode != AggMode::kSum)) {
    check_indices("aggregate", "edge_id", p.edge_id, edges.begin, edges.end, p.num_edges);
  }
}

inline void check_rows(const EdgeGradParams& p, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows("edge_grad", "rowptr", p.rowptr, first, last, p.num_edges);
  check_indices("edge_grad", "col", p.col, edges.begin, edges.end, p.num_cols);
}

template <typename T>
void edge_grad_row(const EdgeGradParams& p, int64_t r) {
  const int64_t F = p.num_features;
  const T* __restrict go = static_cast<const T*>(p.grad_out) + r * F;
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict gw = static_cast<T*>(p.grad_weight);
  const T rs = p.row_scale ? static_cast<const T*>(p.row_scale)[r] : T(1);
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const int64_t c = p.col[e];
    const T* __restrict xr = x + c * F;
    T dot = T(0);
    if (p.arg) {
      const int64_t* __restrict arg = p.arg + r * F;
      for (int64_t f = 0; f < F; ++f) dot += arg[f] == e ? go[f] * xr[f] : T(0);
    } else {
      for (int64_t f = 0; f < F; ++f) dot += go[f] * xr[f];
    }
    const T cs = p.col_scale ? static_cast<const T*>(p.col_scale)[c] : T(1);
    gw[e] = rs * cs * dot;
  }
}

}  // namespace

void aggregate(const AggregateParams& p) {
  const auto check = [&](int64_t first, int64_t last) { check_rows(p, first, last); };
  const bool sum = p.mode == AggMode::kSum;
  switch (p.dtype) {
    case DType::kFloat32:
      if (sum) return sum_rows<float>(p, check);
      if (p.num_edges <= INT32_MAX && p.mode == AggMode::kMax) {
        return for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { float_max_row(p, r); });
      }
      if (p.num_edges <= INT32_MAX && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
        return for_each_row(p.rowptr, p.num_rows, check,
                            [&](int64_t r) { float_masked_sum_row(p, r); });
      }
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { generic_row<float>(p, r); });
      break;
    case DType::kFloat64:
      if (sum) return sum_rows<double>(p, check);
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { generic_row<double>(p, r); });
      break;
    default:
      throw std::invalid_argument(
          std::string("aggregate on CPU supports float32 and float64, got ") + dtype_name(p.dtype));
  }
}

void edge_grad(const EdgeGradParams& p) {
  const auto check = [&](int64_t first, int64_t last) { check_rows(p, first, last); };
  switch (p.dtype) {
    case DType::kFloat32:
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { edge_grad_row<float>(p, r); });
      break;
    case DType::kFloat64:
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { edge_grad_row<double>(p, r); });
      break;
    default:
      throw std::invalid_argument(
          std::string("edge-weight gradient on CPU supports float32 and float64, got ") +
          dtype_name(p.dtype));
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
