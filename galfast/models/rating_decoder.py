"""GC-MC's bilinear rating decoder with shared bases (van den Berg et al., 2017)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import Tensor, nn

from galfast import ops
from galfast._args import check_int
from galfast._dtypes import all_finite
from galfast.models.bilinear_forms import bilinear_forms

__all__ = ["BilinearRatingDecoder"]


class BilinearRatingDecoder(nn.Module):
    r"""Scores every rating level of a (user, item) pair with a bilinear form whose matrices
    share ``num_bases`` bases:

    .. math::
        Q_r = \sum_{s=1}^{S} a_{rs} P_s, \qquad
        \mathrm{logit}_r(u, v) = z_u^\top Q_r\, z_v, \qquad
        \hat y(u, v) = \sum_r \mathrm{softmax}(\mathrm{logit}(u, v))_r \cdot \ell_r

    (``expected_rating``; :math:`\ell_r` are the rating levels). The paper's MovieLens setup:
    dim 20, 2 bases, 5 levels 1..5, trained with cross-entropy over the levels, RMSE of the
    expected rating reported.

    Args:
        dim: embedding size D.
        num_levels: rating levels R (classes).
        num_bases: shared bases S.
        levels: the rating value of each level (default ``1..R``).

    Shapes: ``z_src``, ``z_dst`` ``[B, D]`` -> logits ``[B, R]``; ``edge_scores(z, src, dst)``
    takes the node embeddings ``[N, D]`` and the ``[B]`` node ids of the edges instead.

    Example:
        >>> dec = BilinearRatingDecoder(20)
        >>> logits = dec(torch.randn(8, 20), torch.randn(8, 20))
        >>> dec.expected_rating(logits).shape
        torch.Size([8])
    """

    def __init__(
        self,
        dim: int,
        num_levels: int = 5,
        num_bases: int = 2,
        levels: Optional[Sequence[float]] = None,
    ) -> None:
        super().__init__()
        dim, num_levels = check_int("dim", dim, 1), check_int("num_levels", num_levels, 2)
        num_bases = check_int("num_bases", num_bases, 1)
        levels = range(1, num_levels + 1) if levels is None else levels
        level_values = torch.as_tensor(list(levels), dtype=torch.get_default_dtype())
        # A NaN level made every expected rating NaN; nested lists gave a [R, 1] buffer.
        if level_values.dim() != 1:
            raise ValueError(f"levels must be a flat sequence of numbers, got {list(levels)}")
        if not all_finite(level_values):
            raise ValueError(f"levels must be finite, got {level_values.tolist()}")
        if level_values.numel() != num_levels:
            raise ValueError(f"levels has {level_values.numel()} values for {num_levels} levels")
        self.bases = nn.Parameter(torch.empty(num_bases, dim, dim))
        self.coefficients = nn.Parameter(torch.empty(num_levels, num_bases))
        self.register_buffer("levels", level_values)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for basis in self.bases:
            nn.init.orthogonal_(basis)
        nn.init.xavier_uniform_(self.coefficients)

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        dtype = self.bases.dtype
        autocast = torch.is_autocast_enabled(self.bases.device.type)  # casts the inputs itself
        if not autocast and (z_src.dtype != dtype or z_dst.dtype != dtype):
            raise ValueError(
                f"z_src and z_dst must be {dtype} (the decoder's parameters), got "
                f"{z_src.dtype} and {z_dst.dtype}; cast the inputs or the decoder"
            )
        per_basis = bilinear_forms(z_src, self.bases, z_dst)
        return per_basis @ self.coefficients.t()

    def edge_scores(self, z: Tensor, src: Tensor, dst: Tensor) -> Tensor:
        """``self(z[src], z[dst])`` for ``[B]`` int32 / int64 node ids ``src``, ``dst`` into the
        ``[N, D]`` embeddings ``z``: logits ``[B, R]`` by ``ops.bilinear_edge_scores``, fused
        on the CPU (no gathered rows; the same logits and gradients to rounding, bitwise
        the same for any thread count), ``forward`` on gathered rows elsewhere. ``EdgeHead``
        calls it for batches of id tensors."""
        if z.device.type != "cpu":  # the composition forward() runs, its backward included
            return self(ops.gather_rows(z, src), ops.gather_rows(z, dst))
        return ops.bilinear_edge_scores(z, src, dst, self.bases, self.coefficients)

    def expected_rating(self, logits: Tensor) -> Tensor:
        """``[B, R]`` logits -> ``[B]`` expected rating under the softmax over levels."""
        levels = self.levels.numel()
        if not isinstance(logits, Tensor) or logits.dim() == 0 or logits.size(-1) != levels:
            got = list(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
            raise ValueError(f"logits must be [B, {levels}] (one per rating level), got {got}")
        return torch.softmax(logits, dim=-1) @ self.levels.to(logits.dtype)
