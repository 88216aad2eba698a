import pytest
import torch
from graphs import awkward_graphs
from molecule_graphs import molecule_batch

from galfast import Graph
from galfast.nn import NNConv
from galfast.nn._graph_input import csr_from_coo
from galfast.nn.nn_conv import split_last_linear

pyg_nn = pytest.importorskip("torch_geometric.nn")
PyGNNConv = pyg_nn.NNConv


class _NotSequential(torch.nn.Module):
    """An edge network that does not end in a Linear: the materialising path."""

    def __init__(self, edge_dim, size):
        super().__init__()
        self.lin = torch.nn.Linear(edge_dim, size)

    def forward(self, edge_attr):
        return torch.tanh(self.lin(edge_attr))


def _edge_nn(kind, edge_dim, f_in, f_out):
    if kind == "sequential":
        return torch.nn.Sequential(
            torch.nn.Linear(edge_dim, 6), torch.nn.ReLU(), torch.nn.Linear(6, f_in * f_out)
        )
    if kind == "linear":
        return torch.nn.Linear(edge_dim, f_in * f_out)
    return _NotSequential(edge_dim, f_in * f_out)


def _graphs():
    out = {name: (ei, n) for name, (ei, n) in awkward_graphs().items() if name != "hub"}
    hub = torch.stack([torch.arange(1, 300), torch.zeros(299, dtype=torch.long)])
    out["hub"] = (torch.cat([hub, torch.tensor([[0, 5], [9, 6]])], 1), 300)
    out["bonds"] = molecule_batch(5, seed=1)[:2]
    out["complete"] = molecule_batch(3, seed=2, complete=True)[:2]
    return out


def _pair(kind, aggr, root_weight, bias, f_in=4, f_out=3, edge_dim=5, dtype=torch.float64):
    torch.manual_seed(0)
    ours = NNConv(f_in, f_out, _edge_nn(kind, edge_dim, f_in, f_out), aggr, root_weight, bias)
    ours = ours.to(dtype)
    if bias:
        torch.nn.init.normal_(ours.bias)  # zeros by default; a bug there would hide
    theirs = PyGNNConv(f_in, f_out, _edge_nn(kind, edge_dim, f_in, f_out), aggr, root_weight, bias)
    theirs = theirs.to(dtype)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    return ours, theirs


def _grads(module, out, x, edge_attr, grad):
    inputs = [x, edge_attr] + [p for _, p in sorted(module.named_parameters())]
    grads = torch.autograd.grad(out, inputs, grad, allow_unused=True)
    # an input no edge used (empty graphs) has no gradient: zero
    return [torch.zeros_like(i) if g is None else g for i, g in zip(inputs, grads)]


@pytest.mark.parametrize("name", list(_graphs()))
@pytest.mark.parametrize("kind", ["sequential", "linear", "other"])
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_matches_pyg_values_and_all_gradients(name, kind, aggr):
    edge_index, n = _graphs()[name]
    ours, theirs = _pair(kind, aggr, root_weight=True, bias=True)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(n, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(
        edge_index.size(1), 5, generator=gen, dtype=torch.float64, requires_grad=True
    )
    out = ours(x, edge_index, edge_attr)
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected)
    grad = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    for got, want in zip(
        _grads(ours, out, x, edge_attr, grad), _grads(theirs, expected, x, edge_attr, grad)
    ):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_root_weight_and_bias_options_match_pyg(root_weight, bias):
    edge_index, n, _, edge_attr = molecule_batch(4, seed=4)
    ours, theirs = _pair("sequential", "mean", root_weight, bias, dtype=torch.float32)
    x = torch.randn(n, 4)
    torch.testing.assert_close(ours(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr))


def test_state_dict_loads_strictly_both_ways():
    ours, theirs = _pair("sequential", "add", True, True)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    fresh = NNConv(4, 3, _edge_nn("sequential", 5, 4, 3)).double()
    fresh.load_state_dict(theirs.state_dict(), strict=True)
    for key, value in theirs.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value)


def test_graph_input_takes_edge_attr_in_csr_order():
    edge_index, n, _, edge_attr = molecule_batch(4, seed=5)
    ours, _ = _pair("sequential", "add", True, True, dtype=torch.float32)
    graph, order = csr_from_coo(edge_index[1], edge_index[0], n)
    x = torch.randn(n, 4)
    torch.testing.assert_close(ours(x, graph, edge_attr[order]), ours(x, edge_index, edge_attr))


