// CPU (OpenMP) n-hop walks. Thread mapping: walks are cut into chunks of kChunk walks handed
// out dynamically; a thread runs its chunk as a ring of kRing interleaved walkers (the step
// interleaving of ThunderRW, VLDB'21): each visit advances one walker by one phase and
// prefetches the memory its next phase reads, so up to kRing cache misses are in flight while
// the thread works on the other walkers. When the row offsets are small enough to stay in
// cache, a visit that moves a walker also reads its next row at once (one visit per hop).
// A walk's result depends only on its own counter-based draws, so neither the ring nor the
// thread count changes any output.
#include <algorithm>
#include <cstdint>

#include "walk/nhop_walker.h"
#include "walk/sample_nhop.h"

namespace galfast {
namespace {

// Measured on MovieLens-1M-sized graphs (docs/bench_walk.md): 8 walkers leave latency
// exposed, 32 hide it, 64 gain nothing more.
constexpr int kRing = 32;
constexpr int64_t kChunk = 1024;
// Row offsets up to this size are read without a separate prefetched phase: cheaper on
// graphs like MovieLens-1M (40 KB of offsets), slower on graphs whose offsets miss the cache.
constexpr int64_t kCachedOffsetsBytes = 512 * 1024;

inline void prefetch(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address);
#endif
}

template <typename Index>
class WalkRing {
 public:
  WalkRing(const SampleNhopParams& p, const WalkGraph<Index>& g, int64_t begin, int64_t end)
      : p_(p),
        g_(g),
        next_(begin),
        end_(end),
        offsets_cached_((p.num_nodes + 1) * static_cast<int64_t>(sizeof(Index)) <=
                        kCachedOffsetsBytes) {}

  void run() {
    int live = 0;
    for (int r = 0; r < kRing; ++r) live += launch(r);
    while (live > 0) {
      for (int r = 0; r < kRing; ++r) {
        NhopWalker<Index>& w = walkers_[r];
        if (w.phase == NhopWalker<Index>::kDone) continue;
        if (w.phase == NhopWalker<Index>::kRow) {
          walker_read_row(w, g_);
        } else {
          walker_offer(w, g_, g_.out_nbr[w.slot]);
          if (offsets_cached_ && w.phase == NhopWalker<Index>::kRow) walker_read_row(w, g_);
        }
        if (w.phase == NhopWalker<Index>::kRow) {
          prefetch(g_.out_ptr + w.cur);
        } else if (w.phase == NhopWalker<Index>::kNeighbour) {
          prefetch(g_.out_nbr + w.slot);
        } else {
          walker_store(w, p_, index_[r]);
          live -= 1 - launch(r);
        }
      }
    }
  }

 private:
  // Puts the chunk's next walk into ring slot r; returns 0 when the chunk has none left.
  int launch(int r) {
    if (next_ == end_) {
      walkers_[r].phase = NhopWalker<Index>::kDone;
      return 0;
    }
    index_[r] = next_;
    walker_start(walkers_[r], p_.walk_offset + static_cast<uint64_t>(next_),
                 static_cast<Index>(p_.starts[next_]));
    prefetch(g_.out_ptr + walkers_[r].cur);
    ++next_;
    return 1;
  }

  const SampleNhopParams& p_;
  const WalkGraph<Index>& g_;
  int64_t next_, end_;
  bool offsets_cached_;
  NhopWalker<Index> walkers_[kRing];
  int64_t index_[kRing];
};

template <typename Index>
void sample_nhop_typed(const SampleNhopParams& p) {
  const WalkGraph<Index> g = walk_graph<Index>(p);
  const int64_t num_chunks = (p.num_walks + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < num_chunks; ++c) {
    WalkRing<Index>(p, g, c * kChunk, std::min(p.num_walks, (c + 1) * kChunk)).run();
  }
}

}  // namespace

void sample_nhop_cpu(const SampleNhopParams& p) {
  if (p.index_type == IndexType::kInt32) {
    sample_nhop_typed<int32_t>(p);
  } else {
    sample_nhop_typed<int64_t>(p);
  }
}

}  // namespace galfast
