"""CUDA nnconv_aggregate against the CPU kernels (skipped without a GPU)."""

import pytest
import torch
from graphs import awkward_graphs
from molecule_graphs import molecule_batch

from galfast.nn import NNConv
from galfast.nn._graph_input import csr_from_coo
from galfast.ops import nnconv_aggregate

pytestmark = pytest.mark.cuda


def _graphs():
    cases = dict(awkward_graphs())
    cases["complete"] = molecule_batch(6, seed=2, complete=True)[:2]
    return cases


@pytest.mark.parametrize("name", list(_graphs()))
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("sizes", [(5, 7, 3), (64, 128, 64), (33, 40, 2)])
def test_float64_matches_cpu_forward_and_backward(name, reduce, sizes):
    """The hub (3,000 edges) takes many staged chunks of the forward kernel."""
    f_in, hidden, f_out = sizes
    edge_index, n = _graphs()[name]
    graph, order = csr_from_coo(edge_index[1], edge_index[0], n)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, f_in, generator=gen, dtype=torch.float64)
    h = torch.randn(graph.num_edges, hidden, generator=gen, dtype=torch.float64)
    w = torch.randn(f_in * f_out, hidden, generator=gen, dtype=torch.float64) / hidden
    b = torch.randn(f_in * f_out, generator=gen, dtype=torch.float64)
    grad = torch.randn(n, f_out, generator=gen, dtype=torch.float64)
    results = []
    for g, dev in ((graph, "cpu"), (graph.to("cuda"), "cuda")):
        inputs = [t.to(dev).requires_grad_() for t in (x, h, w, b)]
        out = nnconv_aggregate(g, *inputs, reduce=reduce)
        grads = torch.autograd.grad(out, inputs, grad.to(dev))
        results.append([t.cpu() for t in (out, *grads)])
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_close_to_float64(dtype):
    edge_index, n, _, edge_attr = molecule_batch(8, seed=3)
    torch.manual_seed(0)
    conv = NNConv(
        16,
        8,
        torch.nn.Sequential(torch.nn.Linear(5, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16 * 8)),
        aggr="mean",
    )
    x = torch.randn(n, 16)
    want = conv.double()(x.double(), edge_index, edge_attr.double())
    got = conv.to("cuda", dtype)(
        x.to("cuda", dtype), edge_index.cuda(), edge_attr.to("cuda", dtype)
    )
    # float16/bfloat16 inputs and weights round to ~3/2 significant digits before any sum
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(got.double().cpu(), want, rtol=tol, atol=tol)
