"""The attacker MLP of the paper's MovieLens runs (20-32-32-2 with LeakyReLU)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from galfast._args import check_fraction, check_int, check_real
from galfast.nn._layer_checks import check_features

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
        in_dim, out_dim = check_int("in_dim", in_dim, 1), check_int("out_dim", out_dim, 1)
        # A string would be read as its characters, an int is not iterable.
        if not isinstance(hidden, Sequence) or isinstance(hidden, str):
            raise ValueError(f"hidden must be a sequence of layer sizes, got {hidden!r}")
        hidden = [check_int("hidden", h, 1) for h in hidden]
        dropout = check_fraction("dropout", dropout)
        # nn.LeakyReLU takes any value: NaN gave NaN outputs, a string failed at the forward.
        negative_slope = check_real("negative_slope", negative_slope)
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
        # Named here: torch's "mat1 and mat2 shapes cannot be multiplied" names neither.
        first = self.net[0]
        check_features(z, first.in_features, first.weight, "z")
        return self.net(z)
