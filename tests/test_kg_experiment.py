"""GAL on knowledge graphs end to end on the generated FB15k-237 / WN18RR folders: the setup,
its settings and refusals, run_experiment and the CLI."""

from __future__ import annotations

import json

import pytest
from kg_fixtures import SMALL_MODEL, pin_folder, write_fb15k_237, write_wn18rr

from galfast.cli import main
from galfast.experiments import ConfigError, ExperimentConfig, run_experiment
from galfast.experiments import knowledge_graph as kg_setup
from galfast.experiments.kg_options import KG_MODEL_OPTIONS, kg_model_options
from galfast.experiments.runner import SETUPS, prepare

# The tiny fixtures' audit splits leave classes out of their test nodes: the audit warns
# (tested in tests/test_audit_undefined.py); these tests are about training and records.
pytestmark = pytest.mark.filterwarnings("ignore:.* no test node of the audit holds class")

pytest.importorskip("matplotlib")

SMALL_ARGS = [arg for key, value in SMALL_MODEL for arg in ("--model-option", f"{key}={value}")]


@pytest.fixture
def root(tmp_path, monkeypatch):
    pin_folder(monkeypatch, "wn18rr", write_wn18rr(tmp_path / "wn18rr"))
    pin_folder(monkeypatch, "fb15k-237", write_fb15k_237(tmp_path / "fb15k-237"))
    return tmp_path


def _config(root, dataset="wn18rr", **fields) -> ExperimentConfig:
    base = dict(
        dataset=dataset,
        root=str(root),
        encoder="compgcn",
        epochs=2,
        pretrain_epochs=1,
        attacker_epochs=2,
        attacks=("node",),
        model_options=SMALL_MODEL,
        dataset_options=(("top_types", 3),) if dataset == "fb15k-237" else (),
    )
    return ExperimentConfig(**{**base, **fields})


def test_the_setup_has_the_papers_budget_and_is_registered(root):
    assert kg_setup.KNOWLEDGE_GRAPH in SETUPS
    setup = kg_setup.KNOWLEDGE_GRAPH
    assert (setup.epochs, setup.pretrain_epochs, setup.task_metric) == (155, 35, "mrr")
    options = kg_model_options(())
    assert options["decoder"] == "conve" and options["composition"] == "corr"
    assert (options["dim"], options["lr"], options["batch_size"]) == (200, 0.001, 128)
    prepared = prepare(_config(root, pretrain_epochs=None, epochs=None))
    assert (prepared.epochs, prepared.pretrain_epochs) == (155, 35)
    assert prepared.attribute.name == "sense" and prepared.attribute.kind == "categorical"


def test_fb15k_237_hides_its_multilabel_types_by_default(root):
    prepared = prepare(_config(root, "fb15k-237"))
    assert prepared.attribute.name == "types" and prepared.attribute.kind == "multilabel"


@pytest.mark.parametrize(
    "fields, field, message",
    [
        (dict(dataset="cora", model_options=()), "encoder", "encodes knowledge graphs"),
        (dict(encoder="gcn"), "encoder", "is a knowledge graph"),
        (dict(model_options=(("decoder", "transe"),)), "model_options", "decoder"),
        (dict(model_options=(("dim", 64),)), "model_options", "k_w \\* k_h"),
        (dict(model_options=(("depth", 2),)), "model_options", "no model option 'depth'"),
        (dict(model_options=(("lr", 0),)), "model_options", "model option lr must be > 0"),
        (dict(model_options=(("layers", 3),)), "model_options", "layers"),
        (dict(model_options=(("dim", 8), ("dim", 8))), "model_options", "twice"),
    ],
)
def test_bad_settings_are_refused(root, fields, field, message):
    with pytest.raises(ConfigError, match=message) as error:
        _config(root, **fields)
    assert error.value.field == field


def test_model_options_are_refused_outside_knowledge_graphs():
    with pytest.raises(ConfigError, match="take") as error:
        ExperimentConfig(dataset="cora", model_options=(("dim", 8),))
    assert error.value.field == "model_options"


def _spy_attacker(monkeypatch):
    """Records the width and gradient flag of what the training adversaries read."""
    seen = []
    fit = kg_setup.GALTrainer.fit

    def spy(trainer, graph, batches, sensitive, *args, **kwargs):
        attackers = (
            trainer.attacker.values() if hasattr(trainer.attacker, "values") else [trainer.attacker]
        )
        for attacker in attackers:
            attacker.register_forward_pre_hook(
                lambda module, inputs: seen.append((inputs[0].shape[1], inputs[0].requires_grad))
            )
        return fit(trainer, graph, batches, sensitive, *args, **kwargs)

    monkeypatch.setattr(kg_setup.GALTrainer, "fit", spy)
    return seen


