"""Hiding several attributes at once: one adversary each in training, one audit each after,
from the library (ExperimentConfig) and from the CLI (--attribute gender,age)."""

from __future__ import annotations

import csv
import json

import pytest

from galfast.cli import main
from galfast.cli.summary import by_attribute
from galfast.experiments import ConfigError, ExperimentConfig, run_experiment
from galfast.experiments import movielens as movielens_setup

pytest.importorskip("matplotlib")

# The tiny fixtures' audit splits leave classes out of their test nodes: the audit warns
# (tested in tests/test_audit_undefined.py); these tests are about training and records.
pytestmark = pytest.mark.filterwarnings("ignore:.* no test node of the audit holds class")

TINY_OPTIONS = (("num_movies", 60), ("num_ratings", 1500), ("num_users", 80))
TINY_MOVIELENS = [
    "--dataset",
    "synthetic-movielens",
    *(arg for key, value in TINY_OPTIONS for arg in ("--option", f"{key}={value}")),
    "--epochs",
    "1",
    "--attacker-epochs",
    "1",
    "--attacks",
    "node",
    "--audit",
    "fast",
    "--quiet",
]


def _config(**fields) -> ExperimentConfig:
    base = dict(
        dataset="synthetic-movielens",
        dataset_options=TINY_OPTIONS,
        epochs=1,
        attacker_epochs=1,
        attacks=("node",),
    )
    return ExperimentConfig(**{**base, **fields})


@pytest.mark.parametrize("attribute", ["gender,,age", "gender,gender", "gender, age", ""])
def test_malformed_attribute_lists_are_refused(attribute):
    with pytest.raises(ConfigError, match="attribute") as error:
        _config(attribute=attribute)
    assert error.value.field == "attribute"


def test_an_unknown_name_in_the_list_is_refused_before_training(capsys):
    argv = ["run", *TINY_MOVIELENS, "--attribute", "gender,zodiac"]
    assert main(argv) == 2
    assert "no attribute 'zodiac'" in capsys.readouterr().err


def test_joint_training_gives_every_attribute_its_own_adversary(monkeypatch):
    seen = {}
    fit = movielens_setup.GALTrainer.fit

    def spy(trainer, graph, batches, sensitive, *args, **kwargs):
        seen["sensitive"] = [a.name for a in sensitive]
        seen["attackers"] = sorted(trainer.attacker.keys())
        return fit(trainer, graph, batches, sensitive, *args, **kwargs)

    monkeypatch.setattr(movielens_setup.GALTrainer, "fit", spy)
    record = run_experiment(_config(attribute="gender,age,occupation", lam=0.5), False).record
    assert seen == {
        "sensitive": ["gender", "age", "occupation"],
        "attackers": ["age", "gender", "occupation"],
    }
    assert list(record["attributes"]) == ["gender", "age", "occupation"]
    assert record["attribute"] == "gender"
    assert record["attack"] == record["attributes"]["gender"]["attack"]
    for name, audited in record["attributes"].items():
        assert audited["audit"]["results"], name
        assert {cell["attribute"] for cell in audited["audit"]["results"]} == {name}


def test_joint_run_without_defence_audits_each_attribute_as_a_run_of_its_own():
    # lam = 0 trains no adversary, so the embeddings (and each attribute's audit) must equal
    # those of single-attribute runs: the extra attackers must not disturb the seeding.
    joint = run_experiment(_config(attribute="gender,age", lam=0.0), False)
    for name in ("gender", "age"):
        alone = run_experiment(_config(attribute=name, lam=0.0), False)
        assert alone.embeddings.equal(joint.embeddings)
        assert alone.record["attack"] == joint.record["attributes"][name]["attack"]


def test_run_prints_and_writes_every_attribute(tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["run", *TINY_MOVIELENS, "--attribute", "gender,age", "--lam", "0.5", "--seeds", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "gender" in printed and "age" in printed
    assert printed.count("task rmse") == 2  # one table per attribute
    data = json.loads(out.read_text())
    assert list(data["summaries"]) == ["gender", "age"]
    assert data["summary"] == data["summaries"]["gender"]
    assert "auc" in data["summaries"]["gender"]["attack"]["node"]
    assert "auc" not in data["summaries"]["age"]["attack"]["node"]  # ranking AUC: binary only


def test_sweep_writes_a_row_and_a_plot_per_attribute(tmp_path):
    argv = ["sweep", *TINY_MOVIELENS, "--attribute", "gender,age", "--lam", "0,1", "--seeds", "1"]
    assert main([*argv, "--distance", "tv", "--out", str(tmp_path)]) == 0
    runs = sorted(p.name for p in (tmp_path / "runs").glob("*.json"))
    assert len(runs) == 2 and all("-gender+age-" in name for name in runs)
    for name in ("tradeoff-gender.png", "tradeoff-age.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "tradeoff.png").exists()
    with open(tmp_path / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((r["attribute"], r["lambda"]) for r in rows) == [
        ("age", "0.0"),
        ("age", "1.0"),
        ("gender", "0.0"),
        ("gender", "1.0"),
    ]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {entry["attribute"] for entry in summary} == {"gender", "age"}


def test_records_written_before_joint_runs_summarise_as_their_one_attribute():
    old = {"attribute": "gender", "attack": {"node": {}}, "baseline": {"node": {}}, "task": {}}
    assert by_attribute([old, old]) == {"gender": [old, old]}
