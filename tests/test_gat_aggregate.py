"""galfast.ops.gat_aggregate: the fused GAT kernel against a plain-PyTorch reference."""

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


def _graph(name: str) -> galfast.Graph:
    edge_index, n = GRAPHS[name]
    return graph_input(edge_index, n)[0]  # parallel edges kept, as GATConv sees them


def _inputs(
    graph: galfast.Graph,
    heads: int,
    features: int,
    dtype=torch.float64,
    scale=1.0,
    device="cpu",
    requires_grad=False,
):
    gen = torch.Generator().manual_seed(graph.num_nodes + heads + features)
    n = graph.num_nodes
    tensors = (
        torch.randn(n, heads, features, generator=gen, dtype=dtype),
        scale * torch.randn(n, heads, generator=gen, dtype=dtype),
        scale * torch.randn(n, heads, generator=gen, dtype=dtype),
    )
    return tuple(t.to(device).requires_grad_(requires_grad) for t in tensors)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize(
    "heads,features", [(1, 1), (1, 16), (3, 5), (4, 33), (2, 20), (1, 30), (1, 12), (1, 24)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_reference(name, heads, features, dtype):
    graph = _graph(name)
    h, a_src, a_dst = _inputs(graph, heads, features, dtype)
    expected = gat_aggregate_reference(graph, h, a_src, a_dst, 0.2)
    torch.testing.assert_close(gat_aggregate(graph, h, a_src, a_dst), expected)


def test_large_logits_do_not_overflow():
    graph = _graph("hub")
    h, a_src, a_dst = _inputs(graph, 2, 4, torch.float32, scale=400.0)
    out = gat_aggregate(graph, h, a_src, a_dst, negative_slope=0.5)
    assert torch.isfinite(out).all()
    expected = gat_aggregate_reference(graph, h.double(), a_src.double(), a_dst.double(), 0.5)
    torch.testing.assert_close(out, expected.float())


@pytest.mark.parametrize("name", ["random", "isolated", "loops_duplicates", "no_edges"])
@pytest.mark.parametrize("heads", [1, 2])
def test_gradcheck(name, heads):
    graph = _graph(name)
    inputs = _inputs(graph, heads, 3, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda h, s, d: gat_aggregate(graph, h, s, d, negative_slope=0.3), inputs
    )


def test_gradcheck_with_dropout():
    graph = _graph("loops_duplicates")
    inputs = _inputs(graph, 2, 3, requires_grad=True)
    # A fixed seed makes the mask part of the function: forward and backward must agree on it.
    assert torch.autograd.gradcheck(
        lambda h, s, d: gat_aggregate(graph, h, s, d, dropout=0.4, seed=11), inputs
    )


def _dropout_mask(graph: galfast.Graph, heads: int, p: float, seed: int) -> torch.Tensor:
    """The [E, H] keep factors the kernel applied, read back through one-hot features."""
    n = graph.num_nodes
    h = torch.eye(n, dtype=torch.float64)[:, None, :].expand(n, heads, n).contiguous()
    a_src, a_dst = (
        torch.zeros(n, heads, dtype=torch.float64),
        torch.zeros(n, heads, dtype=torch.float64),
    )
    dropped = gat_aggregate(graph, h, a_src, a_dst, dropout=p, seed=seed)
    full = gat_aggregate(graph, h, a_src, a_dst)
    # out[i, k, j] is keep_e * attention_e for the edge e = (j -> i) of a simple graph.
    return (dropped / full)[graph.row, :, graph.col]


def test_dropout_mask_statistics():
    edge_index = torch.randint(0, 300, (2, 6000), generator=torch.Generator().manual_seed(0))
    graph = galfast.Graph.from_edge_index(edge_index, 300)  # coalesced: one edge per pair
    p, heads = 0.3, 3
    keep = _dropout_mask(graph, heads, p, seed=5)
    values = set(torch.unique(keep.round(decimals=9)).tolist())
    assert values == {0.0, round(1 / (1 - p), 9)}
    draws = keep.numel()
    dropped = (keep == 0).double().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / draws) ** 0.5
    # Heads draw independently; another seed gives another mask; the same seed the same one.
    assert not torch.equal(keep[:, 0], keep[:, 1])
    assert not torch.equal(keep, _dropout_mask(graph, heads, p, seed=6))
    assert torch.equal(keep, _dropout_mask(graph, heads, p, seed=5))


def test_dropout_matches_reference_with_the_same_mask():
    graph = galfast.Graph.from_edge_index(
        torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(1)), 50
    )
    keep = _dropout_mask(graph, 2, 0.5, seed=9)
    h, a_src, a_dst = _inputs(graph, 2, 6)
    out = gat_aggregate(graph, h, a_src, a_dst, dropout=0.5, seed=9)
    torch.testing.assert_close(out, gat_aggregate_reference(graph, h, a_src, a_dst, 0.2, keep))


