// The float32 fused bilinear edge scores and their backward (edge_scores.h) with edges in lanes,
// for CPUs with AVX-512F/DQ/VL (edge_scores_avx512.h).
//
// Lane mapping: a block is 16 consecutive edges, edge first + l in lane l of every vector (the
// last block of a call masks off its missing lanes, whose values are zeros and never stored).
// A block's rows are loaded and transposed in registers: vector u[i] holds the 16 edges' i-th
// feature of z[src], v[j] of z[dst]. Every product then runs lane-wise with the basis elements as
// broadcast operands, with no horizontal sums and no padding work:
//   forward   t_s[j] = sum_i u[i] bases[s][i][j] (the projected rows, kept for the backward),
//             h_s = sum_j t_s[j] v[j], out[r] = sum_s coefficients[r][s] h_s;
//   backward  dh_s = sum_r grad_out[r] coefficients[r][s], dv[j] = sum_s dh_s t_s[j],
//             du[i] = sum_s dh_s sum_j bases[s][i][j] v[j],
//             grad_bases[s][i][j] += (dh_s u[i]) v[j] and grad_coefficients[r][s] += grad_out[r]
//             h_s, lane-wise over a chunk's blocks, each accumulator's 16 lanes summed at the
//             chunk's end by one fixed tree.
// out and grad_out are [num_levels, num_edges]: a level's scores of a block are one vector.
// projected is [blocks, num_bases, dim, 16]: block-major, then t_s[j]'s 16 lanes.
//
// Thread mapping: as the AVX2 kernel (edge_scores_cpu_impl.h), with kEdgeScoresLanesChunk-edge
// chunks. The forward spreads the chunks over the threads (static schedule). The backward runs
// one parallel region in two phases: 1. per chunk, a thread writes the edges' du and dv rows
// (edge-major, transposed back from lanes in registers) and the chunk's partial sums of grad_bases
// and grad_coefficients; 2. after the barrier, each thread owns a range of grad_z's rows (scanning
// all edges in order, src's term before dst's) and of grad_bases' rows (adding the chunks'
// partials in chunk order); thread 0 sums grad_coefficients' partials. A single thread instead
// adds each block's du and dv rows to grad_z right away, in that same order. Every result is
// therefore bitwise the same for any thread count.
#include "edge_scores/edge_scores_avx512.h"

#include <atomic>
#include <stdexcept>
#include <string>

namespace galfast {

std::atomic<bool>& edge_scores_simd_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

bool edge_scores_edges_in_lanes(DType dtype, int64_t dim) {
  return edge_scores_simd_allowed().load(std::memory_order_relaxed) &&
         edge_scores_lanes_supported(dtype, dim);
}

}  // namespace galfast

#if !defined(GALFAST_X86_DISPATCH)

namespace galfast {

bool edge_scores_lanes_supported(DType, int64_t) { return false; }

void edge_scores_lanes(const EdgeScoresParams&) {
  throw std::invalid_argument("bilinear_edge_scores: no edges-in-lanes kernel on this CPU");
}

void edge_scores_lanes_backward(const EdgeScoresParams&) {
  throw std::invalid_argument("bilinear_edge_scores: no edges-in-lanes kernel on this CPU");
}

}  // namespace galfast

#else

// GCC 12 warns inside its own AVX-512 intrinsics when they are inlined into functions with a
// target (their _mm512_undefined_* self-initialisation; GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/parallel.h"
#include "common/scratch.h"

// Everything included above is compiled for the baseline instruction set (the linker keeps one
// copy of each inline function of a shared header); from here on, this file's own functions are
// compiled for AVX-512. The backward's per-block functions are flattened: under link-time
// optimisation GCC otherwise leaves their tile loops as calls (the backward ran 25% slower).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma")

