"""The ops' non-tensor arguments as users pass them: NumPy scalars and 0-d tensors give the
Python value's result; bools, floats for ints, strings, None, 1-element tensors, values out of
range (past int64 / uint64 too) and non-finite rates are refused with a ValueError naming the
argument, never a TypeError, an OverflowError or a silently truncated or truth-read value."""

import re

import numpy as np
import pytest
import torch
from torch import Tensor

from galfast import Graph
from galfast.ops import (
    Block,
    NeighborLoader,
    aggregate,
    batch_norm,
    block_aggregate,
    compgcn_aggregate,
    gat_aggregate,
    nnconv_aggregate,
    sample_neighbors,
    sample_nhop,
)
from galfast.ops.batch_norm import update_running_stats

# a 4-cycle, both directions
G = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2, 2, 3, 3, 0], [1, 0, 2, 1, 3, 2, 0, 3]]))
TYPED = Graph.from_edge_index(
    torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), edge_type=torch.tensor([0, 1, 0, 1])
)
STARTS = torch.tensor([0, 1, 2, 3])
_gen = torch.Generator().manual_seed(0)
X = torch.randn(4, 3, generator=_gen)
H = torch.randn(4, 2, 3, generator=_gen)
ALPHA = torch.randn(4, 2, generator=_gen)
EDGE_HIDDEN = torch.randn(8, 2, generator=_gen)
WEIGHT = torch.randn(6, 2, generator=_gen)
REL = torch.randn(2, 2, generator=_gen)
BLOCK = sample_neighbors(G, STARTS[:2], [2], seed=0)[0]


def _walk(**kwargs):
    args = dict(hops=2, seed=0, return_paths=True)
    args.update(kwargs)
    return sample_nhop(G, STARTS, args.pop("hops"), **args)


def _loader(epoch=0, **kwargs):
    args = dict(fanouts=[1, 1], batch_size=2, seed=0)
    args.update(kwargs)
    return list(
        NeighborLoader(G, None, args.pop("fanouts"), args.pop("batch_size"), **args).epoch(epoch)
    )


def _gat(**kwargs):
    return gat_aggregate(G, H, ALPHA, ALPHA, **{"dropout": 0.5, "seed": 1, **kwargs})


def _running(num_rows=4, momentum=0.5):
    running = torch.zeros(3)
    update_running_stats(running, None, torch.ones(3), torch.ones(3), num_rows, momentum)
    return running


def _same(a, b) -> bool:
    if isinstance(a, Tensor):
        return isinstance(b, Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, Block):
        fields = ("src_nodes", "rowptr", "col", "edge_id")
        return a.num_dst == b.num_dst and all(_same(getattr(a, f), getattr(b, f)) for f in fields)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _refused(call, name: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(name) + " must " + problem):
        call()


# ---------------------------------------------------------------- integer arguments
# case -> (the argument as errors name it, a call with the value, a valid int, the lowest valid)
INTS = {
    "nhop hops": ("hops", lambda v: _walk(hops=v), 2, 1),
    "nhop seed": ("seed", lambda v: _walk(seed=v), 5, 0),
    "nhop max_retries": ("max_retries", lambda v: _walk(mode="exact", max_retries=v), 3, 0),
    "nhop walk_offset": ("walk_offset", lambda v: _walk(walk_offset=v), 3, 0),
    "sampler fanout": (
        "fanouts[1]",
        lambda v: sample_neighbors(G, STARTS[:2], [1, v], seed=0),
        1,
        -1,
    ),
    "sampler seed": ("seed", lambda v: sample_neighbors(G, STARTS[:2], [1], seed=v), 5, 0),
    "sampler batch": (
        "batch",
        lambda v: sample_neighbors(G, STARTS[:2], [1], seed=0, batch=v),
        3,
        0,
    ),
    "gat seed": ("seed", lambda v: _gat(seed=v), 5, 0),
    "loader fanout": ("fanouts[0]", lambda v: _loader(fanouts=[v]), 1, -1),
    "loader batch_size": ("batch_size", lambda v: _loader(batch_size=v), 3, 1),
    "loader seed": ("seed", lambda v: _loader(seed=v), 5, 0),
    "loader epoch": ("epoch", lambda v: _loader(epoch=v), 2, 0),
    "running num_rows": ("num_rows", lambda v: _running(num_rows=v), 4, 2),
}
INT_FORMS = {
    "np.int64": np.int64,
    "np.int32": np.int32,
    "np.uint64": np.uint64,
    "0-d tensor": torch.tensor,
    "0-d int32 tensor": lambda v: torch.tensor(v, dtype=torch.int32),
}
NOT_INTS = {
    "True": lambda v: True,
    "np.True_": lambda v: np.True_,
    "float": float,  # 2.0: an int's value, still refused
    "float+0.5": lambda v: v + 0.5,  # would be truncated
    "np.float64": np.float64,
    "str": str,
    "None": lambda v: None,
    "[v]": lambda v: [v],
    "1-element tensor": lambda v: torch.tensor([v]),
    "0-d float tensor": lambda v: torch.tensor(float(v)),
    "0-d bool tensor": lambda v: torch.tensor(True),
}


