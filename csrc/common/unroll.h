// Compile-time unrolling for register-tiled kernels: array indices that stay constants keep
// accumulator arrays in registers instead of on the stack.
#pragma once

#include <type_traits>
#include <utility>

namespace galfast {

// Calls f(std::integral_constant<int, I>()) for I = 0 .. N-1, each a compile-time constant.
template <typename F, int... I>
[[gnu::always_inline]] inline void unrolled(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>()), ...);
}
template <int N, typename F>
[[gnu::always_inline]] inline void unroll(F&& f) {
  unrolled(f, std::make_integer_sequence<int, N>());
}

constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

}  // namespace galfast
