"""Small molecule-like batches for the NNConv / Set2Set / MPNN tests: a random tree of bonds
plus a few ring closures per molecule (both directions), or the complete graph per molecule
(as PyG's qm9_nn_conv example builds it), with random edge features."""

from __future__ import annotations

import torch


def molecule_batch(
    num_molecules: int, seed: int, complete: bool = False, edge_dim: int = 5
) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]:
    """(edge_index [2, E], num_nodes, batch [num_nodes], edge_attr [E, edge_dim])."""
    gen = torch.Generator().manual_seed(seed)
    sources, targets, batch, offset = [], [], [], 0
    for m in range(num_molecules):
        n = int(torch.randint(3, 12, (), generator=gen))
        if complete:
            ids = torch.arange(n)
            src, dst = ids.repeat_interleave(n), ids.repeat(n)
            keep = src != dst
            src, dst = src[keep], dst[keep]
        else:
            child = torch.arange(1, n)
            parent = (torch.rand(n - 1, generator=gen) * child).long()
            ring = torch.randint(0, n, (2, 1), generator=gen)
            src, dst = torch.cat([child, ring[0]]), torch.cat([parent, ring[1]])
            src, dst = torch.cat([src, dst]), torch.cat([dst, src])
        sources.append(src + offset)
        targets.append(dst + offset)
        batch.append(torch.full((n,), m))
        offset += n
    edge_index = torch.stack([torch.cat(sources), torch.cat(targets)])
    edge_attr = torch.rand(edge_index.size(1), edge_dim, generator=gen)
    return edge_index, offset, torch.cat(batch), edge_attr
