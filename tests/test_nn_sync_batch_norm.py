"""galfast.nn.BatchNorm with batch statistics synchronised across processes (two gloo CPU
processes, tests/distributed_sync_batch_norm.py), against one process on all the rows.

Loss: each process backpropagates the plain sum ``sum(y * coefficients)`` over its own rows,
whose sum over the processes is the one-process loss on all rows. So each process's input
gradient must be the one-process input gradient of its rows, and the weight and bias gradients
summed over the processes the one-process ones (the trainer scales each process's loss by
(its items / all items) x world size and averages the gradients: the same sum, divided by N).
float64 throughout: the statistics are reduced in another order than one process sums them,
so results agree to rounding (relative 1e-10), not bit for bit.
"""

from __future__ import annotations

import pytest
import torch
from distributed_sync_batch_norm import UNIT_CASES, grad_of, run, unit_data, unit_module
from gloo_group import two_process_records

from galfast.nn.sync_batch_norm import synchronized_batch_norm

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TOL = {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return two_process_records(run, str(tmp_path_factory.mktemp("sync_bn")))


def _one_process(name: str) -> dict:
    norm = unit_module(name)
    record = {"y": [], "grad_x": [], "grad_weight": [], "grad_bias": []}
    for x, coef in unit_data(name):
        x = x.clone().requires_grad_()
        norm.zero_grad()
        y = norm(x)
        (y * coef).sum().backward()
        record["y"].append(y.detach())
        record["grad_x"].append(x.grad)
        record["grad_weight"].append(grad_of(norm.module.weight))
        record["grad_bias"].append(grad_of(norm.module.bias))
    record["state"] = norm.state_dict()
    return record


@pytest.mark.parametrize("name", list(UNIT_CASES))
def test_rows_and_input_gradients_are_the_one_process_ones(ranks, name):
    one = _one_process(name)
    for step, rows in enumerate(UNIT_CASES[name][0]):
        assert [len(r[name]["y"][step]) for r in ranks] == list(rows)
        for key in ("y", "grad_x"):
            both = torch.cat([r[name][key][step] for r in ranks])
            torch.testing.assert_close(both, one[key][step], **TOL, msg=f"{key} step {step}")


@pytest.mark.parametrize("name", list(UNIT_CASES))
def test_weight_and_bias_gradients_sum_to_the_one_process_ones(ranks, name):
    one = _one_process(name)
    for step in range(len(UNIT_CASES[name][0])):
        for key in ("grad_weight", "grad_bias"):
            if one[key][step] is None:  # affine=False
                assert all(r[name][key][step] is None for r in ranks)
                continue
            summed = sum(r[name][key][step] for r in ranks)
            torch.testing.assert_close(summed, one[key][step], **TOL, msg=f"{key} step {step}")


@pytest.mark.parametrize("name", list(UNIT_CASES))
def test_running_buffers_are_the_one_process_ones_on_every_process(ranks, name):
    one = _one_process(name)["state"]
    mine, theirs = ranks[0][name]["state"], ranks[1][name]["state"]
    assert list(mine) == list(one)
    for key, value in one.items():
        assert torch.equal(mine[key], theirs[key]), key  # the same reduced statistics
        torch.testing.assert_close(mine[key], value, **TOL, msg=key)
    if "module.num_batches_tracked" in one:
        assert int(mine["module.num_batches_tracked"]) == len(UNIT_CASES[name][0])


def test_a_global_batch_of_one_row_is_refused_or_uses_running_statistics(ranks):
    for r in ranks:  # every process raises, the one with no row too
        assert "Expected more than 1 value per channel" in r["single"]["error"]
        assert "global batch of 1" in r["single"]["error"]
    # allow_single_element: the running statistics normalise the row (PyG's eval-mode rule),
    # and they do not move.
    norm = unit_module("single", allow_single_element=True)
    x, _ = unit_data("single")[0]
    torch.testing.assert_close(ranks[0]["single"]["y"], norm.eval()(x), **TOL)
    assert ranks[1]["single"]["y"].shape == (0, x.size(1))
    for key, value in norm.state_dict().items():
        assert torch.equal(ranks[0]["single"]["state"][key], value), key


def test_the_context_needs_a_process_group():
    with pytest.raises(ValueError, match="initialised torch.distributed process group"):
        with synchronized_batch_norm():
            pass
