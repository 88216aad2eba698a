"""The GAL core shared by training and auditing: sensitive attributes, node pairings, the
adversary's losses and counter-based seeding.

:mod:`galfast.train` (the minimax) and :mod:`galfast.audit` (post-hoc attackers) are peers
built on this package; neither imports the other.
"""

from galfast.gal.adversary_losses import (
    DISTANCES,
    adversary_loss,
    clip_weights,
    tv_loss,
    wasserstein_gap,
)
from galfast.gal.pairing import (
    WALK_MODES,
    Pairing,
    check_walkable,
    max_hops,
    pair_nodes,
    parse_pairing,
)
from galfast.gal.seeding import (
    check_seed,
    cuda_rng_devices,
    derive_seed,
    seeded_generator,
    seeded_globals,
)
from galfast.gal.sensitive import KINDS, KnownValues, SensitiveAttribute

__all__ = [
    "DISTANCES",
    "KINDS",
    "WALK_MODES",
    "KnownValues",
    "Pairing",
    "SensitiveAttribute",
    "adversary_loss",
    "check_seed",
    "check_walkable",
    "clip_weights",
    "cuda_rng_devices",
    "derive_seed",
    "max_hops",
    "pair_nodes",
    "parse_pairing",
    "seeded_generator",
    "seeded_globals",
    "tv_loss",
    "wasserstein_gap",
]
