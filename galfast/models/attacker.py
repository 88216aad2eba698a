"""The attacker MLP of the paper's MovieLens runs (20-32-32-2 with LeakyReLU)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

__all__ = ["AttackerMLP"]


class AttackerMLP(nn.Module):
    """An MLP ``in_dim -> hidden... -> out_dim`` with LeakyReLU between layers, used as the
    simulated adversary in training and as the ``"mlp"`` family in :func:`galfast.audit`.

    Args:
        in_dim: embedding size.
        out_dim: outputs (2 for the paper's binary gender attacker; 1 logit also works).
        hidden: hidden layer sizes (default ``(32, 32)``).
        negative_slope: LeakyReLU slope (0.2 as in the reference attackers).
        dropout: dropout after every hidden activation (0 = none).

    Shapes: ``[N, in_dim]`` -> ``[N, out_dim]``.

    Example:
        >>> AttackerMLP(20, 2)
        AttackerMLP(
          (net): Sequential(
            (0): Linear(in_features=20, out_features=32, bias=True)
            (1): LeakyReLU(negative_slope=0.2)
            (2): Linear(in_features=32, out_features=32, bias=True)
            (3): LeakyReLU(negative_slope=0.2)
            (4): Linear(in_features=32, out_features=2, bias=True)
          )
        )
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 2,
        hidden: Sequence[int] = (32, 32),
        negative_slope: float = 0.2,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if in_dim < 1 or out_dim < 1 or any(h < 1 for h in hidden):
            raise ValueError("layer sizes must be >= 1")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        layers: list[nn.Module] = []
        width = in_dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.LeakyReLU(negative_slope)]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z)
