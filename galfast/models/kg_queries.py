"""Knowledge-graph queries ``(entity, relation) -> ?`` grouped with all their true answers: the
1-N training targets and the filter of the filtered ranking metrics.

Head prediction is tail prediction on the inverse relation: a triple ``(h, r, t)`` answers the
tail query ``(h, r)`` with ``t`` and the head query ``(t, r + R)`` with ``h``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from galfast._args import check_device, check_int
from galfast._dtypes import holds_integers

__all__ = ["KGQueries", "check_triples", "kg_queries", "with_inverses"]


def check_triples(triples: Tensor, num_entities: int, num_relations: int) -> None:
    """Raises ValueError unless `triples` is an int64 ``[T, 3]`` tensor of ``(head, relation,
    tail)`` ids with entities in ``[0, num_entities)`` and relations in
    ``[0, num_relations)``."""
    if not isinstance(triples, Tensor) or triples.dim() != 2 or triples.size(1) != 3:
        raise ValueError(f"triples must be a [T, 3] tensor, got {getattr(triples, 'shape', None)}")
    if triples.dtype != torch.int64:
        raise ValueError(f"triples must be int64, got {triples.dtype}")
    if triples.numel() == 0:
        return
    entities = triples[:, [0, 2]]
    if int(entities.min()) < 0 or int(entities.max()) >= num_entities:
        raise ValueError(f"triples hold an entity id outside [0, {num_entities})")
    if int(triples[:, 1].min()) < 0 or int(triples[:, 1].max()) >= num_relations:
        raise ValueError(f"triples hold a relation id outside [0, {num_relations})")


def with_inverses(triples: Tensor, num_relations: int) -> Tensor:
    """``[2T, 3]``: the triples, then each ``(h, r, t)`` reversed as ``(t, r + R, h)``."""
    heads, relations, tails = triples.unbind(1)
    inverse = torch.stack([tails, relations + num_relations, heads], dim=1)
    return torch.cat([triples, inverse])


@dataclass(frozen=True, eq=False)
class KGQueries:
    """Distinct queries ``(entity, relation)`` and their answer sets, in CSR form.

    Attributes:
        queries: ``[Q, 2]`` int64 ``(entity, relation)``, sorted; relations lie in
            ``[0, 2R)`` (inverses included).
        offsets: ``[Q + 1]`` int64: the answers of query ``q`` are
            ``answers[offsets[q]:offsets[q + 1]]``.
        answers: ``[A]`` int64 answer entities, ascending within a query, no repeats.
        num_entities: ``N``.
        num_relations: ``R`` (without inverses).
    """

    queries: Tensor
    offsets: Tensor
    answers: Tensor
    num_entities: int
    num_relations: int

    def __post_init__(self) -> None:
        # Built by hand, an answer past num_entities failed in targets() with an IndexError,
        # and unsorted queries were silently missed by find(). Values are read on the CPU only
        # (to() builds one on the device).
        for name in ("num_entities", "num_relations"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        shapes = {"queries": 2, "offsets": 1, "answers": 1}
        for name, dims in shapes.items():
            value = getattr(self, name)
            if not isinstance(value, Tensor) or value.dtype != torch.int64 or value.dim() != dims:
                raise ValueError(f"{name} must be a {dims}-D int64 tensor, got {_described(value)}")
        queries, offsets, answers = self.queries, self.offsets, self.answers
        if queries.size(1) != 2 or offsets.numel() != queries.size(0) + 1:
            raise ValueError(
                f"queries must be [Q, 2] with offsets [Q + 1], got {list(queries.shape)} and "
                f"{list(offsets.shape)}"
            )
        if offsets.device.type != "cpu":
            return
        if int(offsets[0]) != 0 or int(offsets[-1]) != answers.numel() or _falls(offsets):
            raise ValueError(f"offsets must rise from 0 to the {answers.numel()} answers")
        self._checked_ids(answer=answers)
        self._checked_ids(entity=queries[:, 0], relation=queries[:, 1])
        if _falls(self._keys(queries[:, 0], queries[:, 1]), strictly=True):
            raise ValueError("queries must be distinct and sorted by (entity, relation)")

    @property
    def num_queries(self) -> int:
        return self.queries.size(0)

    def _keys(self, entity: Tensor, relation: Tensor) -> Tensor:
        return entity * (2 * self.num_relations) + relation

    def _checked_ids(self, **ids: Tensor) -> list[Tensor]:
        """The ids as int64, after raising ValueError unless they are integer tensors of one
        shape with entities (and answers) in ``[0, N)`` and relations in ``[0, 2R)``: an id
        out of range would otherwise pack into another query's key."""
        shape, checked = None, []
        for name, value in ids.items():
            if not isinstance(value, Tensor):
                raise ValueError(f"{name} must be a tensor of ids, got {type(value).__name__}")
            if not holds_integers(value):
                raise ValueError(f"{name} ids must be integers, got {value.dtype}")
            if shape is not None and value.shape != shape:
                raise ValueError(f"{', '.join(ids)} must have the same shape")
            shape = value.shape
            # int64 before any arithmetic: int32 keys overflowed and found no query, and a
            # bound past uint8's range wrapped in the comparison below.
            value = value.long()
            bound = 2 * self.num_relations if name == "relation" else self.num_entities
            if value.numel() and bool(((value < 0) | (value >= bound)).any()):
                note = " (relations and their inverses, 2R)" if name == "relation" else ""
                raise ValueError(f"{name} holds an id outside [0, {bound}){note}")
            checked.append(value)
        return checked

    def find(self, entity: Tensor, relation: Tensor) -> Tensor:
        """``[B]`` query index of each ``(entity[i], relation[i])``, -1 where it has no answer."""
        entity, relation = self._checked_ids(entity=entity, relation=relation)
        keys = self._keys(self.queries[:, 0], self.queries[:, 1])
        wanted = self._keys(entity.to(keys.device), relation.to(keys.device))
        if keys.numel() == 0:
            return torch.full_like(wanted, -1)
        position = torch.searchsorted(keys, wanted).clamp_max(keys.numel() - 1)
        return torch.where(keys[position] == wanted, position, torch.full_like(position, -1))

    def contains(self, entity: Tensor, relation: Tensor, answer: Tensor) -> Tensor:
        """``[B]`` bool: whether ``answer[i]`` is a known answer of ``(entity[i], relation[i])``."""
        entity, relation, answer = self._checked_ids(
            entity=entity, relation=relation, answer=answer
        )
        counts = self.offsets.diff()
        query_keys = self._keys(self.queries[:, 0], self.queries[:, 1])
        pair_keys = torch.repeat_interleave(query_keys, counts) * self.num_entities + self.answers
        if pair_keys.numel() == 0:
            return torch.zeros(entity.shape, dtype=torch.bool, device=entity.device)
        wanted = (self._keys(entity, relation) * self.num_entities + answer).to(pair_keys.device)
        position = torch.searchsorted(pair_keys, wanted).clamp_max(pair_keys.numel() - 1)
        return pair_keys[position] == wanted

    def answer_pairs(self, index: Tensor) -> tuple[Tensor, Tensor]:
        """For queries ``index`` ``[B]`` (-1 = none): ``(row, entity)`` of every answer, ``row``
        being the position in `index`."""
        if not isinstance(index, Tensor) or index.dim() != 1:
            raise ValueError(f"index must be a [B] tensor, got {getattr(index, 'shape', None)}")
        if not holds_integers(index):
            raise ValueError(f"index must hold integer query indices, got {index.dtype}")
        index = index.long()  # a uint8 index would select as a mask
        # Values are checked on the CPU only: OneToNBatches calls this per training step.
        if index.device.type == "cpu" and index.numel():
            if bool(((index < -1) | (index >= self.num_queries)).any()):
                raise ValueError(f"index holds a query index outside [-1, {self.num_queries})")
        index = index.to(self.offsets.device)
        valid = index >= 0
        safe = torch.where(valid, index, torch.zeros_like(index))
        starts = self.offsets[safe]
        counts = torch.where(valid, self.offsets[safe + 1] - starts, torch.zeros_like(starts))
        rows = torch.repeat_interleave(torch.arange(index.numel(), device=index.device), counts)
        first = torch.cumsum(counts, 0) - counts
        within = torch.arange(rows.numel(), device=index.device) - first[rows]
        return rows, self.answers[starts[rows] + within]

    def targets(self, index: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """``[B, N]`` multi-hot answer sets of the queries ``index``."""
        rows, entities = self.answer_pairs(index)
        out = torch.zeros(index.numel(), self.num_entities, dtype=dtype, device=self.answers.device)
        out[rows, entities] = 1
        return out

    def to(self, device) -> KGQueries:
        device = check_device(device)
        return KGQueries(
            self.queries.to(device),
            self.offsets.to(device),
            self.answers.to(device),
            self.num_entities,
            self.num_relations,
        )


def _described(value: object) -> str:
    if isinstance(value, Tensor):
        return f"{value.dtype} of shape {list(value.shape)}"
    return type(value).__name__


def _falls(values: Tensor, strictly: bool = False) -> bool:
    """Whether ``values`` ever falls (or, ``strictly``, fails to rise)."""
    steps = values.diff()
    return bool((steps <= 0).any() if strictly else (steps < 0).any())


def kg_queries(triples: Tensor, num_entities: int, num_relations: int) -> KGQueries:
    """Groups `triples` (``[T, 3]``, relations in ``[0, R)``) and their inverses into queries.

    For training: ``kg_queries(ds.train, ...)`` (the 1-N targets); for the filtered metrics:
    ``kg_queries(ds.all_triples, ...)`` (every known true answer).

    Example:
        >>> q = kg_queries(torch.tensor([[0, 0, 1], [0, 0, 2]]), num_entities=3, num_relations=1)
        >>> q.queries.tolist(), q.answers.tolist()   # (0, 0) -> {1, 2}; (1, 1), (2, 1) -> {0}
        ([[0, 0], [1, 1], [2, 1]], [1, 2, 0, 0])
    """
    check_triples(triples, num_entities, num_relations)
    if num_entities * num_entities * 2 * num_relations >= 2**63:
        raise ValueError(f"{num_entities} entities x {num_relations} relations overflow int64 keys")
    both = with_inverses(triples, num_relations)
    # One int64 key per (query, answer); N * 2R * N stays far below 2^63 for real graphs.
    span = 2 * num_relations
    pair_keys = torch.unique((both[:, 0] * span + both[:, 1]) * num_entities + both[:, 2])
    query_keys, answers = pair_keys // num_entities, pair_keys % num_entities
    unique_keys, counts = torch.unique_consecutive(query_keys, return_counts=True)
    offsets = torch.zeros(unique_keys.numel() + 1, dtype=torch.int64, device=triples.device)
    offsets[1:] = torch.cumsum(counts, 0)
    queries = torch.stack([unique_keys // span, unique_keys % span], dim=1)
    return KGQueries(queries, offsets, answers, num_entities, num_relations)
