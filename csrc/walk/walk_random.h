// The n-hop walks' counter-based generator, shared by the CPU and CUDA kernels: SplitMix64
// (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA'14) used as
// a two-level hash. Its output function mix64 is a bijection of 64-bit words with full
// avalanche; output i of a SplitMix64 stream with state s is mix64(s + (i + 1) * gamma), and
// an output may seed a new stream (SplitMix64's split).
//
//   stream key  S = mix64(seed)
//   pair key    K(p) = output p of the stream S = mix64(S + (p + 1) * gamma): walks 2p and
//               2p + 1 share it, so every hash serves two walks
//   draw bits   B(p, i) = K(p) for i = 0, else mix64(K(p) + i * gamma): output i - 1 of the
//               stream K(p)
//   first draw of hop h in attempt a:  B(p, a * 64 + h); walk 2p takes the low 32 bits, walk
//               2p + 1 the high 32 bits
//   redraw d >= 1 of walk w at hop h in attempt a:  B(p, 2^40 + ((a * 64 + h) * 32 + (d - 1) / 2)
//               * 2 + w % 2), the low 32 bits when d is odd, the high when even.
// Hop 0 of attempt 0 thus costs one hash per two walks and every later hop one more, where
// Philox4x32-10 took twenty multiplies per four walk-hops (docs/benchmarks.md, "n-hop sampler
// against a splitmix64 peer").
#pragma once

#include <cstdint>

#include "common/macros.h"

namespace galfast {
namespace walk_random {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
// Redraw indices start here; first-draw indices stay below 2^20 * 64 + 64 (attempts < 2^20).
constexpr uint64_t kRedrawBase = uint64_t(1) << 40;

GALFAST_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace walk_random

GALFAST_HD uint64_t walk_stream_key(uint64_t seed) { return walk_random::mix64(seed); }

// K(p) of walks 2p and 2p + 1.
GALFAST_HD uint64_t walk_pair_key(uint64_t stream_key, uint64_t pair) {
  return walk_random::mix64(stream_key + (pair + 1) * walk_random::kGamma);
}

// B(p, i) for the pair key K(p).
GALFAST_HD uint64_t walk_pair_bits(uint64_t pair_key, uint64_t i) {
  return i == 0 ? pair_key : walk_random::mix64(pair_key + i * walk_random::kGamma);
}

// The 64 bits of the first draws of hop `hop` in attempt `attempt` of a walk pair: the low
// half for the even walk, the high half for the odd one.
GALFAST_HD uint64_t first_draw_pair_bits(uint64_t pair_key, uint32_t attempt, int hop) {
  return walk_pair_bits(pair_key, uint64_t(attempt) * 64 + uint64_t(hop));
}

GALFAST_HD uint32_t half_of(uint64_t bits, uint64_t upper) {
  return static_cast<uint32_t>(upper ? bits >> 32 : bits);
}

// The word of redraw `draw` >= 1 of hop `hop` in attempt `attempt` of walk `walk`.
GALFAST_HD uint32_t redraw_word(uint64_t pair_key, uint64_t walk, uint32_t attempt, int hop,
                                int draw) {
  const uint64_t slot = (uint64_t(attempt) * 64 + uint64_t(hop)) * 32 + uint64_t(draw - 1) / 2;
  const uint64_t i = walk_random::kRedrawBase + slot * 2 + walk % 2;
  return half_of(walk_pair_bits(pair_key, i), (draw - 1) % 2);
}

}  // namespace galfast
