"""The 1-N binary cross-entropy of ConvE / CompGCN training, with their label smoothing."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from galfast._args import check_fraction

__all__ = ["check_label_smoothing", "one_to_n_loss", "smooth_labels"]


def smooth_labels(targets: Tensor, label_smoothing: float) -> Tensor:
    r""":math:`(1 - \epsilon)\, y + 1 / N` for multi-hot ``targets`` ``[B, N]``: the smoothing of
    ConvE's and CompGCN's code (note ``1 / N``, not :math:`\epsilon / N`). A true answer's
    label exceeds 1 when ``1 / N > epsilon``: only for toy graphs, never FB15k-237 or WN18RR."""
    label_smoothing = check_label_smoothing(label_smoothing)
    return (1.0 - label_smoothing) * targets + 1.0 / targets.size(-1)


def one_to_n_loss(logits: Tensor, targets: Tensor, label_smoothing: float = 0.1) -> Tensor:
    r"""Mean binary cross-entropy between every entity's logit and its smoothed label:

    .. math::
        \mathcal{L} = -\frac{1}{BN} \sum_{b, e} \tilde y_{be} \log \sigma(s_{be})
            + (1 - \tilde y_{be}) \log (1 - \sigma(s_{be})),
        \qquad \tilde y = (1 - \epsilon)\, y + 1 / N

    equal to ``BCELoss(sigmoid(logits), smoothed)`` as ConvE / CompGCN compute it, but from
    the logits, which stays finite for large scores. With ``label_smoothing=0`` the labels are
    used as they are.

    Args:
        logits: ``[B, N]`` scores of every entity for each query (a decoder's output).
        targets: ``[B, N]`` multi-hot true answers (0/1, any dtype).
        label_smoothing: :math:`\epsilon` in ``[0, 1)``; CompGCN's default 0.1.

    Example:
        >>> one_to_n_loss(torch.zeros(1, 2), torch.tensor([[1.0, 0.0]]), 0.0)
        tensor(0.6931)
    """
    if logits.dim() != 2 or targets.shape != logits.shape:
        raise ValueError(
            f"logits and targets must both be [B, N], got {list(logits.shape)} and "
            f"{list(targets.shape)}"
        )
    label_smoothing = check_label_smoothing(label_smoothing)  # also where it is 0 and skipped
    labels = targets.to(logits.dtype)
    if label_smoothing:
        labels = smooth_labels(labels, label_smoothing)
    return F.binary_cross_entropy_with_logits(logits, labels)


def check_label_smoothing(label_smoothing: float) -> float:
    """`label_smoothing` as a float in [0, 1); ValueError otherwise."""
    # A comparison alone would pass None by (0 skips smoothing) and fail on a string with a
    # TypeError; NaN fails it, as it should.
    return check_fraction("label_smoothing", label_smoothing)
