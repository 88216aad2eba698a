"""galfast.audit: worst-case attackers trained post hoc on frozen embeddings."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from numbers import Real
from typing import Any, Callable, Optional, Union

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from galfast._args import check_flag
from galfast._dtypes import all_finite, check_readable_tensor, holds_integers
from galfast.audit.attackers import FAMILIES, AttackerConfig, fit_and_predict, training_epochs
from galfast.audit.bounds import TradeoffBound, check_lipschitz, integer_labels, tradeoff_bound
from galfast.audit.cells import cell_result, mean_metrics
from galfast.audit.chance import chance_levels
from galfast.audit.checks import check_standardisable
from galfast.audit.checks import count as _count
from galfast.audit.classic import CLASSIC_FAMILIES, supports
from galfast.audit.classic import SKLEARN_MODULES as CLASSIC_MODULES
from galfast.audit.job_costs import head_cost
from galfast.audit.jobs import Jobs
from galfast.audit.metrics import attack_metrics
from galfast.audit.report import AttackResult, AuditReport
from galfast.audit.search import SearchConfig
from galfast.audit.split import warn_missing_classes
from galfast.audit.strong_attacks import (
    STRONG_FAMILIES,
    StrongSplit,
    applies,
    make_folds,
    submit_strong_attack,
)
from galfast.audit.threads import attacker_threads
from galfast.gal.pairing import (
    WALK_MODES,
    Pairing,
    PairingSpec,
    check_walkable,
    pair_nodes,
    parse_pairing,
)
from galfast.gal.seeding import check_seed, derive_seed
from galfast.gal.sensitive import KnownValues, SensitiveAttribute, as_attribute_list
from galfast.graph import Graph

__all__ = ["STRENGTHS", "WalksFailed", "audit"]


class WalksFailed(ValueError):
    """A neighbour or n-hop attack found no walk from the training or the test nodes (all are
    isolated, or every walk ends in a node with no way on): there is nothing to attack."""


# "fast": the fixed attackers the paper used (an MLP and a linear model reading one node's
# embedding); "strong": those plus every tuned, graph and non-neural family.
STRENGTHS = ("fast", "strong")

IndexLike = Union[Tensor, np.ndarray, Sequence[int]]


def _as_index(name: str, idx: IndexLike, num_nodes: int) -> Tensor:
    # None, a set or a string reached torch.as_tensor, whose errors name no argument.
    if idx is None or isinstance(idx, (str, bytes, set, frozenset, dict)):
        raise TypeError(f"{name} must be node ids or a bool mask, got {type(idx).__name__}")
    try:
        idx = torch.as_tensor(idx)
    except (TypeError, RuntimeError, ValueError, OverflowError) as error:
        raise ValueError(f"{name} must be node ids or a bool mask: {error}") from None
    if idx.dtype == torch.bool:
        if idx.numel() != num_nodes:
            raise ValueError(f"{name} as a mask must have {num_nodes} entries, got {idx.numel()}")
        idx = idx.nonzero().view(-1)
    if idx.numel() == 0:  # [] reads as float, an all-False mask selects none; no split is empty
        raise ValueError(f"{name} holds no node")
    if idx.dtype == torch.uint8:
        # torch indexes with uint8 as a mask: read as ids, a 0/1 mask meant nodes 0 and 1.
        raise ValueError(f"{name} has dtype torch.uint8: pass int64 node ids or a bool mask")
    if idx.dim() != 1 or not holds_integers(idx):  # complex ids lost their imaginary part
        raise ValueError(
            f"{name} must be a 1-D integer index (or bool mask) of nodes, got shape "
            f"{list(idx.shape)} dtype {idx.dtype}"
        )
    idx = idx.long().cpu()
    if int(idx.min()) < 0 or int(idx.max()) >= num_nodes:
        raise ValueError(f"{name} holds node ids outside [0, {num_nodes})")
    return torch.unique(idx)


def _names(name: str, value: object) -> list:
    """``value`` as a list; TypeError naming ``name`` for a single string (read letter by
    letter: "node" was the pairings 'n', 'o', ...) or anything that is not a sequence."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of names, got {type(value).__name__} {value!r}")
    return list(value)