namespace galfast {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kMaxDim = 64;
constexpr int64_t kBlocksPerChunk = kEdgeScoresLanesChunk / kLanes;
bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

// Lanes [0, count) of a block.
inline __mmask16 live_lanes(int64_t count) {
  return count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

// The block's element offsets id * dim of z, as two 8-lane int64 halves; throws on a bad id.
struct Offsets {
  __m512i lo, hi;
};

template <typename I>
Offsets block_offsets(const I* ids, const char* which, int64_t first, __mmask16 live,
                      int64_t num_nodes, int64_t dim) {
  __m512i lo, hi;
  if constexpr (std::is_same_v<I, int32_t>) {
    const __m512i x = _mm512_maskz_loadu_epi32(live, ids + first);
    lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(x));
    hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(x, 1));
  } else {
    lo = _mm512_maskz_loadu_epi64(__mmask8(live), ids + first);
    hi = _mm512_maskz_loadu_epi64(__mmask8(live >> 8), ids + first + 8);
  }
  // Unsigned compares: a negative id is a huge one.
  const __m512i n = _mm512_set1_epi64(num_nodes);
  const unsigned bad =
      unsigned(_mm512_cmpge_epu64_mask(lo, n)) | (unsigned(_mm512_cmpge_epu64_mask(hi, n)) << 8);
  if (bad) {
    const int64_t b = first + __builtin_ctz(bad);
    throw_bad_edge_id(which, b, static_cast<int64_t>(ids[b]), num_nodes);
  }
  const __m512i d = _mm512_set1_epi64(dim);
  return {_mm512_mullo_epi64(lo, d), _mm512_mullo_epi64(hi, d)};
}

// rows[i] = the block's i-th features (zeros in dead lanes), for i < dim, four features at a
// time: x[q] holds those four of edges q, q + 4, q + 8, q + 12 (one 16-byte load each, the last
// four masked to dim), then one 4 x 4 transpose in each 128-bit lane puts each feature's 16
// edges in lane order. (Per-feature gathers cost twice as much.)
inline void load_rows_transposed(const float* z, const int64_t (&at)[kLanes], __mmask16 live,
                                 int64_t dim, float* rows) {
  for (int64_t f = 0; f < dim; f += 4) {
    const __mmask8 keep = __mmask8((1u << std::min<int64_t>(4, dim - f)) - 1);
    __m512 x[4];
    for (int q = 0; q < 4; ++q) {
      __m512 y = _mm512_castps128_ps512(_mm_maskz_loadu_ps(keep, z + at[q] + f));
      y = _mm512_insertf32x4(y, _mm_maskz_loadu_ps(keep, z + at[q + 4] + f), 1);
      y = _mm512_insertf32x4(y, _mm_maskz_loadu_ps(keep, z + at[q + 8] + f), 2);
      x[q] = _mm512_insertf32x4(y, _mm_maskz_loadu_ps(keep, z + at[q + 12] + f), 3);
    }
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(x[0], x[1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(x[0], x[1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(x[2], x[3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(x[2], x[3]));
    __m512 c[4] = {
        _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2)), _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2)),
        _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3)), _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3))};
    for (int k = 0; k < 4 && f + k < dim; ++k) {
      // Dead lanes read row 0 (any values): zero them, so that no NaN of it leaks into sums.
      _mm512_store_ps(rows + (f + k) * kLanes, _mm512_maskz_mov_ps(live, c[k]));
    }
  }
}

// u and v ([dim][16] each) of the block of edges [first, first + 16) (the lanes `live`).
template <typename I>
void gather_block(const EdgeScoresParams& p, int64_t first, __mmask16 live, float* u, float* v) {
  const float* z = static_cast<const float*>(p.z);
  alignas(64) int64_t at[kLanes];
  const Offsets at_src =
      block_offsets(static_cast<const I*>(p.src), "src", first, live, p.num_nodes, p.dim);
  const Offsets at_dst =
      block_offsets(static_cast<const I*>(p.dst), "dst", first, live, p.num_nodes, p.dim);
  _mm512_store_si512(at, at_src.lo);
  _mm512_store_si512(at + 8, at_src.hi);
  load_rows_transposed(z, at, live, p.dim, u);
  _mm512_store_si512(at, at_dst.lo);
  _mm512_store_si512(at + 8, at_dst.hi);
  load_rows_transposed(z, at, live, p.dim, v);
}

inline void gather_block(const EdgeScoresParams& p, int64_t first, __mmask16 live, float* u,
                         float* v) {
  if (p.int32_ids) {
    gather_block<int32_t>(p, first, live, u, v);
  } else {
    gather_block<int64_t>(p, first, live, u, v);
  }
}

// Calls fn(start, std::integral_constant<int, W>) over [0, count) in the fewest tiles of at most
// kMax, of near-equal widths (20 = 10 + 10, not 12 + 8: a narrow tile has too few independent
// multiply-add chains). Tile widths are compile-time, so tiles stay in registers.
template <int W, typename Fn>
inline void call_width(int64_t width, int64_t start, Fn& fn) {
  if constexpr (W > 0) {
    if (width == W) return fn(start, std::integral_constant<int, W>{});
    call_width<W - 1>(width, start, fn);
  }
}

