"""MoleculeDataset batching, complete graphs with distances (against PyG's Batch and its QM9
example's Complete + Distance), the paper's split and target statistics."""

import copy

import pytest
import torch
from qm9_fixture import write_canonical

from galfast.datasets import (
    MoleculeDataset,
    complete_graph,
    paper_split,
    qm9,
    target_statistics,
    with_distance,
)


def _random_molecules(count=7, seed=0):
    """Random molecules (1 to 6 atoms, random bonds, no self loops) as a MoleculeDataset."""
    gen = torch.Generator().manual_seed(seed)
    xs, zs, pos, edges, attrs, node_ptr, edge_ptr = [], [], [], [], [], [0], [0]
    for _ in range(count):
        n = int(torch.randint(1, 7, (1,), generator=gen))
        pairs = [(i, j) for i in range(n) for j in range(n) if i < j]
        chosen = [p for p in pairs if torch.rand(1, generator=gen) < 0.5]
        both = sorted(
            {(s, t) for i, j in chosen for s, t in ((i, j), (j, i))}, key=lambda e: e[::-1]
        )
        kind = {p: int(torch.randint(4, (1,), generator=gen)) for p in chosen}
        xs.append(torch.randn(n, 11, generator=gen))
        zs.append(torch.randint(1, 10, (n,), generator=gen))
        pos.append(torch.randn(n, 3, generator=gen))
        edges.append(torch.tensor(both, dtype=torch.long).view(-1, 2).t())
        attrs.append(
            torch.nn.functional.one_hot(
                torch.tensor([kind[(min(s, t), max(s, t))] for s, t in both], dtype=torch.long),
                4,
            ).float()
        )
        node_ptr.append(node_ptr[-1] + n)
        edge_ptr.append(edge_ptr[-1] + len(both))
    y = torch.randn(count, 2, generator=gen)
    return MoleculeDataset(
        name="random",
        x=torch.cat(xs),
        z=torch.cat(zs),
        pos=torch.cat(pos),
        edge_index=torch.cat(edges, 1),
        edge_attr=torch.cat(attrs).view(-1, 4),
        node_ptr=torch.tensor(node_ptr),
        edge_ptr=torch.tensor(edge_ptr),
        y=y,
        target_names=("a", "b"),
        target_units=("", ""),
        ids=torch.arange(count),
        attributes={"b": y[:, 1].clone()},
        license="",
    )


def _pyg_data(ds, g, transform=None):
    data_mod = pytest.importorskip("torch_geometric.data")
    atoms = slice(int(ds.node_ptr[g]), int(ds.node_ptr[g + 1]))
    edges = slice(int(ds.edge_ptr[g]), int(ds.edge_ptr[g + 1]))
    data = data_mod.Data(
        x=ds.x[atoms], pos=ds.pos[atoms], edge_index=ds.edge_index[:, edges],
        edge_attr=ds.edge_attr[edges], y=ds.y[g : g + 1],
    )  # fmt: skip
    return data if transform is None else transform(data)


def _edge_table(edge_index, edge_attr):
    """Edges as sorted (target, source, *features) rows: comparable across edge orders."""
    rows = torch.cat([edge_index.flip(0).t().double(), edge_attr.double()], 1).tolist()
    return sorted(rows)


def test_batch_matches_pyg_batch_and_its_graph_is_in_edge_order():
    batch_mod = pytest.importorskip("torch_geometric.data")
    ds = _random_molecules()
    ids = [5, 0, 3, 3, 6]
    ours = ds.batch(torch.tensor(ids))
    theirs = batch_mod.Batch.from_data_list([_pyg_data(ds, g) for g in ids])
    assert torch.equal(ours.x, theirs.x) and torch.equal(ours.batch, theirs.batch)
    assert torch.equal(ours.pos, theirs.pos) and torch.equal(ours.y, theirs.y)
    assert ours.ids.tolist() == ids and ours.num_graphs == 5
    assert _edge_table(ours.edge_index, ours.edge_attr) == _edge_table(
        theirs.edge_index, theirs.edge_attr
    )
    # Row k of edge_attr belongs to CSR edge k of the graph: (graph.row[k], graph.col[k]).
    assert torch.equal(ours.graph.col, ours.edge_index[0])
    assert torch.equal(ours.graph.row, ours.edge_index[1])


