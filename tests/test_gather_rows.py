"""galfast.ops.gather_rows against its reference (tests/ref_gather_rows.py) and against
index_select, whose rows and gradient it must reproduce bitwise."""

from __future__ import annotations

import pytest
import torch
from ref_gather_rows import gather_rows_ref, scatter_add_rows_ref

from galfast import ops
from galfast.ops import gather_rows
from galfast.ops.gather_rows import _gather_op, _scatter_op

DTYPES = (torch.float32, torch.float64)
INDEX_DTYPES = (torch.int64, torch.int32)


def _cases(gen: torch.Generator) -> dict:
    """name -> (x, index): the awkward ones included."""
    big = torch.randn(300, 20, generator=gen)
    return {
        "random": (torch.randn(50, 7, generator=gen), torch.randint(0, 50, (80,), generator=gen)),
        "many_duplicates": (big, torch.randint(0, 40, (5000,), generator=gen)),
        "hub": (big, torch.full((3000,), 17)),
        "empty_index": (torch.randn(9, 4, generator=gen), torch.zeros(0, dtype=torch.long)),
        "empty_table": (torch.randn(0, 4, generator=gen), torch.zeros(0, dtype=torch.long)),
        "one_row": (torch.randn(1, 3, generator=gen), torch.zeros(5, dtype=torch.long)),
        "trailing_dims": (
            torch.randn(12, 3, 4, generator=gen),
            torch.randint(0, 12, (30,), generator=gen),
        ),
        "vector": (torch.randn(20, generator=gen), torch.randint(0, 20, (33,), generator=gen)),
        "zero_width": (torch.randn(6, 0, generator=gen), torch.tensor([5, 0, 5])),
        "odd_width_unused_rows": (
            torch.randn(1000, 33, generator=gen),
            torch.randint(0, 10, (700,), generator=gen),
        ),
    }


def _forward_backward(fn, x, index, grad):
    x = x.detach().clone().requires_grad_()
    out = fn(x, index)
    out.backward(grad)
    return out.detach(), x.grad


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_rows_and_gradient_are_index_selects_bitwise(dtype, index_dtype):
    gen = torch.Generator().manual_seed(0)
    for name, (x, index) in _cases(gen).items():
        x, index = x.to(dtype), index.to(index_dtype)
        grad = torch.randn((index.numel(), *x.shape[1:]), generator=gen, dtype=dtype)
        grad[::3] = -0.0  # a row only -0.0 reaches still sums to +0.0, as in index_add_
        out, grad_x = _forward_backward(gather_rows, x, index, grad)
        ref_out, ref_grad = _forward_backward(lambda t, i: t.index_select(0, i), x, index, grad)
        assert torch.equal(out, ref_out), name
        assert torch.equal(grad_x, ref_grad), name
        assert grad_x.signbit().equal(ref_grad.signbit()), name
        assert torch.equal(out, gather_rows_ref(x, index)), name
        assert torch.equal(grad_x, scatter_add_rows_ref(grad, index, x.size(0))), name


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_result_does_not_depend_on_the_thread_count(threads):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2000, 20, generator=gen)
    index = torch.cat([torch.randint(0, 2000, (6000,), generator=gen), torch.full((3000,), 5)])
    grad = torch.randn(index.numel(), 20, generator=gen)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _forward_backward(gather_rows, x, index, grad)
        torch.set_num_threads(threads)
        many = _forward_backward(gather_rows, x, index, grad)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(one[0], many[0]) and torch.equal(one[1], many[1])
    assert torch.equal(one[1], scatter_add_rows_ref(grad, index, 2000))


def test_gradcheck_and_gradgradcheck_float64():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(7, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([6, 0, 6, 6, 2, 0])
    assert torch.autograd.gradcheck(gather_rows, (x, index))
    assert torch.autograd.gradgradcheck(gather_rows, (x, index))


def test_opcheck():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(10, 4, generator=gen, requires_grad=True)
    index = torch.tensor([3, 3, 9, 0])
    torch.library.opcheck(_gather_op, (x, index))
    torch.library.opcheck(_scatter_op, (torch.randn(4, 4, requires_grad=True), index, 10))


def test_compiled_gather_matches_eager():
    x = torch.randn(10, 4, requires_grad=True)
    index = torch.tensor([3, 3, 9, 0, 3])
    compiled = torch.compile(lambda t, i: gather_rows(t, i) * 2, backend="aot_eager")
    out = compiled(x, index)
    out.sum().backward()
    assert torch.equal(out, x.detach()[index] * 2)
    assert torch.equal(x.grad, torch.zeros(10, 4).index_add_(0, index, torch.full((5, 4), 2.0)))


def test_strided_input_and_no_grad():
    x = torch.randn(4, 9).t()  # [9, 4], not contiguous
    index = torch.tensor([8, 1, 1])
    assert torch.equal(gather_rows(x, index), x.index_select(0, index))
    with torch.no_grad():
        y = torch.randn(5, 2, requires_grad=True)
        out = gather_rows(y, index.clamp(max=4))
    assert not out.requires_grad


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64])
def test_other_dtypes_take_index_select(dtype):
    x = (torch.randn(6, 3) * 10).to(dtype)
    index = torch.tensor([5, 0, 5], dtype=torch.int32)
    assert torch.equal(gather_rows(x, index), x.index_select(0, index))


@pytest.mark.parametrize("bad", [6, 1000, -1, -7])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_out_of_range_index_raises_index_error(bad, index_dtype):
    x = torch.randn(6, 3)
    index = torch.tensor([0, 2, bad, 1], dtype=index_dtype)
    with pytest.raises(IndexError, match=r"index\[2\] = .* out of range for 6 rows"):
        gather_rows(x, index)
    with pytest.raises(IndexError):  # index_select does not wrap negatives either
        x.index_select(0, index)


def test_out_of_range_in_a_parallel_gather_raises():
    x = torch.randn(100, 20)
    index = torch.randint(0, 100, (5000,))
    index[4321] = 100
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(IndexError, match=r"index\[4321\] = 100"):
            gather_rows(x, index)
    finally:
        torch.set_num_threads(previous)


def test_empty_table_with_an_index_raises():
    with pytest.raises(IndexError, match="out of range for 0 rows"):
        gather_rows(torch.zeros(0, 2), torch.tensor([0]))


@pytest.mark.parametrize(
    "x, index, match",
    [
        (torch.tensor(1.0), torch.tensor([0]), "at least one dimension"),
        ([1.0, 2.0], torch.tensor([0]), "x must be a torch.Tensor"),
        (torch.randn(3, 2), [0, 1], "index must be a torch.Tensor"),
        (torch.randn(3, 2), torch.tensor([[0, 1]]), "1-D int32 or int64"),
        (torch.randn(3, 2), torch.tensor([0.0]), "1-D int32 or int64"),
        (torch.randn(3, 2), torch.tensor([0], dtype=torch.int16), "1-D int32 or int64"),
    ],
)
def test_bad_inputs_raise_value_error(x, index, match):
    with pytest.raises(ValueError, match=match):
        gather_rows(x, index)


def test_exported_from_ops():
    assert ops.gather_rows is gather_rows and "gather_rows" in ops.__all__
