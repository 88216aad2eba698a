// Hop-major CPU n-hop walks for paper and simple modes (no retries). Thread mapping: a thread
// walks a range of walks in blocks of kBlock, moving every walk of a block one hop before the
// next hop. One loop per hop reads each walk's drawn slot (prefetched a loop earlier, so an
// L1 hit), checks the node against the walk's path, then reads the node's row and draws and
// prefetches the slot of the next hop: the block keeps as many cache misses in flight as the
// core can track, without the state machine of the ring (sample_nhop_cpu.cpp). The first-draw
// hashes of a hop are computed in a loop of their own (independent multiplies). A drawn
// neighbour already on the path (rare: the row must hold an earlier node of the walk) sends the
// walk through the shared walker state machine (sample_nhop_row.h) for its redraws, so every
// walk draws exactly as sample_nhop.h says.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/philox.h"  // uniform_below
#include "common/prefetch.h"
#include "walk/sample_nhop.h"
#include "walk/sample_nhop_row.h"
#include "walk/walk_random.h"

namespace galfast {

// Whether starts[begin, begin + count) all lie in [0, num_nodes): the kernels check the starts
// of each block just before reading them (no separate pass over the batch).
inline bool starts_in_range(const SampleNhopParams& p, int64_t begin, int64_t count) {
  bool bad = false;
  for (int64_t i = begin; i < begin + count; ++i) {
    bad |= static_cast<uint64_t>(p.starts[i]) >= static_cast<uint64_t>(p.num_nodes);
  }
  return !bad;
}

// Hop `hop` of walk `walk` once more through the walker state machine, which redraws the row
// without replacement; path[h * stride] is the node the walk reached at hop h <= hop. Returns
// the node it moves to, -1 when it is stuck. Shared by the baseline and AVX-512 block walks
// (compiled for the baseline ISA in both). `out_nbr16`: the 16-bit copy of out_nbr the walk
// reads (SampleNhopParams::out_nbr16), or null. Reading the copy matters: a redraw's reads miss
// the cache, and the int32 array, which the walk does not otherwise read, is the colder one.
template <typename Index>
[[gnu::noinline, gnu::cold]] Index redraw_hop(const WalkGraph<Index>& g, uint64_t walk,
                                              const Index* path, int stride, int hop,
                                              const uint16_t* out_nbr16 = nullptr) {
  NhopWalker<Index> w;
  walker_start(w, g, walk, path[0], 0);
  for (int h = 1; h <= hop; ++h) w.path[h] = path[h * stride];
  w.hop = hop;
  w.cur = path[hop * stride];
  FreshBlocks fresh;
  walker_read_row(w, g, fresh);
  while (w.phase == NhopWalker<Index>::kNeighbour) {
    walker_offer(w, g, out_nbr16 != nullptr ? Index(out_nbr16[w.slot]) : g.out_nbr[w.slot], fresh);
  }
  return w.hop > hop ? w.path[hop + 1] : Index(-1);
}

// `Id`: the type of the neighbour ids the walks read: Index (out_nbr), or uint16_t for the
// 16-bit copy of an int32 graph (SampleNhopParams::out_nbr16), whose random reads touch half the
// bytes.
template <typename Index, typename Id = Index>
class NhopBlockWalker {
 public:
  // 64 walks a block: on a Zen 4 core, 10-25% more walks/s than 256 (1M starts, 1-4 hops, both
  // on the MovieLens-size graph with 16-bit ids and on a 400k-node graph whose int32 ids miss
  // every cache), and level with or ahead of 128; docs/benchmarks.md, session 15.
  static constexpr int kBlock = 64;

  NhopBlockWalker(const SampleNhopParams& p, const WalkGraph<Index>& g, const Id* ids,
                  bool offsets_cached)
      : p_(p),
        g_(g),
        ids_(ids),
        first_blocked_(first_blocked(p.mode)),
        offsets_cached_(offsets_cached) {}

