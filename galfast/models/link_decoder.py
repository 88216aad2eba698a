"""The dot-product link decoder of the paper's Planetoid link-prediction runs."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["DotProductLinkDecoder"]


class DotProductLinkDecoder(nn.Module):
    r"""Edge logit :math:`z_u^\top z_v` (no parameters); ``sigmoid`` of it is the edge
    probability.

    Shapes: ``z_src``, ``z_dst`` ``[B, D]`` -> ``[B]``.

    Example:
        >>> DotProductLinkDecoder()(torch.ones(2, 3), torch.ones(2, 3))
        tensor([3., 3.])
    """

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        # One side may broadcast over the other (one node against many: [N, D] with [D] or
        # [1, D]), but not both: a [B, 1, D] with a [B, D] scored every pair ([B, B]) silently.
        try:
            shape = torch.broadcast_shapes(z_src.shape, z_dst.shape)
        except RuntimeError:
            shape = None
        if shape is None or math.prod(shape) > max(z_src.numel(), z_dst.numel()):
            raise ValueError(
                f"z_src and z_dst must have the same shape [B, D] (or one broadcast over the "
                f"other), got {list(z_src.shape)} and {list(z_dst.shape)}"
            )
        return (z_src * z_dst).sum(dim=-1)
