"""``galfast tsne``: t-SNE of the embeddings at two lambdas, coloured by the sensitive
attribute (the paper's Cora figure)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from galfast.audit.metrics import PRIMARY_METRIC
from galfast.cli.dataset_files import check_spares_the_dataset
from galfast.cli.errors import UsageError
from galfast.cli.files import check_file_name, check_writable, save_figure
from galfast.cli.options import (
    add_experiment_options,
    config_kwargs,
    experiment_config,
    float_list,
    int_at_least,
    path_name,
    prepare_checked,
)
from galfast.cli.plots import figure_formats, pyplot
from galfast.experiments import run_experiment
from galfast.gal.adversary_losses import DISTANCES
from galfast.gal.sensitive import SensitiveAttribute

__all__ = ["add_parser", "main"]

DESCRIPTION = """\
Train one encoder per lambda (seed 0, setup as in `galfast run`), embed the nodes that carry
the sensitive attribute with t-SNE (scikit-learn) and draw them side by side, coloured by the
attribute: a legend names the classes (a multi-label attribute, such as FB15k-237's types:
each node's most frequent label), a colour bar gives a continuous attribute's values (QM9's
alpha). With no defence the classes form clusters; with GAL they mix. Each panel's title
gives the node attacker's macro-F1 (MAE for a continuous attribute) from the audit
(--attacks, --attackers, --attacker-epochs, --audit-seeds).
"""

# t-SNE needs a few points to place (its perplexity is at least 1, below the point count).
MIN_POINTS = 5


def max_points(text: str) -> int:
    return int_at_least(text, MIN_POINTS)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "tsne",
        help="t-SNE of embeddings at two lambdas",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_options(parser, seeds=False)
    parser.add_argument("--distance", choices=DISTANCES, default="tv", help="GAL distance")
    parser.add_argument(
        "--lam", type=float_list, default=[0.0, 1.0], help="comma-separated lambdas, one panel each"
    )
    parser.add_argument(
        "--max-points",
        type=max_points,
        default=3000,
        help="at most this many nodes per panel (a seeded sample)",
    )
    parser.add_argument(
        "--out", type=path_name, default="tsne.png", help="figure to write (PNG, PDF, SVG, ...)"
    )
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from sklearn.manifold import TSNE

    configs = [
        experiment_config(**config_kwargs(args), distance=args.distance, lam=lam, seed=0)
        for lam in args.lam
    ]
    check_file_name(args.out, "--out")  # a folder's name has no figure suffix to complain of
    suffix = Path(args.out).suffix.lstrip(".").lower()
    if suffix not in figure_formats():
        raise UsageError(
            f"--out {args.out}: name a figure file ending in one of "
            f"{', '.join('.' + f for f in figure_formats())}"
        )
    check_writable(args.out, "--out")
    # The largest lambda's settings are the strictest (a defended run needs adversary steps).
    prepare_checked(max(configs, key=lambda config: config.lam))
    check_spares_the_dataset([args.out], "--out", configs[0])
    plt = pyplot()
    fig, axes = plt.subplots(1, len(configs), figsize=(5 * len(configs), 5), squeeze=False)
    for ax, config in zip(axes[0], configs):
        outcome = run_experiment(config, progress=not args.quiet)
        known = outcome.attribute.known(outcome.embeddings.size(0))
        nodes, colours = known.nodes.numpy(), _colour_values(outcome.attribute, known.targets)
        rng = np.random.default_rng(0)
        if nodes.size > args.max_points:
            pick = rng.choice(nodes.size, args.max_points, replace=False)
            nodes, colours = nodes[pick], colours[pick]
        # t-SNE needs more points than its perplexity (30 by default).
        perplexity = min(30.0, max(1.0, (nodes.size - 1) / 3))
        points = TSNE(
            n_components=2, init="pca", random_state=0, perplexity=perplexity
        ).fit_transform(outcome.embeddings[nodes].numpy())
        if outcome.attribute.kind == "continuous":
            _scatter_values(ax, points, colours, outcome.attribute.name)
        else:
            _scatter_classes(ax, points, colours, _class_names(outcome))
        subtitle = _attacker_subtitle(outcome.record, outcome.attribute.kind)
        ax.set_title(f"lambda = {config.lam:g} ({args.distance}){subtitle}")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{args.dataset} {args.encoder}: t-SNE coloured by {outcome.attribute.name}")
    fig.tight_layout()
    save_figure(fig, args.out)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0


def _colour_values(attribute: SensitiveAttribute, targets: torch.Tensor) -> np.ndarray:
    """One colour value per known node: its class; a continuous attribute's value; for a
    multi-label attribute its first label (the loaders order labels by frequency: the most
    frequent one the node has), or one class past the labels for a node with none. The CLI's
    continuous attributes (QM9's) have one column."""
    if attribute.kind == "continuous":
        return targets.reshape(len(targets)).double().numpy()
    if attribute.kind == "multilabel":
        labels = targets.numpy() > 0
        return np.where(labels.any(axis=1), labels.argmax(axis=1), labels.shape[1])
    return targets.view(-1).numpy()


def _class_names(outcome) -> tuple[str, ...]:
    """The legend's names; a multi-label attribute's nodes with no label come last."""
    names = outcome.class_names
    if outcome.attribute.kind == "multilabel":
        labels = outcome.attribute.num_outputs
        names = (*names, *map(str, range(len(names), labels)), "(none)")
    return names


def _attacker_subtitle(record: dict, kind: str) -> str:
    """The node attacker's headline score for a panel's title (empty when the node attack
    was not run or has no score, e.g. a test split of one class)."""
    metric = PRIMARY_METRIC[kind]
    score = record["attack"].get("node", {}).get(metric)
    if score is None:
        return ""
    label = {"macro_f1": "F1", "mae": "MAE"}[metric]
    return f", node attacker {label} {score:.2f}"


def _scatter_values(ax, points, values, name: str) -> None:
    """A continuous attribute: one colour scale, with a colour bar naming the attribute."""
    plt = pyplot()
    drawn = ax.scatter(points[:, 0], points[:, 1], c=values, cmap="viridis", s=4)
    plt.colorbar(drawn, ax=ax, label=name)


def _scatter_classes(ax, points, classes, names) -> None:
    """One colour per class with a legend naming it (tab10 up to 10 classes, tab20 up to 20,
    else evenly spaced hues)."""
    plt = pyplot()
    count = max(len(names), int(classes.max()) + 1 if classes.size else 0)
    cmap = plt.get_cmap("tab10" if count <= 10 else "tab20" if count <= 20 else "hsv")
    for k in range(count):
        mask = classes == k
        if not mask.any():
            continue
        colour = cmap(k if count <= 20 else k / count)
        label = names[k] if k < len(names) else str(k)
        ax.scatter(points[mask, 0], points[mask, 1], color=colour, s=4, label=label)
    ax.legend(fontsize=7, markerscale=3, loc="best", ncol=1 + count // 12)
