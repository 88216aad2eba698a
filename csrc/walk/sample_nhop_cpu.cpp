// CPU (OpenMP) n-hop walks. Thread mapping: walks are cut into chunks of kBlockChunk walks
// (kChunk in exact mode) handed out dynamically. Paper and simple walks run hop-major in blocks
// (sample_nhop_block.h). Exact walks, which retry and end with a distance check of very different
// cost, run their chunk as a ring of kRing interleaved walkers (the step interleaving of ThunderRW,
// VLDB'21): each visit advances one walker by one phase and prefetches the memory its next phase
// reads, so up to kRing cache misses are in flight while the thread works on the other walkers.
// When the row offsets are small enough to stay in cache, a visit that moves a walker also reads
// its next row at once (one visit per hop). A walk's result depends only on its own counter-based
// draws, so neither the blocks, the ring nor the thread count changes any output.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/parallel.h"
#include "common/prefetch.h"
#include "walk/sample_nhop.h"
#include "walk/sample_nhop_block.h"
#include "walk/sample_nhop_row.h"
#include "walk/sample_nhop_simd.h"

namespace galfast {
namespace {

// Measured on MovieLens-1M-sized graphs (docs/benchmarks.md, "n-hop walks"): 8 walkers leave
// latency exposed, 32 hide it, 64 gain nothing more.
constexpr int kRing = 32;
constexpr int64_t kChunk = 1024;
// Paper and simple walks take larger chunks: their blocks overlap only inside a chunk (the
// AVX-512 walks read a block's last hop in the loop that starts the next one).
constexpr int64_t kBlockChunk = 8192;
// A parallel region costs a thread wake-up: microseconds on an idle machine, a whole scheduler
// time slice (milliseconds) on a busy one. A batch gets one thread per this much work, counted
// in hops, so the 6,040 walks of a MovieLens-1M batch run on the calling thread alone in a
// fraction of a millisecond.
constexpr double kHopsPerThread = 65536;
// Row offsets up to this size are read without a separate prefetched phase: cheaper on
// graphs like MovieLens-1M (40 KB of offsets), slower on graphs whose offsets miss the cache.
constexpr int64_t kCachedOffsetsBytes = 512 * 1024;

// The first-draw hash of the latest walk pair at each hop. Two consecutive walks share it
// (walk_random.h), and the ring launches walks in order and moves them a hop per visit, so
// they reach each hop one after another: one request in two is a hit.
class RecentBlocks {
 public:
  RecentBlocks() {
    for (int h = 0; h < kMaxHops; ++h) pair_[h] = ~uint64_t(0);
  }

  uint32_t first_word(uint64_t walk, uint64_t pair_key, uint32_t attempt, int hop) {
    if (pair_[hop] != walk / 2 || attempt_[hop] != attempt) {
      pair_[hop] = walk / 2;
      attempt_[hop] = attempt;
      bits_[hop] = first_draw_pair_bits(pair_key, attempt, hop);
    }
    return half_of(bits_[hop], walk % 2);
  }

 private:
  uint64_t pair_[kMaxHops];
  uint32_t attempt_[kMaxHops];
  uint64_t bits_[kMaxHops];
};

template <typename Index>
bool offsets_cached(const SampleNhopParams& p) {
  return (p.num_nodes + 1) * static_cast<int64_t>(sizeof(Index)) <= kCachedOffsetsBytes;
}

template <typename Index>
class WalkRing {
 public:
  WalkRing(const SampleNhopParams& p, const WalkGraph<Index>& g, int64_t begin, int64_t end)
      : p_(p), g_(g), next_(begin), end_(end), offsets_cached_(offsets_cached<Index>(p)) {}

  // False, walking nothing, when a start of the chunk is out of range.
  bool run() {
    if (!starts_in_range(p_, next_, end_ - next_)) return false;
    int live = 0;
    for (int r = 0; r < kRing; ++r) live += launch(r);
    while (live > 0) {
      for (int r = 0; r < kRing; ++r) {
        NhopWalker<Index>& w = walkers_[r];
        if (w.phase == NhopWalker<Index>::kDone) continue;
        if (w.phase == NhopWalker<Index>::kRow) {
          walker_read_row(w, g_, blocks_);
        } else {
          walker_offer(w, g_, g_.out_nbr[w.slot], blocks_);
          if (offsets_cached_ && w.phase == NhopWalker<Index>::kRow)
            walker_read_row(w, g_, blocks_);
        }
        if (w.phase == NhopWalker<Index>::kRow) {
          prefetch_line(g_.out_ptr + w.cur);
        } else if (w.phase == NhopWalker<Index>::kNeighbour) {
          prefetch_line(g_.out_nbr + w.slot);
        } else {
          walker_store(w, p_, index_[r]);
          live -= 1 - launch(r);
        }
      }
    }
    return true;
  }

