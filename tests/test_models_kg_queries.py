"""KGQueries: inverse triples, grouping into (entity, relation) queries with their answer sets,
lookup and the multi-hot targets, against a plain dictionary."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from galfast.models import kg_queries, with_inverses

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
