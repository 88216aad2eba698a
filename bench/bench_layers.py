"""Each galfast.nn layer against its PyG twin, forward and forward+backward, in one run.

    pytest bench/bench_layers.py --benchmark-only --benchmark-group-by=group

float32, 64 input and 64 output channels (GAT: 64 per head), on the Cora-, PubMed- and
MovieLens-1M-size graphs of bench/graphs.py. galfast layers get a ``galfast.Graph`` (their fast
path; normalisation cached on it). PyG layers get ``edge_index`` and, where the layer accepts
one, PyG's fastest input: a cached CSR ``adj_t`` (a ``torch.sparse_csr_tensor``; also
torch_sparse's ``SparseTensor`` when that package is installed); GCNConv runs with
``cached=True``. ChebConv only takes edge_index. Backward is with respect to x and every
parameter. Peak memory of GAT: bench/gat_memory.py.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from graphs import cora_like, movielens_like, pubmed_like

import galfast
import galfast.nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = {"cora": cora_like, "pubmed": pubmed_like, "movielens": movielens_like}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CHANNELS = 64


def _gin_mlp() -> torch.nn.Module:
    return torch.nn.Linear(CHANNELS, CHANNELS)


# name -> (galfast layer, PyG layer, PyG inputs besides edge_index)
LAYERS = {
    "gcn": (
        lambda: gnn.GCNConv(CHANNELS, CHANNELS),
        lambda: pyg_nn.GCNConv(CHANNELS, CHANNELS, cached=True),
        ("csr", "sparse_tensor"),
    ),
    "sage_mean": (
        lambda: gnn.SAGEConv(CHANNELS, CHANNELS),
        lambda: pyg_nn.SAGEConv(CHANNELS, CHANNELS),
        ("csr", "sparse_tensor"),
    ),
    "cheb_k2": (
        lambda: gnn.ChebConv(CHANNELS, CHANNELS, K=2),
        lambda: pyg_nn.ChebConv(CHANNELS, CHANNELS, K=2),
        (),
    ),
    "gin": (lambda: gnn.GINConv(_gin_mlp()), lambda: pyg_nn.GINConv(_gin_mlp()), ("csr",)),
    "gat_h1": (
        lambda: gnn.GATConv(CHANNELS, CHANNELS, heads=1),
        lambda: pyg_nn.GATConv(CHANNELS, CHANNELS, heads=1),
        ("csr", "sparse_tensor"),
    ),
    "gat_h4": (
        lambda: gnn.GATConv(CHANNELS, CHANNELS, heads=4),
        lambda: pyg_nn.GATConv(CHANNELS, CHANNELS, heads=4),
        ("csr", "sparse_tensor"),
    ),
}
IMPLS = ["galfast", "pyg_edge_index", "pyg_csr", "pyg_sparse_tensor"]


@functools.cache
def graph_inputs(graph_name: str, device: str) -> dict:
    edge_index, n = GRAPHS[graph_name]()
    graph = galfast.Graph.from_edge_index(edge_index, n).to(device)
    # PyG's adj_t is the transposed adjacency: row i lists the sources of i, like galfast's CSR.
    ones = torch.ones(graph.num_edges, device=device)
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        csr = torch.sparse_csr_tensor(graph.rowptr, graph.col, ones, (n, n))
    inputs = {"galfast": graph, "pyg_edge_index": graph.edge_index(), "pyg_csr": csr}
    try:
        import torch_sparse

        inputs["pyg_sparse_tensor"] = torch_sparse.SparseTensor(
            rowptr=graph.rowptr, col=graph.col, sparse_sizes=(n, n)
        )
    except ImportError:
        pass
    return inputs


def _rounds(graph_name: str, impl: str) -> int:
    # PyG on MovieLens takes seconds per call: a few rounds suffice and keep the file quick.
    return 3 if graph_name == "movielens" and impl != "galfast" else 10


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("layer", list(LAYERS))
@pytest.mark.parametrize("graph_name", list(GRAPHS))
@pytest.mark.parametrize("device", DEVICES)
def test_layer(benchmark, device, graph_name, layer, pass_, impl):
    ours, theirs, pyg_inputs = LAYERS[layer]
    if impl not in ("galfast", "pyg_edge_index") and impl.removeprefix("pyg_") not in pyg_inputs:
        pytest.skip(f"PyG's {layer} does not take this input")
    inputs = graph_inputs(graph_name, device)
    if impl not in inputs:
        pytest.skip("torch_sparse is not installed")
    adjacency = inputs[impl]
    torch.manual_seed(0)
    module = (ours if impl == "galfast" else theirs)().to(device)
    n = inputs["galfast"].num_nodes
    x = torch.randn(n, CHANNELS, device=device).requires_grad_(pass_ == "fwd+bwd")

    def run():
        out = module(x, adjacency)
        if pass_ == "fwd+bwd":
            out.backward(torch.ones_like(out))
        if device == "cuda":
            torch.cuda.synchronize()

    benchmark.group = f"{layer} {graph_name} {pass_} {device}"
    with warnings.catch_warnings():  # PyG's sparse paths emit torch's beta warnings
        warnings.simplefilter("ignore", UserWarning)
        benchmark.pedantic(run, rounds=_rounds(graph_name, impl), warmup_rounds=1)
