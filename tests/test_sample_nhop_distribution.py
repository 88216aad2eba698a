"""The end-node distribution of galfast.ops.sample_nhop against exact enumeration of the
paper's algorithm, with a chi-square test that is shown to reject a slightly biased sampler."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from ref_sample_nhop import adjacency, bfs_distance, end_distribution, reference_walk

from galfast import Graph
from galfast.ops import sample_nhop

scipy_stats = pytest.importorskip("scipy.stats")

ALPHA = 1e-3  # reject the sampler when the chi-square p-value falls below this
WALKS = 20000
# A ring of 8 with two chords (cycles of lengths 3 to 8) and a pendant node 8 where walks
# get stuck; nodes lie at distances 1 to 4 from node 0.
EDGES = [(v, (v + 1) % 8) for v in range(8)] + [(1, 3), (4, 6), (2, 8)]
NUM_NODES = 9
OUT_ROWS = adjacency(EDGES + [(t, s) for s, t in EDGES], NUM_NODES)
CASES = [(0, 3), (8, 2), (2, 4)]  # (start, hops)


def graph():
    return Graph.from_edge_index(torch.tensor(EDGES).t(), NUM_NODES, symmetrize=True)


def chi_square_p(ends: list, expected: dict) -> float:
    """p-value of the observed ends (-1 = failure) under the exact distribution; an end
    outside its support makes the sample impossible (p = 0)."""
    if not set(ends) <= set(expected):
        return 0.0
    support = sorted(expected)
    assert len(support) > 1, "a chi-square test needs two outcomes or more"
    observed = np.array([ends.count(v) for v in support])
    return scipy_stats.chisquare(observed, [float(expected[v]) * len(ends) for v in support]).pvalue


def exact_mode_distribution(start: int, hops: int, max_retries: int) -> dict:
    """Exact mode = simple walks retried until one ends at distance `hops`: each attempt
    succeeds with probability s, the walk fails after max_retries + 1 failed attempts. (The
    starts used here all have a usable first step, so no attempt fails deterministically.)"""
    simple = end_distribution(OUT_ROWS, start, hops, "simple")
    good = {v: p for v, p in simple.items() if v >= 0 and bfs_distance(OUT_ROWS, start, v) == hops}
    success = sum(good.values(), Fraction(0))
    tries = 1 - (1 - success) ** (max_retries + 1)
    result = {v: p / success * tries for v, p in good.items()}
    if tries < 1:
        result[-1] = 1 - tries
    return result


@pytest.mark.parametrize("start,hops", CASES)
@pytest.mark.parametrize("mode", ["paper", "simple"])
def test_end_distribution_matches_enumeration(mode, start, hops):
    expected = end_distribution(OUT_ROWS, start, hops, mode)
    ends = sample_nhop(graph(), torch.full((WALKS,), start), hops, seed=2024, mode=mode)
    assert chi_square_p(ends.tolist(), expected) > ALPHA


@pytest.mark.parametrize("start,hops", [(0, 3), (1, 2), (8, 4)])
def test_exact_mode_distribution_is_the_conditioned_simple_walk(start, hops):
    expected = exact_mode_distribution(start, hops, max_retries=1)
    assert -1 in expected  # one retry leaves a visible failure rate to check as well
    ends = sample_nhop(
        graph(), torch.full((WALKS,), start), hops, seed=7, mode="exact", max_retries=1
    )
    assert chi_square_p(ends.tolist(), expected) > ALPHA


def test_one_hop_is_a_uniform_neighbour_of_a_hub():
    leaves = 60
    hub = Graph.from_edge_index(
        torch.stack([torch.zeros(leaves, dtype=torch.long), torch.arange(1, leaves + 1)]),
        symmetrize=True,
    )
    ends = sample_nhop(hub, torch.zeros(WALKS, dtype=torch.long), 1, seed=5)
    uniform = {v: Fraction(1, leaves) for v in range(1, leaves + 1)}
    assert chi_square_p(ends.tolist(), uniform) > ALPHA


def biased_walks(start: int, hops: int, mode: str, bias: float) -> list:
    """A sampler that takes the first remaining neighbour with extra probability `bias`."""
    rng = np.random.default_rng(0)

    def uniform(attempt, hop, draw, n):
        return 0 if rng.random() < bias else int(rng.integers(n))

    return [reference_walk(OUT_ROWS, start, hops, mode, uniform)[0] for _ in range(WALKS)]


@pytest.mark.parametrize("mode", ["paper", "simple"])
def test_the_check_rejects_a_sampler_favouring_the_first_neighbour(mode):
    start, hops = CASES[0]
    expected = end_distribution(OUT_ROWS, start, hops, mode)
    assert chi_square_p(biased_walks(start, hops, mode, bias=0.0), expected) > ALPHA
    assert chi_square_p(biased_walks(start, hops, mode, bias=0.05), expected) < ALPHA
