// AVX-512 n-hop walks for paper and simple modes on int32 adjacencies, chosen at run time by
// sample_nhop_cpu.cpp where the CPU has AVX-512F/BW/DQ/VL; the same draws as
// sample_nhop_block.h, so the results are identical bit for bit. The random neighbour reads go
// to the 16-bit copy of out_nbr where the caller passes one (SampleNhopParams::out_nbr16).
// Only the functions marked GALFAST_AVX512 use those instructions (a function attribute, not a
// build flag, so no inline function shared with the baseline code is compiled for AVX-512).
//
// Thread mapping: a thread walks a range of walks in blocks of kBlock, hop-major, 16 walks per
// vector lane group. Per hop, one loop over the block gathers each walk's drawn neighbour
// (prefetched one loop earlier), checks it against the walk's path, gathers the node's row
// bounds, draws the next slot from the hop's hash words and prefetches it. A hop's SplitMix64
// hashes are computed 8 walk pairs at a time in a loop of their own. Blocks overlap: the loop
// that reads the last hop of block k - 1 also draws the first hop of block k, so the core
// always has reads in flight (without it, a 1-hop block would prefetch everything, then wait).
#include "walk/sample_nhop_simd.h"

#if defined(GALFAST_X86_DISPATCH)

// GCC 12 warns inside its own AVX-512 intrinsics when they are inlined into functions with a
// target attribute (their _mm512_undefined_* self-initialisation; GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "common/prefetch.h"
#include "walk/sample_nhop_block.h"
#include "walk/walk_random.h"

#define GALFAST_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace galfast {
namespace avx512 {
namespace {

constexpr int kLanes = 16;

// A call whose ends outgrow the L2 cache writes them with non-temporal stores: a normal store
// first reads its line, and those reads compete with the walks' random reads for the core's
// line fill buffers (1M 1-hop walks on the MovieLens-size graph: about 1.25x faster;
// docs/benchmarks.md, "n-hop sampler: 16-bit neighbour ids"). Smaller calls, such as a GAL
// training batch of 6,040 walks, keep normal stores, so the caller finds its ends in the cache.
constexpr int64_t kStreamedEndsBytes = 2 << 20;

// walk_random::mix64 on 8 lanes.
GALFAST_AVX512 inline __m512i mix64(__m512i z) {
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0x94D049BB133111EBull)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// uniform_below (common/philox.h) on 16 lanes: the high 32 bits of x * n.
GALFAST_AVX512 inline __m512i uniform_below(__m512i x, __m512i n) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(x, n), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(n, 32));
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

GALFAST_AVX512 inline __mmask16 lanes_below(int count) {
  return count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

// The random reads of out_nbr[slot], 16 lanes at a time, from the int32 array itself.
struct Neighbours32 {
  const int32_t* nbr;

  // out_nbr[slot] in the live lanes, -1 in the others.
  GALFAST_AVX512 __m512i gather(__m512i slot, __mmask16 live) const {
    return _mm512_mask_i32gather_epi32(_mm512_set1_epi32(-1), live, slot, nbr, 4);
  }
  const void* address(int32_t slot) const { return nbr + slot; }
  const uint16_t* ids16() const { return nullptr; }
};

// The same reads from the 16-bit copy. Each lane gathers the aligned 32-bit word holding its
// id (so no read straddles two cache lines) and takes the half its slot's parity selects; the
// copy is padded to an even count, so the word of the last slot lies inside it.
struct Neighbours16 {
  const uint16_t* nbr;

  GALFAST_AVX512 __m512i gather(__m512i slot, __mmask16 live) const {
    const __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live,
                                                     _mm512_srli_epi32(slot, 1), nbr, 4);
    const __m512i shift = _mm512_slli_epi32(_mm512_and_si512(slot, _mm512_set1_epi32(1)), 4);
    return _mm512_mask_and_epi32(_mm512_set1_epi32(-1), live, _mm512_srlv_epi32(word, shift),
                                 _mm512_set1_epi32(0xFFFF));
  }
  const void* address(int32_t slot) const { return nbr + slot; }
  const uint16_t* ids16() const { return nbr; }
};

template <typename Neighbours>
class SimdBlockWalker {
 public:
  // 64 walks of prefetched lines (4 KiB) stay in the L1 cache beside the row offsets until
  // read, and still queue more reads than the core can have in flight (measured on the
  // MovieLens-size graph with 16-bit ids and streamed ends: 64 ahead of 128 by 2-13% at 1-4
  // hops, 32 level with 64 at 1 hop and behind at 3-4, 256 and 512 slower).
  static constexpr int kBlock = 64;

