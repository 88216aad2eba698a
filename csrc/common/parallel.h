// CPU work partitioning shared by the OpenMP kernels.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace galfast {

// Thread count for galfast's CPU kernels. Python keeps it equal to torch.get_num_threads(), so
// torch.set_num_threads governs galfast too (torch may bundle its own OpenMP runtime, whose
// setting would not reach ours).
inline int& cpu_threads_setting() {
  static int threads = 0;  // 0: the OpenMP default
  return threads;
}

inline int max_threads() {
#ifdef _OPENMP
  const int set = cpu_threads_setting();
  return set > 0 ? set : omp_get_max_threads();
#else
  return 1;
#endif
}

inline void set_cpu_threads(int n) { cpu_threads_setting() = n; }

// This thread's number and the team's size inside a parallel region (0 and 1 without OpenMP).
inline void thread_id(int& t, int& nt) {
#ifdef _OPENMP
  t = omp_get_thread_num();
  nt = omp_get_num_threads();
#else
  t = 0;
  nt = 1;
#endif
}

// [first, last) of `count` items for thread `t` of `nt`.
inline void thread_range(int64_t count, int t, int nt, int64_t& first, int64_t& last) {
  first = count * t / nt;
  last = count * (t + 1) / nt;
}

// Splits rows [0, num_rows) into about `num_chunks` contiguous ranges of equal cost, where a
// row costs (its edge count + 1). A hub row lands alone in a chunk while the many light rows
// around it are grouped, so a dynamic schedule over chunks stays balanced on skewed degrees.
// Returns num_chunks + 1 boundaries (fewer when rows are scarce). Results never depend on it:
// each row is still reduced by one thread, in edge order.
inline std::vector<int64_t> balanced_row_chunks(const int64_t* rowptr, int64_t num_rows,
                                                int64_t num_chunks) {
  std::vector<int64_t> bounds{0};
  if (num_rows == 0) return bounds;
  const int64_t nnz = rowptr[num_rows];
  const double total = static_cast<double>(nnz + num_rows);
  num_chunks = std::max<int64_t>(1, std::min(num_chunks, num_rows));
  for (int64_t k = 1; k < num_chunks; ++k) {
    const double target = total * static_cast<double>(k) / static_cast<double>(num_chunks);
    // First row r whose prefix cost rowptr[r] + r reaches the target (monotone in r).
    int64_t lo = bounds.back(), hi = num_rows;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<double>(rowptr[mid] + mid) < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo > bounds.back() && lo < num_rows) bounds.push_back(lo);
  }
  bounds.push_back(num_rows);
  return bounds;
}

// Collects the first exception thrown inside a parallel region: an exception escaping an
// OpenMP region terminates the process, so each iteration catches and records it and the caller
// rethrows after the region. Once one iteration failed, the others are skipped.
class ParallelErrors {
 public:
  bool failed() const { return failed_.load(std::memory_order_relaxed); }

  // Call from a catch block.
  void capture() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_relaxed);
  }

  template <typename Work>
  void run(Work&& work) noexcept {
    if (failed()) return;
    try {
      work();
    } catch (...) {
      capture();
    }
  }

  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr error_;
};

// Runs chunk_body(first, last) for edge-balanced chunks [first, last) covering the rows [0,
// num_rows) of a CSR (or CSC) pointer array (balanced_row_chunks), 16 per thread, handed out
// dynamically; one thread runs a whole chunk. check_chunk(first, last) runs before a chunk's
// body: the kernels check the indices a chunk gathers by there, in one long vectorised pass
// (per row, the same checks cost 10-25% of the aggregation on rows of ~10 edges). Instantiated
// in each kernel's translation unit with that unit's lambdas, so the baseline and AVX2 builds
// each get their own copy. An exception (a bad index, a failed allocation) stops the remaining
// chunks and is rethrown here.
template <typename CheckChunk, typename ChunkBody>
void for_each_chunk(const int64_t* rowptr, int64_t num_rows, CheckChunk check_chunk,
                    ChunkBody chunk_body) {
  const int threads = max_threads();
  const std::vector<int64_t> chunks = balanced_row_chunks(rowptr, num_rows, 16 * threads);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t k = 0; k < num_chunks; ++k) {
    if (errors.failed()) continue;
    // The try block holds the plain calls, not a lambda around them: wrapped in one, the rows'
    // bodies were compiled ~30% slower (measured on the aggregation).
    try {
      check_chunk(chunks[k], chunks[k + 1]);
      chunk_body(chunks[k], chunks[k + 1]);
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
}

// for_each_chunk with body(r) run for each row r of a chunk in turn.
template <typename CheckChunk, typename Body>
void for_each_row(const int64_t* rowptr, int64_t num_rows, CheckChunk check_chunk, Body body) {
  for_each_chunk(rowptr, num_rows, check_chunk, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) body(r);
  });
}

}  // namespace galfast
