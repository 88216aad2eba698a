"""DistMult (Yang et al., ICLR 2015) as a 1-N knowledge-graph decoder."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from galfast._args import check_flag, check_int
from galfast.models.kg_decoder_inputs import check_query_embeddings

__all__ = ["DistMultDecoder"]


class DistMultDecoder(nn.Module):
    r"""Scores every entity as the answer of a query :math:`(h, r)`:

    .. math::
        s(h, r, e) = \langle z_h, w_r, z_e \rangle + b_e = \sum_k z_{h,k} w_{r,k} z_{e,k} + b_e

    with a learned bias :math:`b_e` per entity (as CompGCN's DistMult). Logits, not
    probabilities: train with :func:`one_to_n_loss`.

    Args:
        num_entities: ``N``, the entities scored (and biases).
        dim: embedding width ``D``.
        bias: learn the per-entity bias (zeros at start).

    Shapes: ``head`` ``[B, D]``, ``relation`` ``[B, D]`` (the inverse relation's embedding for a
    head query), ``entities`` ``[N, D]`` -> ``[B, N]``.

    Example:
        >>> decoder = DistMultDecoder(num_entities=5, dim=4)
        >>> decoder(torch.ones(2, 4), torch.ones(2, 4), torch.ones(5, 4)).shape
        torch.Size([2, 5])
    """

    def __init__(self, num_entities: int, dim: int, bias: bool = True) -> None:
        super().__init__()
        num_entities, dim = check_int("num_entities", num_entities, 1), check_int("dim", dim, 1)
        self.num_entities, self.dim = num_entities, dim
        # bias="no" is truthy: it learned a bias.
        self.bias = nn.Parameter(torch.zeros(num_entities)) if check_flag("bias", bias) else None

    def forward(self, head: Tensor, relation: Tensor, entities: Tensor) -> Tensor:
        check_query_embeddings(head, relation, entities, self.dim, self.num_entities)
        scores = (head * relation) @ entities.t()
        return scores if self.bias is None else scores + self.bias
