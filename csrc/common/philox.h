// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel Random Numbers: As
// Easy as 1, 2, 3" (SC'11). Its four 32-bit outputs are a pure function of a 128-bit counter
// and a 64-bit key, so any thread of any backend computes any draw without shared state: a
// sampler that numbers its draws gets the same numbers on CPU and CUDA, for any thread count.
// Bit-compatible with Random123's philox4x32 with 10 rounds (tests/test_philox.py checks the
// Python twin against Random123's known answers; the kernels are checked against that twin).
#pragma once

#include <cstdint>

#include "common/macros.h"

namespace galfast {

struct PhiloxBlock {
  uint32_t v[4];
};

namespace philox_detail {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // key schedule increments (golden ratio, sqrt 3 - 1)
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

GALFAST_HD uint32_t mul_hi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

}  // namespace philox_detail

// The Philox4x32-10 block for counter (c0, c1, c2, c3) and key (k0, k1).
GALFAST_HD PhiloxBlock philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                     uint32_t k0, uint32_t k1) {
  using namespace philox_detail;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint32_t hi0 = mul_hi(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = mul_hi(kMul1, c2), lo1 = kMul1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

// Maps a uniform 32-bit word to [0, n) by a multiply-shift (Lemire): floor(x * n / 2^32).
// Each value's probability is within 1/2^32 of 1/n (a relative bias below n / 2^32).
GALFAST_HD uint32_t uniform_below(uint32_t x, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(x) * n) >> 32);
}

}  // namespace galfast
