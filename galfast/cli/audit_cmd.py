"""``galfast audit``: audit any saved embedding tensor against saved attribute labels."""

from __future__ import annotations

import argparse
import warnings

import torch

from galfast._dtypes import all_finite, check_readable_tensor, holds_integers
from galfast.audit import STRENGTHS, audit, audit_split
from galfast.audit.attackers import FAMILIES
from galfast.audit.checks import check_standardisable
from galfast.cli.errors import UsageError
from galfast.cli.files import check_not_an_input, check_writable, write_json
from galfast.cli.options import comma_list, pairing_list, path_name, positive_int, seed_value
from galfast.gal import SensitiveAttribute, parse_pairing
from galfast.graph import Graph
from galfast.train.checkpoints import damaged_entry

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
    parser.add_argument(
        "--name", type=attribute_name, default="attribute", help="attribute name in the report"
    )
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
    parser.add_argument(
        "--strength",
        choices=STRENGTHS,
        default="strong",
        help="strong: also graph attackers (with --graph), a tuned search and k-NN / boosted "
        "trees; fast: the fixed MLP and linear attackers",
    )
    parser.add_argument("--seeds", type=positive_int, default=3, help="audit repetitions")
    parser.add_argument("--epochs", type=positive_int, default=30, help="attacker epochs")
    parser.add_argument(
        "--seed", type=seed_value, default=0, help="seed of the split and the attackers"
    )
    parser.add_argument(
        "--json", type=path_name, default=None, help="also write the report as JSON here"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=main)
    return parser


def attribute_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a name for the report, got an empty one")
    return text


def _load_tensor(path: str, what: str) -> torch.Tensor:
    try:
        damaged = damaged_entry(path)
        if damaged is not None:  # torch.load checks no CRC: a flipped bit loads as a value
            raise UsageError(
                f"{what}: {path!r} is damaged: its entry {damaged} fails the archive's CRC "
                "check (a disk, copy or transfer error?)"
            )
        with warnings.catch_warnings():
            # torch warns about some foreign pickles before failing on them: the error says it.
            warnings.simplefilter("ignore", UserWarning)
            value = torch.load(path, map_location="cpu", weights_only=True)
    except UsageError:
        raise
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file {path!r}") from None
    except OSError as error:  # a folder, no permission
        raise UsageError(f"{what}: cannot read {path!r}: {error.strerror or error}") from None
    except Exception:
        # Bytes that are not torch's format fail anywhere in its zip and pickle readers, with
        # any error (a text file: KeyError; a cut one: EOFError, IndexError, struct.error).
        # torch's own message runs to paragraphs and suggests loading with weights_only=False,
        # which would run the file's code: the file is what the user has to change.
        raise UsageError(
            f"{what}: {path!r} is not a tensor saved with torch.save (or it is truncated)"
        ) from None
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"{what}: {path!r} holds a {type(value).__name__}, not a tensor")
    try:
        check_readable_tensor(f"{what} {path!r}", value, sparse=True)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return value


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    """A sparse tensor as the dense one it stands for (the audit reads dense rows); called
    after the shape checks, so a sparse matrix of the wrong shape is refused, not expanded."""
    return tensor if tensor.layout == torch.strided else tensor.to_dense()


def _embeddings(path: str) -> torch.Tensor:
    # A model's output saved without .detach() keeps requires_grad: the audit reads values.
    z = _load_tensor(path, "EMBEDDINGS").detach()
    if z.dim() != 2 or not z.is_floating_point() or z.size(0) < 2 or z.size(1) < 1:
        raise UsageError(
            f"EMBEDDINGS {path!r}: expected an [N, D] floating-point tensor with N >= 2 and "
            f"D >= 1, got {list(z.shape)} {z.dtype}"
        )
    z = _dense(z)
    if not all_finite(z):
        raise UsageError(f"EMBEDDINGS {path!r}: holds NaN or infinite values")
    try:  # the attackers read the embeddings in float32
        check_standardisable(f"EMBEDDINGS {path!r}", z, torch.float32)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return z.float()


