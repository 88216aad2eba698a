// One n-hop walk as a small state machine, shared by the CPU and CUDA kernels (the maths of
// sample_nhop.h lives here once). A walk alternates two phases, each starting with one read
// of the graph that the caller may prefetch:
//   kRow:       read the current node's out-row bounds, then draw a slot of that row;
//   kNeighbour: read the neighbour in the drawn slot and offer it to the walk.
// The CUDA kernel runs the phases back to back in one thread; the CPU kernel interleaves many
// walkers and prefetches each one's next read before moving on to the next walker.
#pragma once

#include <cstdint>

#include "common/macros.h"
#include "common/philox.h"  // uniform_below
#include "walk/sample_nhop.h"
#include "walk/walk_random.h"

namespace galfast {

// SampleNhopParams with typed adjacency pointers (Index = int32_t or int64_t).
template <typename Index>
struct WalkGraph {
  const Index* out_ptr;
  const Index* out_nbr;
  const Index* in_ptr;
  const Index* in_nbr;
  uint64_t stream_key;  // walk_stream_key(seed)
  int hops;
  uint32_t max_retries;
  uint32_t first_attempt;
  WalkMode mode;
};

template <typename Index>
inline WalkGraph<Index> walk_graph(const SampleNhopParams& p) {
  return WalkGraph<Index>{static_cast<const Index*>(p.out_ptr),
                          static_cast<const Index*>(p.out_nbr),
                          static_cast<const Index*>(p.in_ptr),
                          static_cast<const Index*>(p.in_nbr),
                          walk_stream_key(p.seed),
                          p.hops,
                          p.max_retries,
                          p.first_attempt,
                          p.mode};
}

// The slots of one row moved by the virtual Fisher-Yates shuffle: slot key[k] holds the row
// offset value[k]; every slot not listed holds its own offset. One entry per draw at most.
template <typename Index>
struct SwapMap {
  static constexpr int kCapacity = kMaxHops + 1;
  Index key[kCapacity];
  Index value[kCapacity];
  int size;

  GALFAST_HD Index get(Index slot) const {
    for (int k = 0; k < size; ++k) {
      if (key[k] == slot) return value[k];
    }
    return slot;
  }

  GALFAST_HD void set(Index slot, Index offset) {
    for (int k = 0; k < size; ++k) {
      if (key[k] == slot) {
        value[k] = offset;
        return;
      }
    }
    key[size] = slot;
    value[size] = offset;
    ++size;
  }

  // One Fisher-Yates step: swaps slots d and k (d <= k) and returns the offset that lands in
  // slot d. Slot d is never read again (later draws pick from slots > d), so it is not stored.
  GALFAST_HD Index take(Index d, Index k) {
    const Index picked = get(k);
    set(k, get(d));
    return picked;
  }
};

template <typename Index>
struct NhopWalker {
  enum Phase : int { kRow, kNeighbour, kDone };

