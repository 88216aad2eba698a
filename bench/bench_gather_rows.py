"""galfast.ops.gather_rows against torch's row gathers on the MovieLens rating head's sizes
(two gathers of 8,192 ids from a [9,746, 20] embedding a step, EdgeHead), in one process,
the forms alternating round by round:

    PYTHONPATH=. python bench/bench_gather_rows.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_gather_rows.py --threads 2 --rounds 300

At one thread each call is timed as CPU time (time.process_time), at more as wall time
(time.perf_counter; only meaningful on a quiet machine); the minimum over rounds is printed.
"""

from __future__ import annotations

import argparse

import torch
from interleaved import best_times

from galfast.ops import gather_rows
from galfast.ops.gather_rows import _scatter_add_rows

BATCH, NODES, DIM = 8192, 9746, 20


def forms() -> dict:
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(NODES, DIM, generator=gen, requires_grad=True)
    src = torch.randint(0, 6040, (BATCH,), generator=gen)
    dst = torch.randint(6040, NODES, (BATCH,), generator=gen)
    grad = torch.randn(BATCH, DIM, generator=gen)
    detached = z.detach()

    def head(gather):
        def step():
            z.grad = None
            torch.autograd.backward([gather(z, src), gather(z, dst)], [grad, grad])

        return step

    return {
        "gather 8192 rows (forward)": {
            "z[ids]": lambda: detached[src],
            "index_select": lambda: detached.index_select(0, src),
            "gather_rows": lambda: gather_rows(detached, src),
        },
        "scatter-add 8192 rows (the backward)": {
            "index_add_": lambda: torch.zeros(NODES, DIM).index_add_(0, src, grad),
            "gather_rows": lambda: _scatter_add_rows(grad, src, NODES),
        },
        "EdgeHead: 2 gathers fwd+bwd": {
            "z[ids]": head(lambda t, i: t[i]),
            "index_select": head(lambda t, i: t.index_select(0, i)),
            "gather_rows": head(gather_rows),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    wall = args.threads > 1
    clock = "wall" if wall else "CPU"
    for case, fns in forms().items():
        best = best_times(fns, args.rounds, wall, warmup=5)
        ours = best["gather_rows"]
        cells = "  ".join(f"{n} {1e6 * t:7.1f} us ({t / ours:4.2f}x)" for n, t in best.items())
        print(f"{case:38s} [{args.threads} thread(s), {clock}]  {cells}")


if __name__ == "__main__":
    main()
