// exp over an array, written so the compiler vectorises the loop (no library call, no branch):
// libm's expf is an opaque call per element, which keeps the CPU GAT kernels scalar.
// x = n ln2 + r with |r| <= ln2 / 2; exp(r) by its degree-6 Taylor polynomial (relative error
// below 2e-7 there) and 2^n built in the float's exponent bits. Inputs below ln(FLT_MIN)
// (-inf included) give exactly 0, as the softmax needs: a -inf logit must not contribute, even
// next to a huge feature (results are never subnormal); inputs above 88 are clamped there; NaN
// stays NaN. float only: double keeps libm (it serves float64 checks, not speed).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace galfast {

// ln(FLT_MIN): below it exp(x) would be subnormal.
constexpr float kExpUnderflow = -87.3365448f;

[[gnu::always_inline]] inline float exp_approx(float x) {
  // compare-selects vectorise; fmin/fmax do not
  const float low = x < kExpUnderflow ? kExpUnderflow : x;
  const float clamped = low > 88.0f ? 88.0f : low;
  // Round x / ln2 to the nearest integer by adding 1.5 * 2^23: n lands in the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  uint32_t n_bits;
  std::memcpy(&n_bits, &shifted, sizeof(n_bits));
  const uint32_t exponent = (n_bits - 0x4B400000u + 127u) << 23;  // 2^n as float bits
  float scale;
  std::memcpy(&scale, &exponent, sizeof(scale));
  // Cody-Waite: ln2 split in a part exact in float and a correction.
  const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float result = x < kExpUnderflow ? 0.0f : p * scale;
  return x == x ? result : x;
}

// v[i] = exp(v[i] - shift) for i in [0, n).
[[gnu::always_inline]] inline void exp_shifted(float* __restrict v, int64_t n, float shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) v[i] = exp_approx(v[i] - shift);
}

[[gnu::always_inline]] inline void exp_shifted(double* __restrict v, int64_t n, double shift) {
  for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i] - shift);
}

}  // namespace galfast
