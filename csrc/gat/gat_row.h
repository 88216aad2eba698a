// Per-edge attention maths of the GAT kernels: the LeakyReLU logit and its slope and the logit
// gradient (CPU and CUDA), the streaming (online) softmax state of one (row, head) and the
// attention recomputed from the saved log-sum-exp (CUDA; the CPU kernels do both a whole row at
// a time, with a vectorised exp).
#pragma once

#include <cmath>
#include <limits>

#include "common/macros.h"

namespace galfast {

GALFAST_HD float gat_exp(float v) { return expf(v); }
GALFAST_HD double gat_exp(double v) { return exp(v); }
GALFAST_HD float gat_log(float v) { return logf(v); }
GALFAST_HD double gat_log(double v) { return log(v); }

// Written as max + slope * min (the same value as v > 0 ? v : v * slope): the CPU compiles it
// to vmaxss / vminss, where the branchy form mispredicts on half of the random logits.
template <typename Acc>
GALFAST_HD Acc leaky_relu(Acc v, Acc slope) {
  const Acc positive = v > Acc(0) ? v : Acc(0);
  const Acc negative = v > Acc(0) ? Acc(0) : v;  // NaN lands here and stays NaN
  return positive + slope * negative;
}

// d LeakyReLU / dv, with torch's convention at 0 (the negative-side slope).
template <typename Acc>
GALFAST_HD Acc leaky_relu_grad(Acc v, Acc slope) {
  return v > Acc(0) ? Acc(1) : slope;
}

// Softmax over a stream of logits in one pass: keeps the running maximum and the sum of
// exp(z - max). A caller accumulating exp(z - max) * value rescales its accumulator by the
// factor push() returns whenever the maximum moves.
template <typename Acc>
struct OnlineSoftmax {
  Acc max = -std::numeric_limits<Acc>::infinity();
  Acc sum = Acc(0);

  // Folds logit z in; sets `weight` = exp(z - max) for the new term and returns the factor by
  // which everything accumulated so far must be multiplied.
  GALFAST_HD Acc push(Acc z, Acc& weight) {
    if (z > max) {
      const Acc rescale = gat_exp(max - z);
      sum = sum * rescale + Acc(1);
      max = z;
      weight = Acc(1);
      return rescale;
    }
    weight = gat_exp(z - max);
    sum += weight;
    return Acc(1);
  }

  // log sum exp(z), -inf for an empty stream.
  GALFAST_HD Acc lse() const {
    return sum > Acc(0) ? max + gat_log(sum) : -std::numeric_limits<Acc>::infinity();
  }

  // 1 / sum exp(z - max), 0 for an empty stream (so empty rows give 0).
  GALFAST_HD Acc inv_sum() const { return sum > Acc(0) ? Acc(1) / sum : Acc(0); }
};

// One edge's attention recomputed from its row's saved log-sum-exp, and the LeakyReLU slope at
// its pre-activation (what the logit gradient needs). The logit is summed as the forward sums
// it, (a_src + a_dst) + a_edge: in another order cancellation can give another logit.
template <typename Acc>
struct EdgeAttention {
  Acc prob;
  Acc slope;
};

template <typename Acc>
GALFAST_HD EdgeAttention<Acc> recompute_attention(Acc a_src, Acc a_dst, Acc a_edge, Acc lse,
                                                  Acc slope) {
  const Acc pre = (a_src + a_dst) + a_edge;
  return {gat_exp(leaky_relu(pre, slope) - lse), leaky_relu_grad(pre, slope)};
}

// dL/d(alpha_src[j] + alpha_dst[i]) of one edge, given dot = <grad_out[i], h[j]> and the row's
// delta = <grad_out[i], out[i]> (see gat.h).
template <typename Acc>
GALFAST_HD Acc logit_grad(const EdgeAttention<Acc>& a, Acc keep, Acc dot, Acc delta) {
  return a.prob * (keep * dot - delta) * a.slope;
}

}  // namespace galfast
