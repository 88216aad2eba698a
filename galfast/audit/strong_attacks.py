"""The strong audit's attackers: tuned heads on the node's own embedding and on its n-hop
neighbourhood (graph families), and the non-neural families, all chosen on a validation split
of the attacker's training nodes and scored on the test nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import numpy as np
from torch import Tensor

from galfast.audit.cells import cell_result
from galfast.audit.chance import chance_levels
from galfast.audit.classic import CLASSIC_FAMILIES, fit_classic, supports
from galfast.audit.classic import SKLEARN_MODULES as CLASSIC_MODULES
from galfast.audit.graph_views import GRAPH_FAMILIES, describe_view, graph_view
from galfast.audit.job_costs import classic_cost, head_cost
from galfast.audit.jobs import Jobs
from galfast.audit.metrics import (
    PRIMARY_METRIC,
    attack_metrics,
    higher_is_stronger,
    primary_metric,
)
from galfast.audit.report import AttackResult
from galfast.audit.search import (
    SearchConfig,
    candidate_configs,
    fit_head,
    validation_split,
)
from galfast.gal.seeding import derive_seed

__all__ = [
    "NODE_FAMILIES",
    "STRONG_FAMILIES",
    "StrongSplit",
    "applies",
    "make_folds",
    "submit_strong_attack",
]

NODE_FAMILIES = ("tuned-mlp",)
STRONG_FAMILIES = (*NODE_FAMILIES, *GRAPH_FAMILIES, *CLASSIC_FAMILIES)
# What the non-neural families read on a neighbourhood attack: the richest view.
_CLASSIC_VIEW = "sage+self"


@dataclass(frozen=True, eq=False)
class StrongSplit:
    """One attribute's attacker split: training nodes (with their validation folds, one per
    seed, positions into them) and test nodes, with targets."""

    train_nodes: Tensor
    train_targets: Tensor
    test_nodes: Tensor
    test_targets: Tensor
    folds: list[tuple[Tensor, Tensor]]


def applies(family: str, hops: int) -> bool:
    """Graph families need a neighbourhood; the tuned node head reads the node alone."""
    if family in GRAPH_FAMILIES:
        return hops > 0
    if family in NODE_FAMILIES:
        return hops == 0
    return True


def _numpy(t: Tensor, kind: str) -> np.ndarray:
    out = t.detach().cpu().numpy()
    return out.astype(np.int64) if kind == "multilabel" else out


def _features(family: str, z: Tensor, graph, hops: int, cache: dict) -> Tensor:
    if hops == 0:
        return z
    return graph_view(
        _CLASSIC_VIEW if family in CLASSIC_FAMILIES else family, z, graph, hops, cache
    )


def submit_strong_attack(
    z: Tensor,
    graph,
    attr,
    attack: str,
    hops: int,
    families: list[str],
    split: StrongSplit,
    search: SearchConfig,
    *,
    key: tuple[int, int, int],
    cache: dict,
    jobs: Jobs,
) -> Callable[[], list[AttackResult]]:
    """Every strong family in ``families`` that applies to ``hops``, on one attack, with its
    fits handed to ``jobs``: returns the call that waits for them and assembles the results."""
    base, ai, pi = key
    kind = attr.kind
    y_train, y_test = _numpy(split.train_targets, kind), _numpy(split.test_targets, kind)
    levels = tuple(
        {k: v for k, v in level.items() if v is not None}
        for level in chance_levels(kind, y_train, y_test)
    )
    pending = []
    for family in families:
        if not applies(family, hops) or not supports(family, kind, attr.num_outputs):
            continue
        x = _features(family, z, graph, hops, cache)
        x_train, x_test = x[split.train_nodes], x[split.test_nodes]
        view = describe_view(
            None if hops == 0 else (_CLASSIC_VIEW if family in CLASSIC_FAMILIES else family), hops
        )
        # (seed, counters) of derive_seed: keyed by the family's name, not its position.
        cell_key = (base, ai, pi, STRONG_FAMILIES.index(family))
        if family in CLASSIC_FAMILIES:
            cell = _classic_cell(family, kind, x_train, split, x_test, y_test, cell_key, jobs)
        else:
            cell = _tuned_cell(attr, x_train, split, x_test, y_test, search, cell_key, jobs)
        pending.append((family, view, cell))

    def results() -> list[AttackResult]:
        out = []
        for family, view, cell in pending:
            per_seed, config = cell()
            out.append(
                cell_result(
                    attr,
                    attack,
                    family,
                    per_seed,
                    levels,
                    split.train_nodes.numel(),
                    split.test_nodes.numel(),
                    0.0,
                    {"reads": view, **config},
                )
            )
        return out

    return results


def _metrics(kind: str, y_test: np.ndarray, pred, scores: Optional[np.ndarray]):
    pred = pred.detach().cpu().numpy() if isinstance(pred, Tensor) else pred
    if isinstance(scores, Tensor):
        scores = scores.detach().cpu().numpy()
    return attack_metrics(kind, y_test, pred, scores)


def _seed(cell_key: tuple[int, ...], seed_index: int, trial: int) -> int:
    """The attacker's seed for one cell, seed and search trial."""
    return derive_seed(cell_key[0], "audit_attacker", *cell_key[1:], seed_index, trial)