template <int kMax, typename Fn>
inline void for_tiles(int64_t count, Fn&& fn) {
  const int64_t tiles = (count + kMax - 1) / kMax;
  int64_t start = 0;
  for (int64_t k = 0; k < tiles; ++k) {
    const int64_t width = (count - start) / (tiles - k);  // widths differ by at most one
    call_width<kMax>(width, start, fn);
    start += width;
  }
}

// ---------------------------------------------------------------- forward

// h = u^T basis v for the block (u, v: [dim][16]); t_s = u^T basis into projected ([dim][16])
// unless it is null.
inline __m512 basis_form(const float* u, const float* v, const float* basis, int64_t dim,
                         float* projected) {
  __m512 h = _mm512_setzero_ps();
  for_tiles<12>(dim, [&](int64_t j0, auto width) {
    constexpr int W = decltype(width)::value;
    __m512 t[W];
    for (int k = 0; k < W; ++k) t[k] = _mm512_setzero_ps();
    for (int64_t i = 0; i < dim; ++i) {
      const __m512 ui = _mm512_load_ps(u + i * kLanes);
      const float* row = basis + i * dim + j0;
      for (int k = 0; k < W; ++k) t[k] = _mm512_fmadd_ps(ui, _mm512_set1_ps(row[k]), t[k]);
    }
    for (int k = 0; k < W; ++k) {
      h = _mm512_fmadd_ps(t[k], _mm512_load_ps(v + (j0 + k) * kLanes), h);
      if (projected) _mm512_storeu_ps(projected + (j0 + k) * kLanes, t[k]);
    }
  });
  return h;
}

