"""galfast.ops.gat_aggregate's CPU backward against the plain-PyTorch reference's autograd.

The backward is compiled for 1, 2, 4 and 8 heads and for any other count at run time, and
its per-edge dot products take a different path per feature tile (whole vectors, a vector
overlapping the one before, a half vector, the last 1-3 features alone); the cases below run
each of these on the awkward graphs, in float32 and float64, with and without the per-edge
logit term and dropout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _layer_cases import awkward_graphs, graph_ids
from ref_gat_aggregate import gat_aggregate_reference

import galfast
from galfast.nn._graph_input import graph_input
from galfast.ops import gat_aggregate
from galfast.ops.gat_aggregate import _gat_backward_op, _gat_forward_op

GRAPHS = awkward_graphs()

# (heads, features): compiled head counts 1, 2, 4, 8 and run-time ones 3, 5; feature widths
# with tiles of 32, multiples of 8, 8k + 4 (an overlapping vector), 4 (a half vector) and
# 1-3 left over (the dots take tiles of 64 first: 1 x 100 is 64 + 32 + 4). With 2, 4 and 8
# heads the column pass takes all heads of an edge at once on feature-major rows: rows padded
# to whole vectors (4 x 5, 2 x 1, 8 x 1), one tile of vectors or several (8 x 16: two tiles
# of 8 vectors in float32, four in float64), eight heads over two vectors of doubles.
SHAPES = [
    (1, 3),
    (1, 7),
    (1, 20),
    (1, 64),
    (1, 100),
    (2, 36),
    (3, 72),
    (4, 12),
    (5, 20),
    (8, 3),
    (8, 8),
    (8, 16),
    (4, 5),
    (2, 1),
    (8, 1),
]


def _graph(name: str) -> galfast.Graph:
    edge_index, n = GRAPHS[name]
    return graph_input(edge_index, n)[0]


def _inputs(graph: galfast.Graph, heads: int, features: int, dtype, edge_term: bool):
    gen = torch.Generator().manual_seed(graph.num_nodes + 10 * heads + features)
    n, e = graph.num_nodes, graph.num_edges
    tensors = [
        torch.randn(n, heads, features, generator=gen, dtype=dtype),
        torch.randn(n, heads, generator=gen, dtype=dtype),
        torch.randn(n, heads, generator=gen, dtype=dtype),
    ]
    if edge_term:
        tensors.append(torch.randn(e, heads, generator=gen, dtype=dtype))
    upstream = torch.randn(n, heads, features, generator=gen, dtype=dtype)
    return [t.requires_grad_() for t in tensors], upstream


def _gradients(graph, inputs, upstream, **kwargs):
    h, a_src, a_dst, *edge = inputs
    out = gat_aggregate(graph, h, a_src, a_dst, *edge, negative_slope=0.3, **kwargs)
    return torch.autograd.grad((out * upstream).sum(), inputs)


def _reference_gradients(graph, inputs, upstream, keep=None):
    h, a_src, a_dst, *edge = inputs
    out = gat_aggregate_reference(
        graph, h, a_src, a_dst, 0.3, keep, alpha_edge=edge[0] if edge else None
    )
    return torch.autograd.grad((out * upstream).sum(), inputs)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("heads,features", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_match_reference(name, heads, features, dtype):
    graph = _graph(name)
    edge_term = (heads + features) % 2 == 1  # half the shapes with the per-edge logit term
    inputs, upstream = _inputs(graph, heads, features, dtype, edge_term)
    got = _gradients(graph, inputs, upstream)
    # The reference in float64: in float32 both sides' rounding shows where a gradient is a sum
    # that cancels to ~0 (the hub's alpha_dst sums 1,099 logit gradients), and the tolerance
    # covers that (float32 errors there reach 2.3e-5).
    exact = [t.detach().double().requires_grad_() for t in inputs]
    want = _reference_gradients(graph, exact, upstream.double())
    tolerance = {} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-4}
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.to(dtype), **tolerance)


@pytest.mark.parametrize("heads,features", [(1, 20), (8, 8), (3, 12)])
def test_gradients_with_dropout_match_reference_with_the_same_mask(heads, features):
    edge_index = torch.randint(0, 60, (2, 900), generator=torch.Generator().manual_seed(3))
    graph = galfast.Graph.from_edge_index(edge_index, 60)  # coalesced: one edge per pair
    # keep_e of each edge e = (j -> i), read off the kernel's output for one-hot features.
    eye = torch.eye(60, dtype=torch.float64)[:, None, :].expand(60, heads, 60).contiguous()
    logits = (torch.zeros(60, heads, dtype=torch.float64),) * 2  # the mask ignores them
    dropped = gat_aggregate(graph, eye, *logits, negative_slope=0.3, dropout=0.4, seed=11)
    full = gat_aggregate(graph, eye, *logits, negative_slope=0.3)
    keep = (dropped / full)[graph.row, :, graph.col]
    assert (keep == 0).any() and (keep > 1).any()
    inputs, upstream = _inputs(graph, heads, features, torch.float64, edge_term=True)
    got = _gradients(graph, inputs, upstream, dropout=0.4, seed=11)
    want = _reference_gradients(graph, inputs, upstream, keep)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("heads,features", [(4, 4), (8, 8), (2, 12)])
def test_gradcheck_compiled_head_counts(heads, features):
    graph = _graph("loops_duplicates")
    inputs, _ = _inputs(graph, heads, features, torch.float64, edge_term=True)
    assert torch.autograd.gradcheck(
        lambda h, s, d, e: gat_aggregate(graph, h, s, d, e, negative_slope=0.3), inputs
    )


@pytest.mark.parametrize("dropout,edge_term", [(0.3, False), (0.0, True)])
def test_backward_refuses_an_out_of_range_csc_edge_id_where_it_reads_it(dropout, edge_term):
    """csc_edge_id (each CSC slot's CSR position) is read for the dropout draw and the edge
    term only, and checked there."""
    graph = _graph("loops_duplicates")
    (h, a_src, a_dst, *edge), _ = _inputs(graph, 2, 3, torch.float64, edge_term)
    rowptr, col, (colptr, csc_row, edge_id), slot = (
        graph.rowptr,
        graph.col,
        graph.csc,
        graph.csc_slot,
    )
    args = [rowptr, col, colptr, csc_row, edge_id, slot, h.detach(), a_src.detach()]
    args += [a_dst.detach(), edge[0].detach() if edge else None, 0.2, dropout, 7]
    out, lse = _gat_forward_op(*args)
    bad = edge_id.clone()
    bad[3] = graph.num_edges
    backward_args = [*args[:4], bad, *args[5:10], out, lse, torch.ones_like(out), 0.2, dropout, 7]
    with pytest.raises((ValueError, RuntimeError), match="csc_edge_id"):
        _gat_backward_op(*backward_args)


@pytest.mark.parametrize("heads", [1, 3, 8])
@pytest.mark.parametrize(
    "array, position, value, message",
    [
        (2, 4, 0, "colptr"),  # decreasing offsets of one column
        (2, -1, 10**6, "colptr"),  # the last offset beyond the edge count
        (3, 7, -1, "csc_row"),
        (3, 0, 10**6, "csc_row"),
        (0, 2, 0, "rowptr"),  # decreasing offsets of one row (the last pass reads them)
        (5, 5, 10**6, "csr_to_csc"),
    ],
)
def test_backward_refuses_bad_transpose_indices_on_every_head_path(
    heads, array, position, value, message
):
    """The backward checks the transpose's offsets and rows per column, and the CSC slots and
    row offsets per row, inside its passes (per-head and all-heads-at-once alike): a bad value
    is a ValueError naming the array, never a read out of bounds."""
    graph = _graph("loops_duplicates")
    (h, a_src, a_dst), _ = _inputs(graph, heads, 3, torch.float32, edge_term=False)
    csc = graph.csc
    args = [graph.rowptr, graph.col, csc.colptr, csc.row, csc.edge_id, graph.csc_slot]
    args += [h.detach(), a_src.detach(), a_dst.detach(), None, 0.2, 0.0, 7]
    out, lse = _gat_forward_op(*args)
    backward_args = [*args[:10], out, lse, torch.ones_like(out), 0.2, 0.0, 7]
    backward_args[array] = backward_args[array].clone()
    backward_args[array][position] = value
    with pytest.raises(ValueError, match=message):
        _gat_backward_op(*backward_args)


_DETERMINISM_SCRIPT = """
import sys
sys.path[:0] = {path_entries!r}
import torch
from test_gat_aggregate_backward import _determinism_run
torch.save(_determinism_run({heads}, {features}), {out!r})
"""


def _determinism_run(heads: int, features: int) -> list[torch.Tensor]:
    graph = _graph("hub")
    inputs, upstream = _inputs(graph, heads, features, torch.float32, edge_term=True)
    return list(_gradients(graph, inputs, upstream, dropout=0.2, seed=4))


@pytest.mark.parametrize("heads,features", [(1, 20), (8, 8), (4, 5)])
def test_bitwise_deterministic_across_runs_and_thread_counts(tmp_path, heads, features):
    reference = _determinism_run(heads, features)
    assert all(torch.equal(a, b) for a, b in zip(reference, _determinism_run(heads, features)))
    # This process runs one OpenMP thread per core (at least 2 here); the child runs one.
    out = tmp_path / "single_thread.pt"
    entries = [str(Path(__file__).parent), *[p for p in sys.path if p]]
    script = _DETERMINISM_SCRIPT.format(
        path_entries=entries, heads=heads, features=features, out=str(out)
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp_path)
    other = torch.load(out)
    assert all(torch.equal(a, b) for a, b in zip(reference, other))