def _tuned_cell(attr, x_train, split, x_test, y_test, search, cell_key, jobs):
    kind, outputs = attr.kind, attr.num_outputs
    y = split.train_targets
    candidates = candidate_configs(
        search.trials, kind, derive_seed(cell_key[0], "audit_search", *cell_key[1:])
    )

    def fit(config, s, trial):
        fit_rows, val = split.folds[s]
        # Early stopping ends most runs after about twice the patience.
        epochs = min(search.max_epochs, 2 * search.patience)
        cost = head_cost(
            x_train.size(1), (config.width,) * config.depth, outputs, fit_rows.numel(),
            search.batch_size, epochs,
        )  # fmt: skip
        return jobs.submit(
            fit_head, config, kind, outputs, x_train[fit_rows], y[fit_rows], x_train[val],
            y[val], seed=_seed(cell_key, s, trial), search=search, cost=cost,
        )  # fmt: skip

    # The search: every candidate on seed 0's validation fold; the winner's run is seed 0's
    # attacker. The trials are independent, so they are all handed out at once.
    trials = [fit(config, 0, ci) for ci, config in enumerate(candidates)]

    def finish():
        best, best_fit = None, None
        for config, trial in zip(candidates, trials):
            fitted = trial.result()
            if best_fit is None or fitted.val_score > best_fit.val_score:
                best, best_fit = config, fitted
        later = [fit(best, s, 0) for s in range(1, len(split.folds))]
        per_seed, epochs = [], []
        for fitted in [best_fit, *(f.result() for f in later)]:
            epochs.append(fitted.epochs)
            pred, scores = fitted.predict(x_test)
            per_seed.append(_metrics(kind, y_test, pred, scores))
        config = {
            **best.as_dict(),
            "val_score": best_fit.val_score,
            "trials": len(candidates),
            "mean_epochs": float(np.mean(epochs)),
        }
        return per_seed, config

    return finish


def _signed_primary(kind: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The primary metric of ``pred`` against ``y``, larger = stronger (a module-level function:
    a fit's arguments must pickle for a worker process)."""
    value = primary_metric(kind, y, pred)
    return value if higher_is_stronger(PRIMARY_METRIC[kind]) else -value


def _classic_cell(family, kind, x_train, split, x_test, y_test, cell_key, jobs):
    xtr = x_train.detach().cpu().numpy()
    xte = x_test.detach().cpu().numpy()
    ytr = _numpy(split.train_targets, kind)

    runs = []
    for s, (fit, val) in enumerate(split.folds):
        fit, val = fit.numpy(), val.numpy()
        runs.append(
            jobs.submit(
                fit_classic,
                family,
                kind,
                xtr[fit],
                ytr[fit],
                xtr[val],
                ytr[val],
                xte,
                seed=_seed(cell_key, s, 0) % 2**31,
                score=partial(_signed_primary, kind),
                cost=classic_cost(family, len(fit), xtr.shape[1]),
                affinity="scikit-learn",  # one worker imports it (~1.5 s of CPU)
                modules=CLASSIC_MODULES,
                spread=str(cell_key),  # unless several standby workers did already
            )  # fmt: skip
        )

    def finish():
        per_seed, config = [], None
        for run in runs:
            pred, scores, chosen = run.result()
            per_seed.append(_metrics(kind, y_test, pred, scores))
            config = config or chosen
        return per_seed, config

    return finish


def make_folds(
    n: int, seeds: int, search: SearchConfig, base: int, ai: int
) -> list[tuple[Tensor, Tensor]]:
    """One validation fold of attribute ``ai``'s ``n`` training rows per seed, shared by every
    attack and family (so their validation scores compare)."""
    return [
        validation_split(n, search.val_fraction, derive_seed(base, "audit_validation", ai, s))
        for s in range(seeds)
    ]
