"""Multi-layer neighbour sampling (GraphSAGE-style mini-batches) into bipartite blocks."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast._args import check_int
from galfast._native import _C
from galfast.graph import Graph, check_node_ids, check_op_graph
from galfast.ops._eager import tracing
from galfast.ops._launch import ptr, run_kernel
from galfast.ops.block import Block

__all__ = ["sample_neighbors"]

MAX_LAYERS = int(_C.SAMPLER_MAX_LAYERS)
# Weighted draws are numbered by row slot (csrc/sampler/sample_neighbors.h); uniform ones by
# draw, whose bound uniform_below takes as a 32-bit count.
MAX_WEIGHTED_DEGREE = int(_C.SAMPLER_MAX_DEGREE)
MAX_DEGREE = 2**32 - 1
# Uniform draws are numbered 0 .. fanout - 1 in the same counter word as the layer.
MAX_FANOUT = int(_C.SAMPLER_MAX_DEGREE)
_WEIGHT_DTYPES = {torch.float32: _C.DType.FLOAT32, torch.float64: _C.DType.FLOAT64}


def _layer_params(
    graph: Graph,
    dst: Tensor,
    weight: Optional[Tensor],
    fanout: int,
    layer: int,
    seed: int,
    batch: int,
):
    p = _C.SampleNeighborsParams()
    p.rowptr, p.col, p.dst = ptr(graph.rowptr), ptr(graph.col), ptr(dst)
    p.num_nodes, p.num_edges, p.num_dst = graph.num_nodes, graph.num_edges, dst.numel()
    p.fanout, p.seed, p.batch, p.layer = fanout, seed, batch, layer
    if weight is not None:
        p.weight, p.weight_dtype = ptr(weight), _WEIGHT_DTYPES[weight.dtype]
    return p


def _sample_layer(
    graph: Graph,
    dst: Tensor,
    weight: Optional[Tensor],
    fanout: int,
    layer: int,
    seed: int,
    batch: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """(rowptr [num_dst + 1], edge_id [nnz], src [nnz]) of one layer's sampled in-edges."""
    p = _layer_params(graph, dst, weight, fanout, layer, seed, batch)
    count = dst.new_empty(dst.numel())
    p.count = ptr(count)
    run_kernel("sample_neighbors_count", p, dst.device)
    rowptr = dst.new_zeros(dst.numel() + 1)
    torch.cumsum(count, 0, out=rowptr[1:])
    nnz = int(rowptr[-1])
    edge_id, src = dst.new_empty(nnz), dst.new_empty(nnz)
    scratch = None
    if weight is not None and fanout >= 0:
        scratch = torch.empty(max(nnz, 1), dtype=torch.float64, device=dst.device)
    p.out_rowptr, p.edge_id, p.src, p.key_scratch = (
        ptr(rowptr),
        ptr(edge_id),
        ptr(src),
        ptr(scratch),
    )
    run_kernel("sample_neighbors", p, dst.device)
    return rowptr, edge_id, src


class _NodeMap:
    """The CPU relabelling's node -> local id workspace, kept on the graph (all -1 between
    calls) so that a batch costs O(sampled edges), not O(nodes); the lock serialises the calls
    of several Python threads on one graph."""

    def __init__(self, num_nodes: int) -> None:
        self.table = torch.full((num_nodes,), -1, dtype=torch.long)
        self.lock = threading.Lock()


def _relabel_cpu(graph: Graph, dst: Tensor, src: Tensor) -> tuple[Tensor, Tensor]:
    node_map = graph.cached(("sample_neighbors", "node_map"), lambda: _NodeMap(graph.num_nodes))
    local = src.new_empty(src.numel())
    nodes = src.new_empty(dst.numel() + src.numel())
    num_local = src.new_empty(1)
    p = _C.RelabelParams()
    p.dst, p.src, p.local, p.nodes, p.num_local = (
        ptr(dst),
        ptr(src),
        ptr(local),
        ptr(nodes),
        ptr(num_local),
    )
    p.num_nodes, p.num_dst, p.num_src_edges = graph.num_nodes, dst.numel(), src.numel()
    with node_map.lock:
        p.node_map = ptr(node_map.table)
        _C.relabel_cpu(p)
    return local, nodes[: int(num_local)].clone()


