"""GraphBatches over a graph collection (MoleculeDataset): seeded epochs, every molecule once
per epoch, edge features aligned with the merged graph, and a graph-level GAL epoch with a
continuous sensitive attribute (QM9's alpha)."""

import pytest
import torch
from qm9_fixture import write_canonical
from test_datasets_molecules import _random_molecules
from torch import nn

from galfast.datasets import complete_graph, qm9
from galfast.gal import SensitiveAttribute
from galfast.train import GALTrainer, GraphBatches, GraphHead, regression_loss


def _epoch(batches):
    return [b.ids.tolist() for b in batches]


def test_seeded_epochs_are_reproducible_and_cover_each_molecule_once():
    ds = _random_molecules(count=300, seed=1)
    index = torch.arange(20, 300)
    first = GraphBatches(ds, ds.y[:, 0], batch_size=128, index=index, seed=7)
    again = GraphBatches(ds, ds.y[:, 0], batch_size=128, index=index, seed=7)
    epochs = [_epoch(first) for _ in range(3)]
    assert epochs == [_epoch(again) for _ in range(3)]
    for ids in epochs:
        assert [len(b) for b in ids] == [128, 128, 24] and len(first) == 3
        assert sorted(i for b in ids for i in b) == list(range(20, 300))
    assert epochs[0] != epochs[1]  # a new order every epoch
    again.set_epoch(1)
    assert _epoch(again) == epochs[1]
    other = GraphBatches(ds, ds.y[:, 0], batch_size=128, index=index, seed=8)
    assert _epoch(other) != epochs[0]


def test_batches_carry_targets_ids_and_aligned_edge_features():
    ds = _random_molecules(count=40, seed=2)
    y = torch.randn(40)
    batches = GraphBatches(ds, y, batch_size=16, shuffle=False, transform=complete_graph)
    for batch in batches:
        reference = complete_graph(ds.batch(batch.ids))
        assert torch.equal(batch.y, y[batch.ids]) and torch.equal(batch.x, reference.x)
        assert torch.equal(batch.edge_attr, reference.edge_attr)
        assert torch.equal(batch.graph.col, reference.edge_index[0])
        assert torch.equal(batch.graph.row, reference.edge_index[1])


def test_encoders_get_edge_features_by_keyword():
    ds = _random_molecules(count=5)
    seen = {}

    class Encoder(nn.Module):
        def forward(self, x, graph, batch, edge_attr):
            seen["edges"] = (edge_attr.shape[0], graph.num_edges)
            return torch.zeros(int(batch.max()) + 1, 2)

    batch = next(iter(GraphBatches(ds, ds.y, shuffle=False)))
    z, ids = batch.encode(Encoder())
    assert z.shape == (5, 2) and ids.tolist() == list(range(5))
    assert seen["edges"] == (ds.edge_index.size(1),) * 2


def test_bad_arguments_are_refused():
    ds = _random_molecules(count=5)
    with pytest.raises(ValueError, match="rows"):
        GraphBatches(ds, torch.zeros(4))
    with pytest.raises(ValueError, match="outside"):
        GraphBatches(ds, torch.zeros(5), index=torch.tensor([5]))
    for seed in (1.5, -1, 2**64):  # -1 drew seed 2**64 - 1's orders, 2**64 seed 0's
        with pytest.raises(
            ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"
        ):
            GraphBatches(ds, torch.zeros(5), seed=seed)
    with pytest.raises(ValueError, match="collections"):
        GraphBatches([], torch.zeros(0), transform=complete_graph)


class _MeanPoolEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.atoms = nn.Linear(11, 8)
        self.edges = nn.Linear(5, 8)

    def forward(self, x, graph, batch, edge_attr):
        h = self.atoms(x)
        h = h.index_add(0, graph.row, self.edges(edge_attr))
        return torch.zeros(int(batch.max()) + 1, 8).index_add(0, batch, h)


def test_graph_level_gal_epoch_on_qm9_with_continuous_alpha(tmp_path):
    ds = qm9(write_canonical(tmp_path), source="canonical", download=False)
    alpha = SensitiveAttribute("alpha", "continuous", ds.attributes["alpha"])
    attacker = nn.Linear(8, 1)
    before = attacker.weight.detach().clone()
    trainer = GALTrainer(
        _MeanPoolEncoder(),
        GraphHead(nn.Linear(8, 1)),
        attacker,
        task_loss=regression_loss,
        lam=0.5,
    )
    batches = GraphBatches(ds, ds.target("mu"), batch_size=4, transform=complete_graph)
    history = trainer.fit(None, batches, alpha, epochs=1, progress=False)
    assert history[-1]["pairs/alpha"] == len(ds)
    assert not torch.equal(before, attacker.weight)
