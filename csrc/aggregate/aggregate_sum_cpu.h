// The CPU kernel of sum-mode aggregation (sum, mean and gcn), included by aggregate_cpu_impl.h
// inside its instruction-set namespace.
//
// Thread mapping: one thread reduces a whole row (for_each_row's chunks); the features are
// covered by register tiles of at most 256 bytes, one pass over the row's edges per tile.
//
// Why it is shaped this way (issue 19): with one set of accumulators per row, every edge's
// FMA waits for the previous edge's (4 cycles), so narrow rows ran at one edge per 4+ cycles
// however fast the gathers came. Each tile therefore keeps kSets independent accumulator sets,
// edge k of a row going to set k % kSets, added together in a fixed tree at the end of the row:
// the result depends only on the row's edges in CSR order, never on the thread count.
// row_scale multiplies the finished row, not each edge; col_scale is folded into a pre-scaled
// copy of x when the graph has enough edges per source to repay it (fold_pays, aggregate.h). A
// feature count that is no multiple of the vector width ends with one vector overlapping the tile
// before it (the shared features are written twice), or, reading the pre-scaled copy, with one more
// aligned vector over rows padded with zeros; so no row needs a second, scalar pass. The indices
// are read as int32 where Python passes that copy (col32: half the bytes streamed per edge), and
// rows of x are prefetched only when x is too big for L2 to hold it.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "aggregate/aggregate.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "common/scratch.h"
#include "common/unroll.h"

// GCC warns (baseline build) that a 32-byte vector returned by value changes the ABI without
// AVX; every function here is inlined into its own translation unit, so no call crosses it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Bytes of one vector register of this build (how many accumulators fit is counted in them),
// and the vector width the tiles are cut in (32 bytes in both builds, so both compile the
// same tiles; the baseline build holds such a vector in two registers).
#if defined(__AVX__)
constexpr int kRegisterBytes = 32;
#else
constexpr int kRegisterBytes = 16;
#endif
constexpr int kVectorBytes = 32;
constexpr int kMaxTileBytes = 256;

// Accumulator sets for a tile of `registers` vector registers per edge: enough independent
// FMA chains to cover the FMA latency (about 8 in flight), few enough to stay in registers.
constexpr int sets_for(int registers) {
  return registers >= 5 ? 1 : registers >= 3 ? 2 : registers == 2 ? 4 : 8;
}

// Calls f(std::integral_constant<int, I>()) for the I in [0, N] equal to n.
template <int N, typename F, int... I>
[[gnu::always_inline]] inline void dispatched(int64_t n, F&& f, std::integer_sequence<int, I...>) {
  (void)((n == I ? (f(std::integral_constant<int, I>()), true) : false) || ...);
}
template <int N, typename F>
[[gnu::always_inline]] inline void dispatch(int64_t n, F&& f) {
  dispatched<N>(n, f, std::make_integer_sequence<int, N + 1>());
}

// What the sum kernel reads: the call's parameters with col_scale possibly folded into x, and
// the column indices as Index (int64_t, or int32_t from col32: half the bytes streamed).
template <typename T, typename Index>
struct SumRows {
  const int64_t* rowptr;
  const Index* col;
  const int64_t* edge_id;  // read only through a weight
  const T* weight;         // by edge id, or null
  const T* row_scale;      // applied to the finished row, or null
  const T* col_scale;      // per edge, or null (absent or folded into x)
  const T* x;
  T* out;
  int64_t num_features;
  int64_t x_stride;  // elements from one row of x to the next: num_features, or padded
};

// Vector types of GCC's vector extension (one register of each width in the AVX2 build, two
// or one in the baseline build), loaded and stored unaligned through memcpy. Vec<T, 1> is T.
template <typename T, int kLanes>
struct VecType {
  typedef T type __attribute__((vector_size(kLanes * sizeof(T))));
};
template <typename T>
struct VecType<T, 1> {
  typedef T type;
};
template <typename T, int kLanes>
using Vec = typename VecType<T, kLanes>::type;