@pytest.mark.parametrize("case", INTS)
@pytest.mark.parametrize("form", INT_FORMS)
def test_integer_types_give_the_python_ints_result(case, form):
    _, call, value, _ = INTS[case]
    assert _same(call(INT_FORMS[form](value)), call(value))


@pytest.mark.parametrize(
    "case, form",
    # gat's seed=None draws one from torch's generator
    [(c, f) for c in INTS for f in NOT_INTS if (c, f) != ("gat seed", "None")],
)
def test_non_integers_are_refused(case, form):
    name, call, value, _ = INTS[case]
    _refused(lambda: call(NOT_INTS[form](value)), name, "be an int")


OUT_OF_RANGE = {
    "low - 1": lambda low: low - 1,
    "np.int64(low - 1)": lambda low: np.int64(low - 1),
    "2**64": lambda low: 2**64,  # past uint64
    "-2**64": lambda low: -(2**64),
}


@pytest.mark.parametrize("case", INTS)
@pytest.mark.parametrize("form", OUT_OF_RANGE)
def test_integers_out_of_range_are_refused(case, form):
    name, call, _, low = INTS[case]
    _refused(lambda: call(OUT_OF_RANGE[form](low)), name, "lie in")


def test_gat_seed_past_int64_is_refused():
    _refused(lambda: _gat(seed=2**63), "seed", "lie in")
    _refused(lambda: _gat(seed=np.uint64(2**63)), "seed", "lie in")


def test_largest_uint64_seed_is_taken():
    assert _same(_walk(seed=np.uint64(2**64 - 1)), _walk(seed=2**64 - 1))
    assert _same(
        sample_neighbors(G, STARTS[:2], [1], seed=np.uint64(2**64 - 1)),
        sample_neighbors(G, STARTS[:2], [1], seed=2**64 - 1),
    )


# ---------------------------------------------------------------- real-valued arguments
FLOATS = {
    "gat dropout": ("dropout", lambda v: _gat(dropout=v)),
    "gat negative_slope": ("negative_slope", lambda v: _gat(negative_slope=v)),
    "batch_norm eps": ("eps", lambda v: batch_norm(X, eps=v)),
    "running momentum": ("momentum", lambda v: _running(momentum=v)),
}
REAL_FORMS = {
    "np.float64(0.5)": (np.float64(0.5), 0.5),
    "np.float32(0.5)": (np.float32(0.5), 0.5),
    "0-d tensor 0.5": (torch.tensor(0.5), 0.5),
    "0-d float64 tensor 0.5": (torch.tensor(0.5, dtype=torch.float64), 0.5),
    "np.int64(1)": (np.int64(1), 1),
    "0-d int tensor 1": (torch.tensor(1), 1),
}
NOT_REALS = {
    "True": True,
    "np.True_": np.True_,
    "str": "0.5",
    "None": None,
    "[0.5]": [0.5],
    "1-element tensor": torch.tensor([0.5]),
    "0-d bool tensor": torch.tensor(False),
    "complex": 0.5j,
}
NOT_FINITE = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": -float("inf"),
    "np.nan": np.float64("nan"),
    "0-d nan tensor": torch.tensor(float("nan")),
    "int past float": 10**400,  # math.isfinite raised OverflowError
}


@pytest.mark.parametrize("case", FLOATS)
@pytest.mark.parametrize("form", REAL_FORMS)
def test_real_types_give_the_python_numbers_result(case, form):
    _, call = FLOATS[case]
    value, python = REAL_FORMS[form]
    assert _same(call(value), call(python))


@pytest.mark.parametrize("case", FLOATS)
@pytest.mark.parametrize("form", NOT_REALS)
def test_non_numbers_are_refused(case, form):
    name, call = FLOATS[case]
    _refused(lambda: call(NOT_REALS[form]), name, "be a finite number")


@pytest.mark.parametrize("case", FLOATS)
@pytest.mark.parametrize("form", NOT_FINITE)
def test_non_finite_numbers_are_refused(case, form):
    name, call = FLOATS[case]
    _refused(lambda: call(NOT_FINITE[form]), name, "(be finite|be a finite number|lie in|be in)")


@pytest.mark.parametrize(
    "name, call, value",
    [
        ("dropout", lambda v: _gat(dropout=v), 1.5),
        ("dropout", lambda v: _gat(dropout=v), -0.1),
        ("eps", lambda v: batch_norm(X, eps=v), -1e-5),
        ("momentum", lambda v: _running(momentum=v), 2),
    ],
)
def test_reals_out_of_range_are_refused(name, call, value):
    _refused(lambda: call(value), name, "(lie in|be in|be a finite number >= 0)")


