"""Inputs a demanding user gives the command line: yes/no spellings of loader flags, the t-SNE
of continuous and multi-label attributes, ..."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch
from cli_errors_helpers import one_error_line, refuse_training

from galfast.cli import build_parser, main
from galfast.cli import run as run_module
from galfast.cli import tsne as tsne_module
from galfast.cli.options import config_kwargs, experiment_config, prepare_checked
from galfast.experiments.config import Outcome
from galfast.gal.sensitive import SensitiveAttribute

pytest.importorskip("matplotlib")


def dataset_options(*argv: str) -> dict:
    """The loader options of a run, checked by the config as the command checks them."""
    kwargs = config_kwargs(build_parser().parse_args(["run", *argv]))
    experiment_config(**kwargs, lam=0.0, distance="tv", seed=0)
    return dict(kwargs["dataset_options"])


@pytest.mark.parametrize("spelling", ["false", "FALSE", "no", "Off", "0", " false"])
def test_a_loader_flag_reads_no_as_false(spelling):
    options = dataset_options("--dataset", "cora", "--option", f"download={spelling}")
    assert options["download"] is False


@pytest.mark.parametrize("spelling", ["true", "Yes", "on", "1", "TRUE"])
def test_a_loader_flag_reads_yes_as_true(spelling):
    options = dataset_options("--dataset", "cora", "--option", f"download={spelling}")
    assert options["download"] is True


def test_a_loader_flag_still_refuses_what_is_no_yes_or_no(capsys, monkeypatch):
    refuse_training(monkeypatch, run_module)
    argv = ["run", "--dataset", "cora", "--seeds", "1", "--option", "download=maybe"]
    assert main([*argv, "--quiet"]) == 2
    line = one_error_line(capsys, "run")
    assert "--option" in line and "download must be True or False, got 'maybe'" in line


def test_only_flags_are_read_as_yes_or_no():
    options = dataset_options("--dataset", "synthetic-graph", "--option", "num_features=1")
    assert options["num_features"] == 1 and options["num_features"] is not True


class FakeTSNE:
    """t-SNE's place for each point without its cost: the first two embedding columns."""

    def __init__(self, **kwargs):
        pass

    def fit_transform(self, x):
        return np.asarray(x)[:, :2]


def draw_tsne(monkeypatch, tmp_path, attribute, attack, class_names=(), lams="0"):
    """Runs ``galfast tsne`` on a made-up outcome with ``attribute`` and the node attacker's
    ``attack`` cell; returns the figure it saved."""
    embeddings = torch.randn(attribute.values.size(0), 4)
    record = {"attack": {"node": attack}}
    saved = []
    monkeypatch.setattr(tsne_module, "prepare_checked", lambda config: None)
    monkeypatch.setattr(
        tsne_module,
        "run_experiment",
        lambda config, progress: Outcome(record, embeddings, attribute, class_names),
    )
    monkeypatch.setattr("sklearn.manifold.TSNE", FakeTSNE)
    monkeypatch.setattr(tsne_module, "save_figure", lambda fig, path: saved.append(fig))
    argv = ["tsne", "--dataset", "synthetic-graph", "--lam", lams, "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "t.png")]) == 0
    return saved[0]


def test_tsne_colours_a_continuous_attribute_on_a_scale(monkeypatch, tmp_path):
    alpha = SensitiveAttribute("alpha", "continuous", torch.linspace(50.0, 90.0, 12))
    fig = draw_tsne(monkeypatch, tmp_path, alpha, {"mae": 2.1432, "rmse": 2.3}, lams="0,1")
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "lambda = 0 (tv), node attacker MAE 2.14",
        "lambda = 1 (tv), node attacker MAE 2.14",
    ]
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "alpha"]
    assert len(bars) == 2  # one colour bar per panel
    (dots,) = panels[0].collections
    assert np.allclose(dots.get_array(), np.linspace(50.0, 90.0, 12))
    assert panels[0].get_legend() is None


def test_tsne_colours_a_multilabel_node_by_its_first_label(monkeypatch, tmp_path):
    labels = torch.tensor([[1, 1, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 1, 0]])
    types = SensitiveAttribute("types", "multilabel", labels.float())
    fig = draw_tsne(monkeypatch, tmp_path, types, {"macro_f1": 0.25}, ("a", "b", "c"))
    (panel,) = [ax for ax in fig.axes if ax.get_title()]
    assert panel.get_title() == "lambda = 0 (tv), node attacker F1 0.25"
    legend = [t.get_text() for t in panel.get_legend().get_texts()]
    assert legend == ["a", "b", "c", "(none)"]
    counts = [len(dots.get_offsets()) for dots in panel.collections]
    assert counts == [2, 2, 1, 1]  # every node drawn once, under its first label


def test_audit_reads_embeddings_saved_with_requires_grad_without_a_warning(tmp_path, capsys):
    z = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))  # a split of both classes
    labels = (z[:, 0] > 0).long()
    torch.save(z.requires_grad_(), tmp_path / "z.pt")  # a model's output, not detached
    torch.save(labels, tmp_path / "y.pt")
    argv = ["audit", str(tmp_path / "z.pt"), "--labels", str(tmp_path / "y.pt")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main([*argv, "--strength", "fast", "--seeds", "1", "--epochs", "1", "--quiet"]) == 0
    assert "worst case for attribute" in capsys.readouterr().out


@pytest.mark.parametrize("lam", ["0", "-0", "0.0"])
def test_demo_refuses_a_defended_lambda_of_zero(lam, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--lam", lam])
    assert exit_info.value.code == 2
    line = one_error_line(capsys, "demo")
    assert "--lam" in line and "expected a lambda > 0" in line


def test_a_warning_is_one_line_naming_the_command(tmp_path, capsys):
    torch.save(torch.randn(10, 4), tmp_path / "z.pt")
    torch.save(torch.tensor([0, 1, 0] + [-1] * 7), tmp_path / "y.pt")  # no class 1 left to test
    argv = ["audit", str(tmp_path / "z.pt"), "--labels", str(tmp_path / "y.pt")]

    def show(message, category, filename, lineno, file=None, line=None):
        # Python's display: pytest records warnings instead of printing them
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    before = warnings.formatwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        assert main([*argv, "--strength", "fast", "--seeds", "1", "--epochs", "1", "--quiet"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("galfast audit: warning: attribute: no test node of the audit")
    assert warnings.formatwarning is before  # restored when the command ends


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--dataset", "synthetic-graph", "--option", "num_nodes=60"], "synthetic-graph"),
        (["--dataset", "cora"], "Planetoid"),
    ],
)
def test_the_attribute_help_names_the_default_a_run_uses(argv, named, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    kwargs = config_kwargs(build_parser().parse_args(["run", *argv]))
    prepared = prepare_checked(experiment_config(**kwargs, lam=0.0, distance="tv", seed=0))
    assert f"{prepared.attribute.name} for {named}" in help_text
