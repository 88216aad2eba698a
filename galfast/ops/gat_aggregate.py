"""Fused graph attention (GAT): the differentiable op and its public wrapper.

The forward kernel computes attention logits, a streaming softmax and the weighted sum of
neighbour features in one pass per destination row; it saves only a per-row, per-head
log-sum-exp. The backward kernels recompute the attention from it (see csrc/gat/gat.h)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_int, check_real
from galfast._dtypes import accumulation_dtype, check_float_dtype, kernel_dtype
from galfast._native import _C
from galfast.graph import Graph, check_op_graph
from galfast.ops._eager import (
    composition_grads,
    eager_function,
    refuse_second_derivative,
)
from galfast.ops._functorch import functorch_function, route, transforms_active
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["gat_aggregate"]


def _sizes(
    params, rowptr: Tensor, col: Tensor, h: Tensor, negative_slope: float, dropout: float, seed: int
) -> None:
    params.num_edges, params.num_rows, params.num_cols = col.numel(), rowptr.numel() - 1, h.size(0)
    params.heads, params.features = h.size(1), h.size(2)
    params.negative_slope, params.dropout, params.seed = negative_slope, dropout, seed
    params.dtype = kernel_dtype(h.dtype)


def _gat_forward_outputs(rowptr: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
    """(out [num_rows, H, F], lse [num_rows, H] in the accumulation dtype)."""
    num_rows = rowptr.size(0) - 1
    out = h.new_empty(num_rows, h.size(1), h.size(2))
    return out, h.new_empty(num_rows, h.size(1), dtype=accumulation_dtype(h.dtype))


def launch_gat_forward(
    rowptr: Tensor,
    col: Tensor,
    colptr: Tensor,
    csc_row: Tensor,
    csc_edge_id: Tensor,
    csr_to_csc: Tensor,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor],
    negative_slope: float,
    dropout: float,
    seed: int,
) -> tuple[Tensor, Tensor]:
    """(out [N, H, F], lse [N, H]) of csrc/gat/gat.h; the CSC arguments (and csr_to_csc,
    ``Graph.csc_slot``) are for backward."""
    out, lse = _gat_forward_outputs(rowptr, h)
    p = _C.GatParams()
    p.rowptr, p.col, p.h = ptr(rowptr), ptr(col), ptr(h)
    p.alpha_src, p.alpha_dst, p.out, p.lse = ptr(alpha_src), ptr(alpha_dst), ptr(out), ptr(lse)
    p.alpha_edge = ptr(alpha_edge)
    _sizes(p, rowptr, col, h, negative_slope, dropout, seed)
    run_kernel("gat_forward", p, h.device)
    return out, lse


def _gat_backward_outputs(
    h: Tensor, alpha_src: Tensor, alpha_dst: Tensor, alpha_edge: Optional[Tensor]
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(grad_h, grad_alpha_src, grad_alpha_dst, grad_alpha_edge), shaped as their inputs
    (grad_alpha_edge empty without alpha_edge: a custom op cannot return None)."""
    grad_edge = h.new_empty(0) if alpha_edge is None else torch.empty_like(alpha_edge)
    return torch.empty_like(h), torch.empty_like(alpha_src), torch.empty_like(alpha_dst), grad_edge