template <typename V>
[[gnu::always_inline]] inline V load(const void* from) {
  V v;
  std::memcpy(&v, from, sizeof(V));
  return v;
}

// The variant of the sum kernel: Index, whether edges carry a factor (weight and/or col_scale;
// without one each edge is a plain add), whether the rows of x kPrefetchEdges ahead are
// prefetched (worth its instructions only when x does not fit in L2: kPrefetchFrom) and whether
// it reads a padded x (Tail::kPadded) where x_stride says so.
template <typename T, typename IndexT, bool kFactorV, bool kPrefetchV, bool kPaddedV = false>
struct SumKind {
  using Index = IndexT;
  static constexpr bool kFactor = kFactorV, kPrefetch = kPrefetchV, kPadded = kPaddedV;
};
constexpr int64_t kPrefetchFrom = int64_t(1) << 20;  // bytes of x

// How a tile ends when the features are no multiple of the vector width: no tail, one more
// vector ending at the row's last feature (overlapping the one before it; the shared features
// are stored twice, with the same sums), or one more vector reading into the zero padding of a
// padded copy of x (x_stride > num_features), of which only the row's features are stored.
enum class Tail { kNone, kOverlap, kPadded };

// Sums row r over kVecs vectors of kLanes features from f0 and a kTail vector, in one pass over
// the row's edges.
template <typename T, typename Kind, int kLanes, int kVecs, Tail kTail>
[[gnu::always_inline]] inline void sum_tile(const SumRows<T, typename Kind::Index>& s, int64_t r,
                                            int64_t f0) {
  using V = Vec<T, kLanes>;
  constexpr int kPieces = kVecs + (kTail == Tail::kNone ? 0 : 1);
  constexpr int kPieceRegisters = sizeof(V) > kRegisterBytes ? sizeof(V) / kRegisterBytes : 1;
  constexpr int kSets = sets_for(kPieces * kPieceRegisters);
  const int64_t F = s.num_features, begin = s.rowptr[r], end = s.rowptr[r + 1];
  // Piece j covers features [offset[j], offset[j] + kLanes).
  int64_t offset[kPieces];
  for (int j = 0; j < kVecs; ++j) offset[j] = f0 + j * kLanes;
  if constexpr (kTail == Tail::kOverlap) offset[kVecs] = F - kLanes;
  if constexpr (kTail == Tail::kPadded) offset[kVecs] = f0 + kVecs * kLanes;
  const int64_t stride = s.x_stride;
  const T* __restrict x = s.x;
  V acc[kSets][kPieces];
  for (int set = 0; set < kSets; ++set) {
    for (int j = 0; j < kPieces; ++j) acc[set][j] = V{};
  }
  const auto add_edge = [&](auto set, int64_t e) __attribute__((always_inline)) {
    if (Kind::kPrefetch && e + kPrefetchEdges < end) {
      const T* ahead = x + s.col[e + kPrefetchEdges] * stride;
      prefetch_span(ahead + f0, kVecs * kLanes);
      if constexpr (kTail != Tail::kNone) prefetch_line(ahead + F - 1);
    }
    const T* __restrict xr = x + s.col[e] * stride;
    if constexpr (Kind::kFactor) {
      const int64_t c = s.col[e];
      T w = s.col_scale ? s.col_scale[c] : T(1);
      if (s.weight) w *= s.weight[s.edge_id ? s.edge_id[e] : e];
      for (int j = 0; j < kPieces; ++j) acc[set][j] += w * load<V>(xr + offset[j]);
    } else {
      for (int j = 0; j < kPieces; ++j) acc[set][j] += load<V>(xr + offset[j]);
    }
  };
  int64_t e = begin;
  for (; e + kSets <= end; e += kSets) unroll<kSets>([&](auto set) { add_edge(set, e + set); });
  unroll<kSets - 1>([&](auto set) {
    if (e + set < end) add_edge(set, e + set);
  });
  // Fixed pairwise tree over the sets: (0+1)+(2+3), ... Vector tiles unroll it at compile time
  // so the accumulators stay in registers: as a runtime loop they went through the stack,
  // about 25 ns a row, more than the edges cost on graphs of a few edges a row (Cora). Scalar
  // tiles (F < 4) keep the loop: unrolled, GCC vectorised their sums across the pieces in some
  // variants and not others, and the int32 and int64 variants must round alike.
  if constexpr (kLanes == 1) {
    for (int step = 1; step < kSets; step *= 2) {
      for (int set = 0; set + step < kSets; set += 2 * step) {
        for (int j = 0; j < kPieces; ++j) acc[set][j] += acc[set + step][j];
      }
    }
  } else {
    unroll<log2_of(kSets)>([&](auto level) {
      constexpr int kStep = 1 << level;
      unroll<kSets / (2 * kStep)>([&](auto pair) {
        constexpr int kSet = pair * 2 * kStep;
        for (int j = 0; j < kPieces; ++j) acc[kSet][j] += acc[kSet + kStep][j];
      });
    });
  }
  T* __restrict out = s.out + r * F;
  const T rs = s.row_scale ? s.row_scale[r] : T(1);
  for (int j = 0; j < kVecs + (kTail == Tail::kOverlap ? 1 : 0); ++j) {
    const V v = rs * acc[0][j];
    std::memcpy(out + offset[j], &v, sizeof(V));
  }
  if constexpr (kTail == Tail::kPadded) {
    // Lanes past the row's last feature summed the padding: once per row, so a plain copy.
    T lanes[kLanes];
    const V v = rs * acc[0][kVecs];
    std::memcpy(lanes, &v, sizeof(V));
    for (int64_t k = 0; k < F - offset[kVecs]; ++k) out[offset[kVecs] + k] = lanes[k];
  }
}

