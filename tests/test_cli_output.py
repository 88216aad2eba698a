"""What the command line shows and writes: --help text, trade-off plots, t-SNE legend, atomic
result files; and the library checks the CLI relies on (pairing bounds, config, options)."""

from __future__ import annotations

import json

import pytest
import torch

from galfast.cli import build_parser, main
from galfast.cli import plots as plots_module
from galfast.cli import tsne as tsne_module
from galfast.cli.errors import UsageError
from galfast.cli.files import atomic_write, check_writable, write_json
from galfast.datasets import load
from galfast.experiments import ConfigError, ExperimentConfig
from galfast.train import GALConfig

pytest.importorskip("matplotlib")


def help_text(command: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["demo", "run", "sweep", "audit", "tsne"])
def test_help_states_each_default_once_and_lists_as_typed(command, capsys):
    text = help_text(command, capsys)
    assert "(default: None)" not in text
    assert "(default: )" not in text
    assert "MovieLens) (default:" not in text  # a help that states its default gets no second
    assert "['" not in text and "[0.0" not in text  # no Python lists


def test_run_help_lists_defaults_comma_separated(capsys):
    text = help_text("run", capsys)
    assert "(default: node,neighbor)" in text and "(default: mlp,linear)" in text
    assert "(default: 150 Planetoid, 25 MovieLens)" in text


def test_tsne_help_offers_no_option_it_ignores(capsys):
    assert "--seeds" not in help_text("tsne", capsys)
    assert not hasattr(build_parser().parse_args(["tsne"]), "seeds")


def _summary(mean: float, ci: float, n: int, metric: str = "auc") -> dict:
    stat = {"mean": mean, "ci95": ci, "values": [mean] * n}
    return {
        "n": n,
        "task_metric": metric,
        "task": stat,
        "attack": {"node": {"macro_f1": dict(stat), "chance_macro_f1": 0.3}},
    }


class RecordingAxes:
    """Collects the fill_between bands and horizontal lines a plot draws."""

    def __init__(self, real):
        self.real, self.bands, self.hlines, self.labels = real, [], [], []

    def fill_between(self, x, low, high, **kwargs):
        self.bands.append((list(low), list(high)))
        return self.real.fill_between(x, low, high, **kwargs)

    def axhline(self, y, **kwargs):
        self.hlines.append((y, kwargs.get("label")))
        return self.real.axhline(y, **kwargs)

    def plot(self, *args, **kwargs):
        self.labels.append(kwargs.get("label"))
        return self.real.plot(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_tradeoff_bands_stay_in_range_and_say_their_seed_count(tmp_path, monkeypatch):
    plt = plots_module.pyplot()
    recorded = []
    subplots = plt.subplots

    def recording_subplots(*args, **kwargs):
        fig, axes = subplots(*args, **kwargs)
        wrapped = [[RecordingAxes(ax) for ax in row] for row in axes]
        recorded.extend(ax for row in wrapped for ax in row)
        return fig, wrapped

    monkeypatch.setattr(plt, "subplots", recording_subplots)
    series = {"tv": [(0.0, _summary(0.801, 0.204, 2)), (1.0, _summary(0.1, 0.3, 2))]}
    plots_module.plot_tradeoff(series, tmp_path / "t.png", ci_over="audit seeds")
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")
    top, bottom = recorded
    for ax in (top, bottom):
        ((low, high),) = ax.bands
        assert max(high) == 1.0 and min(low) == 0.0  # 1.005 and -0.2 clipped
        assert any("95% CI, 2 audit seeds" in (label or "") for label in ax.labels)
    assert (0.5, "chance (auc 0.5)") in bottom.hlines
    assert any(label == "chance" for _, label in top.hlines)


def test_tsne_legend_names_every_class():
    plt = plots_module.pyplot()
    fig, ax = plt.subplots()
    points = torch.randn(6, 2).numpy()
    tsne_module._scatter_classes(
        ax, points, torch.tensor([0, 1, 2, 0, 1, 2]).numpy(), ("a", "b", "c")
    )
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "c"]
    plt.close(fig)


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    target = tmp_path / "r.json"
    write_json(target, {"a": 1})

    def fail(handle):
        handle.write("{")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_a_symlinked_output_writes_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "elsewhere" / "target.json")  # dangling until written
    check_writable(link, "--out")
    write_json(link, {"a": 1})
    write_json(link, {"a": 2})
    assert link.is_symlink()
    assert json.loads((tmp_path / "elsewhere" / "target.json").read_text()) == {"a": 2}
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["target.json"]


def test_a_symlink_to_nothing_in_a_missing_folder_is_refused_and_creates_nothing(tmp_path):
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "missing" / "deeper" / "target.json")
    with pytest.raises(UsageError, match=r"--out: .*r\.json is a symlink to .*target\.json, whose"):
        check_writable(link, "--out")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_json_writes_a_non_finite_float_as_null(tmp_path):
    write_json(tmp_path / "r.json", {"task": {"rmse": float("nan")}, "x": [float("inf"), 1.5]})
    assert json.loads((tmp_path / "r.json").read_text()) == {
        "task": {"rmse": None},
        "x": [None, 1.5],
    }


def test_pairing_past_the_walk_limit_fails_at_construction():
    with pytest.raises(ValueError, match="at most 32 hops"):
        GALConfig(pairing=("nhop", 99))
    with pytest.raises(ValueError, match="walks at most 4"):
        GALConfig(pairing="nhop:5", walk_mode="exact")
    assert GALConfig(pairing="nhop:32").pairing.hops == 32


def test_experiment_config_names_the_bad_setting():
    for fields, name in [
        ({"attacks": ("nhop:40",)}, "attacks"),
        ({"dataset": "mnist"}, "dataset"),
        ({"encoder": "mlp"}, "encoder"),
        ({"attackers": ()}, "attackers"),
        ({"audit_seeds": 0}, "audit_seeds"),
        ({"epochs": 2.5}, "epochs"),
        ({"lam": -1.0}, "lam"),
        ({"adv_schedule": "instead"}, "adv_schedule"),
        ({"device": "gpu"}, "device"),
        ({"cuda_graphs": "yes", "device": "cuda"}, "cuda_graphs"),
        ({"cuda_graphs": True}, "cuda_graphs"),
        ({"dataset_options": (("bogus", 1),)}, "dataset_options"),
        ({"dataset_options": (("num_nodes", 5), ("num_nodes", 6))}, "dataset_options"),
    ]:
        with pytest.raises(ConfigError) as info:
            ExperimentConfig(**{"dataset": "synthetic-graph", **fields})
        assert info.value.field == name, (fields, info.value)


def test_cuda_graphs_default_to_the_setups_choice_on_a_gpu_only():
    def graphed(by_default, **fields):
        cfg = ExperimentConfig(dataset="synthetic-graph", **fields)
        return cfg.cuda_graphs_for(by_default=by_default)

    assert [graphed(True), graphed(False)] == [False, False]
    assert [graphed(True, device="cuda"), graphed(False, device="cuda:1")] == [True, False]
    for asked in (True, False):
        assert graphed(False, device="cuda", cuda_graphs=asked) is asked
        assert graphed(True, device="cuda", cuda_graphs=asked) is asked
    assert graphed(True, cuda_graphs=False) is False


def test_load_refuses_an_option_its_loader_does_not_take():
    with pytest.raises(ValueError, match="takes no option 'bogus'"):
        load("synthetic-graph", bogus=1)