def launch_gat_backward(
    rowptr: Tensor,
    col: Tensor,
    colptr: Tensor,
    csc_row: Tensor,
    csc_edge_id: Tensor,
    csr_to_csc: Tensor,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor],
    out: Tensor,
    lse: Tensor,
    grad_out: Tensor,
    negative_slope: float,
    dropout: float,
    seed: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(grad_h, grad_alpha_src, grad_alpha_dst, grad_alpha_edge) of csrc/gat/gat.h."""
    grad_h, grad_src, grad_dst, grad_edge = _gat_backward_outputs(
        h, alpha_src, alpha_dst, alpha_edge
    )
    delta = torch.empty_like(lse)
    edge_grad = lse.new_empty(col.numel(), h.size(1))  # [E, H] dz_e by CSC slot (workspace)
    # dz_e in CSR order is the edge term's gradient: written straight into grad_edge when it
    # has the accumulation dtype, else into a buffer cast afterwards.
    edge_out = None
    if alpha_edge is not None:
        edge_out = grad_edge if grad_edge.dtype == lse.dtype else torch.empty_like(edge_grad)
    p = _C.GatBackwardParams()
    p.rowptr, p.col, p.colptr = ptr(rowptr), ptr(col), ptr(colptr)
    p.csc_row, p.csc_edge_id, p.csr_to_csc = ptr(csc_row), ptr(csc_edge_id), ptr(csr_to_csc)
    p.h, p.alpha_src, p.alpha_dst = ptr(h), ptr(alpha_src), ptr(alpha_dst)
    p.alpha_edge = ptr(alpha_edge)
    p.out, p.lse, p.grad_out = ptr(out), ptr(lse), ptr(grad_out)
    p.delta, p.edge_grad, p.grad_alpha_edge = ptr(delta), ptr(edge_grad), ptr(edge_out)
    p.grad_h, p.grad_alpha_src, p.grad_alpha_dst = ptr(grad_h), ptr(grad_src), ptr(grad_dst)
    _sizes(p, rowptr, col, h, negative_slope, dropout, seed)
    run_kernel("gat_backward", p, h.device)
    if edge_out is not None and edge_out is not grad_edge:
        grad_edge.copy_(edge_out)
    return grad_h, grad_src, grad_dst, grad_edge


# The forward kernel's op is the differentiable op; its backward runs the backward kernel's op.
_gat_forward_op = kernel_op("gat_forward", launch_gat_forward, _gat_forward_outputs)
_gat_backward_op = kernel_op("gat_backward", launch_gat_backward, _gat_backward_outputs)


def _setup_context(ctx, inputs, output):
    *tensors, alpha_edge, negative_slope, dropout, seed = inputs
    ctx.attention = (negative_slope, dropout, seed)
    ctx.has_edge_term = alpha_edge is not None
    # save_for_backward takes no None: an absent edge term is saved as an empty tensor.
    edge = alpha_edge if alpha_edge is not None else tensors[0].new_empty(0)
    ctx.save_for_backward(*tensors, edge, *output)


def _backward(ctx, grad_out, _grad_lse):
    if torch.is_grad_enabled():  # create_graph: the kernels' gradients would record no graph
        return _double_differentiable_grads(ctx, grad_out)
    backward = launch_gat_backward if getattr(ctx, "eager", False) else _gat_backward_op
    *tensors, alpha_edge, out, lse = ctx.saved_tensors
    grad_h, grad_src, grad_dst, grad_edge = backward(
        *tensors,
        alpha_edge if ctx.has_edge_term else None,
        out,
        lse,
        grad_out.contiguous(),
        *ctx.attention,
    )
    grad_edge = grad_edge if ctx.has_edge_term else None
    return (None,) * 6 + (grad_h, grad_src, grad_dst, grad_edge) + (None, None, None)


def _double_differentiable_grads(ctx, grad_out: Tensor) -> tuple:
    """The gradients with a graph of their own (a double backward: gradient penalties,
    Hessian-vector products): those of the torch composition of the kernel without dropout;
    with dropout, whose mask only the kernels draw, the kernels' gradients marked so that
    differentiating them raises."""
    if ctx.attention[1] > 0:
        with torch.no_grad():
            grads = _backward(ctx, grad_out, None)
        return refuse_second_derivative("gat_aggregate with dropout > 0", grads)
    rowptr, col, *_, h, alpha_src, alpha_dst, alpha_edge = ctx.saved_tensors[:10]
    alpha_edge = alpha_edge if ctx.has_edge_term else None
    inputs = (h, alpha_src, alpha_dst, alpha_edge)
    wanted = [t is not None and need for t, need in zip(inputs, ctx.needs_input_grad[6:10])]

    def compose(h, alpha_src, alpha_dst, alpha_edge):
        return _composition(rowptr, col, h, alpha_src, alpha_dst, alpha_edge, ctx.attention[0])

    grads = composition_grads(compose, inputs, wanted, grad_out)
    return (None,) * 6 + grads + (None, None, None)


def _composition(
    rowptr: Tensor,
    col: Tensor,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor],
    negative_slope: float,
) -> Tensor:
    """The forward without dropout in differentiable torch ops: per destination row and head,
    the softmax over its edges of the LeakyReLU logits weighting the sources' h."""
    num_rows = rowptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(num_rows, device=rowptr.device), rowptr.diff())
    logits = alpha_src[col] + alpha_dst[row]
    if alpha_edge is not None:
        logits = logits + alpha_edge
    logits = torch.nn.functional.leaky_relu(logits, negative_slope)
    # Shifted by each row's largest logit (a constant of the softmax) against overflow.
    top = logits.new_full((num_rows, h.size(1)), -torch.inf)
    top = top.scatter_reduce(0, row.unsqueeze(1).expand_as(logits), logits.detach(), "amax")
    weights = torch.exp(logits - top[row])
    total = logits.new_zeros(num_rows, h.size(1)).index_add(0, row, weights)
    attention = weights / total[row]
    return h.new_zeros(num_rows, *h.shape[1:]).index_add(0, row, attention.unsqueeze(-1) * h[col])


