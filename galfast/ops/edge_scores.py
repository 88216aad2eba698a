"""GC-MC's bilinear rating decoder on a batch of edges, fused (csrc/edge_scores/edge_scores.h):
``out[b, r] = sum_s coefficients[r, s] * z[src[b]] @ bases[s] @ z[dst[b]]``.

The composition it replaces (two row gathers, the ``[B, D] x [D, S D]`` product, the row-wise
dot products and the coefficient product; MovieLens: 8,192 edges, D = 20, S = 2, R = 5) runs
about ten ATen calls forward and as many backward, each with its own pass over ``[B, S, D]``
intermediates. The CPU kernels here take each edge once forward and once backward and keep its
rows in registers; the backward writes ``grad_z`` by a destination-owned scatter and sums the
parameter gradients per fixed chunk of edges, so every result is bitwise independent of the
thread count (the sums round differently from the composition's, at rounding level). On CPUs with
AVX-512, float32 runs a kernel with 16 edges in the 16 lanes of a vector
(csrc/edge_scores/edge_scores_avx512.cpp; ``_C.set_edge_scores_simd(False)`` turns it off); the
kernels write the scores as ``[R, B]`` storage and return its ``[B, R]`` transposed view.

GPU tensors, dtypes other than float32 / float64 and embeddings wider than the kernels take
(``_C.edge_scores_max_dim``: 64 floats, 32 doubles) run the torch composition. A double
backward differentiates the composition."""

from __future__ import annotations

import torch
from torch import Tensor

from galfast._dtypes import CPU_DTYPES, check_float_dtype, kernel_dtype
from galfast._native import _C
from galfast.ops._eager import composition_grads, eager_function, tracing
from galfast.ops._functorch import transforms_active
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["bilinear_edge_scores"]

_INDEX_DTYPES = (torch.int32, torch.int64)
# The widest embedding the kernels take, per dtype: a constant of the build, read once here
# because torch.compile cannot trace a call into the extension (a graph break).
_MAX_DIM = {dtype: _C.edge_scores_max_dim(kernel_dtype(dtype)) for dtype in CPU_DTYPES}


# ---------------------------------------------------------------- kernels (csrc/edge_scores)
def _params(z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor):
    p = _C.EdgeScoresParams()
    p.z, p.src, p.dst = ptr(z), ptr(src), ptr(dst)
    p.bases, p.coefficients = ptr(bases), ptr(coefficients)
    p.num_nodes, p.dim = z.shape
    p.num_edges = src.size(0)
    p.num_levels, p.num_bases = coefficients.shape
    p.int32_ids = src.dtype == torch.int32
    p.dtype = kernel_dtype(z.dtype)
    return p


