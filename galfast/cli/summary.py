"""Mean and 95% CI over seeds of the runs' task and attacker metrics, and text tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from galfast.audit import summarize

__all__ = ["ATTACK_METRICS", "by_attribute", "format_table", "lambda_text", "summarize_runs"]

# Attacker metrics reported per attack: macro-F1 is the paper's Planetoid and age/occupation
# score; for binary attributes balanced accuracy is what the paper's MovieLens "AUC" column
# computed (thresholded predictions), auc the ranking ROC-AUC.
ATTACK_METRICS = ("macro_f1", "balanced_accuracy", "auc")
# Continuous attributes (QM9's polarizability) have no classes: the attacker's MAE, in the
# attribute's units (lower = more leaked).
ATTACK_METRICS += ("mae",)


def lambda_text(lam: float) -> str:
    """``lam`` as run files and tables name it: ``{lam:g}`` (``0``, ``0.1``, ``1e+20``) when
    that reads back as ``lam``, else its exact ``repr`` (``0.1000001``), so distinct lambdas
    never share a name."""
    short = f"{lam:g}"
    return short if float(short) == lam else repr(lam)


def by_attribute(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Runs of one setting -> per hidden attribute, the runs as if each had audited that
    attribute alone (its ``attack``, ``baseline`` and ``audit`` at the top level), in the
    order the run names them. A record written before runs could hide several attributes
    counts as one attribute's."""
    out: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        audits = record.get("attributes") or {record["attribute"]: {}}
        for name, audited in audits.items():
            out.setdefault(name, []).append({**record, **audited, "attribute": name})
    return out


def _stat(values: Sequence[float]) -> dict[str, Any]:
    s = summarize(list(values))
    return {"mean": s.mean, "ci95": s.half_width, "values": list(values)}


def _levels(record: dict[str, Any], attack: str) -> tuple[Optional[float], Optional[float]]:
    """``(chance, majority)`` macro-F1 of ``attack``'s headline cell in a run ``record``. A
    record written before the audit scored chance has no ``majority`` in its cells, and its
    ``baseline`` is the majority predictor's."""
    baseline = record["baseline"][attack].get("macro_f1")
    attacker = record["attack"][attack].get("attacker")
    for cell in record.get("audit", {}).get("results", []):
        if cell.get("attack") == attack and cell.get("attacker") == attacker:
            if "majority" not in cell:
                return None, baseline
            return baseline, cell["majority"].get("macro_f1")
    return baseline, None


def summarize_runs(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Runs of one setting (differing only by seed) -> ``{"n", "task_metric", "task":
    stat, "attack": {attack: {metric: stat, "chance_macro_f1", "majority_macro_f1"}}}``
    with ``stat = {"mean", "ci95", "values"}`` (``ci95`` is the Student-t half-width, None
    for one run). ``chance_macro_f1`` is the best macro-F1 of a predictor that ignores the
    embeddings (:mod:`galfast.audit.chance`), ``majority_macro_f1`` the majority class's
    alone; both are the first run's (None where unknown)."""
    if not records:
        raise ValueError("no runs to summarise")
    metric = records[0]["task_metric"]
    out: dict[str, Any] = {
        "n": len(records),
        "task_metric": metric,
        "task": _stat([r["task"][metric] for r in records]),
        "attack": {},
    }
    for attack in records[0]["attack"]:
        cells = {}
        for name in ATTACK_METRICS:
            values = [r["attack"][attack][name] for r in records if name in r["attack"][attack]]
            if len(values) == len(records):
                cells[name] = _stat(values)
        cells["chance_macro_f1"], cells["majority_macro_f1"] = _levels(records[0], attack)
        out["attack"][attack] = cells
    return out


def _cell(stat: dict[str, Any]) -> str:
    if stat["ci95"] is None:
        return f"{stat['mean']:.3f}"
    return f"{stat['mean']:.3f} ± {stat['ci95']:.3f}"


def format_table(rows: Sequence[tuple[dict[str, str], dict[str, Any]]]) -> str:
    """``rows`` of (leading columns, :func:`summarize_runs` output) -> an aligned text table
    with the task metric and, per attack, the attacker's macro-F1 (and balanced accuracy and
    ranking AUC when the attribute is binary)."""
    header: list[str] = []
    lines: list[list[str]] = []
    for lead, summary in rows:
        cols = list(lead) + ["runs", f"task {summary['task_metric']}"]
        cells = [*lead.values(), str(summary["n"]), _cell(summary["task"])]
        for attack, metrics in summary["attack"].items():
            for name in ATTACK_METRICS:
                if name in metrics:
                    cols.append(f"{attack} {name}")
                    cells.append(_cell(metrics[name]))
        header = header or cols
        lines.append(cells)
    table = [header, *lines]
    widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)
