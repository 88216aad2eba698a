"""User mistakes on the command line: each prints one line naming the option to change and
exits with status 2, before any training; never a traceback."""

from __future__ import annotations

import json

import pytest
import torch

from galfast.cli import main
from galfast.cli import run as run_module
from galfast.cli import sweep as sweep_module
from galfast.datasets import movielens_loader

pytest.importorskip("matplotlib")

TINY = [
    "--dataset",
    "synthetic-graph",
    "--option",
    "num_nodes=60",
    "--option",
    "num_features=8",
    "--epochs",
    "1",
    "--attacker-epochs",
    "1",
    "--seeds",
    "1",
    "--quiet",
]


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test if a command starts training: the errors below must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the error was found")

    for module in (run_module, sweep_module):
        monkeypatch.setattr(module, "run_experiment", refuse)


def one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"galfast {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_missing_root_names_the_option(capsys, no_training, tmp_path):
    assert main(["run", "--root", str(tmp_path / "nowhere"), "--seeds", "1", "--quiet"]) == 2
    line = one_error_line(capsys, "run")
    assert "--root" in line and "no such folder" in line


def test_root_without_the_files_names_the_option(capsys, no_training, tmp_path):
    assert main(["run", "--root", str(tmp_path), "--seeds", "1", "--quiet"]) == 2
    line = one_error_line(capsys, "run")
    assert line.count("--root") >= 1 and "root=" not in line and "Planetoid files" in line


def test_movielens_offline_without_data_says_where_to_put_it(
    capsys, no_training, tmp_path, monkeypatch
):
    def offline(*args, **kwargs):
        raise OSError("<urlopen error [Errno -2] Name or service not known>")

    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    monkeypatch.setattr(movielens_loader, "fetch", offline)
    assert main(["run", "--dataset", "movielens-100k", "--seeds", "1", "--quiet"]) == 2
    line = one_error_line(capsys, "run")
    assert "--dataset movielens-100k" in line and "--root" in line
    assert "ml-100k.zip" in line and "root=" not in line


def test_unknown_dataset_option_names_it(capsys, no_training):
    assert main(["run", *TINY, "--option", "bogus=1"]) == 2
    line = one_error_line(capsys, "run")
    assert "--option" in line and "'bogus'" in line and "num_nodes" in line


def test_dataset_option_of_the_wrong_type_names_it(capsys, no_training):
    assert main(["run", *TINY, "--option", "num_nodes=many"]) == 2
    assert "--option" in one_error_line(capsys, "run")


