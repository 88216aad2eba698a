"""A seeded node/link graph with a task label and a planted sensitive attribute whose link to the
task, to the features and to the graph structure are each tunable."""

from __future__ import annotations

import numpy as np

from galfast._args import check_int, check_real
from galfast.datasets._generator_args import check_fits_memory, check_held_out
from galfast.datasets.graph_dataset import GraphDataset, build_graph_dataset
from galfast.datasets.link_split import undirected_pairs

__all__ = ["synthetic_graph"]

_NODE_SPLIT = (0.6, 0.2)  # train, val shares of the nodes; the rest is test


def _unit_rows(rng: np.random.Generator, rows: int, width: int) -> np.ndarray:
    means = rng.normal(size=(rows, width))
    return means / np.linalg.norm(means, axis=1, keepdims=True)


def _other_class(rng: np.random.Generator, current: np.ndarray, num: int) -> np.ndarray:
    """A uniformly drawn class different from `current`."""
    return (current + rng.integers(1, num, size=current.size)) % num


def _uniform_member(
    rng: np.random.Generator, group: np.ndarray, wanted: np.ndarray, num_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each entry of `wanted`, a uniform node of that group; ``found`` is False where the
    group is empty."""
    order = np.argsort(group, kind="stable")
    size = np.bincount(group, minlength=num_groups)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    found = size[wanted] > 0
    offset = np.floor(rng.random(wanted.size) * size[wanted]).astype(np.int64)
    node = order[np.minimum(start[wanted] + offset, group.size - 1)]
    return node, found


def synthetic_graph(
    num_nodes: int = 1000,
    *,
    num_classes: int = 2,
    num_attribute_classes: int = 2,
    attribute_task_correlation: float = 0.5,
    task_homophily: float = 0.8,
    attribute_homophily: float = 0.8,
    avg_degree: float = 8.0,
    num_features: int = 32,
    task_feature_strength: float = 2.0,
    attribute_feature_strength: float = 1.0,
    seed: int = 0,
    val_fraction: float = 0.05,
    test_fraction: float = 0.1,
) -> GraphDataset:
    r"""A stochastic-block-style graph with task label ``y`` and sensitive attribute ``a``.

    * Labels: ``y`` uniform over ``num_classes``. With probability
      ``attribute_task_correlation`` (:math:`\rho`) a node's attribute copies its label
      (``a = y mod num_attribute_classes``), otherwise it is uniform, so
      :math:`P(a = y \bmod K_a) = \rho + (1 - \rho) / K_a`; :math:`\rho = 0` makes them
      independent.
    * Features: :math:`x = s_y \mu_{y} + s_a \nu_{a} + \varepsilon`, with unit-norm random class
      means :math:`\mu, \nu \in \mathbb{R}^F` and :math:`\varepsilon \sim N(0, I)`;
      ``attribute_feature_strength`` :math:`s_a = 0` (with :math:`\rho = 0`) leaves no trace of
      ``a`` in the features.
    * Edges: ``num_nodes * avg_degree / 2`` draws; each picks a uniform source ``u``, then a
      target that shares ``u``'s attribute with probability ``attribute_homophily`` and ``u``'s
      label with probability ``task_homophily`` (independently), uniform within that block.
      When the block is empty (e.g. :math:`\rho = 1` forbids "same label, other attribute") the
      attribute requirement wins. Self loops and repeated pairs are dropped, so the measured
      edge homophily (:func:`edge_homophily`) of ``a`` is close to ``attribute_homophily``.

    The node split is a seeded random 60/20/20 split; the link split is drawn as for Planetoid.

    Args:
        num_nodes: number of nodes.
        num_classes, num_attribute_classes: cardinalities of ``y`` and ``a`` (each >= 2).
        attribute_task_correlation: :math:`\rho \in [0, 1]`.
        task_homophily, attribute_homophily: edge homophily targets in ``[0, 1]``.
        avg_degree: mean degree before dropping self loops and repeats.
        num_features: feature width ``F``.
        task_feature_strength, attribute_feature_strength: :math:`s_y, s_a \ge 0`.
        seed: seeds everything (graph, features, splits).
        val_fraction, test_fraction: shares of edges held out for link prediction.

    Returns:
        A :class:`GraphDataset` named ``"synthetic-graph"``; the attribute is
        ``attributes["sensitive"]``, known for every node.

    Example:
        >>> from galfast.datasets import edge_homophily
        >>> ds = synthetic_graph(500, attribute_homophily=0.9, seed=1)
        >>> round(edge_homophily(ds.graph.edge_index(), ds.attributes["sensitive"]), 1)
        0.9
    """
    seed = check_int("seed", seed, 0)
    num_nodes = check_int("num_nodes", num_nodes, 2)
    num_classes = check_int("num_classes", num_classes, 2)
    num_attribute_classes = check_int("num_attribute_classes", num_attribute_classes, 2)
    num_features = check_int("num_features", num_features, 1)
    attribute_task_correlation = check_real(
        "attribute_task_correlation", attribute_task_correlation, 0, 1
    )
    task_homophily = check_real("task_homophily", task_homophily, 0, 1)
    attribute_homophily = check_real("attribute_homophily", attribute_homophily, 0, 1)
    avg_degree = check_real("avg_degree", avg_degree, 0)
    task_feature_strength = check_real("task_feature_strength", task_feature_strength, 0)
    attribute_feature_strength = check_real(
        "attribute_feature_strength", attribute_feature_strength, 0
    )
    val_fraction, test_fraction = check_held_out(val_fraction, test_fraction)
    # float64 features and their temporaries, int64 per-node and per-draw arrays, class means
    # and the (label, attribute) blocks: a rough floor of what the draw holds at once.
    draws = num_nodes * avg_degree / 2
    blocks = num_classes * num_attribute_classes
    check_fits_memory(
        "synthetic_graph",
        8 * (num_nodes * (4 * num_features + 16) + 16 * draws)
        + 8 * ((num_classes + num_attribute_classes) * num_features + 3 * blocks),
    )

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6A1]))
    y = rng.integers(0, num_classes, size=num_nodes)
    copies = rng.random(num_nodes) < attribute_task_correlation
    a = np.where(
        copies, y % num_attribute_classes, rng.integers(0, num_attribute_classes, num_nodes)
    )

    x = (
        task_feature_strength * _unit_rows(rng, num_classes, num_features)[y]
        + attribute_feature_strength * _unit_rows(rng, num_attribute_classes, num_features)[a]
        + rng.normal(size=(num_nodes, num_features))
    )

    draws = int(round(num_nodes * avg_degree / 2))
    source = rng.integers(0, num_nodes, size=draws)
    want_y = np.where(
        rng.random(draws) < task_homophily, y[source], _other_class(rng, y[source], num_classes)
    )
    want_a = np.where(
        rng.random(draws) < attribute_homophily,
        a[source],
        _other_class(rng, a[source], num_attribute_classes),
    )
    num_blocks = num_classes * num_attribute_classes
    target, found = _uniform_member(
        rng, y * num_attribute_classes + a, want_y * num_attribute_classes + want_a, num_blocks
    )
    by_attribute, attribute_found = _uniform_member(rng, a, want_a, num_attribute_classes)
    anywhere = rng.integers(0, num_nodes, size=draws)
    target = np.where(found, target, np.where(attribute_found, by_attribute, anywhere))
    pairs = undirected_pairs(np.stack([source, target]))

    perm = rng.permutation(num_nodes)
    cut_train = int(_NODE_SPLIT[0] * num_nodes)
    cut_val = cut_train + int(_NODE_SPLIT[1] * num_nodes)
    settings = (
        f"synthetic graph: seed={seed}, rho={attribute_task_correlation}, "
        f"task_homophily={task_homophily}, attribute_homophily={attribute_homophily}, "
        f"s_y={task_feature_strength}, s_a={attribute_feature_strength}"
    )
    return build_graph_dataset(
        name="synthetic-graph",
        pairs=pairs,
        num_nodes=num_nodes,
        x=x,
        y=y,
        num_classes=num_classes,
        split=(perm[:cut_train], perm[cut_train:cut_val], perm[cut_val:]),
        attributes={"sensitive": a},
        attribute_classes={"sensitive": tuple(f"a{k}" for k in range(num_attribute_classes))},
        attribute_nodes=np.arange(num_nodes),
        license="Synthetic data generated by galfast; no restrictions.",
        notes=(settings,),
        seed=seed,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
    )
