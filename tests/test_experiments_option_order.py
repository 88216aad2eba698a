"""Loader and model options are keyword arguments: the same options in another order are the
same run, compared, hashed, recorded and loaded once."""

from __future__ import annotations

import json

from galfast.experiments import ExperimentConfig, load_dataset

FORWARD = (("num_nodes", 40), ("num_features", 4), ("avg_degree", 4.0))
BACKWARD = tuple(reversed(FORWARD))


def test_dataset_options_in_another_order_are_one_config():
    first = ExperimentConfig(dataset="synthetic-graph", dataset_options=FORWARD)
    second = ExperimentConfig(dataset="synthetic-graph", dataset_options=dict(BACKWARD))
    assert first == second and hash(first) == hash(second)
    assert first.dataset_options == tuple(sorted(FORWARD))
    assert json.dumps(first.to_dict()) == json.dumps(second.to_dict())


def test_model_options_in_another_order_are_one_config():
    options = (("decoder", "distmult"), ("dim", 16), ("batch_size", 8))
    configs = [
        ExperimentConfig(dataset="wn18rr", encoder="compgcn", root="unused", model_options=order)
        for order in (options, tuple(reversed(options)))
    ]
    assert configs[0] == configs[1] and hash(configs[0]) == hash(configs[1])
    assert json.dumps(configs[0].to_dict()) == json.dumps(configs[1].to_dict())


def test_load_dataset_loads_options_in_another_order_once():
    assert load_dataset("synthetic-graph", None, FORWARD) is load_dataset(
        "synthetic-graph", None, dict(BACKWARD)
    )
