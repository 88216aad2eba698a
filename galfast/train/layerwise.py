"""Embeddings of every node of a graph too big for one pass: layer by layer, in chunks.

An encoder that can run this way (the ready-made stacks) offers::

    encoder.num_layers                 # message-passing layers
    encoder.input_rows(inputs[nodes])  # the first layer's input rows for some nodes
    encoder.layer(i, h_src, block)     # layer i (with its activation) on a Block

Layer ``i`` is computed for all nodes, ``chunk_size`` destinations at a time, on a one-hop
block holding every in-edge of the chunk (no sampling), from layer ``i - 1``'s rows of the
block's nodes. Peak memory is two layers' ``[num_nodes, D]`` outputs plus one chunk's block,
never a whole-graph activation per layer at once; the result equals the full-graph encoder's
(eval mode) up to float summation order.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from galfast import ops
from galfast._dtypes import as_int
from galfast.graph import Graph

__all__ = ["layerwise_embed", "supports_layerwise"]

_PROTOCOL = ("num_layers", "input_rows", "layer")


def supports_layerwise(encoder: nn.Module) -> bool:
    return all(hasattr(encoder, name) for name in _PROTOCOL)


@torch.no_grad()
def layerwise_embed(encoder: nn.Module, graph: Graph, inputs: Tensor, chunk_size: int) -> Tensor:
    """``[num_nodes, D]``: the encoder applied to every node of ``graph``, layer by layer over
    chunks of ``chunk_size`` destination nodes (see the module docstring)."""
    if not supports_layerwise(encoder):
        raise ValueError(
            f"layer-wise embedding needs an encoder with {', '.join(_PROTOCOL)} (GNNStack, "
            f"EmbeddingEncoder); {type(encoder).__name__} lacks them"
        )
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
    # A negative size made no chunk but the empty one: the rows were returned uninitialised.
    size = as_int(chunk_size)
    if size is None or size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
    layers = as_int(encoder.num_layers)
    if layers is None or layers < 0:  # a negative count returned None
        raise ValueError(f"encoder.num_layers must be an int >= 0, got {encoder.num_layers!r}")
    # Rows past the inputs failed on indexing mid-way ("index 66 is out of bounds").
    if not isinstance(inputs, Tensor) or inputs.dim() < 1 or inputs.size(0) != graph.num_nodes:
        shape = list(inputs.shape) if isinstance(inputs, Tensor) else type(inputs).__name__
        raise ValueError(f"inputs must have one row per node ({graph.num_nodes}), got {shape}")
    chunk_size = size
    n, device = graph.num_nodes, graph.device
    chunks = [(s, min(n, s + chunk_size)) for s in range(0, n, chunk_size)] or [(0, 0)]
    h = None
    if layers == 0:
        return encoder.input_rows(inputs)
    for i in range(layers):
        out = None
        for start, stop in chunks:
            nodes = torch.arange(start, stop, device=device)
            (block,) = ops.sample_neighbors(graph, nodes, [-1], seed=0)
            src = block.src_nodes
            h_src = encoder.input_rows(inputs[src]) if h is None else h[src]
            part = encoder.layer(i, h_src, block)
            # A wrong row count would fail in the copy below, or broadcast one row silently.
            if not isinstance(part, Tensor) or part.dim() < 1 or part.size(0) != stop - start:
                shape = list(part.shape) if isinstance(part, Tensor) else type(part).__name__
                raise ValueError(
                    f"encoder.layer({i}, ...) must return one row per destination node of the "
                    f"block ({stop - start}), got {shape}"
                )
            if out is None:
                out = part.new_empty(n, *part.shape[1:])
            out[start:stop] = part
        h = out
    return h
