"""The paper's accuracy/obfuscation trade-off lower bound (Theorem and Corollary)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_real

__all__ = ["TradeoffBound", "check_lipschitz", "integer_labels", "tradeoff_bound"]


@dataclass
class TradeoffBound:
    r"""Lower bounds on any task classifier's error from the data's ``delta_{Y|A}``.

    Theorem (trade-off): for a task classifier h with Lipschitz constant C on embeddings of
    norm at most R,

    .. math::
        \varepsilon_{Y|A=0} + \varepsilon_{Y|A=1} \ge \Delta_{Y|A} - 2RC\,\mathrm{Adv}(F_A),
        \qquad \Delta_{Y|A} = |P(Y=1|A=0) - P(Y=1|A=1)|

    and (Corollary) the overall error is at least :math:`\min(\alpha, 1-\alpha)` times the
    right-hand side, :math:`\alpha = P(A=0)`.

    Assumptions: binary Y and binary A; probabilities are the empirical frequencies over the
    nodes where both are known (``n``); ``radius`` R is the largest embedding norm observed.

    Attributes:
        delta_y_given_a, alpha, n: the data's quantities.
        error_bound_at_zero_advantage: :math:`\min(\alpha, 1-\alpha)\,\Delta_{Y|A}`, the error
            any classifier must pay when the embedding is perfectly obfuscated (Adv = 0):
            a valid lower bound under the assumptions.
        sum_error_bound_at_zero_advantage: :math:`\Delta_{Y|A}` (the Theorem's left side).
        advantage: the strongest node attacker's measured advantage (None if not measured).
        radius: R.
        lipschitz: the task head's Lipschitz constant C, when given.
        error_bound: :math:`\min(\alpha,1-\alpha)\max(0, \Delta_{Y|A} - 2RC\,\mathrm{Adv})`
            with the measured advantage (when C was given). The measured advantage only
            lower-bounds :math:`\mathrm{Adv}(F_A)` (a supremum over the family), so this is an
            estimate of the bound, not a guarantee.
    """

    attribute: str
    delta_y_given_a: float
    alpha: float
    n: int
    error_bound_at_zero_advantage: float
    sum_error_bound_at_zero_advantage: float
    advantage: Optional[float]
    radius: float
    lipschitz: Optional[float]
    error_bound: Optional[float]


def check_lipschitz(name: str, lipschitz: Optional[float]) -> Optional[float]:
    """``lipschitz`` as a float (None stays None); ValueError naming ``name`` unless it is a
    finite number >= 0, the only Lipschitz constants there are."""
    return None if lipschitz is None else check_real(name, lipschitz, low=0)


def integer_labels(name: str, labels: Tensor) -> Tensor:
    """``labels`` as int64; ValueError naming ``name`` when one is not a whole number (a
    probability or a score, which the cast would silently truncate, or NaN)."""
    if labels.is_complex():  # the cast below would drop the imaginary part
        raise ValueError(f"{name} must hold integer class labels, got {labels.dtype}")
    if labels.is_floating_point():
        whole = torch.isfinite(labels) & (labels == labels.round())
        if not bool(whole.all()):
            bad = labels[~whole][0].item()
            raise ValueError(
                f"{name} must hold integer class labels, got {bad} (threshold probabilities "
                "or scores first)"
            )
    return labels.long()


def tradeoff_bound(
    attribute: str,
    a: Tensor,
    y: Tensor,
    radius: float,
    advantage: Optional[float] = None,
    lipschitz: Optional[float] = None,
) -> TradeoffBound:
    """Computes :class:`TradeoffBound` from aligned binary ``a`` and ``y`` ``[n]``.

    Example (hand-computed): a = [0, 0, 1, 1], y = [1, 1, 0, 1] gives P(Y=1|A=0) = 1,
    P(Y=1|A=1) = 0.5, delta 0.5, alpha 0.5, error bound at zero advantage 0.25.
    """
    # lists and arrays failed on .is_floating_point()
    a = integer_labels("a", torch.as_tensor(a)).view(-1)
    y = integer_labels("y", torch.as_tensor(y)).view(-1)
    lipschitz = check_lipschitz("lipschitz", lipschitz)
    # A negative radius or advantage lifted the bound above its zero-advantage value, and a
    # NaN advantage gave 0 (max(0, nan) is 0).
    radius = check_real("radius", radius, low=0)  # a 0-d tensor too: z.norm(dim=1).max()
    if advantage is not None:
        advantage = check_real("advantage", advantage, 0, 1)
    if a.numel() != y.numel() or a.numel() == 0:
        raise ValueError("the trade-off bound needs aligned, non-empty A and Y")
    if not bool(((y == 0) | (y == 1)).all()) or not bool(((a == 0) | (a == 1)).all()):
        raise ValueError("the trade-off bound assumes binary A and binary Y (0/1)")
    zero, one = a == 0, a == 1
    if not bool(zero.any()) or not bool(one.any()):
        raise ValueError("the trade-off bound needs nodes of both A = 0 and A = 1")
    delta = abs(float(y[zero].double().mean()) - float(y[one].double().mean()))
    alpha = float(zero.double().mean())
    weight = min(alpha, 1 - alpha)
    bound = None
    if lipschitz is not None and advantage is not None:
        bound = weight * max(0.0, delta - 2 * radius * lipschitz * advantage)
    return TradeoffBound(
        attribute,
        delta,
        alpha,
        a.numel(),
        weight * delta,
        delta,
        advantage,
        float(radius),
        lipschitz,
        bound,
    )
