"""1-N knowledge-graph batches: every query once per epoch with all its true answers, and the
order a pure function of (seed, epoch)."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from galfast.models import kg_queries
from galfast.train import OneToNBatches

N, R = 9, 2


def _queries(seed=0, count=60):
    gen = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [
            torch.randint(0, N, (count,), generator=gen),
            torch.randint(0, R, (count,), generator=gen),
            torch.randint(0, N, (count,), generator=gen),
        ],
        dim=1,
    )
    return triples, kg_queries(triples, N, R)


def _order(batches, epoch):
    return torch.cat([b.query for b in batches.epoch(epoch)]).tolist()


def test_each_epoch_covers_every_query_once_with_all_true_answers():
    triples, queries = _queries()
    truth = defaultdict(set)
    for h, r, t in triples.tolist():
        truth[(h, r)].add(t)
        truth[(t, r + R)].add(h)
    batches = OneToNBatches(queries, batch_size=7, seed=3)
    seen = []
    for batch in batches:
        assert batch.targets.shape == (batch.entity.numel(), N) and batch.entity.numel() <= 7
        assert batch.targets.dtype == torch.float32
        for e, r, row in zip(batch.entity.tolist(), batch.relation.tolist(), batch.targets):
            assert set(row.nonzero().view(-1).tolist()) == truth[(e, r)]
            seen.append((e, r))
    assert sorted(seen) == sorted(truth) and len(seen) == len(truth)
    assert len(batches) == -(-len(truth) // 7)


def test_same_seed_same_batches_and_epochs_differ():
    _, queries = _queries()
    a, b = OneToNBatches(queries, 5, seed=11), OneToNBatches(queries, 5, seed=11)
    assert _order(a, 0) == _order(b, 0) and _order(a, 4) == _order(b, 4)
    assert _order(a, 0) != _order(a, 1)
    assert _order(a, 0) != _order(OneToNBatches(queries, 5, seed=12), 0)
    # Iterating walks the epochs 0, 1, ... and equals epoch(e).
    firsts = [torch.cat([x.query for x in a]).tolist() for _ in range(2)]
    assert firsts == [_order(b, 0), _order(b, 1)]


def test_without_seed_the_global_generator_decides():
    _, queries = _queries()
    batches = OneToNBatches(queries, 5)
    torch.manual_seed(5)
    first = _order(batches, 0)
    torch.manual_seed(5)
    assert _order(batches, 7) == first


def test_unshuffled_and_full_batch():
    _, queries = _queries()
    ordered = OneToNBatches(queries, 4, shuffle=False)
    assert _order(ordered, 0) == list(range(queries.num_queries))
    whole = list(OneToNBatches(queries, None, seed=0))
    assert len(whole) == 1 and whole[0].entity.numel() == queries.num_queries


def test_bad_arguments():
    _, queries = _queries()
    with pytest.raises(ValueError, match="queries must be a KGQueries"):
        OneToNBatches(torch.zeros(3, 3), 4)
    with pytest.raises(ValueError, match="batch_size must be (an int|>= 1)"):
        OneToNBatches(queries, 0)
    for seed in (-1, 2**64, 1.5):  # 2**64 drew seed 0's orders
        with pytest.raises(
            ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"
        ):
            OneToNBatches(queries, 4, seed=seed)


@pytest.mark.parametrize("batch_size", [4, 7, 8])
def test_a_lone_last_query_joins_the_batch_before_it(batch_size):
    """ConvE's batch norm fails on a training batch of one query: where the last batch would
    hold one, the batch before it takes it, and every query is still visited once."""
    _, queries = _queries(count=40)
    count = queries.num_queries
    sizes = [b.entity.numel() for b in OneToNBatches(queries, batch_size, seed=0)]
    assert sum(sizes) == count and len(sizes) == len(OneToNBatches(queries, batch_size))
    assert min(sizes) >= 2
    full, rest = divmod(count, batch_size)
    if rest == 1:
        assert sizes == [batch_size] * (full - 1) + [batch_size + 1]
    else:
        assert sizes == [batch_size] * full + ([rest] if rest else [])
    assert sorted(_order(OneToNBatches(queries, batch_size, seed=0), 0)) == list(range(count))


def test_a_query_count_one_past_a_multiple_folds_and_batches_of_one_stay():
    _, queries = _queries(count=40)
    count = queries.num_queries
    folded = [b.entity.numel() for b in OneToNBatches(queries, count - 1, shuffle=False)]
    assert folded == [count]
    ones = [b.entity.numel() for b in OneToNBatches(queries, 1, shuffle=False)]
    assert ones == [1] * count
