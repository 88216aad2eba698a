"""Sum aggregation with GCN weights, out = D^-1/2 A D^-1/2 x, against its peers in one run.

    pytest bench/bench_aggregate.py --benchmark-only --benchmark-group-by=group

Peers: torch.sparse.mm on a CSR tensor (as PyG hands it, int64, its backward transposing per
call); the best-written cuSPARSE and cupyx peers (int32 CSR, the transpose built once for the
backward); PyG's GCNConv propagate path (message passing over edge_index, and the cached CSR
`adj_t`); torch_scatter's segment_csr and torch_sparse's matmul when installed. All compute the
same product; backward is with respect to x.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from graphs import cora_like, movielens_like, pubmed_like

from galfast import Graph
from galfast.ops import aggregate

GRAPHS = {"cora": cora_like, "pubmed": pubmed_like, "movielens": movielens_like}
FEATURES = [16, 20, 64, 128]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@functools.cache
def setup(graph_name: str, device: str):
    edge_index, n = GRAPHS[graph_name]()
    g = Graph.from_edge_index(edge_index, n).to(device)
    scale = g.degree_scale("gcn", torch.float32)
    weight = scale[g.row] * scale[g.col]  # CSR order
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        adj_t = torch.sparse_csr_tensor(g.rowptr, g.col, weight, (n, n))
    return g, weight, adj_t


def features(n: int, f: int, device: str, backward: bool) -> torch.Tensor:
    x = torch.randn(n, f, generator=torch.Generator().manual_seed(0)).to(device)
    return x.requires_grad_(backward)


def galfast_fn(g, weight, adj_t, x):
    return aggregate(g, x, norm="gcn")


def galfast_weighted_fn(g, weight, adj_t, x):
    return aggregate(g, x, weight)


def torch_sparse_mm_fn(g, weight, adj_t, x):
    return torch.sparse.mm(adj_t, x)


class CachedTransposeSpmm(torch.autograd.Function):
    """mm(a, x) whose backward is mm(a_t, grad) with a transpose built once (a peer helper)."""

    @staticmethod
    def forward(ctx, a, a_t, x, mm):
        ctx.a_t, ctx.mm = a_t, mm
        return mm(a, x)

    @staticmethod
    def backward(ctx, grad):
        return None, None, ctx.mm(ctx.a_t, grad.contiguous()), None


@functools.cache
def int32_csr_pair(g, weight):
    """(A, A^T) as int32 CSR tensors: A^T from the graph's cached CSC."""
    colptr, csc_row, csc_edge_id = g.csc
    n = g.num_nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_csr_tensor(g.rowptr.int(), g.col.int(), weight, (n, n))
        a_t = torch.sparse_csr_tensor(colptr.int(), csc_row.int(), weight[csc_edge_id], (n, n))
    return a, a_t


def torch_sparse_mm_int32_fn(g, weight, adj_t, x):
    a, a_t = int32_csr_pair(g, weight)
    return CachedTransposeSpmm.apply(a, a_t, x, torch.sparse.mm)


@functools.cache
def cupy_csr_pair(g, weight):
    cupy = pytest.importorskip("cupy")
    cusparse = pytest.importorskip("cupyx.scipy.sparse")
    if weight.device.type != "cuda":
        pytest.skip("cupyx is a GPU peer")
    a, a_t = int32_csr_pair(g, weight)

    def to_cupy(m):
        arrays = (m.values(), m.col_indices(), m.crow_indices())
        return cusparse.csr_matrix(tuple(cupy.asarray(t) for t in arrays), shape=m.shape)

    return to_cupy(a), to_cupy(a_t)


def _cupy_mm(a, x):
    import cupy

    # detach: torch refuses the CUDA array interface of a tensor that requires a gradient.
    return torch.as_tensor(a @ cupy.asarray(x.detach()), device=x.device)


def cupyx_fn(g, weight, adj_t, x):
    a, a_t = cupy_csr_pair(g, weight)
    return CachedTransposeSpmm.apply(a, a_t, x, _cupy_mm)


@functools.cache
def _pyg_propagate(device: str):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from torch_geometric.utils import spmm

    class GCNPropagate(pyg_nn.MessagePassing):
        """GCNConv's propagate path without its linear layer."""

        def __init__(self):
            super().__init__(aggr="add")

        def forward(self, x, edge_index, edge_weight=None):
            return self.propagate(edge_index, x=x, edge_weight=edge_weight)

        def message(self, x_j, edge_weight):
            return edge_weight.view(-1, 1) * x_j

        def message_and_aggregate(self, adj_t, x):
            return spmm(adj_t, x, reduce=self.aggr)

    return GCNPropagate().to(device)


def pyg_edge_index_fn(g, weight, adj_t, x):
    return _pyg_propagate(x.device.type)(x, g.cached("bench_edge_index", g.edge_index), weight)


def pyg_csr_fn(g, weight, adj_t, x):
    return _pyg_propagate(x.device.type)(x, adj_t)


def torch_scatter_fn(g, weight, adj_t, x):
    torch_scatter = pytest.importorskip("torch_scatter")
    return torch_scatter.segment_csr(weight.view(-1, 1) * x[g.col], g.rowptr, reduce="sum")


def torch_sparse_fn(g, weight, adj_t, x):
    torch_sparse = pytest.importorskip("torch_sparse")
    sp = g.cached(
        "bench_sparse_tensor",
        lambda: torch_sparse.SparseTensor(
            rowptr=g.rowptr, col=g.col, value=weight, sparse_sizes=(g.num_nodes, g.num_nodes)
        ),
    )
    return torch_sparse.matmul(sp, x)


IMPLS = {
    "galfast": galfast_fn,
    "galfast_weighted": galfast_weighted_fn,
    "torch.sparse.mm": torch_sparse_mm_fn,
    "torch.sparse.mm_int32_cachedT": torch_sparse_mm_int32_fn,
    "cupyx_int32_cachedT": cupyx_fn,
    "pyg_edge_index": pyg_edge_index_fn,
    "pyg_csr": pyg_csr_fn,
    "torch_scatter": torch_scatter_fn,
    "torch_sparse": torch_sparse_fn,
}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("f", FEATURES)
@pytest.mark.parametrize("graph_name", list(GRAPHS))
@pytest.mark.parametrize("device", DEVICES)
def test_aggregate(benchmark, device, graph_name, f, pass_, impl):
    g, weight, adj_t = setup(graph_name, device)
    backward = pass_ == "fwd+bwd"
    x = features(g.num_nodes, f, device, backward)
    fn = IMPLS[impl]

    def run():
        out = fn(g, weight, adj_t, x)
        if backward:
            out.backward(torch.ones_like(out))
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    run()  # warm-up: caches (transpose, scales) and lazy imports
    expected = torch.sparse.mm(adj_t, x.detach())
    torch.testing.assert_close(fn(g, weight, adj_t, x.detach()), expected, rtol=1e-4, atol=1e-4)
    benchmark.group = f"aggregate {device} {graph_name} F={f} {pass_}"
    benchmark(run)
