"""The QM9 setup end to end on the small canonical fixture: GAL on molecules through
run_experiment and the CLI, the adversary on the graph readouts with alpha, the records."""

from __future__ import annotations

import json

import pytest
import torch
from qm9_fixture import write_canonical

from galfast.cli import main
from galfast.datasets import qm9
from galfast.experiments import ConfigError, ExperimentConfig, prepare, run_experiment
from galfast.experiments.qm9 import molecule_split
from galfast.experiments.runner import sensitive_attribute
from galfast.train import GALTrainer

OPTIONS = (("download", False), ("source", "canonical"))


@pytest.fixture
def root(tmp_path):
    return str(write_canonical(tmp_path / "qm9"))


def config(root: str, **fields) -> ExperimentConfig:
    settings = dict(
        dataset="qm9",
        root=root,
        encoder="mpnn",
        epochs=2,
        attacker_epochs=2,
        audit_strength="fast",
        dataset_options=OPTIONS,
    )
    return ExperimentConfig(**{**settings, **fields})


@pytest.fixture
def adversary_spy(monkeypatch):
    """Records what every adversary step of GALTrainer saw: z's shape, the attributes and the
    targets the attackers regressed."""
    calls = []
    original = GALTrainer._adversary_update

    def spy(self, z, adversaries, picked):
        calls.append(
            {
                "z": tuple(z.shape),
                "attributes": [(a.attribute.name, a.attribute.kind) for a in adversaries],
                "targets": [targets.detach().clone() for _, targets in picked],
            }
        )
        return original(self, z, adversaries, picked)

    monkeypatch.setattr(GALTrainer, "_adversary_update", spy)
    return calls


def test_molecule_split_is_the_papers_on_qm9_and_a_tenth_each_on_small_sets():
    train, val, test = molecule_split(130_831)
    assert (test.numel(), val.numel(), train.numel()) == (10_000, 10_000, 110_831)
    assert torch.cat([train, val, test]).sort().values.equal(torch.arange(130_831))
    # A fixed shuffle, not the dataset order (whose first molecules are the smallest).
    assert not test.equal(torch.arange(10_000))
    train, val, test = molecule_split(6)
    assert (test.numel(), val.numel(), train.numel()) == (1, 1, 4)
    assert [part.numel() for part in molecule_split(4)] == [2, 1, 1]
    for count in (2, 3):  # one training molecule has no std to normalise the task by
        with pytest.raises(ValueError, match="at least 4 molecules"):
            molecule_split(count)


