// AVX2 n-hop walks: the lane block walks of sample_nhop_lanes.h on 8 lanes, chosen at run time
// by sample_nhop_cpu.cpp where the CPU has AVX2 but not AVX-512 and the ids are int32. Not a
// *_avx2.cpp file (CMakeLists.txt compiles those whole with -mavx2): only the functions marked
// GALFAST_LANES_TARGET use AVX2, so the shared code this file instantiates (redraw_hop) stays
// baseline code the linker may keep for every caller.
#include "walk/sample_nhop_simd.h"

#if defined(GALFAST_X86_DISPATCH)

#include <immintrin.h>

#include <cstdint>

#define GALFAST_LANES_TARGET __attribute__((target("avx2")))
#include "walk/sample_nhop_lanes.h"

namespace galfast {
namespace avx2 {
namespace {

// a * b mod 2^64 on 4 lanes (AVX2 has no 64-bit multiply), b_high = b >> 32: the low product
// plus the two cross products shifted up; the high product falls outside 64 bits.
GALFAST_LANES_TARGET inline __m256i mullo64(__m256i a, __m256i b, __m256i b_high) {
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b), _mm256_mul_epu32(a, b_high));
  return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

GALFAST_LANES_TARGET inline __m256i set1_64(uint64_t x) {
  return _mm256_set1_epi64x(static_cast<int64_t>(x));
}

// walk_random::mix64 on 4 lanes.
GALFAST_LANES_TARGET inline __m256i mix64(__m256i z) {
  constexpr uint64_t kFirst = 0xBF58476D1CE4E5B9ull, kSecond = 0x94D049BB133111EBull;
  z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), set1_64(kFirst),
              set1_64(kFirst >> 32));
  z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), set1_64(kSecond),
              set1_64(kSecond >> 32));
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// uniform_below (common/philox.h) on 8 lanes: the high 32 bits of x * n.
GALFAST_LANES_TARGET inline __m256i uniform_below(__m256i x, __m256i n) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(x, n), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(n, 32));
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// A mask of 8 int32 lanes widened to the 64-bit lanes of its low or high half.
GALFAST_LANES_TARGET inline __m256i low_half64(__m256i mask) {
  return _mm256_cvtepi32_epi64(_mm256_castsi256_si128(mask));
}
GALFAST_LANES_TARGET inline __m256i high_half64(__m256i mask) {
  return _mm256_cvtepi32_epi64(_mm256_extracti128_si256(mask, 1));
}

// The lanes of sample_nhop_lanes.h: 8 int32 in a ymm register; a mask is a ymm register too,
// all ones in its lanes.
struct Lanes8 {
  using Vec = __m256i;
  using Mask = __m256i;
  static constexpr int kLanes = 8;

