// Attention dropout with counter-based randomness: whether edge e, head k is dropped is a pure
// function of (seed, e, k), computed with Philox4x32-10 (Salmon et al., SC'11). The forward and
// backward passes, the CPU and the CUDA kernels, and any thread count all draw the same mask,
// so no mask is ever stored.
#pragma once

#include <cstdint>

#include "common/macros.h"

namespace galfast {

// First 32-bit word of Philox4x32-10 for key (seed) and counter (e, k, 0).
GALFAST_HD uint32_t philox_draw(uint64_t seed, uint64_t e, uint32_t k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(e), c1 = static_cast<uint32_t>(e >> 32), c2 = k, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c0;
}

// The dropout of one launch: a coefficient is dropped when its 32-bit draw is below
// `threshold` (= q * 2^32) and otherwise scaled by 1 / (1 - q), as torch.nn.functional.dropout.
struct AttentionDropout {
  uint64_t seed = 0;
  uint64_t threshold = 0;  // 0: no dropout; 2^32: drop everything
  double scale = 1.0;

  GALFAST_HD AttentionDropout(double q, uint64_t seed_) : seed(seed_) {
    if (q >= 1.0) {
      threshold = uint64_t(1) << 32;
      scale = 0.0;
    } else if (q > 0.0) {
      threshold = static_cast<uint64_t>(q * 4294967296.0);
      scale = 1.0 / (1.0 - q);
    }
  }

  // keep_e: 0 when edge e, head k is dropped, else 1 / (1 - q) (1 without dropout).
  template <typename Acc>
  GALFAST_HD Acc keep(int64_t e, int64_t k) const {
    if (threshold == 0) return Acc(1);
    const uint32_t draw = philox_draw(seed, static_cast<uint64_t>(e), static_cast<uint32_t>(k));
    return draw < threshold ? Acc(0) : static_cast<Acc>(scale);
  }
};

}  // namespace galfast
