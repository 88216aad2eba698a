import copy
import io
import pickle

import pytest
import torch
from graphs import awkward_graphs
from ref_aggregate import coalesce_ref

from galfast import Graph
from galfast.ops import aggregate, sample_nhop


@pytest.mark.parametrize("name", list(awkward_graphs()))
def test_csr_matches_python_coalesce(name):
    edge_index, n = awkward_graphs()[name]
    weight = torch.rand(edge_index.size(1), dtype=torch.float64)
    g = Graph.from_edge_index(edge_index, n, weight)
    src, dst, w = coalesce_ref(edge_index[0].tolist(), edge_index[1].tolist(), weight.tolist())
    assert g.num_nodes == n and g.num_edges == len(src)
    assert g.col.tolist() == src
    assert g.row.tolist() == dst
    assert torch.allclose(g.edge_weight, torch.tensor(w, dtype=torch.float64))
    assert g.rowptr.tolist() == [sum(1 for d in dst if d < i) for i in range(n + 1)]


def test_csc_is_the_transpose():
    edge_index, n = awkward_graphs()["random"]
    g = Graph.from_edge_index(edge_index, n)
    csc = g.csc
    assert csc._fields == ("colptr", "row", "edge_id")
    for j in range(n):
        slots = range(csc.colptr[j], csc.colptr[j + 1])
        assert all(g.col[csc.edge_id[k]] == j for k in slots)
        assert [csc.row[k].item() for k in slots] == [g.row[csc.edge_id[k]].item() for k in slots]
    assert sorted(csc.edge_id.tolist()) == list(range(g.num_edges))
    assert torch.equal(g.out_degree, torch.bincount(g.col, minlength=n))


def test_symmetrize_and_self_loops():
    g = Graph.from_edge_index(
        torch.tensor([[0, 1], [1, 1]]), 3, symmetrize=True, add_self_loops=True
    )
    pairs = set(zip(g.col.tolist(), g.row.tolist()))
    assert pairs == {(0, 1), (1, 0), (1, 1), (0, 0), (2, 2)}
    # The existing self loop (1, 1) appears twice after symmetrizing and is kept, merged, not
    # given another loop: its weight is 2, the added loops weigh 1.
    g = Graph.from_edge_index(
        torch.tensor([[0, 1], [1, 1]]), 3, torch.ones(2), symmetrize=True, add_self_loops=True
    )
    weights = dict(zip(zip(g.col.tolist(), g.row.tolist()), g.edge_weight.tolist()))
    assert weights[(1, 1)] == 2.0 and weights[(0, 0)] == 1.0 and weights[(2, 2)] == 1.0


def test_edge_types_keep_parallel_edges_apart():
    ei = torch.tensor([[0, 0, 0], [1, 1, 1]])
    g = Graph.from_edge_index(ei, 2, edge_type=torch.tensor([2, 0, 2]))
    assert g.num_edges == 2 and g.edge_type.tolist() == [0, 2]


def test_weight_building_is_differentiable():
    w = torch.rand(6, dtype=torch.float64, requires_grad=True)
    ei = torch.tensor([[0, 0, 0, 1, 1, 2], [1, 1, 1, 2, 2, 0]])
    g = Graph.from_edge_index(ei, 3, w)
    g.edge_weight.sum().backward()
    assert torch.equal(w.grad, torch.ones(6, dtype=torch.float64))


def test_to_same_device_is_identity_and_cache_is_per_graph():
    g = Graph.from_edge_index(torch.tensor([[0], [1]]))
    assert g.to("cpu") is g
    calls = []
    assert g.cached("k", lambda: calls.append(1) or 7) == 7
    assert g.cached("k", lambda: calls.append(1) or 8) == 7
    assert calls == [1]


def _pickled(graph):
    return pickle.loads(pickle.dumps(graph))


def _saved_and_loaded(graph):
    buffer = io.BytesIO()
    torch.save(graph, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize(
    "copy_graph",
    [copy.copy, copy.deepcopy, _pickled, _saved_and_loaded],
    ids=["copy", "deepcopy", "pickle", "torch.save"],
)
def test_copies_and_pickles_rebuild_their_cache(copy_graph):
    """A copy of a graph whose derived structure was built (the transpose, the walk adjacency
    and its 16-bit copy) passes the in-place edit check, walks and aggregates as the original,
    and still catches an in-place edit of its own tensors."""
    generator = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 50, (2, 400), generator=generator)
    weight = torch.rand(400, generator=generator, dtype=torch.float64)
    graph = Graph.from_edge_index(edge_index, 50, weight, symmetrize=True)
    starts = torch.arange(50).repeat(4)
    x = torch.rand(50, 3, generator=generator, dtype=torch.float64)
    ends = sample_nhop(graph, starts, 3, seed=5)
    summed = aggregate(graph, x, graph.edge_weight, norm="gcn")
    transpose = graph.csc

    other = copy_graph(graph)
    other.check_unmodified()
    assert torch.equal(sample_nhop(other, starts, 3, seed=5), ends)
    assert torch.equal(aggregate(other, x, other.edge_weight, norm="gcn"), summed)
    assert all(torch.equal(a, b) for a, b in zip(other.csc, transpose))
    other.edge_weight.mul_(2)
    with pytest.raises(ValueError, match="edge_weight was modified in place"):
        other.check_unmodified()