void forward(const EdgeScoresParams& p) {
  const int64_t num_edges = p.num_edges, num_bases = p.num_bases, dim = p.dim;
  const int64_t num_levels = p.num_levels;
  const float* bases = static_cast<const float*>(p.bases);
  const float* coefficients = static_cast<const float*>(p.coefficients);
  float* out = static_cast<float*>(p.out);
  float* projected = static_cast<float*>(p.projected);
  const int threads = edge_scores_threads(p);
  const int64_t per_thread = (2 * dim + num_bases) * kLanes;
  std::vector<float> fallback;
  float* scratch = scratch_memory(static_cast<size_t>(threads * per_thread), fallback);
  const int64_t num_blocks = (num_edges + kLanes - 1) / kLanes;
  const int64_t num_chunks = (num_blocks + kBlocksPerChunk - 1) / kBlocksPerChunk;
  ParallelErrors errors;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    float* u = scratch + t * per_thread;
    float* v = u + dim * kLanes;
    float* h = v + dim * kLanes;  // [num_bases][16]
#pragma omp for schedule(static)
    for (int64_t k = 0; k < num_chunks; ++k) {
      if (errors.failed()) continue;
      try {
        const int64_t last_block = std::min(num_blocks, (k + 1) * kBlocksPerChunk);
        for (int64_t block = k * kBlocksPerChunk; block < last_block; ++block) {
          const int64_t first = block * kLanes;
          const __mmask16 live = live_lanes(num_edges - first);
          gather_block(p, first, live, u, v);
          for (int64_t s = 0; s < num_bases; ++s) {
            float* rows = projected ? projected + (block * num_bases + s) * dim * kLanes : nullptr;
            _mm512_store_ps(h + s * kLanes, basis_form(u, v, bases + s * dim * dim, dim, rows));
          }
          // out[r] = sum over s of coefficients[r][s] h_s, s in increasing order.
          for (int64_t r = 0; r < num_levels; ++r) {
            const float* a = coefficients + r * num_bases;
            __m512 sum = _mm512_mul_ps(_mm512_set1_ps(a[0]), _mm512_load_ps(h));
            for (int64_t s = 1; s < num_bases; ++s) {
              sum = _mm512_fmadd_ps(_mm512_set1_ps(a[s]), _mm512_load_ps(h + s * kLanes), sum);
            }
            _mm512_mask_storeu_ps(out + r * num_edges + first, live, sum);
          }
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow();
}

// ---------------------------------------------------------------- backward

// Per-thread buffers of one chunk's backward.
struct ChunkBuffers {
  float* v;        // [blocks][dim][16]
  float* scaled;   // [blocks][num_bases][dim][16]: dh_s u[i]
  float* u;        // [dim][16]: the current block's u
  float* dv;       // [dim][16]
  float* dh;       // [num_bases][16]
  float* g;        // [num_levels][16]
  float* levels;   // [num_levels][num_bases][16]: grad_coefficients' lane-wise sums
  float* du_rows;  // [16][dim]: the current block's du rows, where grad_z is summed directly
  float* dv_rows;  // [16][dim]

  static int64_t size(int64_t dim, int64_t num_bases, int64_t num_levels) {
    return kLanes * (kBlocksPerChunk * dim * (1 + num_bases) + 4 * dim + num_bases + num_levels +
                     num_levels * num_bases);
  }

  ChunkBuffers(float* at, int64_t dim, int64_t num_bases, int64_t num_levels) {
    v = at;
    scaled = v + kBlocksPerChunk * dim * kLanes;
    u = scaled + kBlocksPerChunk * num_bases * dim * kLanes;
    dv = u + dim * kLanes;
    dh = dv + dim * kLanes;
    g = dh + num_bases * kLanes;
    levels = g + num_levels * kLanes;
    du_rows = levels + num_levels * num_bases * kLanes;
    dv_rows = du_rows + kLanes * dim;
  }
};

// Transposes the 16 x 16 matrix of rows x[0..15] in place (x[i] lane l becomes x[l] lane i): four
// rounds of two-source shuffles.
inline void transpose16(__m512 (&x)[16]) {
  __m512 t[16];
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_ps(x[k], x[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(x[k], x[k + 1]);
  }
  // x[4q + c]: column 4L + c of rows 4q..4q+3 in 128-bit lane L.
  for (int q = 0; q < 16; q += 4) {
    for (int c = 0; c < 2; ++c) {
      const __m512d a = _mm512_castps_pd(t[q + c]), b = _mm512_castps_pd(t[q + c + 2]);
      x[q + 2 * c] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      x[q + 2 * c + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_shuffle_f32x4(x[c], x[4 + c], 0x88);      // columns c, c + 8 of rows 0..7
    t[4 + c] = _mm512_shuffle_f32x4(x[c], x[4 + c], 0xdd);  // columns c + 4, c + 12
    t[8 + c] = _mm512_shuffle_f32x4(x[8 + c], x[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(x[8 + c], x[12 + c], 0xdd);
  }
  for (int c = 0; c < 4; ++c) {
    x[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    x[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
    x[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
    x[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
  }
}

// Stores rows[i] (i < dim, [dim][16]) as the block's 16 edge-major rows of dim floats at `to`
// (the rows of dead lanes too, which the buffer has room for).
inline void store_edge_major(const float* rows, int64_t dim, float* to) {
  for (int64_t i0 = 0; i0 < dim; i0 += 16) {
    __m512 x[16];
    for (int k = 0; k < 16; ++k) {
      x[k] = i0 + k < dim ? _mm512_load_ps(rows + (i0 + k) * kLanes) : _mm512_setzero_ps();
    }
    transpose16(x);
    const __mmask16 keep = live_lanes(dim - i0);
    for (int e = 0; e < 16; ++e) _mm512_mask_storeu_ps(to + e * dim + i0, keep, x[e]);
  }
}

// du[i] = sum over s of dh_s * sum_j bases[s][i][j] v[j], in tiles of up to 12 rows i (columns:
// the bases transposed, so that a tile's elements of column j are adjacent).
inline void du_rows(const float* v, const float* dh, const float* columns, int64_t num_bases,
                    int64_t dim, float* du) {
  for_tiles<12>(dim, [&](int64_t i0, auto width) {
    constexpr int W = decltype(width)::value;
    __m512 sum[W];
    for (int64_t s = 0; s < num_bases; ++s) {
      const float* column = columns + s * dim * dim + i0;
      __m512 w[W];
      for (int k = 0; k < W; ++k) w[k] = _mm512_setzero_ps();
      for (int64_t j = 0; j < dim; ++j) {
        const __m512 vj = _mm512_load_ps(v + j * kLanes);
        for (int k = 0; k < W; ++k) {
          w[k] = _mm512_fmadd_ps(_mm512_set1_ps(column[j * dim + k]), vj, w[k]);
        }
      }
      const __m512 g = _mm512_load_ps(dh + s * kLanes);
      for (int k = 0; k < W; ++k) {
        sum[k] = s == 0 ? _mm512_mul_ps(g, w[k]) : _mm512_fmadd_ps(g, w[k], sum[k]);
      }
    }
    for (int k = 0; k < W; ++k) _mm512_store_ps(du + (i0 + k) * kLanes, sum[k]);
  });
}

// The block's per-edge work: dh, h, dv, du (its 16 du and dv rows written edge-major at du_at,
// dv_at), its grad_coefficients terms into b.levels and its scaled rows dh_s u[i] into b.scaled
// (block `slot` of the chunk), its v into b.v.
[[gnu::flatten]] void backward_block(const EdgeScoresParams& p, const float* columns, int64_t block,
                                     int64_t slot, const ChunkBuffers& b, float* du_at,
                                     float* dv_at) {
  const int64_t num_edges = p.num_edges, num_bases = p.num_bases, dim = p.dim;
  const int64_t num_levels = p.num_levels;
  const float* coefficients = static_cast<const float*>(p.coefficients);
  const float* grad_out = static_cast<const float*>(p.grad_out);
  const float* projected =
      static_cast<const float*>(p.projected) + block * num_bases * dim * kLanes;
  const int64_t first = block * kLanes;
  const __mmask16 live = live_lanes(num_edges - first);
  float* v = b.v + slot * dim * kLanes;
  gather_block(p, first, live, b.u, v);
  for (int64_t r = 0; r < num_levels; ++r) {
    _mm512_store_ps(b.g + r * kLanes,
                    _mm512_maskz_loadu_ps(live, grad_out + r * num_edges + first));
  }
  // dh_s = sum over r of grad_out[r] coefficients[r][s], r in increasing order.
  for (int64_t s = 0; s < num_bases; ++s) {
    __m512 sum = _mm512_mul_ps(_mm512_load_ps(b.g), _mm512_set1_ps(coefficients[s]));
    for (int64_t r = 1; r < num_levels; ++r) {
      sum = _mm512_fmadd_ps(_mm512_load_ps(b.g + r * kLanes),
                            _mm512_set1_ps(coefficients[r * num_bases + s]), sum);
    }
    _mm512_store_ps(b.dh + s * kLanes, sum);
  }
  for (int64_t s = 0; s < num_bases; ++s) {
    const float* t = projected + s * dim * kLanes;
    const __m512 g = _mm512_load_ps(b.dh + s * kLanes);
    // h_s = sum_j t_s[j] v[j]; dv[j] = sum over s of dh_s t_s[j].
    __m512 h = _mm512_setzero_ps();
    for (int64_t j = 0; j < dim; ++j) {
      const __m512 tj = _mm512_loadu_ps(t + j * kLanes);
      h = _mm512_fmadd_ps(tj, _mm512_load_ps(v + j * kLanes), h);
      const __m512 dvj =
          s == 0 ? _mm512_mul_ps(g, tj) : _mm512_fmadd_ps(g, tj, _mm512_load_ps(b.dv + j * kLanes));
      _mm512_store_ps(b.dv + j * kLanes, dvj);
    }
    // grad_coefficients[r][s] += grad_out[r] h_s, lane-wise.
    for (int64_t r = 0; r < num_levels; ++r) {
      float* sum = b.levels + (r * num_bases + s) * kLanes;
      _mm512_store_ps(sum,
                      _mm512_fmadd_ps(_mm512_load_ps(b.g + r * kLanes), h, _mm512_load_ps(sum)));
    }
    float* scaled = b.scaled + (slot * num_bases + s) * dim * kLanes;
    for (int64_t i = 0; i < dim; ++i) {
      _mm512_store_ps(scaled + i * kLanes, _mm512_mul_ps(g, _mm512_load_ps(b.u + i * kLanes)));
    }
  }
  store_edge_major(b.dv, dim, dv_at);
  // b.u is free again: du goes through it.
  du_rows(v, b.dh, columns, num_bases, dim, b.u);
  store_edge_major(b.u, dim, du_at);
}

// partial[s][i][j] = the sum of the 16 lanes of sum over the chunk's blocks of scaled_s[i] v[j],
// in register tiles of 4 rows i by 6 columns j.
[[gnu::flatten]] void chunk_bases(const ChunkBuffers& b, int64_t blocks, int64_t num_bases,
                                  int64_t dim, float* partial) {
  for (int64_t s = 0; s < num_bases; ++s) {
    for_tiles<4>(dim, [&](int64_t i0, auto rows) {
      constexpr int I = decltype(rows)::value;
      for_tiles<6>(dim, [&](int64_t j0, auto cols) {
        constexpr int J = decltype(cols)::value;
        __m512 acc[I][J];
        for (int a = 0; a < I; ++a) {
          for (int c = 0; c < J; ++c) acc[a][c] = _mm512_setzero_ps();
        }
        for (int64_t k = 0; k < blocks; ++k) {
          const float* scaled = b.scaled + ((k * num_bases + s) * dim + i0) * kLanes;
          const float* v = b.v + (k * dim + j0) * kLanes;
          for (int a = 0; a < I; ++a) {
            const __m512 x = _mm512_load_ps(scaled + a * kLanes);
            for (int c = 0; c < J; ++c) {
              acc[a][c] = _mm512_fmadd_ps(x, _mm512_load_ps(v + c * kLanes), acc[a][c]);
            }
          }
        }
        for (int a = 0; a < I; ++a) {
          for (int c = 0; c < J; ++c) {
            partial[(s * dim + i0 + a) * dim + j0 + c] = _mm512_reduce_add_ps(acc[a][c]);
          }
        }
      });
    });
  }
}

// row += add (dim floats) in 16-float vectors, the last one masked.
inline void add_row(float* row, const float* add, int64_t dim) {
  for (int64_t j = 0; j < dim; j += kLanes) {
    const __mmask16 keep = live_lanes(dim - j);
    const __m512 x = _mm512_maskz_loadu_ps(keep, row + j);
    _mm512_mask_storeu_ps(row + j, keep, _mm512_add_ps(x, _mm512_maskz_loadu_ps(keep, add + j)));
  }
}

// Adds du_b into row src[b] and dv_b into row dst[b] of grad_z where that row is in [first,
// last), for the edges b in [begin, end) in increasing order (src's term first); du and dv hold
// those edges' rows.
template <typename I>
[[gnu::flatten]] void add_edge_rows(const EdgeScoresParams& p, const float* du, const float* dv,
                                    int64_t begin, int64_t end, int64_t first, int64_t last) {
  const I* src = static_cast<const I*>(p.src);
  const I* dst = static_cast<const I*>(p.dst);
  float* grad_z = static_cast<float*>(p.grad_z);
  const int64_t dim = p.dim;
  const uint64_t span = static_cast<uint64_t>(last - first);
  for (int64_t b = begin; b < end; ++b) {
    // One unsigned compare tests first <= n < last.
    const uint64_t from = static_cast<uint64_t>(static_cast<int64_t>(src[b]) - first);
    const float* rows = du + (b - begin) * dim;
    if (from < span) add_row(grad_z + (first + static_cast<int64_t>(from)) * dim, rows, dim);
    const uint64_t to = static_cast<uint64_t>(static_cast<int64_t>(dst[b]) - first);
    rows = dv + (b - begin) * dim;
    if (to < span) add_row(grad_z + (first + static_cast<int64_t>(to)) * dim, rows, dim);
  }
}

inline void add_edge_rows(const EdgeScoresParams& p, const float* du, const float* dv,
                          int64_t begin, int64_t end, int64_t first, int64_t last) {
  if (p.int32_ids) {
    add_edge_rows<int32_t>(p, du, dv, begin, end, first, last);
  } else {
    add_edge_rows<int64_t>(p, du, dv, begin, end, first, last);
  }
}

void backward(const EdgeScoresParams& p) {
  const int64_t num_edges = p.num_edges, num_bases = p.num_bases, dim = p.dim;
  const int64_t num_levels = p.num_levels;
  const int64_t num_blocks = (num_edges + kLanes - 1) / kLanes;
  const int64_t num_chunks = (num_blocks + kBlocksPerChunk - 1) / kBlocksPerChunk;
  const int64_t bases_size = num_bases * dim * dim, levels_size = num_levels * num_bases;
  const int threads = edge_scores_threads(p);
  std::vector<float> columns(static_cast<size_t>(bases_size));  // columns[s][j][i] = bases[s][i][j]
  const float* bases = static_cast<const float*>(p.bases);
  for (int64_t s = 0; s < num_bases; ++s) {
    for (int64_t i = 0; i < dim; ++i) {
      for (int64_t j = 0; j < dim; ++j)
        columns[(s * dim + j) * dim + i] = bases[(s * dim + i) * dim + j];
    }
  }
  // Whole 64-byte lines per thread, so that every buffer stays aligned.
  const int64_t per_thread = (ChunkBuffers::size(dim, num_bases, num_levels) + 15) / 16 * 16;
  std::vector<float> fallback;
  // One thread adds each block's du and dv rows to grad_z at once, in the order in which the
  // threads' second phase would (and to the same sums): no [num_edges, dim] buffers to fill
  // and read back.
  const bool direct = threads == 1;
  const int64_t rows_size = direct ? 0 : num_blocks * kLanes * dim;
  float* scratch = scratch_memory(static_cast<size_t>(threads * per_thread + 2 * rows_size +
                                                      num_chunks * (bases_size + levels_size)),
                                  fallback);
  float* du = scratch + threads * per_thread;
  float* dv = du + rows_size;
  float* partial_bases = dv + rows_size;
  float* grad_z = static_cast<float*>(p.grad_z);
  if (direct) std::fill(grad_z, grad_z + p.num_nodes * dim, 0.0f);
  float* partial_levels = partial_bases + num_chunks * bases_size;
  ParallelErrors errors;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    const ChunkBuffers b(scratch + t * per_thread, dim, num_bases, num_levels);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < num_chunks; ++k) {
      if (errors.failed()) continue;
      try {
        const int64_t first_block = k * kBlocksPerChunk;
        const int64_t blocks = std::min(num_blocks, first_block + kBlocksPerChunk) - first_block;
        std::fill(b.levels, b.levels + levels_size * kLanes, 0.0f);
        for (int64_t slot = 0; slot < blocks; ++slot) {
          const int64_t first = (first_block + slot) * kLanes;
          if (direct) {
            backward_block(p, columns.data(), first_block + slot, slot, b, b.du_rows, b.dv_rows);
            const int64_t end = std::min(num_edges, first + kLanes);
            add_edge_rows(p, b.du_rows, b.dv_rows, first, end, 0, p.num_nodes);
          } else {
            backward_block(p, columns.data(), first_block + slot, slot, b, du + first * dim,
                           dv + first * dim);
          }
        }
        chunk_bases(b, blocks, num_bases, dim, partial_bases + k * bases_size);
        for (int64_t x = 0; x < levels_size; ++x) {
          partial_levels[k * levels_size + x] =
              _mm512_reduce_add_ps(_mm512_load_ps(b.levels + x * kLanes));
        }
      } catch (...) {
        errors.capture();
      }
    }
    // The loop's barrier: every chunk's rows and partials are written.
    if (!errors.failed()) {
      int64_t first, last;
      if (!direct) {
        thread_range(p.num_nodes, t, nt, first, last);
        std::fill(grad_z + first * dim, grad_z + last * dim, 0.0f);
        add_edge_rows(p, du, dv, 0, num_edges, first, last);
      }
      float* grad_bases = static_cast<float*>(p.grad_bases);
      thread_range(num_bases * dim, t, nt, first, last);
      for (int64_t row = first; row < last; ++row) {
        float* out = grad_bases + row * dim;
        std::fill(out, out + dim, 0.0f);
        for (int64_t k = 0; k < num_chunks; ++k)
          add_row(out, partial_bases + k * bases_size + row * dim, dim);
      }
      if (t == 0) {
        float* grad_coefficients = static_cast<float*>(p.grad_coefficients);
        std::fill(grad_coefficients, grad_coefficients + levels_size, 0.0f);
        for (int64_t k = 0; k < num_chunks; ++k) {
          add_row(grad_coefficients, partial_levels + k * levels_size, levels_size);
        }
      }
    }
  }
  errors.rethrow();
}

void require_supported(const EdgeScoresParams& p) {
  if (!edge_scores_lanes_supported(p.dtype, p.dim)) {
    throw std::invalid_argument(
        "bilinear_edge_scores: the edges-in-lanes kernel needs float32, dim <= 64 and a CPU with "
        "AVX-512F/DQ/VL");
  }
}

}  // namespace

bool edge_scores_lanes_supported(DType dtype, int64_t dim) {
  return dtype == DType::kFloat32 && dim >= 1 && dim <= kMaxDim && cpu_has_avx512();
}

void edge_scores_lanes(const EdgeScoresParams& p) {
  require_supported(p);
  forward(p);
}

void edge_scores_lanes_backward(const EdgeScoresParams& p) {
  require_supported(p);
  backward(p);
}

}  // namespace galfast

#pragma GCC pop_options

#endif
