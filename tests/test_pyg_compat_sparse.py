"""Sparse adjacency inputs (PyG's transposed ``adj_t``): torch.sparse COO / CSR / CSC and a
torch_sparse-style SparseTensor, against PyG with the same adjacency; caching and no copies."""

from __future__ import annotations

import sys

import pytest
import torch
from _layer_cases import awkward_graphs, positive_weights
from _pyg_compat_cases import compare_layers

from galfast import nn as gnn
from galfast.nn import _graph_input

pyg_nn = pytest.importorskip("torch_geometric.nn")

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CS. tensor support is in beta")


@pytest.fixture(autouse=True, scope="module")
def _pyg_propagate_from_fusable_layers():
    """PyG writes a layer class's ``propagate`` once, from the first instance built in the
    process, and keeps it on the class: after a SAGEConv with a non-fusable aggregation (e.g.
    ``aggr="lstm"`` in test_pyg_compat_sage_aggr.py) every later PyG SAGEConv raises
    "'message_and_aggregate' not implemented" on sparse input. Dropping the generated methods
    and their module makes the next instance write them again, from its own settings."""
    for cls in (pyg_nn.SAGEConv, pyg_nn.GCNConv, pyg_nn.GINConv, pyg_nn.GATConv):
        for name in ("propagate", "collect", "_orig_propagate", "_jinja_propagate"):
            if name in vars(cls):
                delattr(cls, name)
        sys.modules.pop(f"{cls.__module__}_{cls.__name__}_propagate", None)


GRAPHS = awkward_graphs()
# The hub graph makes every case slow in PyG without adding a sparse-specific path.
NAMES = ["random", "isolated", "loops_duplicates", "no_edges"]


def adjacency_t(edge_index, values, num_dst, num_src, layout):
    """PyG's adj_t: [num_dst, num_src] with entry (i, j) for the edge j -> i, coalesced."""
    adj = torch.sparse_coo_tensor(
        edge_index.flip(0), values, (num_dst, num_src), check_invariants=True
    ).coalesce()
    if layout == torch.sparse_csr:
        return adj.to_sparse_csr()
    if layout == torch.sparse_csc:
        return adj.to_sparse_csc()
    return adj


def _simple(edge_index):
    """Without parallel edges (a sparse tensor sums them: a different graph)."""
    return torch.unique(edge_index, dim=1)


def _x(n, channels=8):
    return torch.randn(n, channels, generator=torch.Generator().manual_seed(1))


def _layers():
    return {
        "gcn": lambda lib: lib.GCNConv(8, 6),
        "gcn_improved": lambda lib: lib.GCNConv(8, 6, improved=True),
        "sage": lambda lib: lib.SAGEConv(8, 6),
        "sage_sum": lambda lib: lib.SAGEConv(8, 6, aggr="sum"),
        "gin": lambda lib: lib.GINConv(torch.nn.Linear(8, 6), train_eps=True),
        "gat": lambda lib: lib.GATConv(8, 3, heads=2),
    }


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("layer", list(_layers()))
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_adj_t_matches_pyg(layout, layer, name, weighted):
    edge_index, n = GRAPHS[name]
    edge_index = _simple(edge_index)
    values = positive_weights(edge_index.size(1)) if weighted else torch.ones(edge_index.size(1))
    adj_t = adjacency_t(edge_index, values, n, n, layout)
    pyg, ours = (_layers()[layer](lib) for lib in (pyg_nn, gnn))
    call = lambda conv, t: conv(t["x"], t["adj"])  # noqa: E731
    compare_layers(pyg, ours, {"x": _x(n), "adj": adj_t}, call)


@pytest.mark.parametrize("layer", ["gcn", "sage", "sage_max", "gin", "gat"])
def test_uncoalesced_coo_adj_t_sums_its_duplicates_as_pyg(layer):
    """An entry stored twice in a COO adj_t is one entry of twice the value, as torch.sparse
    and PyG read it; galfast read the copies as parallel edges, which changed a mean, a max
    and GAT's softmax (1.3, 1.5 and 0.5 off PyG on a 5-node graph)."""
    edge_index, n = GRAPHS["random"]
    # Without self loops, which PyG's GCN treats differently per form (the GCN docstring).
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = torch.cat([edge_index, edge_index[:, ::3]], dim=1)  # every third one twice
    values = torch.ones(edge_index.size(1))

    def adj_t():  # one each: PyG's GATConv marks its input coalesced without coalescing it
        adj = torch.sparse_coo_tensor(edge_index.flip(0), values, (n, n), check_invariants=True)
        assert not adj.is_coalesced() and adj._nnz() > adj.coalesce()._nnz()
        return adj

    layers = {**_layers(), "sage_max": lambda lib: lib.SAGEConv(8, 6, aggr="max")}
    pyg, ours = (layers[layer](lib) for lib in (pyg_nn, gnn))
    call = lambda conv, t: conv(t["x"], t["adj"])  # noqa: E731
    compare_layers(pyg, ours, {"x": _x(n), "adj": adj_t()}, call, {"x": _x(n), "adj": adj_t()})


@pytest.mark.parametrize("layer", ["gcn", "sage", "gin", "gat"])
def test_csc_adj_t_equals_csr(layer):
    # PyG cannot normalise a CSC matrix for GCN; galfast reads it as the same graph.
    edge_index, n = GRAPHS["random"]
    edge_index = _simple(edge_index)
    values = positive_weights(edge_index.size(1))
    conv = _layers()[layer](gnn)
    csr = adjacency_t(edge_index, values, n, n, torch.sparse_csr)
    csc = adjacency_t(edge_index, values, n, n, torch.sparse_csc)
    torch.testing.assert_close(conv(_x(n), csc), conv(_x(n), csr))


