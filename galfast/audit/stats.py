"""Mean and Student-t confidence interval of a metric over seeds."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Optional

__all__ = ["MetricSummary", "summarize"]


@dataclass
class MetricSummary:
    """A metric over seeds: ``mean``, the 95% confidence half-width (Student t with n - 1
    degrees of freedom; None for a single seed) and the per-seed ``values``.

    In an audit the seeds vary the attackers (initialisation, batch order, walks) on one fixed
    test split: the interval leaves out the sampling error of the test nodes themselves."""

    mean: float
    half_width: Optional[float]
    values: list[float] = field(default_factory=list)

    @property
    def ci(self) -> Optional[tuple[float, float]]:
        """The 95% interval ``(low, high)``; None for a single seed (there is no spread)."""
        if self.half_width is None:
            return None
        return self.mean - self.half_width, self.mean + self.half_width

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
    # A string was summarised digit by digit; None failed as "not iterable".
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"values must be a sequence of numbers, got {type(values).__name__}")
    if isinstance(confidence, bool) or not isinstance(confidence, Real) or not 0 < confidence < 1:
        # 0 gave a zero-width interval, 1 an infinite one, -0.5 a negative width
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    values = [float(v) for v in values]
    if not values:
        raise ValueError("summarize needs at least one value")
    if not all(math.isfinite(v) for v in values):  # printed "nan ± nan"; JSON refuses it
        raise ValueError(f"summarize needs finite values, got {values}")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return MetricSummary(mean, None, values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    from scipy import stats  # here: scipy.stats alone takes about a second to import

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return MetricSummary(mean, half, values)
