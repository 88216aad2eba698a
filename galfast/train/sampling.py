"""How the trainer samples: ``NeighborSampling``, mini-batches on sampled computation graphs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from galfast._args import check_flag
from galfast._dtypes import as_int
from galfast.ops.sample_neighbors import check_fanouts

__all__ = ["NeighborSampling"]


@dataclass(frozen=True)
class NeighborSampling:
    """Train from neighbour-sampled mini-batches instead of encoding the whole graph per step.

    A task batch encodes only the computation graph of the nodes it reads (``NodeBatch.nodes``,
    the ``src`` and ``dst`` of link and rating batches), sampled with
    :func:`~galfast.ops.sample_neighbors`; an adversary batch samples one for its attacked
    nodes (with neighbour or n-hop pairing: the partners the walks reach on the whole graph).
    The encoder is called as ``encoder(inputs[blocks[-1].src_nodes], blocks) -> [num_seeds,
    D]`` (:class:`galfast.nn` layers and the ready-made stacks accept blocks). Every draw is
    keyed by the run's seed and the step, so a batch's computation graph is the same on any
    device and number of processes. ``embed()`` then runs layer by layer over all nodes in
    chunks of ``embed_chunk_size`` destinations (every in-edge, no sampling).

    Args:
        fanouts: in-neighbours per hop, ``fanouts[0]`` the seeds' hop (PyG's
            ``num_neighbors`` order), ``-1`` for all; one hop per message-passing layer.
        weighted: sample in-edges with probability proportional to the graph's stored edge
            weights (else uniformly).
        embed_chunk_size: destination nodes per chunk of the layer-wise ``embed``.

    Example:
        >>> trainer = GALTrainer(encoder, NodeHead(head), attacker, task_loss=classification_loss,
        ...                      sampler=NeighborSampling([15, 10]))  # doctest: +SKIP
        >>> batches = NodeBatches(train, y, batch_size=1024)  # doctest: +SKIP
        >>> trainer.fit(graph, batches, attribute, x=x)  # doctest: +SKIP
    """

    fanouts: Sequence[int]
    weighted: bool = False
    embed_chunk_size: int = 65536

    def __post_init__(self) -> None:
        object.__setattr__(self, "fanouts", tuple(check_fanouts(self.fanouts)))
        object.__setattr__(self, "weighted", check_flag("weighted", self.weighted))
        size = as_int(self.embed_chunk_size)
        if size is None or size < 1:
            raise ValueError(f"embed_chunk_size must be an int >= 1, got {self.embed_chunk_size!r}")
        object.__setattr__(self, "embed_chunk_size", size)

    def to_checkpoint(self) -> dict[str, Any]:
        """What a checkpoint records to refuse resuming with other sampling (the chunk size of
        ``embed`` does not change training)."""
        return {"fanouts": list(self.fanouts), "weighted": self.weighted}
