"""Edge homophily: how often an edge joins two nodes of the same class."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from galfast._dtypes import holds_integers

__all__ = ["edge_homophily"]


def edge_homophily(edge_index: Tensor, labels: Tensor) -> float:
    r"""The fraction of edges whose endpoints share a label (Zhu et al. 2020):

    .. math::
        h = \frac{|\{(u, v) \in E : y_u = y_v\}|}{|E|}

    Args:
        edge_index: ``[2, E]`` edges (each undirected edge once or twice: the ratio is the same).
        labels: ``[N]`` integer labels.

    Returns:
        ``h`` in ``[0, 1]``; NaN for a graph without edges.

    Example:
        >>> edge_homophily(torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 0, 1]))
        0.5
    """
    if not isinstance(edge_index, Tensor) or not isinstance(labels, Tensor):
        raise ValueError(
            f"edge_index and labels must be a torch.Tensor, got {type(edge_index).__name__} "
            f"and {type(labels).__name__}"
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if not holds_integers(edge_index):
        raise ValueError(f"edge_index must hold integer node ids, got {edge_index.dtype}")
    # One class per node: a [N, L] matrix was compared column by column and averaged, float
    # labels (NaN never equals itself) are no classes.
    if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex():
        raise ValueError(
            f"labels must be [N] integer (or bool) classes, got {labels.dtype} of shape "
            f"{list(labels.shape)}"
        )
    if edge_index.size(1) == 0:
        return float(np.nan)
    low, high = (int(v) for v in torch.aminmax(edge_index))
    if low < 0 or high >= labels.numel():  # a negative id silently read the last label
        bad = low if low < 0 else high
        raise ValueError(
            f"edge_index holds {bad}, which is not a node of labels ({labels.numel()} nodes)"
        )
    # As int64: a uint8 edge_index indexed as a boolean mask (silently, when E == N), int8
    # and int16 ones failed in torch's indexing.
    edge_index = edge_index.long()
    same = labels[edge_index[0]] == labels[edge_index[1]]
    return float(same.to(torch.float64).mean())
