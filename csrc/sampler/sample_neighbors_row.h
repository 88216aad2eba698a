// The per-destination maths of the neighbour sampler (sample_neighbors.h), shared by the CPU
// and CUDA kernels: the destination's random words, the uniform draw (Floyd) and the weighted
// one (exponential keys), each writing the chosen row slots in increasing order.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"
#include "common/philox.h"
#include "sampler/sample_neighbors.h"

namespace galfast {

// The Philox words of one destination's draws; consecutive draws share a block of four.
struct DestinationDraws {
  uint32_t c0, c1, batch, layer_bits, k0, k1;
  uint32_t cached = ~0u;  // index of the block in `block`; draws stay below 2^26, blocks 2^24
  PhiloxBlock block;

  GALFAST_HD DestinationDraws(const SampleNeighborsParams& p, int64_t node)
      : c0(static_cast<uint32_t>(node)),
        c1(static_cast<uint32_t>(static_cast<uint64_t>(node) >> 32)),
        batch(p.batch),
        layer_bits(static_cast<uint32_t>(p.layer) << 26),
        k0(static_cast<uint32_t>(p.seed)),
        k1(static_cast<uint32_t>(p.seed >> 32)) {}

  GALFAST_HD uint32_t word(uint32_t r) {
    const uint32_t b = r / 4;
    if (b != cached) {
      block = philox4x32_10(c0, c1, batch, layer_bits | b, k0, k1);
      cached = b;
    }
    return block.v[r % 4];
  }
};

// -ln(u) for u = (x + 1/2) / 2^32, in (0, 33 ln 2]. Written with IEEE division and explicit
// fma only (no library log, whose last bit differs between libm and CUDA, and no product a
// compiler could fuse on one backend only), so both backends get the same double. With
// n = 2x + 1 = m 2^e, m in [sqrt(1/2), sqrt(2)): ln u = (e - 33) ln 2 + ln m, and
// ln m = 2 atanh(s) = s (2 + 2 z / 3 + 2 z^2 / 5 + ...), s = (m - 1) / (m + 1), z = s^2 <= 0.0295;
// nine terms leave a relative error below 1e-15.
GALFAST_HD double neg_log_unit(uint32_t x) {
  const uint64_t n = 2 * static_cast<uint64_t>(x) + 1;
#if defined(__CUDA_ARCH__)
  int e = 63 - __clzll(static_cast<long long>(n));
#else
  int e = 63 - __builtin_clzll(n);
#endif
  double m = static_cast<double>(n) / static_cast<double>(uint64_t(1) << e);  // exact
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double poly = 2.0 / 17.0;
  poly = fma(poly, z, 2.0 / 15.0);
  poly = fma(poly, z, 2.0 / 13.0);
  poly = fma(poly, z, 2.0 / 11.0);
  poly = fma(poly, z, 2.0 / 9.0);
  poly = fma(poly, z, 2.0 / 7.0);
  poly = fma(poly, z, 2.0 / 5.0);
  poly = fma(poly, z, 2.0 / 3.0);
  poly = fma(poly, z, 2.0);
  const double log_m = s * poly;
  return fma(static_cast<double>(33 - e), 0.6931471805599453, -log_m);
}

template <typename Weight>
GALFAST_HD bool is_candidate(const Weight* weight, int64_t edge) {
  return weight == nullptr || static_cast<double>(weight[edge]) > 0.0;
}

// Edges destination v gets: min(fanout, candidates), every candidate when fanout < 0. The
// weighted count stops at the fanout-th positive weight.
template <typename Weight>
GALFAST_HD int64_t sampled_count(const SampleNeighborsParams& p, const Weight* weight,
                                 int64_t begin, int64_t end) {
  const int64_t limit = p.fanout < 0 ? end - begin : p.fanout;
  if (weight == nullptr) return end - begin < limit ? end - begin : limit;
  int64_t candidates = 0;
  for (int64_t e = begin; e < end && candidates < limit; ++e) candidates += is_candidate(weight, e);
  return candidates;
}

// First position in the sorted slots[0, size) holding a value >= t.
GALFAST_HD int64_t sorted_position(const int64_t* slots, int64_t size, int64_t t) {
  int64_t lo = 0, hi = size;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (slots[mid] < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Floyd's algorithm: k distinct slots of [0, degree), uniform over all k-subsets, written to
// slots[0, k) in increasing order. O(k^2) at worst (sorted insertion), independent of degree.
GALFAST_HD void floyd_sample(int64_t degree, int64_t k, DestinationDraws& draws, int64_t* slots) {
  int64_t size = 0;
  for (int64_t j = degree - k; j < degree; ++j) {
    const uint32_t r = static_cast<uint32_t>(j - (degree - k));
    int64_t t = uniform_below(draws.word(r), static_cast<uint32_t>(j + 1));
    int64_t pos = sorted_position(slots, size, t);
    if (pos < size && slots[pos] == t) {  // taken before: take j, larger than every slot so far
      t = j;
      pos = size;
    }
    for (int64_t q = size; q > pos; --q) slots[q] = slots[q - 1];
    slots[pos] = t;
    ++size;
  }
}

// A-ES: the k positive-weight slots of smallest key -ln(u_t) / w_t, ties to the lower slot,
// kept sorted by key in keys/slots while the row is scanned, then sorted by slot.
template <typename Weight>
GALFAST_HD void exponential_keys_sample(const Weight* row_weight, int64_t degree, int64_t k,
                                        DestinationDraws& draws, int64_t* slots, double* keys) {
  int64_t size = 0;
  for (int64_t t = 0; t < degree; ++t) {
    const double w = static_cast<double>(row_weight[t]);
    if (!(w > 0.0)) continue;
    const double key = neg_log_unit(draws.word(static_cast<uint32_t>(t))) / w;
    if (size == k && !(key < keys[k - 1])) continue;
    int64_t pos = size == k ? k - 1 : size;
    while (pos > 0 && keys[pos - 1] > key) {
      keys[pos] = keys[pos - 1];
      slots[pos] = slots[pos - 1];
      --pos;
    }
    keys[pos] = key;
    slots[pos] = t;
    if (size < k) ++size;
  }
  for (int64_t a = 1; a < size; ++a) {
    const int64_t t = slots[a];
    int64_t b = a;
    for (; b > 0 && slots[b - 1] > t; --b) slots[b] = slots[b - 1];
    slots[b] = t;
  }
}

// Samples destination i's edges into edge_id/src[out_rowptr[i], out_rowptr[i + 1]), whose size
// the caller made sampled_count(...) of the row [begin, end) of node v.
template <typename Weight>
GALFAST_HD void sample_destination(const SampleNeighborsParams& p, const Weight* weight,
                                   int64_t node, int64_t begin, int64_t end, int64_t i) {
  const int64_t out_begin = p.out_rowptr[i];
  const int64_t n_out = p.out_rowptr[i + 1] - out_begin;
  if (n_out == 0) return;
  const int64_t degree = end - begin;
  int64_t* slots = p.edge_id + out_begin;
  if (p.fanout < 0 || n_out < p.fanout || (weight == nullptr && degree <= p.fanout)) {
    int64_t o = 0;  // every candidate, in row order
    for (int64_t e = begin; e < end; ++e) {
      if (is_candidate(weight, e)) slots[o++] = e - begin;
    }
  } else if (weight == nullptr) {
    DestinationDraws draws(p, node);
    floyd_sample(degree, n_out, draws, slots);
  } else {
    DestinationDraws draws(p, node);
    exponential_keys_sample(weight + begin, degree, n_out, draws, slots, p.key_scratch + out_begin);
  }
  for (int64_t o = 0; o < n_out; ++o) {
    slots[o] += begin;
    p.src[out_begin + o] = p.col[slots[o]];
  }
}

}  // namespace galfast
