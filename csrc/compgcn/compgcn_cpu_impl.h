// CPU (OpenMP) CompGCN kernels, compiled once per instruction set: compgcn_cpu.cpp includes this
// file for the baseline ISA and compgcn_cpu_avx2.cpp for AVX2+FMA, each with GALFAST_CPU_ISA
// naming its namespace.
//
// Aggregation thread mapping: rows are cut into edge-balanced chunks (for_each_row) handed out
// dynamically; one thread reduces a whole row. The features are processed in register tiles
// (as the plain aggregation): the tile's accumulators stay in registers while the row's edges
// stream by, each edge gathering its source's x tile and its relation's rel tile, composing and
// scaling them in registers; the x rows of edges kPrefetchEdges ahead are prefetched.
// Relation-gradient thread mapping: one thread per chunk of a relation's edges (at most a fixed
// number of edges, cut in Python), summing into the chunk's own partial row; then one thread
// per relation sums its chunks' partials in order.
// Every output element is written by one thread in a fixed order, so the results are bitwise
// identical for any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including compgcn_cpu_impl.h"
#endif

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/tail_tile.h"
#include "compgcn/compgcn.h"
#include "compgcn/compgcn_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

template <Composition kOp>
using OpTag = std::integral_constant<Composition, kOp>;

// Calls fn(OpTag<op>()) for a runtime composition.
template <typename Fn>
void dispatch_op(Composition op, Fn&& fn) {
  switch (op) {
    case Composition::kSub:
      return fn(OpTag<Composition::kSub>());
    case Composition::kMult:
      return fn(OpTag<Composition::kMult>());
    case Composition::kCorr:
      return fn(OpTag<Composition::kCorr>());
    case Composition::kSource:
      return fn(OpTag<Composition::kSource>());
  }
}

// Accumulates w * phi(a[0 : width], b[0 : width]) into acc; pairs for kCorr (width even).
template <Composition kOp, typename T, typename Width>
[[gnu::always_inline]] inline void compose_into(T w, const T* __restrict a, const T* __restrict b,
                                                Width width, T* __restrict acc) {
  if constexpr (kOp == Composition::kCorr) {
    for (int64_t k = 0; k < width; k += 2) {
      conj_mul_add(w, a[k], a[k + 1], b[k], b[k + 1], acc[k], acc[k + 1]);
    }
  } else if constexpr (kOp == Composition::kSource) {
    for (int64_t k = 0; k < width; ++k) acc[k] += w * a[k];
  } else {
    for (int64_t k = 0; k < width; ++k) acc[k] += w * compose<kOp>(a[k], b[k]);
  }
}

// Row r's features [f0, f0 + width) summed over its edges, accumulated in acc (registers when
// width is a compile-time tile) and stored to out.
template <Composition kOp, typename T, typename Width>
[[gnu::always_inline]] inline void row_span(const CompgcnParams& p, int64_t r, int64_t f0,
                                            Width width, T* __restrict acc) {
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict rel = static_cast<const T*>(p.rel);
  const int64_t F = p.num_features, begin = p.rowptr[r], end = p.rowptr[r + 1];
  for (int64_t k = 0; k < width; ++k) acc[k] = T(0);
  for (int64_t e = begin; e < end; ++e) {
    if (e + kPrefetchEdges < end) prefetch_span(x + p.col[e + kPrefetchEdges] * F + f0, width);
    const int64_t c = p.col[e];
    const T w = compgcn_factor<T, T>(p.row_scale, p.col_scale, p.weight, r, c, e);
    const T* __restrict b = nullptr;
    if constexpr (kOp != Composition::kSource) b = rel + p.edge_type[e] * F + f0;
    compose_into<kOp>(w, x + c * F + f0, b, width, acc);
  }
  T* __restrict out = static_cast<T*>(p.out) + r * F + f0;
  for (int64_t k = 0; k < width; ++k) out[k] = acc[k];
}

template <Composition kOp, typename T, int kTile>
void row_tile(const CompgcnParams& p, int64_t r, int64_t f0) {
  T acc[kTile];
  row_span<kOp>(p, r, f0, std::integral_constant<int64_t, kTile>(), acc);
}

template <Composition kOp, typename T>
void aggregate_row(const CompgcnParams& p, int64_t r) {
  // Register tiles of 256 and 128 bytes, the rest's multiple of 4 elements as one more tile
  // (tail_tile), then 1-3 left (0 or 2 for kCorr, whose F is even: every tile width is even).
  constexpr int kWide = static_cast<int>(256 / sizeof(T));
  const int64_t F = p.num_features;
  int64_t f0 = 0;
  for (; f0 + kWide <= F; f0 += kWide) row_tile<kOp, T, kWide>(p, r, f0);
  if (f0 + kWide / 2 <= F) row_tile<kOp, T, kWide / 2>(p, r, f0), f0 += kWide / 2;
  f0 += tail_tile(F - f0, [&](auto width) { row_tile<kOp, T, decltype(width)::value>(p, r, f0); });
  if (f0 < F) {
    T acc[4];
    row_span<kOp>(p, r, f0, F - f0, acc);
  }
}