@pytest.mark.parametrize("molecules", [2, 3])
def test_too_few_molecules_to_split_is_one_cli_line(root, molecules, capsys):
    argv = ["run", "--dataset", "qm9", "--root", root, "--option", "source=canonical"]
    argv += ["--option", "download=False", "--option", f"molecules={molecules}"]
    argv += ["--encoder", "mpnn", "--epochs", "1", "--seeds", "1", "--audit", "fast"]
    assert main([*argv, "--quiet"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "at least 4 molecules" in error[0], error


def test_alpha_is_a_continuous_attribute_known_for_every_molecule(root):
    dataset = qm9(root, source="canonical", download=False)
    attribute = sensitive_attribute(dataset, "alpha")
    assert attribute.kind == "continuous"
    assert attribute.known(len(dataset)).nodes.equal(torch.arange(len(dataset)))


def test_lam_zero_trains_no_adversary_and_records_task_and_attacker_mae(root, adversary_spy):
    outcome = run_experiment(config(root, lam=0.0), progress=False)
    record = outcome.record
    assert adversary_spy == []
    assert record["setup"] == "qm9" and record["attribute"] == "alpha"
    assert record["task_metric"] == "mae"
    assert {"mae", "val_mae", "final_mae", "best_epoch"} <= set(record["task"])
    assert record["task"]["mae"] > 0
    # Only the node attack applies to whole-molecule embeddings; its score is an MAE.
    assert set(record["attack"]) == {"node"}
    assert record["attack"]["node"]["mae"] > 0 and "macro_f1" not in record["attack"]["node"]
    # The frozen readouts of every molecule: Set2Set's 2 * 64 columns.
    assert outcome.embeddings.shape == (6, 128)
    assert outcome.attribute.kind == "continuous"


def test_lam_positive_runs_the_adversary_on_graph_readouts_with_alpha(root, adversary_spy):
    dataset = qm9(root, source="canonical", download=False)
    plain = run_experiment(config(root, lam=0.0), progress=False)
    adversary_spy.clear()
    hidden = run_experiment(config(root, lam=0.5), progress=False)
    train, _, _ = molecule_split(len(dataset))
    # One step per batch per epoch (the 4 training molecules fit one batch).
    assert len(adversary_spy) == 2
    for call in adversary_spy:
        assert call["z"] == (train.numel(), 128)  # one row per molecule, not per atom
        assert call["attributes"] == [("alpha", "continuous")]
        seen = call["targets"][0].view(-1).sort().values
        assert torch.equal(seen, dataset.attributes["alpha"][train].sort().values)
    # The adversary changed the encoder: same seed, other embeddings.
    assert not torch.allclose(plain.embeddings, hidden.embeddings)


def test_graph_attacks_and_pairings_are_refused_and_the_default_attacks_kept_to_node(root):
    assert prepare(config(root)).attacks == ("node",)
    with pytest.raises(ConfigError, match="only the node attack applies") as error:
        prepare(config(root, attacks=("node", "nhop:2")))
    assert error.value.field == "attacks"
    with pytest.raises(ConfigError, match="reads node, not neighbor") as error:
        prepare(config(root, pairing="neighbor"))
    assert error.value.field == "pairing"


def test_mpnn_is_for_molecule_datasets_and_qm9_for_the_mpnn():
    with pytest.raises(ConfigError, match="mpnn encodes molecules.*not cora") as error:
        ExperimentConfig(dataset="cora", encoder="mpnn")
    assert error.value.field == "encoder"
    with pytest.raises(ConfigError, match="use encoder mpnn, not gcn"):
        ExperimentConfig(dataset="qm9", encoder="gcn")


def test_cli_run_prints_and_writes_task_and_attacker_mae(root, tmp_path, capsys):
    out = tmp_path / "runs.json"
    argv = ["run", "--dataset", "qm9", "--root", root, "--option", "source=canonical"]
    argv += ["--option", "download=False", "--encoder", "mpnn", "--lam", "0.05"]
    argv += ["--epochs", "1", "--attacker-epochs", "1", "--seeds", "1", "--audit", "fast"]
    assert main([*argv, "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "task mae" in printed and "node mae" in printed and "macro_f1" not in printed
    assert "mean " in printed and "majority" not in printed
    written = json.loads(out.read_text())
    run = written["runs"][0]
    assert run["config"]["encoder"] == "mpnn" and run["config"]["lam"] == 0.05
    assert run["task"]["mae"] > 0 and run["attack"]["node"]["mae"] > 0
    assert written["summary"]["attack"]["node"]["mae"]["mean"] == run["attack"]["node"]["mae"]


def test_cli_refuses_mpnn_off_molecules_in_one_line(capsys):
    assert main(["run", "--dataset", "cora", "--encoder", "mpnn", "--epochs", "1"]) != 0
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("galfast run: error: --encoder: mpnn encodes molecules")


def test_molecules_option_keeps_a_seeded_subset_molecule_for_molecule(root):
    from galfast.datasets import load

    full = qm9(root, source="canonical", download=False)
    part = load("qm9", root=root, molecules=3, **dict(OPTIONS))
    assert len(part) == 3 and "subset of 3 of the 6" in part.notes[-1]
    kept = [full.ids.tolist().index(i) for i in part.ids.tolist()]
    assert kept == sorted(kept)
    whole, picked = full.batch(kept), part.batch([0, 1, 2])
    for name in ("x", "z", "pos", "edge_index", "edge_attr", "batch", "y"):
        assert torch.equal(getattr(whole, name), getattr(picked, name)), name
    assert torch.equal(part.attributes["alpha"], full.attributes["alpha"][kept])
    assert part.ids.equal(load("qm9", root=root, molecules=3, **dict(OPTIONS)).ids)
    with pytest.raises(ValueError, match=r"count must lie in \[1, 7\), got 7"):
        full.subset(7)


def test_wasserstein_is_refused_for_the_continuous_attribute_up_front():
    with pytest.raises(ConfigError, match="continuous attribute: distance wasserstein") as error:
        ExperimentConfig(dataset="qm9", encoder="mpnn", distance="wasserstein", lam=0.5)
    assert error.value.field == "distance"


def test_cli_sweep_plots_the_attacker_mae(root, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--dataset", "qm9", "--root", root, "--option", "source=canonical"]
    argv += ["--option", "download=False", "--encoder", "mpnn", "--lam", "0,0.5"]
    argv += ["--distance", "tv", "--epochs", "1", "--attacker-epochs", "1", "--seeds", "1"]
    assert main([*argv, "--audit", "fast", "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "node mae" in capsys.readouterr().out
    assert any(path.suffix == ".png" for path in out.iterdir())
    assert "mae" in json.dumps(summary)
