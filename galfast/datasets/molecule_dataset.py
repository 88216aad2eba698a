"""A collection of small molecular graphs stored as concatenated arrays and offsets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import torch
from torch import Tensor

from galfast._args import check_int
from galfast._dtypes import holds_integers
from galfast._versions import check_unedited, tensor_versions
from galfast.datasets._common import to_device
from galfast.datasets.molecule_batch import MoleculeBatch, ranges

# The structure the constructor checks, whose in-place edits check_unmodified refuses.
_STRUCTURE = ("edge_index", "node_ptr", "edge_ptr")

__all__ = ["MoleculeDataset"]


def _check_ptr(name: str, ptr: Tensor, total: int) -> None:
    if ptr.dtype != torch.int64 or ptr.dim() != 1 or ptr.numel() < 1:
        raise ValueError(f"{name} must be a non-empty 1-D int64 tensor of offsets")
    if int(ptr[0]) != 0 or int(ptr[-1]) != total or bool((ptr.diff() < 0).any()):
        raise ValueError(f"{name} must rise from 0 to {total} without decreasing")


_TENSORS = ("x", "z", "pos", "edge_index", "edge_attr", "node_ptr", "edge_ptr", "y", "ids")


def _check_tensors(dataset: MoleculeDataset) -> None:
    # Else a list or an array fails deep inside as an AttributeError that names no field.
    for name in _TENSORS:
        value = getattr(dataset, name)
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not holds_integers(dataset.edge_index):  # float ids failed only in batch()'s bincount
        raise ValueError(
            f"edge_index must hold integer atom indices, got {dataset.edge_index.dtype}"
        )


def _check_edge_order(edge_index: Tensor, node_ptr: Tensor, edge_molecule: Tensor) -> None:
    """Refuses edges not sorted by (target, source) within each molecule: a batch's CSR takes
    that order as it is, so another order would give a wrong graph (edges moved to other
    atoms) and misaligned edge features."""
    # Molecules own ascending atom ranges, so per-molecule order is global order of these keys.
    source, target = edge_index.long()  # int32 ids would overflow the keys
    target = target + node_ptr[edge_molecule]
    width = max(int(node_ptr.diff().max()), 1)
    unsorted = (target * width + source).diff() < 0
    if bool(unsorted.any()):
        column = int(unsorted.nonzero()[0]) + 1
        raise ValueError(
            f"edge_index must be sorted by target, then source, within each molecule; column "
            f"{column} (0-based, of molecule {int(edge_molecule[column])}) breaks it. Sort the "
            "columns (and edge_attr's rows with them) by (molecule, target, source)"
        )


def _indices(indices: Any, g: int) -> Tensor:
    """``indices`` as a 1-D int64 tensor of positions, a boolean mask as the positions it
    selects; floats and other non-integer values refused."""
    if isinstance(indices, Tensor):
        ids = indices
    else:
        try:
            ids = torch.as_tensor(indices)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"indices must be integer positions or a boolean mask, got {type(indices).__name__}"
            ) from err
        if ids.numel() == 0:
            ids = ids.long()  # [] converts to float32: no values, nothing to misread
    if ids.dtype == torch.bool:
        if ids.dim() != 1 or ids.numel() != g:
            raise ValueError(
                f"a boolean mask of molecules must be 1-D with {g} entries (one per molecule), "
                f"got shape {list(ids.shape)}"
            )
        return ids.nonzero().view(-1)
    if ids.is_floating_point() or ids.is_complex():
        if ids.numel():
            raise TypeError(f"indices must be integers (molecule positions), got {ids.dtype}")
    return ids.long().reshape(-1)


@dataclass(frozen=True, eq=False, repr=False)
class MoleculeDataset:
    """Molecules (atoms, bonds, positions, targets) for graph-level learning.

    All molecules share flat arrays: molecule ``g`` owns atom rows
    ``node_ptr[g]:node_ptr[g+1]`` and edge columns ``edge_ptr[g]:edge_ptr[g+1]``. No Python
    object per molecule, so 130k molecules load, batch and move to a device as a few tensors.

    Attributes:
        name: e.g. ``"qm9"``.
        x: ``[N, F]`` float32 atom features.
        z: ``[N]`` int64 atomic numbers.
        pos: ``[N, 3]`` float32 positions (Angstrom).
        edge_index: ``[2, E]`` int64 (source, target) atom indices LOCAL to the molecule,
            both directions of every bond, sorted by target then source within a molecule.
        edge_attr: ``[E, D]`` float32 edge features.
        node_ptr, edge_ptr: ``[G + 1]`` int64 offsets.
        y: ``[G, T]`` float32 targets, columns named by ``target_names`` (units
            ``target_units``).
        ids: ``[G]`` int64 each molecule's number in its source (QM9: ``gdb_<id>``).
        attributes: sensitive attributes, ``name -> [G]`` float32 values per molecule
            (continuous, graph-level; QM9: ``alpha``).
        license: licence / attribution notice of the data.
        notes: caveats a user must know (where the bonds come from, ...).

    Example:
        >>> ds = galfast.datasets.qm9()
        >>> b = ds.batch(torch.arange(128))
        >>> b.num_graphs, b.x.shape[1], b.edge_attr.shape[1]
        (128, 11, 4)
    """

    name: str
    x: Tensor
    z: Tensor
    pos: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    node_ptr: Tensor
    edge_ptr: Tensor
    y: Tensor
    target_names: tuple[str, ...]
    target_units: tuple[str, ...]
    ids: Tensor
    attributes: dict[str, Tensor]
    license: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_tensors(self)
        if self.edge_index.dim() != 2 or self.edge_index.size(0) != 2:
            raise ValueError("edge_index must have shape [2, E]")
        n, e, g = self.x.size(0), self.edge_index.size(-1), self.node_ptr.numel() - 1
        _check_ptr("node_ptr", self.node_ptr, n)
        _check_ptr("edge_ptr", self.edge_ptr, e)
        if self.x.dim() != 2 or self.z.shape != (n,) or self.pos.shape != (n, 3):
            raise ValueError(f"x, z and pos must have {n} rows ([N, F], [N], [N, 3])")
        if self.edge_attr.dim() != 2 or self.edge_attr.size(0) != e:
            raise ValueError(f"edge_attr must have shape [{e}, D]")
        if self.edge_ptr.numel() != g + 1 or self.y.dim() != 2 or self.y.size(0) != g:
            raise ValueError(f"edge_ptr must have {g + 1} entries and y shape [{g}, T]")
        if len(self.target_names) != self.y.size(1) or len(self.target_units) != self.y.size(1):
            raise ValueError(f"target_names and target_units need {self.y.size(1)} entries")
        if self.ids.shape != (g,):
            raise ValueError(f"ids must have shape [{g}]")
        for key, values in self.attributes.items():
            if values.shape != (g,) or not values.is_floating_point():
                raise ValueError(f"attribute {key!r} must be a float tensor of shape [{g}]")
        if self.edge_index.device.type == "cpu" and e:
            edge_molecule = self._edge_molecule()
            sizes = (self.node_ptr.diff())[edge_molecule]
            if bool(((self.edge_index < 0) | (self.edge_index >= sizes)).any()):
                raise ValueError("edge_index holds an atom index outside its molecule")
            _check_edge_order(self.edge_index, self.node_ptr, edge_molecule)
        # The structure checked above, as of now: an in-place edit afterwards (which could
        # make an edge cross molecules or an offset run past the arrays) is refused by
        # check_unmodified() instead of giving wrong batches.
        object.__setattr__(self, "_versions", self._structure_versions())

    def _structure_versions(self) -> tuple[Optional[int], ...]:
        return tensor_versions(getattr(self, name) for name in _STRUCTURE)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checked as a new dataset is (a pickle may come from elsewhere or have been edited);
        # that also remembers the unpickled tensors' new version counters.
        self.__dict__.update(state)
        self.__post_init__()

    def check_unmodified(self) -> None:
        """Raises ValueError when ``edge_index``, ``node_ptr`` or ``edge_ptr`` was modified in
        place since the dataset was built (:meth:`batch` and :meth:`subset` call this first):
        the constructor's checks no longer hold for them. Build a new dataset instead
        (``dataclasses.replace`` checks it again). Edits that bypass the version counter
        (``.data``, ``.numpy()``) are not seen. Feature and target values (``x``, ``y``, ...)
        may be edited in place."""
        check_unedited(
            "MoleculeDataset",
            _STRUCTURE,
            self._structure_versions(),
            self._versions,
            "build a new dataset (e.g. dataclasses.replace) so that it is checked again",
        )

    def _edge_molecule(self) -> Tensor:
        counts = self.edge_ptr.diff()
        return torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)

    def __len__(self) -> int:
        return self.y.size(0)

    @property
    def num_molecules(self) -> int:
        return self.y.size(0)

    @property
    def num_node_features(self) -> int:
        return self.x.size(1)

    @property
    def num_edge_features(self) -> int:
        return self.edge_attr.size(1)

    def target(self, name: str) -> Tensor:
        """The ``[G]`` column of target ``name`` (e.g. ``"mu"``)."""
        if not (isinstance(name, str) and name in self.target_names):  # an array: elementwise
            raise ValueError(f"{self.name} has no target {name!r}; it has {self.target_names}")
        return self.y[:, self.target_names.index(name)]

    def batch(self, indices: Union[Tensor, Sequence[int]]) -> MoleculeBatch:
        """The molecules ``indices`` merged into one :class:`MoleculeBatch`.

        ``indices`` are integer dataset positions (a tensor of any integer dtype, a sequence
        or an int; negative counts from the end), taken in that order, or a boolean mask of
        ``len(self)`` entries selecting molecules in dataset order, as ``tensor[mask]``
        indexes. Float indices are refused (TypeError), as is a boolean tensor of another
        length (ValueError); an index outside ``[-len, len)`` raises IndexError."""
        self.check_unmodified()
        g = len(self)
        ids = _indices(indices, g).to(self.y.device)
        if ids.numel() and (int(ids.min()) < -g or int(ids.max()) >= g):
            raise IndexError(f"molecule index out of range for {g} molecules")
        ids = ids % max(g, 1)
        atoms = self.node_ptr.diff()[ids]
        edges = self.edge_ptr.diff()[ids]
        atom_rows = ranges(self.node_ptr[ids], atoms)
        edge_cols = ranges(self.edge_ptr[ids], edges)
        position = torch.arange(ids.numel(), device=ids.device)
        first_atom = torch.cumsum(atoms, 0) - atoms
        edge_index = self.edge_index[:, edge_cols] + torch.repeat_interleave(first_atom, edges)
        num_nodes = atom_rows.numel()
        return MoleculeBatch(
            x=self.x[atom_rows],
            z=self.z[atom_rows],
            pos=self.pos[atom_rows],
            edge_index=edge_index,
            edge_attr=self.edge_attr[edge_cols],
            batch=torch.repeat_interleave(position, atoms),
            y=self.y[ids],
            ids=ids,
            graph=MoleculeBatch.csr_graph(edge_index, num_nodes),
        )

    def subset(self, count: int, seed: int = 0) -> MoleculeDataset:
        """`count` molecules drawn by a seeded shuffle (kept in dataset order): a smaller
        dataset for reduced runs, noted in ``notes``."""
        self.check_unmodified()
        g = len(self)
        count = check_int("count", count, 1, g + 1)  # NumPy's ints too
        generator = torch.Generator().manual_seed(check_int("seed", seed, 0, 2**64))
        ids = torch.randperm(g, generator=generator)[:count].sort().values.to(self.y.device)
        atoms, edges = self.node_ptr.diff()[ids], self.edge_ptr.diff()[ids]
        atom_rows = ranges(self.node_ptr[ids], atoms)
        edge_cols = ranges(self.edge_ptr[ids], edges)
        zero = atoms.new_zeros(1)
        return replace(
            self,
            x=self.x[atom_rows],
            z=self.z[atom_rows],
            pos=self.pos[atom_rows],
            edge_index=self.edge_index[:, edge_cols],
            edge_attr=self.edge_attr[edge_cols],
            node_ptr=torch.cat([zero, atoms.cumsum(0)]),
            edge_ptr=torch.cat([zero, edges.cumsum(0)]),
            y=self.y[ids],
            ids=self.ids[ids],
            attributes={key: values[ids] for key, values in self.attributes.items()},
            notes=(*self.notes, f"A subset of {count} of the {g} molecules (seed {seed})."),
        )

    def to(self, device: Any) -> MoleculeDataset:
        """A copy with every tensor on `device`."""
        self.check_unmodified()
        return to_device(self, device)

    def __repr__(self) -> str:
        return (
            f"MoleculeDataset({self.name}: {len(self)} molecules, {self.x.size(0)} atoms, "
            f"{self.edge_index.size(1)} directed edges, {self.num_node_features} atom and "
            f"{self.num_edge_features} edge features, targets {', '.join(self.target_names)}; "
            f"attributes: {', '.join(self.attributes) or 'none'})"
        )
