"""PyG example workflows with galfast's layers swapped in (docs/pyg_compat.md): mini-batches
of sampled subgraphs as NeighborLoader yields them, HeteroConv, graph-level models on a
DataLoader's batches (PyG's mutag_gin.py and qm9_nn_conv.py models), training steps and the
Explainer's feature masks, each against the same model built on PyG's layers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from galfast import nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")
pyg_data = pytest.importorskip("torch_geometric.data")
pyg_loader = pytest.importorskip("torch_geometric.loader")


def _random_graph(gen: torch.Generator, nodes: int, edges: int, features: int):
    edge_index = torch.randint(0, nodes, (2, edges), generator=gen)
    return torch.randn(nodes, features, generator=gen), edge_index


def _sampled_batches(num_batches: int = 3, seeds: int = 8, fanouts=(4, 3)):
    """NeighborLoader's output, as pyg-lib builds it (not installed here): the seeds first in
    ``n_id``, then each hop's new nodes; a fresh local ``edge_index`` (neighbour -> node) per
    batch, so most nodes of the last hop have no incoming edge."""
    gen = torch.Generator().manual_seed(0)
    x, edge_index = _random_graph(gen, 120, 600, 12)
    batches = []
    for b in range(num_batches):
        n_id = list(range(b * seeds, (b + 1) * seeds))
        position = {v: i for i, v in enumerate(n_id)}
        frontier, src, dst = list(n_id), [], []
        for fanout in fanouts:
            reached = []
            for v in frontier:
                neighbours = edge_index[0, edge_index[1] == v]
                picked = neighbours[torch.randperm(neighbours.numel(), generator=gen)[:fanout]]
                for u in picked.tolist():
                    if u not in position:
                        position[u] = len(n_id)
                        n_id.append(u)
                        reached.append(u)
                    src.append(position[u])
                    dst.append(position[v])
            frontier = reached
        labels = torch.randint(0, 4, (seeds,), generator=gen)
        batches.append((x[n_id], torch.tensor([src, dst]), labels))
    return batches


class _TwoLayers(torch.nn.Module):
    def __init__(self, conv: type, hidden_mult: int = 1, **kwargs):
        super().__init__()
        self.conv1 = conv(12, 8, **kwargs)
        self.conv2 = conv(8 * hidden_mult, 4, **{**kwargs, **({"heads": 1} if kwargs else {})})

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def _twins(build):
    """The model on PyG's layers and on galfast's, with PyG's weights loaded both ways."""
    torch.manual_seed(0)
    theirs = build(pyg_nn)
    ours = build(gnn)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    return theirs, ours


def _train(model, batches, loss_of, steps: int):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss = loss_of(model, batches[step % len(batches)])
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


LAYERS = {
    "GCNConv": lambda m: _TwoLayers(m.GCNConv),
    "SAGEConv": lambda m: _TwoLayers(m.SAGEConv),
    "GATConv": lambda m: _TwoLayers(m.GATConv, hidden_mult=2, heads=2),
    "GINConv": lambda m: _TwoLayersGIN(m),
}


class _TwoLayersGIN(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.conv1 = m.GINConv(torch.nn.Linear(12, 8), train_eps=True)
        self.conv2 = m.GINConv(torch.nn.Linear(8, 4))

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_sampled_subgraph_batches_train_as_pyg(layer):
    # reddit.py's loop: one fresh edge_index per batch, loss on the seeds only.
    batches = _sampled_batches()
    theirs, ours = _twins(LAYERS[layer])
    for x, edge_index, _ in batches:
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))

    def loss_of(model, batch):
        x, edge_index, labels = batch
        return F.cross_entropy(model(x, edge_index)[: labels.numel()], labels)

    torch.testing.assert_close(
        _train(ours, batches, loss_of, 6), _train(theirs, batches, loss_of, 6)
    )


def test_hetero_conv_of_galfast_layers_equals_pyg():
    # hetero_conv_dblp.py's HeteroConv: one galfast layer per edge type, lazy channels.
    gen = torch.Generator().manual_seed(1)
    data = pyg_data.HeteroData()
    data["paper"].x = torch.randn(30, 8, generator=gen)
    data["author"].x = torch.randn(20, 6, generator=gen)
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 30, (2, 80), generator=gen)
    writes = torch.stack(
        [torch.randint(0, 20, (60,), generator=gen), torch.randint(0, 30, (60,), generator=gen)]
    )
    data["author", "writes", "paper"].edge_index = writes
    data["paper", "rev_writes", "author"].edge_index = writes.flip(0)

    def build(m):
        convs = {
            ("paper", "cites", "paper"): m.GCNConv(-1, 16),
            ("author", "writes", "paper"): m.SAGEConv((-1, -1), 16),
            ("paper", "rev_writes", "author"): m.GATConv((-1, -1), 16, add_self_loops=False),
        }
        conv = pyg_nn.HeteroConv(convs, aggr="sum")
        with torch.no_grad():
            conv(data.x_dict, data.edge_index_dict)  # sizes the lazy weights
        return conv

    theirs, ours = _twins(build)
    expected = theirs(data.x_dict, data.edge_index_dict)
    got = ours(data.x_dict, data.edge_index_dict)
    assert got.keys() == expected.keys()
    for node_type in expected:
        torch.testing.assert_close(got[node_type], expected[node_type])


