"""Node-pairing policies Q: whose embedding the adversary reads to predict A_v."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch
from torch import Tensor

from galfast import ops
from galfast.graph import Graph

__all__ = ["WALK_MODES", "Pairing", "PairedNodes", "pair_nodes", "parse_pairing"]

# sample_nhop's modes (see its documentation).
WALK_MODES = ("paper", "simple", "exact")

PairingSpec = Union[str, tuple]


@dataclass(frozen=True)
class Pairing:
    """A parsed pairing: ``hops = 0`` reads v itself, 1 a random neighbour, n an n-hop walk end."""

    hops: int

    @property
    def name(self) -> str:
        return {0: "node", 1: "neighbor"}.get(self.hops, f"nhop:{self.hops}")


@dataclass(frozen=True, eq=False)
class PairedNodes:
    """The outcome of pairing ``nodes``: ``keep`` are the positions (into ``nodes``) whose
    pairing succeeded, ``partners`` the node read for each of them, ``failures`` how many
    walks failed (dropped from the batch)."""

    keep: Tensor
    partners: Tensor
    failures: int


def parse_pairing(spec: PairingSpec) -> Pairing:
    """Accepts ``"node"``, ``"neighbor"`` (or ``"neighbour"``), ``("nhop", n)`` and
    ``"nhop:n"`` with ``n >= 1`` (``n = 1`` is the neighbour pairing)."""
    if isinstance(spec, Pairing):
        return spec
    if spec == "node":
        return Pairing(0)
    if spec in ("neighbor", "neighbour"):
        return Pairing(1)
    hops = None
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "nhop":
        hops = spec[1]
    elif isinstance(spec, str) and spec.startswith("nhop:"):
        try:
            hops = int(spec[len("nhop:") :])
        except ValueError:
            hops = None
    if isinstance(hops, bool) or not isinstance(hops, int) or hops < 1:
        raise ValueError(
            f"unknown pairing {spec!r}: use 'node', 'neighbor', ('nhop', n) or "
            f"'nhop:n' with an integer n >= 1"
        )
    return Pairing(hops)


def pair_nodes(
    graph: Graph, nodes: Tensor, pairing: Pairing, *, seed: int, walk_mode: str = "paper"
) -> PairedNodes:
    """Pairs every node of ``nodes`` ``[B]`` with the node whose embedding the adversary reads.

    ``"node"`` pairs v with itself; otherwise each v walks ``pairing.hops`` hops with
    :func:`galfast.ops.sample_nhop` (``walk_mode`` is its ``mode``), keyed by ``seed`` so the
    draw is reproducible; walks that fail (isolated nodes, dead ends) are dropped and counted.
    """
    if pairing.hops == 0:
        keep = torch.arange(nodes.numel(), device=nodes.device)
        return PairedNodes(keep, nodes, 0)
    ends = ops.sample_nhop(graph, nodes, pairing.hops, seed=seed, mode=walk_mode)
    keep = (ends >= 0).nonzero().view(-1)
    return PairedNodes(keep, ends[keep], nodes.numel() - keep.numel())
