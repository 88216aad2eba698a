"""What the simulated adversary minimises: TV (cross-entropy / MSE) or the Wasserstein dual."""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galfast.gal.adversary_targets import check_adversary_inputs
from galfast.gal.sensitive import KINDS

__all__ = ["DISTANCES", "adversary_loss", "clip_weights", "tv_loss", "wasserstein_gap"]

DISTANCES = ("tv", "wasserstein")


def _binary_logits(outputs: Tensor) -> bool:
    """A binary adversary may emit one logit or two softmax scores."""
    return outputs.dim() == 1 or outputs.size(-1) == 1


def _check_kind(kind: str) -> None:
    """An unknown kind would fall through to the continuous branch (MSE) or index a missing
    dimension."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def check_outputs(name: str, kind: str, outputs: Tensor, targets: Tensor, expected: int) -> None:
    """Raises a ValueError when an adversary's output does not fit its attribute."""
    if outputs.size(0) != targets.size(0):
        raise ValueError(
            f"{name}: the adversary returned {outputs.size(0)} rows for {targets.size(0)} nodes"
        )
    width = 1 if outputs.dim() == 1 else outputs.size(-1)
    allowed = (1, 2) if kind == "binary" else (expected,)
    if outputs.dim() > 2 or width not in allowed:
        raise ValueError(
            f"{name}: a {kind} attribute needs an adversary with "
            f"{' or '.join(map(str, allowed))} outputs, got shape {list(outputs.shape)}"
        )


def tv_loss(outputs: Tensor, targets: Tensor, kind: str, *, check_targets: bool = True) -> Tensor:
    r"""The TV adversary's loss :math:`\varepsilon_A` surrogate, by attribute kind.

    - binary: BCE on one logit ``[K]``/``[K, 1]``, or cross-entropy on two scores ``[K, 2]``;
    - categorical: cross-entropy on ``[K, C]`` scores, ``targets`` ``[K]`` class ids;
    - multilabel: mean BCE over ``[K, L]`` logits and 0/1 targets;
    - continuous: mean squared error between ``[K, D]`` predictions and targets.

    Shapes and dtypes are checked always; ``check_targets=False`` skips the check of the
    targets' values (one wait for the device), for targets a SensitiveAttribute has checked.
    """
    _check_kind(kind)
    check_adversary_inputs(outputs, targets, kind, values=check_targets)
    if kind == "binary" and _binary_logits(outputs):
        return F.binary_cross_entropy_with_logits(outputs.view(-1), targets.to(outputs.dtype))
    if kind in ("binary", "categorical"):
        return F.cross_entropy(outputs, targets)
    if kind == "multilabel":
        return F.binary_cross_entropy_with_logits(outputs, targets.to(outputs.dtype))
    return F.mse_loss(outputs.view_as(targets), targets.to(outputs.dtype))


def _class_conditional_gap(scores: Tensor, classes: Tensor, num_classes: int) -> Tensor:
    """max_a pbar_a - min_a pbar_a, pbar_a = mean of ``scores[:, a]`` over rows of class a,
    over the classes present. Written without host synchronisation (no boolean indexing), so
    a step using it can be captured in a CUDA graph."""
    own = scores.gather(1, classes.view(-1, 1)).view(-1)
    sums = own.new_zeros(num_classes).index_add(0, classes, own)
    counts = own.new_zeros(num_classes).index_add(0, classes, torch.ones_like(own))
    absent = counts == 0
    means = sums / counts.clamp_min(1)
    return means.masked_fill(absent, -math.inf).max() - means.masked_fill(absent, math.inf).min()


def _binary_gap(scores: Tensor, labels: Tensor) -> Tensor:
    """|mean over A=1 of f - mean over A=0 of f|; 0 when one side is empty. Without host
    synchronisation, like :func:`_class_conditional_gap`."""
    ones = labels.to(scores.dtype)
    zeros = 1 - ones
    n_ones, n_zeros = ones.sum(), zeros.sum()
    mean_ones = (scores * ones).sum() / n_ones.clamp_min(1)
    mean_zeros = (scores * zeros).sum() / n_zeros.clamp_min(1)
    gap = mean_ones - mean_zeros
    return torch.where((n_ones > 0) & (n_zeros > 0), gap.abs(), scores.sum() * 0)


def wasserstein_gap(
    outputs: Tensor, targets: Tensor, kind: str, *, check_targets: bool = True
) -> Tensor:
    r"""The critic's estimate of the Wasserstein-1 distance between class-conditional embedding
    distributions (the dual form, the critic kept Lipschitz by weight clipping).

    - binary: :math:`|\,\mathrm{mean}_{A=1} f(Z) - \mathrm{mean}_{A=0} f(Z)\,|` for a scalar
      critic; a two-output critic is read as the scalar :math:`f(Z)[1] - f(Z)[0]`;
    - categorical, ``[K, C]`` critic outputs (the paper's form):

      .. math::
          \bar p_a = \frac{1}{|\{v: A_v = a\}|} \sum_{v: A_v = a} f(Z_v)[a], \qquad
          \ell = \max_a \bar p_a - \min_a \bar p_a

      over the classes present, each mean over that class's own rows (not over all rows).
      Because it compares different output columns, a critic can also widen this gap with
      per-column offsets that ignore Z; the binary form has no such freedom, which is why
      two-output binary critics use the difference above;
    - multilabel: the binary gap of each label's column, averaged over labels.

    Example (hand-computed): scores ``[[1, 0], [3, 0], [0, 5]]``, classes ``[0, 0, 1]``:
    ``pbar_0 = (1 + 3) / 2 = 2``, ``pbar_1 = 5``, gap ``3``.

    ``check_targets`` as in :func:`tv_loss`.
    """
    _check_kind(kind)
    if kind == "continuous":
        raise ValueError(
            "the Wasserstein distance is defined here for discrete attributes "
            "(binary, categorical, multilabel); use distance='tv' (MSE) for "
            "continuous ones"
        )
    check_adversary_inputs(outputs, targets, kind, values=check_targets)
    if kind == "binary":
        scores = outputs.view(-1) if _binary_logits(outputs) else outputs[:, 1] - outputs[:, 0]
        return _binary_gap(scores, targets)
    if kind == "categorical":
        return _class_conditional_gap(outputs, targets, outputs.size(1))
    gaps = [_binary_gap(outputs[:, col], targets[:, col]) for col in range(outputs.size(1))]
    return torch.stack(gaps).mean()


def adversary_loss(
    outputs: Tensor, targets: Tensor, kind: str, distance: str, *, check_targets: bool = True
) -> Tensor:
    """The loss the adversary optimizer *minimises*: ``tv_loss`` for ``"tv"`` and
    ``-wasserstein_gap`` for ``"wasserstein"`` (the critic maximises the gap; through the
    gradient reversal the encoder then minimises it). ``check_targets`` as in
    :func:`tv_loss`."""
    if distance == "tv":
        return tv_loss(outputs, targets, kind, check_targets=check_targets)
    if distance == "wasserstein":
        return -wasserstein_gap(outputs, targets, kind, check_targets=check_targets)
    raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")


@torch.no_grad()
def clip_weights(module: nn.Module, clip: float) -> None:
    """Clamps every parameter of ``module`` to ``[-clip, clip]`` in place (WGAN critic)."""
    # A negative bound set every weight to -clip (clamp with min > max), NaN made them NaN.
    real = isinstance(clip, numbers.Real) and not isinstance(clip, bool)
    if not (real and math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a finite number > 0, got {clip!r}")
    for param in module.parameters():
        param.clamp_(-clip, clip)
