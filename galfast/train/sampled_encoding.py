"""Encoding a mini-batch's nodes through their sampled computation graph.

With several processes, each encodes its share of a batch; the encoder's
:class:`galfast.nn.BatchNorm` layers then take their batch statistics over the rows of every
process (:func:`galfast.nn.sync_batch_norm.synchronized_batch_norm`), and torch's own
BatchNorm layers, which would normalise each share alone, are refused."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from galfast import ops
from galfast.gal.seeding import derive_seed
from galfast.graph import Graph
from galfast.nn import BatchNorm
from galfast.nn.sync_batch_norm import synchronized_batch_norm
from galfast.train.distributed import ProcessGroup
from galfast.train.sampling import NeighborSampling

__all__ = ["SampledEncoder", "TASK", "ADVERSARY"]

# torch's BatchNorm1d/2d/3d (and the lazy ones); SyncBatchNorm reduces over processes itself.
_TorchBatchNorm = nn.modules.batchnorm._BatchNorm

# The sampler's batch counter tells a step's two encodings apart (same seed, the step's).
TASK, ADVERSARY = 0, 1


class SampledEncoder:
    """Encodes any nodes of ``graph`` through neighbour-sampled blocks.

    ``inputs`` is the trainer's encoder input (``[N, F]`` features or the node ids); the
    encoder receives the rows of the outermost block's nodes. Each node's neighbours are drawn
    from ``(seed, step, purpose)`` and the node alone, so its embedding does not depend on the
    other nodes of the batch, nor on how a batch is split between processes.

    With a ``process_group`` of several processes, an encoder holding a BatchNorm that uses
    batch statistics encodes under :func:`synchronized_batch_norm`: its statistics (and its
    input gradient) cover every process's rows. Every process then runs the encoder at every
    call, one with no nodes too (it encodes zero rows and runs its zero backward at once,
    joining the others' reductions in the same order); a step no process has nodes for
    encodes nothing anywhere.
    """

    def __init__(
        self,
        sampling: NeighborSampling,
        graph: Graph,
        inputs: Tensor,
        seed: int,
        process_group: Optional[ProcessGroup] = None,
    ):
        self.sampling, self.graph, self.inputs, self.seed = sampling, graph, inputs, seed
        self.process_group = ProcessGroup() if process_group is None else process_group
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
        if not self._synchronizes(encoder):
            if seeds.numel() == 0:
                return None, rows
            return self._encode(encoder, seeds, step, purpose), rows
        count = torch.tensor([seeds.numel()], dtype=torch.int64, device=nodes.device)
        if int(self.process_group.sum(count).item()) == 0:
            return None, rows
        with synchronized_batch_norm():
            z = self._encode(encoder, seeds, step, purpose)
        if seeds.numel() == 0:
            # The processes with nodes will backpropagate through the synchronised layers:
            # their backward reductions need this process too (zero rows, zero gradients).
            if z.requires_grad:
                torch.autograd.backward(z, torch.zeros_like(z))
            return None, rows
        return z, rows

    def check_encoder(self, encoder: nn.Module) -> None:
        """Refuses, with several processes, torch BatchNorm layers in ``encoder``: each
        process would normalise its share alone and their running statistics drift apart; and
        embeddings with a ``max_norm``: each process rescales, in place, the rows its own share
        looks up, so the processes' tables drift apart (no gradient average undoes it)."""
        if not self.process_group.enabled:
            return
        for name, module in encoder.named_modules():
            if getattr(module, "max_norm", None) is not None:
                raise ValueError(
                    f"the encoder's {name or 'root module'} ({type(module).__name__}) has "
                    f"max_norm={module.max_norm}: in multi-process sampled training each process "
                    "would rescale the rows its own share looks up, in place, and the processes' "
                    "embedding tables would drift apart; train it without max_norm, or in one "
                    "process"
                )
        ours = {id(m.module) for m in encoder.modules() if isinstance(m, BatchNorm)}
        for name, module in encoder.named_modules():
            plain = isinstance(module, _TorchBatchNorm) and not isinstance(module, nn.SyncBatchNorm)
            if plain and id(module) not in ours:
                raise ValueError(
                    f"the encoder's {name or 'root module'} is a torch.nn."
                    f"{type(module).__name__}: in multi-process sampled training each process "
                    "would normalise its own share of the batch and the running statistics "
                    "would drift apart between processes; use galfast.nn.BatchNorm (its batch "
                    "statistics are synchronised across processes)"
                )

    def _synchronizes(self, encoder: nn.Module) -> bool:
        """Several processes and a BatchNorm of the encoder that uses batch statistics."""
        if not self.process_group.enabled:
            return False
        for module in encoder.modules():
            if isinstance(module, BatchNorm) and module.module.uses_batch_stats():
                return True
            if isinstance(module, nn.SyncBatchNorm) and module.training:
                return True  # it reduces by itself, but every process must run it
        return False

    def _encode(self, encoder: nn.Module, seeds: Tensor, step: int, purpose: int) -> Tensor:
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
        return z
