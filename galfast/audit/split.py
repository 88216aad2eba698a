"""The audit's split of the nodes with a known attribute into attacker-training and test nodes."""

from __future__ import annotations

import torch
from torch import Tensor

from galfast.gal.seeding import check_seed

__all__ = ["AUDIT_TEST_FRACTION", "audit_split"]

# The share of the labelled nodes the attackers are scored on (the rest trains them).
AUDIT_TEST_FRACTION = 0.2


def audit_split(
    nodes: Tensor, seed: int, test_fraction: float = AUDIT_TEST_FRACTION
) -> tuple[Tensor, Tensor]:
    """``(train_idx, test_idx)``: a ``seed``-keyed shuffle of ``nodes`` (1-D node ids) with
    ``test_fraction`` of them, at least one, held out for scoring."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    perm = nodes[torch.randperm(nodes.numel(), generator=gen)]
    num_test = max(1, int(test_fraction * nodes.numel()))
    return perm[num_test:], perm[:num_test]
