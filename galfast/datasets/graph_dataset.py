"""The result type of node/link datasets (Planetoid, synthetic graphs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast.datasets._common import attribute_summary, check_attributes, to_device
from galfast.datasets.link_split import LinkSplit, random_link_split
from galfast.graph import Graph

__all__ = ["GraphDataset", "build_graph_dataset"]


@dataclass(frozen=True, eq=False, repr=False)
class GraphDataset:
    """A graph whose nodes carry features, a task label and sensitive attributes.

    Attributes:
        name: e.g. ``"cora"``.
        graph: the whole undirected graph, both directions of every edge, no self loops.
        x: ``[N, F]`` float32 node features, or ``None`` when the dataset is structure-only
            (use a learned node embedding instead; ``notes`` says why).
        y: ``[N]`` int64 task label (node class), ``-1`` where unknown.
        num_classes: number of task classes.
        train_mask, val_mask, test_mask: ``[N]`` bool node split (Planetoid: the public split).
        link_split: seeded link-prediction split; ``link_split.graph`` (training edges only) is
            the graph to run the encoder on for link prediction.
        attributes: sensitive attributes, ``name -> [A]`` int64 codes, entry ``k`` belonging to
            node ``attribute_nodes[k]``.
        attribute_classes: ``name -> class names``; ``len`` is the attribute's cardinality.
        attribute_nodes: ``[A]`` int64 ids of the nodes whose attributes are known.
        license: licence / attribution notice of the data.
        notes: caveats a user must know (missing features, padded nodes, ...).

    Example:
        >>> ds = galfast.datasets.planetoid("cora")
        >>> z = encoder(ds.x, ds.link_split.graph)
        >>> leak = attacker(z[ds.attribute_nodes], ds.attributes["class"])
    """

    name: str
    graph: Graph
    x: Optional[Tensor]
    y: Tensor
    num_classes: int
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    link_split: LinkSplit
    attributes: dict[str, Tensor]
    attribute_classes: dict[str, tuple[str, ...]]
    attribute_nodes: Tensor
    license: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = self.graph.num_nodes
        if self.x is not None and (self.x.dim() != 2 or self.x.size(0) != n):
            raise ValueError(f"x must have shape [{n}, F], got {list(self.x.shape)}")
        for name in ("y", "train_mask", "val_mask", "test_mask"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name} must have shape [{n}]")
        if self.link_split.graph.num_nodes != n:
            raise ValueError("link_split.graph must have the same nodes as graph")
        check_attributes(self.attributes, self.attribute_classes, self.attribute_nodes, n)

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def has_features(self) -> bool:
        return self.x is not None

    @property
    def num_features(self) -> int:
        """Feature width, 0 for a structure-only dataset."""
        return 0 if self.x is None else self.x.size(1)

    def to(self, device: Any) -> GraphDataset:
        """A copy with every tensor and graph on `device`."""
        return to_device(self, device)

    def __repr__(self) -> str:
        features = f"{self.num_features} features" if self.has_features else "no features"
        return (
            f"GraphDataset({self.name}: {self.num_nodes} nodes, "
            f"{self.graph.num_edges // 2} undirected edges, {features}, "
            f"{self.num_classes} classes, "
            f"attributes: {attribute_summary(self.attribute_classes)})"
        )


def _mask(index: np.ndarray, num_nodes: int) -> Tensor:
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[torch.from_numpy(np.asarray(index, dtype=np.int64))] = True
    return mask


def build_graph_dataset(
    *,
    name: str,
    pairs: np.ndarray,
    num_nodes: int,
    x: Optional[np.ndarray],
    y: np.ndarray,
    num_classes: int,
    split: tuple[np.ndarray, np.ndarray, np.ndarray],
    attributes: dict[str, np.ndarray],
    attribute_classes: dict[str, tuple[str, ...]],
    attribute_nodes: np.ndarray,
    license: str,
    notes: tuple[str, ...],
    seed: int,
    val_fraction: float,
    test_fraction: float,
) -> GraphDataset:
    """Assembles a :class:`GraphDataset` from numpy arrays: `pairs` ``[2, P]`` undirected edges
    ``u < v``, `split` the (train, val, test) node indices; the link split is drawn here."""
    pairs = np.asarray(pairs, dtype=np.int64)  # the graph and the link split read the same ids
    pairs_t = torch.from_numpy(pairs)
    train, val, test = (_mask(index, num_nodes) for index in split)
    return GraphDataset(
        name=name,
        graph=Graph.from_edge_index(pairs_t, num_nodes, symmetrize=True),
        x=None if x is None else torch.from_numpy(np.asarray(x, dtype=np.float32)),
        y=torch.from_numpy(np.asarray(y, dtype=np.int64)),
        num_classes=int(num_classes),
        train_mask=train,
        val_mask=val,
        test_mask=test,
        link_split=random_link_split(
            pairs, num_nodes, val_fraction=val_fraction, test_fraction=test_fraction, seed=seed
        ),
        attributes={
            key: torch.from_numpy(np.asarray(codes, dtype=np.int64))
            for key, codes in attributes.items()
        },
        attribute_classes=attribute_classes,
        attribute_nodes=torch.from_numpy(np.asarray(attribute_nodes, dtype=np.int64)),
        license=license,
        notes=notes,
    )