_gat_forward_op.register_autograd(_backward, setup_context=_setup_context)
_GatEager = eager_function(launch_gat_forward, _setup_context, _backward)
_GatFunctorch = functorch_function("gat_aggregate", launch_gat_forward, _setup_context, _backward)


def _check_inputs(
    graph: Graph,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor],
    negative_slope: float,
    dropout: float,
    seed: Optional[int],
) -> tuple[float, float, Optional[int]]:
    """The checked (negative_slope, dropout, seed) as Python values."""
    check_op_graph(graph, "gat_aggregate")
    for name, t in (("h", h), ("alpha_src", alpha_src), ("alpha_dst", alpha_dst)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if h.dim() != 3:
        raise ValueError(f"h must have shape [num_nodes, heads, features], got {list(h.shape)}")
    n_src, n, heads = graph.num_src_nodes, graph.num_nodes, h.size(1)
    if h.size(0) != n_src:
        nodes = "source nodes" if graph.is_bipartite else "nodes"
        raise ValueError(f"h has {h.size(0)} rows but the graph has {n_src} {nodes}")
    for name, t, rows in (("alpha_src", alpha_src, n_src), ("alpha_dst", alpha_dst, n)):
        if t.shape != (rows, heads):
            raise ValueError(
                f"{name} must have shape [{rows}, {heads}] (nodes, heads), got {list(t.shape)}"
            )
        if t.dtype != h.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but h has {h.dtype}")
        if t.device != h.device:
            raise ValueError(f"{name} is on {t.device} but h is on {h.device}")
    if alpha_edge is not None:
        if not isinstance(alpha_edge, Tensor):
            raise ValueError(f"alpha_edge must be a torch.Tensor, got {type(alpha_edge).__name__}")
        if alpha_edge.shape != (graph.num_edges, heads):
            raise ValueError(
                f"alpha_edge must have shape [{graph.num_edges}, {heads}] (edges in CSR order, "
                f"heads), got {list(alpha_edge.shape)}"
            )
        if alpha_edge.dtype != h.dtype or alpha_edge.device != h.device:
            raise ValueError(
                f"alpha_edge is {alpha_edge.dtype} on {alpha_edge.device} but h is {h.dtype} "
                f"on {h.device}"
            )
    if h.device != graph.device:
        raise ValueError(
            f"h is on {h.device} but the graph is on {graph.device}; use graph.to(h.device)"
        )
    check_float_dtype("h", h)
    dropout = check_real("dropout", dropout)
    negative_slope = check_real("negative_slope", negative_slope)
    if not (0.0 <= dropout <= 1.0):
        raise ValueError(f"dropout must lie in [0, 1], got {dropout}")
    if seed is not None:
        seed = check_int("seed", seed, 0, 2**63)
    return negative_slope, dropout, seed


def gat_aggregate(
    graph: Graph,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor] = None,
    *,
    negative_slope: float = 0.2,
    dropout: float = 0.0,
    seed: Optional[int] = None,
) -> Tensor:
    r"""Fused multi-head graph attention over the incoming edges of every node (GAT).

    .. math::
        z_{ij}^k = \mathrm{LeakyReLU}\big(\alpha^{src}_{jk} + \alpha^{dst}_{ik}
                   + \alpha^{edge}_{ek}\big), \qquad
        p_{ij}^k = \frac{\exp z_{ij}^k}{\sum_{j' \to i} \exp z_{ij'}^k}, \qquad
        \mathrm{out}_{ik} = \sum_{j \to i} \mathrm{drop}(p_{ij}^k)\, h_{jk}

    In GATConv, :math:`\alpha^{src}_{jk} = a^{src}_k \cdot h_{jk}` and
    :math:`\alpha^{dst}_{ik} = a^{dst}_k \cdot h_{ik}`. One pass per destination row computes
    the logits, an online softmax and the weighted sum; no ``[E, H]`` or ``[E, H, F]`` tensor
    is built. Backward recomputes the attention from a saved per-row, per-head log-sum-exp.
    Every edge of the graph is one softmax term (parallel edges count separately); rows with
    no edges give 0.

    Args:
        graph: the :class:`~galfast.Graph` (CSR by destination), self loops included as wanted.
        h: ``[num_src_nodes, H, F]`` source features per head (float32/float64; also
            float16/bfloat16 on CUDA, accumulated in float32). Differentiable.
        alpha_src: ``[num_src_nodes, H]`` source halves of the logits. Differentiable.
        alpha_dst: ``[num_nodes, H]`` destination halves of the logits. Differentiable.
        alpha_edge: optional ``[num_edges, H]`` per-edge term of the logits in CSR edge order
            (GATConv's edge features); None adds nothing. Differentiable.
        negative_slope: LeakyReLU slope.
        dropout: probability of zeroing each attention coefficient (survivors scaled by
            ``1 / (1 - dropout)``), as PyG's GATConv does in training; pass 0 in evaluation.
        seed: the dropout mask is a pure function of ``(seed, edge, head)``; drawn from torch's
            default generator when None (so ``torch.manual_seed`` makes runs repeatable).

    Returns:
        ``[num_nodes, H, F]`` (one row per destination); concatenate heads with
        ``.flatten(1)`` or average with ``.mean(1)``.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1], [1, 0, 1]]))
        >>> h = torch.tensor([[[1.0]], [[3.0]]])
        >>> gat_aggregate(g, h, torch.zeros(2, 1), torch.zeros(2, 1)).flatten()
        tensor([3., 2.])
    """
    negative_slope, dropout, seed = _check_inputs(
        graph, h, alpha_src, alpha_dst, alpha_edge, negative_slope, dropout, seed
    )
    if dropout > 0 and transforms_active():
        # Its gradients could not be marked as differentiable once (refuse_second_derivative
        # needs requires_grad_, which torch.func refuses), and torch.func differentiates twice.
        raise NotImplementedError(
            "galfast.ops.gat_aggregate with dropout > 0 cannot run under torch.func transforms "
            "(grad, vjp, jacrev, vmap): its dropout mask is drawn inside the kernel, so its "
            "gradient has no differentiable form; pass dropout=0 (the layer in eval mode) or "
            "use torch.autograd"
        )
    if seed is None and dropout > 0 and h.is_cuda and torch.cuda.is_current_stream_capturing():
        # The seed is drawn here, on the host: a CUDA graph would replay one mask for ever. (A
        # RuntimeError: GALTrainer(cuda_graphs=True) then runs that step eagerly, warning once.)
        raise RuntimeError(
            "galfast.ops.gat_aggregate with dropout > 0 and no seed cannot be captured in a "
            "CUDA graph: its mask's seed is drawn on the host when captured, so every replay "
            "would drop the same attention weights; use GALTrainer(cuda_graphs=False) or "
            "dropout=0"
        )
    if seed is None:
        seed = int(torch.randint(0, 2**62, ())) if dropout > 0 else 0
    csc = graph.csc
    op = route(_gat_forward_op, _GatFunctorch, _GatEager)
    out, _ = op(
        graph.rowptr,
        graph.col,
        csc.colptr,
        csc.row,
        csc.edge_id,
        graph.csc_slot,
        h.contiguous(),
        alpha_src.contiguous(),
        alpha_dst.contiguous(),
        None if alpha_edge is None else alpha_edge.contiguous(),
        negative_slope,
        dropout,
        seed,
    )
    return out