  uint64_t walk;      // the walk's number in the random stream
  uint64_t pair_key;  // walk_pair_key of the pair walk / 2
  Index start;
  Index cur;
  Index row_begin;  // out-row of cur
  Index degree;
  Index slot;  // kNeighbour: the drawn slot of out_nbr
  Index end;   // kDone: the result, -1 when the walk failed
  int hop;     // hops taken in this attempt
  int draws;   // candidates drawn at this hop
  uint32_t attempt;
  Phase phase;
  Index path[kMaxHops + 1];  // path[0] = start, path[h] = node reached by hop h
  SwapMap<Index> moved;
};

// ---------------------------------------------------------------- exact-distance check

// First position in [lo, hi) of the sorted array a whose value is >= x (hi if none).
template <typename Index>
GALFAST_HD Index lower_bound(const Index* a, Index lo, Index hi, Index x) {
  while (lo < hi) {
    const Index mid = lo + (hi - lo) / 2;
    if (a[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Whether two sorted rows share a value. Only the overlap of their value ranges can hold one
// (an O(1) answer for rows of disjoint id ranges, e.g. users against movies); inside it, each
// value of the shorter row is searched in the longer one from where the previous search
// stopped, O(min * log max).
template <typename Index>
GALFAST_HD bool sorted_rows_intersect(const Index* a, Index na, const Index* b, Index nb) {
  if (na == 0 || nb == 0 || a[na - 1] < b[0] || b[nb - 1] < a[0]) return false;
  if (na > nb) {
    const Index* t = a;
    a = b;
    b = t;
    const Index n = na;
    na = nb;
    nb = n;
  }
  Index pos = 0;
  for (Index k = lower_bound(a, Index(0), na, b[0]); k < na && a[k] <= b[nb - 1]; ++k) {
    pos = lower_bound(b, pos, nb, a[k]);
    if (b[pos] == a[k]) return true;
  }
  return false;
}

// Whether `to` can be reached from `from` in at most `limit` <= 3 out-edge steps. The search
// runs from both ends and meets in the middle: a path of length 2 meets in
// out(from) & in(to), one of length 3 in out(m) & in(to) for some m in out(from).
template <typename Index>
GALFAST_HD bool reachable_within(const WalkGraph<Index>& g, Index from, Index to, int limit) {
  if (from == to) return true;
  const Index out_begin = g.out_ptr[from], out_end = g.out_ptr[from + 1];
  const Index* out_row = g.out_nbr + out_begin;
  const Index out_len = out_end - out_begin;
  if (limit >= 1) {
    const Index pos = lower_bound(out_row, Index(0), out_len, to);
    if (pos < out_len && out_row[pos] == to) return true;
  }
  if (limit < 2) return false;
  const Index* in_row = g.in_nbr + g.in_ptr[to];
  const Index in_len = g.in_ptr[to + 1] - g.in_ptr[to];
  if (sorted_rows_intersect(out_row, out_len, in_row, in_len)) return true;
  if (limit < 3) return false;
  for (Index k = 0; k < out_len; ++k) {
    const Index m = out_row[k];
    const Index m_begin = g.out_ptr[m];
    if (sorted_rows_intersect(g.out_nbr + m_begin, g.out_ptr[m + 1] - m_begin, in_row, in_len)) {
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------- the walk

template <typename Index>
GALFAST_HD void walker_finish(NhopWalker<Index>& w, Index end) {
  w.end = end;
  w.phase = NhopWalker<Index>::kDone;
}

template <typename Index>
GALFAST_HD void walker_restart(NhopWalker<Index>& w) {
  w.cur = w.start;
  w.path[0] = w.start;
  w.hop = 0;
  w.phase = NhopWalker<Index>::kRow;
}

template <typename Index>
GALFAST_HD void walker_retry_or_fail(NhopWalker<Index>& w, const WalkGraph<Index>& g) {
  if (w.attempt < g.max_retries) {
    ++w.attempt;
    walker_restart(w);
  } else {
    walker_finish(w, Index(-1));
  }
}

// No legal neighbour is left at this hop.
template <typename Index>
GALFAST_HD void walker_stuck(NhopWalker<Index>& w, const WalkGraph<Index>& g) {
  // Getting stuck on the first hop does not depend on the draws, so retrying cannot help.
  if (g.mode == WalkMode::kExact && w.hop > 0) {
    walker_retry_or_fail(w, g);
  } else {
    walker_finish(w, Index(-1));
  }
}

// Path entries a candidate must avoid: path[first_blocked(mode) .. hop].
GALFAST_HD int first_blocked(WalkMode mode) { return mode == WalkMode::kPaper ? 1 : 0; }

template <typename Index>
GALFAST_HD bool walker_blocks(const NhopWalker<Index>& w, const WalkGraph<Index>& g, Index node) {
  for (int k = first_blocked(g.mode); k <= w.hop; ++k) {
    if (w.path[k] == node) return true;
  }
  return false;
}

// First-draw words computed afresh at every request (CUDA: one thread per walk). The CPU
// kernel for exact mode passes instead a cache of the hash its pairs of walks share.
struct FreshBlocks {
  GALFAST_HD uint32_t first_word(uint64_t walk, uint64_t pair_key, uint32_t attempt, int hop) {
    return half_of(first_draw_pair_bits(pair_key, attempt, hop), walk % 2);
  }
};

// The random word of the walk's next draw (walk_random.h).
template <typename Index, typename Blocks>
GALFAST_HD uint32_t walker_word(const NhopWalker<Index>& w, Blocks& blocks) {
  if (w.draws == 0) return blocks.first_word(w.walk, w.pair_key, w.attempt, w.hop);
  return redraw_word(w.pair_key, w.walk, w.attempt, w.hop, w.draws);
}

// Draws the next slot of the current row, or gives up the hop when no legal one is left.
template <typename Index, typename Blocks>
GALFAST_HD void walker_draw(NhopWalker<Index>& w, const WalkGraph<Index>& g, Blocks& blocks) {
  // A row holds distinct nodes, so at most `blocked` draws are rejected and draw blocked + 1
  // is always taken: the loop is O(hops) per hop even on a hub, and the swap map stays small.
  const Index blocked = Index(w.hop + 1 - first_blocked(g.mode));
  const Index limit = w.degree < blocked + 1 ? w.degree : blocked + 1;
  if (Index(w.draws) == limit) {
    walker_stuck(w, g);
    return;
  }
  const Index d = Index(w.draws);
  const uint32_t remaining = static_cast<uint32_t>(w.degree - d);
  const Index k = d + Index(uniform_below(walker_word(w, blocks), remaining));
  w.slot = w.row_begin + w.moved.take(d, k);
  w.phase = NhopWalker<Index>::kNeighbour;
}

template <typename Index>
GALFAST_HD void walker_start(NhopWalker<Index>& w, const WalkGraph<Index>& g, uint64_t walk,
                             Index start, uint32_t first_attempt) {
  w.walk = walk;
  w.pair_key = walk_pair_key(g.stream_key, walk / 2);
  w.start = start;
  w.attempt = first_attempt;
  w.end = Index(-1);
  walker_restart(w);
}

// kRow: reads the current node's out-row and draws its first candidate.
template <typename Index, typename Blocks>
GALFAST_HD void walker_read_row(NhopWalker<Index>& w, const WalkGraph<Index>& g, Blocks& blocks) {
  w.row_begin = g.out_ptr[w.cur];
  w.degree = g.out_ptr[w.cur + 1] - w.row_begin;
  w.draws = 0;
  w.moved.size = 0;
  walker_draw(w, g, blocks);
}

// kNeighbour: offers `node`, read from the drawn slot: moves there, or draws again when it is
// on the path. After the last hop, exact mode checks the end's distance.
template <typename Index, typename Blocks>
GALFAST_HD void walker_offer(NhopWalker<Index>& w, const WalkGraph<Index>& g, Index node,
                             Blocks& blocks) {
  if (walker_blocks(w, g, node)) {
    ++w.draws;
    walker_draw(w, g, blocks);
    return;
  }
  w.path[++w.hop] = node;
  w.cur = node;
  if (w.hop < g.hops) {
    w.phase = NhopWalker<Index>::kRow;
  } else if (g.mode != WalkMode::kExact || !reachable_within(g, w.start, node, g.hops - 1)) {
    walker_finish(w, node);
  } else {
    walker_retry_or_fail(w, g);
  }
}

// In a later round of attempts (SampleNhopParams::first_attempt), walk i already succeeded.
GALFAST_HD bool walk_done_before(const SampleNhopParams& p, int64_t i) {
  return p.first_attempt > 0 && p.end[i] >= 0;
}

// Writes walk i's result: the end, and its path (start, one node per hop taken by the final
// attempt, -1 after) when paths are asked for.
template <typename Index>
GALFAST_HD void walker_store(const NhopWalker<Index>& w, const SampleNhopParams& p, int64_t i) {
  p.end[i] = static_cast<int64_t>(w.end);
  if (p.paths == nullptr) return;
  int64_t* row = p.paths + i * (p.hops + 1);
  for (int k = 0; k <= p.hops; ++k) row[k] = k <= w.hop ? static_cast<int64_t>(w.path[k]) : -1;
}

}  // namespace galfast