  // Walks [begin, end) of the batch; false (and nothing walked after it) where a block holds a
  // start outside [0, num_nodes).
  bool run(int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += kBlock) {
      const int n = static_cast<int>(std::min<int64_t>(end - b, kBlock));
      if (!starts_in_range(p_, b, n)) return false;
      if (b + 2 * kBlock <= end) prefetch_starts(b + kBlock);
      walk_block(b, n);
    }
    return true;
  }

 private:
  // What the loops of one hop read and write, copied into a local: the loops store Index
  // values, which the compiler would otherwise assume may overwrite the walker's fields and
  // reload them at every walk.
  struct HopView {
    const Index* out_ptr;
    const Id* out_nbr;
    const uint32_t* words;  // words[j]: walk j's first-draw word of the next hop
    Index* slots;
    const Index* first_row;  // path row first_blocked, then one row per kBlock
    int checked;             // path rows to check: first_blocked .. hop

    // The neighbour in walk j's drawn slot and whether it is on the walk's path.
    Index read_slot(int j, bool& blocked) const {
      const Index node = Index(out_nbr[slots[j]]);
      blocked = false;
      for (int h = 0; h < checked; ++h) blocked |= first_row[h * kBlock + j] == node;
      return node;
    }

    // Walk j, now at `node` >= 0, draws the first slot of its row for its next hop and
    // prefetches it; returns whether the row is empty (the walk fails, slots[j] = -1).
    bool draw_slot(int j, Index node) const {
      const Index row_begin = out_ptr[node];
      const Index degree = out_ptr[node + 1] - row_begin;
      const Index slot = row_begin + Index(uniform_below(words[j], static_cast<uint32_t>(degree)));
      slots[j] = degree == 0 ? Index(-1) : slot;
      prefetch_line(out_nbr + slot);
      return degree == 0;
    }
  };

  Index* row(int hop) { return path_ + hop * kBlock; }

  // The starts of the block beginning at `begin`, a block ahead, with prefetchnta: read once, a
  // plain read would pass them through L2 into L3, where they would evict the neighbour ids the
  // random reads need (on the MovieLens-size graph, 1M starts: 5-10% more walks/s at 1-2 hops).
  void prefetch_starts(int64_t begin) const {
    for (int k = 0; k < kBlock; k += kCacheLine / static_cast<int>(sizeof(int64_t))) {
      prefetch_line<false, 0>(p_.starts + begin + k);
    }
  }

  HopView view(int hop) {
    return HopView{
        g_.out_ptr, ids_, words_ + lead_, slot_, row(first_blocked_), hop + 1 - first_blocked_};
  }

  // Walk j of the block is walk first_walk_ + j; path_[h * kBlock + j] is the node it reached
  // at hop h (-1 once it failed), slot_[j] the slot it drew for its next hop (-1: failed).
  // Until a walk of the block fails, the loops skip the checks for failed walks.
  void walk_block(int64_t begin, int n) {
    n_ = n;
    first_walk_ = p_.walk_offset + static_cast<uint64_t>(begin);
    pair_keys();
    draw_first_words(0);
    const HopView v = view(0);
    Index* starts = row(0);
    bool failed = false;
    for (int j = 0; j < n; ++j) {
      starts[j] = static_cast<Index>(p_.starts[begin + j]);
      failed |= v.draw_slot(j, starts[j]);
    }
    for (int hop = 0; hop + 1 < p_.hops; ++hop) {
      draw_first_words(hop + 1);
      failed = failed ? step<true>(hop) : step<false>(hop);
    }
    const HopView last = view(p_.hops - 1);
    Index* ends = row(p_.hops);
    for (int j = 0; j < n; ++j) {
      ends[j] =
          failed ? take_slot<true>(last, j, p_.hops - 1) : take_slot<false>(last, j, p_.hops - 1);
      p_.end[begin + j] = static_cast<int64_t>(ends[j]);
    }
    if (p_.paths != nullptr) store_paths(begin);
  }

