// Batched n-hop walks with cycle rejection (GAL's Monte-Carlo n-hop sampler): the contract
// both backends share.
//
// Walk i starts at starts[i] and takes `hops` steps along out-edges. At each step it draws the
// current node's out-neighbours uniformly without replacement until one is not on the walk's
// path and moves there; when none is left the walk fails (end[i] = -1). The path holds
//   kPaper:  the nodes reached so far, not the start (the paper's algorithm: a walk may come
//            back to its start once);
//   kSimple: the start too, so a successful walk is a simple path of hops + 1 nodes;
//   kExact:  as kSimple, and the end must lie at shortest-path distance exactly `hops` from the
//            start (checked by a bounded search from both ends); a walk that gets stuck or ends
//            closer is retried with fresh randomness, at most max_retries times.
// The draw is a virtual Fisher-Yates shuffle of the neighbour row: draw d picks slot
// d + uniform(degree - d) of a row whose first d slots hold the earlier picks; a small swap map
// records the moved slots, so the row is never copied.
//
// Randomness: walk w = walk_offset + i draws from the SplitMix64-based hash of
// csrc/walk/walk_random.h: draw d of hop h in attempt a is a 32-bit word that depends only on
// (seed, w, a, h, d) (the first draws of walks 2p and 2p + 1 share one 64-bit hash), mapped to
// [0, n) by uniform_below. So end[i] and paths[i] are a pure function of
// (seed, walk_offset + i, starts[i], graph): identical on CPU and CUDA, for any thread count,
// batch size or chunking.
//
// Preconditions (the Python layer guarantees them; it builds the adjacency privately): every row of
// out_nbr and in_nbr is sorted ascending without repeats, the adjacency has fewer than 2^32 edges,
// starts lie in [0, num_nodes), 1 <= hops <= kMaxHops (kExact: hops <= kMaxExactHops).
#pragma once

#include <cstdint>

namespace galfast {

enum class WalkMode : int { kPaper = 0, kSimple = 1, kExact = 2 };

// Width of the adjacency arrays; 32-bit halves the memory traffic of the random row reads.
enum class IndexType : int { kInt32 = 0, kInt64 = 1 };

// The path and the swap map live in registers or the stack, so their size is fixed.
constexpr int kMaxHops = 32;
// Exact mode proves dist(start, end) >= hops by searching all paths shorter than hops; that
// costs about (average degree)^(hops - 2) row intersections, affordable up to this bound.
constexpr int kMaxExactHops = 4;

struct SampleNhopParams {
  const void* out_ptr = nullptr;    // [num_nodes + 1] row offsets of out_nbr (IndexType)
  const void* out_nbr = nullptr;    // [num_out_edges] out-neighbours, rows sorted, distinct
  const void* in_ptr = nullptr;     // [num_nodes + 1] kExact only: row offsets of in_nbr
  const void* in_nbr = nullptr;     // [num_in_edges] kExact only: in-neighbours, rows sorted
  const int64_t* starts = nullptr;  // [num_walks]
  int64_t* end = nullptr;           // [num_walks] out: end node, -1 when the walk failed
  int64_t* paths = nullptr;         // [num_walks, hops + 1] out or null: start, then one node
                                    // per hop, -1 after a failure
  int64_t num_nodes = 0;
  int64_t num_walks = 0;
  uint64_t walk_offset = 0;  // number of walk 0 in the random stream
  uint64_t seed = 0;
  int hops = 1;
  uint32_t max_retries = 0;  // kExact only: the last attempt a walk may make
  // kExact only: the first attempt. Above 0, a later round of attempts of the same walks (a
  // long batch runs in rounds so it can be interrupted between them): walks whose end is
  // already set (>= 0) are left as they are, the others start again at this attempt, exactly
  // as if their earlier attempts had just failed within this call.
  uint32_t first_attempt = 0;
  WalkMode mode = WalkMode::kPaper;
  IndexType index_type = IndexType::kInt64;
  // Optional, CPU paper and simple walks: out_nbr as 16-bit ids (num_nodes <= 2^16), with one
  // element of padding after an odd count. The AVX-512 walks read it instead of out_nbr: half
  // the bytes per random read, so more of the array stays in the L2 cache. Null: unused.
  const uint16_t* out_nbr16 = nullptr;
};

void sample_nhop_cpu(const SampleNhopParams& p);

#ifdef GALFAST_WITH_CUDA
void sample_nhop_cuda(const SampleNhopParams& p, void* stream);
#endif

}  // namespace galfast
