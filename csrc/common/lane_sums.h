// Many dot products at once on the CPU: a kernel accumulating one dot product per item keeps a
// vector of per-lane partial sums per item (vertical FMAs, no shuffles), and lane_sums() then
// folds the lanes of L such vectors together in one transposing tree (L = lanes of a vector:
// 8 floats or 4 doubles): 2(L - 1) shuffles and L - 1 adds for L sums, where reducing each
// vector alone takes ~2 log2(L) dependent shuffles and adds per sum.
// Vectors are 32 bytes (GCC/Clang vector extension): one AVX2 register in the AVX2 build, two
// SSE registers in the baseline one. They are loaded and stored unaligned, never through a
// pointer to the vector type (a container of them, std::vector, does not keep their 32-byte
// alignment), and passed by reference (by value, GCC warns that the baseline build's ABI
// differs). Every function is always inlined: this header is compiled into both builds, and an
// out-of-line copy of either could be picked for both by the linker.
#pragma once

#include <cstdint>

namespace galfast {

template <typename T>
struct LaneVecOf;
template <>
struct LaneVecOf<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef float unaligned __attribute__((vector_size(32), aligned(4), may_alias));
  typedef int32_t mask __attribute__((vector_size(32)));
};
template <>
struct LaneVecOf<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef double unaligned __attribute__((vector_size(32), aligned(8), may_alias));
  typedef int64_t mask __attribute__((vector_size(32)));
};
template <typename T>
using LaneVec = typename LaneVecOf<T>::type;

template <typename T>
constexpr int kLaneCount = static_cast<int>(sizeof(LaneVec<T>) / sizeof(T));

// Two-vector lane shuffle: lane l of the result is lane m[l] of the 2L lanes (a, b).
#if defined(__clang__)
#define GALFAST_SHUFFLE2(T, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define GALFAST_SHUFFLE2(T, a, b, ...) \
  __builtin_shuffle(a, b, typename LaneVecOf<T>::mask{__VA_ARGS__})
#endif

// Unaligned loads and stores through a may_alias vector type: with memcpy, GCC kept some
// vectors on the stack and copied them in 16-byte halves, and the 32-byte reload of such a
// copy stalls (store forwarding fails).
template <typename T>
[[gnu::always_inline]] inline void lane_load(LaneVec<T>& v, const T* p) {
  v = *reinterpret_cast<const typename LaneVecOf<T>::unaligned*>(p);
}

// The 4 floats at p in the low half, 0 in the high half (built from the elements: a 16-byte
// copy into a zeroed vector went through the stack, with the same stall).
[[gnu::always_inline]] inline void lane_load_low_half(LaneVec<float>& v, const float* p) {
  v = LaneVec<float>{p[0], p[1], p[2], p[3], 0.0f, 0.0f, 0.0f, 0.0f};
}

template <typename T>
[[gnu::always_inline]] inline void lane_store(T* p, const LaneVec<T>& v) {
  *reinterpret_cast<typename LaneVecOf<T>::unaligned*>(p) = v;
}

// Pairwise sums of adjacent lanes, interleaved by 128-bit half (what vhaddps/vhaddpd compute):
// float: (a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7).
[[gnu::always_inline]] inline void pair_sums(LaneVec<float>& out, const LaneVec<float>& a,
                                             const LaneVec<float>& b) {
  out = GALFAST_SHUFFLE2(float, a, b, 0, 2, 8, 10, 4, 6, 12, 14) +
        GALFAST_SHUFFLE2(float, a, b, 1, 3, 9, 11, 5, 7, 13, 15);
}
// double: (a0+a1, b0+b1 | a2+a3, b2+b3).
[[gnu::always_inline]] inline void pair_sums(LaneVec<double>& out, const LaneVec<double>& a,
                                             const LaneVec<double>& b) {
  out = GALFAST_SHUFFLE2(double, a, b, 0, 4, 2, 6) + GALFAST_SHUFFLE2(double, a, b, 1, 5, 3, 7);
}

// Low 128-bit half of each vector plus its high half, a's in the low half of the result.
[[gnu::always_inline]] inline void half_sums(LaneVec<float>& out, const LaneVec<float>& a,
                                             const LaneVec<float>& b) {
  out = GALFAST_SHUFFLE2(float, a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
        GALFAST_SHUFFLE2(float, a, b, 4, 5, 6, 7, 12, 13, 14, 15);
}
[[gnu::always_inline]] inline void half_sums(LaneVec<double>& out, const LaneVec<double>& a,
                                             const LaneVec<double>& b) {
  out = GALFAST_SHUFFLE2(double, a, b, 0, 1, 4, 5) + GALFAST_SHUFFLE2(double, a, b, 2, 3, 6, 7);
}

// sums[l] = the sum of vector l's lanes, for the kLaneCount vectors stored one after another
// at v (no alignment needed): a tree of pair_sums, then half_sums.
template <typename T>
[[gnu::always_inline]] inline void lane_sums(const T* v, T* sums) {
  constexpr int kLanes = kLaneCount<T>;
  LaneVec<T> x[kLanes];
  for (int l = 0; l < kLanes; ++l) lane_load(x[l], v + kLanes * l);
  for (int width = kLanes; width > 2; width /= 2) {  // x[l] for l < width / 2 from x[2l], x[2l+1]
    for (int l = 0; l < width / 2; ++l) pair_sums(x[l], x[2 * l], x[2 * l + 1]);
  }
  LaneVec<T> total;
  half_sums(total, x[0], x[1]);
  lane_store(sums, total);
}

#undef GALFAST_SHUFFLE2

}  // namespace galfast
