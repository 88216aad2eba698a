"""The galfast command line: parsing, run/sweep/audit/demo end to end on tiny inputs."""

from __future__ import annotations

import json

import pytest
import torch

from galfast.cli import build_parser, main
from galfast.cli import sweep as sweep_module

pytest.importorskip("matplotlib")

TINY_GRAPH = [
    "--dataset",
    "synthetic-graph",
    "--option",
    "num_nodes=60",
    "--option",
    "num_features=8",
    "--epochs",
    "2",
    "--attacker-epochs",
    "1",
    "--quiet",
]


def test_every_command_has_help(capsys):
    for command in ("demo", "run", "sweep", "audit", "tsne"):
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        assert "usage: galfast " + command in text
        assert "(default:" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--lam", "-1"], "expected a finite number >= 0"),
        (["run", "--lam", "nan"], "expected a finite number >= 0"),
        (["run", "--seeds", "0"], "expected an integer >= 1"),
        (["run", "--pairing", "nhop:0"], "--pairing"),
        (["run", "--dataset", "mnist"], "invalid choice: 'mnist'"),
        (["run", "--attackers", "mlp,svm"], "expected distinct comma-separated names"),
        (["sweep", "--out", "x", "--lam", "0,0"], "expected distinct comma-separated numbers"),
        (["sweep", "--out", "x", "--distance", "tv,l2"], "expected distinct"),
        # an empty item was dropped: the value meant after a trailing comma went missing
        (["sweep", "--out", "x", "--lam", "0,"], "got '0,', which has an empty one"),
        (["sweep", "--out", "x", "--distance", "tv,,wasserstein"], "which has an empty one"),
        (["run", "--attacks", "node,"], "got 'node,', which has an empty one"),
        (["run", "--attackers", ",mlp"], "got ',mlp', which has an empty one"),
        (["sweep"], "--out"),
        (["run", "--option", "no-equals"], "expected KEY=VALUE"),
        ([], "COMMAND"),
    ],
)
def test_invalid_arguments_exit_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_parsing_normalises_lists_and_pairings():
    args = build_parser().parse_args(
        ["sweep", "--out", "o", "--lam", "0, 0.5,2", "--pairing", "nhop:2", "--attacks", "node"]
    )
    assert args.lam == [0.0, 0.5, 2.0]
    assert args.distance == ["tv", "wasserstein"]
    assert args.pairing == "nhop:2"
    assert args.attacks == ["node"]


def test_cuda_device_is_refused_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--device", "cuda"])
    assert "no CUDA device" in capsys.readouterr().err


