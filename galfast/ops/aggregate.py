"""Fused neighbourhood aggregation: the differentiable op and its public wrapper."""

from __future__ import annotations

import functools
from typing import Any, Optional

import torch
from torch import Tensor

from galfast._args import check_choice
from galfast._dtypes import (
    accumulation_dtype,
    check_float_dtype,
    finite_since_scanned,
    fits_dtype,
    kernel_dtype,
)
from galfast._native import _C
from galfast.graph import Graph, check_op_graph, plain_tensors
from galfast.ops._eager import composition_grads, eager_function, tracing
from galfast.ops._functorch import (
    fold_features,
    functorch_function,
    plain_value,
    transforms_active,
)
from galfast.ops._launch import kernel_op, ptr, run_kernel
from galfast.ops.segment_plan import num_segments, segment_plan

__all__ = ["aggregate"]

_REDUCES = ("sum", "mean", "max")
_NORMS = (None, "gcn")
# Custom ops take modes as ints; these are _C.AggMode's values.
_SUM, _MAX, _MASKED_SUM = (int(m) for m in (_C.AggMode.SUM, _C.AggMode.MAX, _C.AggMode.MASKED_SUM))
_AGG_MODES = {int(m): m for m in (_C.AggMode.SUM, _C.AggMode.MAX, _C.AggMode.MASKED_SUM)}


# ---------------------------------------------------------------- kernels (csrc/aggregate)
def _aggregate_outputs(rowptr: Tensor, x: Tensor, mode: int) -> tuple[Tensor, Tensor]:
    """(out [num_rows, F], arg): arg is [num_rows, F] for max, else empty."""
    num_rows = rowptr.size(0) - 1
    arg_shape = (num_rows, x.size(1)) if mode == _MAX else (0,)
    return x.new_empty(num_rows, x.size(1)), x.new_empty(arg_shape, dtype=torch.long)


def _new_outputs(rowptr: Tensor, x: Tensor, mode: int) -> tuple[Tensor, Tensor]:
    """:func:`_aggregate_outputs` for a launch: a sum's empty arg is one tensor per device,
    shared by every call (no kernel writes it, nothing reads it), since allocating it was a
    tenth of a small graph's call (issue 19). Traced code allocates its own (the fake kernel)."""
    if mode == _MAX or tracing():
        return _aggregate_outputs(rowptr, x, mode)
    return x.new_empty(rowptr.size(0) - 1, x.size(1)), _no_arg(x.device)


def _no_arg(device: torch.device) -> Tensor:
    arg = _NO_ARG.get(device)
    if arg is None:
        with plain_tensors():  # saved for backward by later training calls too
            arg = _NO_ARG[device] = torch.empty(0, dtype=torch.long, device=device)
    return arg


_NO_ARG: dict[torch.device, Tensor] = {}


def launch_aggregate(
    rowptr: Tensor,
    col: Tensor,
    col32: Optional[Tensor],
    edge_id: Optional[Tensor],
    weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    hub_rows: Tensor,
    segments: Optional[Tensor],
    x: Tensor,
    mask_arg: Optional[Tensor],
    mode: int,
) -> tuple[Tensor, Tensor]:
    """out[r] = reduce_e w_e * x[col[e]] over CSR row r; returns (out, arg) where arg holds the
    winning edge id for max and is empty otherwise (csrc/aggregate/aggregate.h). `col32`, the
    same indices as int32 or None, is what the sum reads instead of `col` when given. On CUDA,
    `segments` (a sum's segment plan, ops/segment_plan.py, with `col32`) picks the segment
    kernel; without one the row and hub kernels run over `hub_rows`."""
    out, arg = _new_outputs(rowptr, x, mode)
    # Every field in one constructor call (AggregateParams' order): on a small graph one
    # attribute set per field was a fifth of the call.
    p = _C.AggregateParams(
        rowptr.data_ptr(),
        col.data_ptr(),
        ptr(col32),
        ptr(edge_id),
        ptr(weight),
        ptr(row_scale),
        ptr(col_scale),
        x.data_ptr(),
        out.data_ptr(),
        arg.data_ptr(),
        ptr(mask_arg),
        hub_rows.data_ptr(),  # CUDA only
        hub_rows.numel(),
        col.numel(),
        rowptr.numel() - 1,
        x.size(0),
        x.size(1),
        _AGG_MODES[mode],
        kernel_dtype(x.dtype),
    )
    if segments is not None:
        num_rows = rowptr.numel() - 1
        count = num_segments(segments, num_rows)
        p.segments, p.num_segments = segments.data_ptr(), count
        if count > num_rows:  # a split row: its segments' sums meet in `partial`
            partial = x.new_empty(count, x.size(1), dtype=accumulation_dtype(x.dtype))
            p.partial = partial.data_ptr()
    run_kernel("aggregate", p, x.device)
    return out, arg