def _labels(path: str, num_nodes: int) -> torch.Tensor:
    labels = _load_tensor(path, "--labels")
    if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex():
        raise UsageError(
            f"--labels must be a [{num_nodes}] integer tensor, got {list(labels.shape)} "
            f"{labels.dtype}"
        )
    if labels.numel() != num_nodes:
        raise UsageError(
            f"--labels must be a [{num_nodes}] integer tensor (one per embedding row), got "
            f"{list(labels.shape)} {labels.dtype}"
        )
    labels = _dense(labels).long()
    # Classes are numbered 0..K-1, so K <= N: a larger id is not a class index (it would size
    # the attackers' outputs).
    if int(labels.max()) >= num_nodes:
        raise UsageError(
            f"--labels: class {int(labels.max())} for {num_nodes} rows; number the classes "
            f"0..K-1 with K <= {num_nodes}"
        )
    return labels


def _graph(path: str, num_nodes: int) -> Graph:
    edge_index = _load_tensor(path, "--graph")
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or not holds_integers(edge_index):
        raise UsageError(
            f"--graph {path!r}: expected a [2, E] integer edge_index, got "
            f"{list(edge_index.shape)} {edge_index.dtype}"
        )
    edge_index = _dense(edge_index).long()
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise UsageError(
            f"--graph {path!r}: node ids must lie in [0, {num_nodes}) (one per embedding row), "
            f"got [{int(edge_index.min())}, {int(edge_index.max())}]"
        )
    return Graph.from_edge_index(edge_index, num_nodes, symmetrize=True)


def _check_walks(graph: Graph, nodes: dict[str, torch.Tensor], walks: list[str]) -> None:
    """A walk leaves its start along an edge to another node: where no training node, or no
    test node, has one, every walk of an attack would fail."""
    source, target = graph.edge_index()
    movers = torch.zeros(graph.num_nodes, dtype=torch.bool)
    movers[source[source != target]] = True  # the graph is symmetric: sources suffice
    for split, index in nodes.items():
        if not bool(movers[index].any()):
            raise UsageError(
                f"--graph: no {split} node of the audit has an edge to another node, so every "
                f"{','.join(walks)} walk would fail; pass a graph with edges or --attacks node"
            )


def main(args: argparse.Namespace) -> int:
    z = _embeddings(args.embeddings)
    labels = _labels(args.labels, z.size(0))
    attacks = args.attacks or (["node", "neighbor"] if args.graph is not None else ["node"])
    walks = [a for a in attacks if parse_pairing(a).hops > 0]
    if walks and args.graph is None:
        raise UsageError(f"--attacks {','.join(walks)} needs --graph (the edge_index to walk)")
    graph = _graph(args.graph, z.size(0)) if args.graph is not None else None
    nodes = (labels >= 0).nonzero().view(-1)
    values = labels[nodes]
    if nodes.numel() < 2 or values.unique().numel() < 2:
        raise UsageError(
            "--labels must give at least two known values (>= 0) of at least two classes"
        )
    if args.json is not None:
        inputs = {"EMBEDDINGS": args.embeddings, "--labels": args.labels, "--graph": args.graph}
        check_not_an_input(args.json, "--json", inputs)
        check_writable(args.json, "--json")
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
    if args.strength == "strong" and train_idx.numel() < 2:
        # the tuned attackers validate on part of the training nodes: one leaves none
        raise UsageError(
            f"--strength strong needs at least 3 known labels (a validation split of the "
            f"training nodes), got {nodes.numel()}; give more labels or --strength fast"
        )
    if walks:
        _check_walks(graph, {"training": train_idx, "test": test_idx}, walks)
    report = audit(
        z,
        attribute,
        train_idx=train_idx,
        test_idx=test_idx,
        graph=graph,
        attacks=attacks,
        attackers=args.attackers,
        strength=args.strength,
        seeds=args.seeds,
        epochs=args.epochs,
        seed=args.seed,
        progress=not args.quiet,
    )
    print(report)
    if args.json is not None:
        write_json(args.json, report.to_dict())
        print(f"wrote {args.json}")
    return 0
