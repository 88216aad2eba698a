// CPU (OpenMP) aggregation kernels, compiled once per instruction set: aggregate_cpu.cpp
// includes this file for the baseline ISA and aggregate_cpu_avx2.cpp for AVX2+FMA, each with
// GALFAST_CPU_ISA naming its namespace.
//
// Thread mapping: rows are cut into edge-balanced chunks (balanced_row_chunks) handed out
// dynamically; one thread reduces a whole row, edge by edge. For sums the features are
// processed in tiles of fixed width whose accumulators stay in vector registers while the
// row's edges stream by, and the next rows of x are prefetched (gathers are the bottleneck).
// Each row's result depends only on its own edges in CSR order, so the output is bitwise
// identical for any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including aggregate_cpu_impl.h"
#endif

#include <algorithm>
#include <stdexcept>
#include <string>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_row.h"
#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/tail_tile.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Sum over row r of w_e * x[c, f0 : f0 + kTile], accumulated in registers. The tile is kept
// as a multiple of 8 elements plus a rest of 4 (tail_tile's widths are multiples of 4): GCC
// vectorises power-of-two-friendly arrays, but a single 20-, 12- or 28-wide array came out as
// scalar code, twice the time per edge of the 16-wide tile (issue 19). Each element still
// sums its edges in CSR order, so the result does not change.
template <typename T, int kTile>
inline void sum_tile(const AggregateParams& p, int64_t r, int64_t f0, T* __restrict out) {
  constexpr int kMain = kTile / 8 * 8, kRest = kTile - kMain;
  const T* __restrict x = static_cast<const T*>(p.x);
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  T acc[kMain > 0 ? kMain : 1] = {};
  T rest[kRest > 0 ? kRest : 1] = {};
  for (int64_t e = begin; e < end; ++e) {
    if (e + kPrefetchEdges < end) prefetch_span(x + p.col[e + kPrefetchEdges] * F + f0, kTile);
    const int64_t c = p.col[e];
    const T w = edge_factor<T, T>(p, r, c, e);
    const T* __restrict xr = x + c * F + f0;
    for (int k = 0; k < kMain; ++k) acc[k] += w * xr[k];
    for (int k = 0; k < kRest; ++k) rest[k] += w * xr[kMain + k];
  }
  for (int k = 0; k < kMain; ++k) out[f0 + k] = acc[k];
  for (int k = 0; k < kRest; ++k) out[f0 + kMain + k] = rest[k];
}

// Features [f0, F) of row r for the modes without a register tile: sum remainders, max, and
// the masked sum of max's backward.
template <typename T>
inline void generic_row(const AggregateParams& p, int64_t r, int64_t f0) {
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict out = static_cast<T*>(p.out) + r * F;
  std::fill(out + f0, out + F, T(0));
  int64_t* __restrict arg = p.mode == AggMode::kMax ? p.arg + r * F : nullptr;
  if (arg) std::fill(arg + f0, arg + F, int64_t(-1));
  for (int64_t e = begin; e < end; ++e) {
    if (e + kPrefetchEdges < end) prefetch_span(x + p.col[e + kPrefetchEdges] * F + f0, F - f0);
    const int64_t c = p.col[e];
    const T w = edge_factor<T, T>(p, r, c, e);
    const T* __restrict xr = x + c * F;
    if (p.mode == AggMode::kMax) {
      const int64_t id = edge_ident(p, e);
      for (int64_t f = f0; f < F; ++f) {
        const T v = w * xr[f];
        if (max_takes(v, out[f], arg[f])) {
          out[f] = v;
          arg[f] = id;
        }
      }
    } else if (p.mode == AggMode::kMaskedSum) {
      const int64_t id = edge_ident(p, e);
      const int64_t* __restrict mask = p.mask_arg + c * F;
      for (int64_t f = f0; f < F; ++f) out[f] += mask[f] == id ? w * xr[f] : T(0);
    } else {
      for (int64_t f = f0; f < F; ++f) out[f] += w * xr[f];
    }
  }
}

// Rows [first, last): their edge ranges and the indices they gather by lie in bounds
// (common/csr_check.h).
inline void check_rows(const AggregateParams& p, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows("aggregate", "rowptr", p.rowptr, first, last, p.num_edges);
  check_indices("aggregate", "col", p.col, edges.begin, edges.end, p.num_cols);
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
void aggregate_row(const AggregateParams& p, int64_t r) {
  if (p.mode != AggMode::kSum) return generic_row<T>(p, r, 0);
  // Register tiles of 256 and 128 bytes, the rest's multiple of 4 elements as one more tile
  // (tail_tile), then a plain loop for the last 1-3.
  constexpr int kWide = static_cast<int>(256 / sizeof(T));
  T* out = static_cast<T*>(p.out) + r * p.num_features;
  const int64_t F = p.num_features;
  int64_t f0 = 0;
  for (; f0 + kWide <= F; f0 += kWide) sum_tile<T, kWide>(p, r, f0, out);
  if (f0 + kWide / 2 <= F) sum_tile<T, kWide / 2>(p, r, f0, out), f0 += kWide / 2;
  f0 += tail_tile(F - f0, [&](auto width) { sum_tile<T, decltype(width)::value>(p, r, f0, out); });
  if (f0 < F) generic_row<T>(p, r, f0);
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
  switch (p.dtype) {
    case DType::kFloat32:
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { aggregate_row<float>(p, r); });
      break;
    case DType::kFloat64:
      for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { aggregate_row<double>(p, r); });
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
