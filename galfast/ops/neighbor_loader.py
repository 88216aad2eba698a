"""Reproducible mini-batches of seed nodes with their sampled blocks (a NeighborLoader)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from galfast._args import check_flag, check_int
from galfast._versions import check_unedited, tensor_versions
from galfast.graph import Graph
from galfast.ops.block import Block
from galfast.ops.sample_neighbors import check_fanouts, check_sampling_weights, sample_neighbors

__all__ = ["NeighborLoader", "SampledBatch"]

_MASK64 = 2**64 - 1


def _mix(seed: int, epoch: int) -> int:
    """A 63-bit generator seed for an epoch's shuffle (splitmix64 of seed and epoch), so nearby
    seeds and epochs give unrelated permutations."""
    z = (seed + 0x9E3779B97F4A7C15 * (epoch + 1)) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1


def _checked_nodes(graph: Graph, nodes) -> Tensor:
    """`nodes` as a CPU int64 tensor of distinct node ids of `graph` (all nodes for None)."""
    if nodes is None:
        return torch.arange(graph.num_nodes)
    if not isinstance(nodes, Tensor):
        raise ValueError(f"nodes must be a torch.Tensor or None, got {type(nodes).__name__}")
    if nodes.dtype not in (torch.int64, torch.int32) or nodes.dim() != 1:
        raise ValueError(
            f"nodes must be a 1-D int64/int32 tensor, got {nodes.dtype} of shape "
            f"{list(nodes.shape)}"
        )
    nodes = nodes.long().cpu()
    if nodes.numel() and (int(nodes.min()) < 0 or int(nodes.max()) >= graph.num_nodes):
        bad = int(nodes.min()) if int(nodes.min()) < 0 else int(nodes.max())
        raise ValueError(f"nodes holds {bad}, which is not a node id in [0, {graph.num_nodes})")
    if torch.unique(nodes).numel() != nodes.numel():
        raise ValueError("nodes holds a node twice; each seed node must appear once")
    return nodes


class SampledBatch(NamedTuple):
    """One mini-batch: its ``seeds`` and their :class:`Block` s in hop order (``blocks[0]``'s
    destinations are the seeds). ``batch`` is the number the sampler's random counter used."""

    batch: int
    seeds: Tensor
    blocks: list[Block]

    @property
    def input_nodes(self) -> Tensor:
        """Graph ids of every node whose features the batch's model reads (the outermost
        block's sources; features in this order feed the model's first layer)."""
        return self.blocks[-1].src_nodes


class NeighborLoader:
    """Splits ``nodes`` into batches of ``batch_size`` seeds (shuffled per epoch when
    ``shuffle``) and samples each batch's computation graph with
    :func:`~galfast.ops.sample_neighbors`.

    Reproducible: epoch ``e``'s order is a pure function of ``(seed, e)`` (a CPU
    ``torch.randperm``, the same whatever the device or thread count) and its batch ``b`` is
    sampled with the counter ``batch = e * len(loader) + b``, so every batch of every epoch draws
    independently and ``loader.epoch(e)`` gives the same batches on any run, device or process.
    Iterating the loader itself runs epochs 0, 1, 2, ... in turn.

    Args:
        graph: the :class:`~galfast.Graph`.
        nodes: ``[N]`` distinct seed node ids (int64/int32, any device), or ``None`` for all.
        fanouts: per-hop fan-outs, as for :func:`~galfast.ops.sample_neighbors`.
        batch_size: seeds per batch (the last batch may be smaller unless ``drop_last``).
        seed: int in ``[0, 2^64)``, keyword-only.
        shuffle: shuffle the nodes each epoch (default True); else keep their order.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        edge_weight: optional sampling weights, as for sample_neighbors.

    Example:
        >>> loader = NeighborLoader(graph, train_nodes, [15, 10], 1024, seed=0)
        >>> for batch in loader.epoch(0):
        ...     h = x[batch.input_nodes]
        ...     for block in reversed(batch.blocks):
        ...         h = block_aggregate(block, h, reduce="mean")
    """

    def __init__(
        self,
        graph: Graph,
        nodes: Optional[Tensor],
        fanouts: Sequence[int],
        batch_size: int,
        *,
        seed: int,
        shuffle: bool = True,
        drop_last: bool = False,
        edge_weight: Optional[Tensor] = None,
    ) -> None:
        if not isinstance(graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
        given, nodes = nodes, _checked_nodes(graph, nodes)
        # The seeds are checked once, here; an int64 CPU tensor is kept as given, so the
        # caller's tensor must not change after.
        self._given_nodes, self._given_versions = given, tensor_versions([given])
        # kept as Python values: a NumPy seed would wrap around in _mix's arithmetic
        self.graph, self.nodes, self.fanouts = graph, nodes, check_fanouts(fanouts)
        self.batch_size = check_int("batch_size", batch_size, 1, 2**62)
        self.seed = check_int("seed", seed, 0, 2**64)
        self.shuffle = check_flag("shuffle", shuffle)
        self.drop_last = check_flag("drop_last", drop_last)
        if edge_weight is not None:
            check_sampling_weights(graph, edge_weight)  # not only when an epoch first draws
        self.edge_weight = edge_weight
        self._next_epoch = 0

    def __len__(self) -> int:
        full, rest = divmod(self.nodes.numel(), self.batch_size)
        return full if self.drop_last or rest == 0 else full + 1

    def order(self, epoch: int) -> Tensor:
        """The seed nodes in epoch ``epoch``'s order (CPU)."""
        if not self.shuffle:
            return self.nodes
        gen = torch.Generator().manual_seed(_mix(self.seed, epoch))
        return self.nodes[torch.randperm(self.nodes.numel(), generator=gen)]

    def epoch(self, epoch: int) -> Iterator[SampledBatch]:
        """The batches of epoch ``epoch`` (any epoch, in any order)."""
        epoch = check_int("epoch", epoch, 0, 2**32)
        now, remedy = tensor_versions([self._given_nodes]), "build a new one for other seeds"
        check_unedited("NeighborLoader", ["nodes"], now, self._given_versions, remedy)
        if (epoch + 1) * len(self) > 2**32:
            raise ValueError(
                f"epoch {epoch} x {len(self)} batches exceeds the sampler's 2^32 batch counter"
            )
        order = self.order(epoch)
        for b in range(len(self)):
            seeds = order[b * self.batch_size : (b + 1) * self.batch_size].to(self.graph.device)
            counter = epoch * len(self) + b
            blocks = sample_neighbors(
                self.graph,
                seeds,
                self.fanouts,
                seed=self.seed,
                batch=counter,
                edge_weight=self.edge_weight,
            )
            yield SampledBatch(counter, seeds, blocks)

    def __iter__(self) -> Iterator[SampledBatch]:
        epoch, self._next_epoch = self._next_epoch, self._next_epoch + 1
        return self.epoch(epoch)
