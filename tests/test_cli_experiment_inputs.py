"""What users type into ``galfast run``, ``demo`` and the experiment config that went wrong
before: each mistake is one line naming the option (exit status 2) or, in the library, a
ValueError naming the setting; never a traceback, a hang or a silently ignored request."""

from __future__ import annotations

import numpy as np
import pytest
from cli_errors_helpers import one_error_line, refuse_training

from galfast.cli import demo as demo_module
from galfast.cli import main
from galfast.cli import options as options_module
from galfast.cli import run as run_module
from galfast.experiments import ConfigError, ExperimentConfig
from galfast.experiments.kg_options import check_kg_model_options, kg_model_options

pytest.importorskip("matplotlib")

TINY = ["--dataset", "synthetic-graph", "--option", "num_nodes=60", "--option", "num_features=8"]
TINY += ["--epochs", "1", "--attacker-epochs", "1", "--seeds", "1", "--quiet", "--audit", "fast"]
KG = ["--dataset", "fb15k-237", "--encoder", "compgcn", "--seeds", "1", "--quiet"]


@pytest.fixture
def no_training(monkeypatch):
    refuse_training(monkeypatch, run_module, demo_module)


def argument_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "option, message",
    [
        ("lr=1e400", "lr must be a finite number, got inf"),  # read as float inf
        ("layers=2.0", "layers must be one of (1, 2), got 2.0"),  # == 2, not an int
    ],
)
def test_a_kg_model_option_the_model_cannot_take_is_named(option, message, capsys, no_training):
    assert main(["run", *KG, "--model-option", option]) == 2
    line = one_error_line(capsys, "run")
    assert "--model-option" in line and message in line


def test_an_infinite_kg_learning_rate_is_a_value_error():
    with pytest.raises(ValueError, match="lr must be a finite number, got inf"):
        check_kg_model_options((("lr", float("inf")),))


def test_numpy_kg_model_options_are_taken_as_plain_numbers():
    # refused as "must be an int >= 1" / "one of (1, 2)" when called directly before
    given = (("dim", np.int64(100)), ("layers", np.int32(2)), ("lr", np.float32(0.5)))
    options = kg_model_options(given + (("k_w", np.int64(10)), ("k_h", 10)))
    assert (options["dim"], options["layers"], options["lr"]) == (100, 2, 0.5)
    assert [type(options[k]) for k in ("dim", "layers", "lr")] == [int, int, float]
    with pytest.raises(ValueError, match="layers must be one of"):
        check_kg_model_options((("layers", np.float64(2.0)),))


@pytest.mark.parametrize(
    "option, message",
    [
        ("num_nodes=", "num_nodes must be a whole number, got ''"),
        ("num_nodes=60.5", "num_nodes must be a whole number, got 60.5"),
        ("avg_degree=dense", "avg_degree must be a number, got 'dense'"),
    ],
)
def test_a_loader_count_or_number_of_another_kind_is_named(option, message, capsys, no_training):
    # Failed in the generator with Python's words ("'<' not supported between instances of
    # 'str' and 'int'"), naming no option.
    argv = ["run", "--dataset", "synthetic-graph", "--seeds", "1", "--quiet", "--option", option]
    assert main(argv) == 2
    assert message in one_error_line(capsys, "run")


def test_a_loader_callable_from_the_command_line_is_refused(capsys, no_training):
    assert (
        main(["run", "--dataset", "cora", "--seeds", "1", "--quiet", "--option", "opener=1"]) == 2
    )
    assert "opener must be a callable" in one_error_line(capsys, "run")


def test_the_config_names_a_loader_flag_of_the_wrong_type():
    with pytest.raises(ConfigError, match="attributes must be True or False") as error:
        ExperimentConfig(
            dataset="fb15k-237", encoder="compgcn", dataset_options=(("attributes", "false"),)
        )
    assert error.value.field == "dataset_options"
    ExperimentConfig(dataset="cora", dataset_options=(("download", False),))  # accepted


def test_a_dataset_too_large_for_the_memory_is_one_line(capsys, monkeypatch):
    def too_large(cfg):  # what numpy raises for num_nodes=10**12
        raise MemoryError("Unable to allocate 7.28 TiB for an array")

    monkeypatch.setattr(options_module, "prepare", too_large)
    assert main(["run", *TINY, "--option", "num_nodes=1000000000000"]) == 2
    line = one_error_line(capsys, "run")
    assert "num_nodes=1000000000000" in line and "too large for this machine" in line


def test_many_seeds_start_training_before_building_every_config(monkeypatch):
    built = []
    real = run_module.experiment_config

    def counted(**fields):
        built.append(fields["seed"])
        return real(**fields)

    def first_run(config, progress):
        raise KeyboardInterrupt  # stops the run at its first training

    monkeypatch.setattr(run_module, "experiment_config", counted)
    monkeypatch.setattr(run_module, "run_experiment", first_run)
    assert main(["run", *TINY, "--seeds", "100000"]) == 130
    assert len(built) <= 2, f"{len(built)} configs built before training"


@pytest.mark.parametrize("command", ["run", "demo"])
def test_an_empty_out_is_an_argument_error(command, capsys, monkeypatch, tmp_path, no_training):
    monkeypatch.chdir(tmp_path)  # an empty --out would write here
    argv = [command, "--out", "", "--epochs", "1", "--quiet"]
    line = argument_error(capsys, argv)
    assert line.startswith(f"galfast {command}: error: argument --out: ")
    assert line.endswith("expected a file or folder name, got an empty one")
    assert not list(tmp_path.iterdir())


def test_a_galfast_data_of_an_unknown_user_is_named(capsys, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", "~galfast-no-such-user/data")
    argv = ["run", "--dataset", "citeseer", "--seeds", "1", "--quiet", "--option", "download=False"]
    assert main(argv) == 2
    line = one_error_line(capsys, "run")
    assert "GALFAST_DATA=~galfast-no-such-user/data" in line