  // Moves every walk of the block by hop `hop` and draws its slot of hop `hop` + 1; returns
  // whether a walk of the block has failed.
  template <bool kMayFail>
  bool step(int hop) {
    const HopView v = view(hop);
    Index* next = row(hop + 1);
    const int n = n_;
    bool failed = kMayFail;
    if (offsets_cached_) {
      for (int j = 0; j < n; ++j) {
        next[j] = take_slot<kMayFail>(v, j, hop);
        failed |= next[j] < 0 || v.draw_slot(j, next[j]);
      }
    } else {  // the row offsets miss the cache too: prefetch them a loop ahead as well
      for (int j = 0; j < n; ++j) {
        next[j] = take_slot<kMayFail>(v, j, hop);
        prefetch_line(v.out_ptr + next[j]);
      }
      for (int j = 0; j < n; ++j) {
        if (next[j] < 0) {
          v.slots[j] = Index(-1);
          failed = true;
        } else {
          failed |= v.draw_slot(j, next[j]);
        }
      }
    }
    return failed;
  }

  // The node walk j moves to at hop `hop`: the neighbour in its drawn slot, or the result of
  // the redraws when that one is on its path; -1 when the walk fails (then also slot -1).
  template <bool kMayFail>
  Index take_slot(const HopView& v, int j, int hop) {
    if (kMayFail && v.slots[j] < 0) return Index(-1);
    bool blocked;
    const Index node = v.read_slot(j, blocked);
    if (!blocked) return node;
    const Index other = redraw(j, hop);
    if (other < 0) v.slots[j] = Index(-1);
    return other;
  }

  // The keys of the walk pairs of the block: walk first_walk_ + j is in pair (lead_ + j) / 2.
  void pair_keys() {
    const uint64_t first_pair = first_walk_ / 2;
    lead_ = static_cast<int>(first_walk_ % 2);
    num_pairs_ = static_cast<int>((first_walk_ + static_cast<uint64_t>(n_) + 1) / 2 - first_pair);
    for (int k = 0; k < num_pairs_; ++k) {
      keys_[k] = walk_pair_key(g_.stream_key, first_pair + static_cast<uint64_t>(k));
    }
  }

  // words_[lead_ + j] = the first-draw word of walk j at this hop: one hash per pair of walks,
  // in a loop of independent multiplies.
  void draw_first_words(int hop) {
    for (int k = 0; k < num_pairs_; ++k) {
      const uint64_t bits = hop == 0 ? keys_[k] : first_draw_pair_bits(keys_[k], 0, hop);
      words_[2 * k] = static_cast<uint32_t>(bits);
      words_[2 * k + 1] = static_cast<uint32_t>(bits >> 32);
    }
  }

  [[gnu::noinline, gnu::cold]] Index redraw(int j, int hop) {
    const uint16_t* ids16 = nullptr;
    if constexpr (std::is_same_v<Id, uint16_t>) ids16 = ids_;
    return redraw_hop(g_, first_walk_ + static_cast<uint64_t>(j), row(0) + j, kBlock, hop, ids16);
  }

  void store_paths(int64_t begin) {
    const int width = p_.hops + 1;
    for (int j = 0; j < n_; ++j) {
      int64_t* out = p_.paths + (begin + j) * width;
      for (int h = 0; h < width; ++h) out[h] = static_cast<int64_t>(row(h)[j]);
    }
  }

  const SampleNhopParams& p_;
  const WalkGraph<Index>& g_;
  const Id* const ids_;
  const int first_blocked_;
  const bool offsets_cached_;  // the row offsets fit in the cache (see sample_nhop_cpu.cpp)
  uint64_t first_walk_ = 0;
  int n_ = 0;
  int lead_ = 0;
  int num_pairs_ = 0;
  uint64_t keys_[kBlock / 2 + 1];
  uint32_t words_[kBlock + 2];
  Index slot_[kBlock];
  Index path_[(kMaxHops + 1) * kBlock];
};

}  // namespace galfast