def _edge_grad_outputs(col: Tensor, x: Tensor) -> Tensor:
    """grad_weight [num_edges]."""
    return x.new_empty(col.size(0))


def launch_edge_grad(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    grad_out: Tensor,
    x: Tensor,
    arg: Optional[Tensor],
) -> Tensor:
    """grad_w[e] = row_scale[r] col_scale[c] <grad_out[r], x[c]> per CSR edge e = (c -> r),
    counting only the features whose max arg is e when `arg` is given (an SDDMM)."""
    grad_w = _edge_grad_outputs(col, x)
    p = _C.EdgeGradParams()
    p.rowptr, p.row, p.col = ptr(rowptr), ptr(row), ptr(col)
    p.row_scale, p.col_scale = ptr(row_scale), ptr(col_scale)
    p.grad_out, p.x, p.arg, p.grad_weight = ptr(grad_out), ptr(x), ptr(arg), ptr(grad_w)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.num_features = x.size(1)
    p.dtype = kernel_dtype(x.dtype)
    run_kernel("edge_grad", p, x.device)
    return grad_w


# The kernels as traceable ops, for the backward under torch.compile. `galfast::aggregate` is
# the differentiable op below, so aggregate's kernel op carries a suffix.
_aggregate_kernel_op = kernel_op("aggregate_kernel", launch_aggregate, _aggregate_outputs)
_edge_grad_op = kernel_op("edge_grad", launch_edge_grad, _edge_grad_outputs)


# ---------------------------------------------------------------- the differentiable op
def _aggregate_forward(
    rowptr: Tensor,
    col: Tensor,
    col32: Optional[Tensor],
    row: Tensor,
    hub_rows: Tensor,
    segments: Optional[Tensor],
    colptr: Tensor,
    csc_row: Tensor,
    csc_row32: Optional[Tensor],
    csc_edge_id: Tensor,
    csc_hub_rows: Tensor,
    csc_segments: Optional[Tensor],
    x: Tensor,
    edge_weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    mode: int,
) -> tuple[Tensor, Tensor]:
    """The aggregate kernel on the graph; the other inputs (row, the transpose) are for backward."""
    return launch_aggregate(
        rowptr,
        col,
        col32,
        None,
        edge_weight,
        row_scale,
        col_scale,
        hub_rows,
        segments,
        x,
        None,
        mode,
    )


_aggregate_op = kernel_op("aggregate", _aggregate_forward, _aggregate_outputs)


def _setup_context(ctx, inputs, output):
    *tensors, ctx.mode = inputs
    ctx.save_for_backward(*tensors, output[1])