def _max_fits(attributes: int, pairings, fast, strong, seeds: int, trials: int) -> int:
    """At most how many attacker fits an audit runs: per attribute and attack, ``seeds`` for
    each fixed family and each strong family that applies, the tuned ones searching up to
    ``trials - 1`` more configurations."""
    per_attribute = 0
    for pairing in pairings:
        applicable = [f for f in strong if applies(f, pairing.hops)]
        tuned = sum(f not in CLASSIC_FAMILIES for f in applicable)
        per_attribute += (len(fast) + len(applicable)) * seeds + tuned * (trials - 1)
    return attributes * per_attribute


def _full_precision(known: KnownValues) -> KnownValues:
    """``known`` with float16 / bfloat16 targets read as float32, as the embeddings are: numpy
    (the metrics, scikit-learn) reads no bfloat16, and float16 targets lost precision when
    standardised."""
    if known.targets.dtype not in (torch.float16, torch.bfloat16):
        return known
    return KnownValues(known.nodes, known.targets.float())


def _check_attackable(attrs: list[SensitiveAttribute], pairings, families: list[str]) -> None:
    """ValueError unless some family in ``families`` attacks each attribute on each attack:
    where none did (``"hgb"`` alone on a multilabel attribute), the attribute was left out of
    the report, which then read as if nothing leaked."""
    for attr in attrs:
        for pairing in pairings:
            if not any(
                applies(f, pairing.hops) and supports(f, attr.kind, attr.num_outputs)
                for f in families
            ):
                raise ValueError(
                    f"{attr.name}: no attacker in {families} handles a {attr.kind} attribute "
                    f"with {attr.num_outputs} output(s) on the {pairing.name!r} attack"
                )


def _split(known: KnownValues, idx: Tensor) -> tuple[Tensor, Tensor]:
    """The split's nodes where the attribute is known, and their targets."""
    rows, targets = known.lookup(idx.to(known.nodes.device))
    return idx.to(known.nodes.device)[rows], targets


