"""The dot-product link decoder of the paper's Planetoid link-prediction runs."""

from __future__ import annotations

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
        # Broadcasting would score every pair of a [B, 1, D] and a [B, D] ([B, B]), silently.
        if z_src.shape != z_dst.shape:
            raise ValueError(
                f"z_src and z_dst must have the same shape [B, D], got {list(z_src.shape)} "
                f"and {list(z_dst.shape)}"
            )
        return (z_src * z_dst).sum(dim=-1)
