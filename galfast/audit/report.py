"""The audit report: per attack and attacker family, metrics with confidence intervals."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from galfast.audit.bounds import TradeoffBound
from galfast.audit.metrics import PRIMARY_METRIC, clipped_interval, higher_is_stronger
from galfast.audit.stats import MetricSummary

__all__ = ["AttackResult", "AuditReport", "score_text"]

PAPER_NOTE = (
    "auc = ranking ROC-AUC from the attacker's scores. The paper's MovieLens 'AUC' "
    "was computed on thresholded predictions, which equals balanced_accuracy: compare "
    "balanced_accuracy with the paper's AUC column, macro_f1 with its F1 columns."
)

# What the numbers mean, printed under every report.
LEGEND = (
    "chance = the best score of a predictor that ignores the embeddings (the majority class, "
    "or random guesses at the training class frequencies; for continuous attributes the "
    "training mean or median). The 95% CI spans the attackers' seeds (initialisation, batch "
    "order, walks) on one fixed test split: it leaves out the test set's sampling error."
)
# Why a neighbourhood attack can beat chance on embeddings that hold nothing.
PARTNER_NOTE = (
    "neighbor / nhop attacks train on (partner's embedding, node's label) of training nodes, "
    "and a test node's partner is often a training node: on a homophilous graph they beat "
    "chance even on pure-noise embeddings, by remembering partners and the labels around them."
)


@dataclass
class AttackResult:
    """One (attribute, attack, attacker family) cell of the audit.

    Attributes:
        attribute, kind: the sensitive attribute and its kind.
        attack: the pairing (``"node"``, ``"neighbor"``, ``"nhop:n"``).
        attacker: the family (``"mlp"``, ``"linear"``).
        metrics: metric name -> :class:`MetricSummary` over seeds.
        baseline: the chance level of each metric (:func:`~galfast.audit.chance.chance_levels`:
            the best predictor that ignores the embeddings), averaged over seeds.
        n_train, n_test: nodes with a successful pairing, averaged over seeds.
        pair_failures: walks that failed (nodes dropped), averaged over seeds.
        config: how the attacker was built and chosen: what it reads, its capacity and
            training, and for tuned families the validation score that chose it.
        majority: the same metrics for the constant predictor alone (the training majority
            class; the training mean for a continuous attribute), averaged over seeds.

    A metric undefined on every seed's test split (macro-F1 where it holds one class) is
    missing from ``metrics`` and ``baseline``.
    """

    attribute: str
    kind: str
    attack: str
    attacker: str
    metrics: dict[str, MetricSummary]
    baseline: dict[str, float]
    n_train: float
    n_test: float
    pair_failures: float
    config: dict[str, Any] = field(default_factory=dict)
    majority: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # built by hand with another kind, it failed later as a KeyError in strength()
        if self.kind not in PRIMARY_METRIC:
            raise ValueError(f"kind must be one of {sorted(PRIMARY_METRIC)}, got {self.kind!r}")

    @property
    def primary(self) -> str:
        return PRIMARY_METRIC[self.kind]

    def strength(self) -> float:
        """The primary metric's mean, signed so that larger = stronger attacker; -inf where
        it is undefined (nothing was measured)."""
        if self.primary not in self.metrics:
            return -math.inf
        value = self.metrics[self.primary].mean
        return value if higher_is_stronger(self.primary) else -value


@dataclass
class AuditReport:
    """What :func:`galfast.audit` found. ``str(report)`` prints tables; :meth:`to_json`
    serialises everything.

    The headline is the worst case: for each attribute and attack, the strongest attacker
    family (highest macro-F1; lowest MAE for continuous attributes), see :meth:`headline`.
    """

    results: list[AttackResult]
    tradeoff: list[TradeoffBound] = field(default_factory=list)
    seeds: int = 1
    config: dict[str, Any] = field(default_factory=dict)

    def headline(self) -> list[AttackResult]:
        """The strongest family per (attribute, attack), in the order the attacks ran."""
        best: dict[tuple[str, str], AttackResult] = {}
        for r in self.results:
            key = (r.attribute, r.attack)
            if key not in best or r.strength() > best[key].strength():
                best[key] = r
        return list(best.values())

    def worst_case(self, attribute: str) -> AttackResult:
        """The strongest (attack, family) for ``attribute``."""
        cells = [r for r in self.results if r.attribute == attribute]
        if not cells:
            raise ValueError(f"no results for attribute {attribute!r}")
        return max(cells, key=AttackResult.strength)

    def result(self, attribute: str, attack: str, attacker: Optional[str] = None) -> AttackResult:
        """The cell for (attribute, attack, family); the strongest family when None."""
        cells = [
            r
            for r in self.results
            if r.attribute == attribute
            and r.attack == attack
            and (attacker is None or r.attacker == attacker)
        ]
        if not cells:
            raise ValueError(f"no result for {attribute!r}, {attack!r}, {attacker!r}")
        return max(cells, key=AttackResult.strength)

    def worst_cases(self) -> list[AttackResult]:
        """:meth:`worst_case` of every attribute, in the order they were audited: the
        report's headline claim. The maximum is taken over test scores of many cells, so
        it leans high, which errs on the side of reporting a leak."""
        return [self.worst_case(a) for a in dict.fromkeys(r.attribute for r in self.results)]

    def describe_worst_case(self, cell: AttackResult) -> str:
        """One line: the strongest attacker, its configuration, its primary metric with the
        95% interval over seeds, the chance level and the constant predictor's score."""
        if not isinstance(cell, AttackResult):  # an attribute's name failed on .metrics
            raise TypeError(
                f"cell must be an AttackResult (e.g. report.worst_case(attribute)), got "
                f"{type(cell).__name__}"
            )
        config = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in cell.config.items()
            if k != "reads"
        )
        reads = cell.config.get("reads")
        return (
            f"worst case for {cell.attribute}: {cell.attacker} on the {cell.attack} attack"
            + (f" reading {reads}" if reads else "")
            + f": {_score(cell)}"
            + (f" [{config}]" if config else "")
            + f"; audit strength: {self.config.get('strength', 'fast')}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain Python data (JSON-ready): results, headline keys, worst cases, bounds,
        config."""
        return {
            "seeds": self.seeds,
            "config": dict(self.config),
            "results": [dataclasses.asdict(r) for r in self.results],
            "headline": [
                {"attribute": r.attribute, "attack": r.attack, "attacker": r.attacker}
                for r in self.headline()
            ],
            "worst_case": [
                {
                    "attribute": r.attribute,
                    "attack": r.attack,
                    "attacker": r.attacker,
                    "metric": r.primary,
                    "mean": _mean(r),
                    "ci": _interval(r),
                    "chance": r.baseline.get(r.primary),
                    "majority": r.majority.get(r.primary),
                    "config": dict(r.config),
                    "strength": self.config.get("strength", "fast"),
                }
                for r in self.worst_cases()
            ],
            "tradeoff": [dataclasses.asdict(t) for t in self.tradeoff],
            "note": PAPER_NOTE,
        }

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def __str__(self) -> str:
        if not self.results:  # printed nothing at all
            return "audit report: no results"
        blocks = ["\n".join(self.describe_worst_case(r) for r in self.worst_cases())]
        headline = {id(r) for r in self.headline()}
        for attribute in dict.fromkeys(r.attribute for r in self.results):
            cells = [r for r in self.results if r.attribute == attribute]
            names = list(dict.fromkeys(m for r in cells for m in r.metrics))
            header = ["attack", "attacker", *names, f"chance {cells[0].primary}", "n_test"]
            rows = [header]
            for r in cells:
                mark = "*" if id(r) in headline else ""
                rows.append(
                    [
                        r.attack,
                        r.attacker + mark,
                        *(str(r.metrics[m]) if m in r.metrics else "-" for m in names),
                        score_text(r.baseline.get(r.primary)),
                        f"{r.n_test:.0f}",
                    ]
                )
            widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
            spread = "mean ± 95% CI" if self.seeds > 1 else "mean (no interval)"
            lines = [
                f"{attribute} ({cells[0].kind}), {spread} over {self.seeds} seed(s); "
                "* = strongest family (headline)"
            ]
            for i, row in enumerate(rows):
                lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
                if i == 0:
                    lines.append("  ".join("-" * w for w in widths))
            blocks.append("\n".join(lines))
        for t in self.tradeoff:
            line = (
                f"trade-off ({t.attribute}): delta_Y|A = {t.delta_y_given_a:.3f}, "
                f"alpha = {t.alpha:.3f}: any task classifier errs >= "
                f"{t.error_bound_at_zero_advantage:.3f} at zero advantage"
            )
            if t.error_bound is not None:
                line += f"; >= {t.error_bound:.3f} at the measured advantage (estimate)"
            blocks.append(line)
        blocks.append(LEGEND)
        if any(r.attack != "node" for r in self.results):
            blocks.append(PARTNER_NOTE)
        if any(r.kind == "binary" for r in self.results):
            blocks.append(PAPER_NOTE)
        return "\n\n".join(blocks)


def score_text(value: Optional[float]) -> str:
    """A score to three decimals, "n/a" where there is none."""
    return "n/a" if value is None else f"{value:.3f}"


def _mean(cell: AttackResult) -> Optional[float]:
    summary = cell.metrics.get(cell.primary)
    return None if summary is None else summary.mean


def _interval(cell: AttackResult) -> Optional[list[float]]:
    """The primary metric's 95% interval within the metric's range; None for one seed or an
    undefined metric."""
    summary = cell.metrics.get(cell.primary)
    if summary is None or summary.ci is None:
        return None
    return list(clipped_interval(cell.primary, *summary.ci))


def _score(cell: AttackResult) -> str:
    """The primary metric with its interval, against chance and the constant predictor."""
    summary = cell.metrics.get(cell.primary)
    if summary is None:
        return f"{cell.primary} undefined (the test split holds one class of {cell.attribute})"
    interval = _interval(cell)
    spread = "n/a" if interval is None else f"{interval[0]:.3f}..{interval[1]:.3f}"
    constant = "mean" if cell.kind == "continuous" else "majority"
    return (
        f"{cell.primary} {summary.mean:.3f} (95% CI {spread} over {len(summary.values)} "
        f"seed(s)) vs chance {score_text(cell.baseline.get(cell.primary))} ({constant} "
        f"{score_text(cell.majority.get(cell.primary))})"
    )
