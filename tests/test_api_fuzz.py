"""Property tests over the public API with malformed inputs: random batches of cases run in
one subprocess each (tests/_api_cases.py), so a crash fails the test and names its case. Every
case must end normally or in ValueError / TypeError; anything else (a signal, a RuntimeError
from deep inside torch, an IndexError) is a bug."""

import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from same_galfast import GALFAST_PARENT, same_galfast_env

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOWED = {"ok", "skip", "ValueError", "TypeError"}
BATCH = 60

small_ints = st.integers(-3, 8)
odd_ints = st.sampled_from([-(2**63), -1, 0, 2**31, 2**32 + 1, 2**62, 2**63 - 1])
any_int = st.one_of(small_ints, odd_ints)
scalars = st.one_of(
    any_int, st.sampled_from([3.5, 2.0, True, False, "3", None, float("nan"), float("inf")])
)
num_nodes = st.one_of(st.integers(0, 6), scalars)
weights = st.one_of(
    st.none(),
    st.lists(st.sampled_from([1.0, -2.5, 0.0, float("nan"), float("inf")]), max_size=8),
)
index_dtype = st.sampled_from(["int64", "int64", "int32", "float32", "bool"])

csr_graphs = st.fixed_dictionaries(
    {
        "rowptr": st.lists(any_int, max_size=8),
        "col": st.lists(any_int, max_size=8),
        "num_nodes": num_nodes,
        "dtype": index_dtype,
        "edge_weight": weights,
    }
)
edge_list_graphs = st.fixed_dictionaries(
    {
        "edge_index": st.lists(st.one_of(st.integers(0, 5), any_int), max_size=12).map(
            lambda v: v[: len(v) // 2 * 2]
        ),
        "num_nodes": st.one_of(st.none(), num_nodes),
        "dtype": index_dtype,
        "edge_weight": weights,
        "edge_type": st.one_of(st.none(), st.lists(any_int, max_size=6)),
        "symmetrize": st.booleans(),
    }
)
# Mostly valid graphs, so that the ops' own checks and kernels are reached.
valid_graphs = st.fixed_dictionaries(
    {
        "edge_index": st.lists(st.integers(0, 5), min_size=2, max_size=16).map(
            lambda v: v[: len(v) // 2 * 2]
        ),
        "num_nodes": st.just(None),
        "dtype": st.just("int64"),
        "edge_weight": st.none(),
        "edge_type": st.none(),
        "symmetrize": st.booleans(),
    }
)
graphs = st.one_of(csr_graphs, edge_list_graphs, valid_graphs, valid_graphs)

op_args = st.one_of(
    st.fixed_dictionaries(
        {
            "op": st.just("aggregate"),
            "args": st.fixed_dictionaries(
                {
                    "features": st.integers(0, 5),
                    "extra_rows": st.sampled_from([0, 0, 0, 1, -1]),
                    "reduce": st.sampled_from(["sum", "mean", "max", "min", None]),
                    "norm": st.sampled_from([None, "gcn", "sym"]),
                    "weight": weights,
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "op": st.just("gat"),
            "args": st.fixed_dictionaries(
                {
                    "features": st.integers(0, 4),
                    "heads": st.integers(0, 3),
                    "dst_heads": st.integers(0, 3),
                    "logit": st.sampled_from([0.0, -float("inf"), float("inf"), 1e30]),
                    "dropout": st.one_of(st.sampled_from([0.0, 0.5, 1.0]), scalars),
                    "seed": st.one_of(st.none(), scalars),
                    "slope": st.one_of(st.just(0.2), scalars),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "op": st.just("nnconv"),
            "args": st.fixed_dictionaries(
                {
                    "features": st.integers(0, 3),
                    "hidden": st.integers(0, 3),
                    "out": st.integers(1, 3),
                    "extra_rows": st.sampled_from([0, 0, 0, 1]),
                    "bias": st.booleans(),
                    "reduce": st.sampled_from(["sum", "mean", "max", None]),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "op": st.just("walk"),
            "args": st.fixed_dictionaries(
                {
                    "starts": st.lists(st.one_of(st.integers(0, 5), any_int), max_size=4),
                    "hops": st.one_of(st.integers(1, 4), scalars),
                    "seed": st.one_of(st.integers(0, 2**64 - 1), scalars),
                    "mode": st.sampled_from(["paper", "simple", "exact", "fast", None]),
                    "max_retries": st.one_of(st.integers(0, 20), scalars),
                    "walk_offset": st.one_of(st.just(0), any_int),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["gcn", "gat_conv"]),
            "args": st.fixed_dictionaries({"edit": st.integers(0, 3), "value": any_int}),
        }
    ),
)
edits = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "field": st.sampled_from(["rowptr", "col"]),
            "index": st.integers(0, 20),
            "value": any_int,
            "warm": st.booleans(),
        }
    ),
)
cases = st.builds(lambda g, op, edit: {"graph": g, **op, "edit": edit}, graphs, op_args, edits)


def run_batch(batch):
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "_api_cases.py")],
        input="".join(json.dumps(case) + "\n" for case in batch),
        capture_output=True,
        text=True,
        cwd=GALFAST_PARENT,
        env=same_galfast_env(),
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    started = [line for line in lines if line.startswith("start ")]
    last = batch[int(started[-1].split()[1])] if started else None
    assert proc.returncode == 0, (
        f"the case runner died (rc {proc.returncode}) on case {last}\n{proc.stderr[-2000:]}"
    )
    for line in lines:
        if line.startswith("start "):
            continue
        index, outcome, *message = line.split(" ", 2)
        assert outcome in ALLOWED, f"case {batch[int(index)]} raised {outcome}: {message}"
    assert len(started) == len(batch)


# No shrinking: a failure already names its case, and a shrink would rerun subprocesses.
# Derandomised: every run draws the same cases, so CI cannot go red on a draw no one made
# before (a wider search is a local run with more examples).
@settings(
    max_examples=4,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(st.lists(cases, min_size=BATCH, max_size=BATCH))
def test_public_api_never_crashes_on_malformed_input(batch):
    run_batch(batch)