def _backward(ctx, grad_out, _grad_arg):
    (
        rowptr,
        col,
        _col32,
        row,
        _hub_rows,
        _segments,
        colptr,
        csc_row,
        csc_row32,
        csc_edge_id,
        csc_hub_rows,
        csc_segments,
        x,
        edge_weight,
        row_scale,
        col_scale,
        arg,
    ) = ctx.saved_tensors
    is_max = ctx.mode == _MAX
    wanted = (ctx.needs_input_grad[12], edge_weight is not None and ctx.needs_input_grad[13])
    if torch.is_grad_enabled():  # create_graph: the kernels' gradients would record no graph
        structure = (rowptr, row, col, row_scale, col_scale, arg if is_max else None)
        compose = functools.partial(_composition, *structure)
        grads = composition_grads(compose, (x, edge_weight), wanted, grad_out)
        return (None,) * 12 + grads + (None, None, None)
    grad_out = grad_out.contiguous()
    eager = getattr(ctx, "eager", False)
    aggregate_kernel, edge_grad = (
        (launch_aggregate, launch_edge_grad) if eager else (_aggregate_kernel_op, _edge_grad_op)
    )
    grad_x = grad_w = None
    if wanted[0]:
        # The same kernel on the transpose: source j gathers from its targets; scales swap sides.
        grad_x, _ = aggregate_kernel(
            colptr,
            csc_row,
            csc_row32,  # None for max: the int32 copy is made for the sum only
            csc_edge_id,
            edge_weight,
            col_scale,
            row_scale,
            csc_hub_rows,
            csc_segments,  # None for max, like the int32 copy
            grad_out,
            arg if is_max else None,
            _MASKED_SUM if is_max else _SUM,
        )
    if wanted[1]:
        grad_w = edge_grad(
            rowptr, row, col, row_scale, col_scale, grad_out, x, arg if is_max else None
        )
    return (None,) * 12 + (grad_x, grad_w, None, None, None)


def _composition(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    arg: Optional[Tensor],
    x: Tensor,
    edge_weight: Optional[Tensor],
) -> Tensor:
    """The kernel's output in differentiable torch ops: per row the sum of the edge terms
    w_e x[col[e]], or with max's ``arg`` each feature's winning term (0 where a row has none)."""
    coef = x.new_ones(col.numel()) if edge_weight is None else edge_weight
    if row_scale is not None:
        coef = coef * row_scale.to(x.dtype)[row]
    if col_scale is not None:
        coef = coef * col_scale.to(x.dtype)[col]
    num_rows = rowptr.numel() - 1
    if arg is None:
        return x.new_zeros(num_rows, x.size(1)).index_add(0, row, coef.unsqueeze(1) * x[col])
    if col.numel() == 0:
        return x.new_zeros(num_rows, x.size(1))
    # arg -1 (an empty row) picks an appended edge of weight 0
    winner = torch.where(arg >= 0, arg, col.numel())
    coef = torch.cat([coef, coef.new_zeros(1)])
    col = torch.cat([col, col.new_zeros(1)])
    return coef[winner] * x.gather(0, col[winner])


_aggregate_op.register_autograd(_backward, setup_context=_setup_context)
# The twelve graph inputs, which never need a gradient, travel as one tuple (see _eager.py).
_AggregateEager = eager_function(
    _aggregate_forward, _setup_context, _backward, static=12, backward_only_outputs=True
)
# Under torch.func transforms; x is input 12, and a vmap over x alone is one call on [N, B F].
_AggregateFunctorch = functorch_function(
    "aggregate", _aggregate_forward, _setup_context, _backward, fold_features(12)
)


def _check_inputs(
    graph: Graph,
    x: Tensor,
    edge_weight: Optional[Tensor],
    reduce: str,
    norm: Optional[str],
    scan_weight: bool = True,
) -> None:
    """Raises a ValueError naming what is wrong with the inputs. ``scan_weight=False`` skips
    the finiteness scan of ``edge_weight`` when it is the graph's own, which the Graph scanned
    when it was built (and check_unmodified guards against in-place edits since)."""
    check_op_graph(graph, "aggregate")
    check_choice("reduce", reduce, _REDUCES)
    check_choice("norm", norm, _NORMS)
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape [num_nodes, num_features], got {list(x.shape)}")
    if x.size(0) != graph.num_src_nodes:
        nodes = "source nodes" if graph.is_bipartite else "nodes"
        raise ValueError(f"x has {x.size(0)} rows but the graph has {graph.num_src_nodes} {nodes}")
    if norm == "gcn" and graph.is_bipartite:
        raise ValueError("norm='gcn' needs one node set; the graph is bipartite")
    if x.device != graph.device:
        raise ValueError(
            f"x is on {x.device} but the graph is on {graph.device}; use graph.to(x.device)"
        )
    check_float_dtype("x", x)
    if edge_weight is not None:
        check_edge_weight(edge_weight, graph.num_edges, x, "CSR edge order", scan=scan_weight)