def test_dropout_one_drops_everything_and_zero_nothing():
    graph = _graph("random")
    h, a_src, a_dst = _inputs(graph, 2, 4)
    assert not gat_aggregate(graph, h, a_src, a_dst, dropout=1.0).any()
    plain = gat_aggregate(graph, h, a_src, a_dst)
    torch.testing.assert_close(gat_aggregate(graph, h, a_src, a_dst, dropout=0.0, seed=3), plain)


def test_seed_is_drawn_from_torch_generator():
    graph = _graph("random")
    h, a_src, a_dst = _inputs(graph, 2, 4)
    torch.manual_seed(1)
    first = gat_aggregate(graph, h, a_src, a_dst, dropout=0.5)
    torch.manual_seed(1)
    assert torch.equal(first, gat_aggregate(graph, h, a_src, a_dst, dropout=0.5))


def test_empty_sizes():
    graph = galfast.Graph.from_edge_index(torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    h, a_src, a_dst = _inputs(graph, 2, 3, requires_grad=True)
    out = gat_aggregate(graph, h, a_src, a_dst)
    assert out.shape == (0, 2, 3)
    out.sum().backward()
    graph = _graph("random")
    h, a_src, a_dst = _inputs(graph, 2, 0, requires_grad=True)
    out = gat_aggregate(graph, h, a_src, a_dst)
    assert out.shape == (graph.num_nodes, 2, 0)
    out.sum().backward()
    assert not a_src.grad.any() and not a_dst.grad.any()


_DETERMINISM_SCRIPT = """
import sys
sys.path[:0] = {path_entries!r}
import torch
from test_gat_aggregate import _determinism_run
torch.save(_determinism_run(), {out!r})
"""


def _determinism_run() -> list[torch.Tensor]:
    graph = _graph("hub")
    h, a_src, a_dst = _inputs(graph, 3, 20, torch.float32, requires_grad=True)
    out = gat_aggregate(graph, h, a_src, a_dst, dropout=0.2, seed=4)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return [out.detach(), h.grad, a_src.grad, a_dst.grad]


def test_bitwise_deterministic_across_runs_and_thread_counts(tmp_path):
    reference = _determinism_run()
    for again in (_determinism_run(), _determinism_run()):
        assert all(torch.equal(a, b) for a, b in zip(reference, again))
    # This process runs one OpenMP thread per core (at least 2 here); the child runs one.
    # The child imports galfast and this module exactly as this process does.
    out = tmp_path / "single_thread.pt"
    entries = [str(Path(__file__).parent), *[p for p in sys.path if p]]
    script = _DETERMINISM_SCRIPT.format(path_entries=entries, out=str(out))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp_path)
    other = torch.load(out)
    assert all(torch.equal(a, b) for a, b in zip(reference, other))


