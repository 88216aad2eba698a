"""Small generated graphs for tests, including the awkward ones every kernel must survive."""

from __future__ import annotations

import torch


def random_edges(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if num_nodes == 0:
        return torch.empty(2, 0, dtype=torch.long)
    return torch.randint(0, num_nodes, (2, num_edges), generator=g)


def awkward_graphs() -> dict[str, tuple[torch.Tensor, int]]:
    """name -> (edge_index, num_nodes)."""
    hub_sources = torch.arange(1, 3001)
    hub = torch.stack([hub_sources, torch.zeros_like(hub_sources)])
    hub = torch.cat([hub, torch.tensor([[0, 5, 7], [9, 6, 8]])], dim=1)
    return {
        "empty": (torch.empty(2, 0, dtype=torch.long), 0),
        "no_edges": (torch.empty(2, 0, dtype=torch.long), 5),
        "isolated": (torch.tensor([[0, 1, 1], [1, 0, 2]]), 8),
        "self_loops": (torch.tensor([[0, 1, 2, 2, 3], [0, 1, 2, 0, 3]]), 4),
        "duplicates": (torch.tensor([[0, 0, 0, 1, 1, 2], [1, 1, 1, 2, 2, 0]]), 3),
        "hub": (hub, 3001),
        "random": (random_edges(40, 200, seed=1), 40),
    }
