"""Same-run A/B of the MovieLens training step's fixed cost (the Python, dispatch and autograd
work that does not grow with the graph) for galfast checkouts with in-place builds:

    python bench/ab_step_fixed_cost.py /tmp/before . --rounds 3

The step of ``galfast run --dataset synthetic-movielens-1m --encoder cheb`` (embedding,
BatchNorm, ChebConv K = 2, the bilinear decoder's edge scores, the rating cross-entropy,
zero_grad, backward, the lean fused Adam) on a graph of 60 nodes and 400 edges with batches of
64 ratings, so that every kernel's own work is negligible. Each checkout runs alternately in a
fresh process at one thread and reports the median CPU time of each phase over its steps
(after 200 warm-up steps); the minimum of the medians over the rounds is printed last.
"""

from __future__ import annotations

import argparse

from checkout_runs import alternate

# Runs inside each checkout: prints one JSON line of per-phase medians in microseconds.
_MEASURE = """
import json, statistics, time, torch
torch.set_num_threads(1)
from galfast import Graph
from galfast.experiments.encoders import make_encoder
from galfast.models import BilinearRatingDecoder
from galfast.train import EdgeHead, RatingBatches, rating_cross_entropy
from galfast.train.lean_adam import LeanAdam
torch.manual_seed(0)
N = 60
src, dst = torch.randint(0, N, (200,)), torch.randint(0, N, (200,))
edges = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
graph = Graph.from_edge_index(edges, num_nodes=N)
encoder = make_encoder("cheb", (20,), num_features=0, num_nodes=N, embedding_dim=20)
head = EdgeHead(BilinearRatingDecoder(20, 5, num_bases=2))
optimizer = LeanAdam([*encoder.parameters(), *head.parameters()], lr=0.01, fused=True)
ratings = torch.stack([torch.randint(0, N, (6400,)), torch.randint(0, N, (6400,))])
batches = RatingBatches(ratings, torch.randint(1, 6, (6400,)), levels=range(1, 6), batch_size=64)
ids = torch.arange(N)
phases = {name: [] for name in ("encode", "head", "loss", "zero_grad", "backward", "step")}
def tick(name, start):
    now = time.process_time()
    phases[name].append(now - start)
    return now
for _ in range(20):
    for batch in batches:
        t = time.process_time()
        z = encoder(ids, graph); t = tick("encode", t)
        scores = head(z, batch); t = tick("head", t)
        loss = rating_cross_entropy(scores, batch); t = tick("loss", t)
        optimizer.zero_grad(); t = tick("zero_grad", t)
        loss.backward(); t = tick("backward", t)
        optimizer.step(); tick("step", t)
medians = {k: 1e6 * statistics.median(v[200:]) for k, v in phases.items()}
medians["total"] = sum(medians.values())
print(json.dumps(medians))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    phases = ("encode", "head", "loss", "zero_grad", "backward", "step", "total")
    alternate(args.checkouts, args.rounds, _MEASURE, phases, digits=1)


if __name__ == "__main__":
    main()
