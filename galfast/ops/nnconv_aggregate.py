"""Fused edge-conditioned aggregation (NNConv whose edge network ends in a linear layer): the
differentiable op and its public wrapper.

The kernels (csrc/nnconv/nnconv.h) build, per destination node, ``S_v = sum_e w_e h_e (x) x_u``
([K, F_in]) and the plain aggregate ``A_v``, and contract S with the edge network's last weight.
On the CPU each pass is one native call with one parallel region (threads build S for tiles of
their rows in cache and multiply at once; a barrier per block of rows made two threads slower
than one on a loaded machine). On a GPU, rows are processed in blocks whose S takes at most
``_BLOCK_BYTES`` with a matmul per block. Either way memory stays bounded whatever the graph,
and the backward recomputes S instead of keeping it."""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_choice
from galfast._dtypes import accumulation_dtype, check_float_dtype, kernel_dtype
from galfast._native import _C
from galfast.graph import Graph, check_op_graph
from galfast.ops._eager import composition_grads, eager_function
from galfast.ops._functorch import functorch_function, route
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["nnconv_aggregate"]

_REDUCES = ("sum", "mean")
# Largest S block (rows x K x F_in elements) built at once: 1 MiB keeps it in the cache and
# the memory of the op at O(N * (F_in + F_out) + E * (K + F_in)) plus this.
_BLOCK_BYTES = 1 * 2**20


# ---------------------------------------------------------------- kernels (csrc/nnconv)
def launch_nnconv_forward(
    rowptr: Tensor,
    col: Tensor,
    x: Tensor,
    h: Tensor,
    row_scale: Optional[Tensor],
    s: Tensor,
    a: Tensor,
) -> None:
    """Fills S (s, contiguous [rows, K * F_in]) and A (a, [rows, F_in]) of the rows of a CSR
    whose rowptr starts at 0 (csrc/nnconv/nnconv.h). The caller owns the buffers: the op
    reuses one for every block of rows."""
    p = _C.NnconvParams()
    p.rowptr, p.col, p.row_scale = ptr(rowptr), ptr(col), ptr(row_scale)
    p.x, p.h, p.s, p.a = ptr(x), ptr(h), ptr(s), ptr(a)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.hidden, p.features = h.size(1), x.size(1)
    p.dtype = kernel_dtype(x.dtype)
    run_kernel("nnconv_forward", p, x.device)


def launch_nnconv_edge_grad(
    rowptr: Tensor,
    col: Tensor,
    x: Tensor,
    h: Tensor,
    row_scale: Optional[Tensor],
    grad_s: Tensor,
    grad_a: Optional[Tensor],
    grad_h: Tensor,
    edge_grad_x: Tensor,
) -> None:
    """Fills grad_h [E, K] and edge_grad_x [E, F_in] of the block's edges."""
    p = _C.NnconvEdgeGradParams()
    p.rowptr, p.col, p.row_scale = ptr(rowptr), ptr(col), ptr(row_scale)
    p.x, p.h, p.grad_s, p.grad_a = ptr(x), ptr(h), ptr(grad_s), ptr(grad_a)
    p.grad_h, p.edge_grad_x = ptr(grad_h), ptr(edge_grad_x)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.hidden, p.features = h.size(1), x.size(1)
    p.dtype = kernel_dtype(x.dtype)
    run_kernel("nnconv_edge_grad", p, x.device)


def launch_nnconv_grad_x(colptr: Tensor, csc_edge_id: Tensor, edge_grad_x: Tensor) -> Tensor:
    """grad_x [num_nodes, F_in]: each source's out-edge gradients summed in CSC order."""
    grad_x = edge_grad_x.new_empty(colptr.numel() - 1, edge_grad_x.size(1))
    p = _C.NnconvGradXParams()
    p.colptr, p.csc_edge_id = ptr(colptr), ptr(csc_edge_id)
    p.edge_grad_x, p.grad_x = ptr(edge_grad_x), ptr(grad_x)
    p.num_edges, p.num_cols, p.features = csc_edge_id.numel(), grad_x.size(0), grad_x.size(1)
    p.dtype = kernel_dtype(edge_grad_x.dtype)
    run_kernel("nnconv_grad_x", p, edge_grad_x.device)
    return grad_x


