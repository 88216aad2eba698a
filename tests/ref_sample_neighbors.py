"""Plain-Python reference of galfast.ops.sample_neighbors, used only by the tests.

It shares nothing with the kernel but the specification (csrc/sampler/sample_neighbors.h): the
Philox twin of ref_sample_nhop, Floyd's algorithm over a Python set, the exponential keys from
math.log (the kernel's own log agrees to ~1e-15, far closer than any two keys of the test
graphs), and a dict for the first-appearance numbering. Batches drawn with the same counters
must match the kernel exactly; exact_subset_probabilities gives the distribution the draws must
follow.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import NamedTuple, Optional

from ref_philox import MASK32, philox4x32_10


class RefBlock(NamedTuple):
    num_dst: int
    src_nodes: list
    rowptr: list
    col: list
    edge_id: list


def draw_word(seed: int, batch: int, layer: int, node: int, draw: int) -> int:
    """The 32-bit word of draw `draw` of destination `node` (counter layout in the header)."""
    counter = (node & MASK32, node >> 32, batch, (layer << 26) | (draw // 4))
    return philox4x32_10(counter, (seed & MASK32, seed >> 32))[draw % 4]


def floyd_slots(degree: int, k: int, word) -> list:
    chosen: set = set()
    for j in range(degree - k, degree):
        t = (word(j - (degree - k)) * (j + 1)) >> 32
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


def exponential_key_slots(weights: list, k: int, word) -> list:
    keyed = [(-math.log((word(t) + 0.5) / 2**32) / w, t) for t, w in enumerate(weights) if w > 0]
    return sorted(t for _, t in sorted(keyed)[:k])


def sample_slots(weights: Optional[list], degree: int, fanout: int, word) -> list:
    """The row slots one destination takes."""
    if weights is None:
        if fanout < 0 or degree <= fanout:
            return list(range(degree))
        return floyd_slots(degree, fanout, word)
    candidates = [t for t, w in enumerate(weights) if w > 0]
    if fanout < 0 or len(candidates) <= fanout:
        return candidates
    return exponential_key_slots(weights, fanout, word)


def reference_sample(
    rowptr: list,
    col: list,
    seeds: list,
    fanouts: list,
    seed: int,
    batch: int = 0,
    edge_weight: Optional[list] = None,
) -> list:
    """The blocks of one batch, in hop order."""
    blocks, dst = [], list(seeds)
    for layer, fanout in enumerate(fanouts):
        local = {v: i for i, v in enumerate(dst)}
        nodes = list(dst)
        out_rowptr, out_col, out_edge = [0], [], []
        for v in dst:
            begin, end = rowptr[v], rowptr[v + 1]
            weights = None if edge_weight is None else edge_weight[begin:end]

            def word(draw, v=v, layer=layer):
                return draw_word(seed, batch, layer, v, draw)

            for t in sample_slots(weights, end - begin, fanout, word):
                source = col[begin + t]
                if source not in local:
                    local[source] = len(nodes)
                    nodes.append(source)
                out_col.append(local[source])
                out_edge.append(begin + t)
            out_rowptr.append(len(out_col))
        blocks.append(RefBlock(len(dst), nodes, out_rowptr, out_col, out_edge))
        dst = nodes
    return blocks


def exact_subset_probabilities(weights: list, k: int) -> dict:
    """Probability of each k-subset of slots under successive sampling without replacement
    (each next slot drawn proportionally to its weight among those left), summed over the
    orders in which the subset can be drawn. Uniform sampling is the case of equal weights."""
    weights = [Fraction(w) for w in weights]
    total = sum(weights)
    result: dict = {}
    for order in itertools.permutations([t for t, w in enumerate(weights) if w > 0], k):
        prob, left = Fraction(1), total
        for t in order:
            prob *= weights[t] / left
            left -= weights[t]
        key = tuple(sorted(order))
        result[key] = result.get(key, Fraction(0)) + prob
    return result
