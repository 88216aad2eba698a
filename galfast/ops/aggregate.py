"""Fused neighbourhood aggregation: the differentiable op and its public wrapper."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast._dtypes import accumulation_dtype, check_float_dtype
from galfast.graph import Graph
from galfast.ops._eager import eager_function, tracing
from galfast.ops._kernels import (
    MODE_MASKED_SUM,
    MODE_MAX,
    MODE_SUM,
    launch_sddmm_csr,
    launch_spmm_csr,
    sddmm_csr,
    spmm_csr,
)

__all__ = ["aggregate"]

_REDUCES = ("sum", "mean", "max")
_NORMS = (None, "gcn")


def _aggregate_forward(
    rowptr: Tensor,
    col: Tensor,
    row: Tensor,
    hub_rows: Tensor,
    colptr: Tensor,
    csc_col: Tensor,
    csc_edge_id: Tensor,
    csc_hub_rows: Tensor,
    x: Tensor,
    edge_weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    mode: int,
) -> tuple[Tensor, Tensor]:
    return launch_spmm_csr(
        rowptr, col, None, edge_weight, row_scale, col_scale, hub_rows, x, None, mode
    )


_aggregate_op = torch.library.custom_op("galfast::aggregate", mutates_args=())(_aggregate_forward)


@_aggregate_op.register_fake
def _(
    rowptr,
    col,
    row,
    hub_rows,
    colptr,
    csc_col,
    csc_edge_id,
    csc_hub_rows,
    x,
    edge_weight,
    row_scale,
    col_scale,
    mode,
):
    num_rows = rowptr.size(0) - 1
    arg_shape = (num_rows, x.size(1)) if mode == MODE_MAX else (0,)
    return x.new_empty(num_rows, x.size(1)), x.new_empty(arg_shape, dtype=torch.long)


def _setup_context(ctx, inputs, output):
    *tensors, ctx.mode = inputs
    ctx.save_for_backward(*tensors, output[1])


def _backward(ctx, grad_out, _grad_arg):
    (
        rowptr,
        col,
        row,
        _hub_rows,
        colptr,
        csc_col,
        csc_edge_id,
        csc_hub_rows,
        x,
        edge_weight,
        row_scale,
        col_scale,
        arg,
    ) = ctx.saved_tensors
    grad_out = grad_out.contiguous()
    is_max = ctx.mode == MODE_MAX
    eager = getattr(ctx, "eager", False)
    spmm, sddmm = (launch_spmm_csr, launch_sddmm_csr) if eager else (spmm_csr, sddmm_csr)
    grad_x = grad_w = None
    if ctx.needs_input_grad[8]:
        # The same kernel on the transpose: source j gathers from its targets; scales swap sides.
        grad_x, _ = spmm(
            colptr,
            csc_col,
            csc_edge_id,
            edge_weight,
            col_scale,
            row_scale,
            csc_hub_rows,
            grad_out,
            arg if is_max else None,
            MODE_MASKED_SUM if is_max else MODE_SUM,
        )
    if edge_weight is not None and ctx.needs_input_grad[9]:
        grad_w = sddmm(rowptr, row, col, row_scale, col_scale, grad_out, x, arg if is_max else None)
    return (None,) * 8 + (grad_x, grad_w, None, None, None)


_aggregate_op.register_autograd(_backward, setup_context=_setup_context)
_AggregateEager = eager_function(_aggregate_forward, _setup_context, _backward)


def _check_inputs(
    graph: Graph, x: Tensor, edge_weight: Optional[Tensor], reduce: str, norm: Optional[str]
) -> None:
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
    if reduce not in _REDUCES:
        raise ValueError(f"reduce must be one of {_REDUCES}, got {reduce!r}")
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape [num_nodes, num_features], got {list(x.shape)}")
    if x.size(0) != graph.num_nodes:
        raise ValueError(f"x has {x.size(0)} rows but the graph has {graph.num_nodes} nodes")
    if x.device != graph.device:
        raise ValueError(
            f"x is on {x.device} but the graph is on {graph.device}; use graph.to(x.device)"
        )
    check_float_dtype("x", x)
    if edge_weight is not None:
        if edge_weight.shape != (graph.num_edges,):
            raise ValueError(
                f"edge_weight must have shape [{graph.num_edges}] (CSR edge order), "
                f"got {list(edge_weight.shape)}"
            )
        if edge_weight.device != x.device:
            raise ValueError(f"edge_weight is on {edge_weight.device} but x is on {x.device}")
        if not edge_weight.dtype.is_floating_point:
            raise ValueError(f"edge_weight must be floating point, got {edge_weight.dtype}")


def aggregate(
    graph: Graph,
    x: Tensor,
    edge_weight: Optional[Tensor] = None,
    *,
    reduce: str = "sum",
    norm: Optional[str] = None,
) -> Tensor:
    r"""Fused neighbourhood aggregation over the incoming edges of every node.

    .. math::
        \mathrm{out}_i = \mathop{\mathrm{reduce}}_{j \to i} \; w_{ij}\, x_j,
        \qquad w_{ij} = \mathrm{edge\_weight}_{ij} \cdot s_{ij}

    with :math:`s_{ij} = 1/\sqrt{d_i d_j}` for ``norm="gcn"`` (in-degrees, computed from the
    graph on the fly, no per-edge array read) and 1 otherwise. ``reduce="mean"`` divides the sum
    by :math:`d_i`; ``"max"`` takes the feature-wise maximum. Rows with no edges give 0.

    Args:
        graph: the :class:`~galfast.Graph` (CSR by destination).
        x: ``[num_nodes, F]`` node features: float32/float64 on CPU; also float16/bfloat16 on
            CUDA (accumulated in float32).
        edge_weight: optional ``[num_edges]`` weights in the graph's CSR edge order; defaults to
            ``graph.edge_weight`` (None = all ones). Differentiable.
        reduce: ``"sum"``, ``"mean"`` or ``"max"``.
        norm: ``None`` or ``"gcn"``.

    Returns:
        ``[num_nodes, F]`` tensor of x's dtype. Backward for x runs the same kernel on the cached
        transpose (deterministic, no atomics); backward for edge_weight is an SDDMM.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))
        >>> aggregate(g, torch.eye(3), reduce="sum")
        tensor([[0., 0., 1.],
                [1., 0., 0.],
                [0., 1., 0.]])
    """
    if edge_weight is None and isinstance(graph, Graph):
        edge_weight = graph.edge_weight
    _check_inputs(graph, x, edge_weight, reduce, norm)
    x = x.contiguous()
    acc = accumulation_dtype(x.dtype)
    if edge_weight is not None:
        edge_weight = edge_weight.to(x.dtype).contiguous()
    row_scale = col_scale = None
    if norm == "gcn":
        row_scale = col_scale = graph.degree_scale("gcn", acc)
    if reduce == "mean":
        mean = graph.degree_scale("mean", acc)
        row_scale = mean if row_scale is None else row_scale * mean
    on_cuda = x.device.type == "cuda"
    empty = graph.rowptr.new_empty(0)
    colptr, csc_col, csc_edge_id = graph.csc
    op = _aggregate_op if tracing() else _AggregateEager.apply
    out, _ = op(
        graph.rowptr,
        graph.col,
        graph.row,
        graph.hub_rows() if on_cuda else empty,
        colptr,
        csc_col,
        csc_edge_id,
        graph.hub_rows(transposed=True) if on_cuda else empty,
        x,
        edge_weight,
        row_scale,
        col_scale,
        MODE_MAX if reduce == "max" else MODE_SUM,
    )
    return out