def check_edge_weight(
    edge_weight: Tensor, num_edges: int, x: Tensor, order: str, *, scan: bool = True
) -> None:
    """An op's ``edge_weight``: a finite floating tensor ``[num_edges]`` (in ``order``) on
    ``x``'s device. The finiteness scan reads the values on the host: it is skipped while
    tracing and while a CUDA graph is captured (a host sync would break the capture of
    GALTrainer(cuda_graphs=True)'s steps, whose eager warm-up steps scanned the same weights),
    with ``scan=False`` (weights already scanned and unmodified since), and for a tensor found
    finite before whose version counter has not moved since (:func:`finite_since_scanned`)."""
    if not isinstance(edge_weight, Tensor):
        raise ValueError(f"edge_weight must be a torch.Tensor, got {type(edge_weight).__name__}")
    if edge_weight.shape != (num_edges,):
        raise ValueError(
            f"edge_weight must have shape [{num_edges}] ({order}), got {list(edge_weight.shape)}"
        )
    if edge_weight.device != x.device:
        raise ValueError(f"edge_weight is on {edge_weight.device} but x is on {x.device}")
    if not edge_weight.dtype.is_floating_point:
        raise ValueError(f"edge_weight must be floating point, got {edge_weight.dtype}")
    capturing = edge_weight.is_cuda and torch.cuda.is_current_stream_capturing()
    if scan and not tracing() and not capturing and not finite_since_scanned(_read(edge_weight)):
        raise ValueError("edge_weight contains NaN or infinite values")


def _read(t: Tensor) -> Tensor:
    """``t`` as a check reads its values: under torch.func transforms, the plain tensor."""
    return plain_value(t) if transforms_active() else t


