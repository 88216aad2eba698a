"""Node-pairing policies Q: whose embedding the adversary reads to predict A_v."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import Tensor

from galfast import ops
from galfast._dtypes import as_int
from galfast.gal.seeding import check_seed
from galfast.graph import Graph, check_node_ids, check_op_graph
from galfast.ops.sample_nhop import MAX_EXACT_HOPS, MAX_HOPS

__all__ = [
    "WALK_MODES",
    "Pairing",
    "PairedNodes",
    "check_walkable",
    "max_hops",
    "pair_nodes",
    "parse_pairing",
]

# sample_nhop's modes (see its documentation).
WALK_MODES = ("paper", "simple", "exact")

PairingSpec = Union[str, tuple]


@dataclass(frozen=True)
class Pairing:
    """A parsed pairing: ``hops = 0`` reads v itself, 1 a random neighbour, n an n-hop walk end."""

    hops: int

    def __post_init__(self) -> None:
        # Built directly, Pairing(-1) or Pairing(2.5) passed parse_pairing unchecked.
        hops = as_int(self.hops)
        if hops is None or not 0 <= hops <= MAX_HOPS:
            raise ValueError(f"Pairing hops must be an int in [0, {MAX_HOPS}], got {self.hops!r}")
        object.__setattr__(self, "hops", hops)

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
    ``"nhop:n"`` with ``1 <= n <= max_hops()`` (``n = 1`` is the neighbour pairing). The walk
    mode may bound ``n`` further: see :func:`check_walkable`."""
    if isinstance(spec, Pairing):
        return spec
    if spec == "node":
        return Pairing(0)
    if spec in ("neighbor", "neighbour"):
        return Pairing(1)
    hops = None
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "nhop":
        hops = as_int(spec[1])  # numpy and tensor integers too
    elif isinstance(spec, str) and spec.startswith("nhop:"):
        # ASCII digits only: int() also reads "1_0" (10), "+2" and non-ASCII digits
        text = spec[len("nhop:") :].strip()
        hops = int(text) if text.isascii() and text.isdigit() else None
    if hops is None or hops < 1:
        raise ValueError(
            f"unknown pairing {spec!r}: use 'node', 'neighbor', ('nhop', n) or "
            f"'nhop:n' with an integer n >= 1"
        )
    if hops > MAX_HOPS:
        raise ValueError(f"pairing {spec!r}: n-hop walks take at most {MAX_HOPS} hops, got {hops}")
    return Pairing(hops)


def max_hops(walk_mode: str = "paper") -> int:
    """The longest walk :func:`galfast.ops.sample_nhop` takes in ``walk_mode`` (its kernel
    keeps the path in a fixed-size buffer; the exact mode's distance proof is bounded lower)."""
    if walk_mode not in WALK_MODES:
        raise ValueError(f"walk_mode must be one of {WALK_MODES}, got {walk_mode!r}")
    return MAX_EXACT_HOPS if walk_mode == "exact" else MAX_HOPS


def check_walkable(pairing: Pairing, walk_mode: str) -> None:
    """Raises ValueError when ``pairing`` needs a longer walk than ``walk_mode`` allows, so a
    bad pairing fails where it is configured, not at the first walk."""
    pairing = parse_pairing(pairing)  # a spec such as "nhop:3" too
    limit = max_hops(walk_mode)
    if pairing.hops > limit:
        raise ValueError(
            f"pairing {pairing.name!r} needs {pairing.hops} hops; walk_mode {walk_mode!r} "
            f"walks at most {limit}"
        )


def _check_nodes(graph: Optional[Graph], nodes: Tensor) -> None:
    """What sample_nhop checks of its starts, against ``graph`` where one is given. The ids'
    range is read on a CPU only: on a GPU it would synchronise every training step."""
    if graph is not None:
        check_op_graph(graph, "pair_nodes")
    check_node_ids("nodes", nodes, "num_nodes")
    if graph is not None and nodes.numel() and nodes.device.type == "cpu":
        low, high = (int(v) for v in torch.aminmax(nodes))
        if low < 0 or high >= graph.num_nodes:
            bad = low if low < 0 else high
            raise ValueError(f"nodes holds {bad}, which is not a node id in [0, {graph.num_nodes})")


def pair_nodes(
    graph: Optional[Graph], nodes: Tensor, pairing: Pairing, *, seed: int, walk_mode: str = "paper"
) -> PairedNodes:
    """Pairs every node of ``nodes`` ``[B]`` with the node whose embedding the adversary reads.
    ``graph`` may be None for the node pairing, which reads each node itself.

    ``"node"`` pairs v with itself; otherwise each v walks ``pairing.hops`` hops with
    :func:`galfast.ops.sample_nhop` (``walk_mode`` is its ``mode``), keyed by ``seed`` so the
    draw is reproducible; walks that fail (isolated nodes, dead ends) are dropped and counted.
    """
    pairing = parse_pairing(pairing)  # a spec such as "neighbor" too
    # The node pairing checks what the walks check: it returned bad ids as partners (a negative
    # one reads z's last row) and ignored a bad seed or walk mode until a walk pairing was used.
    seed = check_seed("seed", seed)  # an int: sample_nhop refuses numpy integers
    max_hops(walk_mode)
    if pairing.hops == 0:
        _check_nodes(graph, nodes)
        keep = torch.arange(nodes.numel(), device=nodes.device)
        return PairedNodes(keep, nodes, 0)
    ends = ops.sample_nhop(graph, nodes, pairing.hops, seed=seed, mode=walk_mode)
    keep = (ends >= 0).nonzero().view(-1)
    return PairedNodes(keep, ends[keep], nodes.numel() - keep.numel())
