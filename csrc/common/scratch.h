// Per-thread scratch memory reused across kernel calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace galfast {
// Internal linkage: each translation unit (each instruction-set build) keeps its own copy, so the
// linker never picks an AVX2- or AVX-512-compiled one for the baseline code.
namespace {

// Scratch memory of `size` elements, 64-byte aligned: kept per calling thread and reused up to
// 4 Mi elements (freshly allocated, a backward's few megabytes cost page faults on every call),
// allocated into `fallback` above that. Its contents are arbitrary.
template <typename T>
T* scratch_memory(size_t size, std::vector<T>& fallback) {
  constexpr size_t kKept = size_t{1} << 22, kAlign = 64 / sizeof(T);
  thread_local std::vector<T> kept;
  std::vector<T>& memory = size > kKept ? fallback : kept;
  if (memory.size() < size + kAlign) memory.resize(size + kAlign);
  const uintptr_t at = reinterpret_cast<uintptr_t>(memory.data());
  return memory.data() + ((64 - at % 64) % 64) / sizeof(T);
}

}  // namespace
}  // namespace galfast
