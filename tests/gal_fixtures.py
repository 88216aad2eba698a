"""Small planted-attribute graphs and encoders for the trainer and audit tests.

A sensitive attribute A is planted in the node features and in homophilous edges; the task
label Y is independent of A (so hiding A need not cost task accuracy). Generated with a local
torch.Generator: identical for a given seed on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from galfast import Graph
from galfast.ops import aggregate


@dataclass
class Planted:
    graph: Graph
    x: Tensor  # [N, F]
    a: Tensor  # [N] sensitive class
    y: Tensor  # [N] task class
    train: Tensor  # node ids
    test: Tensor


def _homophilous_edges(groups: Tensor, degree: int, homophily: float, gen) -> Tensor:
    n = groups.numel()
    src = torch.arange(n).repeat_interleave(degree)
    same = torch.rand(src.numel(), generator=gen) < homophily
    dst = torch.randint(n, (src.numel(),), generator=gen)
    # Redraw the partner among the source's own group for homophilous edges.
    for g in groups.unique():
        members = (groups == g).nonzero().view(-1)
        pick = same & (groups[src] == g)
        dst[pick] = members[torch.randint(members.numel(), (int(pick.sum()),), generator=gen)]
    return torch.stack([src, dst])


def planted_graph(
    num_nodes: int = 240,
    num_classes: int = 2,
    degree: int = 4,
    homophily: float = 0.9,
    signal: float = 2.0,
    seed: int = 0,
) -> Planted:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(num_classes, (num_nodes,), generator=gen)
    y = torch.randint(2, (num_nodes,), generator=gen)
    x = torch.cat(
        [
            signal * nn.functional.one_hot(a, num_classes).float(),
            signal * nn.functional.one_hot(y, 2).float(),
            torch.zeros(num_nodes, 4),
        ],
        1,
    )
    x = x + torch.randn(x.shape, generator=gen)
    edges = _homophilous_edges(a, degree, homophily, gen)
    graph = Graph.from_edge_index(edges, num_nodes, symmetrize=True)
    order = torch.randperm(num_nodes, generator=gen)
    cut = int(0.7 * num_nodes)
    return Planted(graph, x, a, y, order[:cut].sort().values, order[cut:].sort().values)


class MeanEncoder(nn.Module):
    """z = W_out relu(W_self x_v + W_nbr mean_{u -> v} x_u): one message-passing layer."""

    def __init__(self, in_dim: int, hidden: int = 16, out_dim: int = 8) -> None:
        super().__init__()
        self.self_lin = nn.Linear(in_dim, hidden)
        self.nbr_lin = nn.Linear(in_dim, hidden, bias=False)
        self.out = nn.Linear(hidden, out_dim)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        h = self.self_lin(x) + self.nbr_lin(aggregate(graph, x, reduce="mean"))
        return self.out(torch.relu(h))
