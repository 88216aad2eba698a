"""Counter-based seeds: every random choice of a run is a pure function of (seed, counters)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["derive_seed", "seeded_generator"]

# Distinct keys for the different consumers of randomness within one step.
PURPOSES = {"epoch": 1, "pairing": 2, "adversary_batch": 3, "batches": 4, "audit": 5}


def derive_seed(seed: int, purpose: str, *counters: int) -> int:
    """A 63-bit seed mixed from the run's ``seed``, a ``purpose`` and counters (epoch, step,
    attribute, ...). Resuming at step t therefore draws exactly what an uninterrupted run
    drew at step t, with no generator state to save."""
    words = [int(seed) & 0xFFFFFFFF, int(seed) >> 32 & 0xFFFFFFFF, PURPOSES[purpose]]
    words += [int(c) for c in counters]
    state = np.random.SeedSequence(words).generate_state(2, np.uint32)
    return (int(state[0]) << 31 | int(state[1]) >> 1) & 0x7FFFFFFFFFFFFFFF


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded with ``seed``."""
    return torch.Generator(device=device).manual_seed(seed)