@pytest.mark.parametrize(
    "edge_index, num_nodes, message",
    [
        (torch.tensor([[0, -1], [1, 0]]), None, "negative"),
        (torch.tensor([[0, 5], [1, 0]]), 3, "refers to node 5"),
        (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), None, "integer"),
        (torch.tensor([0, 1, 2]), None, "shape"),
        (torch.tensor([[0, 1], [1, 0], [0, 0]]), None, "shape"),
        (torch.tensor([[0, 1], [1, 0]], dtype=torch.int16), None, "int64 or int32"),
        ([[0, 1], [1, 0]], None, "torch.Tensor"),
        (torch.tensor([[0], [1]]), -1, "num_nodes"),
    ],
)
def test_bad_edge_index(edge_index, num_nodes, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_edge_index(edge_index, num_nodes)


def test_bad_edge_weight():
    ei = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="NaN"):
        Graph.from_edge_index(ei, 2, torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="shape"):
        Graph.from_edge_index(ei, 2, torch.ones(3))
    with pytest.raises(ValueError, match="floating"):
        Graph.from_edge_index(ei, 2, torch.ones(2, dtype=torch.long))
    with pytest.raises(ValueError, match="negative relation"):
        Graph.from_edge_index(ei, 2, edge_type=torch.tensor([0, -2]))


def test_from_pyg_data():
    data_mod = pytest.importorskip("torch_geometric.data")
    data = data_mod.Data(edge_index=torch.tensor([[0, 1, 1], [1, 2, 2]]), num_nodes=4)
    g = Graph.from_data(data)
    assert g.num_nodes == 4 and g.num_edges == 2


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("_num_nodes", 10**6, "rowptr must have num_nodes"),  # was a read past rowptr's end
        ("_col", torch.tensor([0, 1, 2]), "rowptr must run from 0 to num_edges = 3"),
        ("_edge_weight", torch.ones(3), "edge_weight"),
        ("_rowptr", None, "rowptr"),
    ],
)
def test_an_edited_pickle_is_checked_as_a_new_graph(field, value, message):
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]), 4)
    state = graph.__getstate__()
    state[field] = value
    with pytest.raises(ValueError, match=message):
        pickle.loads(pickle.dumps(graph)).__setstate__(state)


def test_a_pickle_from_before_bipartite_graphs_loads():
    graph = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 3)
    state = graph.__getstate__()
    del state["_num_src_nodes"], state["_on_kernel_device"]
    other = Graph.__new__(Graph)
    other.__setstate__(state)
    assert other.num_src_nodes == 3 and torch.equal(other.col, graph.col)


def _edit_in_degree(graph):
    graph.in_degree.clamp_(min=5)  # a user's own degree arithmetic, done in place


def _edit_degree_scale(graph):
    graph.degree_scale("gcn", torch.float32).mul_(3)


def _edit_csc(graph):
    graph.csc.row.zero_()


def _input_gradient(graph, x):
    x = x.clone().requires_grad_()
    aggregate(graph, x).square().sum().backward()
    return x.grad


@pytest.mark.parametrize(
    "edit, name, call",
    [
        (_edit_in_degree, "in_degree", lambda g, x: aggregate(g, x, reduce="mean")),
        (
            _edit_degree_scale,
            r"degree_scale\('gcn', torch.float32\)",
            lambda g, x: aggregate(g, x, norm="gcn"),
        ),
        # (the transpose's tensors are shared by several cached entries: any may be named)
        (_edit_csc, ".*", _input_gradient),
    ],
)
def test_a_derived_tensor_edited_in_place_is_refused(edit, name, call):
    # The tensors a Graph hands out are its cache: edited, later ops read them silently (a mean
    # aggregation 2.2 off).
    def graph():
        return Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]), 4)

    x = torch.randn(4, 3)
    expected = call(graph(), x)
    edited = graph()
    edit(edited)
    with pytest.raises(ValueError, match=rf"Graph's derived {name} was modified in place"):
        call(edited, x)
    used = graph()
    call(used, x)
    edit(used)  # what the op cached from it before is intact: the same result, or refused
    try:
        assert torch.equal(call(used, x), expected)
    except ValueError as error:
        assert "was modified in place" in str(error)
    cloned = graph()
    cloned.in_degree.clone().clamp_(min=5)  # a clone is the caller's own
    assert torch.equal(call(cloned, x), expected)


def test_an_unpickled_graph_s_ids_are_checked_where_they_are_read():
    # Unpickling checks sizes, not every source id (O(E) per DataLoader batch of blocks): an
    # id out of range is refused by the op that reads it.
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]), 4)
    state = graph.__getstate__()
    state["_col"] = torch.tensor([0, 1, 2, 3, 9])
    other = Graph.__new__(Graph)
    other.__setstate__(state)
    with pytest.raises(ValueError, match=r"col\[4\] = 9 lies outside \[0, 4\)"):
        aggregate(other, torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"col holds node ids in \[0, 9\]"):
        sample_nhop(other, torch.arange(4), 2, seed=0)