def _graph_batches(edge_dim=None):
    gen = torch.Generator().manual_seed(2)
    graphs = []
    for _ in range(24):
        nodes = int(torch.randint(4, 12, (1,), generator=gen))
        x, edge_index = _random_graph(gen, nodes, 3 * nodes, 7)
        edge_attr = None if edge_dim is None else torch.rand(3 * nodes, edge_dim, generator=gen)
        y = torch.randint(0, 2, (1,), generator=gen)
        graphs.append(pyg_data.Data(x=x, edge_index=edge_index, edge_attr=edge_attr, y=y))
    return list(pyg_loader.DataLoader(graphs, batch_size=8))


class _MutagGIN(torch.nn.Module):
    """mutag_gin.py's model: GINConv on PyG's MLP, then global_add_pool."""

    def __init__(self, m):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            [m.GINConv(nn=pyg_nn.MLP([c, 16, 16]), train_eps=False) for c in (7, 16)]
        )
        self.mlp = pyg_nn.MLP([16, 16, 2], norm=None, dropout=0.5)

    def forward(self, data):
        x = data.x
        for conv in self.convs:
            x = conv(x, data.edge_index).relu()
        return self.mlp(pyg_nn.global_add_pool(x, data.batch, size=data.num_graphs))


class _QM9NNConv(torch.nn.Module):
    """qm9_nn_conv.py's model: NNConv (mean) with a GRU, then Set2Set."""

    def __init__(self, m, dim=8):
        super().__init__()
        self.lin0 = torch.nn.Linear(7, dim)
        edge_net = torch.nn.Sequential(
            torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, dim * dim)
        )
        self.conv = m.NNConv(dim, dim, edge_net, aggr="mean")
        self.gru = torch.nn.GRU(dim, dim)
        self.set2set = m.Set2Set(dim, processing_steps=3)
        self.lin1 = torch.nn.Linear(2 * dim, 2)

    def forward(self, data):
        out = F.relu(self.lin0(data.x))
        h = out.unsqueeze(0)
        for _ in range(3):
            m = F.relu(self.conv(out, data.edge_index, data.edge_attr))
            out, h = self.gru(m.unsqueeze(0), h)
            out = out.squeeze(0)
        return self.lin1(self.set2set(out, data.batch))


@pytest.mark.parametrize(
    ("model", "edge_dim"), [(_MutagGIN, None), (_QM9NNConv, 5)], ids=["mutag_gin", "qm9_nn_conv"]
)
def test_graph_level_examples_train_as_pyg(model, edge_dim):
    batches = _graph_batches(edge_dim)
    theirs, ours = _twins(model)

    def loss_of(net, batch):
        return F.cross_entropy(net(batch), batch.y)

    theirs.eval()
    ours.eval()
    for batch in batches:
        torch.testing.assert_close(ours(batch), theirs(batch))
    ours.train()
    theirs.train()
    torch.manual_seed(5)  # the MLP's dropout draws the same masks in both runs
    expected = _train(theirs, batches, loss_of, 5)
    torch.manual_seed(5)
    torch.testing.assert_close(_train(ours, batches, loss_of, 5), expected)


def test_explainer_feature_masks_of_a_galfast_model_equal_pyg():
    # GNNExplainer with node_mask_type="attributes" needs only gradients through x.
    explain = pytest.importorskip("torch_geometric.explain")
    gen = torch.Generator().manual_seed(3)
    x, edge_index = _random_graph(gen, 40, 160, 12)
    masks = []
    for model in _twins(LAYERS["GCNConv"]):
        explainer = explain.Explainer(
            model,
            explain.GNNExplainer(epochs=10),
            explanation_type="model",
            node_mask_type="attributes",
            edge_mask_type=None,
            model_config=dict(
                mode="multiclass_classification", task_level="node", return_type="raw"
            ),
        )
        torch.manual_seed(4)  # the mask's random initialisation
        masks.append(explainer(x, edge_index, index=3).node_mask)
    torch.testing.assert_close(masks[1], masks[0], atol=1e-5, rtol=1e-4)
