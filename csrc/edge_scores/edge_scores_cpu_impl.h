// CPU (OpenMP) fused bilinear edge scores and their backward (edge_scores.h), compiled once per
// instruction set: edge_scores_cpu.cpp includes this file for the baseline ISA and
// edge_scores_cpu_avx2.cpp for AVX2+FMA, each with GALFAST_CPU_ISA naming its namespace.
//
// Layout: the edges are taken in chunks of kEdgeScoresChunk. A chunk's rows u_b and v_b are
// copied into per-thread buffers padded with zeros to NV whole vectors (NV = dim / lanes rounded
// up, a template parameter from 1 to 8), as are the bases' rows (and, for the backward, their
// columns), so every per-edge product runs on whole vectors with no tail. A register tile holds
// one padded row per edge for a group of 4, 2 or 1 edges (by NV): each basis row loaded from L1
// feeds one fused multiply-add per edge of the group.
//
// edge_scores thread mapping: the chunks are spread over the threads (static schedule); a thread
// gathers, scores and mixes its chunks' edges and writes their columns of out (and rows of
// projected, the padded rows u_b^T bases[s] the backward reads instead of recomputing them).
// edge_scores_backward thread mapping, one parallel region in two phases:
//   1. the chunks are spread over the threads; per edge a thread writes du and dv (padded rows
//      of two [num_edges, NV * lanes] buffers) and adds the edge into its chunk's partial sums of
//      grad_bases and grad_coefficients (in edge order);
//   2. after the barrier, each thread owns a contiguous range of grad_z's rows (zeroing them,
//      then scanning all edges in order and adding du to row src[b] and dv to row dst[b] where
//      they land in its range) and a range of grad_bases' rows (adding the chunks' partial sums
//      in chunk order); thread 0 also sums grad_coefficients' partials in chunk order.
// Neither phase's results depend on which thread ran what, so all outputs are bitwise the same
// for any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including edge_scores_cpu_impl.h"
#endif

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/lane_sums.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/scratch.h"
#include "edge_scores/edge_scores.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

template <typename T, int NV>
struct Tile {
  static constexpr int kLanes = kLaneCount<T>;
  static constexpr int kPadded = NV * kLanes;  // a row's length in the padded buffers
  // Edges per register tile: a tile's accumulators plus one basis row stay within 16 registers.
  static constexpr int kGroup = NV <= 3 ? 4 : (NV <= 6 ? 2 : 1);
};

// [S, D, padded]: row i of bases[s] (or, transposed, column i), zero beyond D.
template <typename T>
std::vector<T> padded_bases(const T* bases, int64_t num_bases, int64_t dim, int padded,
                            bool transpose) {
  std::vector<T> out(static_cast<size_t>(num_bases * dim * padded), T(0));
  for (int64_t s = 0; s < num_bases; ++s) {
    const T* basis = bases + s * dim * dim;
    for (int64_t i = 0; i < dim; ++i) {
      T* row = out.data() + (s * dim + i) * padded;
      for (int64_t j = 0; j < dim; ++j)
        row[j] = transpose ? basis[j * dim + i] : basis[i * dim + j];
    }
  }
  return out;
}