def _relabel_sorted(dst: Tensor, src: Tensor) -> tuple[Tensor, Tensor]:
    """The same numbering as relabel_cpu by sorting (for CUDA): each distinct node of
    cat(dst, src) is ranked by its first position there."""
    nodes = torch.cat([dst, src])
    distinct, inverse = torch.unique(nodes, return_inverse=True)
    positions = torch.arange(nodes.numel(), device=nodes.device)
    first = torch.full_like(distinct, nodes.numel()).scatter_reduce_(0, inverse, positions, "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device)
    return rank[inverse[dst.numel() :]], distinct[order]


def _max_degree(graph: Graph) -> int:
    return graph.cached(
        ("sample_neighbors", "max_degree"),
        lambda: int(graph.in_degree.max()) if graph.num_nodes else 0,
    )


def _check_seeds(graph: Graph, seeds) -> None:
    check_node_ids("seeds", seeds, "num_seeds")
    if seeds.device != graph.device:
        raise ValueError(f"seeds is on {seeds.device} but the graph is on {graph.device}")
    # On the CPU the kernels check the ids and the relabelling finds repeats, in passes they
    # make anyway; CUDA kernels trust their input, so it is checked here.
    if seeds.numel() == 0 or seeds.device.type != "cuda":
        return
    low, high = int(seeds.min()), int(seeds.max())
    if low < 0 or high >= graph.num_nodes:
        bad = low if low < 0 else high
        raise ValueError(f"seeds holds {bad}, which is not a node id in [0, {graph.num_nodes})")
    if torch.unique(seeds).numel() != seeds.numel():
        raise ValueError("seeds holds a node twice; the destinations of a block must be distinct")


_SMALLEST_WEIGHT = 1e-300


def check_sampling_weights(graph: Graph, edge_weight: Any) -> None:
    """ValueError unless ``edge_weight`` is ``[num_edges]`` float32/float64 sampling odds of
    ``graph`` (finite, >= 0, none positive below the keys' range), on its device."""
    if not isinstance(edge_weight, Tensor):
        raise ValueError(f"edge_weight must be a torch.Tensor, got {type(edge_weight).__name__}")
    if edge_weight.shape != (graph.num_edges,):
        raise ValueError(
            f"edge_weight must have shape [{graph.num_edges}] (the graph's CSR edge order), "
            f"got {list(edge_weight.shape)}"
        )
    if edge_weight.device != graph.device:
        raise ValueError(
            f"edge_weight is on {edge_weight.device} but the graph is on {graph.device}"
        )
    if edge_weight.dtype not in _WEIGHT_DTYPES:
        raise ValueError(f"edge_weight must be float32 or float64, got {edge_weight.dtype}")
    if edge_weight.numel() and not bool(((edge_weight >= 0) & torch.isfinite(edge_weight)).all()):
        raise ValueError("edge_weight must be finite and >= 0 (weights are sampling odds)")
    # A draw's key is -ln(u) / w in float64 (at most 36.8 / w): below this it can overflow to
    # infinity, and edges whose keys all overflow tie, always taken in slot order.
    if edge_weight.numel() and bool(((edge_weight > 0) & (edge_weight < _SMALLEST_WEIGHT)).any()):
        raise ValueError(
            f"edge_weight holds positive weights below {_SMALLEST_WEIGHT:g}, too small for the "
            "sampler's keys (they would overflow and tie): scale the weights up (sampling "
            "odds are relative within a row), or set those to 0"
        )
    if _max_degree(graph) > MAX_WEIGHTED_DEGREE:
        raise ValueError(
            f"weighted sampling supports in-degrees up to {MAX_WEIGHTED_DEGREE}; this graph has a "
            f"node of in-degree {_max_degree(graph)}"
        )


def check_fanouts(fanouts) -> list[int]:
    """``fanouts`` as a list of Python ints; ValueError unless it is a sequence of 1 to
    MAX_LAYERS ints, each -1 or in ``[0, MAX_FANOUT]``; a 1-D array or tensor of counts is
    such a sequence too. The one check of fan-outs: sample_neighbors, NeighborLoader and
    galfast.train.NeighborSampling."""
    if isinstance(fanouts, (np.ndarray, Tensor)) and fanouts.ndim == 1:
        fanouts = fanouts.tolist()
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
        raise ValueError(f"fanouts must be a sequence of ints, got {type(fanouts).__name__}")
    if not 1 <= len(fanouts) <= MAX_LAYERS:
        raise ValueError(f"fanouts must hold 1 to {MAX_LAYERS} layers, got {len(fanouts)}")
    return [
        check_int(f"fanouts[{layer}]", fanout, -1, MAX_FANOUT + 1)
        for layer, fanout in enumerate(fanouts)
    ]


def _check_inputs(graph, seeds, fanouts, seed, batch, edge_weight) -> tuple[list[int], int, int]:
    """The checked (fanouts, seed, batch) as Python ints."""
    if tracing():
        raise RuntimeError(
            "sample_neighbors cannot be traced (its output sizes depend on the data): sample in "
            "the data loading step, outside torch.compile"
        )
    check_op_graph(graph, "sample_neighbors", one_node_set=True)
    _check_seeds(graph, seeds)
    fanouts = check_fanouts(fanouts)
    seed = check_int("seed", seed, 0, 2**64)
    batch = check_int("batch", batch, 0, 2**32)
    if edge_weight is not None:
        check_sampling_weights(graph, edge_weight)
    elif _max_degree(graph) > MAX_DEGREE:
        raise ValueError(f"sampling supports in-degrees up to {MAX_DEGREE}")
    return fanouts, seed, batch


def sample_neighbors(
    graph: Graph,
    seeds: Tensor,
    fanouts: Sequence[int],
    *,
    seed: int,
    batch: int = 0,
    edge_weight: Optional[Tensor] = None,
) -> list[Block]:
    r"""Samples the computation graph of a mini-batch: for each layer, up to ``fanouts[l]``
    in-neighbours of every node of the previous layer, without replacement.

    Layer 0's destinations are the ``seeds``; layer ``l + 1``'s are all nodes of layer ``l``
    (its destinations, then the newly sampled sources). For destination :math:`v` with in-degree
    :math:`d` and :math:`k = \mathrm{fanouts}[l]`, the layer takes all :math:`d` in-edges when
    :math:`d \le k` (or :math:`k = -1`), else :math:`k` distinct in-edges, uniform over all
    :math:`k`-subsets (Floyd's algorithm). With ``edge_weight`` only edges of positive weight are
    candidates, and the :math:`k` taken are a weighted sample without replacement: each next edge
    is drawn with probability proportional to its weight among those left (the exponential-key
    scheme of Efraimidis and Spirakis, A-ES, a key :math:`-\ln(u_e)/w_e` per edge and the
    :math:`k` smallest kept). Every graph edge is taken at most once, so a destination gets each
    source at most once (graphs built by ``from_edge_index`` have no repeated edges).

    Randomness contract: the draws of destination :math:`v` in layer :math:`l` are words of the
    Philox4x32-10 block with key ``seed`` and a counter made of :math:`(v, \mathrm{batch}, l,
    \mathrm{draw})` only (layout in ``csrc/sampler/sample_neighbors.h``). So a batch is a pure
    function of ``(graph, seeds, fanouts, seed, batch, edge_weight)``: identical on CPU and CUDA
    and for any thread count; a node met twice in a batch's layer draws the same neighbours;
    different ``batch`` numbers draw independently. Not traceable (data-dependent sizes): call
    it in the data loading step.

    Args:
        graph: the :class:`~galfast.Graph` (CSR by destination; in-edges ``j -> v`` are sampled,
            as PyG's ``NeighborLoader`` does for message passing source to target).
        seeds: ``[B]`` int64/int32 distinct node ids on the graph's device.
        fanouts: one int per layer (hop) in ``[0, 2^26]``, or ``-1`` for all in-neighbours;
            ``fanouts[0]`` is the seeds' hop (PyG's ``num_neighbors`` order). At most 64 layers.
        seed: int in ``[0, 2^64)``, keyword-only.
        batch: the batch number in ``[0, 2^32)``, part of the random counter.
        edge_weight: optional ``[num_edges]`` float32/float64 sampling weights in the graph's
            CSR edge order, finite and ``>= 0`` (often ``graph.edge_weight``); zero-weight edges
            are never sampled. ``None`` samples uniformly.

    Returns:
        ``blocks``: one :class:`~galfast.ops.Block` per layer, in hop order: ``blocks[0]``'s
        destinations are the seeds, ``blocks[l + 1].dst_nodes == blocks[l].src_nodes``. A model
        runs them in reverse: its first layer on ``blocks[-1]`` with the features of
        ``blocks[-1].src_nodes``, its last on ``blocks[0]``.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[1, 2, 3, 0], [0, 0, 0, 1]]))
        >>> (block,) = sample_neighbors(g, torch.tensor([0]), [2], seed=0)
        >>> block.num_dst, block.num_src, block.num_edges
        (1, 3, 2)
    """
    fanouts, seed, batch = _check_inputs(graph, seeds, fanouts, seed, batch, edge_weight)
    weight = None if edge_weight is None else edge_weight.contiguous()
    dst = seeds.long().contiguous()
    blocks = []
    for layer, fanout in enumerate(fanouts):
        rowptr, edge_id, src = _sample_layer(graph, dst, weight, fanout, layer, seed, batch)
        if dst.device.type == "cuda":
            col, nodes = _relabel_sorted(dst, src)
        else:
            col, nodes = _relabel_cpu(graph, dst, src)
        blocks.append(Block._trusted(dst.numel(), nodes, rowptr, col, edge_id, graph))
        dst = nodes
    return blocks
