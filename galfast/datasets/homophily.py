"""Edge homophily: how often an edge joins two nodes of the same class."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

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
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.size(1) == 0:
        return float(np.nan)
    same = labels[edge_index[0]] == labels[edge_index[1]]
    return float(same.to(torch.float64).mean())
