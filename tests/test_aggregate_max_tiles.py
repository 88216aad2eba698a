"""The CPU float32 max and its backward's masked sum in register tiles
(csrc/aggregate/aggregate_cpu_impl.h, float_max_row and float_masked_sum_row): whole tiles of
16 features (8 on CPUs without AVX2) and a feature-by-feature tail must give bitwise the
maxima and winning edge ids of the rule max_takes states: the first edge of a row
wins first, a later one only when strictly larger (ties keep the earlier edge, so +0.0 does not
replace -0.0), and the first NaN wins over any number and then sticks. The reference below
applies that rule edge by edge in float32, with the same edge factor (row scale, column scale,
then weight, looked up by edge id), on rows full of ties, signed zeros and NaNs; and the
masked sum, the sum in edge order of the values whose edge won the forward's max."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from graphs import random_edges

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate
from galfast.ops.aggregate import launch_aggregate


def edge_factor(r, c, ident, weight, row_scale, col_scale):
    """w_e in float32, in the kernel's order: row scale, column scale, then weight."""
    w = np.float32(1)
    if row_scale is not None:
        w = np.float32(w * row_scale[r])
    if col_scale is not None:
        w = np.float32(w * col_scale[c])
    if weight is not None:
        w = np.float32(w * weight[ident])
    return w


def max_reference(rowptr, col, edge_id, weight, row_scale, col_scale, x):
    """(out, arg) of the max over CSR rows, edge by edge, in float32."""
    rows, features = rowptr.size - 1, x.shape[1]
    out = np.zeros((rows, features), dtype=np.float32)
    arg = np.full((rows, features), -1, dtype=np.int64)
    for r in range(rows):
        for e in range(rowptr[r], rowptr[r + 1]):
            c, ident = col[e], edge_id[e]
            v = (x[c] * edge_factor(r, c, ident, weight, row_scale, col_scale)).astype(np.float32)
            current = out[r]
            take = (arg[r] < 0) | (v > current) | (np.isnan(v) & ~np.isnan(current))
            out[r] = np.where(take, v, current)
            arg[r] = np.where(take, ident, arg[r])
    return out, arg


def masked_sum_reference(rowptr, col, edge_id, weight, row_scale, col_scale, x, mask):
    """Max's backward on the transpose: out[r] = sum over r's edges e, in order, of w_e * x[c]
    where mask[c] == id(e), else +0.0, in float32."""
    rows, features = rowptr.size - 1, x.shape[1]
    out = np.zeros((rows, features), dtype=np.float32)
    for r in range(rows):
        for e in range(rowptr[r], rowptr[r + 1]):
            c, ident = col[e], edge_id[e]
            v = (x[c] * edge_factor(r, c, ident, weight, row_scale, col_scale)).astype(np.float32)
            out[r] = (out[r] + np.where(mask[c] == ident, v, np.float32(0))).astype(np.float32)
    return out


def awkward_features(num_nodes, features, seed):
    """Values from a small set (many ties), signed zeros, and a NaN with its own payload in
    every column (rows 5 and 6 are kept for a tie of -0.0 and +0.0)."""
    rng = np.random.default_rng(seed)
    values = np.array([-2.0, -1.0, -0.0, 0.0, 1.0, 3.0], dtype=np.float32)
    x = rng.choice(values, (num_nodes, features))
    nan_rows = rng.choice([r for r in range(num_nodes) if r not in (5, 6)], features)
    payloads = (0x7FC00000 + rng.integers(1, 1000, features)).astype(np.uint32)
    x[nan_rows, np.arange(features)] = payloads.view(np.float32)
    x[5], x[6] = -0.0, 0.0
    return x


def run_kernel(rowptr, col, edge_id, weight, row_scale, col_scale, x, mask_arg, mode):
    empty = rowptr.new_empty(0)
    args = (rowptr, col, None, edge_id, weight, row_scale, col_scale, empty, None, x, mask_arg)
    return launch_aggregate(*args, int(mode))