  GALFAST_LANES_TARGET static Mask below(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  GALFAST_LANES_TARGET static Mask nonnegative(Mask m, Vec v) {
    return _mm256_and_si256(m, _mm256_cmpgt_epi32(v, _mm256_set1_epi32(-1)));
  }
  GALFAST_LANES_TARGET static Mask equal(Mask m, Vec a, Vec b) {
    return _mm256_and_si256(m, _mm256_cmpeq_epi32(a, b));
  }
  GALFAST_LANES_TARGET static Mask none() { return _mm256_setzero_si256(); }
  GALFAST_LANES_TARGET static Mask either(Mask a, Mask b) { return _mm256_or_si256(a, b); }
  GALFAST_LANES_TARGET static unsigned bits(Mask m) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m)));
  }
  GALFAST_LANES_TARGET static Vec load(const int32_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  GALFAST_LANES_TARGET static void store(int32_t* p, Vec v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);
  }
  GALFAST_LANES_TARGET static Vec words(const uint32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }

  // A start is out of range where it is negative or above num_nodes - 1 (AVX2 has no unsigned
  // 64-bit compare).
  GALFAST_LANES_TARGET static bool starts_in_range(const int64_t* starts, int n,
                                                   int64_t num_nodes) {
    const __m256i last = _mm256_set1_epi64x(num_nodes - 1);
    __m256i bad = _mm256_setzero_si256();
    for (int j = 0; j < n; j += 4) {
      const __m256i s = _mm256_maskload_epi64(reinterpret_cast<const long long*>(starts + j),
                                              low_half64(below(n - j)));
      bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi64(s, last),
                                                 _mm256_cmpgt_epi64(_mm256_setzero_si256(), s)));
    }
    return _mm256_testz_si256(bad, bad);
  }

  // The starts of lanes m, narrowed to int32 (they are node ids).
  GALFAST_LANES_TARGET static Vec starts32(const int64_t* starts, Mask m) {
    const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    const __m256i low = _mm256_permutevar8x32_epi32(
        _mm256_maskload_epi64(reinterpret_cast<const long long*>(starts), low_half64(m)), evens);
    const __m256i high = _mm256_permutevar8x32_epi32(
        _mm256_maskload_epi64(reinterpret_cast<const long long*>(starts + 4), high_half64(m)),
        evens);
    return _mm256_blend_epi32(low, high, 0xF0);
  }

  // keys[k] = K(first_pair + k), 4 pairs at a time; the same bits are the words of hop 0.
  GALFAST_LANES_TARGET static void pair_keys(uint64_t* keys, uint32_t* words, uint64_t stream_key,
                                             uint64_t first_pair, int num_pairs) {
    const __m256i gamma = set1_64(walk_random::kGamma);
    const __m256i gamma_high = set1_64(walk_random::kGamma >> 32);
    const __m256i stream = set1_64(stream_key);
    __m256i counter = _mm256_add_epi64(set1_64(first_pair + 1), _mm256_setr_epi64x(0, 1, 2, 3));
    for (int k = 0; k < num_pairs; k += 4) {
      const __m256i key = mix64(_mm256_add_epi64(stream, mullo64(counter, gamma, gamma_high)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(keys + k), key);
      _mm256_store_si256(reinterpret_cast<__m256i*>(words + 2 * k), key);
      counter = _mm256_add_epi64(counter, set1_64(4));
    }
  }

  // words = the first-draw words of a hop >= 1: mix64(K(p) + offset), offset = hop * gamma.
  GALFAST_LANES_TARGET static void hop_words(const uint64_t* keys, uint32_t* words, int num_pairs,
                                             uint64_t offset) {
    const __m256i add = set1_64(offset);
    for (int k = 0; k < num_pairs; k += 4) {
      const __m256i key = _mm256_load_si256(reinterpret_cast<const __m256i*>(keys + k));
      _mm256_store_si256(reinterpret_cast<__m256i*>(words + 2 * k),
                         mix64(_mm256_add_epi64(key, add)));
    }
  }

  GALFAST_LANES_TARGET static Vec draw(const int32_t* out_ptr, Vec node, Mask live, Vec words) {
    // each walk's row bounds out_ptr[node], out_ptr[node + 1] as one 64-bit read, 4 lanes per
    // gather; then the begins and the ends are picked out of the pairs, in lane order
    const long long* pairs = reinterpret_cast<const long long*>(out_ptr);
    const __m256 low = _mm256_castsi256_ps(_mm256_mask_i32gather_epi64(
        _mm256_setzero_si256(), pairs, _mm256_castsi256_si128(node), low_half64(live), 4));
    const __m256 high = _mm256_castsi256_ps(_mm256_mask_i32gather_epi64(
        _mm256_setzero_si256(), pairs, _mm256_extracti128_si256(node, 1), high_half64(live), 4));
    const __m256i row_begin = _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0))),
        _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i row_end = _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i degree = _mm256_sub_epi32(row_end, row_begin);
    const __m256i drawn =
        _mm256_andnot_si256(_mm256_cmpeq_epi32(degree, _mm256_setzero_si256()), live);
    return _mm256_blendv_epi8(_mm256_set1_epi32(-1),
                              _mm256_add_epi32(row_begin, uniform_below(words, degree)), drawn);
  }

  // Prefetches into L1 the lines of ids[slot] of all 8 lanes (a slot of -1 prefetches the line
  // before ids: a prefetch never faults), reading the lanes back from memory. Taking them from
  // the vector, as the AVX-512 lanes do, made these walks slower (2 hops on Zen 4: 0.82-0.96x
  // of the peer against 1.19-1.22x; docs/benchmarks.md, session 20).
  template <typename T>
  GALFAST_LANES_TARGET static void prefetch_slots(const T* ids, Vec slot) {
    alignas(32) int32_t lanes[kLanes];
    store(lanes, slot);
    for (const int32_t s : lanes) prefetch_line(ids + s);
  }

  GALFAST_LANES_TARGET static Vec gather32(const int32_t* nbr, Vec slot, Mask live) {
    return _mm256_mask_i32gather_epi32(_mm256_set1_epi32(-1), nbr, slot, live, 4);
  }

  // Each lane gathers the aligned 32-bit word holding its id and takes the half its slot's
  // parity selects.
  GALFAST_LANES_TARGET static Vec gather16(const uint16_t* nbr, Vec slot, Mask live) {
    const __m256i word =
        _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(nbr),
                                    _mm256_srli_epi32(slot, 1), live, 4);
    const __m256i shift = _mm256_slli_epi32(_mm256_and_si256(slot, _mm256_set1_epi32(1)), 4);
    const __m256i id = _mm256_and_si256(_mm256_srlv_epi32(word, shift), _mm256_set1_epi32(0xFFFF));
    return _mm256_blendv_epi8(_mm256_set1_epi32(-1), id, live);
  }

  // The ends of lanes m, widened to int64; with non-temporal stores where `streamed` (a full
  // group) and the ends start a 32-byte boundary.
  GALFAST_LANES_TARGET static void store_ends(int64_t* end, Vec node, Mask m, bool streamed) {
    const __m256i low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(node));
    const __m256i high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(node, 1));
    if (streamed && reinterpret_cast<uintptr_t>(end) % 32 == 0) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(end), low);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(end + 4), high);
      return;
    }
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(end), low_half64(m), low);
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(end + 4), high_half64(m), high);
  }
};

}  // namespace

bool supported() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached) {
  return walk_lane_blocks<Lanes8>(p, g, begin, end, offsets_cached);
}

}  // namespace avx2
}  // namespace galfast

#endif  // GALFAST_X86_DISPATCH