def test_dataset_option_must_be_a_plain_value(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--option", "num_nodes=[1, 2]"])
    assert exit_info.value.code == 2
    assert "expected a number, True, False, None or text" in capsys.readouterr().err


def test_the_last_repeated_option_wins(monkeypatch):
    seen = []

    def record(config, progress):
        seen.append(dict(config.dataset_options))
        raise KeyboardInterrupt  # stop after the first run: only its config matters

    monkeypatch.setattr(run_module, "run_experiment", record)
    argv = ["run", *TINY, "--option", "num_nodes=80", "--option", "num_nodes=70"]
    assert main(argv) == 130
    assert seen == [{"num_nodes": 70, "num_features": 8}]


def test_unknown_attribute_names_the_option(capsys, no_training):
    assert main(["run", *TINY, "--attribute", "zodiac"]) == 2
    line = one_error_line(capsys, "run")
    assert "--attribute" in line and "'zodiac'" in line


def test_root_for_a_generated_dataset_is_refused(capsys, no_training, tmp_path):
    assert main(["run", *TINY, "--root", str(tmp_path)]) == 2
    line = one_error_line(capsys, "run")
    assert "--dataset" in line and "generated" in line


def test_instead_schedule_needs_adv_every_two(capsys, no_training):
    assert main(["run", *TINY, "--adv-schedule", "instead"]) == 2
    assert "--adv-schedule" in one_error_line(capsys, "run")


def test_cuda_graphs_on_cpu_names_the_option(capsys, no_training):
    assert main(["run", *TINY, "--cuda-graphs"]) == 2
    assert "--cuda-graphs" in one_error_line(capsys, "run")


@pytest.mark.parametrize("option", ["--pairing", "--attacks"])
def test_walks_past_the_kernel_limit_are_refused_while_parsing(option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", option, "nhop:40"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "at most 32 hops" in err


def test_unwritable_run_out_fails_before_training(capsys, no_training, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", *TINY, "--out", str(blocker / "run.json")]) == 2
    assert "--out" in one_error_line(capsys, "run")
    assert main(["run", *TINY, "--out", str(tmp_path)]) == 2  # a folder, not a file name
    assert "is a folder" in one_error_line(capsys, "run")


def test_unwritable_sweep_out_fails_before_training(capsys, no_training, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["sweep", *TINY, "--lam", "0", "--out", str(blocker)]) == 2
    assert "--out" in one_error_line(capsys, "sweep")
    (tmp_path / "out" / "summary.json").mkdir(parents=True)
    assert main(["sweep", *TINY, "--lam", "0", "--out", str(tmp_path / "out")]) == 2
    assert "summary.json is a folder" in one_error_line(capsys, "sweep")


def test_unwritable_demo_out_fails_before_training(capsys, tmp_path, monkeypatch):
    from galfast.cli import demo as demo_module

    monkeypatch.setattr(demo_module, "run_experiment", None)  # a call would fail the test
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["demo", "--out", str(blocker), "--quiet"]) == 2
    assert "--out" in one_error_line(capsys, "demo")


def test_tsne_out_must_name_a_figure_format(capsys, tmp_path):
    pytest.importorskip("sklearn")
    assert main(["tsne", *TINY[:-3], "--quiet", "--out", str(tmp_path / "plot.xyz")]) == 2
    line = one_error_line(capsys, "tsne")
    assert "--out" in line and ".png" in line


def test_a_truncated_sweep_run_file_is_named_and_trained_again(tmp_path, capsys, monkeypatch):
    argv = ["sweep", *TINY, "--lam", "0", "--distance", "tv", "--attacks", "node"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (run_file,) = (tmp_path / "runs").iterdir()
    run_file.write_text(run_file.read_text()[:100])
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"note: {run_file} is not a run record" in out
    assert "1 run(s) trained" in out
    json.loads(run_file.read_text())  # rewritten whole


def test_a_run_file_of_the_wrong_shape_is_trained_again(tmp_path, capsys):
    argv = ["sweep", *TINY, "--lam", "0", "--distance", "tv", "--attacks", "node"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (run_file,) = (tmp_path / "runs").iterdir()
    run_file.write_text("[1, 2]")
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "fields missing" in capsys.readouterr().out


@pytest.fixture
def audit_files(tmp_path):
    torch.save(torch.randn(20, 3), tmp_path / "z.pt")
    torch.save(torch.arange(20) % 2, tmp_path / "labels.pt")
    torch.save(torch.stack([torch.arange(20), (torch.arange(20) + 1) % 20]), tmp_path / "g.pt")
    return tmp_path


def audit_argv(folder, **replace):
    files = {"z": "z.pt", "labels": "labels.pt", "graph": "g.pt", **replace}
    return [
        "audit",
        str(folder / files["z"]),
        "--labels",
        str(folder / files["labels"]),
        "--graph",
        str(folder / files["graph"]),
        "--quiet",
        "--epochs",
        "1",
        "--seeds",
        "1",
    ]


@pytest.mark.parametrize(
    "which, option", [("z", "EMBEDDINGS"), ("labels", "--labels"), ("graph", "--graph")]
)
@pytest.mark.parametrize(
    "content",
    [b"", b"not a torch file", b"PK\x03\x04 truncated zip", b"\x80\x04\x95 truncated pickle"],
)
def test_a_corrupt_audit_input_is_named(audit_files, which, option, content, capsys):
    (audit_files / "bad.pt").write_bytes(content)
    assert main(audit_argv(audit_files, **{which: "bad.pt"})) == 2
    line = one_error_line(capsys, "audit")
    assert option in line and "bad.pt" in line


def test_a_truncated_torch_file_is_named(audit_files, capsys):
    data = (audit_files / "z.pt").read_bytes()
    (audit_files / "cut.pt").write_bytes(data[: len(data) // 2])
    assert main(audit_argv(audit_files, z="cut.pt")) == 2
    assert "EMBEDDINGS" in one_error_line(capsys, "audit")


@pytest.mark.parametrize(
    "which, value, message",
    [
        ("z", torch.randn(20), "[N, D] floating-point"),
        ("z", torch.full((20, 3), float("nan")), "NaN"),
        ("labels", torch.zeros(20, dtype=torch.long), "two classes"),
        ("labels", torch.zeros(20), "integer tensor"),
        ("graph", torch.tensor([[0, 1], [1, 99]]), "node ids must lie in [0, 20)"),
        ("graph", torch.zeros(3, 4, dtype=torch.long), "[2, E] integer"),
        ("graph", {"edges": 1}, "not a tensor"),
    ],
)
def test_audit_inputs_of_the_wrong_shape_are_named(audit_files, which, value, message, capsys):
    torch.save(value, audit_files / "odd.pt")
    assert main(audit_argv(audit_files, **{which: "odd.pt"})) == 2
    assert message in one_error_line(capsys, "audit")


def test_audit_walk_attack_without_graph(audit_files, capsys):
    argv = ["audit", str(audit_files / "z.pt"), "--labels", str(audit_files / "labels.pt")]
    assert main([*argv, "--attacks", "nhop:2"]) == 2
    assert "--graph" in one_error_line(capsys, "audit")


def test_audit_unwritable_json_fails_before_the_audit(audit_files, capsys, monkeypatch):
    from galfast.cli import audit_cmd

    monkeypatch.setattr(audit_cmd, "audit", None)  # a call would fail the test
    assert main([*audit_argv(audit_files), "--json", str(audit_files / "z.pt" / "r.json")]) == 2
    assert "--json" in one_error_line(capsys, "audit")


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "z.pt", "--labels", "l.pt", "--seed", "-1"],
        ["tsne", "--max-points", "0"],
        ["demo", "--epochs", "0"],
        ["sweep", "--out", "o", "--lam", ""],
        ["sweep", "--out", "o", "--distance", ""],
        ["run", "--attacks", ""],
        ["run", "--encoder", "mlp"],
    ],
)
def test_bad_numbers_and_empty_lists_are_argument_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"galfast {argv[0]}: error:" in err