def _fused_params(rowptr, col, x, h, row_scale, w3, out_features: int):
    p = _C.NnconvFusedParams()
    p.rowptr, p.col, p.row_scale = ptr(rowptr), ptr(col), ptr(row_scale)
    p.x, p.h, p.w3 = ptr(x), ptr(h), ptr(w3)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.hidden, p.features, p.out_features = h.size(1), x.size(1), out_features
    p.dtype = kernel_dtype(x.dtype)
    return p


def launch_nnconv_fused_forward(rowptr, col, x, h, row_scale, w3, out: Tensor, a: Tensor) -> None:
    """CPU: fills out [rows, F_out] = S contracted with w3 ([K * F_in, F_out]) and A [rows, F_in]
    in one parallel region (NnconvFusedParams in csrc/nnconv/nnconv.h)."""
    p = _fused_params(rowptr, col, x, h, row_scale, w3, out.size(1))
    p.out, p.a = ptr(out), ptr(a)
    run_kernel("nnconv_fused_forward", p, x.device)


def launch_nnconv_fused_backward(
    rowptr, col, x, h, row_scale, w3, w3t, grad_out, grad_a, grad_h, edge_grad_x, grad_w3
) -> None:
    """CPU: fills grad_h [E, K], edge_grad_x [E, F_in] and grad_w3 [K * F_in, F_out] from
    grad_out and grad_a (None: zero) in two parallel regions."""
    p = _fused_params(rowptr, col, x, h, row_scale, w3, grad_out.size(1))
    p.w3t, p.grad_out, p.grad_a = ptr(w3t), ptr(grad_out), ptr(grad_a)
    p.grad_h, p.edge_grad_x, p.grad_w3 = ptr(grad_h), ptr(edge_grad_x), ptr(grad_w3)
    run_kernel("nnconv_fused_backward", p, x.device)


