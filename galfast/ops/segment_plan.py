"""The CUDA sum's work plan: every CSR row cut into segments of at most ``seg_edges`` edges.

One warp of csrc/aggregate/aggregate_sum_cuda.cu takes one segment, so a hub with thousands
of edges is spread over many warps instead of one long chain of loads, and every warp does
about the same work. The plan travels to the kernel as one int64 tensor,
``[seg_begin (S + 1) | seg_row (S) | row_seg_ptr (num_rows + 1)]``: segment s covers edges
``seg_begin[s] .. seg_begin[s + 1]`` of row ``seg_row[s]``; row r owns segments
``row_seg_ptr[r] .. row_seg_ptr[r + 1]`` (one, possibly empty, at least). Rows are cut in
order, so the segments tile the edges ``0 .. nnz`` in order.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

__all__ = ["build_segment_plan", "num_segments", "segment_edges", "segment_plan"]

# Segments per resident warp slot the plan aims for. One wave measured fastest on an H200
# (bench/aggregate_cuda_kernels.py): longer segments on a big graph (256 edges on the
# MovieLens-size one, 10% faster than 64), the shortest on a small one (32 on PubMed's).
_WAVES = 1
_MIN_SEG_EDGES, _MAX_SEG_EDGES = 32, 4096


def build_segment_plan(rowptr: Tensor, seg_edges: int) -> Tensor:
    """The packed plan (module docstring) of a CSR row pointer, on rowptr's device."""
    if seg_edges < 1:
        raise ValueError(f"seg_edges must be positive, got {seg_edges}")
    num_rows = rowptr.numel() - 1
    degree = rowptr.diff()
    per_row = torch.div(degree + seg_edges - 1, seg_edges, rounding_mode="floor").clamp_min_(1)
    row_seg_ptr = torch.zeros(num_rows + 1, dtype=torch.long, device=rowptr.device)
    torch.cumsum(per_row, 0, out=row_seg_ptr[1:])
    total = int(row_seg_ptr[-1])
    rows = torch.arange(num_rows, device=rowptr.device)
    seg_row = torch.repeat_interleave(rows, per_row, output_size=total)
    rank = torch.arange(total, device=rowptr.device) - row_seg_ptr[seg_row]
    seg_begin = torch.cat([rowptr[seg_row] + rank * seg_edges, rowptr[-1:]])
    return torch.cat([seg_begin, seg_row, row_seg_ptr])


def num_segments(plan: Tensor, num_rows: int) -> int:
    """S of a packed plan over `num_rows` rows (its length is 2 S + num_rows + 2)."""
    return (plan.numel() - num_rows - 2) // 2


def segment_edges(num_edges: int, device: torch.device) -> int:
    """The segment length for a graph of `num_edges` edges on a CUDA device: a power of two
    giving about _WAVES segments per resident warp slot, between 32 and 4096 edges."""
    target = _WAVES * _warp_slots(device.index if device.index is not None else 0)
    length = _MIN_SEG_EDGES
    while length < _MAX_SEG_EDGES and length * target < num_edges:
        length *= 2
    return length


@functools.cache
def _warp_slots(device_index: int) -> int:
    props = torch.cuda.get_device_properties(device_index)
    return props.multi_processor_count * props.max_threads_per_multi_processor // 32


def segment_plan(structure: Any, rowptr: Tensor, num_edges: int, transposed: bool) -> Tensor:
    """The plan of `structure`'s CSR (``rowptr`` over ``num_edges`` edges) or of its transpose,
    cached on the structure (a Graph or a Block: both immutable)."""
    return structure.cached(
        ("segment plan", transposed),
        lambda: build_segment_plan(rowptr, segment_edges(num_edges, rowptr.device)),
    )
