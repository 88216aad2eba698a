"""In-place edits of the tensors an object checked when it was built: their version counters,
recorded then and compared on use (Graph, Block, SensitiveAttribute, MoleculeDataset). Edits
that bypass the counter (``.data``, ``.numpy()``) are not seen."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

from torch import Tensor

__all__ = ["check_unedited", "tensor_versions"]


def tensor_versions(tensors: Iterable[Optional[Tensor]]) -> tuple[Optional[int], ...]:
    """Each tensor's version counter; None for an absent tensor and for an inference tensor,
    which keeps no counter (and cannot change outside inference mode)."""
    return tuple(None if t is None or t.is_inference() else t._version for t in tensors)


def check_unedited(owner: str, names: Sequence[str], now: tuple, then: tuple, remedy: str) -> None:
    """Raises ValueError naming ``owner.<field>`` when a version in ``now`` differs from the
    one recorded in ``then`` (``names`` the fields in that order); ``remedy`` says what to do."""
    changed = next((n for n, a, b in zip(names, now, then) if a != b), None)
    if changed is not None:
        raise ValueError(f"{owner}.{changed} was modified in place after it was built; {remedy}")
