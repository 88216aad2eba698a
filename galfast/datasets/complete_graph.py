"""Edge rewrites for molecule batches: complete graphs and interatomic distances, as PyG's
``examples/qm9_nn_conv.py`` builds them (its ``Complete`` transform, then
``Distance(norm=False)``)."""

from __future__ import annotations

from dataclasses import replace

import torch

from galfast._args import check_flag
from galfast.datasets.molecule_batch import MoleculeBatch, ranges

__all__ = ["complete_graph", "with_distance"]


def _check_batch(batch: object) -> None:
    if not isinstance(batch, MoleculeBatch):  # else an AttributeError on its first field
        raise ValueError(f"batch must be a MoleculeBatch, got {type(batch).__name__}")


def with_distance(batch: MoleculeBatch) -> MoleculeBatch:
    """`batch` with one more edge feature column: the Euclidean distance (Angstrom, not
    normalised) between each edge's atoms."""
    _check_batch(batch)
    source, target = batch.edge_index
    distance = (batch.pos[target] - batch.pos[source]).norm(dim=-1, keepdim=True)
    return replace(batch, edge_attr=torch.cat([batch.edge_attr, distance.to(batch.edge_attr)], 1))


def complete_graph(batch: MoleculeBatch, distance: bool = True) -> MoleculeBatch:
    """`batch` with an edge between every ordered pair of distinct atoms of each molecule.

    An edge that was a bond keeps its features; every other edge gets zeros. With `distance`
    the interatomic distance is appended (:func:`with_distance`), giving PyG's example's
    ``[E, 5]`` edge features for QM9. Edges stay sorted by (target, source).
    """
    _check_batch(batch)
    distance = check_flag("distance", distance)  # "no" is truthy
    atoms = torch.bincount(batch.batch, minlength=batch.num_graphs)
    first_atom = torch.cumsum(atoms, 0) - atoms
    pairs = ranges(torch.zeros_like(atoms), atoms * atoms)
    owner = torch.repeat_interleave(torch.arange(atoms.numel(), device=atoms.device), atoms**2)
    size = atoms[owner]
    target, source = pairs // size, pairs % size
    keep = target != source
    offset = first_atom[owner[keep]]
    edge_index = torch.stack([source[keep] + offset, target[keep] + offset])

    n = batch.num_nodes
    new_keys = edge_index[1] * n + edge_index[0]
    bonds = batch.edge_index[0] != batch.edge_index[1]  # self loops go, as in PyG's Complete
    old_keys = batch.edge_index[1, bonds] * n + batch.edge_index[0, bonds]
    edge_attr = batch.edge_attr.new_zeros(new_keys.numel(), batch.edge_attr.size(1))
    edge_attr[torch.searchsorted(new_keys, old_keys)] = batch.edge_attr[bonds]
    complete = replace(
        batch,
        edge_index=edge_index,
        edge_attr=edge_attr,
        graph=MoleculeBatch.csr_graph(edge_index, n),
    )
    return with_distance(complete) if distance else complete
