// CPU (OpenMP) row gather and scatter-add, compiled once per instruction set:
// gather_rows_cpu.cpp includes this file for the baseline ISA and gather_rows_cpu_avx2.cpp for
// AVX2+FMA, each with GALFAST_CPU_ISA naming its namespace.
//
// gather_rows thread mapping: the picked rows are cut into one contiguous range of k per
// thread; a thread checks and copies its rows.
// scatter_add_rows thread mapping: the table rows are cut into one contiguous range per
// thread; every thread zeroes its range, then scans the whole index in increasing k and adds
// the picked rows that land in its range. Each table row is written by one thread in k order,
// so the sums are bitwise the same for any thread count (a hub row is one thread's work).
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gather_rows_cpu_impl.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/parallel.h"
#include "common/prefetch.h"
#include "gather/gather_rows.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Below this many elements moved, one thread: a parallel region costs more than it saves.
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

int threads_for(int64_t elements) { return elements < kMinParallelElements ? 1 : max_threads(); }

// Zero-width rows come from tensors without storage, whose pointers may be null: memcpy must not
// see them even for zero bytes.
template <typename T>
inline void copy_row(T* __restrict__ dst, const T* __restrict__ src, int64_t width) {
  if (width > 0) std::memcpy(dst, src, static_cast<size_t>(width) * sizeof(T));
}

template <typename T>
inline void add_row(T* __restrict__ dst, const T* __restrict__ src, int64_t width) {
  for (int64_t j = 0; j < width; ++j) dst[j] += src[j];
}

[[noreturn]] void throw_bad_index(int64_t k, int64_t value, int64_t num_rows) {
  throw std::out_of_range("gather_rows: index[" + std::to_string(k) +
                          "] = " + std::to_string(value) + " is out of range for " +
                          std::to_string(num_rows) + " rows (valid: 0 to num_rows - 1)");
}

template <typename T, typename I>
void gather_typed(const GatherRowsParams& p) {
  const I* index = static_cast<const I*>(p.index);
  const T* table = static_cast<const T*>(p.table);
  T* picked = static_cast<T*>(p.picked);
  const int64_t width = p.width, num_rows = p.num_rows;
  ParallelErrors errors;
  const int threads = threads_for(p.num_index * width);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    int64_t first, last;
    thread_range(p.num_index, t, nt, first, last);
    try {
      for (int64_t k = first; k < last; ++k) {
        if (k + kPrefetchEdges < last) {
          const uint64_t ahead = static_cast<uint64_t>(index[k + kPrefetchEdges]);
          if (ahead < static_cast<uint64_t>(num_rows)) {
            prefetch_span(table + static_cast<int64_t>(ahead) * width, width);
          }
        }
        const int64_t r = static_cast<int64_t>(index[k]);
        if (static_cast<uint64_t>(r) >= static_cast<uint64_t>(num_rows)) {
          throw_bad_index(k, r, num_rows);
        }
        copy_row(picked + k * width, table + r * width, width);
      }
    } catch (...) {
      errors.capture();
    }
  }
  errors.rethrow();
}

template <typename T, typename I>
void scatter_add_typed(const GatherRowsParams& p) {
  const I* index = static_cast<const I*>(p.index);
  const T* picked = static_cast<const T*>(p.picked);
  T* table = static_cast<T*>(p.table);
  const int64_t width = p.width, num_index = p.num_index;
  const int threads = threads_for(std::max(num_index, p.num_rows) * width);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t, nt;
    thread_id(t, nt);
    int64_t first, last;
    thread_range(p.num_rows, t, nt, first, last);
    std::fill(table + first * width, table + last * width, T(0));
    const uint64_t span = static_cast<uint64_t>(last - first);
    for (int64_t k = 0; k < num_index; ++k) {
      // One unsigned compare tests first <= r < last (a negative r wraps to a huge offset).
      const uint64_t offset =
          static_cast<uint64_t>(static_cast<int64_t>(index[k])) - static_cast<uint64_t>(first);
      if (offset < span) {
        add_row(table + (first + static_cast<int64_t>(offset)) * width, picked + k * width, width);
      }
    }
  }
}

template <template <typename, typename> class Kernel>
void dispatch(const GatherRowsParams& p) {
  require_cpu_dtype(p.dtype, "gather_rows");
  if (p.dtype == DType::kFloat32) {
    p.int32_index ? Kernel<float, int32_t>::run(p) : Kernel<float, int64_t>::run(p);
  } else {
    p.int32_index ? Kernel<double, int32_t>::run(p) : Kernel<double, int64_t>::run(p);
  }
}

template <typename T, typename I>
struct Gather {
  static void run(const GatherRowsParams& p) { gather_typed<T, I>(p); }
};

template <typename T, typename I>
struct ScatterAdd {
  static void run(const GatherRowsParams& p) { scatter_add_typed<T, I>(p); }
};

}  // namespace

void gather_rows(const GatherRowsParams& p) { dispatch<Gather>(p); }

void scatter_add_rows(const GatherRowsParams& p) { dispatch<ScatterAdd>(p); }

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
