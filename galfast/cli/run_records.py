"""A sweep's stored run records, read back when it resumes: the record of the same run, or a
note and None for a file that is not a valid record (not written by galfast, or edited: a
metric out of its range, an attack or attribute the run does not have), which the sweep
trains again; and the marks of runs that diverged, so a resumed sweep does not train them
again (the same seeded run diverges again)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from galfast.cli.errors import UsageError
from galfast.cli.files import write_json
from galfast.cli.plots import METRIC_RANGE
from galfast.cli.summary import by_attribute
from galfast.experiments import ExperimentConfig, Prepared

__all__ = ["diverged_mark", "diverged_path", "finished_record", "mark_diverged"]


# What a stored run record must hold for the summary.
_RECORD_KEYS = ("config", "task_metric", "task", "attack", "baseline")


def finished_record(
    path: Path, config: ExperimentConfig, prepared: Prepared
) -> Optional[dict[str, Any]]:
    """The stored record when ``path`` holds this exact run, else None (a file that is not a
    valid run record is reported and trained again). Settings added to ExperimentConfig after
    a record was written count as their defaults; whether the steps were replayed from CUDA
    graphs does not count (the same steps either way)."""
    if not path.is_file():
        return None
    record, problem = _stored_json(path, "the run file")
    if problem is not None:
        return _invalid(path, problem)
    if not isinstance(record, dict):
        return _invalid(path, f"a JSON {type(record).__name__}, not an object")
    missing = [key for key in _RECORD_KEYS if key not in record]
    if missing or not isinstance(record["config"], dict):
        return _invalid(path, f"fields missing: {', '.join(missing) or 'config'}")
    if not _same_run(record["config"], config):
        return None
    problem = _record_problem(record, prepared)
    return record if problem is None else _invalid(path, problem)


def diverged_path(run_path: Path) -> Path:
    """Where the mark of a diverged run lies, beside the run file it did not get."""
    return run_path.with_name(run_path.stem + ".diverged.json")


def mark_diverged(run_path: Path, config: ExperimentConfig, why: str) -> None:
    """Records that the run ``config`` diverged (``why``: the one-line reason)."""
    write_json(diverged_path(run_path), {"config": config.to_dict(), "diverged": why})


def diverged_mark(run_path: Path, config: ExperimentConfig) -> Optional[str]:
    """The reason stored when this exact run diverged before, else None (no mark, a mark of
    other settings, or a file that is not a mark: the run is trained again)."""
    path = diverged_path(run_path)
    if not path.is_file():
        return None
    mark, _ = _stored_json(path, "the diverged run's mark")
    if not (
        isinstance(mark, dict)
        and isinstance(mark.get("config"), dict)
        and isinstance(mark.get("diverged"), str)
    ):
        print(f"note: {path} is not a mark galfast wrote; training that run again")
        return None
    return mark["diverged"] if _same_run(mark["config"], config) else None


def _stored_json(path: Path, what: str) -> tuple[Any, Optional[str]]:
    """(the JSON value in ``path``, None), or (None, why it is not JSON); a file that cannot be
    read is the user's error, naming ``what`` it is."""
    try:
        return json.loads(path.read_text()), None
    except OSError as error:
        raise UsageError(f"--out: cannot read {what} {path}: {error}") from None
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, or nested too deep
        return None, str(error) or type(error).__name__


def _same_run(saved: dict[str, Any], config: ExperimentConfig) -> bool:
    """Whether the stored ``saved`` settings are those of ``config``'s run."""
    saved = {**ExperimentConfig().to_dict(), **saved, "cuda_graphs": None}
    return saved == {**config.to_dict(), "cuda_graphs": None}


def _invalid(path: Path, why: str) -> None:
    print(f"note: {path} is not a valid run record ({why}); training that run again")


def _record_problem(record: dict[str, Any], prepared: Prepared) -> Optional[str]:
    """What makes ``record`` unfit for the summary and plots of a run ``prepared`` describes
    (a hand-edited metric, attack or attribute), None when nothing does."""
    metric = prepared.setup.task_metric
    if record["task_metric"] != metric:
        return f"task_metric {record['task_metric']!r}, not {metric!r}"
    task = record["task"]
    if not isinstance(task, dict) or metric not in task:
        return f"task holds no {metric}"
    problem = _metric_problem("task", metric, task[metric])
    if problem:
        return problem
    names = [a.name for a in prepared.attributes]
    audits = record.get("attributes")
    if audits is None and [record.get("attribute")] != names:
        return f"attribute {record.get('attribute')!r}, not {','.join(names)!r}"
    if audits is not None and (not isinstance(audits, dict) or list(audits) != names):
        return f"attributes are not {names}"
    if audits is not None and not all(isinstance(a, dict) for a in audits.values()):
        return "an attribute's audit is not an object"
    attacks = set(prepared.attacks)
    for name, (run,) in by_attribute([record]).items():
        for part in ("attack", "baseline"):
            cells = run[part]
            if not isinstance(cells, dict) or set(cells) != attacks:
                return f"{name}: {part} does not hold the attacks {sorted(attacks)}"
            for attack, cell in cells.items():
                problem = _cell_problem(f"{name} {part} {attack}", cell, part == "baseline")
                if problem:
                    return problem
        problem = _audit_problem(name, run.get("audit"))
        if problem:
            return problem
    return None


def _audit_problem(where: str, audit: Any) -> Optional[str]:
    """What makes a record's audit unfit for the summary, which reads each result cell's
    majority-class scores (a record written before audits were stored has none)."""
    if audit is None:
        return None
    results = audit.get("results", []) if isinstance(audit, dict) else None
    if not isinstance(results, list):
        return f"{where} audit is not an object with a list of results"
    for cell in results:
        majority = cell.get("majority", {}) if isinstance(cell, dict) else None
        if not isinstance(majority, dict):
            return f"{where} audit holds a result that is not an object with majority scores"
        for metric, value in majority.items():
            problem = value is not None and _metric_problem(f"{where} majority", metric, value)
            if problem:
                return problem
    return None


def _cell_problem(where: str, cell: Any, baseline: bool) -> Optional[str]:
    """An attack's metrics (with its ``attacker`` and a score for the plots) or its
    baseline's (where a metric may be null: undefined on the test split)."""
    if not isinstance(cell, dict):
        return f"{where} is not an object"
    if baseline:
        metrics = {name: value for name, value in cell.items() if value is not None}
    else:
        if not isinstance(cell.get("attacker"), str):
            return f"{where} names no attacker"
        # macro-F1 is missing where the audit's test split held one class; accuracy is not
        if not {"macro_f1", "mae", "accuracy"} & cell.keys():
            return f"{where} holds none of macro_f1, mae, accuracy"
        metrics = {name: value for name, value in cell.items() if name != "attacker"}
    for name, value in metrics.items():
        problem = _metric_problem(where, name, value)
        if problem:
            return problem
    return None


def _metric_problem(where: str, name: str, value: Any) -> Optional[str]:
    """Why ``value`` is not a score metric ``name`` can take: not a finite number, or out of
    the metric's range (F1, accuracy and AUC lie in [0, 1], errors are >= 0)."""
    if not _finite(value):
        return f"{where} {name} is {value!r}, not a finite number"
    low, high = METRIC_RANGE.get(name, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        return f"{where} {name} is {value!r}, outside [{low}, {'inf' if high is None else high}]"
    return None


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past the range of floats
        return False
