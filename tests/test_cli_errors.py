"""User mistakes on the command line: each prints one line naming the option to change and
exits with status 2, before any training; never a traceback."""

from __future__ import annotations

import json

import pytest
import torch
from cli_errors_helpers import one_error_line, refuse_training
from damaged_zip import flip_a_stored_bit

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
    refuse_training(monkeypatch, run_module, sweep_module)


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


def test_an_empty_sweep_out_is_refused_not_the_working_folder(capsys, no_training):
    """--out "" (an unset shell variable) wrote runs/ and summary.json into the working
    folder."""
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", *TINY, "--lam", "0", "--out", ""])
    assert exit_info.value.code == 2
    assert "--out" in one_error_line(capsys, "sweep")


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
    assert f"note: {run_file} is not a valid run record" in out
    assert "1 run(s) trained" in out
    json.loads(run_file.read_text())  # rewritten whole


def test_a_run_file_of_the_wrong_shape_is_trained_again(tmp_path, capsys):
    argv = ["sweep", *TINY, "--lam", "0", "--distance", "tv", "--attacks", "node"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    (run_file,) = (tmp_path / "runs").iterdir()
    run_file.write_text("[1, 2]")
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "(a JSON list, not an object)" in capsys.readouterr().out


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
    [
        b"",
        b"not a torch file",
        b"PK\x03\x04 truncated zip",
        b"\x80\x04\x95 truncated pickle",
        # torch's pickle reader fails on these with KeyError, IndexError and struct.error.
        b"hello",
        b"h",
        b"J",
    ],
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
        ("z", torch.full((20, 3), 1e38) * torch.randn(20, 3).sign(), "overflow the attackers'"),
        ("labels", torch.tensor([10**12] + [0, 1] * 9 + [0]), "number the classes 0..K-1"),
        ("graph", torch.zeros(2, 0, dtype=torch.long), "every neighbor walk would fail"),
        ("graph", torch.arange(20).repeat(2, 1), "every neighbor walk would fail"),
    ],
)
def test_audit_inputs_of_the_wrong_shape_are_named(audit_files, which, value, message, capsys):
    torch.save(value, audit_files / "odd.pt")
    assert main(audit_argv(audit_files, **{which: "odd.pt"})) == 2
    assert message in one_error_line(capsys, "audit")


