"""``galfast tsne``: t-SNE of the embeddings at two lambdas, coloured by the sensitive
attribute (the paper's Cora figure)."""

from __future__ import annotations

import argparse

from galfast.cli.options import add_experiment_options, config_kwargs, float_list
from galfast.cli.plots import pyplot
from galfast.experiments import ExperimentConfig, run_experiment
from galfast.gal.adversary_losses import DISTANCES

__all__ = ["add_parser", "main"]

DESCRIPTION = """\
Train one encoder per lambda (seed 0, setup as in `galfast run`), embed the nodes that carry
the sensitive attribute with t-SNE (scikit-learn) and draw them side by side, coloured by the
attribute. With no defence the classes form clusters; with GAL they mix.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "tsne",
        help="t-SNE of embeddings at two lambdas",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_options(parser)
    parser.add_argument("--distance", choices=DISTANCES, default="tv", help="GAL distance")
    parser.add_argument(
        "--lam", type=float_list, default=[0.0, 1.0], help="comma-separated lambdas, one panel each"
    )
    parser.add_argument("--max-points", type=int, default=3000, help="subsample for t-SNE")
    parser.add_argument("--out", default="tsne.png", help="PNG to write")
    parser.set_defaults(handler=main, seeds=1)
    return parser


def main(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.manifold import TSNE

    plt = pyplot()
    fig, axes = plt.subplots(1, len(args.lam), figsize=(5 * len(args.lam), 5), squeeze=False)
    for ax, lam in zip(axes[0], args.lam):
        config = ExperimentConfig(**config_kwargs(args), distance=args.distance, lam=lam, seed=0)
        outcome = run_experiment(config, progress=not args.quiet)
        known = outcome.attribute.known(outcome.embeddings.size(0))
        nodes, colours = known.nodes.numpy(), known.targets.view(-1).numpy()
        rng = np.random.default_rng(0)
        if nodes.size > args.max_points:
            pick = rng.choice(nodes.size, args.max_points, replace=False)
            nodes, colours = nodes[pick], colours[pick]
        # t-SNE needs more points than its perplexity (30 by default).
        perplexity = min(30.0, max(1.0, (nodes.size - 1) / 3))
        points = TSNE(
            n_components=2, init="pca", random_state=0, perplexity=perplexity
        ).fit_transform(outcome.embeddings[nodes].numpy())
        ax.scatter(points[:, 0], points[:, 1], c=colours, cmap="tab10", s=4)
        node_f1 = (
            outcome.record["attack"]["node"]["macro_f1"]
            if "node" in outcome.record["attack"]
            else None
        )
        subtitle = f", node attacker F1 {node_f1:.2f}" if node_f1 is not None else ""
        ax.set_title(f"lambda = {lam:g} ({args.distance}){subtitle}")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{args.dataset} {args.encoder}: t-SNE coloured by {outcome.attribute.name}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0