// Chunk k of the relation-grouped edges: partial[k] = sum_s w_e * psi(g[row(e)], x[col(e)]).
template <Composition kOp, typename T>
void chunk_partial(const RelGradParams& p, int64_t k) {
  const int64_t F = p.num_features;
  const T* __restrict go = static_cast<const T*>(p.grad_out);
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict acc = static_cast<T*>(p.partial) + k * F;
  std::fill(acc, acc + F, T(0));
  const int64_t end = p.chunkptr[k + 1];
  for (int64_t e = p.chunkptr[k]; e < end; ++e) {
    if (e + kPrefetchEdges < end) {
      prefetch_span(go + p.row[e + kPrefetchEdges] * F, F);
      if constexpr (kOp != Composition::kSub) prefetch_span(x + p.col[e + kPrefetchEdges] * F, F);
    }
    const int64_t r = p.row[e], c = p.col[e];
    const T w = compgcn_factor<T, T>(p.row_scale, p.col_scale, p.weight, r, c, e);
    const T* __restrict g = go + r * F;
    if constexpr (kOp == Composition::kCorr) {
      const T* __restrict a = x + c * F;
      for (int64_t f = 0; f < F; f += 2)
        mul_add(w, g[f], g[f + 1], a[f], a[f + 1], acc[f], acc[f + 1]);
    } else if constexpr (kOp == Composition::kSub) {
      for (int64_t f = 0; f < F; ++f) acc[f] -= w * g[f];
    } else {
      const T* __restrict a = x + c * F;
      for (int64_t f = 0; f < F; ++f) acc[f] += w * rel_term<kOp>(g[f], a[f]);
    }
  }
}

// grad_rel[t] = the sum of relation t's chunk partials, in chunk order (0 for an unused one).
template <typename T>
void relation_total(const RelGradParams& p, int64_t t) {
  const int64_t F = p.num_features;
  const T* __restrict partial = static_cast<const T*>(p.partial);
  T* __restrict out = static_cast<T*>(p.grad_rel) + t * F;
  std::fill(out, out + F, T(0));
  for (int64_t k = p.rel_chunkptr[t]; k < p.rel_chunkptr[t + 1]; ++k) {
    const T* __restrict part = partial + k * F;
    for (int64_t f = 0; f < F; ++f) out[f] += part[f];
  }
}

}  // namespace

void compgcn_aggregate(const CompgcnParams& p) {
  constexpr const char* kName = "compgcn_aggregate";
  const auto check = [&](int64_t first, int64_t last) {
    const EdgeRange edges = checked_rows(kName, "rowptr", p.rowptr, first, last, p.num_edges);
    check_indices(kName, "col", p.col, edges.begin, edges.end, p.num_cols);
    if (p.op != Composition::kSource) {
      check_indices(kName, "edge_type", p.edge_type, edges.begin, edges.end, p.num_rels);
    }
  };
  dispatch_dtype(p.dtype, kName, [&](auto tag) {
    using T = decltype(tag);
    dispatch_op(p.op, [&](auto op) {
      for_each_row(p.rowptr, p.num_rows, check,
                   [&](int64_t r) { aggregate_row<decltype(op)::value, T>(p, r); });
    });
  });
}

void compgcn_rel_grad(const RelGradParams& p) {
  constexpr const char* kName = "compgcn_aggregate (relation gradient)";
  const auto check_chunks = [&](int64_t first, int64_t last) {
    const EdgeRange s = checked_rows(kName, "chunkptr", p.chunkptr, first, last, p.num_edges);
    check_indices(kName, "row", p.row, s.begin, s.end, p.num_rows);
    check_indices(kName, "col", p.col, s.begin, s.end, p.num_cols);
  };
  const auto check_rels = [&](int64_t first, int64_t last) {
    checked_rows(kName, "rel_chunkptr", p.rel_chunkptr, first, last, p.num_chunks);
  };
  dispatch_dtype(p.dtype, kName, [&](auto tag) {
    using T = decltype(tag);
    dispatch_op(p.op, [&](auto op) {
      for_each_row(p.chunkptr, p.num_chunks, check_chunks,
                   [&](int64_t k) { chunk_partial<decltype(op)::value, T>(p, k); });
    });
    for_each_row(p.rel_chunkptr, p.num_rels, check_rels,
                 [&](int64_t t) { relation_total<T>(p, t); });
  });
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
