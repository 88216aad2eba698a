// Bounds checks of the CSR (or CSC) indices a CPU kernel gathers by. A Graph validates its
// tensors when built and ops refuse one edited in place, but an edit that no version counter
// sees (through .data or .numpy()) can still put any value there, so the kernels trust no
// index: each row checks its edge range and indices before using them, and a bad one becomes
// std::invalid_argument (ValueError in Python) instead of a read out of bounds. The indices
// are read again right after, from L1, so the check costs little next to the gathers.
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

// Checks index[e] in [0, bound) for e in [begin, end): one branch-free pass, then a search
// for the culprit only when one is out.
inline void check_indices(const char* kernel, const char* name, const int64_t* index, int64_t begin,
                          int64_t end, int64_t bound) {
  bool bad = false;
  for (int64_t e = begin; e < end; ++e) {
    bad |= static_cast<uint64_t>(index[e]) >= static_cast<uint64_t>(bound);
  }
  if (!bad) return;
  for (int64_t e = begin; e < end; ++e) {
    if (index[e] < 0 || index[e] >= bound) throw_bad_index(kernel, name, e, index[e], bound);
  }
}

}  // namespace galfast
