"""The GAL MovieLens-1M model and training step as the original code wrote them, on PyG layers.

A faithful reimplementation of liaopeiyuan/GAL ``Movielens*/models.py`` (``GAL``,
``SimpleGCMC``, ``SharedBilinearDecoder``, ``GNN``) and the loop body of ``helper.train_gda``
(TV variant: no weight clipping), kept device-agnostic (the original hard-codes ``.cuda()``).
What the original does, and this file keeps, because it is what its running time is made of:

- ``encode`` runs the trainable embedding (``max_norm=1``, renormalised in every forward) +
  BatchNorm + the GNN layers on the *whole* graph, then picks rows. The task forward calls it
  twice (once for the users, once for the movies of the batch) and the adversary step once
  more: three full-graph encodings per training step.
- The GNN layers are ``torch_geometric.nn`` layers fed the ``[2, E]`` ``edge_index`` (both
  directions of every training rating, in rating order), with no activation between them;
  GCNConv is not ``cached``, so its normalisation (self loops, degrees, scatter) is rebuilt in
  every call, as are ChebConv's Laplacian and GATConv's self loops.
- The decoder loops over its bases and over the rating levels in Python.
- The adversary forward computes the gender, age and occupation heads; only the head of the
  attribute being hidden (gender) enters the loss and the adversary optimizer.
- Adam with ``amsgrad=True, weight_decay=1e-4`` for both optimizers; the adversary's learning
  rate is ``lr * lambda``; ``backward(retain_graph=True)`` as in the original.

Deviation (from the brief of this benchmark): the gender head outputs 2 scores trained with
cross-entropy (20-32-32-2), where the original used 1 logit with ``BCEWithLogitsLoss``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LAYERS = ("gcn", "gat", "cheb")


def pyg_layer(kind: str, dim: int) -> nn.Module:
    """The original ``GNN.get_layer``: ``GCNConv(h, h)``, ``GATConv(h, h)``, ``ChebConv(h, h,
    K=2)``."""
    from torch_geometric.nn import ChebConv, GATConv, GCNConv

    if kind == "gcn":
        return GCNConv(dim, dim)
    if kind == "gat":
        return GATConv(dim, dim)
    return ChebConv(dim, dim, K=2)


def adam(params, lr: float) -> torch.optim.Optimizer:
    """The original ``create_optimizer(params, 'adam', lr)``."""
    return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), amsgrad=True, weight_decay=1e-4)


def attacker_head(dim: int, out: int) -> nn.Sequential:
    """``dim -> 32 -> 32 -> out`` with LeakyReLU (PyTorch's default slope 0.01)."""
    return nn.Sequential(
        nn.Linear(dim, 32), nn.LeakyReLU(), nn.Linear(32, 32), nn.LeakyReLU(), nn.Linear(32, out)
    )


class GradReverse(torch.autograd.Function):
    """Identity forward, negated gradient backward."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: Tensor) -> Tensor:
        return grad_output.neg()


class SharedBilinearDecoder(nn.Module):
    """GC-MC decoder: ``num_weights`` bases ``P_s`` (rows of an Embedding), logits
    ``[z_u^T P_s z_v]_s @ weight_scalars``, NLL of the log-softmax over the levels, and the
    expected rating summed level by level."""

    def __init__(self, num_relations: int, num_weights: int, embed_dim: int) -> None:
        super().__init__()
        self.rel_embeds = nn.Embedding(num_weights, embed_dim * embed_dim)
        self.weight_scalars = nn.Parameter(torch.empty(num_weights, num_relations))
        stdv = 1.0 / math.sqrt(self.weight_scalars.size(1))
        self.weight_scalars.data.uniform_(-stdv, stdv)
        self.embed_dim, self.num_weights, self.num_relations = (
            embed_dim,
            num_weights,
            num_relations,
        )
        self.nll = nn.NLLLoss()

    def forward(self, embeds1: Tensor, embeds2: Tensor, rels: Tensor) -> tuple[Tensor, Tensor]:
        device = embeds1.device
        basis_outputs = []
        for i in range(self.num_weights):
            index = torch.tensor([i], device=device)
            rel_mat = self.rel_embeds(index).reshape(self.embed_dim, self.embed_dim)
            basis_outputs.append((torch.matmul(embeds1, rel_mat) * embeds2).sum(dim=1))
        logit = torch.matmul(torch.stack(basis_outputs, dim=1), self.weight_scalars)
        outputs = F.log_softmax(logit, dim=1)
        loss = self.nll(outputs, rels)
        preds = 0
        for j in range(self.num_relations):
            index = torch.tensor([j], device=device)
            preds = preds + (j + 1) * torch.exp(torch.index_select(outputs, 1, index))
        return loss, preds


class GALMovieLens(nn.Module):
    """The original ``GAL`` model (``SimpleGCMC`` + ``GNN`` + attribute heads).

    ``edge_index`` ``[2, E]`` is the message-passing graph over all ``num_ent`` nodes.
    """

    def __init__(
        self, kind: str, num_ent: int, edge_index: Tensor, embed_dim: int = 20, layers: int = 2
    ) -> None:
        super().__init__()
        self.decoder = SharedBilinearDecoder(5, 2, embed_dim)
        self.batchnorm = nn.BatchNorm1d(embed_dim)
        r = 6 / math.sqrt(embed_dim)
        self.encoder = nn.Embedding(num_ent, embed_dim, max_norm=1, norm_type=2)
        self.encoder.weight.data.uniform_(-r, r).renorm_(p=2, dim=1, maxnorm=1)
        self.register_buffer("all_nodes", torch.arange(num_ent))
        self.register_buffer("edges", edge_index)
        self.gnn = nn.ModuleList(pyg_layer(kind, embed_dim) for _ in range(layers))
        self.gender = attacker_head(embed_dim, 2)
        self.age = attacker_head(embed_dim, 7)
        self.occupation = attacker_head(embed_dim, 21)

    def encode(self, nodes: Tensor) -> Tensor:
        embs = self.batchnorm(self.encoder(self.all_nodes))
        for layer in self.gnn:
            embs = layer(embs, self.edges)
        return embs[nodes]

    def forward(self, pos_edges: Tensor) -> tuple[Tensor, Tensor]:
        """``pos_edges`` ``[B, 3]`` rows ``(user, level 0..4, movie)`` -> (NLL loss, ratings)."""
        heads = self.encode(pos_edges[:, 0])
        tails = self.encode(pos_edges[:, -1])
        return self.decoder(heads, tails, pos_edges[:, 1])

    def forward_attr(self, users: Tensor, gender: Tensor) -> Tensor:
        user_embeds = GradReverse.apply(self.encode(users))
        gender_pred = self.gender(user_embeds)
        self.age(user_embeds)
        self.occupation(user_embeds)
        return F.cross_entropy(gender_pred, gender)

    def optimizers(self, lr: float, lam: float) -> tuple[torch.optim.Optimizer, ...]:
        """(task, adversary) optimizers over the original's parameter groups."""
        shared = [self.encoder, self.batchnorm, self.gnn]
        task = adam([{"params": m.parameters()} for m in [*shared, self.decoder]], lr)
        adv = adam([{"params": m.parameters()} for m in [*shared, self.gender]], lr * lam)
        return task, adv


def train_step(
    model: GALMovieLens,
    optimizer_task: torch.optim.Optimizer,
    optimizer_adv: torch.optim.Optimizer,
    p_batch: Tensor,
    users: Tensor,
    gender: Tensor,
) -> tuple[Tensor, Tensor]:
    """One iteration of the original ``train_gda``: a task step on the rating batch, then an
    adversary step on the user batch. Returns the detached (task, adversary) losses."""
    model.train()
    loss_task, _ = model(p_batch)
    optimizer_task.zero_grad()
    loss_task.backward(retain_graph=True)
    optimizer_task.step()
    optimizer_task.zero_grad()

    loss_adv = model.forward_attr(users, gender)
    optimizer_adv.zero_grad()
    loss_adv.backward(retain_graph=True)
    optimizer_adv.step()
    optimizer_adv.zero_grad()
    return loss_task.detach(), loss_adv.detach()