def weight_like(edge_weight: Tensor, x: Tensor) -> Tensor:
    """Checked edge weights as the kernels read them: x's dtype, contiguous. Weights wider
    than x (float64 for float32 features) must not overflow in the conversion: an infinity
    would turn a finite input into NaN outputs. Not read while tracing or capturing a CUDA
    graph, as in :func:`check_edge_weight`."""
    narrowed = edge_weight.dtype != x.dtype and not tracing()
    if narrowed and edge_weight.is_cuda and torch.cuda.is_current_stream_capturing():
        narrowed = False
    if narrowed and not fits_dtype(_read(edge_weight), x.dtype):
        raise ValueError(
            f"edge_weight holds values beyond the range of x's dtype "
            f"{str(x.dtype).replace('torch.', '')} (largest finite "
            f"{torch.finfo(x.dtype).max:.4g}): scale the weights or use a wider dtype for x"
        )
    return edge_weight.to(x.dtype).contiguous()


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
        x: ``[num_src_nodes, F]`` source node features: float32/float64 on CPU; also
            float16/bfloat16 on CUDA (accumulated in float32).
        edge_weight: optional ``[num_edges]`` weights in the graph's CSR edge order; defaults to
            ``graph.edge_weight`` (None = all ones). Differentiable.
        reduce: ``"sum"``, ``"mean"`` or ``"max"``.
        norm: ``None`` or ``"gcn"``.

    Returns:
        ``[num_nodes, F]`` tensor of x's dtype (one row per destination). Backward for x runs
        the same kernel on the cached transpose (deterministic, no atomics); backward for
        edge_weight is an SDDMM.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))
        >>> aggregate(g, torch.eye(3), reduce="sum")
        tensor([[0., 0., 1.],
                [1., 0., 0.],
                [0., 1., 0.]])
    """
    weight_is_graphs = edge_weight is None and isinstance(graph, Graph)
    if weight_is_graphs:
        edge_weight = graph.edge_weight
    _check_inputs(graph, x, edge_weight, reduce, norm, scan_weight=not weight_is_graphs)
    x = x.contiguous()
    acc = accumulation_dtype(x.dtype)
    if edge_weight is not None:
        edge_weight = weight_like(edge_weight, x)
    row_scale = col_scale = None
    if norm == "gcn":
        row_scale = col_scale = graph.degree_scale("gcn", acc)
    if reduce == "mean":
        mean = graph.degree_scale("mean", acc)
        row_scale = mean if row_scale is None else row_scale * mean
    mode = _MAX if reduce == "max" else _SUM
    return apply_aggregate(graph, x, edge_weight, row_scale, col_scale, mode)


def apply_aggregate(
    structure: Any,
    x: Tensor,
    edge_weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    mode: int,
) -> Tensor:
    """The aggregate kernel over `structure` (a :class:`Graph` or a sampled Block: ``rowptr``,
    ``col``, ``row``, ``hub_rows(transposed)`` and :func:`transpose_of`), on checked inputs.

    Four routes to the same kernel: the custom op while tracing; the functorch Function under
    torch.func transforms (see _functorch.py); the eager autograd.Function when a gradient is
    wanted; and a plain launch when none is (inference, frozen features), which skips
    autograd's bookkeeping and the transpose that only the backward reads."""
    on_cuda = x.is_cuda
    if tracing():
        graph_tensors = _graph_tensors(structure, x.size(0), on_cuda, False)
        return _aggregate_op(*graph_tensors, x, edge_weight, row_scale, col_scale, mode)[0]
    # The sum streams int32 indices where they fit, and on CUDA runs over a segment plan: both
    # are made on the host once per graph, so not while tracing.
    int32 = mode == _SUM
    transformed = transforms_active()
    wants_grad = torch.is_grad_enabled() and (
        x.requires_grad or (edge_weight is not None and edge_weight.requires_grad)
    )
    if not wants_grad and not transformed:
        csr_only = structure.cached(
            ("aggregate CSR inputs", on_cuda, int32),
            lambda: _csr_tensors(structure, x.size(0), on_cuda, int32),
        )
        return _aggregate_forward(*csr_only, x, edge_weight, row_scale, col_scale, mode)[0]
    # The structure is immutable: its graph tensors are gathered once (a few microseconds a
    # call on a small graph).
    graph_tensors = structure.cached(
        ("aggregate inputs", on_cuda, int32),
        lambda: _graph_tensors(structure, x.size(0), on_cuda, int32),
    )
    if transformed:
        args = (*graph_tensors, x, edge_weight, row_scale, col_scale, mode)
        return _AggregateFunctorch.apply(*args)[0]
    return _AggregateEager.apply(graph_tensors, x, edge_weight, row_scale, col_scale, mode)


def _csr_tensors(structure: Any, num_src: int, on_cuda: bool, int32: bool) -> tuple:
    """The op's twelve graph inputs as a forward without a backward takes them: the CSR's, with
    None for row and the transpose, which only the backward reads (not built here)."""
    col32, hub_rows, plan = _direction(
        structure, structure.rowptr, structure.col, num_src, on_cuda, int32, False
    )
    return (structure.rowptr, structure.col, col32, None, hub_rows, plan) + (None,) * 6


