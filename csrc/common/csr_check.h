// Bounds checks of the CSR (or CSC) indices a CPU kernel gathers by. A Graph validates its
// tensors when built and ops refuse one edited in place, but an edit that no version counter
// sees (through .data or .numpy()) can still put any value there, so the kernels trust no
// index: each row checks its edge range and indices before using them, and a bad one becomes
// std::invalid_argument (ValueError in Python) instead of a read out of bounds. for_each_row
// runs these per chunk of rows, just before the chunk's rows read the same arrays.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace galfast {

[[noreturn]] inline void throw_bad_index(const char* kernel, const char* what, int64_t at,
                                         int64_t value, int64_t bound) {
  throw std::invalid_argument(std::string(kernel) + ": " + what + "[" + std::to_string(at) +
                              "] = " + std::to_string(value) + " lies outside [0, " +
                              std::to_string(bound) +
                              "); was a Graph's tensor edited in place (e.g. through .data)?");
}

// The edge range [ptr[r], ptr[r + 1]) of row r, checked to lie in [0, num_edges].
struct EdgeRange {
  int64_t begin, end;
};

inline EdgeRange checked_range(const char* kernel, const char* ptr_name, const int64_t* ptr,
                               int64_t r, int64_t num_edges) {
  const int64_t begin = ptr[r], end = ptr[r + 1];
  if (begin < 0 || begin > num_edges) throw_bad_index(kernel, ptr_name, r, begin, num_edges + 1);
  if (end < begin || end > num_edges) {
    throw std::invalid_argument(std::string(kernel) + ": " + ptr_name + "[" +
                                std::to_string(r + 1) + "] = " + std::to_string(end) +
                                " is not in [" + std::to_string(begin) + ", " +
                                std::to_string(num_edges) +
                                "] (offsets must be non-decreasing up to the edge count); was a "
                                "Graph's tensor edited in place (e.g. through .data)?");
  }
  return {begin, end};
}

// Checks index[e] in [0, bound) for e in [begin, end): one branch-free pass that ORs the sign
// bits of index[e] and bound - 1 - index[e] (plain integer ops, so it vectorises), then a search
// for the culprit only when one is out.
// Index is int64_t or int32_t.
template <typename Index>
inline void check_indices(const char* kernel, const char* name, const Index* index, int64_t begin,
                          int64_t end, int64_t bound) {
  int64_t signs = 0;
  for (int64_t e = begin; e < end; ++e) signs |= index[e] | (bound - 1 - index[e]);
  if (signs >= 0) return;
  for (int64_t e = begin; e < end; ++e) {
    if (index[e] < 0 || index[e] >= bound) throw_bad_index(kernel, name, e, index[e], bound);
  }
}

// Rows [first, last) of a CSR pointer array: ptr[first] >= 0, non-decreasing, ptr[last] <=
// num_edges, in one branch-free pass over the sign bits (every ptr[r] >= 0 first, so the
// differences cannot overflow; unsigned subtraction keeps a bad pair defined). Returns the
// rows' edge span; the culprit is searched for only when one is out.
inline EdgeRange checked_rows(const char* kernel, const char* ptr_name, const int64_t* ptr,
                              int64_t first, int64_t last, int64_t num_edges) {
  int64_t signs = ptr[first] | (num_edges - ptr[last]) | ptr[last];
  for (int64_t r = first; r < last; ++r) {
    const uint64_t step = static_cast<uint64_t>(ptr[r + 1]) - static_cast<uint64_t>(ptr[r]);
    signs |= ptr[r + 1] | static_cast<int64_t>(step);
  }
  if (signs < 0) {
    for (int64_t r = first; r < last; ++r) checked_range(kernel, ptr_name, ptr, r, num_edges);
  }
  return {ptr[first], ptr[last]};
}

}  // namespace galfast
