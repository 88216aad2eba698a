"""Filtered link-prediction ranking: MRR, MR and Hits@k over head and tail prediction.

For a test triple ``(h, r, t)`` the tail query ``(h, r)`` ranks ``t`` among all entities and
the head query ``(t, r + R)`` ranks ``h`` (inverse relations, as ConvE and CompGCN). "Filtered"
(Bordes et al. 2013): every *other* entity known to answer the query in train, valid or test
is removed from the candidates before ranking.

Ties (Sun et al., ACL 2020, "A Re-evaluation of Knowledge Graph Completion Methods"): with
``g`` candidates scored strictly above the answer and ``q`` others scored equal to it,
``optimistic`` = g + 1, ``pessimistic`` = g + q + 1 and ``realistic`` = g + q / 2 + 1, the
expected rank when ties are broken at random. galfast defaults to ``realistic``: the other two
reward or punish a model that gives many entities the same score (a saturated or collapsed
model ranks first under ``optimistic``). CompGCN's code ranks by a double argsort, which
breaks ties by sort position: neither stable nor documented; with continuous scores ties are
rare and the three conventions agree. MRR, MR and Hits@k are all taken on the chosen rank: an
answer tied with one other candidate at the top has the realistic rank 1.5, so it counts in
Hits@3 but not in Hits@1 (PyKEEN's rule; breaking the tie at random would count it in Hits@1
half the time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from galfast._args import check_int
from galfast._dtypes import holds_integers
from galfast.models.kg_queries import KGQueries, check_triples

__all__ = ["TIES", "LinkRanking", "RankMetrics", "evaluate_link_prediction", "filtered_ranks"]

TIES = ("realistic", "optimistic", "pessimistic")


def filtered_ranks(
    scores: Tensor, answers: Tensor, known: Tensor | None = None, ties: str = "realistic"
) -> Tensor:
    """``[B]`` float64 ranks (1 = best) of ``answers[i]`` among the scores of row ``i``.

    Args:
        scores: ``[B, N]`` higher = more likely.
        answers: ``[B]`` int64 the entity to rank in each row.
        known: optional ``[B, N]`` bool, True at entities to filter out (other true answers);
            the answer itself is never filtered, whether marked or not.
        ties: ``"realistic"``, ``"optimistic"`` or ``"pessimistic"`` (see the module).

    Example:
        >>> filtered_ranks(torch.tensor([[0.9, 0.5, 0.5]]), torch.tensor([1]))
        tensor([2.5000], dtype=torch.float64)
    """
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    if scores.dim() != 2 or answers.shape != (scores.size(0),):
        raise ValueError(
            f"scores must be [B, N] and answers [B], got {list(scores.shape)} and "
            f"{list(answers.shape)}"
        )
    if scores.size(1) == 0:
        raise ValueError("scores must have at least one entity column, got [B, 0]")
    if not holds_integers(answers):
        raise ValueError(f"answers must be integer entity ids, got {answers.dtype}")
    # int64: a uint8 index selects as a mask, and a narrow dtype wraps the bound below.
    answers = answers.long()
    if answers.numel() and bool(((answers < 0) | (answers >= scores.size(1))).any()):
        raise ValueError(f"answers hold an entity id outside [0, {scores.size(1)})")
    if known is not None and (known.shape != scores.shape or known.dtype != torch.bool):
        raise ValueError(f"known must be a bool tensor of shape {list(scores.shape)}")
    if bool(torch.isnan(scores).any()):
        raise ValueError("scores contain NaN: ranks would be meaningless")
    rows = torch.arange(scores.size(0), device=scores.device)
    target = scores[rows, answers].unsqueeze(1)
    candidate = torch.ones_like(scores, dtype=torch.bool)
    if known is not None:
        candidate = ~known
    candidate[rows, answers] = False  # the answer is not its own competitor
    above = ((scores > target) & candidate).sum(1)
    level = ((scores == target) & candidate).sum(1)
    if ties == "optimistic":
        level = torch.zeros_like(level)
    ranks = above.to(torch.float64) + 1.0
    return ranks + (level.to(torch.float64) / 2 if ties == "realistic" else level)


def check_hits_at(hits_at: Sequence[int]) -> tuple[int, ...]:
    """`hits_at` (the k of Hits@k) as a tuple of Python ints >= 1 (NumPy's ints too, which
    would otherwise key the ``hits`` dict); ValueError otherwise."""
    if not isinstance(hits_at, Sequence) or isinstance(hits_at, str):
        raise ValueError(f"hits_at must be a sequence of ints >= 1, got {hits_at!r}")
    return tuple(check_int(f"hits_at[{i}]", k, 1) for i, k in enumerate(hits_at))


def _kind(value: object) -> str:
    return str(value.dtype) if isinstance(value, Tensor) else type(value).__name__


@dataclass(frozen=True)
class RankMetrics:
    """Summary of ranks: ``mrr`` (mean reciprocal rank), ``mr`` (mean rank), ``hits`` (``k ->``
    share of ranks ``<= k``) and ``count``."""

    mrr: float
    mr: float
    hits: dict[int, float]
    count: int

    @staticmethod
    def of(ranks: Tensor, hits_at: Sequence[int] = (1, 3, 10)) -> RankMetrics:
        """The metrics of `ranks` (1 = best; realistic ranks of ties may be fractional, e.g.
        2.5) for the k of `hits_at`.

        Raises:
            ValueError: no ranks, a rank below 1 or not finite, or a k that is not an int >= 1.
        """
        hits_at = check_hits_at(hits_at)
        if not isinstance(ranks, Tensor) or ranks.dtype == torch.bool or ranks.is_complex():
            raise ValueError(f"ranks must be a real tensor, got {_kind(ranks)}")
        if ranks.numel() == 0:
            raise ValueError("no ranks to summarise")
        ranks = ranks.to(torch.float64)
        # NaN fails the comparison too; a rank of 0 would make the MRR infinite.
        if not bool(((ranks >= 1) & ranks.isfinite()).all()):
            raise ValueError("ranks must be finite and >= 1 (ranks are 1-based)")
        return RankMetrics(
            mrr=float((1.0 / ranks).mean()),
            mr=float(ranks.mean()),
            hits={k: float((ranks <= k).to(torch.float64).mean()) for k in hits_at},
            count=ranks.numel(),
        )


@dataclass(frozen=True, eq=False)
class LinkRanking:
    """Filtered ranks of the tail and head predictions of test triples and their metrics.

    Attributes:
        tail_ranks, head_ranks: ``[T]`` float64 ranks, in the order of the triples.
        tail, head: metrics of each side; both: over the ``2T`` ranks together (the number
            papers report).
    """

    tail_ranks: Tensor
    head_ranks: Tensor
    tail: RankMetrics
    head: RankMetrics
    both: RankMetrics


def _side_ranks(
    score: Callable[[Tensor, Tensor], Tensor],
    entity: Tensor,
    relation: Tensor,
    answer: Tensor,
    known: KGQueries,
    batch_size: int,
    ties: str,
) -> Tensor:
    ranks = []
    for start in range(0, entity.numel(), batch_size):
        e, r, a = (x[start : start + batch_size] for x in (entity, relation, answer))
        scores = score(e, r)
        if scores.shape != (e.numel(), known.num_entities):
            raise ValueError(
                f"score(entity, relation) must return [{e.numel()}, {known.num_entities}], "
                f"got {list(scores.shape)}"
            )
        rows, others = known.answer_pairs(known.find(e, r))
        mask = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
        mask[rows.to(scores.device), others.to(scores.device)] = True
        ranks.append(filtered_ranks(scores, a.to(scores.device), mask, ties).cpu())
    return torch.cat(ranks) if ranks else torch.zeros(0, dtype=torch.float64)


@torch.no_grad()
def evaluate_link_prediction(
    score: Callable[[Tensor, Tensor], Tensor],
    triples: Tensor,
    known: KGQueries,
    *,
    batch_size: int = 256,
    ties: str = "realistic",
    hits_at: Sequence[int] = (1, 3, 10),
) -> LinkRanking:
    """Filtered ranks of `triples`' tails and heads under `score`.

    Args:
        score: ``score(entity [B], relation [B]) -> [B, N]`` scores of every entity as the
            answer of each query; relations ``>= R`` are inverses (head queries). Put the
            model in eval mode first.
        triples: ``[T, 3]`` int64 test (or validation) triples.
        known: ``kg_queries(all_triples, N, R)``: every true triple of train, valid and test,
            the filter. It must contain `triples`.
        batch_size: queries scored at once; memory holds ``batch_size x N`` scores and masks.
        ties: ``"realistic"`` (default), ``"optimistic"`` or ``"pessimistic"``.
        hits_at: the k of Hits@k.

    Example:
        >>> known = kg_queries(ds.all_triples, ds.num_entities, ds.num_relations)
        >>> result = evaluate_link_prediction(model.eval().scorer(), ds.test, known)
        >>> result.both.mrr, result.both.hits[10]
    """
    batch_size = check_int("batch_size", batch_size, 1)  # NumPy's ints too
    hits_at = check_hits_at(hits_at)  # now, not after ranking every triple
    if not isinstance(known, KGQueries):
        raise ValueError(f"known must be a KGQueries, got {type(known).__name__}")
    for name in ("num_entities", "num_relations"):  # a model's scorer tells its sizes
        size = getattr(score, name, None)
        if isinstance(size, int) and size != getattr(known, name):
            raise ValueError(
                f"known was built for {name}={getattr(known, name)} but the scorer's model has "
                f"{name}={size}: build it with kg_queries(all_triples, N, R) of the model's graph"
            )
    check_triples(triples, known.num_entities, known.num_relations)
    heads, relations, tails = triples.unbind(1)
    inverse = relations + known.num_relations
    if not bool(known.contains(heads, relations, tails).all()):
        raise ValueError(
            "known lacks some of the triples ranked: build it from all true triples "
            "(train, valid and test), e.g. kg_queries(ds.all_triples, N, R)"
        )
    tail_ranks = _side_ranks(score, heads, relations, tails, known, batch_size, ties)
    head_ranks = _side_ranks(score, tails, inverse, heads, known, batch_size, ties)
    return LinkRanking(
        tail_ranks=tail_ranks,
        head_ranks=head_ranks,
        tail=RankMetrics.of(tail_ranks, hits_at),
        head=RankMetrics.of(head_ranks, hits_at),
        both=RankMetrics.of(torch.cat([tail_ranks, head_ranks]), hits_at),
    )
