"""KGQueries: inverse triples, grouping into (entity, relation) queries with their answer sets,
lookup and the multi-hot targets, against a plain dictionary."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from galfast.models import kg_queries, with_inverses
from galfast.models.kg_queries import KGQueries

N, R = 7, 3


def _random_triples(seed, count=40):
    gen = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            torch.randint(0, N, (count,), generator=gen),
            torch.randint(0, R, (count,), generator=gen),
            torch.randint(0, N, (count,), generator=gen),
        ],
        dim=1,
    )


def _answers(triples):
    out = defaultdict(set)
    for h, r, t in triples.tolist():
        out[(h, r)].add(t)
        out[(t, r + R)].add(h)
    return out


def test_with_inverses():
    both = with_inverses(torch.tensor([[0, 1, 2]]), num_relations=3)
    assert both.tolist() == [[0, 1, 2], [2, 4, 0]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_queries_group_every_answer_once(seed):
    triples = _random_triples(seed)
    triples = torch.cat([triples, triples[:5]])  # duplicates count once
    q = kg_queries(triples, N, R)
    truth = _answers(triples)
    assert [tuple(x) for x in q.queries.tolist()] == sorted(truth)
    for i, (e, r) in enumerate(q.queries.tolist()):
        answers = q.answers[q.offsets[i] : q.offsets[i + 1]].tolist()
        assert answers == sorted(truth[(e, r)])
    targets = q.targets(torch.arange(q.num_queries))
    for i, key in enumerate(sorted(truth)):
        assert targets[i].nonzero().view(-1).tolist() == sorted(truth[key])


def test_find_contains_and_answer_pairs():
    triples = torch.tensor([[0, 0, 1], [0, 0, 2], [3, 2, 0]])
    q = kg_queries(triples, N, R)
    index = q.find(torch.tensor([0, 5, 0]), torch.tensor([0, 0, 5]))
    assert index[1].item() == -1 and index[0].item() >= 0 and index[2].item() >= 0
    rows, entities = q.answer_pairs(index)
    assert list(zip(rows.tolist(), entities.tolist())) == [(0, 1), (0, 2), (2, 3)]
    found = q.contains(torch.tensor([0, 0, 1]), torch.tensor([0, 0, 3]), torch.tensor([2, 3, 0]))
    assert found.tolist() == [True, False, True]
    assert q.targets(torch.tensor([-1])).sum().item() == 0


def test_empty_and_bad_triples():
    q = kg_queries(torch.zeros(0, 3, dtype=torch.int64), N, R)
    assert q.num_queries == 0 and q.find(torch.tensor([0]), torch.tensor([0])).tolist() == [-1]
    with pytest.raises(ValueError, match="relation id outside"):
        kg_queries(torch.tensor([[0, 3, 1]]), N, R)
    with pytest.raises(ValueError, match="entity id outside"):
        kg_queries(torch.tensor([[-1, 0, 1]]), N, R)
    with pytest.raises(ValueError, match="must be int64"):
        kg_queries(torch.tensor([[0.0, 0.0, 1.0]]), N, R)
    with pytest.raises(ValueError, match="overflow int64"):
        kg_queries(torch.tensor([[0, 0, 1]]), 2**31, 2**3)


def _hand_built(**changes):
    built = kg_queries(torch.tensor([[0, 0, 1], [0, 0, 2]]), num_entities=3, num_relations=1)
    fields = dict(
        queries=built.queries,
        offsets=built.offsets,
        answers=built.answers,
        num_entities=3,
        num_relations=1,
    )
    return KGQueries(**{**fields, **changes})


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        # was an IndexError in targets()
        ({"answers": torch.tensor([1, 2, 0, 7])}, "answer holds an id outside"),
        # find() searched them as if sorted and missed them
        ({"queries": torch.tensor([[1, 1], [0, 0], [2, 1]])}, "distinct and sorted"),
        ({"queries": torch.tensor([[0, 0], [1, 5], [2, 1]])}, "relation holds an id outside"),
        ({"offsets": torch.tensor([0, 2, 1, 4])}, "offsets must rise from 0"),
        ({"offsets": torch.tensor([0, 2, 3, 5])}, "offsets must rise from 0 to the 4 answers"),
        ({"offsets": torch.tensor([0, 2, 4])}, r"offsets \[Q \+ 1\]"),
        ({"answers": torch.tensor([1.0, 2.0, 0.0, 0.0])}, "answers must be a 1-D int64"),
        ({"num_entities": 2.5}, "^num_entities must be an int, got float"),
        ({"num_relations": 0}, "^num_relations must be >= 1, got 0"),
    ],
)
def test_hand_built_queries_are_checked(changes, match):
    with pytest.raises(ValueError, match=match):
        _hand_built(**changes)


def test_hand_built_queries_equal_to_the_built_ones_work():
    queries = _hand_built(num_entities=np.int64(3))
    assert queries.num_entities == 3 and type(queries.num_entities) is int
    assert queries.targets(torch.tensor([0, 2])).tolist() == [[0, 1, 1], [1, 0, 0]]
