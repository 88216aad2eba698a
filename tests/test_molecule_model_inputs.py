"""Bad inputs to MoleculeDataset.batch, MPNN and EmbeddingEncoder raise a clear ValueError or
TypeError, never give silently wrong numbers or raw torch errors."""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from galfast import Graph
from galfast.datasets import MoleculeDataset
from galfast.models import MPNN, EmbeddingEncoder
from galfast.nn import GCNConv


def _dataset() -> MoleculeDataset:
    """Two molecules: 2 atoms with one bond (both directions), then 3 atoms without bonds."""
    return MoleculeDataset(
        name="m",
        x=torch.randn(5, 2),
        z=torch.ones(5, dtype=torch.long),
        pos=torch.zeros(5, 3),
        edge_index=torch.tensor([[1, 0], [0, 1]]),
        edge_attr=torch.randn(2, 1),
        node_ptr=torch.tensor([0, 2, 5]),
        edge_ptr=torch.tensor([0, 2, 2]),
        y=torch.randn(2, 1),
        target_names=("a",),
        target_units=("u",),
        ids=torch.tensor([1, 2]),
        attributes={},
        license="",
    )


# ------------------------------------------------------------------ MoleculeDataset.batch
@pytest.mark.parametrize("indices", [[0.9], torch.tensor([0.0]), torch.tensor([1.0, 0.0])])
def test_batch_refuses_float_indices(indices):
    with pytest.raises(TypeError, match="integers"):
        _dataset().batch(indices)


def test_batch_reads_a_bool_mask_as_a_mask():
    ds = _dataset()
    assert ds.batch(torch.tensor([False, True])).ids.tolist() == [1]
    assert ds.batch([True, True]).ids.tolist() == [0, 1]
    assert ds.batch(torch.tensor([False, False])).num_graphs == 0
    with pytest.raises(ValueError, match="2 entries"):
        ds.batch(torch.tensor([True]))
    with pytest.raises(ValueError, match="2 entries"):
        ds.batch(torch.tensor([[True, False]]))


def test_batch_still_takes_integer_indices():
    ds = _dataset()
    assert ds.batch([1, 0]).ids.tolist() == [1, 0]
    assert ds.batch(torch.tensor([1], dtype=torch.int32)).ids.tolist() == [1]
    assert ds.batch(1).ids.tolist() == [1]
    assert ds.batch([]).num_graphs == 0
    assert ds.batch(torch.tensor([[1, 0]]).t()).ids.tolist() == [1, 0]  # non-contiguous
    with pytest.raises(IndexError, match="out of range"):
        ds.batch([2])


@pytest.mark.parametrize(
    "field, where, value",
    [("edge_index", (1, 0), 2), ("node_ptr", 1, 4), ("node_ptr", 2, 9), ("edge_ptr", 1, 1)],
)
def test_in_place_edits_of_the_structure_are_refused(field, where, value):
    ds = _dataset()
    getattr(ds, field)[where] = value
    with pytest.raises(ValueError, match=f"{field} was modified in place"):
        ds.batch([0, 1])
    with pytest.raises(ValueError, match=f"{field} was modified in place"):
        ds.subset(1)
    with pytest.raises(ValueError, match=f"{field} was modified in place"):
        ds.to("cpu")
    # A rebuilt dataset is checked again: refused when the edit broke it, usable otherwise.
    try:
        rebuilt = replace(ds, name="again")
    except ValueError as err:
        assert "modified in place" not in str(err)
    else:
        assert rebuilt.batch([0, 1]).num_graphs == 2
    if field == "edge_index":
        with pytest.raises(ValueError, match="outside its molecule"):
            replace(ds, name="again")


def test_feature_edits_copies_and_pickles_are_fine():
    ds = _dataset()
    ds.x.mul_(2)
    ds.y[0] = 1.0
    assert ds.batch([0, 1]).num_graphs == 2
    for other in (copy.copy(ds), copy.deepcopy(ds), pickle.loads(pickle.dumps(ds)), ds.to("cpu")):
        assert other.batch([1, 0]).ids.tolist() == [1, 0]
    assert ds.subset(1).batch([0]).num_graphs == 1


def test_subset_takes_numpy_counts_and_checks_its_seed():
    ds = _dataset()
    given, plain = ds.subset(np.int64(1), seed=np.int64(3)), ds.subset(1, seed=3)
    assert torch.equal(given.y, plain.y) and torch.equal(given.x, plain.x)
    for bad in (1.0, True):
        with pytest.raises(ValueError, match=r"^count must be an int, got"):
            ds.subset(bad)
    for bad in (0, 3):
        with pytest.raises(ValueError, match=r"^count must lie in \[1, 3\), got"):
            ds.subset(bad)
    # a float seed failed inside torch.Generator.manual_seed with a TypeError
    for bad in (0.5, "1", None, True):
        with pytest.raises(ValueError, match="^seed must be an int, got"):
            ds.subset(1, seed=bad)
    for bad in (-1, 2**64):  # -1 was taken by manual_seed, 2**64 overflowed it
        with pytest.raises(ValueError, match=r"^seed must lie in \[0, 2\*\*64\), got"):
            ds.subset(1, seed=bad)


