// AVX-512 n-hop walks: the lane block walks of sample_nhop_lanes.h on 16 lanes, chosen at run
// time by sample_nhop_cpu.cpp where the CPU has AVX-512F/BW/DQ/VL and the ids are int32.
// Only the functions marked GALFAST_LANES_TARGET use those instructions.
#include "walk/sample_nhop_simd.h"

#if defined(GALFAST_X86_DISPATCH)

// GCC 12 warns inside its own AVX-512 intrinsics when they are inlined into functions with a
// target attribute (their _mm512_undefined_* self-initialisation; GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#define GALFAST_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#include "walk/sample_nhop_lanes.h"

namespace galfast {
namespace avx512 {
namespace {

// walk_random::mix64 on 8 lanes.
GALFAST_LANES_TARGET inline __m512i mix64(__m512i z) {
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0x94D049BB133111EBull)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// uniform_below (common/philox.h) on 16 lanes: the high 32 bits of x * n.
GALFAST_LANES_TARGET inline __m512i uniform_below(__m512i x, __m512i n) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(x, n), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(n, 32));
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

// The lanes of sample_nhop_lanes.h: 16 int32 in a zmm register, masks in mask registers.
struct Lanes16 {
  using Vec = __m512i;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;

  GALFAST_LANES_TARGET static Mask below(int count) {
    return count >= kLanes ? Mask(0xFFFF) : Mask((1u << count) - 1);
  }
  GALFAST_LANES_TARGET static Mask nonnegative(Mask m, Vec v) {
    return _mm512_mask_cmpge_epi32_mask(m, v, _mm512_setzero_si512());
  }
  GALFAST_LANES_TARGET static Mask equal(Mask m, Vec a, Vec b) {
    return _mm512_mask_cmpeq_epi32_mask(m, a, b);
  }
  static Mask none() { return 0; }
  static Mask either(Mask a, Mask b) { return a | b; }
  static unsigned bits(Mask m) { return m; }
  GALFAST_LANES_TARGET static Vec load(const int32_t* p) { return _mm512_load_si512(p); }
  GALFAST_LANES_TARGET static void store(int32_t* p, Vec v) { _mm512_store_si512(p, v); }
  GALFAST_LANES_TARGET static Vec words(const uint32_t* p) { return _mm512_loadu_si512(p); }

  GALFAST_LANES_TARGET static bool starts_in_range(const int64_t* starts, int n,
                                                   int64_t num_nodes) {
    const __m512i limit = _mm512_set1_epi64(num_nodes);
    __mmask8 bad = 0;
    for (int j = 0; j < n; j += 8) {
      const __mmask8 m = static_cast<__mmask8>(below(n - j));
      bad |= _mm512_mask_cmpge_epu64_mask(m, _mm512_maskz_loadu_epi64(m, starts + j), limit);
    }
    return bad == 0;
  }

  // The starts of lanes m, narrowed to int32 (they are node ids).
  GALFAST_LANES_TARGET static Vec starts32(const int64_t* starts, Mask m) {
    const __m256i low = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(m & 0xFF, starts));
    const __m256i high = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(m >> 8, starts + 8));
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  }