def _edge_scores_outputs(
    z: Tensor, src: Tensor, bases: Tensor, coefficients: Tensor
) -> tuple[Tensor, Tensor]:
    """(out ``[R, B]``: the scores transposed, projected: the rows ``z[src[b]] @ bases[s]`` the
    backward reads, ``[ceil(B / 16), S, D, 16]`` where the edges-in-lanes kernel runs (16
    edges' rows side by side), else ``[B, S, padded D]`` zero-padded to whole vectors)."""
    num_edges, num_bases, dim = src.size(0), bases.size(0), z.size(1)
    if _C.edge_scores_edges_in_lanes(kernel_dtype(z.dtype), dim):
        projected_shape = (-(-num_edges // 16), num_bases, dim, 16)
    else:
        projected_shape = (
            num_edges,
            num_bases,
            _C.edge_scores_padded_dim(kernel_dtype(z.dtype), dim),
        )
    return z.new_empty((coefficients.size(0), num_edges)), z.new_empty(projected_shape)


def _edge_scores(
    z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> tuple[Tensor, Tensor]:
    out, projected = _edge_scores_outputs(z, src, bases, coefficients)
    p = _params(z, src, dst, bases, coefficients)
    p.out, p.projected = ptr(out), ptr(projected)
    p.edges_in_lanes = projected.dim() == 4
    run_kernel("edge_scores", p, z.device)
    return out, projected


def _scores_only(
    z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> Tensor:
    """The scores ``[R, B]`` with no backward to come (no projected rows written)."""
    out = z.new_empty((coefficients.size(0), src.size(0)))
    p = _params(z, src, dst, bases, coefficients)
    p.out = ptr(out)
    p.edges_in_lanes = _C.edge_scores_edges_in_lanes(p.dtype, p.dim)
    run_kernel("edge_scores", p, z.device)
    return out


def _edge_scores_backward_outputs(
    z: Tensor, bases: Tensor, coefficients: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_z like z, grad_bases like bases, grad_coefficients like coefficients)."""
    return (
        z.new_empty(z.shape),
        bases.new_empty(bases.shape),
        coefficients.new_empty(coefficients.shape),
    )


def _edge_scores_backward(
    grad: Tensor,
    z: Tensor,
    src: Tensor,
    dst: Tensor,
    bases: Tensor,
    coefficients: Tensor,
    projected: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    grad_z, grad_bases, grad_coefficients = _edge_scores_backward_outputs(z, bases, coefficients)
    p = _params(z, src, dst, bases, coefficients)
    p.projected = ptr(projected)
    p.edges_in_lanes = projected.dim() == 4  # the layout the forward wrote
    p.grad_out, p.grad_z = ptr(grad), ptr(grad_z)
    p.grad_bases, p.grad_coefficients = ptr(grad_bases), ptr(grad_coefficients)
    run_kernel("edge_scores_backward", p, z.device)
    return grad_z, grad_bases, grad_coefficients


_forward_op = kernel_op("edge_scores", _edge_scores, _edge_scores_outputs)
_backward_op = kernel_op(
    "edge_scores_backward", _edge_scores_backward, _edge_scores_backward_outputs
)


# ---------------------------------------------------------------- the torch composition
def _composition(
    z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> Tensor:
    """The same scores from ATen calls: rows gathered, ``z_src`` times the bases side by side,
    row-wise dot products with ``z_dst``, the level mix. Differentiable twice, on any device."""
    num_bases, dim, cols = bases.shape
    side_by_side = bases.transpose(0, 1).reshape(dim, num_bases * cols)
    projected = (z.index_select(0, src) @ side_by_side).view(-1, num_bases, cols)
    per_basis = torch.bmm(projected, z.index_select(0, dst).unsqueeze(2)).squeeze(2)
    return per_basis @ coefficients.t()


# ---------------------------------------------------------------- autograd
def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs, output[1])


def _composition_grads(grad, z, src, dst, bases, coefficients, wanted):
    """The gradients of the composition with a graph of their own (a double backward)."""

    def compose(z, bases, coefficients):
        return _composition(z, src, dst, bases, coefficients)

    return composition_grads(compose, (z, bases, coefficients), wanted, grad.t())


def _backward(ctx, grad, _grad_projected):
    """``grad``: the gradient of the ``[R, B]`` scores the kernels write."""
    saved = ctx.saved_tensors
    needs = ctx.needs_input_grad
    wanted = (needs[0], needs[3], needs[4])
    if not any(wanted):
        return None, None, None, None, None
    if torch.is_grad_enabled():  # create_graph: the kernel's gradients record no graph
        grads = _composition_grads(grad, *saved[:5], wanted)
    else:
        grad = grad.contiguous()
        launch = _edge_scores_backward if getattr(ctx, "eager", False) else _backward_op
        grads = launch(grad, *saved)
    grad_z, grad_bases, grad_coefficients = (g if w else None for g, w in zip(grads, wanted))
    return grad_z, None, None, grad_bases, grad_coefficients


_forward_op.register_autograd(_backward, setup_context=_setup)
# Returns the scores alone: the projected rows only travel to the backward.
_EdgeScoresEager = eager_function(_edge_scores, _setup, _backward, backward_only_outputs=True)


# ---------------------------------------------------------------- public wrapper
def _dtype_name(t: Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _check_inputs(z, src, dst, bases, coefficients) -> None:
    named = (("z", z), ("src", src), ("dst", dst), ("bases", bases))
    for name, t in (*named, ("coefficients", coefficients)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    for name, ids in (("src", src), ("dst", dst)):
        if ids.dim() != 1 or ids.dtype not in _INDEX_DTYPES:
            raise ValueError(
                f"{name} must be a 1-D int32 or int64 tensor of node ids, got shape "
                f"{list(ids.shape)} and dtype {_dtype_name(ids)}"
            )
    if src.size(0) != dst.size(0):
        raise ValueError(
            f"src and dst must have the same length, got {src.size(0)} and {dst.size(0)}"
        )
    if z.dim() != 2 or z.size(1) < 1:
        raise ValueError(f"z must have shape [N, D >= 1], got {list(z.shape)}")
    if z.size(0) == 0 and src.numel():
        raise ValueError(
            f"z has no rows, so every node id of the {src.numel()} edges is out of range"
        )
    dim = z.size(1)
    if bases.dim() != 3 or bases.size(0) < 1 or tuple(bases.shape[1:]) != (dim, dim):
        raise ValueError(
            f"bases must have shape [S >= 1, D, D] = [S, {dim}, {dim}] for z {list(z.shape)}, "
            f"got {list(bases.shape)}"
        )
    if coefficients.dim() != 2 or coefficients.size(0) < 1 or coefficients.size(1) != bases.size(0):
        raise ValueError(
            f"coefficients must have shape [R >= 1, S] = [R, {bases.size(0)}], got "
            f"{list(coefficients.shape)}"
        )
    for name, t in (("z", z), ("bases", bases), ("coefficients", coefficients)):
        check_float_dtype(name, t)
    if bases.dtype != z.dtype or coefficients.dtype != z.dtype:
        raise ValueError(
            f"z, bases and coefficients must share a dtype, got {_dtype_name(z)}, "
            f"{_dtype_name(bases)}, {_dtype_name(coefficients)}"
        )
    for name, t in (*named[1:], ("coefficients", coefficients)):
        if t.device != z.device:
            raise ValueError(f"{name} is on {t.device} but z is on {z.device}")


def _runs_kernel(z: Tensor) -> bool:
    return z.device.type == "cpu" and z.dtype in CPU_DTYPES and z.size(1) <= _MAX_DIM[z.dtype]


def bilinear_edge_scores(
    z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> Tensor:
    r"""GC-MC's bilinear rating scores of the edges ``(src[b], dst[b])``:

    .. math::
        \mathrm{out}_{br} = \sum_s a_{rs}\; z_{\mathrm{src}_b}^\top P_s\, z_{\mathrm{dst}_b}

    what ``BilinearRatingDecoder(z[src], z[dst])`` computes, without the gathered rows and the
    per-basis intermediates. Differentiable in ``z``, ``bases`` and ``coefficients`` (twice:
    a double backward differentiates the torch composition). On the CPU the sums round
    differently from the composition's (rounding level) and every result, gradients included,
    is bitwise the same for any thread count.

    Args:
        z: ``[N, D]`` node embeddings, float32 / float64 on the CPU (other dtypes, GPU tensors
            and D beyond ``_C.edge_scores_max_dim`` -- 64 floats, 32 doubles -- run the torch
            composition).
        src, dst: ``[B]`` int32 or int64 node ids in ``[0, N)`` (B may be 0). Negative ids do
            not wrap: on the CPU any id outside ``[0, N)`` raises IndexError.
        bases: ``[S, D, D]`` the shared bases :math:`P_s`.
        coefficients: ``[R, S]`` each level's mix :math:`a_{rs}` of the bases.

    Returns:
        ``[B, R]`` scores (logits over the R levels). Where the CPU kernels run it is the
        transposed view of ``[R, B]`` storage (not contiguous: ``out.t()`` is), so that a loss
        over the levels of ``out.t()`` (``rating_cross_entropy``) reads it without a copy.

    Example:
        >>> z = torch.randn(5, 3)
        >>> bilinear_edge_scores(z, torch.tensor([0, 4]), torch.tensor([1, 1]),
        ...                      torch.randn(2, 3, 3), torch.randn(4, 2)).shape
        torch.Size([2, 4])
    """
    _check_inputs(z, src, dst, bases, coefficients)
    if src.dtype != dst.dtype:
        src, dst = src.long(), dst.long()
    if not _runs_kernel(z) or transforms_active():  # torch.func: torch's ops transform
        return _composition(z, src, dst, bases, coefficients)
    args = tuple(t.contiguous() for t in (z, src, dst, bases, coefficients))
    if tracing():
        return _forward_op(*args)[0].t()
    grad_wanted = z.requires_grad or bases.requires_grad or coefficients.requires_grad
    if grad_wanted and torch.is_grad_enabled():
        return _EdgeScoresEager.apply(*args).t()
    return _scores_only(*args).t()
