"""pair_rows: both endpoints' rows with one backward, bitwise equal to two index_selects."""

from __future__ import annotations

import pytest
import torch

from galfast.models import BilinearRatingDecoder
from galfast.train import EdgeHead, RatingBatch
from galfast.train.pair_rows import pair_rows


def _grads(z, src, dst, g_src, g_dst, fused):
    z = z.detach().requires_grad_()
    rows = pair_rows(z, src, dst) if fused else (z.index_select(0, src), z.index_select(0, dst))
    ((rows[0] * g_src).sum() + (rows[1] * g_dst).sum()).backward()
    return rows, z.grad


def _case(kind, seed):
    gen = torch.Generator().manual_seed(seed)
    n, b = 50, 400
    if kind == "bipartite":  # sources in [0, 20), destinations in [20, 50), many repeats
        src, dst = (
            torch.randint(0, 20, (b,), generator=gen),
            torch.randint(20, n, (b,), generator=gen),
        )
    elif kind == "shared":  # ids in both
        src, dst = (
            torch.randint(0, n, (b,), generator=gen),
            torch.randint(0, n, (b,), generator=gen),
        )
    elif kind == "self":  # every pair a self loop
        src = torch.randint(0, n, (b,), generator=gen)
        dst = src.clone()
    else:  # empty batch
        src = dst = torch.zeros(0, dtype=torch.int64)
    rows = src.numel()
    z = torch.randn(n, 7, generator=gen)
    scale = torch.logspace(-6, 6, rows * 7).view(rows, 7)  # wide range: rounding shows
    return (
        z,
        src,
        dst,
        torch.randn(rows, 7, generator=gen) * scale,
        torch.randn(rows, 7, generator=gen),
    )


@pytest.mark.parametrize("kind", ["bipartite", "shared", "self", "empty"])
@pytest.mark.parametrize("seed", range(3))
def test_values_and_gradient_equal_two_index_selects_bitwise(kind, seed):
    z, src, dst, g_src, g_dst = _case(kind, seed)
    rows, grad = _grads(z, src, dst, g_src, g_dst, fused=True)
    want_rows, want_grad = _grads(z, src, dst, g_src, g_dst, fused=False)
    assert torch.equal(rows[0], want_rows[0]) and torch.equal(rows[1], want_rows[1])
    assert torch.equal(grad, want_grad)


def test_int32_ids_and_no_grad():
    z, src, dst, g_src, g_dst = _case("bipartite", 0)
    rows, grad = _grads(z, src.int(), dst.int(), g_src, g_dst, fused=True)
    _, want = _grads(z, src, dst, g_src, g_dst, fused=False)
    assert torch.equal(grad, want)
    with torch.no_grad():
        a, b = pair_rows(z.requires_grad_(), src, dst)
    assert a.grad_fn is None and torch.equal(b, z.detach()[dst])


def test_gradcheck_and_gradgradcheck_float64():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    src, dst = torch.tensor([0, 2, 2, 5]), torch.tensor([1, 2, 4, 4])

    def f(z):
        return pair_rows(z, src, dst)

    assert torch.autograd.gradcheck(f, (z,))
    assert torch.autograd.gradgradcheck(f, (z,))


def test_edge_head_takes_both_endpoints_in_one_backward():
    torch.manual_seed(0)
    decoder = BilinearRatingDecoder(8, 5)
    z = torch.randn(30, 8, requires_grad=True)
    batch = RatingBatch(
        torch.randint(0, 10, (64,)),
        torch.randint(10, 30, (64,)),
        torch.zeros(64).long(),
        torch.ones(64),
    )
    out = EdgeHead(decoder)(z, batch)
    names, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node.name() not in names:
            names.add(node.name())
            stack.extend(next_fn for next_fn, _ in node.next_functions)
    assert "_PairRowsBackward" in names and "IndexSelectBackward0" not in names
    out.sum().backward()
    want_z = z.detach().requires_grad_()
    want = decoder(want_z[batch.src], want_z[batch.dst])
    want.sum().backward()
    assert torch.equal(out, want) and torch.equal(z.grad, want_z.grad)


def test_other_devices_take_two_plain_gathers():
    z = torch.randn(5, 2, device="meta", requires_grad=True)
    a, b = pair_rows(z, torch.tensor([0, 1], device="meta"), torch.tensor([2, 3], device="meta"))
    assert a.grad_fn.name() == "IndexSelectBackward0" and b.grad_fn.name() == "IndexSelectBackward0"
