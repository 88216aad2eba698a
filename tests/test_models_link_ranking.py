"""Filtered link-prediction ranking: hand-built score rows with known ranks, the three tie
conventions, filtering, head prediction through inverse relations, batching, and a brute-force
reference on random scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from galfast.models import (
    RankMetrics,
    evaluate_link_prediction,
    filtered_ranks,
    kg_queries,
)


def test_ranks_without_ties():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.3], [4.0, 3.0, 2.0, 1.0]])
    for ties in ("realistic", "optimistic", "pessimistic"):
        ranks = filtered_ranks(scores, torch.tensor([2, 3]), ties=ties)
        assert ranks.tolist() == [2.0, 4.0]


@pytest.mark.parametrize(
    ("ties", "expected"), [("optimistic", 2.0), ("pessimistic", 4.0), ("realistic", 3.0)]
)
def test_tie_conventions(ties, expected):
    # The answer (entity 1) ties with entities 2 and 3; entity 0 is above.
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.1]])
    assert filtered_ranks(scores, torch.tensor([1]), ties=ties).item() == expected


def test_filtering_removes_other_true_answers_but_never_the_answer():
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.7, 0.1]])
    known = torch.tensor([[True, True, False, True, False]])  # 0 and 3 are other true answers
    # Left: entity 2 ties with the answer -> realistic 1.5; the answer itself is marked known.
    assert filtered_ranks(scores, torch.tensor([1]), known).item() == 1.5
    assert filtered_ranks(scores, torch.tensor([1]), known, ties="optimistic").item() == 1.0
    assert filtered_ranks(scores, torch.tensor([1])).item() == 3.5  # raw: 0 and 3 above


def test_infinite_scores_rank_and_nan_is_refused():
    scores = torch.tensor([[float("inf"), 0.0, float("-inf")]])
    assert filtered_ranks(scores, torch.tensor([2])).item() == 3.0
    with pytest.raises(ValueError, match="NaN"):
        filtered_ranks(torch.tensor([[0.0, float("nan")]]), torch.tensor([0]))


def test_bad_arguments():
    with pytest.raises(ValueError, match="ties must be one of"):
        filtered_ranks(torch.zeros(1, 2), torch.tensor([0]), ties="random")
    with pytest.raises(ValueError, match=r"scores must be \[B, N\]"):
        filtered_ranks(torch.zeros(2), torch.tensor([0]))
    with pytest.raises(ValueError, match="known must be a bool"):
        filtered_ranks(torch.zeros(1, 2), torch.tensor([0]), torch.zeros(1, 2))


def test_rank_metrics_by_hand():
    m = RankMetrics.of(torch.tensor([1.0, 2.0, 4.0, 10.5]))
    assert m.mrr == pytest.approx((1 + 0.5 + 0.25 + 1 / 10.5) / 4)
    assert m.mr == pytest.approx(17.5 / 4)
    assert m.hits == {1: 0.25, 3: 0.5, 10: 0.75} and m.count == 4
    with pytest.raises(ValueError, match="no ranks"):
        RankMetrics.of(torch.zeros(0))


# A graph of 5 entities, 2 relations; the score of a query is a fixed table lookup.
TRIPLES = torch.tensor([[0, 0, 1], [0, 0, 2], [1, 1, 3], [4, 0, 2], [3, 1, 0]])
N, R = 5, 2


def _table(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(N, 2 * R, N, generator=gen)


def _brute_force(table, triples, all_triples, ties):
    """Ranks by loops over the candidate list, the way the metric is defined."""
    true = {tuple(t) for t in all_triples.tolist()}
    tails, heads = [], []
    for h, r, t in triples.tolist():
        for query, answer, side, is_true in (
            ((h, r), t, tails, lambda e, h=h, r=r: (h, r, e) in true),
            ((t, r + R), h, heads, lambda e, t=t, r=r: (e, r, t) in true),
        ):
            row = table[query[0], query[1]]
            others = [e for e in range(N) if e != answer and not is_true(e)]
            above = sum(1 for e in others if row[e] > row[answer])
            equal = sum(1 for e in others if row[e] == row[answer])
            extra = {"optimistic": 0, "pessimistic": equal, "realistic": equal / 2}[ties]
            side.append(above + 1 + extra)
    return tails, heads


@pytest.mark.parametrize("ties", ["realistic", "optimistic", "pessimistic"])
@pytest.mark.parametrize("batch_size", [1, 2, 100])
def test_evaluate_matches_brute_force(ties, batch_size):
    table = _table()
    table[3, 1, :] = 0.25  # a query whose scores all tie

    def score(entity, relation):
        return table[entity, relation]

    test = TRIPLES[[0, 2, 4]]
    result = evaluate_link_prediction(
        score, test, kg_queries(TRIPLES, N, R), batch_size=batch_size, ties=ties
    )
    tails, heads = _brute_force(table, test, TRIPLES, ties)
    assert result.tail_ranks.tolist() == tails and result.head_ranks.tolist() == heads
    both = torch.tensor(tails + heads, dtype=torch.float64)
    assert result.both.mrr == pytest.approx(float((1 / both).mean()))
    assert result.both.count == 6 and result.tail.count == 3


def test_head_queries_use_inverse_relations():
    seen = []

    def score(entity, relation):
        seen.append((entity.tolist(), relation.tolist()))
        return torch.zeros(entity.numel(), N)

    evaluate_link_prediction(score, TRIPLES[:2], kg_queries(TRIPLES, N, R))
    assert seen == [([0, 0], [0, 0]), ([1, 2], [2, 2])]


def test_filter_uses_every_known_triple():
    # Query (0, 0) has answers {1, 2}; 2 scores higher than 1, so unfiltered 1 ranks second.
    def score(entity, relation):
        out = torch.zeros(entity.numel(), N)
        out[:, 2] = 1.0
        out[:, 1] = 0.5
        return out

    test = TRIPLES[:1]
    filtered = evaluate_link_prediction(score, test, kg_queries(TRIPLES, N, R))
    assert filtered.tail_ranks.tolist() == [1.0]
    with pytest.raises(ValueError, match="known lacks some of the triples"):
        evaluate_link_prediction(score, test, kg_queries(TRIPLES[1:], N, R))


def test_score_function_must_return_all_entities():
    with pytest.raises(ValueError, match=r"must return \[2, 5\]"):
        evaluate_link_prediction(
            lambda e, r: torch.zeros(e.numel(), N - 1), TRIPLES[:2], kg_queries(TRIPLES, N, R)
        )
    with pytest.raises(ValueError, match="^batch_size must be >= 1, got 0"):
        evaluate_link_prediction(lambda e, r: e, TRIPLES, kg_queries(TRIPLES, N, R), batch_size=0)


def test_a_numpy_batch_size_ranks_as_an_int_does():
    score = lambda e, r: torch.arange(N, dtype=torch.float).expand(e.numel(), N)  # noqa: E731
    known = kg_queries(TRIPLES, N, R)
    got = evaluate_link_prediction(score, TRIPLES, known, batch_size=np.int64(2))
    plain = evaluate_link_prediction(score, TRIPLES, known, batch_size=2)
    assert torch.equal(got.tail_ranks, plain.tail_ranks) and got.both == plain.both
    with pytest.raises(ValueError, match="^batch_size must be an int, got float"):
        evaluate_link_prediction(score, TRIPLES, known, batch_size=2.0)
