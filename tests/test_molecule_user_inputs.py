"""Molecule inputs a user builds by hand: MoleculeDataset's edge order and field types, an
NNConv edge network of the wrong width, and the QM9 cache's file mode."""

import dataclasses
import os
import stat
import zipfile

import numpy as np
import pytest
import torch

from galfast.datasets import MoleculeDataset, qm9, target_statistics
from galfast.datasets.qm9_cache import load_cache, save_cache
from galfast.datasets.qm9_features import RawMolecules
from galfast.nn import NNConv


def _dataset(edge_index, num_atoms=3):
    """One molecule of `num_atoms` atoms with the given (local) edges."""
    e = edge_index.size(1)
    return MoleculeDataset(
        name="hand-made",
        x=torch.randn(num_atoms, 11),
        z=torch.ones(num_atoms, dtype=torch.long),
        pos=torch.randn(num_atoms, 3),
        edge_index=edge_index,
        edge_attr=torch.arange(float(e)).view(e, 1),
        node_ptr=torch.tensor([0, num_atoms]),
        edge_ptr=torch.tensor([0, e]),
        y=torch.zeros(1, 1),
        target_names=("mu",),
        target_units=("D",),
        ids=torch.tensor([1]),
        attributes={},
        license="",
    )


def test_edges_not_sorted_by_target_are_refused():
    # Sorted by source (PyG's order): the batch's CSR read it as other edges (0->0, 1->1, ...).
    by_source = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    with pytest.raises(ValueError, match="sorted by target, then source"):
        _dataset(by_source)


def test_sorted_edges_with_parallel_edges_give_the_batch_graph_of_edge_index():
    edge_index = torch.tensor([[1, 1, 0, 2, 1], [0, 0, 1, 1, 2]])
    batch = _dataset(edge_index).batch([0])
    graph = batch.graph
    targets = torch.repeat_interleave(torch.arange(3), graph.rowptr.diff())
    assert torch.equal(torch.stack([graph.col, targets]), edge_index)


@pytest.mark.parametrize(
    "edge_index, error",
    [
        (torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "integer atom indices"),
        (torch.tensor(3), r"shape \[2, E\]"),  # was an IndexError from size(-1)
    ],
)
def test_edge_index_of_floats_or_no_dimensions_is_refused(edge_index, error):
    dataset = _dataset(torch.tensor([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match=error):
        dataclasses.replace(dataset, edge_index=edge_index)


def test_a_field_that_is_no_tensor_is_named():
    dataset = _dataset(torch.tensor([[1, 0], [0, 1]]))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        dataclasses.replace(dataset, x=dataset.x.tolist())


@pytest.mark.parametrize("aggr", ["add", "max"])
def test_edge_network_wider_than_in_times_out_is_refused(aggr):
    # Linear(5, 24) for NNConv(3, 4): the fused kernel returned [N, 8] without complaint.
    conv = NNConv(3, 4, torch.nn.Linear(5, 24), aggr=aggr, root_weight=False, bias=False)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    with pytest.raises(ValueError, match=r"nn gives .*24.*in_channels \* out_channels = 12"):
        conv(torch.randn(3, 3), edge_index, torch.randn(3, 5))


def _one_molecule() -> RawMolecules:
    return RawMolecules(
        atomic_numbers=np.array([8, 1, 1]),
        positions=np.zeros((3, 3), dtype=np.float32) + np.arange(3.0)[:, None],
        atom_ptr=np.array([0, 3]),
        bonds=np.array([[0, 1], [0, 2]]),
        bond_types=np.array([0, 0]),
        bond_ptr=np.array([0, 2]),
        targets=np.ones((1, 19), dtype=np.float32),
        ids=np.array([3]),
    )


def test_cache_file_gets_the_umask_mode_so_a_shared_folder_can_read_it(tmp_path):
    path = tmp_path / "qm9_canonical_v1.npz"
    before = os.umask(0o022)
    try:
        save_cache(path, _one_molecule(), ("note",))
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no partial file left
    molecules, notes = load_cache(path)
    assert molecules.ids.tolist() == [3] and notes == ("note",)


@pytest.mark.parametrize("index", [torch.tensor([0, 2, 1]), torch.tensor([True, True, True])])
def test_target_statistics_refuse_a_nan_target_naming_its_row(index):
    # It returned NaN mean and std: every normalised target NaN, training diverged.
    y = torch.tensor([[1.0], [float("nan")], [3.0]])
    with pytest.raises(ValueError, match="y row 1 holds a NaN"):
        target_statistics(y, index)
    mean, std = target_statistics(y, torch.tensor([0, 2]))
    assert mean.tolist() == [2.0] and std.item() == pytest.approx(2**0.5)


def _no_network(*args, **kwargs):
    raise AssertionError("the files are in place: nothing should be downloaded")


@pytest.mark.parametrize(
    "write_archive, reason",
    [
        (lambda path: path.write_bytes(b"garbage"), "File is not a zip file"),
        (lambda path: zipfile.ZipFile(path, "w").close(), "no item named 'gdb9.sdf'"),
    ],
)
def test_a_qm9_zip_without_the_release_is_named(tmp_path, write_archive, reason):
    # The KeyError of an archive without gdb9.sdf reached the CLI as a traceback.
    raw = tmp_path / "raw"
    raw.mkdir()
    write_archive(raw / "qm9.zip")
    (raw / "uncharacterized.txt").write_text("placeholder\n")
    with pytest.raises(ValueError, match=f"qm9.zip: not MoleculeNet's.*{reason}.*delete it"):
        qm9(tmp_path, source="canonical", opener=_no_network)
