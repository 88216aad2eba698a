// Software prefetch for the CPU kernels, whose random row gathers are their bottleneck.
#pragma once

#include <cstdint>

namespace galfast {

constexpr int64_t kCacheLine = 64;

// How many edges ahead of the current one the row-gathering kernels (aggregate, GAT) prefetch
// the rows they will read.
constexpr int64_t kPrefetchEdges = 8;

// Prefetches the cache line holding `address`, for reading or (kForWrite) for writing, into the
// caches kLocality names (GCC's: 3 keeps it in L1, x86 prefetcht0; 2 in L2, prefetcht1; 0 brings
// it to L1 only, past L2 and L3, prefetchnta).
template <bool kForWrite = false, int kLocality = 3>
[[gnu::always_inline]] inline void prefetch_line(const void* address) {
  __builtin_prefetch(address, kForWrite ? 1 : 0, kLocality);
}

// Prefetches the cache lines of first[0 : count] for reading. Always inlined: it is compiled
// into both the baseline and the AVX2 translation units (see common/macros.h).
template <typename T>
[[gnu::always_inline]] inline void prefetch_span(const T* first, int64_t count) {
  const char* bytes = reinterpret_cast<const char*>(first);
  for (int64_t off = 0; off < count * static_cast<int64_t>(sizeof(T)); off += kCacheLine) {
    __builtin_prefetch(bytes + off);
  }
}

}  // namespace galfast