def test_torch_compile_matches_eager():
    graph = _graph("loops_duplicates")
    h, a_src, a_dst = _inputs(graph, 2, 3, requires_grad=True)

    def f(h, a_src, a_dst):
        return gat_aggregate(graph, h, a_src, a_dst, dropout=0.3, seed=7).tanh().sum()

    # Eager calls take the autograd.Function twin, compiled ones the torch.library op.
    assert "Eager" in type(gat_aggregate(graph, h, a_src, a_dst).grad_fn).__name__
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    eager_val = f(h, a_src, a_dst)
    eager_grads = torch.autograd.grad(eager_val, (h, a_src, a_dst))
    comp_val = compiled(h, a_src, a_dst)
    comp_grads = torch.autograd.grad(comp_val, (h, a_src, a_dst))
    torch.testing.assert_close(comp_val, eager_val)
    for got, want in zip(comp_grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_opcheck():
    graph = _graph("loops_duplicates")
    h, a_src, a_dst = _inputs(graph, 2, 3, requires_grad=True)
    csc = graph.csc
    args = (graph.rowptr, graph.col, *csc, graph.csc_slot, h, a_src, a_dst, None, 0.2, 0.3, 7)
    torch.library.opcheck(_gat_forward_op, args)
    out, lse = _gat_forward_op(*args)
    grad = torch.randn_like(out)
    backward_args = (*args[:10], out.detach(), lse, grad, 0.2, 0.3, 7)
    torch.library.opcheck(
        _gat_backward_op,
        tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in backward_args),
    )


@pytest.mark.parametrize("name", graph_ids())
def test_csc_slot_inverts_the_transpose(name):
    """The backward parks each edge's logit gradient at its CSC slot and reads it back by CSR
    edge through Graph.csc_slot: it must be the inverse permutation of csc.edge_id."""
    graph = _graph(name)
    slot = graph.csc_slot
    assert torch.equal(graph.csc.edge_id[slot], torch.arange(graph.num_edges))
    assert torch.equal(slot[graph.csc.edge_id], torch.arange(graph.num_edges))
    assert graph.csc_slot is slot  # cached with the transpose


def test_backward_refuses_an_out_of_range_csc_slot():
    graph = _graph("loops_duplicates")
    h, a_src, a_dst = _inputs(graph, 2, 3)
    csc = graph.csc
    args = (graph.rowptr, graph.col, *csc, graph.csc_slot, h, a_src, a_dst, None, 0.2, 0.0, 7)
    out, lse = _gat_forward_op(*args)
    bad_slot = graph.csc_slot.clone()
    bad_slot[3] = graph.num_edges
    backward_args = (*args[:5], bad_slot, *args[6:10], out, lse, torch.ones_like(out), 0.2, 0.0, 7)
    with pytest.raises((ValueError, RuntimeError, IndexError), match="csr_to_csc"):
        _gat_backward_op(*backward_args)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(h=torch.zeros(5, 2)), "h must have shape"),
        (dict(h=torch.zeros(4, 2, 3)), "h has 4 rows"),
        (dict(alpha_src=torch.zeros(5, 3)), "alpha_src must have shape"),
        (dict(alpha_dst=torch.zeros(5, 2, dtype=torch.float64)), "alpha_dst has dtype"),
        (dict(h=torch.zeros(5, 2, 3, dtype=torch.int64)), "alpha_src has dtype"),
        (dict(dropout=1.5), "dropout must lie"),
        (dict(negative_slope=float("nan")), "negative_slope must be a finite number"),
        (dict(seed=-1), "seed must lie"),
        (dict(graph="not a graph"), "galfast.Graph"),
    ],
)
def test_bad_inputs(change, message):
    graph = galfast.Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=5)
    kwargs = dict(
        graph=graph,
        h=torch.zeros(5, 2, 3),
        alpha_src=torch.zeros(5, 2),
        alpha_dst=torch.zeros(5, 2),
    )
    kwargs.update(change)
    options = {k: kwargs.pop(k) for k in ("dropout", "negative_slope", "seed") if k in kwargs}
    with pytest.raises(ValueError, match=message):
        gat_aggregate(
            kwargs["graph"], kwargs["h"], kwargs["alpha_src"], kwargs["alpha_dst"], **options
        )