def test_fused_path_builds_no_per_edge_matrix(monkeypatch):
    """A Sequential ending in Linear with add/mean never calls the layer's materialising path;
    another edge network does."""
    calls = []
    monkeypatch.setattr(NNConv, "_messages", lambda self, *a: calls.append(1) or 1 / 0)
    edge_index, n, _, edge_attr = molecule_batch(3, seed=6)
    conv = NNConv(4, 3, _edge_nn("sequential", 5, 4, 3), aggr="mean")
    conv(torch.randn(n, 4), edge_index, edge_attr)
    assert not calls
    assert split_last_linear(_edge_nn("other", 5, 4, 3)) is None


def test_materialising_path_chunks_edges(monkeypatch):
    """The fallback builds at most one chunk of per-edge matrices at a time and gives the same
    result for any chunk size."""
    import galfast.nn.nn_conv as nn_conv

    edge_index, n, _, edge_attr = molecule_batch(5, seed=7)
    conv = NNConv(4, 3, _edge_nn("other", 5, 4, 3), aggr="add").double()
    x = torch.randn(n, 4, dtype=torch.float64)
    edge_attr = edge_attr.double()
    whole = conv(x, edge_index, edge_attr)
    sizes = []
    original = NNConv._messages
    monkeypatch.setattr(
        NNConv, "_messages", lambda self, a, s: sizes.append(a.size(0)) or original(self, a, s)
    )
    monkeypatch.setattr(nn_conv, "_FALLBACK_CHUNK_BYTES", 4 * 3 * 8 * 7)
    torch.testing.assert_close(conv(x, edge_index, edge_attr), whole)
    assert max(sizes) == 7 and sum(sizes) == edge_index.size(1)


def test_bad_inputs_raise_clear_errors():
    conv = NNConv(4, 3, _edge_nn("sequential", 5, 4, 3))
    edge_index = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="one row per edge"):
        conv(torch.randn(2, 4), edge_index, torch.randn(3, 5))
    with pytest.raises(ValueError, match="x must be a"):
        conv(torch.randn(2, 5), edge_index, torch.randn(2, 5))
    with pytest.raises(ValueError, match="aggr must be one of"):
        NNConv(4, 3, _edge_nn("sequential", 5, 4, 3), aggr="min")
    with pytest.raises(ValueError, match="rows but the graph"):
        conv(torch.randn(3, 4), Graph.from_edge_index(edge_index, 2), torch.randn(2, 5))


def test_edge_features_the_edge_network_cannot_take_are_named_as_edge_attr():
    # The kernel's own message named its weight argument ([6, 4] against [3 * F_out, 5]).
    edge_index, x = torch.tensor([[0, 1], [1, 2]]), torch.randn(4, 3)
    conv = NNConv(3, 2, torch.nn.Linear(4, 6))
    with pytest.raises(ValueError, match=r"edge_attr has shape \[2, 5\], but nn's last layer"):
        conv(x, edge_index, torch.randn(2, 5))
    with pytest.raises(ValueError, match=r"edge_attr has shape \[2\], but"):
        conv(x, edge_index, torch.randn(2))
    one = NNConv(3, 2, torch.nn.Linear(1, 6))
    with pytest.raises(ValueError, match=r"one feature per edge: edge_attr.view\(-1, 1\)"):
        one(x, edge_index, torch.randn(2))
    deep = NNConv(3, 2, torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(7, 6)))
    with pytest.raises(ValueError, match=r"layers before its last give \[2, 8\]"):
        deep(x, edge_index, torch.randn(2, 4))


def _square_sum_grads(output, tensors):
    return torch.autograd.grad(output.square().sum(), tensors, allow_unused=True)


