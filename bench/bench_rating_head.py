"""The MovieLens rating head as a training step runs it (EdgeHead, GC-MC's bilinear decoder,
the cross-entropy, forward and backward) in three forms, in one process, alternating round by
round: "before" (index_select gathers; the broadcast product and addcmul in the decoder's
backward), "composition" (session 8: ops.gather_rows twice, bilinear_forms with
ops.row_dot_grads, the coefficient product) and "fused" (session 9: EdgeHead calls
BilinearRatingDecoder.edge_scores, ops.bilinear_edge_scores):

    PYTHONPATH=. python bench/bench_rating_head.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_rating_head.py --threads 2 --rounds 300

At one thread each call is timed as CPU time (time.process_time), at more as wall time
(time.perf_counter; only meaningful on a quiet machine); the minimum over rounds is printed.
"before" and "composition" give bitwise the same loss and gradients, "fused" the same to
rounding (both checked before timing).
"""

from __future__ import annotations

import argparse

import torch
from interleaved import best_times

from galfast import ops
from galfast.models import BilinearRatingDecoder
from galfast.train import EdgeHead, rating_cross_entropy
from galfast.train.batches import RatingBatch

BATCH, USERS, NODES, DIM = 8192, 6040, 9746, 20


def _broadcast_grads(vectors, z, grad):
    grad_z = vectors[:, 0] * grad[:, :1]
    for s in range(1, vectors.size(1)):
        grad_z = torch.addcmul(grad_z, vectors[:, s], grad[:, s : s + 1])
    return grad.unsqueeze(2) * z.unsqueeze(1), grad_z


def _index_select(z, ids):
    return z.index_select(0, ids)


class _ForwardOnly(torch.nn.Module):
    """The decoder without its edge_scores method: EdgeHead gathers the rows for it."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, z_src, z_dst):
        return self.decoder(z_src, z_dst)


def step_fn(form: str):
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(NODES, DIM, generator=gen, requires_grad=True)
    batch = RatingBatch(
        torch.randint(0, USERS, (BATCH,), generator=gen),
        torch.randint(USERS, NODES, (BATCH,), generator=gen),
        torch.randint(0, 5, (BATCH,), generator=gen),
        None,
    )
    torch.manual_seed(0)
    decoder = BilinearRatingDecoder(DIM)
    head = EdgeHead(decoder if form == "fused" else _ForwardOnly(decoder))
    old = form == "before"
    real = (ops.gather_rows, ops.row_dot_grads)

    def step():
        z.grad = None
        head.zero_grad(set_to_none=True)
        if old:
            ops.gather_rows, ops.row_dot_grads = _index_select, _broadcast_grads
        try:
            rating_cross_entropy(head(z, batch), batch).backward()
        finally:
            ops.gather_rows, ops.row_dot_grads = real
        return z.grad, decoder.bases.grad, decoder.coefficients.grad

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = {form: step_fn(form) for form in ("before", "composition", "fused")}
    before, composition, fused = (fn() for fn in steps.values())
    assert all(torch.equal(a, b) for a, b in zip(before, composition)), "results differ"
    for a, b in zip(composition, fused):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    wall = args.threads > 1
    best = best_times(steps, args.rounds, wall)
    ratio = best["composition"] / best["fused"]
    cells = "  ".join(f"{n} {1e6 * t:7.1f} us" for n, t in best.items())
    print(
        f"rating head fwd+bwd [{args.threads} thread(s), {'wall' if wall else 'CPU'}]  {cells}"
        f"  composition/fused {ratio:4.2f}x"
    )


if __name__ == "__main__":
    main()
