"""galfast's layers under the PyTorch machinery users combine them with: torch.compile with
fullgraph=True, torch.export, and CPU autocast (bfloat16), against eager galfast and PyG."""

from __future__ import annotations

import copy

import pytest
import torch

import galfast.models as gm
import galfast.nn as gnn
from galfast.graph import Graph

pyg_nn = pytest.importorskip("torch_geometric.nn")

NUM_NODES = 20


def _graph(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, NUM_NODES, (2, 60), generator=gen)
    x = torch.randn(NUM_NODES, 8, generator=gen)
    return x, edge_index


def _fullgraph(module: torch.nn.Module) -> torch.nn.Module:
    torch._dynamo.reset()
    # The eager backend traces as inductor would (same graph breaks) without generating code.
    return torch.compile(copy.deepcopy(module), fullgraph=True, backend="eager")


def test_chebconv_compiles_fullgraph_and_exports():
    torch.manual_seed(0)
    x, edge_index = _graph()
    conv = gnn.ChebConv(8, 16, K=3)
    expected = conv(x, edge_index)
    torch.testing.assert_close(_fullgraph(conv)(x, edge_index), expected)
    exported = torch.export.export(copy.deepcopy(conv), (x, edge_index))
    torch.testing.assert_close(exported.module()(x, edge_index), expected)


# torch's own LSTM warns that export assigns its _flat_weights (PyG's Set2Set warns alike).
@pytest.mark.filterwarnings("ignore:The tensor attributes self.lstm:UserWarning")
def test_set2set_exports_with_dim_size():
    torch.manual_seed(0)
    x = torch.randn(10, 4)
    index = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    readout = gnn.Set2Set(4, processing_steps=3)
    reference = pyg_nn.aggr.Set2Set(4, 3)
    readout.load_state_dict(reference.state_dict())
    exported = torch.export.export(copy.deepcopy(readout), (x, index), {"dim_size": 3})
    out = exported.module()(x, index, dim_size=3)
    torch.testing.assert_close(out, reference(x, index, dim_size=3))


def test_compgcnconv_compiles_fullgraph_and_still_checks_edge_types():
    torch.manual_seed(0)
    x, edge_index = _graph()
    x = x[:, :4]
    edge_type = torch.randint(0, 2, (edge_index.size(1),))
    rel = torch.randn(4, 4)
    conv = gnn.CompGCNConv(4, 6, num_relations=2, dropout=0.0)
    expected = conv(x, edge_index, edge_type, rel)
    compiled = _fullgraph(conv)
    out = compiled(x, edge_index, edge_type, rel)
    torch.testing.assert_close(out[0], expected[0])
    torch.testing.assert_close(out[1], expected[1])
    # A relation id in [R, 2R) names an inverse relation: refused under compile as eagerly.
    bad = edge_type.clone()
    bad[3] = 3
    with pytest.raises(RuntimeError, match="edge_type must lie in"):
        compiled(x, edge_index, bad, rel)


@pytest.mark.parametrize(
    "name, channels, bf16_input",
    [
        ("gcn", (8, 8), False),  # lin first: a bfloat16 [N, 8] reaches the aggregation
        ("gcn", (8, 4), True),
        ("sage", (8, 4), False),
        ("sage", (8, 8), True),
        ("gin", (8, 8), True),
        ("cheb", (8, 8), True),
    ],
)
def test_layers_run_under_cpu_bfloat16_autocast_as_pyg(name, channels, bf16_input):
    torch.manual_seed(0)
    x, edge_index = _graph()
    f_in, f_out = channels
    pairs = {
        "gcn": lambda: (gnn.GCNConv(f_in, f_out), pyg_nn.GCNConv(f_in, f_out)),
        "sage": lambda: (gnn.SAGEConv(f_in, f_out), pyg_nn.SAGEConv(f_in, f_out)),
        "gin": lambda: (
            gnn.GINConv(torch.nn.Linear(f_in, f_out)),
            pyg_nn.GINConv(torch.nn.Linear(f_in, f_out)),
        ),
        "cheb": lambda: (gnn.ChebConv(f_in, f_out, K=2), pyg_nn.ChebConv(f_in, f_out, K=2)),
    }
    ours, reference = pairs[name]()
    ours.load_state_dict(reference.state_dict())
    if bf16_input:
        x = x.bfloat16()
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ours(x_ours, edge_index)
        expected = reference(x_ref, edge_index)
    torch.testing.assert_close(out.float(), expected.float(), atol=0.05, rtol=0.05)
    out.float().sum().backward()
    expected.float().sum().backward()
    assert x_ours.grad.dtype == x.dtype
    torch.testing.assert_close(x_ours.grad.float(), x_ref.grad.float(), atol=0.05, rtol=0.05)


def test_embedding_encoder_names_an_edge_index_passed_as_its_graph():
    _, edge_index = _graph()
    encoder = gm.EmbeddingEncoder(NUM_NODES, 8, convs=[gnn.GCNConv(8, 8)])
    ids = torch.arange(NUM_NODES)
    with pytest.raises(TypeError, match="graph must be a galfast.Graph"):
        encoder(ids, edge_index)
    graph = Graph.from_edge_index(edge_index, num_nodes=NUM_NODES)
    assert encoder(ids, graph).shape == (NUM_NODES, 8)
