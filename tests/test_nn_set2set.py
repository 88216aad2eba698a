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


def test_num_graphs_pads_trailing_empty_graphs():
    ours, _ = _pair()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = ours(x, torch.tensor([0, 0, 1]), num_graphs=4)
    assert out.shape == (4, 8)
    torch.testing.assert_close(out[:2], ours(x, torch.tensor([0, 0, 1])))
    assert torch.equal(out[2:, 4:], torch.zeros(2, 4, dtype=torch.float64))


def test_bad_inputs_raise_clear_errors():
    ours = Set2Set(4, 2)
    with pytest.raises(ValueError, match="x must be a"):
        ours(torch.randn(3, 5), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="batch must be a"):
        ours(torch.randn(3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="negative"):
        ours(torch.randn(2, 4), torch.tensor([0, -1]))
    with pytest.raises(ValueError, match="num_graphs"):
        ours(torch.randn(2, 4), torch.tensor([0, 3]), num_graphs=2)
    with pytest.raises(ValueError, match="processing_steps"):
        Set2Set(4, -1)
