// The CPU sum kernel of aggregate_sum_cpu.h (sum, mean and gcn on float32 x through int32
// indices) in 64-byte vectors, for CPUs with AVX-512F/VL; aggregate_cpu.cpp chooses it at run
// time.
//
// Thread mapping: as the AVX2 kernel, one thread reduces a whole row (for_each_chunk's chunks),
// one pass over the row's edges per feature tile.
//
// Bitwise the AVX2 kernel's results. A feature's sum depends on the tile that computes it last
// and on that tile's accumulator-set count (edge k of a row to set k % sets, a fixed tree at the
// end), never on the vector width: so this kernel cuts the features into the AVX2 kernel's tiles
// (64 features, then the rest, which starts 8 features before the end when fewer than 8 are
// left) with the AVX2 kernel's set counts (tile_sets), and only covers each tile with wider
// vectors: 16-float vectors, then one 4-, 8- or 16-float tail vector masked to the tile's end.
// At F = 20 that is one 64-byte and one 16-byte load and two adds per edge, against three
// 32-byte loads and three adds.
//
// The pre-scaled copy of x (col_scale folded in, as in the AVX2 kernel) is laid out so that no
// load straddles two cache lines: for F < 64, the first 16 * (F / 16) features of every row in
// one array (64-byte rows, cache-aligned) and the rest, padded with zeros to 4, 8 or 16 floats,
// in a second; from F = 64 on, one array with rows padded to whole 64-byte lines.
#include "aggregate/aggregate_sum_avx512.h"

#if defined(GALFAST_X86_DISPATCH)

// GCC 12 warns inside its own AVX-512 intrinsics when they are inlined into functions with a
// target (their _mm512_undefined_* self-initialisation; GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/scratch.h"
#include "common/unroll.h"

// Everything included above is compiled for the baseline instruction set: the linker keeps one
// copy of each inline function of a shared header, so none may be compiled for AVX-512 here.
// From here on, this file's own functions (all local to it but the entry point) are.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")

