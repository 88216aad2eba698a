// Per-edge maths shared by the CPU and CUDA CompGCN kernels: the edge factor and the
// compositions (forward, and the relation gradient's psi), so both backends compute the same
// thing. A "unit" is one feature, or one (re, im) pair for kCorr.
#pragma once

#include <cstdint>

#include "common/macros.h"
#include "compgcn/compgcn.h"

namespace galfast {

// w_e = row_scale[r] * col_scale[c] * weight[id] in the accumulation type Acc.
template <typename T, typename Acc>
GALFAST_HD Acc compgcn_factor(const void* row_scale, const void* col_scale, const void* weight,
                              int64_t r, int64_t c, int64_t id) {
  Acc w = Acc(1);
  if (row_scale) w *= static_cast<const Acc*>(row_scale)[r];
  if (col_scale) w *= static_cast<const Acc*>(col_scale)[c];
  if (weight) w *= static_cast<Acc>(static_cast<const T*>(weight)[id]);
  return w;
}

// phi(a, b) of one feature for the real compositions (kSub, kMult, kSource).
template <Composition kOp, typename Acc>
GALFAST_HD Acc compose(Acc a, Acc b) {
  if constexpr (kOp == Composition::kSub) return a - b;
  if constexpr (kOp == Composition::kMult) return a * b;
  return a;
}

// (re, im) += w * conj(a) * b: one pair of the kCorr forward (and of its x-gradient).
template <typename Acc>
GALFAST_HD void conj_mul_add(Acc w, Acc a_re, Acc a_im, Acc b_re, Acc b_im, Acc& re, Acc& im) {
  re += w * (a_re * b_re + a_im * b_im);
  im += w * (a_re * b_im - a_im * b_re);
}

// psi(g, a) of one feature of the relation gradient for the real compositions: d phi / d b.
template <Composition kOp, typename Acc>
GALFAST_HD Acc rel_term(Acc g, Acc a) {
  if constexpr (kOp == Composition::kSub) return -g;
  return g * a;
}

// (re, im) += w * g * a: one pair of kCorr's relation gradient (d conj(a) b / d b contracted
// with g is g * a).
template <typename Acc>
GALFAST_HD void mul_add(Acc w, Acc g_re, Acc g_im, Acc a_re, Acc a_im, Acc& re, Acc& im) {
  re += w * (g_re * a_re - g_im * a_im);
  im += w * (g_re * a_im + g_im * a_re);
}

}  // namespace galfast