def test_complete_graph_matches_pyg_example_transform():
    transforms = pytest.importorskip("torch_geometric.transforms")
    from torch_geometric.utils import remove_self_loops

    def pyg_complete(data):  # examples/qm9_nn_conv.py's Complete, then Distance(norm=False)
        data = copy.copy(data)
        n = data.num_nodes
        row = torch.arange(n).view(-1, 1).repeat(1, n).view(-1)
        col = torch.arange(n).repeat(n)
        attr = data.edge_attr.new_zeros(n * n, data.edge_attr.size(1))
        attr[data.edge_index[0] * n + data.edge_index[1]] = data.edge_attr
        data.edge_index, data.edge_attr = remove_self_loops(torch.stack([row, col]), attr)
        return transforms.Distance(norm=False)(data)

    from torch_geometric.data import Batch

    ds = _random_molecules(count=9, seed=3)
    ids = list(range(9))
    ours = complete_graph(ds.batch(torch.tensor(ids)))
    theirs = Batch.from_data_list([_pyg_data(ds, g, pyg_complete) for g in ids])
    assert ours.edge_attr.shape == theirs.edge_attr.shape and ours.edge_attr.size(1) == 5
    mine, pyg = (
        _edge_table(ours.edge_index, ours.edge_attr),
        _edge_table(theirs.edge_index, theirs.edge_attr),
    )
    assert [r[:6] for r in mine] == [r[:6] for r in pyg]
    assert [r[6] for r in mine] == pytest.approx([r[6] for r in pyg], abs=1e-6)
    assert torch.equal(ours.graph.col, ours.edge_index[0])
    bare = complete_graph(ds.batch(torch.tensor(ids)), distance=False)
    assert torch.equal(bare.edge_attr, ours.edge_attr[:, :4])


def test_with_distance_appends_the_bond_lengths(tmp_path):
    ds = qm9(write_canonical(tmp_path), source="canonical", download=False)
    methane = with_distance(ds.batch([0]))
    # C-H bonds of methane: about 1.09 A.
    assert methane.edge_attr.shape == (8, 5)
    assert methane.edge_attr[:, 4].tolist() == pytest.approx([1.0919] * 8, abs=2e-3)


def test_batch_rejects_out_of_range_indices():
    ds = _random_molecules()
    with pytest.raises(IndexError, match="out of range"):
        ds.batch([7])
    assert ds.batch([-1]).ids.tolist() == [6]


def test_dataset_checks_its_arrays():
    ds = _random_molecules()
    fields = {f: getattr(ds, f) for f in ds.__dataclass_fields__}
    bad = dict(fields, edge_index=ds.edge_index + 10)
    with pytest.raises(ValueError, match="outside its molecule"):
        MoleculeDataset(**bad)
    with pytest.raises(ValueError, match="node_ptr"):
        MoleculeDataset(**dict(fields, node_ptr=ds.node_ptr[:-1]))
    with pytest.raises(ValueError, match="attribute 'b'"):
        MoleculeDataset(**dict(fields, attributes={"b": torch.zeros(3)}))


def test_paper_split_first_10k_test_next_10k_validation():
    train, val, test = paper_split(130_831)
    assert test.tolist() == list(range(10_000))
    assert val.tolist() == list(range(10_000, 20_000))
    assert train[0] == 20_000 and train.numel() == 110_831
    a, b = (
        paper_split(1000, num_test=100, num_val=100, seed=1),
        paper_split(1000, num_test=100, num_val=100, seed=1),
    )
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert sorted(torch.cat(a).tolist()) == list(range(1000)) and a[2].tolist() != list(range(100))
    with pytest.raises(ValueError, match="leave a training set"):
        paper_split(100, num_test=60, num_val=50)


def test_target_statistics_use_the_given_rows_only():
    y = torch.tensor([[1.0], [3.0], [100.0]])
    mean, std = target_statistics(y, torch.tensor([0, 1]))
    assert mean.tolist() == [2.0] and std.tolist() == pytest.approx([2**0.5])
    with pytest.raises(ValueError, match="two molecules"):
        target_statistics(y, torch.tensor([0]))