@pytest.mark.parametrize("kind", ["linear", "sequential", "callable"])
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("sources, destinations", [(7, 4), (3, 9)])
@pytest.mark.parametrize("with_dst", [True, False])
def test_two_node_sets_match_pyg(kind, aggr, sources, destinations, with_dst):
    """PyG's bipartite form: NNConv((in_src, in_dst), ...) on (x_src, x_dst), x_dst None
    dropping the root term; more destinations than sources too (the fused kernel runs on one
    padded node set)."""
    gen = torch.Generator().manual_seed(sources)
    edge_index = torch.stack(
        [
            torch.randint(0, sources, (20,), generator=gen),
            torch.randint(0, destinations, (20,), generator=gen),
        ]
    )
    edge_attr = torch.randn(20, 5, generator=gen, dtype=torch.float64)
    torch.manual_seed(0)
    theirs = pyg_nn.NNConv((4, 6), 3, _edge_nn(kind, 5, 4, 3), aggr=aggr).double()
    ours = NNConv((4, 6), 3, _edge_nn(kind, 5, 4, 3), aggr=aggr).double()
    ours.load_state_dict(theirs.state_dict())
    x_src = torch.randn(sources, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(destinations, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    x = (x_src, x_dst if with_dst else None)
    size = (sources, destinations)
    want, got = theirs(x, edge_index, edge_attr, size), ours(x, edge_index, edge_attr, size)
    torch.testing.assert_close(got, want)
    inputs = [x_src, x_dst, edge_attr.requires_grad_()]
    for a, b in zip(
        _square_sum_grads(got, [*inputs, *ours.parameters()]),
        _square_sum_grads(want, [*inputs, *theirs.parameters()]),
    ):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)
    assert repr(ours) == repr(theirs)


def test_two_node_sets_check_each_side():
    conv = NNConv((4, 6), 3, torch.nn.Linear(5, 12))
    edge_index, edge_attr = torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 5)
    with pytest.raises(ValueError, match="x_src"):
        conv((torch.randn(2, 6), torch.randn(2, 6)), edge_index, edge_attr)
    with pytest.raises(ValueError, match="x_dst"):
        conv((torch.randn(2, 4), torch.randn(2, 4)), edge_index, edge_attr)
    with pytest.raises(ValueError, match="source channels \\* out_channels = 12"):
        NNConv((4, 6), 3, torch.nn.Linear(5, 18))((torch.randn(2, 4), None), edge_index, edge_attr)


def test_pyg_forward_signature():
    """PyG's forward(x, edge_index, edge_attr=None, size=None): names and positions."""
    ours, theirs = _pair("sequential", "mean", True, True)
    edge_index, n, _, edge_attr = molecule_batch(3, seed=8)
    x, edge_attr = torch.randn(n, 4, dtype=torch.float64), edge_attr.double()
    want = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(x, edge_index=edge_index, edge_attr=edge_attr), want)
    torch.testing.assert_close(ours(x, edge_index, edge_attr, (n, n)), want)
    torch.testing.assert_close(ours(x, edge_index, edge_attr, size=(n, None)), want)
    with pytest.raises(ValueError, match="size gives num_src = 2"):
        ours(x, edge_index, edge_attr, (2, 2))
    with pytest.raises(ValueError, match="NNConv needs edge_attr"):
        ours(x, edge_index)


@pytest.mark.parametrize("layout", ["csr", "coo"])
@pytest.mark.parametrize("aggr", ["add", "max"])
def test_sparse_adjacency_matches_pyg(layout, aggr):
    """A torch.sparse adj_t: edge_attr follows its stored entries, its values are unused."""
    from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

    ours, theirs = _pair("sequential", aggr, True, True)
    edge_index, n, _, edge_attr = molecule_batch(3, seed=9)
    to_sparse = to_torch_csr_tensor if layout == "csr" else to_torch_coo_tensor
    adj_t = to_sparse(edge_index.flip(0), torch.rand(edge_index.size(1)), size=(n, n))
    rows, cols = adj_t.to_sparse_coo().indices()  # the stored order, both layouts
    stored = torch.stack([cols, rows])
    position = {tuple(e): i for i, e in enumerate(edge_index.t().tolist())}
    edge_attr = edge_attr.double()[[position[tuple(e)] for e in stored.t().tolist()]]
    x = torch.randn(n, 4, dtype=torch.float64)
    torch.testing.assert_close(ours(x, adj_t, edge_attr), theirs(x, adj_t, edge_attr))
    torch.testing.assert_close(ours(x, adj_t, edge_attr), ours(x, stored, edge_attr))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_no_edges_give_the_edge_network_zero_gradients_as_pyg(aggr):
    """With no edges PyG still runs the edge network (on none), so its parameters and
    edge_attr get zero gradients; galfast's max path left them None, which an optimizer's
    weight decay or momentum then skips."""
    edge_net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 8))
    conv = NNConv(4, 2, edge_net, aggr=aggr)
    x = torch.randn(3, 4)
    edge_attr = torch.zeros(0, 3, requires_grad=True)
    conv(x, torch.zeros(2, 0, dtype=torch.long), edge_attr).sum().backward()
    for name, parameter in conv.nn.named_parameters():
        assert parameter.grad is not None and not parameter.grad.any(), name
    assert edge_attr.grad is not None and edge_attr.grad.shape == (0, 3)
