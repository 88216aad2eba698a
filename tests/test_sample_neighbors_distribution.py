"""The subsets galfast.ops.sample_neighbors draws, against their exact probabilities (uniform:
every k-subset alike; weighted: successive sampling proportional to weight), by a chi-square
test shown to reject a sampler whose likeliest subset is 25% off.

The draws are a pure function of the seed, so each test gives the same counts on every run:
it cannot flake. Many batches of many identical stars give the samples: destination c of a star
has the in-edges of its leaves, and every (star, batch) pair is an independent draw.
"""

from __future__ import annotations

import pytest
import torch
from ref_sample_neighbors import exact_subset_probabilities

from galfast import Graph
from galfast.ops import sample_neighbors

scipy_stats = pytest.importorskip("scipy.stats")

ALPHA = 1e-3  # reject the sampler when the chi-square p-value falls below this
STARS = 1000
BATCHES = 40  # 40,000 draws per test
DEGREE = 6


def stars(weights: list) -> tuple[Graph, torch.Tensor]:
    """STARS disjoint stars: centre s * (DEGREE + 1) with in-edges from its DEGREE leaves, the
    leaf in slot t weighted weights[t] (rows are sorted by source, so slot t = leaf t)."""
    centres = torch.arange(STARS) * (DEGREE + 1)
    leaves = centres[:, None] + 1 + torch.arange(DEGREE)
    edge_index = torch.stack([leaves.reshape(-1), centres.repeat_interleave(DEGREE)])
    weight = torch.tensor(weights, dtype=torch.float64).repeat(STARS)
    graph = Graph.from_edge_index(edge_index, STARS * (DEGREE + 1), weight)
    return graph, centres


def subset_counts(graph: Graph, centres: torch.Tensor, k: int, weighted: bool) -> dict:
    counts: dict = {}
    for batch in range(BATCHES):
        block = sample_neighbors(
            graph,
            centres,
            [k],
            seed=99,
            batch=batch,
            edge_weight=graph.edge_weight if weighted else None,
        )[0]
        slots = (block.edge_id - graph.rowptr[centres][block.row]).view(STARS, k)
        for row in slots.tolist():
            counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    return counts


def chi_square_p(counts: dict, expected: dict) -> float:
    if not set(counts) <= set(expected):
        return 0.0  # a subset of probability 0 was drawn
    support = sorted(expected)
    total = sum(counts.values())
    observed = [counts.get(s, 0) for s in support]
    return scipy_stats.chisquare(observed, [float(expected[s]) * total for s in support]).pvalue


def biased(expected: dict) -> dict:
    """The same distribution with its likeliest subset 25% likelier, the others rescaled."""
    top = max(expected, key=expected.get)
    scale = (1 - expected[top] * 1.25) / (1 - expected[top])
    return {s: p * (1.25 if s == top else scale) for s, p in expected.items()}


CASES = {
    "uniform": ([1.0] * DEGREE, 3, False),
    "uniform_k1": ([1.0] * DEGREE, 1, False),
    "weighted": ([1.0, 2.0, 3.0, 4.0, 0.5, 1.5], 2, True),
    "weighted_with_zero": ([1.0, 0.0, 3.0, 0.25, 2.0, 1.0], 3, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_subsets_follow_the_exact_distribution(case):
    weights, k, weighted = CASES[case]
    graph, centres = stars(weights)
    counts = subset_counts(graph, centres, k, weighted)
    expected = exact_subset_probabilities(weights, k)
    assert chi_square_p(counts, expected) > ALPHA
    # the same counts reject a distribution 25% off on one subset: the test has power
    assert chi_square_p(counts, biased(expected)) < ALPHA


def test_weighted_marginals_differ_from_uniform():
    """A sampler that ignored the weights would pass only the uniform cases."""
    weights, k, _ = CASES["weighted"]
    graph, centres = stars(weights)
    counts = subset_counts(graph, centres, k, weighted=True)
    uniform = exact_subset_probabilities([1.0] * DEGREE, k)
    assert chi_square_p(counts, uniform) < ALPHA
