"""galfast.nn.BatchNorm under synchronized_batch_norm on two gloo processes, for
tests/test_nn_sync_batch_norm.py: every process builds the same global batches and normalises
its rows of them; the test compares their records with one process on all rows."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from gloo_group import join

from galfast.nn import BatchNorm
from galfast.nn.sync_batch_norm import synchronized_batch_norm

CHANNELS = 5
# (rows of rank 0, rows of rank 1) per step, BatchNorm options, trailing dims of x.
UNIT_CASES = {
    "uneven": ([(5, 3), (2, 7)], {}, ()),
    "empty-share": ([(0, 4), (6, 0)], {"momentum": None}, ()),
    "one-row": ([(1, 6), (3, 1)], {"affine": False}, ()),
    "three-d": ([(3, 2)], {}, (4,)),
    "no-running-stats": ([(2, 5)], {"track_running_stats": False}, ()),
}
SINGLE_ROW = [(1, 0)]  # a global batch of one row


def unit_data(name: str):
    """The global batches (x [N, C, ...] float64, loss coefficients like x) of a case."""
    steps, _, tail = UNIT_CASES.get(name, (SINGLE_ROW, {}, ()))
    gen = torch.Generator().manual_seed(len(name))
    return [
        (
            torch.randn(a + b, CHANNELS, *tail, generator=gen, dtype=torch.float64) * 2 + 3,
            torch.randn(a + b, CHANNELS, *tail, generator=gen, dtype=torch.float64),
        )
        for a, b in steps
    ]


def unit_module(name: str, **extra) -> BatchNorm:
    """The case's BatchNorm, float64, with non-trivial weight and bias (the same everywhere)."""
    options = UNIT_CASES[name][1] if name in UNIT_CASES else {}
    torch.manual_seed(0)
    norm = BatchNorm(CHANNELS, dtype=torch.float64, **options, **extra)
    if norm.module.affine:
        with torch.no_grad():
            norm.module.weight.uniform_(0.5, 1.5)
            norm.module.bias.normal_()
    return norm


def grad_of(parameter):
    """A parameter's gradient; None for a parameter the module lacks (affine=False)."""
    return None if parameter is None else parameter.grad


def _share(rank: int, rows: tuple[int, int]) -> slice:
    return slice(0, rows[0]) if rank == 0 else slice(rows[0], rows[0] + rows[1])


def _unit_case(rank: int, name: str) -> dict:
    """Each step: this rank's rows through the BatchNorm, backward of the plain sum loss
    sum(y * coefficients) over its rows."""
    norm = unit_module(name)
    record = {"y": [], "grad_x": [], "grad_weight": [], "grad_bias": []}
    steps = UNIT_CASES[name][0]
    for (x, coef), rows in zip(unit_data(name), steps):
        mine = x[_share(rank, rows)].clone().requires_grad_()
        norm.zero_grad()
        with synchronized_batch_norm():
            y = norm(mine)
        (y * coef[_share(rank, rows)]).sum().backward()
        record["y"].append(y.detach())
        record["grad_x"].append(mine.grad)
        record["grad_weight"].append(grad_of(norm.module.weight))
        record["grad_bias"].append(grad_of(norm.module.bias))
    record["state"] = {k: v.clone() for k, v in norm.state_dict().items()}
    return record


def _single_row(rank: int) -> dict:
    """A global batch of one row: refused, or normalised by the running statistics."""
    x, _ = unit_data("single")[0]
    mine = x[_share(rank, SINGLE_ROW[0])]
    record = {}
    try:
        with synchronized_batch_norm():
            unit_module("single")(mine)
    except ValueError as err:
        record["error"] = str(err)
    norm = unit_module("single", allow_single_element=True)
    with synchronized_batch_norm():
        record["y"] = norm(mine).detach()
    record["state"] = {k: v.clone() for k, v in norm.state_dict().items()}
    return record


def run(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir)
    try:
        record = {name: _unit_case(rank, name) for name in UNIT_CASES}
        record["single"] = _single_row(rank)
        torch.save(record, os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
