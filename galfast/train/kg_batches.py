"""1-N training batches of a knowledge graph (ConvE / CompGCN): every query ``(entity,
relation)`` of the training triples and their inverses, with all its true answers as a
multi-hot target over the entities."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_flag, check_int
from galfast.gal.seeding import check_seed, derive_seed, seeded_generator
from galfast.models.kg_queries import KGQueries
from galfast.train.batch_indices import check_batch_size

__all__ = ["OneToNBatch", "OneToNBatches"]


@dataclass(frozen=True, eq=False)
class OneToNBatch:
    """``entity``, ``relation`` ``[B]`` int64 queries (relations ``>= R`` are inverses: head
    queries), ``query`` ``[B]`` their indices in the :class:`KGQueries`, and ``targets``
    ``[B, N]`` float 0/1 answers (smooth them in the loss: :func:`galfast.models.one_to_n_loss`).
    """

    entity: Tensor
    relation: Tensor
    query: Tensor
    targets: Tensor

    def to(self, device) -> OneToNBatch:
        return OneToNBatch(
            self.entity.to(device),
            self.relation.to(device),
            self.query.to(device),
            self.targets.to(device),
        )


class OneToNBatches:
    """Re-iterable 1-N batches: each epoch visits every query of `queries` exactly once.

    Args:
        queries: ``kg_queries(ds.train, N, R)``, the training queries and answers.
        batch_size: queries per batch (CompGCN: 128); None = all in one batch. Where the
            last batch would hold a single query, the batch before it takes it (one batch of
            ``batch_size + 1``): ConvE's batch norm fails on a batch of one in training.
        shuffle: a new order every epoch.
        seed: None: the order is drawn from torch's global generator (which
            :class:`GALTrainer` seeds every epoch, like the other batch types); an int: epoch
            ``e``'s order is a pure function of ``(seed, e)`` (:meth:`epoch`), the same on every
            machine and run.

    Iterating starts the next epoch (0, 1, ...); :meth:`epoch` gives any epoch directly.
    ``GALTrainer.fit`` calls :meth:`set_epoch` with its own epoch before each one, so a run
    resumed from a checkpoint with fresh batches draws the orders of the uninterrupted run.

    Example:
        >>> batches = OneToNBatches(kg_queries(ds.train, ds.num_entities, ds.num_relations),
        ...                         batch_size=128, seed=0)
        >>> for batch in batches:
        ...     logits = model(batch.entity, batch.relation)          # [B, N]
        ...     loss = one_to_n_loss(logits, batch.targets, label_smoothing=0.1)
    """

    def __init__(
        self,
        queries: KGQueries,
        batch_size: Optional[int] = 128,
        shuffle: bool = True,
        seed: Optional[int] = None,
    ) -> None:
        if not isinstance(queries, KGQueries):
            raise ValueError(f"queries must be a KGQueries, got {type(queries).__name__}")
        batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
        if seed is not None:
            seed = check_seed("seed", seed)
        self.queries, self.batch_size, self.shuffle, self.seed = queries, batch_size, shuffle, seed
        self._next_epoch = 0

    def check_nodes(self, num_nodes: int) -> None:
        """The graph :class:`GALTrainer` encodes has one node per entity (``fit`` calls this):
        other queries failed only at the first step, on the logits' width or, on a GPU, an
        entity id past the embeddings."""
        if self.queries.num_entities != num_nodes:
            raise ValueError(
                f"the batches hold queries over {self.queries.num_entities} entities but the "
                f"graph has {num_nodes} nodes: build them from the graph's knowledge graph"
            )

    def __len__(self) -> int:
        return len(self._starts(self.queries.num_queries)) - 1

    def _starts(self, count: int) -> list[int]:
        """The first query of each batch, then ``count``. A last batch of a single query joins
        the one before it (unless batches of one were asked for): ConvE's batch norm cannot
        take statistics over one query in training mode, and the lone query would fail the
        epoch."""
        size = self.batch_size or max(count, 1)
        starts = [*range(0, count, size), count]
        if size > 1 and len(starts) > 2 and count - starts[-2] == 1:
            del starts[-2]
        return starts

    def _order(self, epoch: int) -> Tensor:
        count = self.queries.num_queries
        if not self.shuffle:
            return torch.arange(count)
        if self.seed is None:
            return torch.randperm(count)
        generator = seeded_generator(derive_seed(self.seed, "kg_query_order", epoch))
        return torch.randperm(count, generator=generator)

    def set_epoch(self, epoch: int) -> None:
        """The next iteration draws epoch `epoch`'s order (as ``GraphBatches.set_epoch``)."""
        self._next_epoch = check_int("epoch", epoch, 0)

    def epoch(self, epoch: int) -> Iterator[OneToNBatch]:
        """The batches of epoch `epoch` (with ``seed=None``: drawn from the global generator)."""
        order = self._order(epoch).to(self.queries.queries.device)
        starts = self._starts(order.numel())
        for start, stop in zip(starts, starts[1:]):
            index = order[start:stop]
            query = self.queries.queries[index]
            yield OneToNBatch(query[:, 0], query[:, 1], index, self.queries.targets(index))

    def __iter__(self) -> Iterator[OneToNBatch]:
        epoch, self._next_epoch = self._next_epoch, self._next_epoch + 1
        return self.epoch(epoch)