 private:
  // Puts the chunk's next walk into ring slot r, reading its first row at once when the
  // offsets are cached; returns 0 when the chunk has no walk left.
  int launch(int r) {
    NhopWalker<Index>& w = walkers_[r];
    while (next_ != end_) {
      if (walk_done_before(p_, next_)) {
        ++next_;
        continue;
      }
      index_[r] = next_;
      walker_start(w, g_, p_.walk_offset + static_cast<uint64_t>(next_),
                   static_cast<Index>(p_.starts[next_]), p_.first_attempt);
      ++next_;
      if (offsets_cached_) walker_read_row(w, g_, blocks_);
      if (w.phase == NhopWalker<Index>::kRow) {
        prefetch_line(g_.out_ptr + w.cur);
        return 1;
      }
      if (w.phase == NhopWalker<Index>::kNeighbour) {
        prefetch_line(g_.out_nbr + w.slot);
        return 1;
      }
      walker_store(w, p_, index_[r]);  // no usable first step: failed at once
    }
    w.phase = NhopWalker<Index>::kDone;
    return 0;
  }

  const SampleNhopParams& p_;
  const WalkGraph<Index>& g_;
  int64_t next_, end_;
  bool offsets_cached_;
  RecentBlocks blocks_;
  NhopWalker<Index> walkers_[kRing];
  int64_t index_[kRing];
};

// Estimated work of one walk, in hops. Exact mode adds its distance check: for hops >= 3 it
// searches about (average degree)^(hops - 2) rows.
template <typename Index>
double walk_cost(const SampleNhopParams& p, const WalkGraph<Index>& g) {
  if (p.mode != WalkMode::kExact || p.hops < 3 || p.num_nodes == 0) return p.hops;
  const double average_degree = static_cast<double>(g.out_ptr[p.num_nodes]) / p.num_nodes;
  return p.hops + std::pow(std::max(average_degree, 1.0), p.hops - 2);
}

template <typename Index>
int threads_for(const SampleNhopParams& p, const WalkGraph<Index>& g) {
  const double wanted = 1 + static_cast<double>(p.num_walks) * walk_cost(p, g) / kHopsPerThread;
  return static_cast<int>(std::min<double>(wanted, max_threads()));
}

// Walks [begin, end) in paper or simple mode: the widest vector block walks the CPU has (and
// nhop_widest_isa allows) where the ids are int32, else the baseline ones; all read the 16-bit
// copy of the ids where the caller passes one. False where a start is out of range.
template <typename Index>
bool walk_blocks(const SampleNhopParams& p, const WalkGraph<Index>& g, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<Index, int32_t>) {
#if defined(GALFAST_X86_DISPATCH)
    const NhopIsa widest = nhop_widest_isa().load(std::memory_order_relaxed);
    if (widest >= NhopIsa::kAvx512 && avx512::supported()) {
      return avx512::walk_blocks(p, g, begin, end, offsets_cached<Index>(p));
    }
    if (widest >= NhopIsa::kAvx2 && avx2::supported()) {
      return avx2::walk_blocks(p, g, begin, end, offsets_cached<Index>(p));
    }
#endif
    if (p.out_nbr16 != nullptr) {
      return NhopBlockWalker<Index, uint16_t>(p, g, p.out_nbr16, offsets_cached<Index>(p))
          .run(begin, end);
    }
  }
  return NhopBlockWalker<Index>(p, g, g.out_nbr, offsets_cached<Index>(p)).run(begin, end);
}

// Runs the batch; false where a start is out of range (the caller names it).
template <typename Index>
bool sample_nhop_typed(const SampleNhopParams& p) {
  const WalkGraph<Index> g = walk_graph<Index>(p);
  const int64_t chunk = p.mode == WalkMode::kExact ? kChunk : kBlockChunk;
  const int64_t num_chunks = (p.num_walks + chunk - 1) / chunk;
  ParallelErrors errors;
  std::atomic<bool> in_range{true};
#pragma omp parallel for num_threads(threads_for(p, g)) schedule(dynamic, 1)
  for (int64_t c = 0; c < num_chunks; ++c) {
    if (!in_range.load(std::memory_order_relaxed)) continue;
    errors.run([&] {
      const int64_t begin = c * chunk, end = std::min(p.num_walks, (c + 1) * chunk);
      const bool ok = p.mode == WalkMode::kExact ? WalkRing<Index>(p, g, begin, end).run()
                                                 : walk_blocks(p, g, begin, end);
      if (!ok) in_range.store(false, std::memory_order_relaxed);
    });
  }
  errors.rethrow();
  return in_range.load();
}

// Names the first walk whose start is not a node id (a kernel found one in its range).
[[noreturn]] void throw_bad_start(const SampleNhopParams& p) {
  int64_t i = 0;
  while (p.starts[i] >= 0 && p.starts[i] < p.num_nodes) ++i;
  throw std::invalid_argument("sample_nhop: start " + std::to_string(p.starts[i]) + " of walk " +
                              std::to_string(i) + " is not a node id in [0, " +
                              std::to_string(p.num_nodes) + ")");
}

}  // namespace

std::atomic<NhopIsa>& nhop_widest_isa() {
  static std::atomic<NhopIsa> widest{NhopIsa::kAvx512};
  return widest;
}

void sample_nhop_cpu(const SampleNhopParams& p) {
  const bool in_range = p.index_type == IndexType::kInt32 ? sample_nhop_typed<int32_t>(p)
                                                          : sample_nhop_typed<int64_t>(p);
  if (!in_range) throw_bad_start(p);
}

}  // namespace galfast
