"""CUDA aggregation against the CPU kernel and a plain-PyTorch reference (skipped without a GPU)."""

import pytest
import torch
from graphs import awkward_graphs, random_edges
from ref_aggregate import aggregate_ref

from galfast import Graph
from galfast.ops import aggregate

pytestmark = pytest.mark.cuda

REDUCES = ["sum", "mean", "max"]


@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("norm", [None, "gcn"])
@pytest.mark.parametrize("f", [1, 7, 16, 33, 64, 130])
def test_float64_matches_cpu_forward_and_backward(name, reduce, norm, f):
    # The big hub (3,000 edges) exercises the block-per-row hub kernel.
    edge_index, n = awkward_graphs()[name]
    gen = torch.Generator().manual_seed(f)
    weight = torch.rand(edge_index.size(1), generator=gen, dtype=torch.float64) + 0.5
    g_cpu = Graph.from_edge_index(edge_index, n, weight)
    g_gpu = g_cpu.to("cuda")
    x = torch.randn(n, f, generator=gen, dtype=torch.float64)
    grad = torch.randn(n, f, generator=gen, dtype=torch.float64)
    results = []
    for g, dev in ((g_cpu, "cpu"), (g_gpu, "cuda")):
        xd = x.to(dev).requires_grad_()
        w = g.edge_weight.clone().requires_grad_()
        out = aggregate(g, xd, w, reduce=reduce, norm=norm)
        gx, gw = torch.autograd.grad(out, (xd, w), grad.to(dev))
        results.append([t.cpu() for t in (out, gx, gw)])
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", REDUCES)
def test_low_precision_error_is_no_worse_than_torch(dtype, reduce):
    # Tolerance rule: our error against a float64 reference may be at most twice (plus a little)
    # the error plain PyTorch makes computing the same thing in that dtype.
    edge_index = torch.cat([random_edges(2000, 30000, seed=0), awkward_graphs()["hub"][0]], 1)
    g = Graph.from_edge_index(edge_index, 3001).to("cuda")
    x64 = torch.randn(3001, 64, dtype=torch.float64, device="cuda")
    x = x64.to(dtype)
    exact = aggregate_ref(3001, g.col, g.row, x.double(), None, reduce, "gcn")
    torch_err = (aggregate_ref(3001, g.col, g.row, x, None, reduce, "gcn").double() - exact).abs()
    ours_err = (aggregate(g, x, reduce=reduce, norm="gcn").double() - exact).abs()
    assert ours_err.max() <= 2 * torch_err.max() + 1e-6


def test_deterministic_and_stream_aware():
    edge_index = torch.cat([random_edges(3000, 40000, seed=5), awkward_graphs()["hub"][0]], 1)
    g = Graph.from_edge_index(edge_index, 3001).to("cuda")
    x_data = torch.randn(3001, 48, device="cuda")
    stream = torch.cuda.Stream()
    outs = []
    for use_side_stream in (False, True, False):
        with torch.cuda.stream(stream if use_side_stream else torch.cuda.current_stream()):
            # A fresh leaf per stream: autograd wants a leaf's gradient on the stream that made it.
            x = x_data.detach().requires_grad_()
            out = aggregate(g, x, reduce="sum", norm="gcn")
            (gx,) = torch.autograd.grad(out, x, torch.ones_like(out))
        torch.cuda.synchronize()
        outs.append((out.detach(), gx))
    for out, gx in outs[1:]:
        assert torch.equal(out, outs[0][0]) and torch.equal(gx, outs[0][1])


def test_errors_name_the_device_mismatch():
    g = Graph.from_edge_index(torch.tensor([[0], [1]]), 2)
    with pytest.raises(ValueError, match="graph is on cpu"):
        aggregate(g, torch.ones(2, 3, device="cuda"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_tensors_on_another_device_than_the_current_one():
    # Launches went to the current device (cuda:0) whatever device the tensors were on.
    edge_index = random_edges(50, 300, seed=4)
    graph = Graph.from_edge_index(edge_index, 50)
    x = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    expected = aggregate(graph, x, norm="gcn")
    expected.square().sum().backward()
    on_one = x.detach().to("cuda:1").requires_grad_()
    assert torch.cuda.current_device() == 0
    out = aggregate(graph.to("cuda:1"), on_one, norm="gcn")
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(on_one.grad.cpu(), x.grad)