namespace galfast {
namespace aggregate512 {
namespace {

// One vector of kLanes floats (4, 8 or 16); a tail vector loads and stores its lanes by a mask.
template <int kLanes>
struct Lanes;

template <>
struct Lanes<16> {
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float w) { return _mm512_set1_ps(w); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
};

template <>
struct Lanes<8> {
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float w) { return _mm256_set1_ps(w); }
  static V load(const float* p, __mmask16 m) { return _mm256_maskz_loadu_ps(__mmask8(m), p); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v, __mmask16 m) { _mm256_mask_storeu_ps(p, __mmask8(m), v); }
};

template <>
struct Lanes<4> {
  using V = __m128;
  static V zero() { return _mm_setzero_ps(); }
  static V set1(float w) { return _mm_set1_ps(w); }
  static V load(const float* p, __mmask16 m) { return _mm_maskz_loadu_ps(__mmask8(m), p); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V mul(V a, V b) { return _mm_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm_fmadd_ps(a, b, c); }
  static void store(float* p, V v, __mmask16 m) { _mm_mask_storeu_ps(p, __mmask8(m), v); }
};

// The AVX2 kernel's tiles (aggregate_sum_cpu.h): at most 64 features, cut in 8-float vectors,
// and its accumulator sets for a tile of n >= 4 features: 8 for one half vector (4), 4 for two
// overlapping halves (5..7), then sets_for(vectors). (F = 1..3, scalar accumulators there, stay
// with the AVX2 kernel: GCC vectorises some of their loops and not others, F = 2's weighted
// main loop without FMA, so only that code rounds like itself.)
constexpr int kMaxTile = 64;
constexpr int sets_for(int registers) {
  return registers >= 5 ? 1 : registers >= 3 ? 2 : registers == 2 ? 4 : 8;
}
constexpr int tile_sets(int n) { return n == 4 ? 8 : n < 8 ? 4 : sets_for((n + 7) / 8); }
// This kernel's cover of a tile of n features: n / 16 full vectors and a tail of 0, 4, 8 or 16.
constexpr int tail_lanes(int n) { return n % 16 == 0 ? 0 : n % 16 <= 4 ? 4 : n % 16 <= 8 ? 8 : 16; }

// What the kernel reads: x (or its pre-scaled copy) as a head array of head_stride floats a row
// and, for a split copy, a tail array of tail_stride floats a row holding the features from
// 16 * (F / 16) on; tail null: every feature lies in the head.
struct Rows {
  const int64_t* rowptr;
  const int32_t* col;
  const int64_t* edge_id;  // read only through a weight
  const float* weight;     // by edge id, or null
  const float* row_scale;  // applied to the finished row, or null
  const float* col_scale;  // per edge, or null (absent or folded into the copy)
  const float* head;
  int64_t head_stride;
  const float* tail;
  int64_t tail_stride;
  float* out;
  int64_t num_features;
};

// Sums features [a, b) of row r (b - a = kZmm * 16 + a tail of up to kTail) with kSets sets.
template <bool kFactor, bool kPrefetch, int kSets, int kZmm, int kTail>
[[gnu::always_inline]] inline void sum_tile(const Rows& s, int64_t r, int64_t a, int64_t b) {
  using Z = Lanes<16>;
  using Tl = Lanes<kTail == 0 ? 16 : kTail>;
  const int64_t begin = s.rowptr[r], end = s.rowptr[r + 1];
  const int64_t t = a + 16 * kZmm;  // the tail's first feature
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << (b - t)) - 1u);
  const float* __restrict head = s.head + a;
  const int64_t head_stride = s.head_stride;
  // A split copy's tail array starts at feature t (the tile is the whole row).
  const float* __restrict tail = s.tail ? s.tail : s.head + t;
  const int64_t tail_stride = s.tail ? s.tail_stride : s.head_stride;
  typename Z::V acc[kSets][kZmm > 0 ? kZmm : 1];
  typename Tl::V tail_acc[kSets];
  for (int set = 0; set < kSets; ++set) {
    for (int j = 0; j < kZmm; ++j) acc[set][j] = Z::zero();
    tail_acc[set] = Tl::zero();
  }
  const auto add_edge = [&](auto set, int64_t e) __attribute__((always_inline)) {
    if (kPrefetch && e + kPrefetchEdges < end) {
      const int64_t ahead = s.col[e + kPrefetchEdges];
      prefetch_span(head + ahead * head_stride, 16 * kZmm);
      if constexpr (kTail > 0) prefetch_line(tail + ahead * tail_stride + kTail - 1);
    }
    const int64_t c = s.col[e];
    const float* __restrict xh = head + c * head_stride;
    const float* __restrict xt = tail + c * tail_stride;
    if constexpr (kFactor) {
      float w = s.col_scale ? s.col_scale[c] : 1.0f;
      if (s.weight) w *= s.weight[s.edge_id ? s.edge_id[e] : e];
      const typename Z::V wz = Z::set1(w);
      for (int j = 0; j < kZmm; ++j) acc[set][j] = Z::fmadd(wz, Z::load(xh + 16 * j), acc[set][j]);
      if constexpr (kTail > 0) {
        tail_acc[set] = Tl::fmadd(Tl::set1(w), Tl::load(xt, tail_mask), tail_acc[set]);
      }
    } else {
      for (int j = 0; j < kZmm; ++j) acc[set][j] = Z::add(acc[set][j], Z::load(xh + 16 * j));
      if constexpr (kTail > 0) tail_acc[set] = Tl::add(tail_acc[set], Tl::load(xt, tail_mask));
    }
  };
  int64_t e = begin;
  for (; e + kSets <= end; e += kSets) unroll<kSets>([&](auto set) { add_edge(set, e + set); });
  unroll<kSets - 1>([&](auto set) {
    if (e + set < end) add_edge(set, e + set);
  });
  // The AVX2 kernel's tree over the sets: (0+1)+(2+3), ...
  unroll<log2_of(kSets)>([&](auto level) {
    constexpr int kStep = 1 << level;
    unroll<kSets / (2 * kStep)>([&](auto pair) {
      constexpr int kSet = pair * 2 * kStep;
      for (int j = 0; j < kZmm; ++j) acc[kSet][j] = Z::add(acc[kSet][j], acc[kSet + kStep][j]);
      tail_acc[kSet] = Tl::add(tail_acc[kSet], tail_acc[kSet + kStep]);
    });
  });
  float* __restrict out = s.out + r * s.num_features + a;
  const float rs = s.row_scale ? s.row_scale[r] : 1.0f;
  for (int j = 0; j < kZmm; ++j) Z::store(out + 16 * j, Z::mul(Z::set1(rs), acc[0][j]));
  if constexpr (kTail > 0)
    Tl::store(out + 16 * kZmm, Tl::mul(Tl::set1(rs), tail_acc[0]), tail_mask);
}

// sum_tile for the rows [first, last) in turn: where one tile covers a whole row (F <= 64), one
// call a chunk of rows. Called once a row through the pointer instead, the rows ran 1.6x slower
// on a PubMed-size graph at F = 16 (4.5 edges a row: the forward went from 350 to 208 us on one
// Zen 4 core; docs/benchmarks.md). Inlined in the loop, the tile's set-up (pointers, strides,
// masks) stays in registers from one row to the next.
template <bool kFactor, bool kPrefetch, int kSets, int kZmm, int kTail>
void sum_tiles(const Rows& s, int64_t first, int64_t last, int64_t a, int64_t b) {
  for (int64_t r = first; r < last; ++r) {
    sum_tile<kFactor, kPrefetch, kSets, kZmm, kTail>(s, r, a, b);
  }
}

using TileFn = void (*)(const Rows&, int64_t, int64_t, int64_t, int64_t);

// sum_tile for a tile of n features (4 <= n <= 64): 16 distinct kernels per kind.
template <bool kFactor, bool kPrefetch, int... I>
TileFn tile_fn(int64_t n, std::integer_sequence<int, I...>) {
  TileFn fn = nullptr;
  (void)((n == I + 4 ? (fn = &sum_tiles<kFactor, kPrefetch, tile_sets(I + 4), (I + 4) / 16,
                                        tail_lanes(I + 4)>,
                        true)
                     : false) ||
         ...);
  return fn;
}

// The tiles of a row: whole 64-feature tiles from feature 0 up to last_begin (the one before it
// may overlap the last tile, whose features are then written again), then the last tile.
struct RowTiles {
  TileFn full, last;
  int64_t last_begin;
};

template <bool kFactor, bool kPrefetch>
RowTiles row_tiles(int64_t last_features, int64_t F) {
  const auto all = std::make_integer_sequence<int, kMaxTile - 3>();
  return {tile_fn<kFactor, kPrefetch>(kMaxTile, all),
          tile_fn<kFactor, kPrefetch>(last_features, all), F - last_features};
}

// The AVX2 kernel's last tile: what the 64-feature tiles leave, or 8 features when fewer than 8
// are left of a row of at least 8.
int64_t last_tile(int64_t F) {
  const int64_t rest = F - (F - 1) / kMaxTile * kMaxTile;
  return F >= 8 && rest < 8 ? 8 : rest;
}

// The pre-scaled copy of x (see the header comment), in the calling thread's scratch memory or
// `fallback` (a copy allocated per call cost page faults on every call: see aggregate_sum_cpu.h):
// fills s.head/tail and their strides.
void fold_col_scale(const AggregateParams& p, Rows& s, std::vector<float>& fallback) {
  const int64_t F = p.num_features, N = p.num_cols;
  const int64_t head = F < kMaxTile ? F / 16 * 16 : (F + 15) / 16 * 16;
  const int64_t tail = F < kMaxTile ? tail_lanes(static_cast<int>(F)) : 0;
  float* const copy = scratch_memory(static_cast<size_t>(N * (head + tail)), fallback);
  float* __restrict dst_head = copy;
  float* __restrict dst_tail = dst_head + N * head;  // 64-byte aligned: head is a multiple of 16
  const float* __restrict x = static_cast<const float*>(p.x);
  const float* __restrict scale = static_cast<const float*>(p.col_scale);
  const int64_t in_head = head < F ? head : F;
#pragma omp parallel for schedule(static) num_threads(max_threads())
  for (int64_t c = 0; c < N; ++c) {
    for (int64_t k = 0; k < in_head; ++k) dst_head[c * head + k] = scale[c] * x[c * F + k];
    for (int64_t k = in_head; k < head; ++k) dst_head[c * head + k] = 0.0f;
    for (int64_t k = 0; k < tail; ++k) {
      dst_tail[c * tail + k] = head + k < F ? scale[c] * x[c * F + head + k] : 0.0f;
    }
  }
  s.head = dst_head;
  s.head_stride = head;
  s.tail = tail > 0 ? dst_tail : nullptr;
  s.tail_stride = tail;
  s.col_scale = nullptr;
}

}  // namespace