def test_run_writes_a_summary_and_every_seed(tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["run", *TINY_GRAPH, "--seeds", "2", "--lam", "0.5", "--out", str(out)]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert [r["config"]["seed"] for r in data["runs"]] == [0, 1]
    summary = data["summary"]
    assert summary["n"] == 2 and summary["task_metric"] == "auc"
    assert 0.0 <= summary["task"]["mean"] <= 1.0
    assert set(summary["attack"]) == {"node", "neighbor"}
    assert 0.0 <= summary["attack"]["node"]["macro_f1"]["mean"] <= 1.0
    assert data["runs"][0]["epochs"] == 2 and data["runs"][0]["attacker_epochs"] == 1
    table = capsys.readouterr().out
    assert "synthetic-graph" in table and "node macro_f1" in table


def test_unknown_attribute_is_a_clean_error(capsys):
    assert main(["run", *TINY_GRAPH, "--seeds", "1", "--attribute", "zodiac"]) == 2
    assert "no attribute 'zodiac'" in capsys.readouterr().err


def test_sweep_skips_finished_runs(tmp_path, monkeypatch):
    argv = ["sweep", *TINY_GRAPH, "--seeds", "1", "--lam", "0,1", "--out", str(tmp_path)]
    assert main(argv) == 0
    runs = sorted((tmp_path / "runs").glob("*.json"))
    assert len(runs) == 4  # 2 distances x 2 lambdas x 1 seed
    for name in ("summary.json", "summary.csv", "tradeoff.png"):
        assert (tmp_path / name).stat().st_size > 0

    calls = []
    monkeypatch.setattr(sweep_module, "run_experiment", lambda *a, **k: calls.append(a))
    mtimes = [p.stat().st_mtime_ns for p in runs]
    assert main(argv) == 0
    assert calls == []
    assert [p.stat().st_mtime_ns for p in runs] == mtimes


def test_sweep_reruns_a_run_whose_settings_changed(tmp_path):
    base = ["sweep", *TINY_GRAPH, "--seeds", "1", "--lam", "0", "--distance", "tv"]
    assert main([*base, "--out", str(tmp_path)]) == 0
    (path,) = (tmp_path / "runs").glob("*.json")
    assert main([*base, "--audit-seeds", "2", "--out", str(tmp_path)]) == 0
    assert json.loads(path.read_text())["config"]["audit_seeds"] == 2


def test_adversary_schedule_reaches_the_trainer_and_names_its_own_run_file(tmp_path, monkeypatch):
    from galfast.experiments import planetoid

    seen = []

    class Spy(planetoid.GALTrainer):
        def __init__(self, *args, **kwargs):
            seen.append({k: kwargs[k] for k in ("adv_every", "adv_schedule", "pretrain_epochs")})
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(planetoid, "GALTrainer", Spy)
    base = ["sweep", *TINY_GRAPH, "--seeds", "1", "--lam", "1", "--distance", "tv"]
    schedule = ["--adv-every", "2", "--adv-schedule", "instead", "--pretrain-epochs", "1"]
    assert main([*base, "--out", str(tmp_path)]) == 0
    assert main([*base, *schedule, "--out", str(tmp_path)]) == 0
    assert seen == [
        {"adv_every": 1, "adv_schedule": "after", "pretrain_epochs": 0},
        {"adv_every": 2, "adv_schedule": "instead", "pretrain_epochs": 1},
    ]
    names = sorted(p.name for p in (tmp_path / "runs").glob("*.json"))
    assert names == [
        "synthetic-graph-gcn-node-tv-lam1-adv2instead-pre1-seed0.json",
        "synthetic-graph-gcn-node-tv-lam1-seed0.json",
    ]


def test_sweep_keeps_runs_recorded_before_a_setting_existed(tmp_path, monkeypatch):
    argv = ["sweep", *TINY_GRAPH, "--seeds", "1", "--lam", "0", "--distance", "tv"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (path,) = (tmp_path / "runs").glob("*.json")
    record = json.loads(path.read_text())
    del record["config"]["pretrain_epochs"]  # as written by an older galfast
    path.write_text(json.dumps(record))
    calls = []
    monkeypatch.setattr(sweep_module, "run_experiment", lambda *a, **k: calls.append(a))
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert calls == []


def test_sweep_keeps_runs_recorded_with_cuda_graphs_off_by_default_then(tmp_path, monkeypatch):
    # Records written when --cuda-graphs defaulted to off hold False; the same steps run with
    # or without graphs, so the setting never decides whether a run is done.
    argv = ["sweep", *TINY_GRAPH, "--seeds", "1", "--lam", "0", "--distance", "tv"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (path,) = (tmp_path / "runs").glob("*.json")
    record = json.loads(path.read_text())
    assert record["config"]["cuda_graphs"] is None
    record["config"]["cuda_graphs"] = False
    path.write_text(json.dumps(record))
    calls = []
    monkeypatch.setattr(sweep_module, "run_experiment", lambda *a, **k: calls.append(a))
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert calls == []


@pytest.mark.parametrize(
    "flag, expected", [([], None), (["--cuda-graphs"], True), (["--no-cuda-graphs"], False)]
)
def test_cuda_graphs_flag_is_on_off_or_the_setups_default(flag, expected):
    args = build_parser().parse_args(["run", *TINY_GRAPH, *flag])
    assert args.cuda_graphs is expected


def test_audit_command_on_saved_tensors(tmp_path, capsys):
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (200,), generator=gen)
    labels[:5] = -1  # unknown
    z = torch.randn(200, 4, generator=gen)
    z[:, 0] += 4.0 * labels.clamp_min(0)  # leaks the attribute through one coordinate
    ring = torch.arange(200)
    edge_index = torch.stack([ring, (ring + 1) % 200])
    for name, value in (("z.pt", z), ("labels.pt", labels), ("edges.pt", edge_index)):
        torch.save(value, tmp_path / name)
    report = tmp_path / "report.json"
    argv = [
        "audit",
        str(tmp_path / "z.pt"),
        "--labels",
        str(tmp_path / "labels.pt"),
        "--graph",
        str(tmp_path / "edges.pt"),
        "--seeds",
        "2",
        "--epochs",
        "60",
        "--quiet",
        "--json",
        str(report),
    ]
    assert main(argv) == 0
    data = json.loads(report.read_text())
    node = [r for r in data["results"] if r["attack"] == "node"]
    assert {r["attack"] for r in data["results"]} == {"node", "neighbor"}
    assert max(r["metrics"]["macro_f1"]["mean"] for r in node) > 0.8
    assert "attribute (binary)" in capsys.readouterr().out


def test_audit_command_rejects_mismatched_labels(tmp_path, capsys):
    torch.save(torch.randn(10, 3), tmp_path / "z.pt")
    torch.save(torch.zeros(9, dtype=torch.long), tmp_path / "labels.pt")
    argv = ["audit", str(tmp_path / "z.pt"), "--labels", str(tmp_path / "labels.pt")]
    assert main(argv) == 2
    assert "--labels must be a [10] integer tensor" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "missing.pt"), "--labels", "x.pt"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_demo_writes_table_json_and_plot(tmp_path, capsys):
    argv = ["demo", "--out", str(tmp_path), "--epochs", "2", "--attacker-epochs", "1"]
    assert main([*argv, "--audit-seeds", "1", "--quiet"]) == 0
    data = json.loads((tmp_path / "demo.json").read_text())
    assert [r["config"]["lam"] for r in data["runs"]] == [0.0, 1.0]
    assert {r["config"]["distance"] for r in data["runs"]} == {"wasserstein"}
    assert (tmp_path / "tradeoff.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "neighbor macro_f1" in out and "chance macro-F1" in out and "majority class" in out


@pytest.mark.slow  # t-SNE itself takes tens of seconds on a loaded 2-core machine
def test_tsne_writes_a_png(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "tsne.png"
    argv = ["tsne", *TINY_GRAPH, "--lam", "0,1", "--attacks", "node", "--out", str(out)]
    assert main(argv) == 0
    assert out.read_bytes().startswith(b"\x89PNG")


def test_a_run_does_not_depend_on_what_ran_before_it():
    from galfast.experiments import ExperimentConfig, run_experiment

    cfg = ExperimentConfig(
        dataset="synthetic-graph",
        dataset_options=(("num_features", 8), ("num_nodes", 60)),
        lam=0.5,
        epochs=2,
        attacker_epochs=1,
        attacks=("node",),
        seed=1,
    )
    first = run_experiment(cfg, progress=False).embeddings
    torch.rand(100)  # the global generator moves on, as another run in a sweep would move it
    state = torch.get_rng_state()
    again = run_experiment(cfg, progress=False).embeddings
    assert torch.equal(first, again)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's generator is left alone


def test_run_audits_strong_by_default_and_fast_on_request(tmp_path, capsys):
    argv = ["run", *TINY_GRAPH, "--seeds", "1", "--attacks", "node,neighbor"]
    assert main([*argv, "--out", str(tmp_path / "strong.json")]) == 0
    assert main([*argv, "--audit", "fast", "--out", str(tmp_path / "fast.json")]) == 0
    strong = json.loads((tmp_path / "strong.json").read_text())
    fast = json.loads((tmp_path / "fast.json").read_text())
    (strong_run,), (fast_run,) = strong["runs"], fast["runs"]
    assert strong_run["config"]["audit_strength"] == "strong"
    assert fast_run["config"]["audit_strength"] == "fast"
    strong_families = {cell["attacker"] for cell in strong_run["audit"]["results"]}
    fast_families = {cell["attacker"] for cell in fast_run["audit"]["results"]}
    assert fast_families == {"mlp", "linear"}
    assert strong_families > fast_families  # graph, tuned and non-neural families on top
    printed = capsys.readouterr().out
    assert printed.count("strongest attack (seed 0): sensitive: ") == 2
    assert "strong audit)" in printed and "fast audit)" in printed
