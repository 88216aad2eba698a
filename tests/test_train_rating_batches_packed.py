"""RatingBatches gathers each batch from one packed array: the same batches as four gathers."""

from __future__ import annotations

import pytest
import torch

from galfast.train import RatingBatch, RatingBatches
from galfast.train.batch_indices import index_batches


def _plain_batches(batches: RatingBatches, seed: int) -> list[RatingBatch]:
    # The batches as gathered field by field.
    torch.manual_seed(seed)
    out = []
    for idx in index_batches(batches.edge_index.size(1), batches.batch_size, batches.shuffle):
        src, dst = batches.edge_index[:, idx]
        out.append(RatingBatch(src, dst, batches.level[idx], batches.rating[idx]))
    return out


def _assert_same(got: RatingBatch, want: RatingBatch) -> None:
    for field in ("src", "dst", "level", "rating"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and torch.equal(a, b), field


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "ids", [(0, 50), (0, 1), (10_000, 3_000_000)]
)  # the last: ids near 2^32 per side, a key near 2^52
def test_batches_equal_the_field_by_field_gathers(seed, ids):
    gen = torch.Generator().manual_seed(seed)
    low, high = ids
    edge_index = torch.randint(low, max(high, low + 1), (2, 1000), generator=gen)
    edge_index[1] = (
        torch.randint(0, 1 << 20, (1000,), generator=gen) if high > 10**6 else edge_index[1]
    )
    ratings = torch.tensor([0.5, 1.0, 2.5, 4.0])[torch.randint(0, 4, (1000,), generator=gen)]
    batches = RatingBatches(edge_index, ratings, batch_size=96)
    assert batches._packed is not None
    torch.manual_seed(seed)
    got = list(batches)
    want = _plain_batches(batches, seed)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _assert_same(a, b)


def test_transposed_view_and_explicit_levels():
    ratings = torch.tensor([[0, 5, 3], [1, 6, 1], [2, 5, 5], [0, 7, 2]])
    batches = RatingBatches(ratings[:, :2].t(), ratings[:, 2], levels=range(1, 6), batch_size=3)
    torch.manual_seed(0)
    got = list(batches)
    for a, b in zip(got, _plain_batches(batches, 0)):
        _assert_same(a, b)


@pytest.mark.parametrize("case", ["huge ids", "negative zero"])
def test_unpackable_ratings_fall_back(case):
    edge_index = torch.tensor([[0, 1, 2], [3, 4, 5]])
    ratings = torch.tensor([1.0, 2.0, 1.0])
    levels = None
    if case == "huge ids":  # the key would need more than 62 bits
        edge_index[0, 0] = edge_index[1, 0] = 1 << 31
    else:  # -0.0 equals level 0.0 but is not bitwise its value
        levels, ratings = [0.0, 1.0, 2.0], torch.tensor([-0.0, 2.0, 1.0])
    batches = RatingBatches(edge_index, ratings, levels=levels, batch_size=2)
    assert batches._packed is None
    torch.manual_seed(1)
    for a, b in zip(list(batches), _plain_batches(batches, 1)):
        _assert_same(a, b)


def test_edits_after_building_are_seen():
    # The packed keys are a cache of the fields: an in-place edit or a new tensor assigned to
    # a field must show in the batches, as when the fields were gathered one by one.
    edge_index = torch.stack([torch.arange(6), torch.arange(6) + 10])
    ratings = torch.tensor([1.0, 2, 3, 4, 5, 1])
    batches = RatingBatches(edge_index, ratings, batch_size=None, shuffle=False)
    assert batches._packed is not None
    batches.edge_index[1, 2] = 99
    (batch,) = list(batches)
    _assert_same(batch, _plain_batches(batches, 0)[0])
    assert 99 in batch.dst.tolist()
    batches.rating = batches.rating * 2
    (batch,) = list(batches)
    assert torch.equal(batch.rating.sort().values, batches.rating.sort().values)