void sum(const AggregateParams& p) {
  Rows s{p.rowptr,
         p.col32,
         p.edge_id,
         static_cast<const float*>(p.weight),
         static_cast<const float*>(p.row_scale),
         static_cast<const float*>(p.col_scale),
         static_cast<const float*>(p.x),
         p.num_features,
         nullptr,
         0,
         static_cast<float*>(p.out),
         p.num_features};
  std::vector<float> fallback;
  if (fold_pays(p)) fold_col_scale(p, s, fallback);
  const auto check = [&](int64_t first, int64_t last) {
    const EdgeRange edges = checked_rows("aggregate", "rowptr", p.rowptr, first, last, p.num_edges);
    check_indices("aggregate", "col", p.col32, edges.begin, edges.end, p.num_cols);
    if (p.edge_id && p.weight) {
      check_indices("aggregate", "edge_id", p.edge_id, edges.begin, edges.end, p.num_edges);
    }
  };
  // Rows of x are prefetched only when x does not fit in L2 (as in the AVX2 kernel).
  const int64_t x_bytes = p.num_cols * (s.head_stride + s.tail_stride) * 4;
  const bool prefetch = x_bytes > (int64_t(1) << 20);
  const bool factor = s.col_scale || s.weight;
  const int64_t F = p.num_features, last = last_tile(F);
  const RowTiles tiles =
      factor ? (prefetch ? row_tiles<true, true>(last, F) : row_tiles<true, false>(last, F))
             : (prefetch ? row_tiles<false, true>(last, F) : row_tiles<false, false>(last, F));
  for_each_chunk(p.rowptr, p.num_rows, check, [&](int64_t first_row, int64_t end_row) {
    if (tiles.last_begin == 0) return tiles.last(s, first_row, end_row, 0, F);
    // Wider rows tile by tile, row by row (a chunk's rows tile by tile measured up to 1.15x
    // slower at F = 256): a row's last tile runs after its full ones.
    for (int64_t r = first_row; r < end_row; ++r) {
      for (int64_t a = 0; a < tiles.last_begin; a += kMaxTile) {
        tiles.full(s, r, r + 1, a, a + kMaxTile);
      }
      tiles.last(s, r, r + 1, tiles.last_begin, F);
    }
  });
}

}  // namespace aggregate512
}  // namespace galfast

#pragma GCC pop_options

namespace galfast {
namespace aggregate512 {

bool supported() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return has;
}

bool handles(const AggregateParams& p) {
  return p.mode == AggMode::kSum && p.dtype == DType::kFloat32 && p.col32 != nullptr &&
         p.num_features >= 4;
}

}  // namespace aggregate512
}  // namespace galfast

#endif  // GALFAST_X86_DISPATCH
