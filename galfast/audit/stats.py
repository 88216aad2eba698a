"""Mean and Student-t confidence interval of a metric over seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["MetricSummary", "summarize"]


@dataclass
class MetricSummary:
    """A metric over seeds: ``mean``, the 95% confidence half-width (Student t with n - 1
    degrees of freedom; None for a single seed) and the per-seed ``values``."""

    mean: float
    half_width: Optional[float]
    values: list[float] = field(default_factory=list)

    @property
    def ci(self) -> tuple[float, float]:
        """The 95% interval ``(low, high)`` (both the mean for a single seed)."""
        hw = self.half_width or 0.0
        return self.mean - hw, self.mean + hw

    def __str__(self) -> str:
        if self.half_width is None:
            return f"{self.mean:.3f}"
        return f"{self.mean:.3f} ± {self.half_width:.3f}"


def summarize(values: Sequence[float], confidence: float = 0.95) -> MetricSummary:
    r"""``mean`` and half-width :math:`t_{(1+c)/2,\,n-1}\, s / \sqrt{n}` (s: sample std).

    Example:
        >>> str(summarize([0.5, 0.7]))
        '0.600 ± 1.271'
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("summarize needs at least one value")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return MetricSummary(mean, None, values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    from scipy import stats  # here: scipy.stats alone takes about a second to import

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return MetricSummary(mean, half, values)
