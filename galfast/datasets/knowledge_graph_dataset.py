"""The result type of knowledge-graph datasets (FB15k-237, WN18RR) and its builder."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast.datasets._common import attribute_summary, to_device
from galfast.graph import Graph

__all__ = ["ATTRIBUTE_KINDS", "KnowledgeGraphDataset", "build_knowledge_graph_dataset"]

# The kinds of galfast.gal.SensitiveAttribute a knowledge-graph attribute can have.
ATTRIBUTE_KINDS = ("categorical", "multilabel")


@dataclass(frozen=True, eq=False, repr=False)
class KnowledgeGraphDataset:
    """A knowledge graph with its link-prediction splits and sensitive entity attributes.

    Relation ids are ``0 .. R-1``; models that predict heads use the inverse relation
    ``r + R`` (``num_relations`` does not count inverses).

    Attributes:
        name: e.g. ``"wn18rr"``.
        entities: ``N`` entity names (Freebase mids, WordNet synset offsets), sorted; the id of
            an entity is its position.
        relations: ``R`` relation names, sorted, likewise.
        train, valid, test: ``[T, 3]`` int64 ``(head, relation, tail)`` triples, file order.
        graph: the message-passing graph over the *training* triples: each ``(h, r, t)`` as an
            edge ``h -> t`` of type ``r`` and an edge ``t -> h`` of type ``r + R`` (a repeated
            training triple gives one edge).
        attributes: ``name -> values``: ``[K]`` int64 class ids (categorical) or ``[K, L]``
            int64 0/1 labels (multilabel), row ``k`` belonging to entity
            ``attribute_nodes[name][k]``.
        attribute_kinds: ``name -> "categorical" | "multilabel"`` (the kind of
            ``galfast.SensitiveAttribute`` it is).
        attribute_classes: ``name -> class (or label) names``; ``len`` is the cardinality.
        attribute_nodes: ``name -> [K]`` int64 sorted ids of the entities where it is known.
        license: licence / attribution notice of the data.
        notes: caveats a user must know.

    Example:
        >>> ds = galfast.datasets.wn18rr(root="../shared/data")
        >>> h, r, t = ds.train.unbind(1)
        >>> ds.attributes["pos"].shape, ds.attribute_classes["pos"]
        (torch.Size([40943]), ('JJ', 'NN', 'RB', 'VB'))
    """

    name: str
    entities: tuple[str, ...]
    relations: tuple[str, ...]
    train: Tensor
    valid: Tensor
    test: Tensor
    graph: Graph
    attributes: dict[str, Tensor]
    attribute_kinds: dict[str, str]
    attribute_classes: dict[str, tuple[str, ...]]
    attribute_nodes: dict[str, Tensor]
    license: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for vocabulary in ("entities", "relations"):  # a name must lead to one id
            repeated = [n for n, count in Counter(getattr(self, vocabulary)).items() if count > 1]
            if repeated:
                raise ValueError(f"{vocabulary} must be distinct names, {repeated[0]!r} is twice")
        for split in ("train", "valid", "test"):
            _check_triples(split, getattr(self, split), self.num_entities, self.num_relations)
        if self.graph.num_nodes != self.num_entities:
            raise ValueError(f"graph must have {self.num_entities} nodes (one per entity)")
        names = set(self.attributes)
        for other in ("attribute_kinds", "attribute_classes", "attribute_nodes"):
            if set(getattr(self, other)) != names:
                raise ValueError(f"attributes and {other} must name the same attributes")
        for name in self.attributes:
            _check_attribute(self, name)

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        """``R``, without the inverse relations."""
        return len(self.relations)

    @property
    def all_triples(self) -> Tensor:
        """``[T_train + T_valid + T_test, 3]``: every known true triple (the filter of the
        filtered ranking metrics)."""
        return torch.cat([self.train, self.valid, self.test])

    def to(self, device: Any) -> KnowledgeGraphDataset:
        """A copy with every tensor and the graph on `device`."""
        return to_device(self, device)

    def __repr__(self) -> str:
        return (
            f"KnowledgeGraphDataset({self.name}: {self.num_entities} entities, "
            f"{self.num_relations} relations, {self.train.size(0)} / {self.valid.size(0)} / "
            f"{self.test.size(0)} train / valid / test triples, attributes: "
            f"{attribute_summary(self.attribute_classes)})"
        )


def _check_triples(split: str, triples: Tensor, num_entities: int, num_relations: int) -> None:
    if not isinstance(triples, Tensor):
        raise ValueError(f"{split} must be an int64 [T, 3] tensor, got {type(triples).__name__}")
    if triples.dtype != torch.int64 or triples.dim() != 2 or triples.size(1) != 3:
        raise ValueError(
            f"{split} must be an int64 [T, 3] tensor, got {triples.dtype} {list(triples.shape)}"
        )
    if triples.device.type != "cpu" or triples.numel() == 0:
        return  # ranges are checked when built, on CPU, as for the other dataset types
    heads_tails = triples[:, [0, 2]]
    if int(heads_tails.min()) < 0 or int(heads_tails.max()) >= num_entities:
        raise ValueError(f"{split} holds an entity id outside [0, {num_entities})")
    if int(triples[:, 1].min()) < 0 or int(triples[:, 1].max()) >= num_relations:
        raise ValueError(f"{split} holds a relation id outside [0, {num_relations})")


def _check_attribute(dataset: KnowledgeGraphDataset, name: str) -> None:
    kind, values = dataset.attribute_kinds[name], dataset.attributes[name]
    nodes, classes = dataset.attribute_nodes[name], dataset.attribute_classes[name]
    if kind not in ATTRIBUTE_KINDS:
        raise ValueError(f"attribute {name!r}: kind must be one of {ATTRIBUTE_KINDS}, got {kind!r}")
    for field, value in (("attributes", values), ("attribute_nodes", nodes)):
        if not isinstance(value, Tensor):
            raise ValueError(f"{field}[{name!r}] must be a tensor, got {type(value).__name__}")
    if nodes.dtype != torch.int64 or nodes.dim() != 1:
        raise ValueError(f"attribute_nodes[{name!r}] must be a 1-D int64 tensor")
    shape = [nodes.numel()] if kind == "categorical" else [nodes.numel(), len(classes)]
    if values.dtype != torch.int64 or list(values.shape) != shape:
        raise ValueError(
            f"attribute {name!r} ({kind}) must be int64 with shape {shape}, "
            f"got {values.dtype} {list(values.shape)}"
        )
    if nodes.device.type != "cpu" or nodes.numel() == 0:
        return
    if int(nodes.min()) < 0 or int(nodes.max()) >= dataset.num_entities:
        raise ValueError(f"attribute_nodes[{name!r}] must lie in [0, {dataset.num_entities})")
    if nodes.numel() > 1 and not bool((nodes[1:] > nodes[:-1]).all()):
        raise ValueError(f"attribute_nodes[{name!r}] must be sorted without repeats")
    upper = len(classes) if kind == "categorical" else 2
    if int(values.min()) < 0 or int(values.max()) >= upper:
        raise ValueError(f"attribute {name!r} holds values outside [0, {upper})")


def build_knowledge_graph_dataset(
    *,
    name: str,
    entities: tuple[str, ...],
    relations: tuple[str, ...],
    splits: dict[str, np.ndarray],
    attributes: dict[str, tuple[str, np.ndarray, tuple[str, ...], np.ndarray]],
    license: str,
    notes: tuple[str, ...] = (),
) -> KnowledgeGraphDataset:
    """Assembles a :class:`KnowledgeGraphDataset` from numpy arrays: `splits` ``train`` /
    ``valid`` / ``test`` ``[T, 3]`` ids, `attributes` ``name -> (kind, values, class names,
    entity ids)``; the training graph with inverse edges is built here.

    Raises:
        ValueError: a split is missing, not ``[T, 3]``, or an array holds non-integers.
    """
    missing = [s for s in ("train", "valid", "test") if s not in splits]
    if missing:
        raise ValueError(f"splits must have train, valid and test, missing {missing}")
    train, valid, test = (
        torch.from_numpy(_int64_array(f"splits[{s!r}]", splits[s], width=3))
        for s in ("train", "valid", "test")
    )
    num_relations = len(relations)
    # Before the graph is built: its own error would speak of an edge_index.
    for split, triples in (("train", train), ("valid", valid), ("test", test)):
        _check_triples(split, triples, len(entities), num_relations)
    heads, rels, tails = train.unbind(1)
    graph = Graph.from_edge_index(
        torch.stack([torch.cat([heads, tails]), torch.cat([tails, heads])]),
        len(entities),
        edge_type=torch.cat([rels, rels + num_relations]),
    )

    def tensor(key: str, field: str, array: np.ndarray) -> Tensor:
        return torch.from_numpy(_int64_array(f"attribute {key!r} {field}", array))

    return KnowledgeGraphDataset(
        name=name,
        entities=entities,
        relations=relations,
        train=train,
        valid=valid,
        test=test,
        graph=graph,
        attributes={key: tensor(key, "values", v) for key, (_, v, _, _) in attributes.items()},
        attribute_kinds={key: kind for key, (kind, _, _, _) in attributes.items()},
        attribute_classes={key: classes for key, (_, _, classes, _) in attributes.items()},
        attribute_nodes={key: tensor(key, "nodes", n) for key, (_, _, _, n) in attributes.items()},
        license=license,
        notes=notes,
    )


def _int64_array(name: str, array: np.ndarray, width: Optional[int] = None) -> np.ndarray:
    """`array` as int64, refusing what a cast would change silently: floats (0.5 would become
    0) and, with `width`, any shape but ``[T, width]`` (a reshape would reorder the ids)."""
    array = np.asarray(array)
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    if width is not None and array.size == 0:
        array = array.reshape(0, width)
    if width is not None and (array.ndim != 2 or array.shape[1] != width):
        raise ValueError(f"{name} must be a [T, {width}] array, got shape {list(array.shape)}")
    return array.astype(np.int64)