// rows[c] = z[ids[first + c]] padded with zeros to NV vectors, for c < count: NV vector loads,
// the last one masked, where the tensor extends that far past the row (all rows but the last
// few); element by element otherwise. (Copies of 20 floats by memcpy, or a zeroing loop, which
// GCC turns into rep stos, cost more than the row's products.)
template <typename T, int NV, typename I>
void gather_ids(const I* ids, const char* which, const T* z, int64_t num_nodes, int64_t dim,
                int64_t first, int64_t count, T* rows) {
  constexpr int kLanes = Tile<T, NV>::kLanes, kPadded = Tile<T, NV>::kPadded;
  using Mask = typename LaneVecOf<T>::mask;
  Mask keep;  // the lanes of the last vector that hold row elements
  for (int l = 0; l < kLanes; ++l) keep[l] = l < dim - (NV - 1) * kLanes ? -1 : 0;
  for (int64_t c = 0; c < count; ++c) {
    if (c + kPrefetchEdges < count) {  // the rows are random reads: most miss L1 and L2
      const uint64_t ahead = static_cast<uint64_t>(ids[first + c + kPrefetchEdges]);
      if (ahead < static_cast<uint64_t>(num_nodes)) {
        prefetch_span(z + static_cast<int64_t>(ahead) * dim, dim);
      }
    }
    const int64_t n = static_cast<int64_t>(ids[first + c]);
    if (static_cast<uint64_t>(n) >= static_cast<uint64_t>(num_nodes)) {
      throw_bad_edge_id(which, first + c, n, num_nodes);
    }
    const T* from = z + n * dim;
    T* to = rows + c * kPadded;
    if (n * dim + kPadded <= num_nodes * dim) {
      LaneVec<T> x;
      for (int k = 0; k + 1 < NV; ++k) {
        lane_load(x, from + k * kLanes);
        lane_store(to + k * kLanes, x);
      }
      lane_load(x, from + (NV - 1) * kLanes);
      x = reinterpret_cast<LaneVec<T>>(reinterpret_cast<Mask>(x) & keep);
      lane_store(to + (NV - 1) * kLanes, x);
    } else {
      for (int64_t j = 0; j < dim; ++j) to[j] = from[j];
      for (int64_t j = dim; j < kPadded; ++j) to[j] = T(0);
    }
  }
}

// Copies the rows u_b, v_b of edges [first, first + count) into the padded buffers u, v,
// checking each id.
template <typename T, int NV>
void gather_chunk(const EdgeScoresParams& p, int64_t first, int64_t count, T* u, T* v) {
  const T* z = static_cast<const T*>(p.z);
  if (p.int32_ids) {
    gather_ids<T, NV>(static_cast<const int32_t*>(p.src), "src", z, p.num_nodes, p.dim, first,
                      count, u);
    gather_ids<T, NV>(static_cast<const int32_t*>(p.dst), "dst", z, p.num_nodes, p.dim, first,
                      count, v);
  } else {
    gather_ids<T, NV>(static_cast<const int64_t*>(p.src), "src", z, p.num_nodes, p.dim, first,
                      count, u);
    gather_ids<T, NV>(static_cast<const int64_t*>(p.dst), "dst", z, p.num_nodes, p.dim, first,
                      count, v);
  }
}

// acc[e] += sum over i < dim of (scale[e * scale_stride] * x[e][i]) * m[i], for the EB padded
// rows x[e] (stride kPadded) and the padded rows m[i] of a matrix; unscaled when kScaled is
// false. The row-vector-times-matrix product of EB edges at once, i in increasing order.
template <typename T, int NV, int EB, bool kScaled>
[[gnu::always_inline]] inline void rows_times(LaneVec<T> (&acc)[EB][NV], const T* x, const T* scale,
                                              int64_t scale_stride, const T* m, int64_t dim) {
  constexpr int kLanes = Tile<T, NV>::kLanes, kPadded = Tile<T, NV>::kPadded;
  for (int64_t i = 0; i < dim; ++i) {
    LaneVec<T> row[NV];
    for (int k = 0; k < NV; ++k) lane_load(row[k], m + i * kPadded + k * kLanes);
    for (int e = 0; e < EB; ++e) {
      const T c = kScaled ? scale[e * scale_stride] * x[e * kPadded + i] : x[e * kPadded + i];
      for (int k = 0; k < NV; ++k) acc[e][k] += c * row[k];
    }
  }
}

