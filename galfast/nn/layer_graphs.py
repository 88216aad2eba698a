"""What each layer of a message-passing stack runs on: one Graph, or a mini-batch's Blocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from galfast._args import check_int
from galfast.graph import Graph
from galfast.ops import Block

__all__ = ["is_blocks", "layer_graphs"]


def is_blocks(graph: Any) -> bool:
    """Whether ``graph`` is a mini-batch's computation graph: a list or tuple of Blocks."""
    return isinstance(graph, (list, tuple)) and all(isinstance(b, Block) for b in graph)


def layer_graphs(graph: Union[Graph, Sequence[Block]], num_layers: int) -> list:
    """The graph argument of each of a stack's ``num_layers`` layers, first layer first.

    A :class:`~galfast.Graph` (or any other single graph input) serves every layer. A sampled
    computation graph, the Blocks of :func:`~galfast.ops.sample_neighbors` in hop order
    (``blocks[0]``'s destinations are the seeds), runs outermost first: the first layer on
    ``blocks[-1]``, the last on ``blocks[0]``; it needs one block per layer.
    """
    num_layers = check_int("num_layers", num_layers, 0)
    if isinstance(graph, (list, tuple)):
        if not is_blocks(graph):
            raise ValueError("a list of graphs must hold galfast.ops.Block objects (hop order)")
        if len(graph) != num_layers:
            raise ValueError(
                f"this stack has {num_layers} message-passing layers but the batch holds "
                f"{len(graph)} sampled blocks: sample one hop (fan-out) per layer"
            )
        return list(reversed(graph))
    return [graph] * num_layers