# ---------------------------------------------------------------- blocks of rows
def _row_blocks(rowptr: Tensor, hidden: int, features: int, itemsize: int) -> list[tuple]:
    """[(r0, r1, e0, e1)]: consecutive row ranges whose S fits _BLOCK_BYTES, with their edge
    ranges (one read of rowptr)."""
    rows = rowptr.numel() - 1
    per_row = max(1, hidden * features * itemsize)
    step = max(1, _BLOCK_BYTES // per_row)
    bounds = list(range(0, rows, step)) + [rows]
    edges = rowptr[bounds].tolist()
    return [(bounds[i], bounds[i + 1], edges[i], edges[i + 1]) for i in range(len(bounds) - 1)]


def _block(rowptr: Tensor, col: Tensor, h: Tensor, row_scale, r0, r1, e0, e1):
    """The block's CSR (rowptr from 0), edges and row scales."""
    scale = None if row_scale is None else row_scale[r0:r1]
    return rowptr[r0 : r1 + 1] - e0, col[e0:e1], h[e0:e1], scale


def _block_buffer(blocks: list[tuple], x: Tensor, width: int) -> Tensor:
    """[largest block's rows, width] in x's dtype, reused by every block (a fresh allocation
    per block costs page faults)."""
    rows = max((r1 - r0 for r0, r1, _, _ in blocks), default=0)
    return x.new_empty(rows, width)


def _weight_by_s(weight: Tensor, in_features: int, hidden: int) -> Tensor:
    """The last edge layer's weight [F_in * F_out, K] as the matrix that S's flattened
    [K * F_in] rows multiply: W3[k * F_in + i, o] = weight[i * F_out + o, k]."""
    out_features = weight.size(0) // in_features
    return weight.view(in_features, out_features, hidden).permute(2, 0, 1).reshape(-1, out_features)


def _use_fused(x: Tensor) -> bool:
    """The one-region CPU kernels; elsewhere (a GPU) the blocked path, which the tests also
    run on the CPU by replacing this."""
    return x.device.type == "cpu"


# ---------------------------------------------------------------- the differentiable op
def _nnconv_outputs(rowptr: Tensor, x: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """(out [rows, F_out], A [rows, F_in])."""
    rows, in_features = rowptr.size(0) - 1, x.size(1)
    out_features = weight.size(0) // in_features
    return x.new_empty(rows, out_features), x.new_empty(rows, in_features)


def _nnconv_forward(
    rowptr: Tensor,
    col: Tensor,
    colptr: Tensor,
    csc_edge_id: Tensor,
    x: Tensor,
    h: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    row_scale: Optional[Tensor],
) -> tuple[Tensor, Tensor]:
    """out = S contracted with weight + A @ bias; returns (out, A). The CSC arguments are for
    the backward."""
    out, a = _nnconv_outputs(rowptr, x, weight)
    hidden, in_features = h.size(1), x.size(1)
    w3 = _weight_by_s(weight, in_features, hidden)
    if _use_fused(x):
        launch_nnconv_fused_forward(rowptr, col, x, h, row_scale, w3, out, a)
    else:
        _blocked_forward(rowptr, col, x, h, row_scale, w3, out, a)
    if bias is not None:
        out.addmm_(a, bias.view(in_features, -1))
    return out, a


def _blocked_forward(rowptr, col, x, h, row_scale, w3, out: Tensor, a: Tensor) -> None:
    """GPU: S block by block (one kernel each) and a matmul with w3 per block."""
    hidden, in_features = h.size(1), x.size(1)
    blocks = _row_blocks(rowptr, hidden, in_features, x.element_size())
    s = _block_buffer(blocks, x, hidden * in_features)  # one buffer for every block
    for r0, r1, e0, e1 in blocks:
        b_rowptr, b_col, b_h, b_scale = _block(rowptr, col, h, row_scale, r0, r1, e0, e1)
        launch_nnconv_forward(b_rowptr, b_col, x, b_h, b_scale, s[: r1 - r0], a[r0:r1])
        torch.matmul(s[: r1 - r0], w3, out=out[r0:r1])


def _nnconv_backward_outputs(
    x: Tensor, h: Tensor, weight: Tensor, bias: Optional[Tensor]
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(grad_x, grad_h, grad_weight, grad_bias); grad_bias is empty without a bias."""
    grad_bias = torch.empty_like(bias) if bias is not None else weight.new_empty(0)
    return torch.empty_like(x), torch.empty_like(h), torch.empty_like(weight), grad_bias


def _nnconv_backward(
    rowptr: Tensor,
    col: Tensor,
    colptr: Tensor,
    csc_edge_id: Tensor,
    x: Tensor,
    h: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    row_scale: Optional[Tensor],
    a: Tensor,
    grad_out: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gradients to x, h, weight and bias: grad_S = grad_out W3^T and the edge kernel, grad_W3
    = S^T grad_out with S recomputed, grad_x at the end over the CSC. Buffers are allocated
    when first needed and dropped when done, which keeps the peak low."""
    grad_h = torch.empty_like(h)
    grad_bias = torch.empty_like(bias) if bias is not None else weight.new_empty(0)
    hidden, in_features = h.size(1), x.size(1)
    out_features = weight.size(0) // in_features
    w3 = _weight_by_s(weight, in_features, hidden)
    grad_a = None
    if bias is not None:
        grad_a = grad_out @ bias.view(in_features, out_features).t()
        torch.matmul(a.t(), grad_out, out=grad_bias.view(in_features, out_features))
    edge_grad_x = x.new_empty(col.numel(), in_features)
    if _use_fused(x):
        grad_w3 = torch.empty_like(w3)
        launch_nnconv_fused_backward(
            rowptr,
            col,
            x,
            h,
            row_scale,
            w3,
            w3.t().contiguous(),
            grad_out,
            grad_a,
            grad_h,
            edge_grad_x,
            grad_w3,
        )
    else:
        grad_w3 = _blocked_backward(
            rowptr, col, x, h, row_scale, w3, grad_out, grad_a, grad_h, edge_grad_x
        )
    del w3
    grad_x = launch_nnconv_grad_x(colptr, csc_edge_id, edge_grad_x)
    del edge_grad_x
    grad_weight = torch.empty_like(weight)
    grad_weight.view(in_features, out_features, hidden).copy_(
        grad_w3.view(hidden, in_features, out_features).permute(1, 2, 0)
    )
    return grad_x, grad_h, grad_weight, grad_bias


def _blocked_backward(
    rowptr, col, x, h, row_scale, w3, grad_out, grad_a, grad_h, edge_grad_x
) -> Tensor:
    """GPU: per block of rows, S again, grad_W3 += S^T grad_out, grad_S = grad_out W3^T, then
    the edge kernel. Returns grad_W3."""
    hidden, in_features = h.size(1), x.size(1)
    grad_w3 = torch.zeros_like(w3)
    blocks = _row_blocks(rowptr, hidden, in_features, x.element_size())
    s = _block_buffer(blocks, x, hidden * in_features)  # S, then grad_S, of each block
    a_block = x.new_empty(s.size(0), in_features)  # A again, unused
    for r0, r1, e0, e1 in blocks:
        b_rowptr, b_col, b_h, b_scale = _block(rowptr, col, h, row_scale, r0, r1, e0, e1)
        rows = r1 - r0
        launch_nnconv_forward(b_rowptr, b_col, x, b_h, b_scale, s[:rows], a_block[:rows])
        g = grad_out[r0:r1]
        grad_w3.addmm_(s[:rows].t(), g)
        torch.matmul(g, w3.t(), out=s[:rows])  # S is spent: its buffer takes grad_S
        launch_nnconv_edge_grad(
            b_rowptr,
            b_col,
            x,
            b_h,
            b_scale,
            s[:rows],
            None if grad_a is None else grad_a[r0:r1],
            grad_h[e0:e1],
            edge_grad_x[e0:e1],
        )
    return grad_w3


_nnconv_op = kernel_op("nnconv_aggregate", _nnconv_forward, _nnconv_outputs)
_nnconv_backward_op = kernel_op(
    "nnconv_aggregate_backward", _nnconv_backward, _nnconv_backward_outputs
)


def _setup_context(ctx, inputs, output):
    ctx.has_bias = inputs[7] is not None
    ctx.save_for_backward(*inputs, output[1])


def _backward(ctx, grad_out, _grad_a):
    if torch.is_grad_enabled():  # create_graph: the kernels' gradients would record no graph
        rowptr, col, _, _, x, h, weight, bias, row_scale, _ = ctx.saved_tensors
        compose = functools.partial(_composition, rowptr, col, row_scale)
        wanted = ctx.needs_input_grad[4:7] + (ctx.has_bias and ctx.needs_input_grad[7],)
        grads = composition_grads(compose, (x, h, weight, bias), wanted, grad_out)
        return (None,) * 4 + grads + (None,)
    backward = _nnconv_backward if getattr(ctx, "eager", False) else _nnconv_backward_op
    grad_x, grad_h, grad_weight, grad_bias = backward(*ctx.saved_tensors, grad_out.contiguous())
    return (None,) * 4 + (
        grad_x,
        grad_h,
        grad_weight,
        grad_bias if ctx.has_bias else None,
        None,
    )


def _composition(
    rowptr: Tensor,
    col: Tensor,
    row_scale: Optional[Tensor],
    x: Tensor,
    h: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
) -> Tensor:
    """The op's output in differentiable torch ops, with each edge's [F_in, F_out] matrix
    built (a double backward only): out_v = sum_e w_e x_u reshape(W h_e + b)."""
    num_rows, in_features = rowptr.numel() - 1, x.size(1)
    out_features = weight.size(0) // in_features  # (-1 cannot be inferred without edges)
    row = torch.repeat_interleave(torch.arange(num_rows, device=rowptr.device), rowptr.diff())
    theta = torch.nn.functional.linear(h, weight, bias).view(col.numel(), in_features, out_features)
    messages = torch.bmm(x[col].unsqueeze(1), theta).squeeze(1)
    if row_scale is not None:
        messages = messages * row_scale.to(x.dtype)[row].unsqueeze(1)
    return messages.new_zeros(num_rows, messages.size(1)).index_add(0, row, messages)


_nnconv_op.register_autograd(_backward, setup_context=_setup_context)
_NnconvEager = eager_function(_nnconv_forward, _setup_context, _backward)
_NnconvFunctorch = functorch_function(
    "nnconv_aggregate", _nnconv_forward, _setup_context, _backward
)


def _check_tensor(name: str, t, dim: int, like: Tensor) -> None:
    if not isinstance(t, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimensions, got shape {list(t.shape)}")
    if t.dtype != like.dtype:
        raise ValueError(f"{name} has dtype {t.dtype} but x has {like.dtype}")
    if t.device != like.device:
        raise ValueError(f"{name} is on {t.device} but x is on {like.device}")


def _check_inputs(
    graph: Graph,
    x: Tensor,
    edge_hidden: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    reduce: str,
) -> None:
    check_op_graph(graph, "nnconv_aggregate", one_node_set=True)
    check_choice("reduce", reduce, _REDUCES)
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape [num_nodes, in_features], got {list(x.shape)}")
    if x.size(0) != graph.num_nodes:
        raise ValueError(f"x has {x.size(0)} rows but the graph has {graph.num_nodes} nodes")
    if x.size(1) == 0:
        raise ValueError("x must have at least one feature (in_features >= 1)")
    if x.device != graph.device:
        raise ValueError(
            f"x is on {x.device} but the graph is on {graph.device}; use graph.to(x.device)"
        )
    check_float_dtype("x", x)
    _check_tensor("edge_hidden", edge_hidden, 2, x)
    if edge_hidden.size(0) != graph.num_edges:
        raise ValueError(
            f"edge_hidden must have one row per edge ({graph.num_edges}, CSR edge order), "
            f"got shape {list(edge_hidden.shape)}"
        )
    _check_tensor("weight", weight, 2, x)
    in_features = x.size(1)
    if weight.size(0) == 0:
        raise ValueError("weight must have at least one output feature (out_features >= 1)")
    if weight.size(1) != edge_hidden.size(1) or weight.size(0) % in_features:
        raise ValueError(
            f"weight must have shape [in_features * out_features, hidden] = "
            f"[{in_features} * F_out, {edge_hidden.size(1)}], got {list(weight.shape)}"
        )
    if bias is not None:
        _check_tensor("bias", bias, 1, x)
        if bias.size(0) != weight.size(0):
            raise ValueError(
                f"bias must have shape [{weight.size(0)}] (as weight's rows), got "
                f"{list(bias.shape)}"
            )


def nnconv_aggregate(
    graph: Graph,
    x: Tensor,
    edge_hidden: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    *,
    reduce: str = "sum",
) -> Tensor:
    r"""Edge-conditioned aggregation whose per-edge matrix is a linear function of the edge's
    hidden features, without building any per-edge matrix.

    .. math::
        \Theta_e = \mathrm{reshape}(W h_e + b,\ [F_{in}, F_{out}]), \qquad
        \mathrm{out}_v = \sum_{e = (u \to v)} w_e\, x_u \Theta_e
        = \Big(\sum_e w_e\, h_e \otimes x_u\Big) : W + \Big(\sum_e w_e\, x_u\Big) B

    with :math:`w_e = 1` (``reduce="sum"``) or :math:`1/\deg(v)` (``"mean"``) and
    :math:`B = \mathrm{reshape}(b, [F_{in}, F_{out}])`. This is PyG's ``NNConv`` message when
    the edge network ends in ``Linear(K, F_in * F_out)`` with weight ``W`` and bias ``b``,
    applied to its last hidden features ``h_e``. The kernel builds the ``[K, F_in]`` sums per
    node; the contraction with ``W`` is one matmul per node instead of one per edge, and
    nothing of size ``[E, F_in, F_out]`` is allocated. Parallel edges count separately; nodes
    with no incoming edge give 0. Deterministic (no atomics) on CPU and CUDA.

    Args:
        graph: the :class:`~galfast.Graph` (CSR by destination).
        x: ``[num_nodes, F_in]`` source features (float32/float64; on CUDA also float16 and
            bfloat16). Differentiable.
        edge_hidden: ``[num_edges, K]`` hidden edge features in the graph's CSR edge order.
            Differentiable.
        weight: ``[F_in * F_out, K]``, the last edge layer's ``Linear.weight``. Differentiable.
        bias: ``[F_in * F_out]``, its ``Linear.bias``, or None. Differentiable.
        reduce: ``"sum"`` or ``"mean"``.

    Returns:
        ``[num_nodes, F_out]``.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0], [1]]), 2)
        >>> x, h = torch.tensor([[1.0], [0.0]]), torch.tensor([[2.0]])
        >>> nnconv_aggregate(g, x, h, torch.tensor([[3.0]]), torch.tensor([1.0])).flatten()
        tensor([0., 7.])
    """
    _check_inputs(graph, x, edge_hidden, weight, bias, reduce)
    row_scale = None
    if reduce == "mean":
        row_scale = graph.degree_scale("mean", accumulation_dtype(x.dtype))
    csc = graph.csc
    op = route(_nnconv_op, _NnconvFunctorch, _NnconvEager)
    out, _ = op(
        graph.rowptr,
        graph.col,
        csc.colptr,
        csc.edge_id,
        x.contiguous(),
        edge_hidden.contiguous(),
        weight.contiguous(),
        None if bias is None else bias.contiguous(),
        row_scale,
    )
    return out
