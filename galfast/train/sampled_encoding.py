"""Encoding a mini-batch's nodes through their sampled computation graph."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from galfast import ops
from galfast.gal.seeding import derive_seed
from galfast.graph import Graph
from galfast.train.sampling import NeighborSampling

__all__ = ["SampledEncoder", "TASK", "ADVERSARY"]

# The sampler's batch counter tells a step's two encodings apart (same seed, the step's).
TASK, ADVERSARY = 0, 1


class SampledEncoder:
    """Encodes any nodes of ``graph`` through neighbour-sampled blocks.

    ``inputs`` is the trainer's encoder input (``[N, F]`` features or the node ids); the
    encoder receives the rows of the outermost block's nodes. Each node's neighbours are drawn
    from ``(seed, step, purpose)`` and the node alone, so its embedding does not depend on the
    other nodes of the batch, nor on how a batch is split between processes.
    """

    def __init__(self, sampling: NeighborSampling, graph: Graph, inputs: Tensor, seed: int):
        self.sampling, self.graph, self.inputs, self.seed = sampling, graph, inputs, seed
        self.edge_weight = None
        if sampling.weighted:
            if graph.edge_weight is None:
                raise ValueError("NeighborSampling(weighted=True) needs a graph with edge weights")
            self.edge_weight = graph.edge_weight.detach()

    def encode(
        self, encoder: nn.Module, nodes: Tensor, step: int, purpose: int
    ) -> tuple[Optional[Tensor], Tensor]:
        """``(z, rows)``: embeddings of the distinct ``nodes`` and, per entry of ``nodes``, its
        row of z; z is None when ``nodes`` is empty."""
        seeds, rows = torch.unique(nodes, return_inverse=True)
        if seeds.numel() == 0:
            return None, rows
        blocks = ops.sample_neighbors(
            self.graph,
            seeds,
            self.sampling.fanouts,
            seed=derive_seed(self.seed, "neighbor_sample", step),
            batch=purpose,
            edge_weight=self.edge_weight,
        )
        z = encoder(self.inputs[blocks[-1].src_nodes], blocks)
        if not isinstance(z, Tensor) or z.dim() != 2 or z.size(0) != seeds.numel():
            shape = list(z.shape) if isinstance(z, Tensor) else type(z).__name__
            raise ValueError(
                f"on sampled blocks the encoder must return [num_seeds={seeds.numel()}, D] "
                f"embeddings (blocks[0]'s destinations), got {shape}"
            )
        return z, rows
