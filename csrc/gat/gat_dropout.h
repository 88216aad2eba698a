// Attention dropout with counter-based randomness: whether edge e, head k is dropped is a pure
// function of (seed, e, k), computed with Philox4x32-10 (common/philox.h). The forward and
// backward passes, the CPU and the CUDA kernels, and any thread count all draw the same mask,
// so no mask is ever stored.
#pragma once

#include <cstdint>

#include "common/macros.h"
#include "common/philox.h"

namespace galfast {

// First 32-bit word of Philox4x32-10 for key (seed) and counter (e, k, 0).
GALFAST_HD uint32_t philox_draw(uint64_t seed, uint64_t e, uint32_t k) {
  return philox4x32_10(static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32), k, 0,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32))
      .v[0];
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

  GALFAST_HD bool active() const { return threshold != 0; }

  // keep_e: 0 when edge e, head k is dropped, else 1 / (1 - q) (1 without dropout).
  template <typename Acc>
  GALFAST_HD Acc keep(int64_t e, int64_t k) const {
    if (threshold == 0) return Acc(1);
    const uint32_t draw = philox_draw(seed, static_cast<uint64_t>(e), static_cast<uint32_t>(k));
    return draw < threshold ? Acc(0) : static_cast<Acc>(scale);
  }
};

}  // namespace galfast