// a . b for a register row and a padded row: lane-wise products, then the lanes in order.
template <typename T, int NV>
[[gnu::always_inline]] inline T row_dot(const LaneVec<T> (&a)[NV], const T* b) {
  constexpr int kLanes = Tile<T, NV>::kLanes;
  LaneVec<T> x, sum;
  lane_load(x, b);
  sum = a[0] * x;
  for (int k = 1; k < NV; ++k) {
    lane_load(x, b + k * kLanes);
    sum += a[k] * x;
  }
  T lanes[kLanes];
  lane_store(lanes, sum);
  T total = lanes[0];
  for (int l = 1; l < kLanes; ++l) total += lanes[l];
  return total;
}

// h[e * S + s] = u_e^T bases[s] v_e for the EB edges whose padded rows start at u, v; the
// padded rows u_e^T bases[s] also into projected[e, s] unless it is null.
template <typename T, int NV, int EB>
[[gnu::always_inline]] inline void basis_forms(const T* u, const T* v, const T* rows,
                                               int64_t num_bases, int64_t dim, T* h, T* projected) {
  constexpr int kLanes = Tile<T, NV>::kLanes, kPadded = Tile<T, NV>::kPadded;
  for (int64_t s = 0; s < num_bases; ++s) {
    LaneVec<T> t[EB][NV] = {};
    rows_times<T, NV, EB, false>(t, u, nullptr, 0, rows + s * dim * kPadded, dim);
    for (int e = 0; e < EB; ++e) h[e * num_bases + s] = row_dot<T, NV>(t[e], v + e * kPadded);
    if (projected) {
      for (int e = 0; e < EB; ++e) {
        T* row = projected + (e * num_bases + s) * kPadded;
        for (int k = 0; k < NV; ++k) lane_store(row + k * kLanes, t[e][k]);
      }
    }
  }
}

// out[r * out_stride] = sum over s of coefficients[r, s] * h[s], s in increasing order.
template <typename T>
inline void mix_levels(const T* h, const T* coefficients, int64_t num_bases, int64_t num_levels,
                       T* out, int64_t out_stride) {
  for (int64_t r = 0; r < num_levels; ++r) {
    const T* a = coefficients + r * num_bases;
    T sum = a[0] * h[0];
    for (int64_t s = 1; s < num_bases; ++s) sum += a[s] * h[s];
    out[r * out_stride] = sum;
  }
}

