"""Fused CompGCN relational aggregation: the differentiable op and its public wrapper.

The kernel (csrc/compgcn/compgcn.h) gathers each edge's source row and relation row, composes
them, scales and sums them per destination, so no per-edge ``[E, F]`` tensor exists, forward or
backward. Circular correlation runs in the frequency domain: the wrapper takes one rFFT per node
and per relation, the kernel multiply-aggregates the spectra, and one inverse rFFT per node
gives the result (the sum over edges commutes with the inverse transform)."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from galfast._args import check_choice
from galfast._dtypes import accumulation_dtype, check_float_dtype, kernel_dtype
from galfast._native import _C
from galfast.graph import Graph, check_op_graph
from galfast.ops._eager import composition_grads, eager_function, tracing
from galfast.ops._functorch import functorch_function, route
from galfast.ops._launch import kernel_op, ptr, run_kernel
from galfast.ops.aggregate import check_edge_weight, weight_like

__all__ = ["RelationOrder", "compgcn_aggregate", "relation_order"]

# Custom ops take the composition as an int: _C.Composition's values.
_SUB, _MULT, _CORR, _SOURCE = (
    int(c)
    for c in (_C.Composition.SUB, _C.Composition.MULT, _C.Composition.CORR, _C.Composition.SOURCE)
)
_COMPOSITIONS = {"sub": _SUB, "mult": _MULT, "corr": _CORR}
_NORMS = (None, "gcn")
# Edges per chunk of the relation gradient: a fixed size (never the thread count), so the
# chunked sums, and with them the gradient's bits, are the same on any machine.
REL_CHUNK = 1024


# ---------------------------------------------------------------- kernels (csrc/compgcn)
def _aggregate_outputs(rowptr: Tensor, x: Tensor) -> Tensor:
    """out [num_rows, F]."""
    return x.new_empty(rowptr.size(0) - 1, x.size(1))


def launch_compgcn_aggregate(
    rowptr: Tensor,
    col: Tensor,
    edge_type: Tensor,
    weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    x: Tensor,
    rel: Tensor,
    op: int,
) -> Tensor:
    """out[r] = sum_e w_e phi(x[col[e]], rel[edge_type[e]]) over CSR row r (compgcn.h)."""
    out = _aggregate_outputs(rowptr, x)
    p = _C.CompgcnParams()
    p.rowptr, p.col, p.edge_type = ptr(rowptr), ptr(col), ptr(edge_type)
    p.weight, p.row_scale, p.col_scale = ptr(weight), ptr(row_scale), ptr(col_scale)
    p.x, p.rel, p.out = ptr(x), ptr(rel), ptr(out)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.num_rels, p.num_features = rel.size(0), x.size(1)
    p.op = _C.Composition(op)
    p.dtype = kernel_dtype(x.dtype)
    run_kernel("compgcn_aggregate", p, x.device)
    return out


def _rel_grad_outputs(rel: Tensor) -> Tensor:
    """grad_rel, shaped as rel."""
    return torch.empty_like(rel)


def launch_compgcn_rel_grad(
    chunkptr: Tensor,
    rel_chunkptr: Tensor,
    row: Tensor,
    col: Tensor,
    weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    grad_out: Tensor,
    x: Tensor,
    rel: Tensor,
    op: int,
) -> Tensor:
    """grad_rel[t] = sum over edges e of type t of w_e psi(grad_out[row[e]], x[col[e]]), the
    edges given in relation-grouped chunks; deterministic (compgcn.h)."""
    grad_rel = _rel_grad_outputs(rel)
    # Transient per-chunk sums, in the accumulation type.
    acc = accumulation_dtype(grad_out.dtype)
    partial = grad_out.new_empty(chunkptr.numel() - 1, grad_out.size(1), dtype=acc)
    p = _C.RelGradParams()
    p.chunkptr, p.rel_chunkptr, p.row, p.col = ptr(chunkptr), ptr(rel_chunkptr), ptr(row), ptr(col)
    p.weight, p.row_scale, p.col_scale = ptr(weight), ptr(row_scale), ptr(col_scale)
    p.grad_out, p.x, p.partial, p.grad_rel = ptr(grad_out), ptr(x), ptr(partial), ptr(grad_rel)
    p.num_edges, p.num_chunks = col.numel(), chunkptr.numel() - 1
    p.num_rows, p.num_cols = grad_out.size(0), x.size(0)
    p.num_rels, p.num_features = rel.size(0), rel.size(1)
    p.op = _C.Composition(op)
    p.dtype = kernel_dtype(rel.dtype)
    run_kernel("compgcn_rel_grad", p, rel.device)
    return grad_rel


_aggregate_kernel_op = kernel_op(
    "compgcn_aggregate_kernel", launch_compgcn_aggregate, _aggregate_outputs
)
_rel_grad_op = kernel_op("compgcn_rel_grad", launch_compgcn_rel_grad, _rel_grad_outputs)


# ---------------------------------------------------------------- the differentiable op
def _compgcn_forward(
    rowptr: Tensor,
    col: Tensor,
    edge_type: Tensor,
    colptr: Tensor,
    csc_row: Tensor,
    csc_type: Tensor,
    chunkptr: Tensor,
    rel_chunkptr: Tensor,
    rel_row: Tensor,
    rel_col: Tensor,
    x: Tensor,
    rel: Tensor,
    weight: Optional[Tensor],
    csc_weight: Optional[Tensor],
    rel_weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    op: int,
) -> Tensor:
    """The kernel on the graph; the transpose and the relation-grouped edges (each with its
    own types and weights in its own order) are for backward."""
    return launch_compgcn_aggregate(
        rowptr, col, edge_type, weight, row_scale, col_scale, x, rel, op
    )


_compgcn_op = kernel_op("compgcn_aggregate", _compgcn_forward, _aggregate_outputs)


def _setup_context(ctx, inputs, output):
    *tensors, ctx.op = inputs
    ctx.save_for_backward(*tensors)


def _backward(ctx, grad_out):
    (
        rowptr,
        col,
        edge_type,
        colptr,
        csc_row,
        csc_type,
        chunkptr,
        rel_chunkptr,
        rel_row,
        rel_col,
        x,
        rel,
        weight,
        csc_weight,
        rel_weight,
        row_scale,
        col_scale,
    ) = ctx.saved_tensors
    if torch.is_grad_enabled():  # create_graph: the kernels' gradients would record no graph
        structure = (rowptr, col, edge_type, weight, row_scale, col_scale, ctx.op)
        compose = functools.partial(_composition, *structure)
        grads = composition_grads(compose, (x, rel), ctx.needs_input_grad[10:12], grad_out)
        return (None,) * 10 + grads + (None,) * 6
    grad_out = grad_out.contiguous()
    eager = getattr(ctx, "eager", False)
    aggregate_kernel, rel_grad = (
        (launch_compgcn_aggregate, launch_compgcn_rel_grad)
        if eager
        else (_aggregate_kernel_op, _rel_grad_op)
    )
    grad_x = grad_rel = None
    if ctx.needs_input_grad[10]:
        # The same kernel on the transpose: d phi / d x is 1 (sub), rel (mult), conj(g) * rel
        # (corr); the scales swap sides.
        grad_x = aggregate_kernel(
            colptr,
            csc_row,
            csc_type,
            csc_weight,
            col_scale,
            row_scale,
            grad_out,
            rel,
            _SOURCE if ctx.op == _SUB else ctx.op,
        )
    if ctx.needs_input_grad[11]:
        grad_rel = rel_grad(
            chunkptr,
            rel_chunkptr,
            rel_row,
            rel_col,
            rel_weight,
            row_scale,
            col_scale,
            grad_out,
            x,
            rel,
            ctx.op,
        )
    return (None,) * 10 + (grad_x, grad_rel) + (None,) * 6


def _composition(
    rowptr: Tensor,
    col: Tensor,
    edge_type: Tensor,
    weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    op: int,
    x: Tensor,
    rel: Tensor,
) -> Tensor:
    """The kernel's output in differentiable torch ops (a double backward): per row the sum of
    w_e phi(x[col[e]], rel[edge_type[e]]), phi of corr on (re, im) pairs of the spectra,
    conj(x) * rel."""
    num_rows = rowptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(num_rows, device=rowptr.device), rowptr.diff())
    source, relation = x[col], rel[edge_type]
    if op == _SUB:
        messages = source - relation
    elif op == _MULT:
        messages = source * relation
    else:
        a, b = source.unflatten(1, (-1, 2)).unbind(2), relation.unflatten(1, (-1, 2)).unbind(2)
        real, imag = a[0] * b[0] + a[1] * b[1], a[0] * b[1] - a[1] * b[0]
        messages = torch.stack([real, imag], 2).flatten(1)
    coef = x.new_ones(col.numel()) if weight is None else weight.to(x.dtype)
    for scale, index in ((row_scale, row), (col_scale, col)):
        if scale is not None:
            coef = coef * scale.to(x.dtype)[index]
    return x.new_zeros(num_rows, x.size(1)).index_add(0, row, coef.unsqueeze(1) * messages)


_compgcn_op.register_autograd(_backward, setup_context=_setup_context)
_CompgcnEager = eager_function(_compgcn_forward, _setup_context, _backward)
_CompgcnFunctorch = functorch_function(
    "compgcn_aggregate", _compgcn_forward, _setup_context, _backward
)


class RelationOrder(NamedTuple):
    """A graph's edges grouped by relation (stable), for the relation gradient: slot ``s`` is
    CSR edge ``edge[s]`` (``row[s] <- col[s]``); each relation's run is cut into chunks of at
    most :data:`REL_CHUNK` slots (``chunkptr``), relation ``t`` owning chunks
    ``rel_chunkptr[t] : rel_chunkptr[t + 1]``."""

    chunkptr: Tensor  # [num_chunks + 1]
    rel_chunkptr: Tensor  # [num_rels + 1]
    edge: Tensor  # [num_edges]
    row: Tensor  # [num_edges]
    col: Tensor  # [num_edges]


def relation_order(graph: Graph, num_rels: int) -> RelationOrder:
    """The :class:`RelationOrder` of a graph with ``edge_type``, cached on it."""

    def build():
        edge_type = graph.edge_type
        edge = torch.argsort(edge_type, stable=True)
        counts = torch.bincount(edge_type, minlength=num_rels)
        chunks = (counts + REL_CHUNK - 1) // REL_CHUNK
        rel_chunkptr = torch.zeros(num_rels + 1, dtype=torch.long, device=graph.device)
        rel_chunkptr[1:] = torch.cumsum(chunks, 0)
        run_start = torch.cumsum(counts, 0) - counts
        # .item(), not int(): torch.export keeps it a data-dependent size, where int() must
        # specialise it to the traced graph's value (and fails).
        num_chunks = rel_chunkptr[-1].item()
        first_chunk = torch.repeat_interleave(rel_chunkptr[:-1], chunks, output_size=num_chunks)
        within = torch.arange(num_chunks, device=graph.device) - first_chunk
        starts = torch.repeat_interleave(run_start, chunks, output_size=num_chunks)
        chunkptr = torch.cat([starts + within * REL_CHUNK, edge.new_full((1,), edge.numel())])
        return RelationOrder(chunkptr, rel_chunkptr, edge, graph.row[edge], graph.col[edge])

    return graph.cached(("compgcn_relation_order", num_rels), build)


def _csc_type(graph: Graph) -> Tensor:
    """The graph's edge types in the order of its transpose's slots, cached on it."""
    return graph.cached("compgcn_csc_type", lambda: graph.edge_type[graph.csc.edge_id])


def _check_inputs(
    graph: Graph,
    x: Tensor,
    rel: Tensor,
    edge_weight: Optional[Tensor],
    composition: str,
    norm: Optional[str],
) -> None:
    check_op_graph(graph, "compgcn_aggregate", one_node_set=True)
    if graph.edge_type is None:
        raise ValueError(
            "graph has no edge_type: build it with Graph.from_edge_index(..., edge_type=...) "
            "or galfast.nn.compgcn_graphs"
        )
    check_choice("composition", composition, _COMPOSITIONS)
    check_choice("norm", norm, _NORMS)
    for name, t in (("x", x), ("rel", rel)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape [num_nodes, num_features], got {list(x.shape)}")
    if x.size(0) != graph.num_nodes:
        raise ValueError(f"x has {x.size(0)} rows but the graph has {graph.num_nodes} nodes")
    if rel.dim() != 2 or rel.size(1) != x.size(1):
        raise ValueError(
            f"rel must have shape [num_relations, {x.size(1)}] (x's feature count), "
            f"got {list(rel.shape)}"
        )
    if x.device != graph.device or rel.device != graph.device:
        raise ValueError(
            f"x ({x.device}), rel ({rel.device}) and the graph ({graph.device}) must be on one "
            "device; use graph.to(x.device)"
        )
    check_float_dtype("x", x)
    if rel.dtype != x.dtype:
        raise ValueError(f"rel has dtype {rel.dtype} but x has {x.dtype}")
    if composition == "corr" and x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"composition 'corr' needs float32 or float64 (FFT), got {x.dtype}")
    if graph.num_edges and not tracing():
        # Read once per graph (immutable): no host sync per call, none inside a CUDA graph.
        top = graph.cached("compgcn_max_type", lambda: int(graph.edge_type.max()))
        if top >= rel.size(0):
            raise ValueError(
                f"the graph's edge_type holds relation {top} but rel has {rel.size(0)} rows"
            )
    if edge_weight is not None:
        check_edge_weight(edge_weight, graph.num_edges, x, "CSR edge order")
        if edge_weight.requires_grad:
            raise ValueError(
                "edge_weight is a constant of compgcn_aggregate (no gradient flows to it); "
                "pass edge_weight.detach()"
            )


def compgcn_aggregate(
    graph: Graph,
    x: Tensor,
    rel: Tensor,
    edge_weight: Optional[Tensor] = None,
    *,
    composition: str = "sub",
    norm: Optional[str] = None,
) -> Tensor:
    r"""Fused CompGCN aggregation (Vashishth et al., ICLR 2020) over the incoming edges of
    every node, each edge composing its source's features with its relation's embedding.

    .. math::
        \mathrm{out}_i = \sum_{(j, r, i)} w_{ji}\, \phi(x_j, z_r), \qquad
        \phi \in \{x - z,\; x \odot z,\; x \star z\}

    with :math:`(x \star z)_k = \sum_l x_l\, z_{(l + k) \bmod F}` (circular correlation, as
    CompGCN's ``ccorr``), :math:`w_{ji} = \mathrm{edge\_weight}_{ji} \cdot s_{ji}` and
    :math:`s_{ji} = 1/\sqrt{d_i d_j}` for ``norm="gcn"`` (in-degrees of this graph, 0 where a
    degree is 0: CompGCN's per-direction normalisation), 1 otherwise. Rows with no edges give 0.
    No per-edge tensor is built; ``corr`` costs one rFFT per node and per relation and one
    inverse rFFT per node instead of an FFT pair per edge.

    Args:
        graph: a :class:`~galfast.Graph` (CSR by destination) with ``edge_type``; parallel
            edges count separately (see :func:`galfast.nn.compgcn_graphs`).
        x: ``[num_nodes, F]`` entity features (float32/float64; sub and mult also take
            float16/bfloat16 on CUDA). Differentiable.
        rel: ``[num_relations, F]`` relation embeddings, ``num_relations`` above every
            ``edge_type``; relations no edge uses get a zero gradient. Differentiable.
        edge_weight: optional ``[num_edges]`` constant weights in CSR edge order (not
            differentiable); defaults to ``graph.edge_weight``.
        composition: ``"sub"``, ``"mult"`` or ``"corr"``.
        norm: ``None`` or ``"gcn"``.

    Returns:
        ``[num_nodes, F]`` in x's dtype. Backward for x runs the kernel on the cached transpose;
        for rel, a reduction over a cached relation-grouped edge order in fixed-size chunks.
        Both are deterministic (no atomics) and independent of the thread count.

    Example:
        >>> edge_index, edge_type = torch.tensor([[0, 1], [1, 1]]), torch.tensor([0, 1])
        >>> g = Graph.from_edge_index(edge_index, edge_type=edge_type)
        >>> compgcn_aggregate(g, torch.tensor([[1.0], [2.0]]), torch.tensor([[0.5], [1.0]]))
        tensor([[0.0000],
                [1.5000]])
    """
    if edge_weight is None and isinstance(graph, Graph):
        edge_weight = graph.edge_weight
    _check_inputs(graph, x, rel, edge_weight, composition, norm)
    op_code = _COMPOSITIONS[composition]
    acc = accumulation_dtype(x.dtype)
    if edge_weight is not None:
        edge_weight = weight_like(edge_weight, x)
    scale = graph.degree_scale("gcn", acc) if norm == "gcn" else None
    num_features = x.size(1)
    if op_code == _CORR and num_features == 0:
        return x[:, :0].clone()  # nothing to transform
    if op_code == _CORR:
        x, rel = _spectra(x), _spectra(rel)
    csc, order = graph.csc, relation_order(graph, rel.size(0))
    op = route(_compgcn_op, _CompgcnFunctorch, _CompgcnEager)
    out = op(
        graph.rowptr,
        graph.col,
        graph.edge_type,
        csc.colptr,
        csc.row,
        _csc_type(graph),
        order.chunkptr,
        order.rel_chunkptr,
        order.row,
        order.col,
        x.contiguous(),
        rel.contiguous(),
        edge_weight,
        None if edge_weight is None else edge_weight[csc.edge_id],
        None if edge_weight is None else edge_weight[order.edge],
        scale,
        scale,
        op_code,
    )
    return _from_spectra(out, num_features) if op_code == _CORR else out


def _nonempty(t: Tensor, transform, *args) -> Tensor:
    """transform(t, *args) along dim 1, also for a t without rows (which MKL's FFT refuses: one
    zero row is transformed and dropped)."""
    if t.size(0) > 0:
        return transform(t, *args)
    return transform(torch.cat([t, t.new_zeros(1, t.size(1))]), *args)[:0]


def _spectra(t: Tensor) -> Tensor:
    """[rows, F] -> [rows, 2 (F // 2 + 1)]: each row's rFFT as interleaved (re, im) pairs."""
    return _nonempty(t, lambda t: torch.view_as_real(torch.fft.rfft(t, dim=1)).flatten(1))


def _from_spectra(pairs: Tensor, num_features: int) -> Tensor:
    """The inverse of :func:`_spectra`: one inverse rFFT per row."""

    def inverse(t: Tensor) -> Tensor:
        spectrum = torch.view_as_complex(t.view(t.size(0), -1, 2))
        return torch.fft.irfft(spectrum, n=num_features, dim=1)

    return _nonempty(pairs, inverse)
