"""``galfast audit``: audit any saved embedding tensor against saved attribute labels."""

from __future__ import annotations

import argparse

import torch

from galfast.audit import audit, audit_split
from galfast.audit.attackers import FAMILIES
from galfast.cli.options import comma_list, pairing_list, positive_int, write_json
from galfast.gal import SensitiveAttribute
from galfast.graph import Graph

__all__ = ["add_parser", "main"]

DESCRIPTION = """\
Train worst-case attackers on frozen embeddings and report how well they recover a sensitive
attribute. EMBEDDINGS is a torch.save'd [N, D] float tensor; --labels a [N] integer tensor of
attribute classes (negative = unknown). Attackers train on a seeded 80% of the labelled nodes
and are scored on the rest. Neighbour and n-hop attacks need --graph, a [2, E] edge_index
(both directions are added).
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "audit",
        help="audit saved embeddings",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("embeddings", help="torch.save'd [N, D] embedding tensor (.pt)")
    parser.add_argument(
        "--labels", required=True, help="torch.save'd [N] attribute classes (negative = unknown)"
    )
    parser.add_argument("--name", default="attribute", help="attribute name in the report")
    parser.add_argument("--graph", default=None, help="torch.save'd [2, E] int64 edge_index")
    parser.add_argument(
        "--attacks",
        type=pairing_list,
        default=None,
        help="comma-separated pairings (default: node, plus neighbor when --graph is given)",
    )
    parser.add_argument(
        "--attackers", type=comma_list(FAMILIES), default=list(FAMILIES), help="families"
    )
    parser.add_argument("--seeds", type=positive_int, default=3, help="audit repetitions")
    parser.add_argument("--epochs", type=positive_int, default=30, help="attacker epochs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and the attackers")
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=main)
    return parser


def _load_tensor(path: str, what: str) -> torch.Tensor:
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{what}: no such file {path!r}") from None
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{what}: {path!r} holds a {type(value).__name__}, not a tensor")
    return value


def main(args: argparse.Namespace) -> int:
    z = _load_tensor(args.embeddings, "embeddings")
    labels = _load_tensor(args.labels, "--labels")
    if labels.dim() != 1 or labels.is_floating_point() or labels.numel() != z.size(0):
        raise ValueError(
            f"--labels must be a [{z.size(0)}] integer tensor, got {list(labels.shape)} "
            f"{labels.dtype}"
        )
    graph = None
    if args.graph is not None:
        edge_index = _load_tensor(args.graph, "--graph")
        graph = Graph.from_edge_index(edge_index.long(), z.size(0), symmetrize=True)
    attacks = args.attacks or (["node", "neighbor"] if graph is not None else ["node"])
    nodes = (labels >= 0).nonzero().view(-1)
    values = labels[nodes].long()
    if nodes.numel() < 2:
        raise ValueError("--labels must give at least two known values")
    classes = int(values.max()) + 1
    kind = "binary" if classes <= 2 else "categorical"
    attribute = SensitiveAttribute(
        args.name,
        kind,
        values,
        index=nodes,
        num_classes=None if kind == "binary" else classes,
    )
    train_idx, test_idx = audit_split(nodes, args.seed)
    report = audit(
        z.float(),
        attribute,
        train_idx=train_idx,
        test_idx=test_idx,
        graph=graph,
        attacks=attacks,
        attackers=args.attackers,
        seeds=args.seeds,
        epochs=args.epochs,
        seed=args.seed,
        progress=not args.quiet,
    )
    print(report)
    if args.json:
        write_json(args.json, report.to_dict())
        print(f"wrote {args.json}")
    return 0
