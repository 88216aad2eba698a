"""Describes a sensitive node attribute: its kind, its values and the nodes where it is known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch
from torch import Tensor

from galfast._dtypes import all_finite, as_int, check_readable_tensor, holds_integers
from galfast._versions import check_unedited, tensor_versions
from galfast.graph import _count

__all__ = ["KINDS", "KnownValues", "SensitiveAttribute", "as_attribute_list"]

KINDS = ("binary", "categorical", "multilabel", "continuous")
_TENSOR_FIELDS = ("values", "mask", "index")


@dataclass(frozen=True, eq=False)
class KnownValues:
    """An attribute restricted to the nodes where it is known.

    Attributes:
        nodes: ``[K]`` int64 node (or graph) ids, sorted ascending.
        targets: ``[K]`` int64 classes (binary, categorical), ``[K, L]`` float 0/1 labels
            (multilabel) or ``[K, D]`` float values (continuous).
    """

    nodes: Tensor
    targets: Tensor

    def to(self, device) -> KnownValues:
        return KnownValues(self.nodes.to(device), self.targets.to(device))

    def lookup(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """For ``ids`` (any order, maybe unknown ones): ``(positions in ids that are known,
        their targets)``."""
        if self.nodes.numel() == 0:  # nothing is known (indexing the empty nodes would fail)
            return ids.new_zeros(0, dtype=torch.long), self.targets[:0]
        pos = torch.searchsorted(self.nodes, ids).clamp_max(self.nodes.numel() - 1)
        keep = (self.nodes[pos] == ids).nonzero().view(-1)
        return keep, self.targets[pos[keep]]


@dataclass(frozen=True, eq=False)
class SensitiveAttribute:
    """A sensitive node attribute A for GAL training and auditing.

    Args:
        name: a unique label (used in histories and reports), e.g. ``"gender"``.
        kind: ``"binary"`` (values 0/1), ``"categorical"`` (class ids 0..C-1),
            ``"multilabel"`` (a 0/1 matrix ``[rows, L]``, one column per label) or
            ``"continuous"`` (float ``[rows]`` or ``[rows, D]``).
        values: the attribute values; their rows are aligned with ``index`` when it is given,
            else with all nodes (``num_nodes`` rows).
        mask: optional ``[num_nodes]`` bool tensor: the attribute is known where True (values
            at False rows are ignored). MovieLens: users, not movies.
        index: optional ``[K]`` int64 ids of the nodes where it is known; ``values`` then has
            ``K`` rows. At most one of ``mask`` and ``index``.
        num_classes: categorical only: the number of classes, an int >= 2 above every value
            (default: largest value + 1, at least 2).

    The tensors are checked once, here: modifying them in place afterwards makes
    :meth:`known` (so training and auditing) raise ValueError; build a new attribute instead.

    Example:
        >>> gender = SensitiveAttribute("gender", "binary", torch.tensor([0, 1, 1]),
        ...                             index=torch.tensor([0, 1, 2]))
        >>> gender.known(num_nodes=5).nodes
        tensor([0, 1, 2])
    """

    name: str
    kind: str
    values: Tensor
    mask: Optional[Tensor] = None
    index: Optional[Tensor] = None
    num_classes: Optional[int] = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.values, Tensor):
            raise ValueError(
                f"{self.name}: values must be a torch.Tensor, got {type(self.values).__name__}"
            )
        for what, tensor in (("values", self.values), ("mask", self.mask), ("index", self.index)):
            if isinstance(tensor, Tensor):
                check_readable_tensor(f"{self.name}: {what}", tensor)
        if self.kind == "binary" and self.values.dtype == torch.bool:
            # (a mask of who holds the attribute, as the audit command reads bool labels)
            object.__setattr__(self, "values", self.values.long())
        if self.values.dim() == 0:
            raise ValueError(f"{self.name}: values must have one row per node, got a scalar")
        if self.mask is not None and self.index is not None:
            raise ValueError(f"{self.name}: give either mask or index, not both")
        if self.mask is not None:
            self._check_mask()
        if self.index is not None:
            self._check_index()
        self._check_values()
        if self.kind == "categorical":
            object.__setattr__(self, "num_classes", self._checked_num_classes())
        elif self.num_classes is not None:
            raise ValueError(f"{self.name}: num_classes only applies to categorical attributes")
        # The checks above hold while the tensors are unchanged (see check_unmodified).
        object.__setattr__(self, "_versions", self._tensor_versions())

    # ---------------------------------------------------------------- validation
    def _check_values(self) -> None:
        v, name = self.values, self.name
        if self.kind in ("binary", "categorical"):
            # holds_integers: complex ids passed a float/bool test (binary dropped the
            # imaginary part later; categorical failed in torch's min)
            if v.dim() != 1 or not holds_integers(v):
                raise ValueError(
                    f"{name}: {self.kind} values must be a 1-D integer tensor, "
                    f"got shape {list(v.shape)} dtype {v.dtype}"
                )
        elif self.kind == "multilabel":
            if v.dim() != 2:
                raise ValueError(
                    f"{name}: multilabel values must be a [rows, labels] 0/1 "
                    f"matrix, got shape {list(v.shape)}"
                )
            if v.is_complex():  # known() would cast them to float, dropping the imaginary part
                raise ValueError(f"{name}: multilabel values must be real 0/1, got {v.dtype}")
        elif v.dim() not in (1, 2) or not v.dtype.is_floating_point:
            raise ValueError(
                f"{name}: continuous values must be a float tensor [rows] or "
                f"[rows, D], got shape {list(v.shape)} dtype {v.dtype}"
            )
        if self.kind in ("multilabel", "continuous") and v.dim() == 2 and v.size(1) == 0:
            # an adversary with no output, and NaN losses (the mean over no column)
            raise ValueError(
                f"{name}: {self.kind} values need at least one column, got {v.size(1)}"
            )
        known = self._known_rows()
        if (
            self.kind == "binary"
            and known.numel()
            and not bool(((known == 0) | (known == 1)).all())
        ):
            raise ValueError(f"{name}: binary values must be 0 or 1")
        if self.kind == "categorical" and known.numel() and int(known.min()) < 0:
            raise ValueError(f"{name}: categorical values must be class ids >= 0")
        if self.kind == "multilabel" and known.numel():
            if not bool(((known == 0) | (known == 1)).all()):
                raise ValueError(f"{name}: multilabel values must be 0 or 1")
        if self.kind == "continuous" and not all_finite(known):
            raise ValueError(f"{name}: continuous values contain NaN or infinite entries")

    def _checked_num_classes(self) -> int:
        known = self._known_rows()
        largest = int(known.max()) + 1 if known.numel() else 1
        if self.num_classes is None:
            return max(largest, 2)
        # An int: 2.5 or NaN would pass the comparison below, and a bool is no count.
        num_classes = as_int(self.num_classes)
        if num_classes is None:
            raise ValueError(f"{self.name}: num_classes must be an int, got {self.num_classes!r}")
        if num_classes < max(largest, 2):
            raise ValueError(
                f"{self.name}: num_classes={num_classes} but it must be at least 2 and above "
                f"every value (the largest is {largest - 1})"
            )
        return num_classes

    def _check_mask(self) -> None:
        m = self.mask
        if not isinstance(m, Tensor) or m.dtype != torch.bool or m.dim() != 1:
            raise ValueError(f"{self.name}: mask must be a 1-D bool tensor")
        if m.numel() != self.values.size(0):
            raise ValueError(
                f"{self.name}: mask has {m.numel()} entries but values has "
                f"{self.values.size(0)} rows (with a mask, values covers all nodes)"
            )

    def _check_index(self) -> None:
        i = self.index
        if not isinstance(i, Tensor) or i.dim() != 1 or i.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"{self.name}: index must be a 1-D int64 tensor of node ids")
        if i.numel() != self.values.size(0):
            raise ValueError(
                f"{self.name}: index has {i.numel()} entries but values has "
                f"{self.values.size(0)} rows"
            )
        if i.numel() and int(i.min()) < 0:
            raise ValueError(f"{self.name}: index holds a negative node id")
        if torch.unique(i).numel() != i.numel():
            raise ValueError(f"{self.name}: index holds a node id twice")

    def _known_rows(self) -> Tensor:
        return self.values if self.mask is None else self.values[self.mask.to(self.values.device)]

    def _tensor_versions(self) -> tuple[Optional[int], ...]:
        return tensor_versions(getattr(self, field) for field in _TENSOR_FIELDS)

    def check_unmodified(self) -> None:
        """Raises ValueError when ``values``, ``mask`` or ``index`` was modified in place since
        the attribute was built (and checked): a NaN, an out-of-range class or a negative id
        written since would give wrong numbers or a raw indexing error. :meth:`known` (which
        training and auditing call) checks this first. Edits that bypass the version counter
        (``.data``, ``.numpy()``) are not seen."""
        check_unedited(
            f"SensitiveAttribute {self.name!r}",
            _TENSOR_FIELDS,
            self._tensor_versions(),
            self._versions,
            "build a new SensitiveAttribute from the edited tensors (it checks them again)",
        )

    # Copies and pickles reset their tensors' version counters: a copy is checked afresh
    # and records its own.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_versions"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    # ---------------------------------------------------------------- facts
    @property
    def num_outputs(self) -> int:
        """Outputs an adversary needs: 1 (binary logit; 2 softmax outputs are also accepted),
        C (categorical), L (multilabel), D (continuous)."""
        if self.kind == "binary":
            return 1
        if self.kind == "categorical":
            return int(self.num_classes)
        return 1 if self.values.dim() == 1 else self.values.size(1)

    def known(self, num_nodes: Optional[int] = None) -> KnownValues:
        """The nodes where the attribute is known and their targets, checked against a graph
        of ``num_nodes`` nodes (None: ids are not range-checked, e.g. graph-level datasets)."""
        self.check_unmodified()
        if num_nodes is not None:
            # 2.0 gave float node ids, True or "2" a confusing size mismatch
            num_nodes = _count("num_nodes", num_nodes)
        if self.index is not None:
            if num_nodes is not None and self.index.numel() and int(self.index.max()) >= num_nodes:
                raise ValueError(
                    f"{self.name}: index refers to node {int(self.index.max())} but "
                    f"there are {num_nodes} nodes"
                )
            order = torch.argsort(self.index)
            nodes, targets = self.index[order].long(), self.values[order.to(self.values.device)]
        else:
            num_nodes = self.values.size(0) if num_nodes is None else num_nodes
            if self.values.size(0) != num_nodes:
                what = "mask" if self.mask is not None else "values"
                raise ValueError(
                    f"{self.name}: {what} has {self.values.size(0)} rows but there "
                    f"are {num_nodes} nodes"
                )
            nodes = torch.arange(num_nodes, device=self.values.device)
            targets = self.values
            if self.mask is not None:
                mask = self.mask.to(self.values.device)
                nodes, targets = nodes[mask], targets[mask]
        if nodes.numel() == 0:
            raise ValueError(f"{self.name}: the attribute is known on no node")
        if self.kind in ("binary", "categorical"):
            targets = targets.long()
        elif not targets.is_floating_point():
            targets = targets.to(torch.get_default_dtype()).reshape(targets.size(0), -1)
        else:
            targets = targets.reshape(targets.size(0), -1)
        return KnownValues(nodes.to(targets.device), targets)


def as_attribute_list(
    sensitive: Union[SensitiveAttribute, Sequence[SensitiveAttribute]],
) -> list[SensitiveAttribute]:
    """Normalises one attribute or a sequence of them to a list with unique names."""
    attrs = [sensitive] if isinstance(sensitive, SensitiveAttribute) else list(sensitive)
    if not attrs:
        raise ValueError("sensitive must hold at least one SensitiveAttribute")
    for a in attrs:
        if not isinstance(a, SensitiveAttribute):
            raise ValueError(
                f"sensitive must hold SensitiveAttribute objects, got {type(a).__name__}"
            )
    names = [a.name for a in attrs]
    if len(set(names)) != len(names):
        raise ValueError(f"sensitive attribute names must be unique, got {names}")
    return attrs