template <typename T, int NV>
void forward_typed(const EdgeScoresParams& p) {
  constexpr int kPadded = Tile<T, NV>::kPadded, kGroup = Tile<T, NV>::kGroup;
  const int64_t num_edges = p.num_edges, num_bases = p.num_bases, dim = p.dim;
  const int64_t num_levels = p.num_levels;
  const T* coefficients = static_cast<const T*>(p.coefficients);
  T* out = static_cast<T*>(p.out);
  T* projected = static_cast<T*>(p.projected);
  const std::vector<T> rows =
      padded_bases(static_cast<const T*>(p.bases), num_bases, dim, kPadded, false);
  const int threads = edge_scores_threads(p);
  const int64_t per_thread = kEdgeScoresChunk * (2 * kPadded + num_bases);
  std::vector<T> fallback;
  T* scratch = scratch_memory(static_cast<size_t>(threads * per_thread), fallback);
  const int64_t num_chunks = (num_edges + kEdgeScoresChunk - 1) / kEdgeScoresChunk;
  ParallelErrors errors;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    T* u = scratch + t * per_thread;
    T* v = u + kEdgeScoresChunk * kPadded;
    T* h = v + kEdgeScoresChunk * kPadded;
#pragma omp for schedule(static)
    for (int64_t k = 0; k < num_chunks; ++k) {
      if (errors.failed()) continue;
      try {
        const int64_t first = k * kEdgeScoresChunk;
        const int64_t count = std::min(kEdgeScoresChunk, num_edges - first);
        gather_chunk<T, NV>(p, first, count, u, v);
        int64_t c = 0;
        auto projected_rows = [&](int64_t c) {
          return projected ? projected + (first + c) * num_bases * kPadded : nullptr;
        };
        for (; c + kGroup <= count; c += kGroup) {
          basis_forms<T, NV, kGroup>(u + c * kPadded, v + c * kPadded, rows.data(), num_bases, dim,
                                     h + c * num_bases, projected_rows(c));
        }
        for (; c < count; ++c) {
          basis_forms<T, NV, 1>(u + c * kPadded, v + c * kPadded, rows.data(), num_bases, dim,
                                h + c * num_bases, projected_rows(c));
        }
        for (c = 0; c < count; ++c) {
          mix_levels(h + c * num_bases, coefficients, num_bases, num_levels, out + first + c,
                     num_edges);
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow();
}

// The backward of EB edges (padded rows at u, v; their forward's projected rows u^T bases[s]
// at projected; dh and h rows of S at dh, h): writes h, the padded du and dv rows, and adds the
// edges into the chunk's padded partial of grad_bases.
template <typename T, int NV, int EB>
[[gnu::always_inline]] inline void backward_group(const T* u, const T* v, const T* projected,
                                                  const T* columns, const T* dh, int64_t num_bases,
                                                  int64_t dim, T* h, T* du, T* dv,
                                                  T* partial_bases) {
  constexpr int kLanes = Tile<T, NV>::kLanes, kPadded = Tile<T, NV>::kPadded;
  // h and dv = sum over s of dh_s * (u^T bases[s]): the first term rounded, then multiply-adds.
  for (int64_t s = 0; s < num_bases; ++s) {
    for (int e = 0; e < EB; ++e) {
      LaneVec<T> t[NV];
      const T* row = projected + (e * num_bases + s) * kPadded;
      for (int k = 0; k < NV; ++k) lane_load(t[k], row + k * kLanes);
      h[e * num_bases + s] = row_dot<T, NV>(t, v + e * kPadded);
      const T g = dh[e * num_bases + s];
      T* out = dv + e * kPadded;
      for (int k = 0; k < NV; ++k) {
        LaneVec<T> sum;
        if (s == 0) {
          sum = g * t[k];
        } else {
          lane_load(sum, out + k * kLanes);
          sum += g * t[k];
        }
        lane_store(out + k * kLanes, sum);
      }
    }
  }
  // du = sum over s and j of (dh_s v_j) * column j of bases[s], in one register tile.
  LaneVec<T> acc[EB][NV] = {};
  for (int64_t s = 0; s < num_bases; ++s) {
    rows_times<T, NV, EB, true>(acc, v, dh + s, num_bases, columns + s * dim * kPadded, dim);
  }
  for (int e = 0; e < EB; ++e) {
    for (int k = 0; k < NV; ++k) lane_store(du + e * kPadded + k * kLanes, acc[e][k]);
  }
  // grad_bases[s] row i += (dh_s u_i) v, the edges in order.
  for (int64_t s = 0; s < num_bases; ++s) {
    for (int64_t i = 0; i < dim; ++i) {
      T* row = partial_bases + (s * dim + i) * kPadded;
      LaneVec<T> sum[NV];
      for (int k = 0; k < NV; ++k) lane_load(sum[k], row + k * kLanes);
      for (int e = 0; e < EB; ++e) {
        const T c = dh[e * num_bases + s] * u[e * kPadded + i];
        for (int k = 0; k < NV; ++k) {
          LaneVec<T> x;
          lane_load(x, v + e * kPadded + k * kLanes);
          sum[k] += c * x;
        }
      }
      for (int k = 0; k < NV; ++k) lane_store(row + k * kLanes, sum[k]);
    }
  }
}

// grad_z's rows [first, last): zero, then du_b into row src[b] and dv_b into row dst[b], for b
// in increasing order (src's term first).
template <typename T, typename I>
void scatter_rows(const EdgeScoresParams& p, const T* du, const T* dv, int padded, int64_t first,
                  int64_t last) {
  const I* src = static_cast<const I*>(p.src);
  const I* dst = static_cast<const I*>(p.dst);
  T* grad_z = static_cast<T*>(p.grad_z);
  const int64_t dim = p.dim;
  std::fill(grad_z + first * dim, grad_z + last * dim, T(0));
  const uint64_t span = static_cast<uint64_t>(last - first);
  for (int64_t b = 0; b < p.num_edges; ++b) {
    // One unsigned compare tests first <= n < last (a negative n wraps to a huge offset).
    const uint64_t from = static_cast<uint64_t>(static_cast<int64_t>(src[b]) - first);
    if (from < span) {
      T* row = grad_z + (first + static_cast<int64_t>(from)) * dim;
      const T* add = du + b * padded;
      for (int64_t j = 0; j < dim; ++j) row[j] += add[j];
    }
    const uint64_t to = static_cast<uint64_t>(static_cast<int64_t>(dst[b]) - first);
    if (to < span) {
      T* row = grad_z + (first + static_cast<int64_t>(to)) * dim;
      const T* add = dv + b * padded;
      for (int64_t j = 0; j < dim; ++j) row[j] += add[j];
    }
  }
}

template <typename T, int NV>
void backward_typed(const EdgeScoresParams& p) {
  constexpr int kPadded = Tile<T, NV>::kPadded, kGroup = Tile<T, NV>::kGroup;
  const int64_t num_edges = p.num_edges, num_bases = p.num_bases, dim = p.dim;
  const int64_t num_levels = p.num_levels;
  const T* coefficients = static_cast<const T*>(p.coefficients);
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const T* bases = static_cast<const T*>(p.bases);
  const T* projected = static_cast<const T*>(p.projected);
  const std::vector<T> columns = padded_bases(bases, num_bases, dim, kPadded, true);
  const int threads = edge_scores_threads(p);
  const int64_t per_thread = kEdgeScoresChunk * (2 * kPadded + 2 * num_bases);
  const int64_t num_chunks = (num_edges + kEdgeScoresChunk - 1) / kEdgeScoresChunk;
  const int64_t bases_size = num_bases * dim * kPadded, levels_size = num_levels * num_bases;
  // One block: per-thread chunk buffers, the padded du and dv rows, the chunks' partial sums.
  std::vector<T> fallback;
  T* scratch = scratch_memory(static_cast<size_t>(threads * per_thread + 2 * num_edges * kPadded +
                                                  num_chunks * (bases_size + levels_size)),
                              fallback);
  T* du = scratch + threads * per_thread;
  T* dv = du + num_edges * kPadded;
  T* partial_bases = dv + num_edges * kPadded;
  T* partial_levels = partial_bases + num_chunks * bases_size;
  ParallelErrors errors;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    T* u = scratch + t * per_thread;
    T* v = u + kEdgeScoresChunk * kPadded;
    T* dh = v + kEdgeScoresChunk * kPadded;
    T* h = dh + kEdgeScoresChunk * num_bases;
#pragma omp for schedule(static)
    for (int64_t k = 0; k < num_chunks; ++k) {
      if (errors.failed()) continue;
      try {
        const int64_t first = k * kEdgeScoresChunk;
        const int64_t count = std::min(kEdgeScoresChunk, num_edges - first);
        gather_chunk<T, NV>(p, first, count, u, v);
        // dh[c, s] = sum over r of grad_out[b, r] * coefficients[r, s], r in increasing order.
        for (int64_t c = 0; c < count; ++c) {
          const T* g = grad_out + first + c;  // column b of [num_levels, num_edges]
          for (int64_t s = 0; s < num_bases; ++s) {
            T sum = g[0] * coefficients[s];
            for (int64_t r = 1; r < num_levels; ++r) {
              sum += g[r * num_edges] * coefficients[r * num_bases + s];
            }
            dh[c * num_bases + s] = sum;
          }
        }
        T* bases_sum = partial_bases + k * bases_size;
        std::fill(bases_sum, bases_sum + bases_size, T(0));
        int64_t c = 0;
        for (; c + kGroup <= count; c += kGroup) {
          backward_group<T, NV, kGroup>(
              u + c * kPadded, v + c * kPadded, projected + (first + c) * num_bases * kPadded,
              columns.data(), dh + c * num_bases, num_bases, dim, h + c * num_bases,
              du + (first + c) * kPadded, dv + (first + c) * kPadded, bases_sum);
        }
        for (; c < count; ++c) {
          backward_group<T, NV, 1>(
              u + c * kPadded, v + c * kPadded, projected + (first + c) * num_bases * kPadded,
              columns.data(), dh + c * num_bases, num_bases, dim, h + c * num_bases,
              du + (first + c) * kPadded, dv + (first + c) * kPadded, bases_sum);
        }
        // grad_coefficients' partial: sum over the chunk's edges, in order, of g[r] * h[s].
        T* levels_sum = partial_levels + k * levels_size;
        std::fill(levels_sum, levels_sum + levels_size, T(0));
        for (c = 0; c < count; ++c) {
          const T* g = grad_out + first + c;
          for (int64_t r = 0; r < num_levels; ++r) {
            for (int64_t s = 0; s < num_bases; ++s) {
              levels_sum[r * num_bases + s] += g[r * num_edges] * h[c * num_bases + s];
            }
          }
        }
      } catch (...) {
        errors.capture();
      }
    }
    // The loop's barrier: every chunk's rows and partials are written.
    if (!errors.failed()) {
      int64_t first, last;
      thread_range(p.num_nodes, t, nt, first, last);
      if (p.int32_ids) {
        scatter_rows<T, int32_t>(p, du, dv, kPadded, first, last);
      } else {
        scatter_rows<T, int64_t>(p, du, dv, kPadded, first, last);
      }
      T* grad_bases = static_cast<T*>(p.grad_bases);
      thread_range(num_bases * dim, t, nt, first, last);
      for (int64_t row = first; row < last; ++row) {
        T* out = grad_bases + row * dim;
        std::fill(out, out + dim, T(0));
        for (int64_t k = 0; k < num_chunks; ++k) {
          const T* add = partial_bases + k * bases_size + row * kPadded;
          for (int64_t j = 0; j < dim; ++j) out[j] += add[j];
        }
      }
      if (t == 0) {
        T* grad_coefficients = static_cast<T*>(p.grad_coefficients);
        std::fill(grad_coefficients, grad_coefficients + levels_size, T(0));
        for (int64_t k = 0; k < num_chunks; ++k) {
          const T* add = partial_levels + k * levels_size;
          for (int64_t x = 0; x < levels_size; ++x) grad_coefficients[x] += add[x];
        }
      }
    }
  }
  errors.rethrow();
}

// Calls fn(std::integral_constant<int, NV>) for the padded vectors per row of `dim` elements.
template <typename T, typename Fn>
void with_vectors(int64_t dim, Fn&& fn) {
  switch ((dim + kLaneCount<T> - 1) / kLaneCount<T>) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    case 4:
      return fn(std::integral_constant<int, 4>{});
    case 5:
      return fn(std::integral_constant<int, 5>{});
    case 6:
      return fn(std::integral_constant<int, 6>{});
    case 7:
      return fn(std::integral_constant<int, 7>{});
    case 8:
      return fn(std::integral_constant<int, 8>{});
    default:
      throw std::invalid_argument("bilinear_edge_scores: dim " + std::to_string(dim) +
                                  " is beyond the CPU kernels' " +
                                  std::to_string(8 * kLaneCount<T>));
  }
}

}  // namespace

void edge_scores(const EdgeScoresParams& p) {
  dispatch_dtype(p.dtype, "bilinear_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    with_vectors<T>(p.dim, [&](auto nv) { forward_typed<T, decltype(nv)::value>(p); });
  });
}

void edge_scores_backward(const EdgeScoresParams& p) {
  dispatch_dtype(p.dtype, "bilinear_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    with_vectors<T>(p.dim, [&](auto nv) { backward_typed<T, decltype(nv)::value>(p); });
  });
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
