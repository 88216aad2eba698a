"""Resuming a sweep: a run file is kept only when it is a valid record of that very run (an
edited or broken one is named and trained again), and distinct lambdas never share a file."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_cli_errors import TINY

from galfast.cli import build_parser, main
from galfast.cli import sweep as sweep_module
from galfast.experiments import ExperimentConfig

pytest.importorskip("matplotlib")

SWEEP = ["sweep", *TINY, "--audit", "fast", "--lam", "0", "--distance", "tv"]
RUN_FILE = "synthetic-graph-gcn-node-tv-lam0-seed0.json"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A sweep folder holding one trained run (trained once for every test here)."""
    out = tmp_path_factory.mktemp("sweep")
    assert main([*SWEEP, "--out", str(out)]) == 0
    return out


def _audits(record):
    return record["attributes"]["sensitive"]


def _results(record):
    return _audits(record)["audit"]["results"]


def _set_node_f1(value):
    def edit(record):
        _audits(record)["attack"]["node"]["macro_f1"] = value

    return edit


EDITS = {
    "auc as text": lambda r: r.update(task={"auc": "abc"}),
    "no auc": lambda r: r.update(task={}),
    "null auc": lambda r: r.update(task={"auc": None}),
    "NaN auc": lambda r: r.update(task={"auc": math.nan}),
    "auc past 1": lambda r: r.update(task={"auc": 1.5}),
    "attributes as text": lambda r: r.update(attributes="x"),
    "no task": lambda r: r.pop("task"),
    "no attacks": lambda r: _audits(r).update(attack={}),
    "no baseline": lambda r: _audits(r).update(baseline={}),
    "macro_f1 as text": _set_node_f1("high"),
    "macro_f1 past 1": _set_node_f1(7.5),
    "macro_f1 past floats": _set_node_f1(10**400),
    "macro_f1 as a bool": _set_node_f1(True),
    "another attribute": lambda r: r.update(attributes={"other": _audits(r)}),
    "no attacker": lambda r: _audits(r)["attack"]["node"].pop("attacker"),
    # The audit's cells, which the summary reads: a crash in the summary before.
    "audit as text": lambda r: _audits(r).update(audit="edited"),
    "results as text": lambda r: _audits(r)["audit"].update(results="x"),
    "a result as text": lambda r: _results(r).__setitem__(0, "x"),
    "majority as text": lambda r: _results(r)[0].update(majority="x"),
    "majority past 1": lambda r: _results(r)[0]["majority"].update(macro_f1=4.0),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_run_record_is_named_and_trained_again(
    edit, finished, tmp_path, capsys, monkeypatch
):
    shutil.copytree(finished / "runs", tmp_path / "runs")
    path = tmp_path / "runs" / RUN_FILE
    good = json.loads(path.read_text())
    record = json.loads(path.read_text())
    EDITS[edit](record)
    path.write_text(json.dumps(record))
    trained = []

    def train(config, progress):
        trained.append(config)
        return SimpleNamespace(record=good)

    monkeypatch.setattr(sweep_module, "run_experiment", train)
    capsys.readouterr()
    assert main([*SWEEP, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"note: {path} is not a valid run record (" in out
    assert "; training that run again" in out
    assert len(trained) == 1
    assert json.loads(path.read_text()) == good


def test_json_nested_past_the_parsers_depth_is_trained_again(
    finished, tmp_path, capsys, monkeypatch
):
    shutil.copytree(finished / "runs", tmp_path / "runs")
    path = tmp_path / "runs" / RUN_FILE
    good = json.loads(path.read_text())
    path.write_text("[" * 100_000)
    monkeypatch.setattr(
        sweep_module, "run_experiment", lambda *a, **k: SimpleNamespace(record=good)
    )
    assert main([*SWEEP, "--out", str(tmp_path)]) == 0
    assert "is not a valid run record (maximum recursion depth" in capsys.readouterr().out


def test_an_untouched_run_record_is_kept(finished, tmp_path, monkeypatch):
    shutil.copytree(finished / "runs", tmp_path / "runs")
    monkeypatch.setattr(sweep_module, "run_experiment", None)  # a call would fail the test
    assert main([*SWEEP, "--out", str(tmp_path)]) == 0


def test_distinct_lambdas_get_distinct_run_files_and_usual_ones_keep_their_names(tmp_path):
    def name(lam):
        config = ExperimentConfig(dataset="synthetic-graph", lam=lam)
        return re.search(r"-tv-(lam.*)-seed0", sweep_module.run_path(tmp_path, config).name)[1]

    usual = [0.0, 0.1, 0.5, 1.0, 2.0, 10.0, 1e-05, 1e20]
    assert [name(lam) for lam in usual] == [f"lam{lam:g}" for lam in usual]  # as sweeps wrote
    assert name(0.1000001) == "lam0.1000001" != name(0.1)
    assert name(123456789.0) == "lam123456789.0" != name(123457000.0)


def test_minus_zero_is_lambda_zero():
    args = build_parser().parse_args(["sweep", "--out", "o", "--lam=-0,1"])
    assert [math.copysign(1, lam) for lam in args.lam] == [1, 1]
    args = build_parser().parse_args(["run", "--lam", "-0"])
    assert math.copysign(1, args.lam) == 1


def test_a_diverged_run_is_named_and_the_rest_of_the_grid_summarised(tmp_path, capsys):
    """One lambda past the floats' range stopped the whole sweep: no summary, and the runs
    after it never trained."""
    out = tmp_path / "sweep"
    argv = ["sweep", *TINY, "--attacks", "node", "--audit", "fast", "--distance", "tv"]
    assert main([*argv, "--lam", "1e20,0", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("galfast sweep: diverged, not in the summaries: ")
    assert "-tv-lam1e+20-seed0: training diverged at lambda=1e+20" in err[0]
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "synthetic-graph-gcn-node-tv-lam0-seed0.json",
        "synthetic-graph-gcn-node-tv-lam1e+20-seed0.diverged.json",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert [row["lambda"] for row in summary] == [0.0]
    assert (out / "summary.csv").is_file() and (out / "tradeoff.png").is_file()


def test_a_grid_that_diverges_everywhere_is_one_error_line(tmp_path, capsys):
    argv = ["sweep", *TINY, "--attacks", "node", "--audit", "fast", "--distance", "tv"]
    assert main([*argv, "--lam", "1e20", "--out", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("galfast sweep: error: every run diverged (1)")


DIVERGING = ["sweep", *TINY, "--attacks", "node", "--audit", "fast", "--distance", "tv"]
DIVERGED_MARK = "synthetic-graph-gcn-node-tv-lam1e+20-seed0.diverged.json"


def test_a_resumed_sweep_does_not_train_a_diverged_run_again(tmp_path, capsys, monkeypatch):
    """Every resume trained the diverged lambda again, to the same divergence."""
    out = tmp_path / "sweep"
    argv = [*DIVERGING, "--lam", "1e20,0", "--out", str(out)]
    assert main(argv) == 1
    capsys.readouterr()
    monkeypatch.setattr(sweep_module, "run_experiment", None)  # a call would fail the test
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "0 run(s) trained, 1 finished run(s) skipped, 1 diverged" in captured.out
    (line,) = captured.err.strip().splitlines()
    assert "lam1e+20-seed0: training diverged at lambda=1e+20" in line
    assert line.endswith("(marked in an earlier sweep)")


def test_deleting_the_mark_trains_the_diverged_run_again(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [*DIVERGING, "--lam", "1e20", "--out", str(out)]
    assert main(argv) == 2
    (out / "runs" / DIVERGED_MARK).unlink()
    capsys.readouterr()
    assert main(argv) == 2  # trained, and diverged, again
    assert "every run diverged (1)" in capsys.readouterr().err
    assert (out / "runs" / DIVERGED_MARK).is_file()


@pytest.mark.parametrize("text", ["not json", "[]", '{"config": {}, "diverged": 1}'])
def test_a_mark_galfast_did_not_write_is_named_and_the_run_trained(tmp_path, capsys, text):
    out = tmp_path / "sweep"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / DIVERGED_MARK).write_text(text)
    assert main([*DIVERGING, "--lam", "1e20", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert f"{DIVERGED_MARK} is not a mark galfast wrote; training that run again" in captured.out
    assert "marked in an earlier sweep" not in captured.err
    assert json.loads((out / "runs" / DIVERGED_MARK).read_text())["diverged"].startswith(
        "training diverged at lambda=1e+20"
    )


def test_a_mark_of_other_settings_is_not_this_runs(tmp_path, capsys):
    """A mark written before the settings changed (another epoch count) does not stop the run,
    and a run that then finishes removes it."""
    out = tmp_path / "sweep"
    (out / "runs").mkdir(parents=True)
    config = ExperimentConfig(dataset="synthetic-graph", lam=0.0, epochs=999)
    mark = {"config": config.to_dict(), "diverged": "training diverged at lambda=0 (x)"}
    (out / "runs" / RUN_FILE.replace(".json", ".diverged.json")).write_text(json.dumps(mark))
    assert main([*SWEEP, "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == [RUN_FILE]