  GALFAST_AVX512 SimdBlockWalker(const SampleNhopParams& p, const WalkGraph<int32_t>& g,
                                 Neighbours neighbours, bool offsets_cached)
      : p_(p),
        g_(g),
        neighbours_(neighbours),
        first_blocked_(first_blocked(p.mode)),
        offsets_cached_(offsets_cached),
        stream_ends_(p.num_walks * static_cast<int64_t>(sizeof(int64_t)) >= kStreamedEndsBytes),
        num_nodes_(_mm512_set1_epi64(p.num_nodes)) {}

  // Walks [begin, end) of the batch; false (and nothing walked after it) where a block holds a
  // start outside [0, num_nodes).
  GALFAST_AVX512 bool run(int64_t begin, int64_t end) {
    Block* previous = nullptr;
    for (int64_t b = begin; b < end; b += kBlock) {
      Block& block = blocks_[(b - begin) / kBlock % 2];
      if (!start_block(block, b, static_cast<int>(std::min<int64_t>(end - b, kBlock)))) {
        return false;
      }
      first_hop_overlapping(block, previous);
      for (int hop = 0; hop + 1 < p_.hops; ++hop) step(block, hop);
      previous = &block;
    }
    if (previous != nullptr) {
      for (int j = 0; j < previous->n; j += kLanes) finish_group(*previous, j);
      if (p_.paths != nullptr) store_paths(*previous);
    }
    return true;
  }

 private:
  // Walk j of a block is walk first_walk + j of the stream and walk begin + j of the batch;
  // path[h * kBlock + j] is the node it reached at hop h (-1 once it failed), slot[j] the slot
  // of out_nbr it drew for its next hop (-1: failed).
  struct Block {
    int64_t begin;
    uint64_t first_walk;
    int n;
    int lead;  // words[lead + j] is walk j's word: the block's first pair may start before it
    int num_pairs;
    alignas(64) uint64_t keys[kBlock / 2 + 8];
    alignas(64) uint32_t words[kBlock + 16];
    alignas(64) int32_t slot[kBlock];
    alignas(64) int32_t path[(kMaxHops + 1) * kBlock];
  };

  // Checks the block's starts, computes its pair keys and the words of hop 0.
  GALFAST_AVX512 bool start_block(Block& block, int64_t begin, int n) {
    const int64_t* starts = p_.starts + begin;
    __mmask8 bad = 0;
    for (int j = 0; j < n; j += 8) {
      const __mmask8 m = static_cast<__mmask8>(lanes_below(n - j));
      bad |= _mm512_mask_cmpge_epu64_mask(m, _mm512_maskz_loadu_epi64(m, starts + j), num_nodes_);
    }
    if (bad) return false;
    block.begin = begin;
    block.n = n;
    block.first_walk = p_.walk_offset + static_cast<uint64_t>(begin);
    const uint64_t first_pair = block.first_walk / 2;
    block.lead = static_cast<int>(block.first_walk % 2);
    block.num_pairs =
        static_cast<int>((block.first_walk + static_cast<uint64_t>(n) + 1) / 2 - first_pair);
    // K(p) = mix64(S + (p + 1) * gamma) for pairs first_pair + k, 8 at a time
    const __m512i gamma = _mm512_set1_epi64(static_cast<int64_t>(walk_random::kGamma));
    const __m512i stream = _mm512_set1_epi64(static_cast<int64_t>(g_.stream_key));
    __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(first_pair + 1)),
                                       _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    for (int k = 0; k < block.num_pairs; k += 8) {
      const __m512i key = mix64(_mm512_add_epi64(stream, _mm512_mullo_epi64(counter, gamma)));
      _mm512_store_si512(block.keys + k, key);
      _mm512_store_si512(block.words + 2 * k, key);
      counter = _mm512_add_epi64(counter, _mm512_set1_epi64(8));
    }
    return true;
  }

  // words = the first-draw words of hop `hop` >= 1: B(p, hop) = mix64(K(p) + hop * gamma).
  GALFAST_AVX512 void hash_words(Block& block, int hop) {
    const __m512i offset =
        _mm512_set1_epi64(static_cast<int64_t>(static_cast<uint64_t>(hop) * walk_random::kGamma));
    for (int k = 0; k < block.num_pairs; k += 8) {
      const __m512i key = _mm512_load_si512(block.keys + k);
      _mm512_store_si512(block.words + 2 * k, mix64(_mm512_add_epi64(key, offset)));
    }
  }

