"""Wall time of the strong audit on a MovieLens-1M-sized embedding (synthetic_movielens at
full size, 64-dim embeddings that carry the rating graph's signal), fast audit beside it.

    python bench/time_strong_audit.py [--seeds 1] [--attributes gender]
"""

import argparse
import time

import torch

from galfast import SensitiveAttribute, audit, datasets, ops
from galfast.audit import audit_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--attributes", default="gender")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ds = datasets.synthetic_movielens(seed=0)
    gen = torch.Generator().manual_seed(0)
    n = ds.graph.num_nodes
    # Embeddings that read the rating graph (one mean aggregation of random features) plus
    # noise: users' rows then carry what their movies reveal, as an encoder's would.
    ones = torch.ones(ds.graph.num_edges)
    z = ops.aggregate(ds.graph, torch.randn(n, 64, generator=gen), ones, reduce="mean")
    z = z + 0.5 * torch.randn(n, 64, generator=gen)
    attrs = []
    for name in args.attributes.split(","):
        values = ds.attributes[name]
        kind = "binary" if name == "gender" else "categorical"
        attrs.append(SensitiveAttribute(name, kind, values, index=ds.attribute_nodes))
    train_idx, test_idx = audit_split(ds.attribute_nodes, 0)
    print(f"{n} nodes, {ds.graph.num_edges} CSR edges, z {tuple(z.shape)}, {args.threads} threads")
    for strength in ("fast", "strong"):
        start = time.perf_counter()
        report = audit(
            z,
            attrs,
            graph=ds.graph,
            train_idx=train_idx,
            test_idx=test_idx,
            seeds=args.seeds,
            strength=strength,
        )
        elapsed = time.perf_counter() - start
        print(f"{strength}: {elapsed:.1f} s")
        print("\n".join(report.describe_worst_case(r) for r in report.worst_cases()))


if __name__ == "__main__":
    main()
