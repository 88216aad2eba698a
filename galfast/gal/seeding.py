"""Counter-based seeds: every random choice of a run is a pure function of (seed, counters)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from galfast._args import check_int
from galfast._dtypes import as_int

__all__ = ["check_seed", "cuda_rng_devices", "derive_seed", "seeded_generator", "seeded_globals"]

# One key per kind of random choice, named after the choice (not after who makes it): the
# trainer's epoch seeds, walk pairings and adversary batches, and the post-hoc attacks (their
# pairings and attacker initialisations; the strong audit's validation folds, configuration
# draws and tuned attackers). The numbers are part of every recorded run's randomness: never
# renumber them.
PURPOSES = {
    "epoch": 1,
    "pairing": 2,
    "adversary_batch": 3,
    "attack": 4,
    "audit_validation": 5,
    "audit_search": 6,
    "audit_attacker": 7,
    "graph_batches": 8,
    "kg_query_order": 9,
    "neighbor_sample": 10,
}

# derive_seed mixes 64 bits of a seed: a larger or a negative one would alias another seed.
_SEED_LIMIT = 2**64


def check_seed(name: str, seed: object) -> int:
    """``seed`` as an int; ValueError naming ``name`` unless it is an integer (not a bool) in
    ``[0, 2**64)``. Every seed of the public API is checked here: outside that range
    :func:`derive_seed` would silently give another seed's draws."""
    return check_int(name, seed, 0, _SEED_LIMIT)


def derive_seed(seed: int, purpose: str, *counters: int) -> int:
    """A 63-bit seed mixed from the run's ``seed``, a ``purpose`` and counters (epoch, step,
    attribute, ...). Resuming at step t therefore draws exactly what an uninterrupted run
    drew at step t, with no generator state to save."""
    # int(1.5) or a negative seed silently gave another seed's draws; an unknown purpose was a
    # KeyError and a negative counter NumPy's "expected non-negative integer".
    seed = check_seed("seed", seed)
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {tuple(PURPOSES)}, got {purpose!r}")
    words = [seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF, PURPOSES[purpose]]
    for counter in counters:
        count = as_int(counter)
        if count is None or count < 0:
            raise ValueError(f"counters must be ints >= 0, got {counters!r}")
        words.append(count)
    state = np.random.SeedSequence(words).generate_state(2, np.uint32)
    return (int(state[0]) << 31 | int(state[1]) >> 1) & 0x7FFFFFFFFFFFFFFF


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded with ``seed``."""
    # torch took -1 and overflowed on 2**64 ("Overflow when unpacking long long")
    return torch.Generator(device=device).manual_seed(check_seed("seed", seed))


def cuda_rng_devices(device: torch.device | str) -> list[int]:
    """The CUDA device indices whose generators a run on ``device`` draws from (none on CPU)."""
    device = torch.device(device)
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@contextmanager
def seeded_globals(seed: int, cuda_devices: Sequence[int] = ()) -> Iterator[None]:
    """Seeds the global generators of torch (CPU and the given CUDA devices), NumPy and
    Python's ``random`` with ``seed`` for the duration of the block, then restores the
    caller's states. Inside, shuffles, negative samples and dropout of user code are keyed
    by ``seed`` whichever library draws them."""
    # NumPy's legacy global generator on purpose: it is what user code calling np.random.* uses.
    seed = check_seed("seed", seed)  # before any state is touched (see seeded_generator)
    numpy_state, python_state = np.random.get_state(), random.getstate()  # noqa: NPY002
    with torch.random.fork_rng(devices=list(cuda_devices)):
        # Not torch.manual_seed: it would also queue a lazy seed for every CUDA device.
        torch.random.default_generator.manual_seed(seed)
        for index in cuda_devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        np.random.seed(seed & 0xFFFFFFFF)  # noqa: NPY002
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)  # noqa: NPY002
            random.setstate(python_state)