  // The words of a block's draws at one hop, for lanes j .. j + 15.
  GALFAST_AVX512 static __m512i words_at(const Block& block, int j) {
    return _mm512_loadu_si512(block.words + block.lead + j);
  }

  // The first hop's slots are prefetched into L1, the later hops' into L2 only: on a Zen 4 core
  // the later hops ran 5-10% faster (2-4 hops on the MovieLens-size graph; docs/benchmarks.md),
  // the first hop (read a block later, by the next block's loop) slower.
  static constexpr int kLaterLocality = 2;  // prefetch_line's: into L2

  // Lanes j .. j + 15 of a block, at `node` (-1: failed), draw their slot in the node's row
  // (word from `words`) and prefetch it into the caches kLocality names; a node without
  // out-edges fails the walk (slot -1).
  template <int kLocality = 3>
  GALFAST_AVX512 void draw(Block& block, int j, __mmask16 m, __m512i node, __m512i words) {
    const __mmask16 live = _mm512_mask_cmpge_epi32_mask(m, node, _mm512_setzero_si512());
    // each walk's row bounds out_ptr[node], out_ptr[node + 1] as one 64-bit read
    const __m512i low =
        _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(live),
                                    _mm512_castsi512_si256(node), g_.out_ptr, 4);
    const __m512i high =
        _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(live >> 8),
                                    _mm512_extracti64x4_epi64(node, 1), g_.out_ptr, 4);
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i row_begin = _mm512_permutex2var_epi32(low, evens, high);
    const __m512i row_end =
        _mm512_permutex2var_epi32(low, _mm512_add_epi32(evens, _mm512_set1_epi32(1)), high);
    const __m512i degree = _mm512_sub_epi32(row_end, row_begin);
    const __mmask16 drawn = _mm512_mask_cmpneq_epi32_mask(live, degree, _mm512_setzero_si512());
    const __m512i slot = _mm512_mask_add_epi32(_mm512_set1_epi32(-1), drawn, row_begin,
                                               uniform_below(words, degree));
    _mm512_store_si512(block.slot + j, slot);
    // all 16 lanes, past the block's end too: a prefetch never faults, and a fixed count
    // saves a compare per lane
    for (int l = 0; l < kLanes; ++l) {
      prefetch_line<false, kLocality>(neighbours_.address(block.slot[j + l]));
    }
  }

  // Lanes j .. j + 15 read the neighbour in their slot of hop `hop` (prefetched), redraw the
  // rare ones already on their path, and store the node they reach (-1: failed) at hop + 1.
  GALFAST_AVX512 __m512i take(Block& block, int j, __mmask16 m, int hop) {
    const __m512i slot = _mm512_load_si512(block.slot + j);
    const __mmask16 live = _mm512_mask_cmpge_epi32_mask(m, slot, _mm512_setzero_si512());
    __m512i node = neighbours_.gather(slot, live);
    __mmask16 blocked = 0;
    for (int h = first_blocked_; h <= hop; ++h) {
      blocked |=
          _mm512_mask_cmpeq_epi32_mask(live, node, _mm512_load_si512(block.path + h * kBlock + j));
    }
    int32_t* next = block.path + (hop + 1) * kBlock + j;
    _mm512_store_si512(next, node);
    if (blocked) {
      redraw(block, j, blocked, hop);
      node = _mm512_load_si512(next);
    }
    return node;
  }

  [[gnu::noinline, gnu::cold]] void redraw(Block& block, int j, unsigned blocked, int hop) {
    for (int l = 0; l < kLanes; ++l) {
      if (!((blocked >> l) & 1)) continue;
      block.path[(hop + 1) * kBlock + j + l] =
          redraw_hop(g_, block.first_walk + static_cast<uint64_t>(j + l), block.path + j + l,
                     kBlock, hop, neighbours_.ids16());
    }
  }

  // Hop 0 of `block`, overlapped with the last hop of `previous` (null for the first block).
  GALFAST_AVX512 void first_hop_overlapping(Block& block, Block* previous) {
    const int n = std::max(block.n, previous != nullptr ? previous->n : 0);
    for (int j = 0; j < n; j += kLanes) {
      if (previous != nullptr && j < previous->n) finish_group(*previous, j);
      if (j < block.n) first_group(block, j);
    }
    if (previous != nullptr && p_.paths != nullptr) store_paths(*previous);
  }

  // The starts are read once, a few blocks ahead with prefetchnta: a plain read would pass them
  // through L2 into L3 (a victim cache on Zen 4), where they would evict the neighbour ids that
  // the random reads need. On the MovieLens-size graph, 1M starts, with the numba peer run
  // between calls: 5-9% more walks/s at 1-2 hops (docs/benchmarks.md, session 15).
  static constexpr int kStartsAhead = 256;

  GALFAST_AVX512 void first_group(Block& block, int j) {
    const __mmask16 m = lanes_below(block.n - j);
    const int64_t* starts = p_.starts + block.begin + j;
    if (block.begin + j + kStartsAhead + kLanes <= p_.num_walks) {
      prefetch_line<false, 0>(starts + kStartsAhead);
      prefetch_line<false, 0>(starts + kStartsAhead + 8);
    }
    const __m256i low = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(m & 0xFF, starts));
    const __m256i high = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(m >> 8, starts + 8));
    const __m512i node = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
    _mm512_store_si512(block.path + j, node);
    draw(block, j, m, node, words_at(block, j));
  }

  // Lanes j .. j + 15 take their last hop and write their ends.
  GALFAST_AVX512 void finish_group(Block& block, int j) {
    const __mmask16 m = lanes_below(block.n - j);
    const __m512i node = take(block, j, m, p_.hops - 1);
    int64_t* end = p_.end + block.begin + j;
    if (stream_ends_ && m == 0xFFFF && reinterpret_cast<uintptr_t>(end) % 64 == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(end),
                          _mm512_cvtepi32_epi64(_mm512_castsi512_si256(node)));
      _mm512_stream_si512(reinterpret_cast<__m512i*>(end + 8),
                          _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(node, 1)));
      return;
    }
    _mm512_mask_storeu_epi64(end, m & 0xFF, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(node)));
    _mm512_mask_storeu_epi64(end + 8, m >> 8,
                             _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(node, 1)));
  }

  // Moves every walk of the block by hop `hop` and draws its slot of hop `hop` + 1.
  GALFAST_AVX512 void step(Block& block, int hop) {
    hash_words(block, hop + 1);
    if (offsets_cached_) {
      for (int j = 0; j < block.n; j += kLanes) {
        const __mmask16 m = lanes_below(block.n - j);
        draw<kLaterLocality>(block, j, m, take(block, j, m, hop), words_at(block, j));
      }
      return;
    }
    // the row offsets miss the cache too: prefetch them a loop ahead as well
    const int32_t* next = block.path + (hop + 1) * kBlock;
    for (int j = 0; j < block.n; j += kLanes) {
      take(block, j, lanes_below(block.n - j), hop);
      const int lanes = std::min(kLanes, block.n - j);
      for (int l = 0; l < lanes; ++l) prefetch_line(g_.out_ptr + next[j + l]);
    }
    for (int j = 0; j < block.n; j += kLanes) {
      const __mmask16 m = lanes_below(block.n - j);
      draw<kLaterLocality>(block, j, m, _mm512_load_si512(next + j), words_at(block, j));
    }
  }

  void store_paths(const Block& block) {
    const int width = p_.hops + 1;
    for (int j = 0; j < block.n; ++j) {
      int64_t* out = p_.paths + (block.begin + j) * width;
      for (int h = 0; h < width; ++h) out[h] = block.path[h * kBlock + j];
    }
  }

  const SampleNhopParams& p_;
  const WalkGraph<int32_t>& g_;
  const Neighbours neighbours_;
  const int first_blocked_;
  const bool offsets_cached_;
  const bool stream_ends_;
  const __m512i num_nodes_;
  Block blocks_[2];
};

}  // namespace

bool supported() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
}

bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached) {
  const bool ok =
      p.out_nbr16 != nullptr
          ? SimdBlockWalker<Neighbours16>(p, g, {p.out_nbr16}, offsets_cached).run(begin, end)
          : SimdBlockWalker<Neighbours32>(p, g, {g.out_nbr}, offsets_cached).run(begin, end);
  _mm_sfence();  // the streamed ends are visible before the caller reads them
  return ok;
}

}  // namespace avx512
}  // namespace galfast

#endif  // GALFAST_X86_DISPATCH
