"""galfast.ops.row_dot_grads (the rating decoder's backward) against its reference
(tests/ref_row_dots.py) and the torch forms bilinear_forms used before it, bitwise."""

from __future__ import annotations

import pytest
import torch
from ref_row_dots import row_dot_grads_ref

from galfast import ops
from galfast.ops import row_dot_grads
from galfast.ops.row_dots import _row_dot_grads_op


def _inputs(rows, num_vectors, width, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(rows, num_vectors, width, generator=gen, dtype=dtype),
        torch.randn(rows, width, generator=gen, dtype=dtype),
        torch.randn(rows, num_vectors, generator=gen, dtype=dtype),
    )


def _torch_forms(vectors, z, grad):
    grad_z = vectors[:, 0] * grad[:, :1]
    for s in range(1, vectors.size(1)):
        grad_z = torch.addcmul(grad_z, vectors[:, s], grad[:, s : s + 1])
    return grad.unsqueeze(2) * z.unsqueeze(1), grad_z


SHAPES = [(8192, 2, 20), (300, 1, 7), (129, 3, 33), (50, 5, 1), (0, 2, 4), (6, 2, 0)]


def _addcmul_fuses() -> bool:
    """Whether torch's CPU addcmul rounds once (a fused multiply-add), as galfast's kernel."""
    vectors, z, _ = _inputs(4096, 1, 20, seed=9)
    a, b, c = vectors[:, 0], z, z.flip(0)
    fused = (a.double() * b.double() + c.double()).float()
    return torch.equal(torch.addcmul(c, a, b), fused) and not torch.equal(fused, c + a * b)


@pytest.mark.parametrize("rows, num_vectors, width", SHAPES)
def test_equals_the_reference_bitwise(rows, num_vectors, width):
    vectors, z, grad = _inputs(rows, num_vectors, width)
    grad[::4] = -0.0
    got, expected = row_dot_grads(vectors, z, grad), row_dot_grads_ref(vectors, z, grad)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert got[1].signbit().equal(expected[1].signbit())


@pytest.mark.skipif(not _addcmul_fuses(), reason="torch's addcmul does not fuse on this CPU")
@pytest.mark.parametrize("rows, num_vectors, width", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_the_torch_forms_it_replaced_bitwise(rows, num_vectors, width, dtype):
    vectors, z, grad = _inputs(rows, num_vectors, width, dtype)
    grad[::4] = -0.0
    got, expected = row_dot_grads(vectors, z, grad), _torch_forms(vectors, z, grad)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert got[1].signbit().equal(expected[1].signbit())


@pytest.mark.parametrize("threads", [2, 3])
def test_result_does_not_depend_on_the_thread_count(threads):
    inputs = _inputs(5000, 2, 20, seed=1)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = row_dot_grads(*inputs)
        torch.set_num_threads(threads)
        many = row_dot_grads(*inputs)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(one[0], many[0]) and torch.equal(one[1], many[1])


def test_strided_inputs():
    vectors, z, grad = _inputs(40, 2, 6, seed=2)
    z_t = z.t().contiguous().t()
    got = row_dot_grads(vectors.transpose(0, 1).contiguous().transpose(0, 1), z_t, grad)
    expected = row_dot_grads_ref(vectors, z, grad)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_opcheck():
    torch.library.opcheck(_row_dot_grads_op, _inputs(10, 2, 4, seed=3))


def test_half_precision_takes_the_torch_forms():
    vectors, z, grad = (t.to(torch.bfloat16) for t in _inputs(10, 2, 4, seed=4))
    got, expected = row_dot_grads(vectors, z, grad), _torch_forms(vectors, z, grad)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


@pytest.mark.parametrize(
    "shapes, match",
    [
        (((4, 6), (4, 6), (4, 1)), "vectors must have shape"),
        (((4, 0, 6), (4, 6), (4, 0)), "vectors must have shape"),
        (((4, 2, 6), (4, 5), (4, 2)), "need z"),
        (((4, 2, 6), (4, 6), (3, 2)), "need z"),
    ],
)
def test_bad_shapes_raise(shapes, match):
    with pytest.raises(ValueError, match=match):
        row_dot_grads(*(torch.zeros(s) for s in shapes))


def test_mixed_dtypes_raise():
    vectors, z, grad = _inputs(4, 2, 3)
    with pytest.raises(ValueError, match="share a dtype"):
        row_dot_grads(vectors, z.double(), grad)
    with pytest.raises(ValueError, match="z must be a torch.Tensor"):
        row_dot_grads(vectors, [1.0], grad)


def test_bilinear_forms_backward_uses_it(monkeypatch):
    from galfast.models.bilinear_forms import bilinear_forms

    calls, real = [], ops.row_dot_grads

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(ops, "row_dot_grads", counted)
    gen = torch.Generator().manual_seed(5)
    z_src, z_dst = (torch.randn(30, 4, generator=gen, requires_grad=True) for _ in range(2))
    bases = torch.randn(2, 4, 4, generator=gen, requires_grad=True)
    bilinear_forms(z_src, bases, z_dst).sum().backward()
    assert len(calls) == 1


def test_exported_from_ops():
    assert "row_dot_grads" in ops.__all__
