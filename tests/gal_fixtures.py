"""Small planted-attribute graphs and an encoder for the trainer and audit tests.

A sensitive attribute A is planted in the node features and in homophilous edges; the task
label Y is independent of A (so hiding A need not cost task accuracy). Generated with a local
torch.Generator: identical for a given seed on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from galfast import Graph
from galfast.ops import aggregate


@dataclass
class Planted:
    graph: Graph
    x: Tensor  # [N, F]
    a: Tensor  # [N] sensitive class (users only for the bipartite graph)
    y: Tensor  # [N] task class
    train: Tensor  # node ids
    test: Tensor


def _features(
    classes: Tensor,
    num_classes: int,
    y: Tensor,
    signal: float,
    gen,
    class_signal: Optional[float] = None,
) -> Tensor:
    """[class_signal * onehot(A), signal * onehot(Y), 2 noise columns] + unit Gaussian noise
    (``class_signal`` defaults to ``signal``)."""
    class_signal = signal if class_signal is None else class_signal
    x = torch.cat(
        [
            class_signal * nn.functional.one_hot(classes, num_classes).float(),
            signal * nn.functional.one_hot(y, 2).float(),
            torch.zeros(classes.numel(), 2),
        ],
        1,
    )
    return x + torch.randn(x.shape, generator=gen)


def _split(nodes: Tensor, gen) -> tuple[Tensor, Tensor]:
    order = nodes[torch.randperm(nodes.numel(), generator=gen)]
    cut = int(0.7 * nodes.numel())
    return order[:cut].sort().values, order[cut:].sort().values


def _partners(
    groups: Tensor, candidates: Tensor, candidate_groups: Tensor, degree: int, homophily: float, gen
) -> Tensor:
    """For each node, `degree` partners among `candidates`: of its own group with probability
    `homophily`, else uniform."""
    src = torch.arange(groups.numel()).repeat_interleave(degree)
    pick = torch.randint(candidates.numel(), (src.numel(),), generator=gen)
    same = torch.rand(src.numel(), generator=gen) < homophily
    for g in groups.unique():
        members = (candidate_groups == g).nonzero().view(-1)
        rows = same & (groups[src] == g)
        pick[rows] = members[torch.randint(members.numel(), (int(rows.sum()),), generator=gen)]
    return torch.stack([src, candidates[pick]])


def planted_graph(
    num_nodes: int = 300,
    num_classes: int = 2,
    degree: int = 4,
    homophily: float = 0.9,
    signal: float = 3.0,
    seed: int = 0,
) -> Planted:
    """A homophilous graph whose features encode A; 70/30 train/test split of all nodes."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(num_classes, (num_nodes,), generator=gen)
    y = torch.randint(2, (num_nodes,), generator=gen)
    x = _features(a, num_classes, y, signal, gen)
    nodes = torch.arange(num_nodes)
    edges = _partners(a, nodes, a, degree, homophily, gen)
    graph = Graph.from_edge_index(edges, num_nodes, symmetrize=True)
    return Planted(graph, x, a, y, *_split(nodes, gen))


def planted_bipartite(
    num_users: int = 150,
    num_items: int = 150,
    degree: int = 4,
    homophily: float = 0.9,
    signal: float = 3.0,
    user_signal: float = 3.0,
    seed: int = 0,
) -> Planted:
    """MovieLens in miniature: users (ids 0..U-1) carry A; items (U..U+I-1) have a type T and
    users link to items of type A mostly. The task is Y for users and T for items (so item
    embeddings must keep T, which is A of their users). A is known on users only; the split
    covers users."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(2, (num_users,), generator=gen)
    item_type = torch.randint(2, (num_items,), generator=gen)
    y_user = torch.randint(2, (num_users,), generator=gen)
    x = torch.cat(
        [
            _features(a, 2, y_user, signal, gen, user_signal),
            _features(item_type, 2, item_type, signal, gen),
        ]
    )
    items = torch.arange(num_users, num_users + num_items)
    edges = _partners(a, items, item_type, degree, homophily, gen)
    graph = Graph.from_edge_index(edges, num_users + num_items, symmetrize=True)
    return Planted(
        graph, x, a, torch.cat([y_user, item_type]), *_split(torch.arange(num_users), gen)
    )


class MeanEncoder(nn.Module):
    """z = W_out tanh(W_self x_v + W_nbr mean_{u -> v} x_u): one message-passing layer.

    tanh rather than ReLU: under a strong adversary, Adam's steps can kill every ReLU unit and
    collapse the embedding to a constant (which hides A by destroying the task too)."""

    def __init__(self, in_dim: int, hidden: int = 16, out_dim: int = 8) -> None:
        super().__init__()
        self.self_lin = nn.Linear(in_dim, hidden)
        self.nbr_lin = nn.Linear(in_dim, hidden, bias=False)
        self.out = nn.Linear(hidden, out_dim)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        h = self.self_lin(x) + self.nbr_lin(aggregate(graph, x, reduce="mean"))
        return self.out(torch.tanh(h))
