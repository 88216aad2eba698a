// Dispatch of a feature tail to a register tile of compile-time width, shared by the CPU
// kernels that keep per-row accumulators in registers (aggregation, GAT).
#pragma once

#include <cstdint>
#include <type_traits>

namespace galfast {

// Calls tile(std::integral_constant<int, W>()) with W = `width` rounded down to a multiple of 4
// when that is 4 to 28, and returns W (0 otherwise, without calling). One tile of W elements
// covers what would otherwise take one pass per power-of-two tile (F = 20: one pass over a
// row's edges rather than a 16-wide and a 4-wide one).
template <typename Tile>
[[gnu::always_inline]] inline int64_t tail_tile(int64_t width, Tile tile) {
  switch (width / 4) {
    case 7:
      return tile(std::integral_constant<int, 28>()), 28;
    case 6:
      return tile(std::integral_constant<int, 24>()), 24;
    case 5:
      return tile(std::integral_constant<int, 20>()), 20;
    case 4:
      return tile(std::integral_constant<int, 16>()), 16;
    case 3:
      return tile(std::integral_constant<int, 12>()), 12;
    case 2:
      return tile(std::integral_constant<int, 8>()), 8;
    case 1:
      return tile(std::integral_constant<int, 4>()), 4;
    default:
      return 0;
  }
}

}  // namespace galfast
