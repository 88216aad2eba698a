"""The ops refuse what they cannot compute right (NaN weights, non-int seeds, absurd retry
budgets), a -inf attention logit contributes exactly nothing, and a long walk batch on the
CPU runs in rounds that Ctrl-C interrupts without changing any result."""

import signal
import subprocess
import sys
import time

import pytest
import torch
from same_galfast import GALFAST_PARENT, same_galfast_env

from galfast import Graph
from galfast.ops import aggregate, gat_aggregate, sample_nhop

sample_nhop_module = sys.modules["galfast.ops.sample_nhop"]


def _complete_graph(n: int) -> Graph:
    ids = torch.arange(n)
    src, dst = torch.meshgrid(ids, ids, indexing="ij")
    keep = src != dst
    return Graph.from_edge_index(torch.stack([src[keep], dst[keep]]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_aggregate_refuses_non_finite_weights(bad):
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        aggregate(g, torch.ones(2, 2), edge_weight=torch.tensor([bad, 1.0]))


@pytest.mark.parametrize("seed", [1.7, 2.0, True, "1"])
def test_gat_seed_must_be_an_int(seed):
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="seed must be an int"):
        gat_aggregate(g, torch.ones(2, 1, 3), torch.zeros(2, 1), torch.zeros(2, 1), seed=seed)


@pytest.mark.parametrize("name, value", [("dropout", "0.1"), ("negative_slope", None)])
def test_gat_float_arguments_must_be_numbers(name, value):
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        gat_aggregate(g, torch.ones(2, 1, 3), torch.zeros(2, 1), torch.zeros(2, 1), **{name: value})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gat_minus_inf_logit_contributes_nothing(dtype):
    # Node 1 attends to node 0 (logit -inf, huge message) and to itself (logit 0).
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]))
    h = torch.tensor([[[1e30]], [[1.0]]], dtype=dtype)
    alpha_src = torch.tensor([[-float("inf")], [0.0]], dtype=dtype)
    out = gat_aggregate(g, h, alpha_src, torch.zeros(2, 1, dtype=dtype))
    assert out[1].item() == 1.0


def test_gat_logits_far_below_the_max_underflow_to_zero():
    # exp(-100) underflows in float32: the small term must be exactly 0, not exp(-87).
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]))
    h = torch.tensor([[[1e36]], [[1.0]]])
    out = gat_aggregate(g, h, torch.tensor([[-500.0], [0.0]]), torch.zeros(2, 1))
    assert out[1].item() == 1.0


def test_max_retries_is_bounded():
    g = _complete_graph(5)
    with pytest.raises(ValueError, match="max_retries must lie in"):
        sample_nhop(g, torch.tensor([0]), 2, seed=0, mode="exact", max_retries=2**31 - 1)
    out = sample_nhop(g, torch.tensor([0]), 2, seed=0, mode="exact", max_retries=1000)
    assert out.tolist() == [-1]  # every node of K5 is within one hop


@pytest.mark.parametrize("mode", ["paper", "exact"])
def test_walk_rounds_do_not_change_results(monkeypatch, mode):
    torch.manual_seed(0)
    edges = torch.randint(0, 60, (2, 240))
    g = Graph.from_edge_index(edges, num_nodes=60, symmetrize=True)
    starts = torch.randint(0, 60, (500,))
    kwargs = dict(seed=3, mode=mode, max_retries=40, return_paths=True, walk_offset=7)
    whole = sample_nhop(g, starts, 3, **kwargs)
    monkeypatch.setattr(sample_nhop_module, "_HOPS_PER_ROUND", 16)  # many small rounds
    rounds = sample_nhop(g, starts, 3, **kwargs)
    assert torch.equal(whole[0], rounds[0]) and torch.equal(whole[1], rounds[1])


def test_walk_rounds_retry_until_success(monkeypatch):
    # Exact 2-hop walks on a cycle with chords: some need retries, which span rounds here.
    g = Graph.from_edge_index(
        torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 3]]), symmetrize=True
    )
    starts = torch.arange(6).repeat(50)
    whole = sample_nhop(g, starts, 2, seed=1, mode="exact", max_retries=30)
    monkeypatch.setattr(sample_nhop_module, "_HOPS_PER_ROUND", 1)
    assert torch.equal(sample_nhop(g, starts, 2, seed=1, mode="exact", max_retries=30), whole)


def test_long_walk_batch_is_interruptible():
    code = (
        # A job started in the background inherits SIGINT ignored, and Python then installs
        # no KeyboardInterrupt handler: install it, as a terminal session has it.
        "import signal, sys, torch\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from galfast import Graph\n"
        "from galfast.ops import sample_nhop\n"
        # Short native rounds: the test times the check between rounds, not a round's length
        # (a production round can take seconds on a loaded machine).
        "sys.modules['galfast.ops.sample_nhop']._HOPS_PER_ROUND = 2**14\n"
        "ids = torch.arange(5)\n"
        "s, d = torch.meshgrid(ids, ids, indexing='ij')\n"
        "g = Graph.from_edge_index(torch.stack([s[s != d], d[s != d]]))\n"
        # One-time costs of a first call come before the signal, so what is timed is the
        # interrupt of the native walk.
        "sample_nhop(g, torch.zeros(1, dtype=torch.long), 2, seed=0, mode='exact', max_retries=1)\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    sample_nhop(g, torch.zeros(10000, dtype=torch.long), 2, seed=0, mode='exact',\n"
        "                max_retries=2**20)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "    sys.exit(3)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=GALFAST_PARENT,
        env=same_galfast_env(),
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)  # inside the native walks by now (they need minutes)
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=30)
        finally:
            proc.kill()
        waited = time.monotonic() - sent
    assert waited < 10  # the uninterrupted walk needs minutes
    assert proc.returncode == 3 and rest.strip() == "interrupted"