def test_subset_takes_a_tensor_count_and_seed():
    ds = _dataset()
    given, plain = ds.subset(torch.tensor(1), seed=torch.tensor(3)), ds.subset(1, seed=3)
    assert torch.equal(given.y, plain.y) and torch.equal(given.x, plain.x)


# ------------------------------------------------------------------ MPNN
def _mpnn_inputs():
    model = MPNN(in_channels=3, edge_channels=2, dim=4, edge_hidden=4)
    x, edge_attr = torch.randn(4, 3), torch.randn(4, 2)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    return model, x, edge_index, edge_attr, torch.tensor([0, 0, 1, 1])


def test_mpnn_checks_feature_widths():
    model, x, edge_index, edge_attr, batch = _mpnn_inputs()
    assert model(x, edge_index, edge_attr, batch).shape == (2, 1)
    with pytest.raises(ValueError, match="in_channels=3"):
        model(torch.randn(4, 5), edge_index, edge_attr, batch)
    with pytest.raises(ValueError, match="in_channels=3"):
        model(torch.randn(4), edge_index, edge_attr, batch)
    with pytest.raises(ValueError, match="edge_channels=2"):
        model(x, edge_index, torch.randn(4, 3), batch)
    with pytest.raises(ValueError, match="edge_channels=2"):
        model(x, edge_index, torch.randn(4), batch)
    with pytest.raises(ValueError, match="one row per edge"):
        model(x, edge_index, torch.randn(3, 2), batch)
    with pytest.raises(TypeError, match="edge_attr must be a tensor"):
        model(x, edge_index, None, batch)


def test_mpnn_checks_feature_dtypes():
    model, x, edge_index, edge_attr, batch = _mpnn_inputs()
    with pytest.raises(TypeError, match="x must be a torch.float32"):
        model(x.double(), edge_index, edge_attr, batch)
    with pytest.raises(TypeError, match="x must be a torch.float32"):
        model(torch.ones(4, 3, dtype=torch.long), edge_index, edge_attr, batch)
    with pytest.raises(TypeError, match="edge_attr must be a torch.float32"):
        model(x, edge_index, edge_attr.double(), batch)
    model.double()
    assert model(x.double(), edge_index, edge_attr.double(), batch).dtype == torch.float64


# ------------------------------------------------------------------ EmbeddingEncoder
@pytest.mark.parametrize("bad", [-1, 5, 7])
@pytest.mark.parametrize("convs", [False, True])
def test_embedding_encoder_checks_ids_before_renormalising(bad, convs):
    torch.manual_seed(0)
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]), 5, symmetrize=True)
    layers = [GCNConv(3, 3)] if convs else []
    encoder = EmbeddingEncoder(5, 3, layers, batch_norm=False, max_norm=1.0)
    with torch.no_grad():
        encoder.embedding.weight.mul_(10)  # every row longer than max_norm
    before = encoder.embedding.weight.detach().clone()
    ids = torch.tensor([0, 1, 2, 3, bad])  # all nodes' count, for the message passing
    with pytest.raises(ValueError, match=f"num_nodes=5\\), got node id {bad}"):
        encoder(ids, graph)
    with pytest.raises(ValueError, match=f"got node id {bad}"):
        encoder.input_rows(torch.tensor([bad]))
    assert torch.equal(encoder.embedding.weight, before)


def test_embedding_encoder_checks_the_ids_dtype():
    encoder = EmbeddingEncoder(5, 3, batch_norm=False, max_norm=1.0)
    before = encoder.embedding.weight.detach().clone()
    with pytest.raises(TypeError, match="int64 or int32"):
        encoder(torch.tensor([0.0, 1.0]), None)
    with pytest.raises(TypeError, match="int64 or int32"):
        encoder(torch.tensor([True, False]), None)
    with pytest.raises(TypeError, match="tensor of node ids"):
        encoder([0, 1], None)
    assert torch.equal(encoder.embedding.weight, before)
    assert encoder(torch.tensor([0, 4], dtype=torch.int32), None).shape == (2, 3)


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def test_the_cached_arange_per_step_path_reads_no_id_values():
    torch.manual_seed(0)
    graph = Graph.from_edge_index(torch.randint(0, 12, (2, 40)), 12, symmetrize=True)
    encoder = EmbeddingEncoder(12, 4, [GCNConv(4, 3)], max_norm=1.0)
    ids = torch.arange(12)
    encoder(ids, graph)  # recognised once
    with _RecordOps() as ops:
        encoder(ids, graph)
    assert not {"min", "max", "aminmax", "equal", "ge", "lt"} & set(ops.names), ops.names


def test_an_edited_pickle_is_checked_as_a_new_dataset():
    ds = _dataset()
    state = dict(ds.__dict__)
    state["edge_index"] = state["edge_index"].clone().fill_(10**6)
    with pytest.raises(ValueError, match="outside its molecule"):
        pickle.loads(pickle.dumps(ds)).__setstate__(state)
