// Per-edge logic shared by the CPU and CUDA aggregation kernels: the edge factor and the
// reduction step. Both backends call these, so the maths is written once.
#pragma once

#include <cstdint>

#include "aggregate/aggregate.h"
#include "common/macros.h"

namespace galfast {

GALFAST_HD int64_t edge_ident(const AggregateParams& p, int64_t e) {
  return p.edge_id ? p.edge_id[e] : e;
}

// w_e = row_scale[r] * col_scale[c] * weight[id(e)] for slot e of row r; Acc is the
// accumulation type. edge_id is only read when there is a weight to look up.
template <typename T, typename Acc>
GALFAST_HD Acc edge_factor(const AggregateParams& p, int64_t r, int64_t c, int64_t e) {
  Acc w = Acc(1);
  if (p.row_scale) w *= static_cast<const Acc*>(p.row_scale)[r];
  if (p.col_scale) w *= static_cast<const Acc*>(p.col_scale)[c];
  if (p.weight) w *= static_cast<Acc>(static_cast<const T*>(p.weight)[edge_ident(p, e)]);
  return w;
}

// Max step for a slot whose current winner has id cur_id (-1: none yet). The first edge is
// always taken; later ones win when strictly larger (ties keep the earlier edge); a NaN wins
// over a number and then sticks, as torch's amax propagates it. Bitwise operators, not
// short-circuit ones: no branch, so the CPU kernel's loop over the features vectorises.
template <typename Acc>
GALFAST_HD bool max_takes(Acc candidate, Acc current, int64_t cur_id) {
  return (cur_id < 0) | (candidate > current) | ((candidate != candidate) & (current == current));
}

}  // namespace galfast