def _paired_features(z, graph, nodes, targets, pairing: Pairing, seed: int, walk_mode: str):
    paired = pair_nodes(graph, nodes, pairing, seed=seed, walk_mode=walk_mode)
    return z[paired.partners], targets[paired.keep], paired.failures


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def audit(
    embeddings: Tensor,
    sensitive: Union[SensitiveAttribute, Sequence[SensitiveAttribute]],
    *,
    train_idx: IndexLike,
    test_idx: IndexLike,
    graph: Optional[Graph] = None,
    attacks: Sequence[PairingSpec] = ("node", "neighbor", "nhop:2"),
    attackers: Sequence[str] = ("mlp", "linear"),
    seeds: int = 5,
    task_labels: Optional[Tensor] = None,
    task_lipschitz: Optional[float] = None,
    epochs: int = 30,
    batch_size: int = 256,
    lr: float = 0.01,
    min_steps: int = 500,
    hidden: Sequence[int] = (32, 32),
    walk_mode: str = "paper",
    seed: int = 0,
    progress: bool = False,
    strength: str = "fast",
    search: Optional[SearchConfig] = None,
    threads: int = 1,
    workers: Optional[int] = None,
) -> AuditReport:
    r"""Measures how much frozen embeddings leak sensitive attributes to a worst-case attacker.

    For every attribute, attack (pairing) and attacker family, and for each of ``seeds``
    seeds: pair every training node v with the node w whose embedding the attacker reads
    (v itself, a random neighbour, an n-hop walk end; failed walks drop v), train a fresh
    attacker on :math:`(z_w, A_v)` of the **training** nodes only, and score its predictions
    on the held-out **test** nodes. Metrics are summarised as mean and 95% Student-t interval
    over seeds; the strongest family per attack is the headline
    (:meth:`AuditReport.headline`), and the strongest cell over all attacks and families the
    worst case (:meth:`AuditReport.worst_case`, printed first), each set against the chance
    level of its metric (the best predictor that ignores the embeddings,
    :mod:`galfast.audit.chance`).

    What the numbers do not cover:

    - the interval spans the attackers' randomness (initialisation, batch order, walks) on
      one fixed test split, not the sampling error of the test nodes;
    - a neighbour or n-hop attacker trains on (partner's embedding, node's label) pairs, and a
      test node's partner is often a training node: on a homophilous graph it beats chance
      even on pure-noise embeddings, by remembering partners with the labels around them
      (label propagation from its own training labels);
    - the split is not stratified: a warning names any class the test nodes lack, and
      class averages that one test class leaves undefined are reported missing.

    ``strength="strong"`` adds the families a real attacker would use (see
    :data:`~galfast.audit.strong_attacks.STRONG_FAMILIES`), each tuned on a validation split
    carved from the training nodes and never reading a test node's label:

    - ``"tuned-mlp"`` (node attack): a head over the node's own embedding, its depth, width,
      learning rate, weight decay and class balancing chosen by a seeded search
      (:class:`~galfast.audit.SearchConfig`), early stopped on validation;
    - graph families (neighbour and n-hop attacks): the same tuned head over the n-hop
      neighbourhood aggregated with ``ops.aggregate`` as a power of a normalised adjacency:
      ``"gcn"`` (:math:`S^n Z`, :math:`S = D^{-1/2} A D^{-1/2}`), ``"sage"``
      (:math:`P^n Z`, :math:`P = D^{-1} A`, the mean over n-step walk ends), and
      ``"gcn+self"`` / ``"sage+self"`` (the node's own embedding beside it);
    - ``"knn"`` and ``"hgb"`` (scikit-learn k-NN with k chosen on validation, and
      histogram gradient-boosted trees early stopped on it): the node's embedding on the
      node attack, ``[z_v, (P^n Z)_v]`` on neighbourhood attacks.

    Args:
        embeddings: ``[num_nodes, D]`` frozen embeddings (detached; audited where they are;
            float16 and bfloat16 ones are read as float32).
        sensitive: a :class:`~galfast.gal.SensitiveAttribute` or a sequence of them
            (float16 and bfloat16 values are read as float32, like the embeddings).
        train_idx, test_idx: the attacker's split: node ids (or bool masks); nodes where an
            attribute is unknown are skipped for it. Must be disjoint.
        graph: needed for ``"neighbor"`` / ``"nhop:n"`` attacks (walks on it).
        attacks: pairings, as accepted by :func:`~galfast.gal.parse_pairing`.
        attackers: families: ``"mlp"`` (:class:`~galfast.models.AttackerMLP` with ``hidden``)
            and ``"linear"`` (logistic / softmax / linear regression), trained with the fixed
            settings below on the pairing's partner; any strong family may be named too.
            A family that does not apply to an attack (a graph family on ``"node"``) or an
            attribute (``"hgb"`` on multilabel) is skipped there; ValueError where that
            leaves an attribute or an attack no family.
        seeds: repetitions (attacker initialisation, batch order and walks differ).
        task_labels: optional ``[num_nodes]`` binary task labels Y (negative = unknown);
            adds the paper's trade-off lower bound for every binary attribute
            (:class:`~galfast.audit.TradeoffBound`, assumptions there).
        task_lipschitz: the task head's Lipschitz constant C >= 0 for that bound, when known.
        epochs, batch_size, lr: attacker training (Adam; the paper's MovieLens attacker:
            30 epochs, batches of 256).
        min_steps: attackers train for more epochs when ``epochs`` would give fewer
            optimizer steps than this (small splits would otherwise leave them unconverged,
            understating the leak).
        walk_mode: ``sample_nhop``'s mode for the walks.
        seed: base seed, an int in ``[0, 2**64)``; seed k of the run uses keys derived from
            (seed, k).
        progress: show a tqdm bar.
        strength: ``"fast"`` (``attackers`` only) or ``"strong"`` (``attackers`` plus every
            strong family).
        search: the tuned families' search (default :class:`~galfast.audit.SearchConfig`).
        threads: intra-op threads while the attackers train (torch and scikit-learn's
            pools; torch's count is restored after). The attackers are small, so one thread
            is fastest, and far faster on a shared machine.
        workers: independent attacker fits run side by side (each with ``threads``
            intra-op threads), in forked processes on Linux for CPU embeddings with
            ``threads=1`` (before CUDA is initialised), else on threads; the results do not
            depend on it, since every fit is keyed by its own seed. ``None``: the usable
            cores, at most 8 processes or 2 threads. No more are started than the audit has
            fits.

    Returns:
        :class:`~galfast.audit.AuditReport`.

    Example:
        >>> report = audit(trainer.embed(), gender, graph=graph, train_idx=train,
        ...                test_idx=test)  # doctest: +SKIP
        >>> print(report)  # doctest: +SKIP
        >>> report.result("gender", "node").metrics["macro_f1"].mean  # doctest: +SKIP
    """
    if not isinstance(embeddings, Tensor):
        raise ValueError("embeddings must be a [num_nodes, D] tensor")
    check_readable_tensor("embeddings", embeddings)
    if embeddings.dim() != 2:
        raise ValueError("embeddings must be a [num_nodes, D] tensor")
    if not embeddings.is_floating_point():
        raise ValueError(f"embeddings must be floating point, got {embeddings.dtype}")
    if embeddings.dtype in (torch.float16, torch.bfloat16):
        # The attackers are float32 models, and scikit-learn reads no bfloat16: half-precision
        # embeddings are read as float32 (which holds their values exactly).
        embeddings = embeddings.float()
    if embeddings.size(0) == 0 or embeddings.size(1) == 0:
        # no row failed as train_idx "outside [0, 0)", no column as "layer sizes must be >= 1"
        raise ValueError(
            f"embeddings must have at least one row and one column, got {list(embeddings.shape)}"
        )
    if not all_finite(embeddings):
        raise ValueError("embeddings contain NaN or infinite values")
    z = embeddings.detach()
    num_nodes = z.size(0)
    check_standardisable("embeddings", z, z.dtype)
    if (
        sensitive is None
        or isinstance(sensitive, (str, Mapping))
        or not (isinstance(sensitive, (SensitiveAttribute, Iterable)))
    ):  # None or 5 failed as "'NoneType' object is not iterable"
        raise TypeError(
            "sensitive must be a SensitiveAttribute or a list of them, got "
            f"{type(sensitive).__name__}"
        )
    pairings = [parse_pairing(a) for a in _names("attacks", attacks)]
    if not pairings or len({p.name for p in pairings}) != len(pairings):
        raise ValueError(f"attacks must be a non-empty list of distinct pairings, got {attacks!r}")
    progress = check_flag("progress", progress)  # "no" is truthy: it showed the bar
    if strength not in STRENGTHS:
        raise ValueError(f"strength must be one of {STRENGTHS}, got {strength!r}")
    known_families = (*FAMILIES, *STRONG_FAMILIES)
    families = _names("attackers", attackers)
    if (
        not families
        or any(f not in known_families for f in families)
        or len(set(families)) != len(families)
    ):
        raise ValueError(
            f"attackers must be distinct names among {known_families}, got {attackers!r}"
        )
    if strength == "strong":
        families += [f for f in STRONG_FAMILIES if f not in families]
    if not all(any(applies(f, p.hops) for f in families) for p in pairings):
        raise ValueError(f"no attacker in {families} applies to every attack in {attacks!r}")
    if search is None:
        search = SearchConfig()
    if not isinstance(search, SearchConfig):  # a dict failed as "no attribute 'trials'"
        raise TypeError(f"search must be a SearchConfig, got {type(search).__name__}")
    # torch.empty refused 1.5 or True deep in the attacker's layers; 0 named no argument.
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Iterable):
        raise TypeError(f"hidden must be a list of layer sizes, got {hidden!r}")
    hidden = tuple(_count("hidden sizes", h, 1) for h in hidden)
    threads = _count("threads", threads, 1)
    if workers is not None:
        workers = _count("workers", workers, 1)
    if any(p.hops > 0 for p in pairings) and graph is None:
        raise ValueError("neighbor / n-hop attacks need graph= (a galfast.Graph)")
    if graph is not None:  # checked even when only the node attack runs: it is a mistake
        if not isinstance(graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
        if graph.num_nodes != num_nodes:
            raise ValueError(
                f"the graph has {graph.num_nodes} nodes but embeddings has {num_nodes} rows"
            )
        graph = graph.to(z.device)
    seeds = _count("seeds", seeds, 1)
    epochs = _count("epochs", epochs, 1)
    batch_size = _count("batch_size", batch_size, 1)
    min_steps = _count("min_steps", min_steps, 0)
    if isinstance(lr, bool) or not isinstance(lr, Real) or not 0 < lr < math.inf:
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    seed = check_seed("seed", seed)
    task_lipschitz = check_lipschitz("task_lipschitz", task_lipschitz)
    train_idx = _as_index("train_idx", train_idx, num_nodes)
    test_idx = _as_index("test_idx", test_idx, num_nodes)
    if np.intersect1d(train_idx.numpy(), test_idx.numpy()).size:
        raise ValueError(
            "train_idx and test_idx overlap: the attacker must be scored on "
            "nodes it was not trained on"
        )
    if walk_mode not in WALK_MODES:
        raise ValueError(f"walk_mode must be one of {WALK_MODES}, got {walk_mode!r}")
    for pairing in pairings:
        check_walkable(pairing, walk_mode)
    if task_labels is not None:
        try:
            task_labels = torch.as_tensor(task_labels).to(z.device)
        except (TypeError, RuntimeError, ValueError) as error:
            raise TypeError(
                f"task_labels must be a tensor of binary labels, got "
                f"{type(task_labels).__name__}: {error}"
            ) from None
        if task_labels.dim() != 1 or task_labels.numel() != num_nodes:
            raise ValueError(f"task_labels must have shape [{num_nodes}] (negative = unknown)")
        task_labels = integer_labels("task_labels", task_labels)
        # Checked here: the bound is computed after every attacker has trained.
        if bool((task_labels > 1).any()):
            raise ValueError(
                "task_labels must be binary: 0, 1 or negative (unknown), got "
                f"{int(task_labels.max())}"
            )
        if not bool((task_labels >= 0).any()):
            raise ValueError("task_labels are known (>= 0) on no node")
    config = AttackerConfig(
        epochs=epochs, batch_size=batch_size, lr=lr, min_steps=min_steps, hidden=tuple(hidden)
    )
    attrs = as_attribute_list(sensitive)
    _check_attackable(attrs, pairings, families)

    fast = [f for f in families if f in FAMILIES]
    strong = [f for f in families if f in STRONG_FAMILIES]
    results: list[AttackResult] = []
    tradeoffs: list[TradeoffBound] = []
    bar = tqdm(total=len(attrs) * len(pairings), disable=not progress, desc="audit")
    views: dict = {}  # the graph families' aggregated neighbourhoods, shared by attributes
    fits = _max_fits(len(attrs), pairings, fast, strong, seeds, search.trials)
    # Fits on a GPU stay in this process: a forked worker cannot use its CUDA context.
    jobs = Jobs(workers, threads, None if z.device.type == "cpu" else False, most=fits)
    # Forked workers load scikit-learn themselves: the one that runs the classic fits.
    threads_load = any(f in CLASSIC_FAMILIES for f in families) and not jobs.forks
    sklearn_modules = CLASSIC_MODULES if threads_load else ()
    try:
        with attacker_threads(threads, load_first=sklearn_modules):
            # Every fit is handed to the workers first; the cells are then assembled in order.
            cells = []
            for ai, attr in enumerate(attrs):
                known = _full_precision(attr.known(num_nodes).to(z.device))
                if not all_finite(known.targets):  # edited past the attribute's own checks
                    raise ValueError(f"{attr.name}: the known values hold NaN or infinities")
                train_nodes, train_targets = _split(known, train_idx)
                test_nodes, test_targets = _split(known, test_idx)
                if train_nodes.numel() == 0 or test_nodes.numel() == 0:
                    raise ValueError(
                        f"{attr.name}: the attribute is known on no training or no test node"
                    )
                if attr.kind in ("binary", "categorical"):
                    warn_missing_classes(attr.name, known.targets, test_targets)
                if strong and train_nodes.numel() < 2:
                    # the validation split needs a row, and leaves one to fit on
                    raise ValueError(
                        f"{attr.name}: the strong attackers need at least 2 training nodes "
                        f"where the attribute is known (a validation split), got "
                        f"{train_nodes.numel()}"
                    )
                if task_labels is not None and attr.kind == "binary":
                    if not bool((task_labels[known.nodes] >= 0).any()):
                        raise ValueError(
                            f"{attr.name}: task_labels are known on no node where "
                            f"{attr.name} is (the trade-off bound needs both)"
                        )
                folds = make_folds(train_nodes.numel(), seeds, search, seed, ai) if strong else []
                split = StrongSplit(train_nodes, train_targets, test_nodes, test_targets, folds)
                for pi, pairing in enumerate(pairings):
                    parts = []
                    if fast:
                        parts.append(
                            _submit_attack(
                                z,
                                graph,
                                attr,
                                pairing,
                                fast,
                                seeds,
                                config,
                                (train_nodes, train_targets, test_nodes, test_targets),
                                key=(seed, ai, pi),
                                walk_mode=walk_mode,
                                jobs=jobs,
                            )
                        )
                    if strong:
                        parts.append(
                            submit_strong_attack(
                                z,
                                graph,
                                attr,
                                pairing.name,
                                pairing.hops,
                                strong,
                                split,
                                search,
                                key=(seed, ai, pi),
                                cache=views,
                                jobs=jobs,
                            )
                        )
                    cells.append((attr, known, parts, pi == len(pairings) - 1))
            for attr, known, parts, last in cells:
                for part in parts:
                    results += part()
                bar.update(1)
                if last and task_labels is not None and attr.kind == "binary":
                    tradeoffs.append(_bound(z, attr, known, task_labels, results, task_lipschitz))
    finally:
        jobs.close()
        bar.close()
    run_config: dict[str, Any] = {
        "attacks": [p.name for p in pairings],
        "attackers": families,
        "epochs": epochs,
        "min_steps": min_steps,
        "batch_size": batch_size,
        "lr": lr,
        "hidden": list(hidden),
        "walk_mode": walk_mode,
        "seed": seed,
        "n_train_idx": train_idx.numel(),
        "n_test_idx": test_idx.numel(),
        "strength": strength,
    }
    if strong:
        run_config["search"] = asdict(search)
    return AuditReport(results, tradeoffs, seeds, run_config)


def _submit_attack(
    z, graph, attr, pairing, families, seeds, config, split, *, key, walk_mode, jobs
) -> Callable[[], list[AttackResult]]:
    """The fixed families on one attack: the walks here, the fits handed to ``jobs``;
    returns the call that waits for them and assembles the cells."""
    train_nodes, train_targets, test_nodes, test_targets = split
    runs = []
    chances, majorities, n_train, n_test, failures = [], [], [], [], []
    for s in range(seeds):
        base, ai, pi = key
        x_tr, y_tr, f_tr = _paired_features(
            z,
            graph,
            train_nodes,
            train_targets,
            pairing,
            derive_seed(base, "attack", ai, pi, s, 0),
            walk_mode,
        )
        x_te, y_te, f_te = _paired_features(
            z,
            graph,
            test_nodes,
            test_targets,
            pairing,
            derive_seed(base, "attack", ai, pi, s, 1),
            walk_mode,
        )
        if x_tr.size(0) == 0 or x_te.size(0) == 0:
            raise WalksFailed(
                f"{attr.name}, attack {pairing.name!r}: every walk failed on the "
                "training or the test nodes"
            )
        n_train.append(x_tr.size(0))
        n_test.append(x_te.size(0))
        failures.append(f_tr + f_te)
        y_tr_np, y_te_np = _numpy(y_tr), _numpy(y_te)
        if attr.kind == "multilabel":
            y_tr_np, y_te_np = y_tr_np.astype(np.int64), y_te_np.astype(np.int64)
        chance, majority = chance_levels(attr.kind, y_tr_np, y_te_np)
        chances.append(chance)
        majorities.append(majority)
        epochs = training_epochs(config, x_tr.size(0))
        for fi, family in enumerate(families):
            hidden = config.hidden if family == "mlp" else ()
            fitted = jobs.submit(
                fit_and_predict,
                family,
                attr.kind,
                attr.num_outputs,
                x_tr,
                y_tr,
                x_te,
                seed=derive_seed(base, "attack", ai, pi, s, fi + 2),
                config=config,
                cost=head_cost(
                    x_tr.size(1), hidden, attr.num_outputs, x_tr.size(0), config.batch_size, epochs
                ),
            )
            runs.append((family, y_te_np, fitted))
    levels = (mean_metrics(chances), mean_metrics(majorities))
    reads = "z_v" if pairing.hops == 0 else f"z_w, w = a {pairing.name} partner of v"
    settings = {
        "reads": reads,
        "epochs": config.epochs,
        "min_steps": config.min_steps,
        "batch_size": config.batch_size,
        "lr": config.lr,
    }

    def results() -> list[AttackResult]:
        metrics = {f: [] for f in families}
        for family, y_te_np, fitted in runs:
            pred = fitted.result()
            scores = None if pred.scores is None else _numpy(pred.scores)
            metrics[family].append(attack_metrics(attr.kind, y_te_np, _numpy(pred.pred), scores))
        return [
            cell_result(
                attr,
                pairing.name,
                family,
                metrics[family],
                levels,
                np.mean(n_train),
                np.mean(n_test),
                np.mean(failures),
                {**settings, **({"hidden": list(config.hidden)} if family == "mlp" else {})},
            )
            for family in families
        ]

    return results


def _bound(z, attr, known, task_labels, results, lipschitz) -> TradeoffBound:
    y_known = task_labels[known.nodes]
    both = y_known >= 0
    node_cells = [
        r
        for r in results
        if r.attribute == attr.name and r.attack == "node" and "advantage" in r.metrics
    ]
    advantage = max((r.metrics["advantage"].mean for r in node_cells), default=None)
    radius = float(z.norm(dim=1).max())
    return tradeoff_bound(
        attr.name, known.targets.view(-1)[both], y_known[both], radius, advantage, lipschitz
    )
