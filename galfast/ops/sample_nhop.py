"""Batched n-hop walks with cycle rejection: GAL's Monte-Carlo n-hop sampler as a custom op."""

from __future__ import annotations

import math
from typing import Optional, Union

import torch
from torch import Tensor

from galfast._args import check_choice, check_flag, check_int
from galfast._native import _C
from galfast.graph import Graph, check_csr, check_node_ids, check_op_graph, coalesce
from galfast.ops._eager import tracing
from galfast.ops._huge_pages import empty_on_huge_pages
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["sample_nhop"]

# mode name -> _C.WalkMode value (custom ops take ints): {"paper": 0, "simple": 1, "exact": 2}
MODES = {name.lower(): int(mode) for name, mode in _C.WalkMode.__members__.items()}
_WALK_MODES = {int(mode): mode for mode in _C.WalkMode.__members__.values()}
_EXACT = MODES["exact"]
_INDEX_TYPES = (_C.IndexType.INT64, _C.IndexType.INT32)  # by "the ids are int32"
_CPU = torch.device("cpu")
MAX_HOPS = int(_C.NHOP_MAX_HOPS)
MAX_EXACT_HOPS = int(_C.NHOP_MAX_EXACT_HOPS)
_UINT32 = 2**32
# Exact walks that keep failing are refused beyond this many retries: a walk that failed 2^20
# times will not succeed, and the budget only turns a mistake into minutes of work.
MAX_RETRIES = 2**20
# A CPU batch runs in rounds of about this many hops of work (walks x attempts x hops per
# attempt), a fraction of a second each, so Ctrl-C is seen between rounds. Each round is a
# kernel call (and a thread wake-up): 2^22 hops, tens of milliseconds, keep that cost small.
_HOPS_PER_ROUND = 2**22
# Node ids below this fit the 16-bit neighbour copy (walk_neighbours16).
_UINT16 = 2**16


def _sorted_distinct_rows(
    ptr: Tensor, owner: Tensor, other: Tensor, num_nodes: int
) -> tuple[Tensor, Tensor]:
    """The CSR (ptr, other) of edges grouped by `owner`, with every row sorted and repeats
    removed. Rows that a Graph built are already so: then this costs one comparison."""
    same_row = owner[1:] == owner[:-1]
    if bool(((owner[1:] > owner[:-1]) | (same_row & (other[1:] > other[:-1]))).all()):
        return ptr, other
    (owner, other), _ = coalesce([owner, other], [num_nodes, num_nodes])
    counts = torch.bincount(owner, minlength=num_nodes)
    ptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=owner.device)
    ptr[1:] = torch.cumsum(counts, 0)
    return ptr, other


def _private_copy(t: Tensor, dtype: torch.dtype) -> Tensor:
    """A copy of `t` as `dtype`; on a CPU, on huge pages (the walks read it at random)."""
    if t.device.type != "cpu":
        return t.to(dtype, copy=True)
    return empty_on_huge_pages(t.numel(), dtype).copy_(t)


