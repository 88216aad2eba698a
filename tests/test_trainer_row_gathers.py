"""EdgeHead gathers rows with index_select (issue 19, a whole MovieLens run): the rows, and
the gradient of rows picked several times, are those of plain indexing. (A decoder with an
``edge_scores`` method, BilinearRatingDecoder, takes the ids instead: tests/test_edge_scores.py.)"""

from __future__ import annotations

import torch

from galfast.models import BilinearRatingDecoder, DotProductLinkDecoder
from galfast.train import EdgeHead, RatingBatches
from galfast.train.batches import RatingBatch


class _Forward(torch.nn.Module):
    """The decoder's forward alone (no edge_scores method: EdgeHead gathers the rows)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, z_src, z_dst):
        return self.decoder(z_src, z_dst)


def test_edge_head_matches_indexing_with_repeated_rows_bitwise():
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(30, 6, generator=gen, requires_grad=True)
    src = torch.randint(0, 10, (200,), generator=gen)  # many repeats
    dst = torch.randint(10, 30, (200,), generator=gen).int()  # int32 ids too
    batch = RatingBatch(src, dst, torch.zeros(200, dtype=torch.long), torch.ones(200))
    decoder = BilinearRatingDecoder(6)
    out = EdgeHead(_Forward(decoder))(z, batch)
    grad = torch.randn(out.shape, generator=gen)
    out.backward(grad)
    z_ref = z.detach().clone().requires_grad_()
    ref = decoder(z_ref[src], z_ref[dst.long()])
    ref.backward(grad)
    assert torch.equal(out, ref) and torch.equal(z.grad, z_ref.grad)


def test_edge_head_still_takes_what_indexing_takes():
    z = torch.arange(12.0).view(6, 2)
    mask = torch.tensor([True, False, True, False, False, True])
    batch = RatingBatch(mask, [1, 2, 3], None, None)
    head = EdgeHead(torch.nn.Bilinear(2, 2, 1))
    assert head(z, batch).shape == (3, 1)


def test_rating_batches_yield_the_indexed_ratings():
    torch.manual_seed(0)
    pairs = torch.randint(0, 50, (2, 1000))
    ratings = torch.randint(1, 6, (1000,)).float()
    seen = []
    for batch in RatingBatches(pairs, ratings, batch_size=128):
        assert batch.src.shape == batch.dst.shape == batch.level.shape == (batch.rating.numel(),)
        assert torch.equal(batch.rating, batch.level.float() + 1)
        seen.append(torch.stack([batch.src, batch.dst, batch.rating.long()]))
    seen = torch.cat(seen, 1)
    key = lambda t: (t[0] * 50 + t[1]) * 10 + t[2]  # noqa: E731
    expected = torch.stack([pairs[0], pairs[1], ratings.long()])
    assert torch.equal(key(seen).sort().values, key(expected).sort().values)


def test_rating_batches_gather_from_contiguous_storage_the_same_batches():
    # Issue 19: the MovieLens setup passes ratings[:, :2].t() (a strided view); the batches
    # hold one contiguous copy and gather with index_select, and yield exactly what
    # indexing the original tensors yields.
    gen = torch.Generator().manual_seed(3)
    table = torch.stack(
        [
            torch.randint(0, 40, (500,), generator=gen),
            torch.randint(40, 90, (500,), generator=gen),
            torch.randint(1, 6, (500,), generator=gen),
        ],
        1,
    )
    pairs, ratings = table[:, :2].t(), table[:, 2]
    assert not pairs.is_contiguous() and not ratings.is_contiguous()
    batches = RatingBatches(pairs, ratings, levels=range(1, 6), batch_size=64)
    assert batches.edge_index.is_contiguous() and batches.rating.is_contiguous()
    torch.manual_seed(7)
    got = list(batches)
    torch.manual_seed(7)
    order = torch.randperm(500)
    assert len(got) == 8
    for i, batch in enumerate(got):
        idx = order[64 * i : 64 * (i + 1)]
        assert torch.equal(batch.src, pairs[0, idx]) and torch.equal(batch.dst, pairs[1, idx])
        assert torch.equal(batch.rating, ratings[idx].float())
        assert torch.equal(batch.level, ratings[idx] - 1)
        assert batch.src.is_contiguous() and batch.dst.is_contiguous()


def test_edge_head_gathers_id_tensors_with_gather_rows(monkeypatch):
    import galfast.ops

    calls, real = [], galfast.ops.gather_rows

    def counted(z, ids):
        calls.append(ids)
        return real(z, ids)

    monkeypatch.setattr(galfast.ops, "gather_rows", counted)
    z = torch.randn(8, 4)
    src, dst = torch.tensor([0, 1, 1]), torch.tensor([5, 7, 6], dtype=torch.int32)
    EdgeHead(DotProductLinkDecoder())(z, RatingBatch(src, dst, None, None))
    assert len(calls) == 2 and calls[0] is src and calls[1] is dst
