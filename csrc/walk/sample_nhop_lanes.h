// The vector n-hop walks for paper and simple modes on int32 adjacencies, written once over a
// `Lanes` type that supplies the instructions of one vector width: sample_nhop_avx512.cpp
// (16 lanes) and sample_nhop_avx2_walk.cpp (8 lanes) include it after defining
// GALFAST_LANES_TARGET, the target attribute every function here takes (a function attribute,
// not a build flag, so no inline function shared with the baseline code is compiled for the
// wider ISA). Both draw as sample_nhop_block.h does, so the results are identical bit for bit.
// The random neighbour reads go to the 16-bit copy of out_nbr where the caller passes one
// (SampleNhopParams::out_nbr16).
//
// Thread mapping: a thread walks a range of walks in blocks of kBlock, hop-major, kLanes walks
// per lane group. Per hop, one loop over the block gathers each walk's drawn neighbour
// (prefetched one loop earlier), checks it against the walk's path, gathers the node's row
// bounds, draws the next slot from the hop's hash words and prefetches it. A hop's SplitMix64
// hashes are computed kLanes / 2 walk pairs at a time in a loop of their own. Blocks overlap:
// the loop that reads the last hop of block k - 1 also draws the first hop of block k, so the
// core always has reads in flight (without it, a 1-hop block would prefetch everything, then
// wait).
//
// `Lanes` provides Vec (kLanes int32) and Mask types and, as static functions: below(count),
// the mask of the first count lanes; nonnegative(m, v) and equal(m, a, b), masks within m;
// none(), either(a, b) and bits(m); load and store of an aligned Vec; words(p), an unaligned
// Vec of uint32; starts_in_range(starts, n, num_nodes); starts32(starts, m), starts narrowed
// to int32; pair_keys(...) and hop_words(...), the hash loops; draw(out_ptr, node, live,
// words), the slot each lane draws in its node's row (-1 where not live or the row is empty);
// prefetch_slots(ids, slot), the lines of ids[slot] into L1; gather16 and gather32, the
// neighbour reads; store_ends(end, node, m, streamed).
#pragma once

#ifndef GALFAST_LANES_TARGET
#error "define GALFAST_LANES_TARGET before including sample_nhop_lanes.h"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/prefetch.h"
#include "walk/sample_nhop_block.h"
#include "walk/walk_random.h"

namespace galfast {
namespace {

// A call whose ends outgrow the L2 cache writes them with non-temporal stores: a normal store
// first reads its line, and those reads compete with the walks' random reads for the core's
// line fill buffers (1M 1-hop walks on the MovieLens-size graph: about 1.25x faster;
// docs/benchmarks.md, "n-hop sampler: 16-bit neighbour ids"). Smaller calls, such as a GAL
// training batch of 6,040 walks, keep normal stores, so the caller finds its ends in the cache.
constexpr int64_t kStreamedEndsBytes = 2 << 20;

// The random reads of out_nbr[slot] from `nbr`: the int32 array itself (Id int32_t) or its
// 16-bit copy (uint16_t; Lanes::gather16 reads the aligned 32-bit word holding each id, so no
// read straddles two cache lines, and the copy is padded to an even count).
template <typename Lanes, typename Id>
struct Neighbours {
  using Vec = typename Lanes::Vec;
  static constexpr bool kIds16 = std::is_same_v<Id, uint16_t>;
  const Id* nbr;

  // out_nbr[slot] in the live lanes, -1 in the others.
  GALFAST_LANES_TARGET Vec gather(Vec slot, typename Lanes::Mask live) const {
    if constexpr (kIds16) {
      return Lanes::gather16(nbr, slot, live);
    } else {
      return Lanes::gather32(nbr, slot, live);
    }
  }
  const void* address(int32_t slot) const { return nbr + slot; }
  const uint16_t* ids16() const {
    if constexpr (kIds16) {
      return nbr;
    } else {
      return nullptr;
    }
  }
};

template <typename Lanes, typename Neighbours>
class LaneBlockWalker {
  using Vec = typename Lanes::Vec;
  using Mask = typename Lanes::Mask;
  static constexpr int kLanes = Lanes::kLanes;

