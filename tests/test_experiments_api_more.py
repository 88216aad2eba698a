"""More of the experiments' Python API as users call it: pairings given as tuples or in
other spellings, torch.device and NumPy-bool settings, an integer lambda, and a CUDA device
this machine lacks, each stored JSON-ready and round-tripping through the record."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
import torch
from test_experiments_api_inputs import GRAPH, tiny

from galfast.experiments import (
    ConfigError,
    ExperimentConfig,
    load_dataset,
    make_encoder,
    prepare,
    run_experiment,
)
from galfast.gal import parse_pairing


def round_trip(cfg: ExperimentConfig) -> ExperimentConfig:
    return ExperimentConfig(**json.loads(json.dumps(cfg.to_dict())))


@pytest.mark.parametrize(
    "pairing, name",
    [
        (("nhop", 2), "nhop:2"),
        (("nhop", np.int64(2)), "nhop:2"),
        (parse_pairing("nhop:3"), "nhop:3"),
        ("nhop:02", "nhop:2"),
        ("neighbour", "neighbor"),
    ],
)
def test_a_pairing_is_stored_by_its_name_and_round_trips(pairing, name):
    cfg = tiny(pairing=pairing, attacks=("node", pairing))
    assert cfg.pairing == name and cfg.attacks == ("node", name)
    assert round_trip(cfg) == cfg  # a tuple came back from JSON as a list, no pairing


def test_a_run_with_a_numpy_hop_count_records_json_under_the_audits_names():
    record = run_experiment(tiny(pairing=("nhop", np.int64(2)), attacks=("nhop:02",)), False)
    record = json.loads(json.dumps(record.record))  # numpy.int64 was not JSON serialisable
    assert record["config"]["pairing"] == "nhop:2"
    assert record["config"]["attacks"] == list(record["attack"]) == ["nhop:2"]


def test_a_bad_pairing_is_still_named():
    for field, value in (("pairing", ("nhop", 0)), ("attacks", (("nhop", 2.5),))):
        with pytest.raises(ConfigError, match="unknown pairing") as error:
            tiny(**{field: value})
        assert error.value.field == field


@pytest.mark.parametrize("device", [torch.device("cpu"), "cpu:0", torch.device("cpu", 0)])
def test_a_cpu_device_in_torchs_spellings_is_the_cpu(device):
    cfg = tiny(device=device)
    assert cfg.device == "cpu" and cfg == tiny() and hash(cfg) == hash(tiny())


def test_a_cuda_torch_device_is_stored_by_name():
    assert tiny(device=torch.device("cuda", 1)).device == "cuda:1"
    assert tiny(device=torch.device("cuda")).device == "cuda"


@pytest.mark.parametrize("device", ["CPU", "mps", torch.device("meta"), 0, None])
def test_other_devices_are_still_named(device):
    with pytest.raises(ConfigError, match="device must be") as error:
        tiny(device=device)
    assert error.value.field == "device"


@pytest.mark.skipif(torch.cuda.device_count() > 8, reason="needs a missing CUDA device")
def test_a_missing_cuda_device_is_named_before_any_work():
    cfg = tiny(device="cuda:9")
    with pytest.raises(ConfigError, match="cuda:9") as error:
        prepare(cfg)  # was torch's AssertionError (no CUDA) once the run had started
    assert error.value.field == "device"
    with pytest.raises(ConfigError):
        run_experiment(cfg, progress=False)


def test_numpy_bools_are_taken_as_flags_and_stored_as_bools():
    cfg = tiny(cuda_graphs=np.bool_(False))
    assert cfg.cuda_graphs is False
    cora = ExperimentConfig(dataset_options={"download": np.bool_(False)})
    assert cora.dataset_options == (("download", False),)
    assert type(cora.dataset_options[0][1]) is bool
    json.dumps(cora.to_dict())


def test_an_integer_lambda_is_stored_as_a_float():
    for lam in (1, np.int64(1), 1.0):
        cfg = tiny(lam=lam)
        assert type(cfg.lam) is float and json.dumps(cfg.to_dict()) == json.dumps(
            tiny(lam=1.0).to_dict()
        )


def test_make_encoder_refuses_no_layers_over_features():
    with pytest.raises(ValueError, match="widths must name at least one layer"):
        make_encoder("gcn", (), num_features=4, num_nodes=5, embedding_dim=4)
    # A learned embedding alone (no layer) is an encoder: EmbeddingEncoder takes no convs.
    assert make_encoder("gcn", (), num_features=0, num_nodes=5, embedding_dim=4).num_layers == 0


@pytest.mark.parametrize("embedding_dim", [0, -1, 2.5, None])
def test_make_encoder_names_a_bad_embedding_dim(embedding_dim):
    with pytest.raises(ValueError, match="embedding_dim must be"):
        make_encoder("gcn", (4,), num_features=0, num_nodes=5, embedding_dim=embedding_dim)


def test_a_callable_option_is_recorded_by_name():
    cfg = ExperimentConfig(dataset_options={"download": False, "opener": urllib.request.urlopen})
    options = json.loads(json.dumps(cfg.to_dict()))["dataset_options"]
    assert options == {"download": False, "opener": "urllib.request.urlopen"}
    assert cfg.dataset_options[1][1] is urllib.request.urlopen  # the run still takes it


def test_load_dataset_takes_its_options_as_a_dict():
    as_dict = load_dataset("synthetic-graph", None, dict(GRAPH))
    assert as_dict is load_dataset("synthetic-graph", None, GRAPH)  # one cached load
    with pytest.raises(ValueError, match="options must be"):
        load_dataset("synthetic-graph", None, [["num_nodes", 40]])
