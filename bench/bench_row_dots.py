"""The rating decoder's backward (galfast.ops.row_dot_grads, used by
galfast/models/bilinear_forms.py) against torch forms of the same gradients, on MovieLens
sizes (8,192 ratings, 2 bases, 20 features), in one process, the forms alternating round by
round:

    PYTHONPATH=. python bench/bench_row_dots.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_row_dots.py --threads 2 --rounds 300

At one thread each call is timed as CPU time (time.process_time), at more as wall time
(time.perf_counter; only meaningful on a quiet machine); the minimum over rounds is printed.
"""

from __future__ import annotations

import argparse

import torch
from interleaved import best_times

from galfast import ops
from galfast.models.bilinear_forms import bilinear_forms

BATCH, BASES, DIM = 8192, 2, 20


def _grad_z(vectors, grad):
    grad_z = vectors[:, 0] * grad[:, :1]
    for s in range(1, vectors.size(1)):
        grad_z = torch.addcmul(grad_z, vectors[:, s], grad[:, s : s + 1])
    return grad_z


def broadcast(vectors, z, grad):
    """The form bilinear_forms used before: a broadcast product and addcmul."""
    return grad.unsqueeze(2) * z.unsqueeze(1), _grad_z(vectors, grad)


def per_basis(vectors, z, grad):
    """The fastest torch form measured: one product per basis into its slice, and addcmul."""
    out = torch.empty_like(vectors)
    for s in range(vectors.size(1)):
        torch.mul(z, grad[:, s : s + 1], out=out[:, s])
    return out, _grad_z(vectors, grad)


def einsum(vectors, z, grad):
    return torch.einsum("bs,be->bse", grad, z), torch.einsum("bse,bs->be", vectors, grad)


def forms() -> dict:
    gen = torch.Generator().manual_seed(0)
    vectors = torch.randn(BATCH, BASES, DIM, generator=gen)
    z = torch.randn(BATCH, DIM, generator=gen)
    grad = torch.randn(BATCH, BASES, generator=gen)
    z_src, z_dst = (torch.randn(BATCH, DIM, generator=gen, requires_grad=True) for _ in "ab")
    bases = torch.randn(BASES, DIM, DIM, generator=gen, requires_grad=True)
    out_grad = torch.randn(BATCH, BASES, generator=gen)
    real = ops.row_dot_grads

    def decoder(grads):
        def step():
            ops.row_dot_grads = grads
            try:
                bilinear_forms(z_src, bases, z_dst).backward(out_grad)
            finally:
                ops.row_dot_grads = real

        return step

    return {
        "row-dot gradients [8192, 2, 20]": {
            "broadcast+addcmul": lambda: broadcast(vectors, z, grad),
            "per-basis mul+addcmul": lambda: per_basis(vectors, z, grad),
            "einsum": lambda: einsum(vectors, z, grad),
            "row_dot_grads": lambda: real(vectors, z, grad),
        },
        "bilinear_forms fwd+bwd": {
            "broadcast+addcmul": decoder(broadcast),
            "row_dot_grads": decoder(real),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    wall = args.threads > 1
    for case, fns in forms().items():
        best = best_times(fns, args.rounds, wall, warmup=5)
        ours = best["row_dot_grads"]
        cells = "  ".join(f"{n} {1e6 * t:7.1f} us ({t / ours:4.2f}x)" for n, t in best.items())
        print(f"{case:32s} [{args.threads} thread(s), {'wall' if wall else 'CPU'}]  {cells}")


if __name__ == "__main__":
    main()