 public:
  // 64 walks of prefetched lines (4 KiB) stay in the L1 cache beside the row offsets until
  // read, and still queue more reads than the core can have in flight (measured on the
  // MovieLens-size graph with 16-bit ids and streamed ends, AVX-512: 64 ahead of 128 by 2-13%
  // at 1-4 hops, 32 level with 64 at 1 hop and behind at 3-4, 256 and 512 slower).
  static constexpr int kBlock = 64;

  GALFAST_LANES_TARGET LaneBlockWalker(const SampleNhopParams& p, const WalkGraph<int32_t>& g,
                                       Neighbours neighbours, bool offsets_cached)
      : p_(p),
        g_(g),
        neighbours_(neighbours),
        first_blocked_(first_blocked(p.mode)),
        offsets_cached_(offsets_cached),
        stream_ends_(p.num_walks * static_cast<int64_t>(sizeof(int64_t)) >= kStreamedEndsBytes) {}

  // Walks [begin, end) of the batch; false (and nothing walked after it) where a block holds a
  // start outside [0, num_nodes).
  GALFAST_LANES_TARGET bool run(int64_t begin, int64_t end) {
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
  GALFAST_LANES_TARGET bool start_block(Block& block, int64_t begin, int n) {
    if (!Lanes::starts_in_range(p_.starts + begin, n, p_.num_nodes)) return false;
    block.begin = begin;
    block.n = n;
    block.first_walk = p_.walk_offset + static_cast<uint64_t>(begin);
    const uint64_t first_pair = block.first_walk / 2;
    block.lead = static_cast<int>(block.first_walk % 2);
    block.num_pairs =
        static_cast<int>((block.first_walk + static_cast<uint64_t>(n) + 1) / 2 - first_pair);
    Lanes::pair_keys(block.keys, block.words, g_.stream_key, first_pair, block.num_pairs);
    return true;
  }

  // The words of a block's draws at one hop, for lanes j .. j + kLanes - 1.
  GALFAST_LANES_TARGET static Vec words_at(const Block& block, int j) {
    return Lanes::words(block.words + block.lead + j);
  }

  // The first hop's slots are prefetched into L1, the later hops' into L2 only: on a Zen 4 core
  // the later hops ran 5-10% faster (2-4 hops on the MovieLens-size graph; docs/benchmarks.md),
  // the first hop (read a block later, by the next block's loop) slower.
  // The first hop takes its prefetch addresses from the slot vector itself (Lanes::
  // prefetch_slots): reading each lane back right after the vector store costs a store-to-load
  // forward per lane, and the 1-hop loop, bound by its instructions, pays for them (1M 1-hop
  // walks on Zen 4: 11-17% more walks/s). The later hops' loops wait on their misses instead;
  // there the extraction's vector instructions cost 3-7% at 3-4 hops, so they read back.
  static constexpr int kLaterLocality = 2;  // prefetch_line's: into L2

  // Lanes j .. of a block, at `node` (-1: failed), draw their slot in the node's row (word from
  // `words`) and store it; a node without out-edges fails the walk (slot -1).
  GALFAST_LANES_TARGET Vec draw(Block& block, int j, Mask m, Vec node, Vec words) {
    const Vec slot = Lanes::draw(g_.out_ptr, node, Lanes::nonnegative(m, node), words);
    Lanes::store(block.slot + j, slot);
    return slot;
  }

  // Prefetches the slots lanes j .. drew into the caches kLaterLocality names, reading them back
  // from the block: all lanes, past the block's end too (a prefetch never faults, and a fixed
  // count saves a compare per lane).
  void prefetch_later_hop(const Block& block, int j) const {
    for (int l = 0; l < kLanes; ++l) {
      prefetch_line<false, kLaterLocality>(neighbours_.address(block.slot[j + l]));
    }
  }

  // Lanes j .. read the neighbour in their slot of hop `hop` (prefetched), redraw the rare ones
  // already on their path, and store the node they reach (-1: failed) at hop + 1.
  GALFAST_LANES_TARGET Vec take(Block& block, int j, Mask m, int hop) {
    const Vec slot = Lanes::load(block.slot + j);
    const Mask live = Lanes::nonnegative(m, slot);
    Vec node = neighbours_.gather(slot, live);
    Mask blocked = Lanes::none();
    for (int h = first_blocked_; h <= hop; ++h) {
      blocked = Lanes::either(blocked,
                              Lanes::equal(live, node, Lanes::load(block.path + h * kBlock + j)));
    }
    int32_t* next = block.path + (hop + 1) * kBlock + j;
    Lanes::store(next, node);
    if (const unsigned bits = Lanes::bits(blocked)) {
      redraw(block, j, bits, hop);
      node = Lanes::load(next);
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
  GALFAST_LANES_TARGET void first_hop_overlapping(Block& block, Block* previous) {
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

  GALFAST_LANES_TARGET void first_group(Block& block, int j) {
    const Mask m = Lanes::below(block.n - j);
    const int64_t* starts = p_.starts + block.begin + j;
    if (block.begin + j + kStartsAhead + kLanes <= p_.num_walks) {
      for (int k = 0; k < kLanes; k += kCacheLine / static_cast<int>(sizeof(int64_t))) {
        prefetch_line<false, 0>(starts + kStartsAhead + k);
      }
    }
    const Vec node = Lanes::starts32(starts, m);
    Lanes::store(block.path + j, node);
    Lanes::prefetch_slots(neighbours_.nbr, draw(block, j, m, node, words_at(block, j)));
  }

  // Lanes j .. take their last hop and write their ends.
  GALFAST_LANES_TARGET void finish_group(Block& block, int j) {
    const Mask m = Lanes::below(block.n - j);
    Lanes::store_ends(p_.end + block.begin + j, take(block, j, m, p_.hops - 1), m,
                      stream_ends_ && block.n - j >= kLanes);
  }

  // Moves every walk of the block by hop `hop` and draws its slot of hop `hop` + 1.
  GALFAST_LANES_TARGET void step(Block& block, int hop) {
    Lanes::hop_words(block.keys, block.words, block.num_pairs,
                     static_cast<uint64_t>(hop + 1) * walk_random::kGamma);
    if (offsets_cached_) {
      for (int j = 0; j < block.n; j += kLanes) {
        const Mask m = Lanes::below(block.n - j);
        draw(block, j, m, take(block, j, m, hop), words_at(block, j));
        prefetch_later_hop(block, j);
      }
      return;
    }
    // the row offsets miss the cache too: prefetch them a loop ahead as well
    const int32_t* next = block.path + (hop + 1) * kBlock;
    for (int j = 0; j < block.n; j += kLanes) {
      take(block, j, Lanes::below(block.n - j), hop);
      const int lanes = std::min(kLanes, block.n - j);
      for (int l = 0; l < lanes; ++l) prefetch_line(g_.out_ptr + next[j + l]);
    }
    for (int j = 0; j < block.n; j += kLanes) {
      const Mask m = Lanes::below(block.n - j);
      draw(block, j, m, Lanes::load(next + j), words_at(block, j));
      prefetch_later_hop(block, j);
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
  Block blocks_[2];
};

// Walks [begin, end) with the lanes of `Lanes`, reading the 16-bit copy where p passes one.
template <typename Lanes>
GALFAST_LANES_TARGET bool walk_lane_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g,
                                           int64_t begin, int64_t end, bool offsets_cached) {
  const bool ok =
      p.out_nbr16 != nullptr
          ? LaneBlockWalker<Lanes, Neighbours<Lanes, uint16_t>>(p, g, {p.out_nbr16}, offsets_cached)
                .run(begin, end)
          : LaneBlockWalker<Lanes, Neighbours<Lanes, int32_t>>(p, g, {g.out_nbr}, offsets_cached)
                .run(begin, end);
  _mm_sfence();  // the streamed ends are visible before the caller reads them
  return ok;
}

}  // namespace
}  // namespace galfast
