"""The audit's split of the nodes with a known attribute into attacker-training and test nodes,
and the warning for a class it leaves out of the test nodes."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from numbers import Real

import torch
from torch import Tensor

from galfast._dtypes import holds_integers
from galfast.gal.seeding import check_seed

__all__ = ["AUDIT_TEST_FRACTION", "audit_split", "share_count", "warn_missing_classes"]

# The share of the labelled nodes the attackers are scored on (the rest trains them).
AUDIT_TEST_FRACTION = 0.2


def share_count(fraction: float, n: int) -> int:
    """``floor(fraction * n)`` for ``fraction`` as the decimal it prints as: in floats 0.7 * 90
    is 62.99999999999999, which held out 62 of 90 nodes instead of 63."""
    return math.floor(Fraction(str(float(fraction))) * n)


def audit_split(
    nodes: Tensor, seed: int, test_fraction: float = AUDIT_TEST_FRACTION
) -> tuple[Tensor, Tensor]:
    """``(train_idx, test_idx)``: a ``seed``-keyed shuffle of ``nodes`` (1-D node ids) with
    ``test_fraction`` of them, at least one, held out for scoring."""
    if (
        isinstance(test_fraction, bool)
        or not isinstance(test_fraction, Real)
        or not 0 < test_fraction < 1
    ):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    # A list or an array failed on .numel(), a 2-D tensor in indexing; bool or float "ids" came
    # back shuffled as they were, and a repeated id could land in both halves.
    if nodes is None or isinstance(nodes, (str, bytes, set, dict)):
        raise TypeError(f"nodes must be node ids (a 1-D tensor), got {type(nodes).__name__}")
    nodes = torch.as_tensor(nodes)
    if nodes.dim() != 1:
        raise ValueError(f"nodes must be 1-D node ids, got shape {list(nodes.shape)}")
    if not holds_integers(nodes):
        raise ValueError(f"nodes must hold integer node ids, got {nodes.dtype}")
    unique, counts = torch.unique(nodes, return_counts=True)
    if bool((counts > 1).any()):
        raise ValueError(f"nodes holds node {int(unique[counts > 1][0])} twice")
    if nodes.numel() < 2:  # one node leaves no training node
        raise ValueError(f"audit_split needs at least 2 nodes, got {nodes.numel()}")
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    perm = nodes[torch.randperm(nodes.numel(), generator=gen)]
    num_test = max(1, share_count(test_fraction, nodes.numel()))
    return perm[num_test:], perm[:num_test]


def warn_missing_classes(name: str, known: Tensor, test: Tensor) -> None:
    """Warns when the classes ``test`` holds (the test nodes' values) miss some of ``known``
    (the attribute's known values): the attackers are never scored on those. The split is
    not stratified, so a rare class can land in training alone; re-splitting here would change
    every audit's numbers, so the report says what is undefined and this says why."""
    missing = sorted(set(known.unique().tolist()) - set(test.unique().tolist()))
    if not missing:
        return
    left = test.unique().numel()
    effect = (
        "with one class left, macro_f1 and balanced_accuracy (and a binary attribute's auc "
        "and advantage) are undefined"
        if left < 2
        else f"the class averages run over the {left} classes the test nodes hold"
    )
    # An attribute of many classes (word senses) can miss hundreds: ten name the problem.
    listed = ", ".join(map(str, missing[:10]))
    if len(missing) > 10:
        listed += f", ... ({len(missing)} in all)"
    warnings.warn(
        f"{name}: no test node of the audit holds class(es) [{listed}] (all such nodes are "
        f"attacker-training nodes or outside the split): {effect}",
        stacklevel=3,
    )