def test_unweighted_sparse_equals_edge_index():
    # Without self loops (which PyG's GCN treats differently per form: see the GCN docstring).
    edge_index, n = GRAPHS["loops_duplicates"]
    edge_index = _simple(edge_index)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    adj_t = adjacency_t(edge_index, torch.ones(edge_index.size(1)), n, n, torch.sparse_csr)
    for conv in (gnn.GCNConv(8, 6), gnn.SAGEConv(8, 6), gnn.GATConv(8, 3, heads=2)):
        torch.testing.assert_close(conv(_x(n), adj_t), conv(_x(n), edge_index))


def test_csr_adj_t_is_used_in_place_and_cached():
    edge_index, n = GRAPHS["random"]
    edge_index = _simple(edge_index)
    adj_t = adjacency_t(edge_index, torch.ones(edge_index.size(1)), n, n, torch.sparse_csr)
    graph = _graph_input.layer_graph(adj_t, n).graph
    assert graph.rowptr.data_ptr() == adj_t.crow_indices().data_ptr()  # no copy
    assert graph.col.data_ptr() == adj_t.col_indices().data_ptr()
    assert _graph_input.layer_graph(adj_t, n).graph is graph  # one Graph per object
    coo = adjacency_t(edge_index, torch.ones(edge_index.size(1)), n, n, torch.sparse_coo)
    first = _graph_input.layer_graph(coo, n)
    again = _graph_input.layer_graph(coo, n)
    assert again.graph is first.graph and again.order is first.order
    # Values are read on every call (they may be learnable): a new weight is seen at once.
    with torch.no_grad():
        coo._values().mul_(2.0)
    torch.testing.assert_close(_graph_input.layer_graph(coo, n).weight, first.weight * 2)


def test_sparse_cache_sees_index_edits():
    edge_index, n = GRAPHS["random"]
    edge_index = _simple(edge_index)
    coo = adjacency_t(edge_index, torch.ones(edge_index.size(1)), n, n, torch.sparse_coo)
    first = _graph_input.layer_graph(coo, n).graph
    coo._indices()[1, 0] = (coo._indices()[1, 0] + 1) % n  # an edit the version misses
    rebuilt = _graph_input.layer_graph(coo, n).graph
    assert rebuilt is not first
    before = len(_graph_input._GRAPHS)
    del coo
    assert len(_graph_input._GRAPHS) < before


def test_weights_with_sparse_input_are_refused():
    edge_index, n = GRAPHS["random"]
    edge_index = _simple(edge_index)
    adj_t = adjacency_t(edge_index, torch.ones(edge_index.size(1)), n, n, torch.sparse_coo)
    with pytest.raises(ValueError, match="its values are the edge weights"):
        gnn.GCNConv(8, 6)(_x(n), adj_t, torch.ones(3))
    with pytest.raises(ValueError, match="x has 3 rows but the adj_t has"):
        gnn.GCNConv(8, 6)(_x(3), adj_t)


class FakeSparseTensor:
    """The part of torch_sparse.SparseTensor galfast reads (``csr()``, ``sparse_sizes()``) and
    GATConv's ``set_diag`` / ``set_value`` for attention weights, over a coalesced adj_t. It
    stands in for the real class, which is not installed here; the code path is the same
    duck-typed one."""

    def __init__(self, adj_t: torch.Tensor) -> None:
        self.adj_t = adj_t.coalesce()

    def csr(self):
        csr = self.adj_t.to_sparse_csr()
        return csr.crow_indices(), csr.col_indices(), csr.values()

    def sparse_sizes(self):
        return tuple(self.adj_t.shape)

    def set_diag(self):
        rows, cols = self.adj_t.indices()
        keep = rows != cols
        loops = torch.arange(min(self.adj_t.shape))
        indices = torch.cat([self.adj_t.indices()[:, keep], torch.stack([loops, loops])], 1)
        values = torch.ones(indices.size(1))
        return FakeSparseTensor(torch.sparse_coo_tensor(indices, values, self.adj_t.shape))

    def set_value(self, value, layout=None):
        return torch.sparse_coo_tensor(
            self.adj_t.indices(), value, (*self.adj_t.shape, *value.shape[1:])
        )


def test_sparse_tensor_duck_type_matches_torch_sparse():
    edge_index, n = GRAPHS["loops_duplicates"]
    edge_index = _simple(edge_index)
    values = positive_weights(edge_index.size(1))
    coo = adjacency_t(edge_index, values, n, n, torch.sparse_coo)
    fake = FakeSparseTensor(coo)
    for name, make in _layers().items():
        conv = make(gnn)
        if name.startswith("gcn"):
            # torch_sparse's fill_diag replaces existing loops: the graph without them, weighted.
            plain = edge_index[0] != edge_index[1]
            expected = conv(_x(n), edge_index[:, plain], values[plain])
            if name == "gcn_improved":  # the fill of 2 applies: compare with PyG's own form
                expected = conv(
                    _x(n), adjacency_t(edge_index[:, plain], values[plain], n, n, torch.sparse_coo)
                )
            torch.testing.assert_close(conv(_x(n), fake), expected)
        else:
            torch.testing.assert_close(conv(_x(n), fake), conv(_x(n), coo))
    graph = _graph_input.layer_graph(fake, n).graph
    assert _graph_input.layer_graph(fake, n).graph is graph
    out, adj = gnn.GATConv(8, 3, heads=2)(_x(n), fake, return_attention_weights=True)
    assert adj.shape == (n, n, 2)
    assert adj._nnz() == edge_index.size(1) - int((edge_index[0] == edge_index[1]).sum()) + n
