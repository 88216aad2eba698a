import pytest
import torch

from galfast.nn import Set2Set

pyg_nn = pytest.importorskip("torch_geometric.nn")
PyGSet2Set = pyg_nn.Set2Set


def _pair(in_channels=4, steps=3, **kwargs):
    torch.manual_seed(0)
    ours = Set2Set(in_channels, steps, **kwargs).double()
    theirs = PyGSet2Set(in_channels, steps, **kwargs).double()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    return ours, theirs


@pytest.mark.parametrize(
    "batch",
    [
        torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2]),
        torch.tensor([0, 0, 2, 2, 2, 3]),  # graph 1 has no nodes
        torch.tensor([1, 0, 1, 0, 1, 1, 0, 0, 2]),  # unsorted
        torch.zeros(40, dtype=torch.long),  # one big graph
    ],
)
@pytest.mark.parametrize("num_layers", [1, 2])
def test_matches_pyg_values_and_all_gradients(batch, num_layers):
    ours, theirs = _pair(num_layers=num_layers)
    x = torch.randn(batch.numel(), 4, dtype=torch.float64, requires_grad=True) * 3
    num_graphs = int(batch.max()) + 1
    out = ours(x, batch)
    expected = theirs(x, batch, dim_size=num_graphs)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    params = lambda m: [p for _, p in sorted(m.named_parameters())]  # noqa: E731
    got = torch.autograd.grad(out, [x, *params(ours)], grad)
    want = torch.autograd.grad(expected, [x, *params(theirs)], grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_state_dict_is_pygs_and_loads_both_ways():
    ours, theirs = _pair()
    assert set(ours.state_dict()) == set(theirs.state_dict())
    fresh = Set2Set(4, 3).double()
    fresh.load_state_dict(theirs.state_dict(), strict=True)
    theirs.load_state_dict(fresh.state_dict(), strict=True)


def test_dim_size_pads_trailing_empty_graphs():
    ours, _ = _pair()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = ours(x, torch.tensor([0, 0, 1]), dim_size=4)
    assert out.shape == (4, 8)
    torch.testing.assert_close(out[:2], ours(x, torch.tensor([0, 0, 1])))
    assert torch.equal(out[2:, 4:], torch.zeros(2, 4, dtype=torch.float64))


def test_bad_inputs_raise_clear_errors():
    ours = Set2Set(4, 2)
    with pytest.raises(ValueError, match="x must be a"):
        ours(torch.randn(3, 5), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="index must be a"):
        ours(torch.randn(3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="negative"):
        ours(torch.randn(2, 4), torch.tensor([0, -1]))
    with pytest.raises(ValueError, match="dim_size"):
        ours(torch.randn(2, 4), torch.tensor([0, 3]), dim_size=2)
    with pytest.raises(ValueError, match="ptr holds 2 graphs"):
        ours(torch.randn(2, 4), ptr=torch.tensor([0, 1, 2]), dim_size=3)
    with pytest.raises(ValueError, match="ptr must rise from 0"):
        ours(torch.randn(2, 4), ptr=torch.tensor([0, 1, 3]))
    with pytest.raises(ValueError, match="dim -2"):
        ours(torch.randn(2, 4), dim=1)
    with pytest.raises(ValueError, match="processing_steps"):
        Set2Set(4, -1)


def test_pyg_forward_signature():
    """PyG's forward(x, index=None, ptr=None, dim_size=None, dim=-2): no index is one graph,
    index and dim_size by keyword, ptr third positional, dim 0 or -2."""
    ours, theirs = _pair()
    x = torch.randn(7, 4, dtype=torch.float64)
    index = torch.tensor([0, 0, 1, 1, 1, 3, 3])
    ptr = torch.tensor([0, 2, 5, 5, 7])
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours(x, index=index), theirs(x, index=index))
    want = theirs(x, index, dim_size=6)
    assert want.shape == (6, 8)
    torch.testing.assert_close(ours(x, index=index, dim_size=6), want)
    torch.testing.assert_close(ours(x, index, ptr), theirs(x, index, ptr))
    torch.testing.assert_close(ours(x, index, dim=0), theirs(x, index, dim=0))
    # ptr alone (PyG also asks for index) gives the same graphs.
    torch.testing.assert_close(ours(x, ptr=ptr), theirs(x, index, ptr))
    # Nothing at all: one graph, also when it has no nodes (then no graph, as PyG).
    empty = x[:0]
    assert ours(empty).shape == theirs(empty).shape == (0, 8)
