"""galfast.models.MPNN against the same model built from PyG's layers (PyG's
examples/qm9_nn_conv.py Net) with the same weights."""

import pytest
import torch
import torch.nn.functional as F
from molecule_graphs import molecule_batch

from galfast.models import MPNN

pyg_nn = pytest.importorskip("torch_geometric.nn")


class PyGNet(torch.nn.Module):
    """PyG's qm9_nn_conv example model, parameterised as MPNN."""

    def __init__(self, in_channels, dim, out_channels):
        super().__init__()
        self.lin0 = torch.nn.Linear(in_channels, dim)
        edge_nn = torch.nn.Sequential(
            torch.nn.Linear(5, 128), torch.nn.ReLU(), torch.nn.Linear(128, dim * dim)
        )
        self.conv = pyg_nn.NNConv(dim, dim, edge_nn, aggr="mean")
        self.gru = torch.nn.GRU(dim, dim)
        self.set2set = pyg_nn.Set2Set(dim, processing_steps=3)
        self.lin1 = torch.nn.Linear(2 * dim, dim)
        self.lin2 = torch.nn.Linear(dim, out_channels)

    def forward(self, x, edge_index, edge_attr, batch):
        out = F.relu(self.lin0(x))
        h = out.unsqueeze(0)
        for _ in range(3):
            m = F.relu(self.conv(out, edge_index, edge_attr))
            out, h = self.gru(m.unsqueeze(0), h)
            out = out.squeeze(0)
        out = self.set2set(out, batch)
        return self.lin2(F.relu(self.lin1(out)))


@pytest.mark.parametrize("complete", [False, True])
def test_matches_pyg_model_outputs_and_gradients(complete):
    edge_index, n, batch, edge_attr = molecule_batch(6, seed=3, complete=complete)
    torch.manual_seed(0)
    ours = MPNN(in_channels=11, dim=8, out_channels=2).double()
    theirs = PyGNet(11, 8, 2).double()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x = torch.randn(n, 11, dtype=torch.float64, requires_grad=True)
    edge_attr = edge_attr.double()
    out, z = ours(x, edge_index, edge_attr, batch, return_embedding=True)
    expected = theirs(x, edge_index, edge_attr, batch)
    torch.testing.assert_close(out, expected)
    assert z.shape == (6, 8)
    torch.testing.assert_close(ours.lin2(z), out)
    grad = torch.randn_like(out)
    names = sorted(dict(ours.named_parameters()))
    got = torch.autograd.grad(out, [x, *(dict(ours.named_parameters())[k] for k in names)], grad)
    want = torch.autograd.grad(
        expected, [x, *(dict(theirs.named_parameters())[k] for k in names)], grad
    )
    for name, a, b in zip(["x", *names], got, want):
        torch.testing.assert_close(a, b, msg=name)


def test_bad_edge_attr_raises():
    edge_index, n, batch, edge_attr = molecule_batch(2, seed=4)
    model = MPNN(in_channels=3, dim=4)
    with pytest.raises(ValueError, match="one row per edge"):
        model(torch.randn(n, 3), edge_index, edge_attr[:-1], batch)


def test_graph_input_equals_edge_index_input():
    from galfast.nn._graph_input import csr_from_coo

    edge_index, n, batch, edge_attr = molecule_batch(4, seed=5)
    model = MPNN(in_channels=3, dim=6).double()
    x, edge_attr = torch.randn(n, 3, dtype=torch.float64), edge_attr.double()
    graph, order = csr_from_coo(edge_index[1], edge_index[0], n)
    torch.testing.assert_close(
        model(x, graph, edge_attr[order], batch), model(x, edge_index, edge_attr, batch)
    )


def test_readout_is_pygs_set2set_output_and_embed_continues_it():
    edge_index, n, batch, edge_attr = molecule_batch(5, seed=6, complete=True)
    torch.manual_seed(1)
    ours = MPNN(in_channels=11, dim=8).double()
    theirs = PyGNet(11, 8, 1).double()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    x, edge_attr = torch.randn(n, 11, dtype=torch.float64), edge_attr.double()
    out = F.relu(theirs.lin0(x))
    h = out.unsqueeze(0)
    for _ in range(3):
        out, h = theirs.gru(F.relu(theirs.conv(out, edge_index, edge_attr)).unsqueeze(0), h)
        out = out.squeeze(0)
    expected = theirs.set2set(out, batch)
    readout = ours.readout(x, edge_index, edge_attr, batch)
    assert readout.shape == (5, 16)
    torch.testing.assert_close(readout, expected)
    embedding = ours.embed(x, edge_index, edge_attr, batch)
    torch.testing.assert_close(embedding, F.relu(ours.lin1(readout)))