// Rows [first, last): per row, whole 256-byte tiles, then one pass over what is left (see the
// header comment). The last tile's kind is chosen once for all the rows, and the row loop runs
// inside it: chosen a row, the forward of a PubMed-size graph (4.5 edges a row) at F = 16 ran
// 1.36x slower (505 against 370 us on a Zen 4 core; docs/benchmarks.md).
template <typename T, typename Kind>
void sum_rows_of(const SumRows<T, typename Kind::Index>& s, int64_t first, int64_t last) {
  constexpr int kLanes = kVectorBytes / static_cast<int>(sizeof(T));
  constexpr int kMaxVecs = kMaxTileBytes / kVectorBytes;
  const int64_t F = s.num_features;
  const int64_t f0 = F > kMaxVecs * kLanes ? (F - 1) / (kMaxVecs * kLanes) * kMaxVecs * kLanes : 0;
  const auto rows = [&](auto last_tile) __attribute__((always_inline)) {
    for (int64_t r = first; r < last; ++r) {
      for (int64_t f = 0; f < f0; f += kMaxVecs * kLanes) {
        sum_tile<T, Kind, kLanes, kMaxVecs, Tail::kNone>(s, r, f);
      }
      last_tile(r);
    }
  };
  const int64_t rest = F - f0;
  if (F < kLanes / 2) {
    // Narrower than half a vector: one scalar accumulator per feature (F = 1..3 in float).
    dispatch<kLanes / 2 - 1>(F, [&](auto width) {
      if constexpr (width > 0) {
        rows([&](int64_t r) { sum_tile<T, Kind, 1, width, Tail::kNone>(s, r, 0); });
      }
    });
  } else if (F < kLanes) {
    // Half a vector, and its overlapping twin when F is not exactly that.
    if (F == kLanes / 2) {
      return rows([&](int64_t r) { sum_tile<T, Kind, kLanes / 2, 1, Tail::kNone>(s, r, 0); });
    }
    rows([&](int64_t r) { sum_tile<T, Kind, kLanes / 2, 1, Tail::kOverlap>(s, r, 0); });
  } else {
    dispatch<kMaxVecs>(rest / kLanes, [&](auto vecs) {
      if (rest % kLanes == 0) {
        if constexpr (vecs > 0) {
          rows([&](int64_t r) { sum_tile<T, Kind, kLanes, vecs, Tail::kNone>(s, r, f0); });
        }
      } else if (Kind::kPadded && s.x_stride > F) {
        // Only the padded kinds compile this tile (each variant adds to the build time).
        if constexpr (Kind::kPadded && vecs < kMaxVecs) {
          rows([&](int64_t r) { sum_tile<T, Kind, kLanes, vecs, Tail::kPadded>(s, r, f0); });
        }
      } else {
        rows([&](int64_t r) { sum_tile<T, Kind, kLanes, vecs, Tail::kOverlap>(s, r, f0); });
      }
    });
  }
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
                      p.num_features,
                      p.num_features};
  constexpr bool kSpecialised = std::is_same_v<Index, int32_t> && std::is_same_v<T, float>;
  std::vector<T> fallback;
  if (fold_pays(p)) {
    const int64_t F = p.num_features;
    // The specialised variants read the copy with rows padded with zeros to whole vectors when
    // F is no multiple of the vector width and takes one pass: every load is then aligned to 32
    // bytes and never straddles two cache lines (F = 20: 80-byte rows straddle on about one
    // load in four), and no vector overlaps another. Each feature's sum is the same, bit for
    // bit. (Beyond one pass, a tail vector of its own would overlap the pass before it, whose
    // sums for the shared features it rounds differently, as it has other accumulator sets.)
    constexpr int64_t kLanes = kVectorBytes / static_cast<int64_t>(sizeof(T));
    const bool pad =
        kSpecialised && F > kLanes && F < kMaxTileBytes / int64_t(sizeof(T)) && F % kLanes != 0;
    const int64_t stride = pad ? (F + kLanes - 1) / kLanes * kLanes : F;
    // The copy lives in the calling thread's scratch memory, 64-byte aligned as torch aligns x
    // (a 64-byte row then spans one line, not two). Allocated per call instead, its megabytes
    // were freed back to the system and faulted in again on every call: PubMed-size, F = 16,
    // 584 page faults and about 1.9 ms a call instead of 0.4 ms on a VM (docs/benchmarks.md).
    T* __restrict dst = scratch_memory(static_cast<size_t>(p.num_cols * stride), fallback);
#pragma omp parallel for schedule(static) num_threads(max_threads())
    for (int64_t c = 0; c < p.num_cols; ++c) {
      for (int64_t k = 0; k < F; ++k) dst[c * stride + k] = s.col_scale[c] * s.x[c * F + k];
      for (int64_t k = F; k < stride; ++k) dst[c * stride + k] = T(0);
    }
    s.x = dst;
    s.x_stride = stride;
    s.col_scale = nullptr;
  }
  const bool factor = s.col_scale || s.weight;
  const bool prefetch = p.num_cols * s.x_stride * int64_t(sizeof(T)) > kPrefetchFrom;
  const auto run = [&](auto kind) {
    using Kind = decltype(kind);
    for_each_chunk(p.rowptr, p.num_rows, check,
                   [&](int64_t first, int64_t last) { sum_rows_of<T, Kind>(s, first, last); });
  };
  if constexpr (!kSpecialised) {
    run(SumKind<T, Index, true, true>());  // the generic variant: see kReadsCol32
  } else if (factor) {
    prefetch ? run(SumKind<T, Index, true, true, true>())
             : run(SumKind<T, Index, true, false, true>());
  } else {
    prefetch ? run(SumKind<T, Index, false, true, true>())
             : run(SumKind<T, Index, false, false, true>());
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

#pragma GCC diagnostic pop
