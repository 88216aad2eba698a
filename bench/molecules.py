"""Seeded QM9-like molecule batches for the NNConv / MPNN benchmarks.

QM9 molecules (hydrogens included, as PyG's QM9) have 18 atoms and 18.7 bonds on average
(3 to 29 atoms). Each molecule here: a random spanning tree over its atoms plus ring
closures up to about atoms + 1 bonds, atoms placed by a random walk with 1.0-1.6 A bond
lengths, bond types drawn single / double / triple / aromatic. Edge features are PyG's
example's: the bond type one-hot (4) plus the interatomic distance (T.Distance(norm=False)).
``complete=True`` gives every ordered pair of distinct atoms instead, with a zero one-hot for
non-bonded pairs (T.Complete in PyG's qm9_nn_conv example).
"""

from __future__ import annotations

import numpy as np
import torch

BOND_TYPE_P = [0.72, 0.18, 0.04, 0.06]  # single, double, triple, aromatic


def molecule_batch(
    num_molecules: int = 128, complete: bool = False, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(edge_index [2, E], edge_attr [E, 5], batch [N], N), both directions of every bond."""
    rng = np.random.default_rng(seed)
    sources, targets, attrs, batch, offset = [], [], [], [], 0
    for m in range(num_molecules):
        n = int(np.clip(round(rng.normal(18, 3)), 3, 29))
        parent = [int(rng.integers(0, i)) for i in range(1, n)]
        bonds = {(min(i + 1, p), max(i + 1, p)) for i, p in enumerate(parent)}
        while len(bonds) < n + 1:  # ring closures
            a, b = sorted(rng.choice(n, 2, replace=False).tolist())
            bonds.add((a, b))
        pos = np.zeros((n, 3))
        for i, p in enumerate(parent):
            step = rng.normal(size=3)
            pos[i + 1] = pos[p] + step / np.linalg.norm(step) * rng.uniform(1.0, 1.6)
        kind = {bond: int(rng.choice(4, p=BOND_TYPE_P)) for bond in sorted(bonds)}
        if complete:
            pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
        else:
            pairs = [(a, b) for a, b in sorted(bonds)] + [(b, a) for a, b in sorted(bonds)]
        for a, b in pairs:
            one_hot = [0.0] * 4
            bond = (min(a, b), max(a, b))
            if bond in kind:
                one_hot[kind[bond]] = 1.0
            attrs.append(one_hot + [float(np.linalg.norm(pos[a] - pos[b]))])
            sources.append(a + offset)
            targets.append(b + offset)
        batch += [m] * n
        offset += n
    edge_index = torch.tensor([sources, targets], dtype=torch.long)
    return edge_index, torch.tensor(attrs), torch.tensor(batch), offset