def _graph_tensors(structure: Any, num_src: int, on_cuda: bool, int32: bool) -> tuple:
    """The op's twelve graph inputs: for the CSR and for the transpose, the pointers, indices,
    int32 copy (where `int32`), hub rows and CUDA segment plan (see :func:`_direction`)."""
    colptr, csc_row, csc_edge_id = transpose_of(structure)
    num_dst = structure.rowptr.numel() - 1
    col32, hub_rows, plan = _direction(
        structure, structure.rowptr, structure.col, num_src, on_cuda, int32, False
    )
    csc_row32, csc_hub_rows, csc_plan = _direction(
        structure, colptr, csc_row, num_dst, on_cuda, int32, True
    )
    return (
        structure.rowptr,
        structure.col,
        col32,
        structure.row,
        hub_rows,
        plan,
        colptr,
        csc_row,
        csc_row32,
        csc_edge_id,
        csc_hub_rows,
        csc_plan,
    )


def _direction(
    structure: Any,
    ptr: Tensor,
    index: Tensor,
    bound: int,
    on_cuda: bool,
    int32: bool,
    transposed: bool,
) -> tuple[Optional[Tensor], Tensor, Optional[Tensor]]:
    """(index32, hub_rows, plan) of one direction (the CSR, or the transpose): the int32 copy of
    `index` where `int32`; on CUDA the sum's segment plan where there is that copy, else the hub
    rows the row kernels read (a plan's sum reads none, and listing them syncs with the GPU);
    on the CPU an empty hub list and no plan."""
    name = "csc_row" if transposed else "col"
    index32 = _index32(structure, name, index, bound, on_cuda) if int32 else None
    plan = _plan(structure, ptr, index32, transposed) if on_cuda else None
    if on_cuda and plan is None:
        return index32, structure.hub_rows(transposed), None
    return index32, _no_hub_rows(structure), plan


def _plan(structure: Any, rowptr: Tensor, index32: Optional[Tensor], transposed: bool):
    """The CUDA sum's segment plan of one direction, or None where that direction has no int32
    index (the segment kernel reads only int32 columns) or none is wanted."""
    if index32 is None:
        return None
    return segment_plan(structure, rowptr, index32.numel(), transposed)


def _index32(structure: Any, name: str, index: Tensor, bound: int, on_cuda: bool):
    """:func:`int32_index`; on a GPU from the structure's bound on the values (a checked Graph
    or a Block keeps its indices below it), since reading them would synchronise."""
    return int32_index(structure, name, index, bound if on_cuda else None)


def transpose_of(structure: Any) -> tuple[Tensor, Tensor, Tensor]:
    """(colptr, row, edge_id) of a Graph's cached CSC or of a Block's transpose."""
    if isinstance(structure, Graph):
        return tuple(structure.csc)
    return structure.transpose()


def int32_index(
    structure: Any, name: str, index: Tensor, bound: Optional[int] = None
) -> Optional[Tensor]:
    """`index` (the structure's int64 ``col`` or transposed ``row``, called `name`) as int32,
    cached on the structure (a Graph or a Block: both immutable), or None when a value lies
    outside [0, 2^31) (the kernel then reads and checks the int64 index). The sum kernels read
    this copy instead: per edge it streams the index and gathers a row of x, so half the
    index bytes is a large part of the cost at small F (issue 19). The CPU kernel checks the
    copy's values on every call, like any index (the CUDA kernels trust a graph's checked
    indices, int64 or int32); an edit of the int64 tensor behind its version counter
    after the copy was made is not seen by the sum (as the walk's private adjacency). Not for
    traced code: the range check reads the values on the host. With ``bound`` (an exclusive
    upper limit the structure guarantees for the values) nothing is read: the copy is made
    where the bound fits int32."""
    return structure.cached(("int32", name), lambda: _int32_copy(index, bound))


def _int32_copy(index: Tensor, bound: Optional[int]) -> Optional[Tensor]:
    int32_max = torch.iinfo(torch.int32).max
    if bound is not None:
        fits = bound <= int32_max + 1
    else:
        fits = index.numel() == 0 or (int(index.min()) >= 0 and int(index.max()) <= int32_max)
    return index.to(torch.int32) if fits else None


def _no_hub_rows(structure: Any) -> Tensor:
    """The empty hub list the CPU kernels take, made once per graph."""
    return structure.cached("no_hub_rows", lambda: structure.rowptr.new_empty(0))
