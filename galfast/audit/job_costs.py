"""Rough run times of the audit's fits, in milliseconds at one thread, for ordering them.

Only the order matters (:class:`~galfast.audit.jobs.Jobs` starts the costliest first), and
only for the long fits: scheduling them early keeps the workers busy to the end. The
constants come from timing the fits on MovieLens-sized splits (a few thousand rows of 20-40
features); the results never depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["classic_cost", "head_cost"]

# A head's optimizer step: a fixed part (about 20 ATen calls and their Python), then per row
# of the batch its multiply-adds (forward and the two backward products) and its hidden units
# (activations and their backward).
_STEP_MS = 0.14
_MS_PER_MULTIPLY_ADD = 5e-8
_MS_PER_UNIT = 2.8e-6
# Per (training row x feature): the trees' histograms and the neighbour searches.
_CLASSIC_MS_PER_CELL = {"hgb": 3.2e-3, "knn": 1e-3}


def head_cost(
    in_dim: int, hidden: Sequence[int], out_dim: int, rows: int, batch: int, epochs: int
) -> float:
    """An MLP head ``in_dim -> hidden... -> out_dim`` trained for ``epochs`` epochs of
    ``rows`` rows in batches of ``batch``."""
    widths = [in_dim, *hidden, out_dim]
    multiply_adds = sum(a * b for a, b in zip(widths, widths[1:]))
    per_row = _MS_PER_MULTIPLY_ADD * multiply_adds + _MS_PER_UNIT * sum(hidden)
    steps = epochs * -(-rows // batch)
    return steps * (_STEP_MS + min(rows, batch) * per_row)


def classic_cost(family: str, rows: int, dim: int) -> float:
    """A ``"knn"`` or ``"hgb"`` fit on ``rows`` training rows of ``dim`` features."""
    return _CLASSIC_MS_PER_CELL[family] * rows * dim