  // keys[k] = K(first_pair + k) = mix64(S + (first_pair + k + 1) * gamma), 8 pairs at a time;
  // the same bits are the words of hop 0.
  GALFAST_LANES_TARGET static void pair_keys(uint64_t* keys, uint32_t* words, uint64_t stream_key,
                                             uint64_t first_pair, int num_pairs) {
    const __m512i gamma = _mm512_set1_epi64(static_cast<int64_t>(walk_random::kGamma));
    const __m512i stream = _mm512_set1_epi64(static_cast<int64_t>(stream_key));
    __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(first_pair + 1)),
                                       _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    for (int k = 0; k < num_pairs; k += 8) {
      const __m512i key = mix64(_mm512_add_epi64(stream, _mm512_mullo_epi64(counter, gamma)));
      _mm512_store_si512(keys + k, key);
      _mm512_store_si512(words + 2 * k, key);
      counter = _mm512_add_epi64(counter, _mm512_set1_epi64(8));
    }
  }

  // words = the first-draw words of a hop >= 1: B(p, hop) = mix64(K(p) + offset), offset =
  // hop * gamma.
  GALFAST_LANES_TARGET static void hop_words(const uint64_t* keys, uint32_t* words, int num_pairs,
                                             uint64_t offset) {
    const __m512i add = _mm512_set1_epi64(static_cast<int64_t>(offset));
    for (int k = 0; k < num_pairs; k += 8) {
      _mm512_store_si512(words + 2 * k, mix64(_mm512_add_epi64(_mm512_load_si512(keys + k), add)));
    }
  }

  GALFAST_LANES_TARGET static Vec draw(const int32_t* out_ptr, Vec node, Mask live, Vec words) {
    // each walk's row bounds out_ptr[node], out_ptr[node + 1] as one 64-bit read
    const __m512i low =
        _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(live),
                                    _mm512_castsi512_si256(node), out_ptr, 4);
    const __m512i high =
        _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(live >> 8),
                                    _mm512_extracti64x4_epi64(node, 1), out_ptr, 4);
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i row_begin = _mm512_permutex2var_epi32(low, evens, high);
    const __m512i row_end =
        _mm512_permutex2var_epi32(low, _mm512_add_epi32(evens, _mm512_set1_epi32(1)), high);
    const __m512i degree = _mm512_sub_epi32(row_end, row_begin);
    const __mmask16 drawn = _mm512_mask_cmpneq_epi32_mask(live, degree, _mm512_setzero_si512());
    return _mm512_mask_add_epi32(_mm512_set1_epi32(-1), drawn, row_begin,
                                 uniform_below(words, degree));
  }

  // Prefetches into L1 the lines of ids[slot] of all 16 lanes (a slot of -1 prefetches the
  // line before ids: a prefetch never faults), the addresses taken from the vector.
  template <typename T>
  GALFAST_LANES_TARGET static void prefetch_slots(const T* ids, Vec slot) {
    constexpr int kShift = __builtin_ctz(sizeof(T));
    const __m512i base = _mm512_set1_epi64(reinterpret_cast<int64_t>(ids));
    for (const __m256i half : {_mm512_castsi512_si256(slot), _mm512_extracti64x4_epi64(slot, 1)}) {
      const __m512i address =
          _mm512_add_epi64(base, _mm512_slli_epi64(_mm512_cvtepi32_epi64(half), kShift));
      for (const __m128i pair :
           {_mm512_castsi512_si128(address), _mm512_extracti64x2_epi64(address, 1),
            _mm512_extracti64x2_epi64(address, 2), _mm512_extracti64x2_epi64(address, 3)}) {
        prefetch_line(reinterpret_cast<const void*>(_mm_cvtsi128_si64(pair)));
        prefetch_line(reinterpret_cast<const void*>(_mm_extract_epi64(pair, 1)));
      }
    }
  }

  GALFAST_LANES_TARGET static Vec gather32(const int32_t* nbr, Vec slot, Mask live) {
    return _mm512_mask_i32gather_epi32(_mm512_set1_epi32(-1), live, slot, nbr, 4);
  }

  // Each lane gathers the aligned 32-bit word holding its id and takes the half its slot's
  // parity selects.
  GALFAST_LANES_TARGET static Vec gather16(const uint16_t* nbr, Vec slot, Mask live) {
    const __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live,
                                                     _mm512_srli_epi32(slot, 1), nbr, 4);
    const __m512i shift = _mm512_slli_epi32(_mm512_and_si512(slot, _mm512_set1_epi32(1)), 4);
    return _mm512_mask_and_epi32(_mm512_set1_epi32(-1), live, _mm512_srlv_epi32(word, shift),
                                 _mm512_set1_epi32(0xFFFF));
  }

  // The ends of lanes m, widened to int64; with non-temporal stores where `streamed` (a full
  // group) and the ends start a cache line.
  GALFAST_LANES_TARGET static void store_ends(int64_t* end, Vec node, Mask m, bool streamed) {
    const __m512i low = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(node));
    const __m512i high = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(node, 1));
    if (streamed && reinterpret_cast<uintptr_t>(end) % 64 == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(end), low);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(end + 8), high);
      return;
    }
    _mm512_mask_storeu_epi64(end, m & 0xFF, low);
    _mm512_mask_storeu_epi64(end + 8, m >> 8, high);
  }
};

}  // namespace

bool supported() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
}

bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached) {
  return walk_lane_blocks<Lanes16>(p, g, begin, end, offsets_cached);
}

}  // namespace avx512
}  // namespace galfast

#endif  // GALFAST_X86_DISPATCH