# ---------------------------------------------------------------- flags
FLAGS = {
    "nhop return_paths": ("return_paths", lambda v: _walk(return_paths=v)),
    "batch_norm return_stats": ("return_stats", lambda v: batch_norm(X, return_stats=v)),
    "loader shuffle": ("shuffle", lambda v: _loader(shuffle=v)),
    "loader drop_last": ("drop_last", lambda v: _loader(batch_size=3, drop_last=v)),
}
NOT_FLAGS = {
    "1": 1,
    "0": 0,
    "np.int64(1)": np.int64(1),
    "1.0": 1.0,
    "'no'": "no",  # truthy: it read as True
    "None": None,  # falsy
    "0-d bool tensor": torch.tensor(True),
}


@pytest.mark.parametrize("case", FLAGS)
@pytest.mark.parametrize("flag", [True, False])
def test_numpy_bools_give_the_python_bools_result(case, flag):
    _, call = FLAGS[case]
    assert _same(call(np.bool_(flag)), call(flag))


@pytest.mark.parametrize("case", FLAGS)
@pytest.mark.parametrize("form", NOT_FLAGS)
def test_non_bools_are_refused(case, form):
    name, call = FLAGS[case]
    _refused(lambda: call(NOT_FLAGS[form]), name, "be a bool")


# ---------------------------------------------------------------- mode names
CHOICES = {
    "nhop mode": ("mode", lambda v: _walk(mode=v), "simple"),
    "aggregate reduce": ("reduce", lambda v: aggregate(G, X, reduce=v), "mean"),
    "aggregate norm": ("norm", lambda v: aggregate(G, X, norm=v), "gcn"),
    "block reduce": (
        "reduce",
        lambda v: block_aggregate(BLOCK, X[: BLOCK.num_src], reduce=v),
        "max",
    ),
    "compgcn composition": (
        "composition",
        lambda v: compgcn_aggregate(TYPED, X[:3, :2], REL, composition=v),
        "mult",
    ),
    "compgcn norm": ("norm", lambda v: compgcn_aggregate(TYPED, X[:3, :2], REL, norm=v), "gcn"),
    "nnconv reduce": (
        "reduce",
        lambda v: nnconv_aggregate(G, X, EDGE_HIDDEN, WEIGHT, reduce=v),
        "mean",
    ),
}
NOT_CHOICES = {
    "upper case": lambda v: v.upper(),
    "[name]": lambda v: [v],  # unhashable: compgcn raised TypeError
    "np.array([name])": lambda v: np.array([v]),  # compared elementwise
    "np.array([name, name])": lambda v: np.array([v, v]),  # NumPy's own "truth value" error
    "bytes": lambda v: v.encode(),
    "0": lambda v: 0,
    "0-d tensor": lambda v: torch.tensor(0),
    "True": lambda v: True,
}


@pytest.mark.parametrize("case", CHOICES)
def test_numpy_strings_give_the_python_strings_result(case):
    _, call, value = CHOICES[case]
    assert _same(call(np.str_(value)), call(value))


@pytest.mark.parametrize("case", CHOICES)
@pytest.mark.parametrize("form", NOT_CHOICES)
def test_unknown_choices_are_refused(case, form):
    name, call, value = CHOICES[case]
    _refused(lambda: call(NOT_CHOICES[form](value)), name, "be one of")


@pytest.mark.parametrize("fanouts", [np.array([[1, 1]]), torch.tensor(1), "11", 2, None])
def test_fanouts_must_be_a_sequence(fanouts):
    _refused(lambda: sample_neighbors(G, STARTS[:2], fanouts, seed=0), "fanouts", "be a sequence")
    _refused(lambda: _loader(fanouts=fanouts), "fanouts", "be a sequence")


@pytest.mark.parametrize("fanouts", [np.array([1, 2]), torch.tensor([1, 2])])
def test_a_1d_array_of_fanouts_is_a_sequence(fanouts):
    # as galfast.train.NeighborSampling takes it; refused as "not a sequence" before
    want = sample_neighbors(G, STARTS[:2], [1, 2], seed=0)
    assert _same(sample_neighbors(G, STARTS[:2], fanouts, seed=0), want)
    assert _same(_loader(fanouts=fanouts), _loader(fanouts=[1, 2]))
    with pytest.raises(ValueError, match=r"fanouts\[1\] must lie in"):
        sample_neighbors(G, STARTS[:2], np.array([1, -2]), seed=0)


def test_numpy_fanouts_reach_the_sampler_as_ints():
    loader = NeighborLoader(G, None, [np.int64(1), torch.tensor(2)], np.int32(2), seed=np.uint64(5))
    assert [type(v) for v in (*loader.fanouts, loader.batch_size, loader.seed)] == [int] * 4
    assert _same(list(loader.epoch(0)), _loader(fanouts=[1, 2], seed=5))
