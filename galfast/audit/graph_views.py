"""What a graph attacker reads: the frozen embeddings propagated over the n-hop neighbourhood.

A graph attacker holds the graph and every node's embedding (never a label). Its message
passing is parameter-free on frozen embeddings, so the n-hop neighbourhood is aggregated once
as a power of a normalised adjacency (SGC / SIGN style) with galfast's ``ops.aggregate``, and
the attacker's trainable part is the head on top. That keeps the graph out of the training
loop, which is what makes a tuned search affordable on a million edges; stacked layers with a
nonlinearity between hops would instead touch every edge at every optimizer step.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast import ops
from galfast.graph import Graph

__all__ = ["GRAPH_FAMILIES", "describe_view", "graph_view", "neighbourhood_mean"]

# family -> (normalisation, whether the node's own embedding is concatenated).
#   gcn:  S = D^-1/2 A D^-1/2 (GCN's symmetric weights, neighbours only, no self loop);
#   sage: P = D^-1 A (GraphSAGE's mean): P^n Z is the expected embedding at the end of an
#         n-step random walk, the deterministic counterpart of the paper's sampled n-hop walk.
# "+self" adds the node's own embedding beside the aggregate (SAGE's root weight): the
# attacker combines what the node and its neighbourhood reveal.
GRAPH_FAMILIES = {
    "gcn": ("gcn", False),
    "gcn+self": ("gcn", True),
    "sage": ("mean", False),
    "sage+self": ("mean", True),
}


def _propagate(graph: Graph, x: Tensor, norm: str) -> Tensor:
    # Structure only: an edge attribute such as a rating is not a neighbour weight.
    ones = torch.ones(graph.num_edges, dtype=x.dtype, device=x.device)
    if norm == "gcn":
        return ops.aggregate(graph, x, ones, norm="gcn")
    return ops.aggregate(graph, x, ones, reduce="mean")


def neighbourhood_mean(z: Tensor, graph: Graph, hops: int, norm: str, cache: dict) -> Tensor:
    """``M^hops z`` for ``M`` = S (``norm="gcn"``) or P (``"mean"``), cached by (norm, hops)
    in ``cache`` so every family and attack reuses the lower powers."""
    key = (norm, hops)
    if key not in cache:
        below = z if hops == 1 else neighbourhood_mean(z, graph, hops - 1, norm, cache)
        with torch.no_grad():
            cache[key] = _propagate(graph, below, norm)
    return cache[key]


def graph_view(family: str, z: Tensor, graph: Graph, hops: int, cache: dict) -> Tensor:
    """The ``[num_nodes, F]`` features graph family ``family`` reads at ``hops`` hops."""
    norm, with_self = GRAPH_FAMILIES[family]
    agg = neighbourhood_mean(z, graph, hops, norm, cache)
    return torch.cat([z, agg], 1) if with_self else agg


def describe_view(family: Optional[str], hops: int) -> str:
    """What the attacker reads, in words, for the report."""
    if family is None:
        return "z_v"
    norm, with_self = GRAPH_FAMILIES[family]
    matrix = "S=D^-1/2 A D^-1/2" if norm == "gcn" else "P=D^-1 A"
    power = matrix.split("=")[0] + ("" if hops == 1 else f"^{hops}")
    return (f"[z_v, ({power} Z)_v]" if with_self else f"({power} Z)_v") + f", {matrix}"