@pytest.mark.parametrize("dataset", ["wn18rr", "fb15k-237"])
def test_a_run_records_link_metrics_and_audits_each_attribute(root, monkeypatch, dataset):
    seen = _spy_attacker(monkeypatch)
    attribute = "pos,sense" if dataset == "wn18rr" else None
    outcome = run_experiment(_config(root, dataset, lam=1.0, attribute=attribute), False)
    record = outcome.record
    assert record["setup"] == "knowledge-graph" and record["task_metric"] == "mrr"
    assert set(record["task"]) == {"mrr", "mr", "hits@1", "hits@3", "hits@10"}
    assert 0 < record["task"]["mrr"] <= 1 and record["task"]["mr"] >= 1
    assert record["pretrain_epochs"] == 1
    names = ["pos", "sense"] if dataset == "wn18rr" else ["types"]
    assert list(record["attributes"]) == names
    for name in names:
        assert {c["attribute"] for c in record["attributes"][name]["audit"]["results"]} == {name}
    assert outcome.embeddings.shape == (6 if dataset == "wn18rr" else 7, 32)
    # lam > 0: after the task-only epoch the adversaries read the encoder's entity embeddings.
    assert seen and all(seen_one == (32, True) for seen_one in seen)


def test_without_lambda_no_adversary_trains(root, monkeypatch):
    seen = _spy_attacker(monkeypatch)
    run_experiment(_config(root, lam=0.0), False)
    assert seen == []


def test_the_pretrain_epochs_keep_the_adversary_off(root, monkeypatch):
    seen = _spy_attacker(monkeypatch)
    run_experiment(_config(root, lam=1.0, pretrain_epochs=2), False)
    assert seen == []


def test_distmult_and_a_second_layer_run(root):
    options = (*SMALL_MODEL, ("decoder", "distmult"), ("layers", 2), ("composition", "sub"))
    record = run_experiment(_config(root, model_options=options), False).record
    assert record["config"]["model_options"]["decoder"] == "distmult"
    assert 0 < record["task"]["mrr"] <= 1


def test_max_batches_limits_each_epoch(root, monkeypatch):
    steps = []
    task_step = kg_setup.GALTrainer._task_step

    def count(trainer, *args):
        steps.append(1)
        return task_step(trainer, *args)

    monkeypatch.setattr(kg_setup.GALTrainer, "_task_step", count)
    options = (*SMALL_MODEL, ("batch_size", 2), ("max_batches", 1))
    run_experiment(_config(root, model_options=options, epochs=3), False)
    assert len(steps) == 3  # one batch of each epoch (of 4 without the limit)


def test_cli_run_and_sweep(root, tmp_path, capsys):
    common = [
        "--dataset",
        "wn18rr",
        "--root",
        str(root),
        "--encoder",
        "compgcn",
        *SMALL_ARGS,
        "--epochs",
        "2",
        "--pretrain-epochs",
        "1",
        "--attacker-epochs",
        "2",
        "--attacks",
        "node",
        "--audit",
        "fast",
        "--quiet",
    ]
    out = tmp_path / "run.json"
    assert main(["run", *common, "--attribute", "pos", "--lam", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert '"mrr"' in text and '"hits@10"' in text and '"pos"' in text
    sweep_out = tmp_path / "sweep"
    argv = [
        "sweep",
        *common,
        "--lam",
        "0,1",
        "--distance",
        "tv",
        "--seeds",
        "1",
        "--out",
        str(sweep_out),
    ]
    code = main(argv)
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--dataset", "cora", "--encoder", "compgcn"],
            "--encoder: compgcn encodes knowledge graphs",
        ),
        (["--dataset", "wn18rr"], "--encoder: wn18rr is a knowledge graph"),
        (
            ["--dataset", "wn18rr", "--encoder", "compgcn", "--model-option", "decoder=x"],
            "--model-option",
        ),
        (["--dataset", "cora", "--model-option", "dim=8"], "--model-option"),
    ],
)
def test_cli_refuses_mismatched_encoders_and_options(argv, message, capsys):
    assert main(["run", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_every_default_is_an_option():
    # Each default passes its own check.
    assert kg_model_options(tuple(KG_MODEL_OPTIONS.items())) == KG_MODEL_OPTIONS
    assert json.loads(json.dumps(KG_MODEL_OPTIONS)) == KG_MODEL_OPTIONS  # records hold them
