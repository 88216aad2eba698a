// The CPU sum over column tiles (issue 19): for x too big for L1, the rows of a chunk take
// their edges tile by tile, where a tile is a range of columns whose rows of x fit in L1, so
// the row gathers of a tile hit L1 instead of L2 (a 20-float row spans two 64-byte lines, and
// each line from L2 costs about 1 ns). Python builds the tiles once per graph
// (ops.aggregate.column_tiles) and only where they pay.
//
// Thread mapping: rows are cut into edge-balanced chunks handed out dynamically
// (balanced_row_chunks); one thread runs a chunk: for each tile in turn, each row of the chunk
// adds its edges in that tile (sum_row with kAccumulate) to its output row, which starts at 0;
// row_scale multiplies the finished rows. A row's result is its tiles' sums added in tile
// order, each tile's edges in CSR order: it depends on the tiles, never on the chunks or the
// thread count. The order differs from the untiled kernel's, so the sums differ from it in
// rounding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_sum_cpu.h"
#include "common/parallel.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Rows [first, last) of the tiles: each row's tile offsets run from its rowptr entry to the
// next one without going down, so every edge the tiles name is one of the row's, read once.
// One branch-free pass (the tiles are cached from an earlier state of the graph, which an edit
// through .data may have changed since), then an error naming the first bad row.
inline void check_tiles(const AggregateParams& p, int64_t first, int64_t last) {
  const int64_t R = p.num_rows, T = p.num_tiles;
  const int32_t* tp = p.tile_ptr;
  int64_t mismatch = 0, signs = 0;
  for (int64_t r = first; r < last; ++r) {
    mismatch |= (tp[r] ^ p.rowptr[r]) | (tp[T * R + r] ^ p.rowptr[r + 1]);
  }
  for (int64_t t = 1; t <= T; ++t) {
    for (int64_t r = first; r < last; ++r) {
      signs |= int64_t(tp[t * R + r]) - int64_t(tp[(t - 1) * R + r]);
    }
  }
  if (mismatch == 0 && signs >= 0) return;
  for (int64_t r = first; r < last; ++r) {
    bool bad = tp[r] != p.rowptr[r] || tp[T * R + r] != p.rowptr[r + 1];
    for (int64_t t = 1; t <= T; ++t) bad = bad || tp[t * R + r] < tp[(t - 1) * R + r];
    if (bad) {
      throw std::invalid_argument(
          "aggregate: the column tiles of row " + std::to_string(r) +
          " do not cover its edges in rowptr; was a Graph's tensor edited in place (e.g. "
          "through .data)?");
    }
  }
}

// Rows [first, last), tile by tile (see the header comment).
template <typename T, typename Kind>
void sum_chunk_tiled(const AggregateParams& p, const SumRows<T, typename Kind::Index>& s,
                     int64_t first, int64_t last) {
  const int64_t F = p.num_features, R = p.num_rows;
  std::fill(s.out + first * F, s.out + last * F, T(0));
  for (int64_t t = 0; t < p.num_tiles; ++t) {
    const int32_t* __restrict begin = p.tile_ptr + t * R;
    const int32_t* __restrict end = begin + R;
    for (int64_t r = first; r < last; ++r) {
      if (begin[r] < end[r]) sum_row<T, Kind, true>(s, r, begin[r], end[r]);
    }
  }
  if (!s.row_scale) return;
  for (int64_t r = first; r < last; ++r) {
    const T rs = s.row_scale[r];
    T* __restrict out = s.out + r * F;
    for (int64_t f = 0; f < F; ++f) out[f] *= rs;
  }
}

template <typename T, typename Kind, typename CheckChunk>
void sum_rows_tiled(const AggregateParams& p, const SumRows<T, typename Kind::Index>& s,
                    const CheckChunk& check) {
  const int threads = max_threads();
  const std::vector<int64_t> chunks = balanced_row_chunks(p.rowptr, p.num_rows, 16 * threads);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t k = 0; k < num_chunks; ++k) {
    if (errors.failed()) continue;
    try {
      check(chunks[k], chunks[k + 1]);
      check_tiles(p, chunks[k], chunks[k + 1]);
      sum_chunk_tiled<T, Kind>(p, s, chunks[k], chunks[k + 1]);
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
}

}  // namespace
}  // namespace GALFAST_CPU_ISA
}  // namespace galfast

#pragma GCC diagnostic pop