def walk_adjacency(graph: Graph) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The walk's view of `graph`, cached on it: ``(out_ptr, out_nbr, in_ptr, in_nbr)``.

    Row ``u`` of the out-adjacency lists the distinct targets of the edges ``u -> v``; the
    in-adjacency lists distinct sources (exact mode searches it). Rows are sorted. Parallel
    edges (e.g. of different types) count once, as in the paper's networkx adjacency lists.
    Indices are int32 when the graph has fewer than 2^31 edges (half the memory traffic), else
    int64; an undirected graph shares one array for both directions. On a CPU, arrays of 2 MiB
    and more sit on transparent huge pages (:mod:`galfast.ops._huge_pages`).
    """

    def build():
        if graph.num_edges >= _UINT32:
            raise ValueError(
                f"sample_nhop supports graphs with < 2^32 edges, got {graph.num_edges}"
            )
        csc = graph.csc
        out_ptr, out_nbr = _sorted_distinct_rows(
            csc.colptr, graph.col[csc.edge_id], csc.row, graph.num_nodes
        )
        in_ptr, in_nbr = _sorted_distinct_rows(graph.rowptr, graph.row, graph.col, graph.num_nodes)
        undirected = torch.equal(out_ptr, in_ptr) and torch.equal(out_nbr, in_nbr)
        # The kernel trusts these arrays: check them once, and keep private copies (int32, or
        # int64) that no edit of the graph's own tensors can reach; on a CPU, on huge pages.
        check_csr(out_ptr, out_nbr, graph.num_nodes)
        check_csr(in_ptr, in_nbr, graph.num_nodes)
        small = graph.num_edges < 2**31 and graph.num_nodes < 2**31

        def private(t: Tensor) -> Tensor:
            return _private_copy(t, torch.int32 if small else t.dtype)

        out_ptr, out_nbr = private(out_ptr), private(out_nbr)
        if undirected:
            return out_ptr, out_nbr, out_ptr, out_nbr
        return out_ptr, out_nbr, private(in_ptr), private(in_nbr)

    return graph.cached(("sample_nhop", "adjacency"), build)


def walk_neighbours16(graph: Graph) -> Optional[Tensor]:
    """The out-neighbour ids of :func:`walk_adjacency` as uint16, cached on `graph`, for the
    CPU walks of graphs with at most 2^16 nodes (else None, and None on a GPU, whose kernel
    reads the int32 ids). The CPU paper and simple walks read this copy instead: their random
    reads then touch half the bytes, so more of the array stays in the core's L2 cache
    (docs/benchmarks.md, "n-hop sampler: 16-bit neighbour ids"). The AVX-512 kernel reads
    aligned 32-bit words, so an odd count gets one element of padding."""
    out_nbr = walk_adjacency(graph)[1]
    if out_nbr.device.type != "cpu" or out_nbr.dtype != torch.int32 or graph.num_nodes > _UINT16:
        return None

    def build():
        copy = empty_on_huge_pages(out_nbr.numel() + out_nbr.numel() % 2, torch.uint16)
        copy[: out_nbr.numel()] = out_nbr
        copy[out_nbr.numel() :] = 0
        return copy

    return graph.cached(("sample_nhop", "neighbours16"), build)


def _sample_nhop_outputs(starts: Tensor, hops: int, return_paths: bool) -> tuple[Tensor, Tensor]:
    """(end [B], paths [B, hops + 1], or [0, hops + 1] without return_paths), int64."""
    num_walks = starts.size(0)
    end = starts.new_empty(num_walks, dtype=torch.long)
    return end, starts.new_empty((num_walks if return_paths else 0, hops + 1), dtype=torch.long)


def launch_sample_nhop(
    out_ptr: Tensor,
    out_nbr: Tensor,
    in_ptr: Tensor,
    in_nbr: Tensor,
    starts: Tensor,
    hops: int,
    seed_lo: int,
    seed_hi: int,
    walk_offset: int,
    mode: int,
    max_retries: int,
    return_paths: bool,
    out_nbr16: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """(end, paths) of csrc/walk/sample_nhop.h; the seed comes in 32-bit halves (ops take int64).
    `out_nbr16`: walk_neighbours16's copy of out_nbr, or None. `starts` is contiguous int64."""
    end, paths = _sample_nhop_outputs(starts, hops, return_paths)
    num_walks = starts.numel()
    if num_walks == 0:
        return end, paths
    exact = mode == _EXACT
    on_cpu = starts.device == _CPU
    # On a GPU, one launch: a GPU kernel cannot stop half-way anyway.
    cost = _walk_cost(out_ptr, hops, exact) if on_cpu else 1
    count = min(num_walks, max(1, _HOPS_PER_ROUND // cost)) if on_cpu else num_walks
    # one constructor call (a field set costs about 0.3 us); walks [0, count) first
    starts_at, end_at = starts.data_ptr(), end.data_ptr()
    paths_at = paths.data_ptr() if return_paths else 0
    p = _C.SampleNhopParams(
        ptr(out_ptr), ptr(out_nbr), ptr(in_ptr), ptr(in_nbr), starts_at, end_at, paths_at,
        out_ptr.numel() - 1, count, walk_offset, (seed_hi << 32) | seed_lo, hops, max_retries,
        0, _WALK_MODES[mode], _INDEX_TYPES[out_nbr.dtype == torch.int32], ptr(out_nbr16),
    )  # fmt: skip
    if not on_cpu or (count == num_walks and not exact):
        run_kernel("sample_nhop", p, starts.device)
        return end, paths
    # a long CPU batch runs in rounds of a fraction of a second each (interruptible); exact mode
    # also retries its pending walks in rounds of attempts
    begin = 0
    while begin < num_walks:
        count = min(num_walks - begin, max(1, _HOPS_PER_ROUND // cost))
        p.starts, p.end = starts_at + 8 * begin, end_at + 8 * begin
        p.paths = paths_at + 8 * begin * (hops + 1) if return_paths else 0
        p.num_walks, p.walk_offset = count, walk_offset + begin
        first, pending = 0, count
        while True:
            last = min(max_retries, first + max(1, _HOPS_PER_ROUND // (cost * pending)) - 1)
            p.first_attempt, p.max_retries = first, last if exact else max_retries
            run_kernel("sample_nhop", p, starts.device)
            if not exact or last == max_retries:
                break
            pending = int((end[begin : begin + count] < 0).sum())
            if pending == 0:
                break
            first = last + 1
        begin += count
    return end, paths


def _walk_cost(out_ptr: Tensor, hops: int, exact: bool) -> int:
    """Estimated hops of work per walk attempt; exact mode's distance check for hops >= 3
    searches about (average degree)^(hops - 2) rows (as csrc/walk/sample_nhop_cpu.cpp)."""
    num_nodes = out_ptr.numel() - 1
    if not exact or hops < 3 or num_nodes == 0:
        return hops
    average_degree = max(int(out_ptr[-1]) / num_nodes, 1.0)
    return hops + math.ceil(average_degree ** (hops - 2))


_sample_nhop_op = kernel_op("sample_nhop", launch_sample_nhop, _sample_nhop_outputs)


def _check_inputs(
    graph: Graph,
    starts: Tensor,
    hops: int,
    seed: int,
    mode: str,
    max_retries: int,
    return_paths: bool,
    walk_offset: int,
) -> tuple[int, int, int, bool, int]:
    """The checked (hops, seed, max_retries, return_paths, walk_offset) as Python values."""
    check_op_graph(graph, "sample_nhop", one_node_set=True)
    check_choice("mode", mode, MODES)
    max_hops = MAX_EXACT_HOPS if mode == "exact" else MAX_HOPS
    hops = check_int("hops", hops, 1, max_hops + 1)
    seed = check_int("seed", seed, 0, 2**64)
    max_retries = check_int("max_retries", max_retries, 0, MAX_RETRIES + 1)
    return_paths = check_flag("return_paths", return_paths)
    check_node_ids("starts", starts, "num_walks")
    device = starts.device
    if device != graph.device:
        raise ValueError(f"starts is on {device} but the graph is on {graph.device}")
    walk_offset = check_int("walk_offset", walk_offset, 0, 2**63 - starts.numel())
    # The CPU kernel checks every start itself as it reads it, naming the first bad walk
    # (sample_nhop_cpu.cpp): a separate pass here would cost a third of a 1-hop batch.
    if starts.numel() and (device != _CPU or graph.num_edges == 0):
        low, high = (int(v) for v in torch.aminmax(starts))
        if low < 0 or high >= graph.num_nodes:
            bad = low if low < 0 else high
            raise ValueError(
                f"starts holds {bad}, which is not a node id in [0, {graph.num_nodes})"
            )
    return hops, seed, max_retries, return_paths, walk_offset


def sample_nhop(
    graph: Graph,
    starts: Tensor,
    hops: int,
    *,
    seed: int,
    mode: str = "paper",
    max_retries: int = 16,
    return_paths: bool = False,
    walk_offset: int = 0,
) -> Union[Tensor, tuple[Tensor, Tensor]]:
    r"""Runs one n-hop walk with cycle rejection from every start: GAL's Monte-Carlo n-hop
    sampler (appendix of Liao et al., ICML 2021), batched.

    Walk :math:`i` starts at :math:`v = \mathrm{starts}[i]` and takes ``hops`` steps along
    **out-edges** (:math:`u \to w`; the :class:`~galfast.Graph` is CSR by destination, so
    this reads its cached transpose; on the undirected, symmetrised graphs GAL uses, out- and
    in-neighbours coincide). At each step it draws the current node's distinct out-neighbours
    uniformly without replacement until one is not on the path :math:`P`, moves there and adds
    it to :math:`P`; if none is left the walk fails. Equivalently, the next node is uniform
    over :math:`N^+(u) \setminus P`. The modes differ in :math:`P` and in what counts as
    success:

    * ``"paper"``: the appendix algorithm exactly. :math:`P` starts empty (the start is not on
      it, so a walk may come back to its start once). A successful end lies at distance
      :math:`1 \le d(v, \mathrm{end}) \le n` (or 0 after returning to the start).
    * ``"simple"``: the start is on :math:`P` too, so a successful walk is a simple path of
      ``hops + 1`` distinct nodes.
    * ``"exact"``: a simple walk whose end is at shortest-path distance exactly ``hops`` from
      the start, proved by a bounded search from both ends (``hops`` <= 4). A walk that gets
      stuck or ends closer is retried with fresh randomness, at most ``max_retries`` times, then
      fails. A start with no usable first step fails at once (no retry could help).

    Cost: O(hops^2) per walk (the draw is a virtual Fisher-Yates shuffle of the row through a
    small swap map: no row is copied, hubs cost no more than leaves); exact mode adds the
    distance check, about (average degree)^(hops - 2) row intersections per attempt.

    Randomness contract: draw :math:`d` of hop :math:`h` in attempt :math:`a` of walk
    :math:`w = \mathrm{walk\_offset} + i` is a 32-bit word of a SplitMix64-based hash of
    ``seed`` and :math:`(w, a, h, d)` only (layout in ``csrc/walk/walk_random.h``).
    Hence walk :math:`i`'s result is a pure function of
    ``(seed, walk_offset + i, starts[i], graph)``: identical on CPU and CUDA, for any thread
    count, batch size or chunking. Splitting a batch reproduces it when each piece passes
    ``walk_offset`` = its position in the whole batch; walks with the same start but different
    numbers are independent. The integer draws use a multiply-shift whose relative bias is
    below degree / 2^32.

    Args:
        graph: the :class:`~galfast.Graph`. Parallel edges count once.
        starts: ``[B]`` int64/int32 node ids on the graph's device.
        hops: number of steps n, ``1 <= hops <= 32`` (``<= 4`` in exact mode); ``hops=1`` is
            the neighbourhood attack's pairing (a uniform out-neighbour).
        seed: int in ``[0, 2^64)``, keyword-only.
        mode: ``"paper"`` (default), ``"simple"`` or ``"exact"``.
        max_retries: retries per walk in exact mode (ignored otherwise), in
            ``[0, 2^20]``. A long batch on the CPU runs in rounds of a fraction of a second
            each, so it can be interrupted (Ctrl-C); results do not depend on the rounds.
        return_paths: also return the paths.
        walk_offset: number of walk 0 in the random stream (to split a batch reproducibly).

    Returns:
        ``end``: ``[B]`` int64, the end node of each walk, -1 where it failed. With
        ``return_paths``, ``(end, paths)`` where ``paths`` is ``[B, hops + 1]`` int64: the
        start, then the node reached at each hop, -1 after the hop where the walk got stuck.
        For a failed exact walk it shows the final attempt (complete when that attempt ended
        too close).

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))  # 0 - 1 - 2
        >>> sample_nhop(g, torch.tensor([0, 0]), 2, seed=0, mode="simple")
        tensor([2, 2])
    """
    hops, seed, max_retries, return_paths, walk_offset = _check_inputs(
        graph, starts, hops, seed, mode, max_retries, return_paths, walk_offset
    )
    if graph.num_edges == 0:  # every walk is stuck at its start; the kernel needs an adjacency
        end, paths = _sample_nhop_outputs(starts, hops, return_paths)
        end.fill_(-1)
        paths.fill_(-1)
        if return_paths:
            paths[:, 0] = starts
        return (end, paths) if return_paths else end
    # The walk has no gradient: eager code calls the launcher itself, skipping the op dispatch
    # (whose first call imports torch's compiler stack, seconds); tracing needs the custom op.
    walk = _sample_nhop_op if tracing() else launch_sample_nhop
    adjacency, neighbours16 = graph.cached(
        ("sample_nhop", "inputs"), lambda: (walk_adjacency(graph), walk_neighbours16(graph))
    )  # one lookup a call
    end, paths = walk(
        *adjacency,
        starts.long().contiguous(),
        hops,
        seed % _UINT32,
        seed // _UINT32,
        walk_offset,
        MODES[mode],
        max_retries,
        return_paths,
        neighbours16,
    )
    return (end, paths) if return_paths else end