def test_integer_features_are_rejected():
    graph = galfast.Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    zeros = torch.zeros(3, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="h has dtype int64"):
        gat_aggregate(graph, torch.zeros(3, 1, 2, dtype=torch.int64), zeros, zeros)


@pytest.mark.cuda
@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("heads,features", [(1, 64), (4, 8), (2, 200)])
def test_cuda_matches_cpu_forward_and_backward(name, heads, features):
    graph = _graph(name)
    cpu = _inputs(graph, heads, features, torch.float64, requires_grad=True)
    gpu = tuple(t.detach().cuda().requires_grad_(True) for t in cpu)
    results = []
    for g, (h, a_src, a_dst) in ((graph, cpu), (graph.to("cuda"), gpu)):
        out = gat_aggregate(g, h, a_src, a_dst, dropout=0.3, seed=21)
        (out * out.detach().cos()).sum().backward()
        results.append([out, h.grad, a_src.grad, a_dst.grad])
    for on_cpu, on_gpu in zip(*results):
        torch.testing.assert_close(on_gpu.cpu(), on_cpu)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_low_precision_matches_reference(dtype):
    graph = _graph("hub").to("cuda")
    h, a_src, a_dst = _inputs(graph, 2, 40, torch.float32, device="cuda")
    expected = gat_aggregate_reference(graph, h.double(), a_src.double(), a_dst.double())
    out = gat_aggregate(graph, h.to(dtype), a_src.to(dtype), a_dst.to(dtype))
    # Tolerance of the dtype itself: rounding the inputs to it moves the result about this much.
    rounded = gat_aggregate_reference(
        graph, h.to(dtype).double(), a_src.to(dtype).double(), a_dst.to(dtype).double()
    )
    tolerance = 4 * (rounded - expected).abs().max().item() + 1e-6
    torch.testing.assert_close(out.double(), rounded, atol=tolerance, rtol=0)


@pytest.mark.cuda
def test_cuda_gradcheck():
    graph = _graph("loops_duplicates").to("cuda")
    inputs = _inputs(graph, 2, 3, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda h, s, d: gat_aggregate(graph, h, s, d, dropout=0.25, seed=2), inputs
    )


@pytest.mark.cuda
def test_cuda_backward_sums_the_logit_as_the_forward():
    # The CUDA backward summed (a_src + a_edge) + a_dst against the forward's (a_src + a_dst)
    # + a_edge: with cancellation (1e8 - 1e8) its recomputed attention was e^3 times the
    # forward's. The CPU sums both in the forward's order.
    graph = galfast.Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]), 2)
    results = []
    for device in ("cpu", "cuda"):
        g = graph.to(device)
        h = torch.tensor([[[1.0]], [[2.0]]], device=device, requires_grad=True)
        a_src = torch.tensor([[1e8], [0.0]], device=device, requires_grad=True)
        a_dst = torch.tensor([[0.0], [3.0]], device=device, requires_grad=True)
        a_edge = torch.tensor([[-1e8], [0.0]], device=device)  # CSR order: (0->1), (1->1)
        out = gat_aggregate(g, h, a_src, a_dst, a_edge)
        (out * torch.arange(1.0, 3.0, device=device).view(2, 1, 1)).sum().backward()
        results.append([out, h.grad, a_src.grad, a_dst.grad])
    for on_cpu, on_gpu in zip(*results):
        torch.testing.assert_close(on_gpu.cpu(), on_cpu)


@pytest.mark.cuda
def test_dropout_without_a_seed_is_not_captured_in_a_cuda_graph():
    # The host-drawn seed was baked into the capture: every replay dropped the same weights.
    graph = _graph("hub").to("cuda")
    h, a_src, a_dst = _inputs(graph, 2, 8, torch.float32, device="cuda")
    gat_aggregate(graph, h, a_src, a_dst, dropout=0.5)  # builds the graph's caches first
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), pytest.raises(RuntimeError, match="CUDA graph"):
        with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
            gat_aggregate(graph, h, a_src, a_dst, dropout=0.5)