def test_audit_walks_that_all_fail_on_the_graph_are_one_line(audit_files, capsys):
    # Nodes in pairs: every node has an edge, yet a 3-hop walk must step back onto its path.
    torch.save(torch.arange(20).view(10, 2).t(), audit_files / "pairs.pt")
    argv = audit_argv(audit_files, graph="pairs.pt")
    assert main([*argv, "--attacks", "nhop:3"]) == 2
    line = one_error_line(capsys, "audit")
    assert "every walk failed" in line and "--attacks node" in line


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
        ["audit", "z.pt", "--labels", "l.pt", "--seed", str(2**64)],
        ["tsne", "--max-points", "0"],
        ["demo", "--epochs", "0"],
        ["sweep", "--out", "o", "--lam", ""],
        ["sweep", "--out", "o", "--distance", ""],
        ["run", "--attacks", ""],
        ["run", "--encoder", "mlp"],
        ["audit", "z.pt", "--labels", "l.pt", "--name", ""],
        ["sweep", "--out", "o", "--lam", "0,-0"],  # equal once -0 is read as 0
        ["audit", "z.pt", "--labels", "l.pt", "--json", ""],  # wrote nothing, exit 0
        ["audit", "z.pt", "--labels", "l.pt", "--attackers", "bogus"],
        ["run", "--lam", "nan"],
        ["run", "--pairing", "nhop:0"],
        ["run", "--attacks", "nhop:2,nhop:2"],
        ["run", "--device", "cuda:99"],
        ["sweep", "--lam", "1"],  # --out missing
        ["tsne", "--out"],  # no value
    ],
)
def test_bad_numbers_and_empty_lists_are_argument_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    # One line: argparse's usage block before it (15 lines for run) buried it.
    one_error_line(capsys, argv[0])


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND"),
        (["bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_a_missing_or_unknown_command_or_option_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("galfast: error: ") and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("command", ["demo", "run", "sweep", "audit", "tsne"])
def test_an_unknown_option_is_reported_by_its_command(command, capsys):
    required = {"sweep": ["--out", "o"], "audit": ["z.pt", "--labels", "l.pt"]}
    with pytest.raises(SystemExit) as exit_info:
        main([command, *required.get(command, []), "--bogus", "x"])
    assert exit_info.value.code == 2
    assert one_error_line(capsys, command).endswith("unrecognized arguments: --bogus x")


@pytest.mark.parametrize("name", ["z.pt", "labels.pt", "g.pt"])
def test_an_input_with_a_flipped_bit_is_named_in_one_line(audit_files, capsys, name):
    """torch.load checks no CRC: a damaged embedding or label loaded as a different value."""
    entry = flip_a_stored_bit(audit_files / name, audit_files / f"flipped-{name}")
    key = {"z.pt": "z", "labels.pt": "labels", "g.pt": "graph"}[name]
    assert main(audit_argv(audit_files, **{key: f"flipped-{name}"})) == 2
    line = one_error_line(capsys, "audit")
    assert line.endswith(
        f"flipped-{name}' is damaged: its entry {entry} fails the archive's "
        "CRC check (a disk, copy or transfer error?)"
    )


def test_a_file_torch_cannot_load_is_named_in_one_clean_line(audit_files, capsys):
    numpy = pytest.importorskip("numpy")
    numpy.save(audit_files / "labels.npy", numpy.arange(20) % 2)
    assert main(audit_argv(audit_files, labels="labels.npy")) == 2
    line = one_error_line(capsys, "audit")
    assert line.endswith("labels.npy' is not a tensor saved with torch.save (or it is truncated)")
    assert "weights_only" not in line  # no hint at loading it unsafely


def test_sparse_audit_inputs_are_read_as_the_dense_tensors_they_stand_for(audit_files, capsys):
    for name in ("z", "labels", "g"):
        torch.save(torch.load(audit_files / f"{name}.pt").to_sparse(), audit_files / f"s{name}.pt")
    argv = audit_argv(audit_files, z="sz.pt", labels="slabels.pt", graph="sg.pt")
    assert main([*argv, "--strength", "fast"]) == 0
    assert "attribute (binary)" in capsys.readouterr().out


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_an_out_path_that_is_no_regular_file_is_refused_before_training(
    special, tmp_path, capsys, no_training
):
    import os
    import stat

    path = tmp_path / "fifo"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = "/dev/null"
    assert main(["run", *TINY, "--out", str(path)]) == 2
    assert "is not a regular file" in one_error_line(capsys, "run")
    mode = os.stat(path).st_mode
    assert stat.S_ISFIFO(mode) if special == "fifo" else stat.S_ISCHR(mode)  # left as it was


def test_a_run_file_path_that_is_a_folder_is_refused_before_training(tmp_path, capsys, no_training):
    (tmp_path / "runs" / "synthetic-graph-gcn-node-tv-lam0-seed0.json").mkdir(parents=True)
    argv = ["sweep", *TINY, "--lam", "0", "--distance", "tv", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "lam0-seed0.json is a folder" in one_error_line(capsys, "sweep")


@pytest.mark.parametrize(
    "options, message",
    [
        (["test_fraction=0"], "0 test edge(s)"),
        (["avg_degree=0.2"], "0 test edge(s)"),
        (["avg_degree=0"], "0 training edge(s)"),
        (["num_nodes=6", "avg_degree=1"], "0 test edge(s)"),
        (["avg_degree=1e9"], "exceeds num_nodes - 1 = 59"),
        (["num_nodes=5"], "avg_degree=8.0 exceeds num_nodes - 1 = 4"),
    ],
)
def test_a_link_split_that_cannot_train_or_score_is_refused(options, message, capsys, no_training):
    extra = [arg for option in options for arg in ("--option", option)]
    assert main(["run", *TINY, *extra]) == 2
    line = one_error_line(capsys, "run")
    assert line.startswith("galfast run: error: --option: ") and message in line


def test_bundled_cora_without_test_edges_is_refused(capsys, no_training):
    assert main(["run", "--option", "test_fraction=0", "--seeds", "1", "--quiet"]) == 2
    assert "cora link split holds 5015 training edge(s), 0 test edge(s)" in one_error_line(
        capsys, "run"
    )


@pytest.mark.parametrize("fraction", ["0", "0.001"])
def test_a_rating_split_without_test_ratings_is_refused(fraction, capsys, no_training):
    argv = ["run", *TINY[6:], "--dataset", "synthetic-movielens", "--option", "num_users=50"]
    argv += ["--option", "num_movies=30", "--option", "num_ratings=500"]
    assert main([*argv, "--option", f"test_fraction={fraction}"]) == 2
    assert "500 training and 0 test rating(s)" in one_error_line(capsys, "run")


@pytest.mark.parametrize(
    "command, schedule, option",
    [
        ("run", ["--pretrain-epochs", "1"], "--pretrain-epochs"),
        ("run", ["--adv-every", "1000"], "--adv-every"),
        ("sweep", ["--adv-every", "2"], "--adv-every"),  # lambda 0 first, 5 refused all the same
    ],
)
def test_a_defence_without_adversary_steps_is_refused(
    command, schedule, option, capsys, tmp_path, no_training
):
    lam = ["--lam", "5"] if command == "run" else ["--lam", "0,5", "--out", str(tmp_path)]
    assert main([command, *TINY, *lam, *schedule]) == 2  # TINY trains one epoch of one step
    line = one_error_line(capsys, command)
    assert line.startswith(f"galfast {command}: error: {option}: ")
    assert "lambda=5 would train no defence" in line


def test_no_defence_needs_no_adversary_step(monkeypatch):
    def started(config, progress):
        raise KeyboardInterrupt  # the run got past the checks: that is all this test asks

    monkeypatch.setattr(run_module, "run_experiment", started)
    assert main(["run", *TINY, "--lam", "0", "--pretrain-epochs", "1"]) == 130


@pytest.mark.parametrize("epochs", ["1", "3"])  # NaN embeddings; a NaN loss in epoch 2
def test_a_diverged_training_is_one_line_naming_lambda(epochs, capsys):
    assert main(["run", *TINY, "--lam", "1e20", "--attacks", "node", "--epochs", epochs]) == 2
    line = one_error_line(capsys, "run")
    assert line.startswith("galfast run: error: training diverged at lambda=1e+20 (")
    assert line.endswith(
        " not finite at epoch 2); try a smaller --lam"
        if epochs == "3"
        else "(non-finite embeddings); try a smaller --lam"
    )


def test_a_diverged_training_without_defence_suggests_no_lambda():
    from galfast.cli.errors import error_line
    from galfast.experiments import TrainingDiverged

    assert error_line(TrainingDiverged(0.0, "non-finite test rmse")) == (
        "training diverged at lambda=0 (non-finite test rmse)"
    )
    assert error_line(ValueError("a bug")) is None  # keeps its traceback
