"""bilinear_forms (issue 19, a whole MovieLens run): GC-MC's per-basis bilinear forms by one
matrix multiply and element-wise products, equal to the einsum it replaces, in value and in
first and second derivatives."""

from __future__ import annotations

import pytest
import torch

from galfast.models import BilinearRatingDecoder
from galfast.models.bilinear_forms import _RowDots, bilinear_forms


def _reference(z_src, bases, z_dst):
    return torch.einsum("bd,sde,be->bs", z_src, bases, z_dst)


def _inputs(rows, dim, num_bases, cols, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()  # noqa: E731
    return make(rows, dim), make(num_bases, dim, cols), make(rows, cols)


@pytest.mark.parametrize(
    "rows, dim, num_bases, cols", [(300, 20, 2, 20), (17, 5, 1, 5), (40, 6, 4, 3), (0, 4, 2, 4)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_the_einsum_value_and_gradients(rows, dim, num_bases, cols, dtype):
    inputs = _inputs(rows, dim, num_bases, cols, dtype)
    copies = [t.detach().clone().requires_grad_() for t in inputs]
    out, expected = bilinear_forms(*inputs), _reference(*copies)
    grad = torch.randn(out.shape, dtype=dtype)
    out.backward(grad)
    expected.backward(grad)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, expected, **tol)
    for mine, theirs in zip(inputs, copies):
        torch.testing.assert_close(mine.grad, theirs.grad, **tol)


def test_gradcheck_and_gradgradcheck_float64():
    inputs = _inputs(7, 4, 3, 5, torch.float64, seed=1)
    assert torch.autograd.gradcheck(bilinear_forms, inputs)
    assert torch.autograd.gradgradcheck(bilinear_forms, inputs)


@pytest.mark.parametrize("num_bases", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_dots_gradients_are_the_broadcast_products_bitwise(num_bases, dtype):
    gen = torch.Generator().manual_seed(num_bases)
    vectors = torch.randn(500, num_bases, 20, generator=gen, dtype=dtype, requires_grad=True)
    z = torch.randn(500, 20, generator=gen, dtype=dtype, requires_grad=True)
    grad = torch.randn(500, num_bases, generator=gen, dtype=dtype)
    _RowDots.apply(vectors, z).backward(grad)
    assert torch.equal(vectors.grad, grad.unsqueeze(2) * z.detach().unsqueeze(1))
    expected = vectors.detach()[:, 0] * grad[:, :1]
    for s in range(1, num_bases):
        expected = torch.addcmul(expected, vectors.detach()[:, s], grad[:, s : s + 1])
    assert torch.equal(z.grad, expected)


def test_gradient_for_only_some_inputs():
    z_src, bases, z_dst = _inputs(9, 4, 2, 4, torch.float64)
    (grad_bases,) = torch.autograd.grad(bilinear_forms(z_src.detach(), bases, z_dst).sum(), bases)
    (expected,) = torch.autograd.grad(_reference(z_src.detach(), bases, z_dst).sum(), bases)
    torch.testing.assert_close(grad_bases, expected)


@pytest.mark.parametrize(
    "shapes",
    [((3, 4), (2, 4, 4), (2, 4)), ((3, 4), (2, 5, 4), (3, 4)), ((3, 4), (0, 4, 4), (3, 4))],
)
def test_mismatched_shapes_raise(shapes):
    with pytest.raises(ValueError, match="z_src"):
        bilinear_forms(*(torch.zeros(s) for s in shapes))


def test_rating_decoder_uses_it_and_keeps_its_parameters():
    decoder = BilinearRatingDecoder(20, 5, num_bases=2)
    assert set(decoder.state_dict()) == {"bases", "coefficients", "levels"}
    z_src, z_dst = torch.randn(64, 20), torch.randn(64, 20)
    logits = decoder(z_src, z_dst)
    graph = [logits.grad_fn]
    names = set()
    while graph:
        node = graph.pop()
        names.add(type(node).__name__)
        graph += [fn for fn, _ in node.next_functions if fn is not None]
    assert "_RowDotsBackward" in names and not any("Bmm" in n for n in names)
    expected = _reference(z_src, decoder.bases, z_dst) @ decoder.coefficients.t()
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