@pytest.mark.parametrize("features", [1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 64, 70])
@pytest.mark.parametrize("scaled", [False, True])
def test_tiles_and_tail_match_the_rule_bitwise(features, scaled):
    n = 40
    edges = random_edges(n, 500, seed=features)
    # a hub row (every node, so each column's NaN reaches it), a self loop, a duplicate edge,
    # a row of only -0.0 and +0.0 (n - 3), and rows without edges (n - 2, n - 1)
    hub = torch.stack([torch.arange(n), torch.zeros(n, dtype=torch.long)])
    extra = torch.tensor([[8, 9, 9, 5, 6], [8, 7, 7, n - 3, n - 3]])
    edge_index = torch.cat([edges[:, edges[1] < n - 3], hub, extra], dim=1)
    g = Graph.from_edge_index(edge_index, n)
    rng = np.random.default_rng(features)
    x = awkward_features(n, features, seed=features)
    edge_id = torch.from_numpy(rng.permutation(g.num_edges))
    weight = row_scale = col_scale = None
    if scaled:
        weight = torch.from_numpy(rng.choice([0.5, 1.0, 2.0], g.num_edges).astype(np.float32))
        row_scale = torch.from_numpy(rng.choice([1.0, 0.25], n).astype(np.float32))
        col_scale = torch.from_numpy(rng.choice([1.0, 4.0], n).astype(np.float32))
    tensors = (edge_id, weight, row_scale, col_scale)
    arrays = [None if t is None else t.numpy() for t in tensors]
    out, arg = run_kernel(g.rowptr, g.col, *tensors, torch.from_numpy(x), None, _C.AggMode.MAX)
    want_out, want_arg = max_reference(g.rowptr.numpy(), g.col.numpy(), *arrays, x)
    assert np.array_equal(arg.numpy(), want_arg)
    assert np.array_equal(out.numpy().view(np.uint32), want_out.view(np.uint32))
    # the case is awkward: a NaN in every column of the hub row, a tie of signed zeros won by
    # the row's first edge, rows without edges
    assert np.isnan(want_out[0]).all()
    zeros = g.rowptr[n - 3].item()
    assert (want_out[n - 3] == 0).all() and (want_arg[n - 3] == edge_id[zeros].item()).all()
    assert (want_arg[n - 2 :] == -1).all()

    # max's backward: the masked sum over the transpose (CSC rows, edges mapped to their CSR
    # slots' ids), scales swapped as the backward swaps them
    csc = g.csc
    grad = awkward_features(n, features, seed=features + 1)
    back = (edge_id[csc.edge_id], weight, col_scale, row_scale)
    got, _ = run_kernel(
        csc.colptr, csc.row, *back, torch.from_numpy(grad), arg, _C.AggMode.MASKED_SUM
    )
    back_arrays = [None if t is None else t.numpy() for t in back]
    want = masked_sum_reference(csc.colptr.numpy(), csc.row.numpy(), *back_arrays, grad, want_arg)
    assert np.array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    assert (want != 0).any() and (want == 0).any()


def test_a_nan_on_the_first_edge_sticks():
    # the first edge sets the tile; a NaN there is never replaced, even by larger numbers
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [3, 3, 3]]), 4)
    x = torch.zeros(4, 16)
    x[0, 3] = float("nan")
    x[1] = 5.0
    x[2] = 9.0
    out, arg = run_kernel(g.rowptr, g.col, None, None, None, None, x, None, _C.AggMode.MAX)
    assert torch.isnan(out[3, 3]) and arg[3, 3].item() == 0
    assert out[3, 0].item() == 9.0 and arg[3, 0].item() == 2


def test_a_tied_maximum_gets_the_whole_gradient_on_its_first_edge():
    # docs/pyg_compat.md: torch's scatter_reduce (PyG) splits it among the tied edges instead.
    graph = Graph.from_edge_index(torch.tensor([[1, 2, 3], [0, 0, 0]]), 4)
    x = torch.tensor([[0.0, 0.0], [1.0, 2.0], [1.0, 2.0], [0.5, 2.0]], requires_grad=True)
    aggregate(graph, x, reduce="max").sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
