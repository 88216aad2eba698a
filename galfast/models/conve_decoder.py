"""ConvE (Dettmers et al., AAAI 2018) as the 1-N decoder of CompGCN's CompGCN-ConvE."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galfast._args import check_flag, check_fraction, check_int
from galfast.models.kg_decoder_inputs import check_query_embeddings

__all__ = ["ConvEDecoder"]


class ConvEDecoder(nn.Module):
    r"""Scores every entity as the answer of a query :math:`(h, r)` with a 2-D convolution over
    the stacked query embeddings:

    .. math::
        s(h, r, e) = \mathrm{ReLU}\big(\mathrm{BN}(W\, \mathrm{vec}(
            \mathrm{ReLU}(\mathrm{BN}(\omega * \mathrm{BN}([z_h; w_r]))))\big)^\top z_e + b_e

    Steps, as CompGCN's ConvE variant: interleave the entries of :math:`z_h` and :math:`w_r`
    (``h_0, r_0, h_1, r_1, ...``) into a ``[1, 2 k_w, k_h]`` image (``D = k_w k_h``),
    batch-norm, convolve with ``num_filters`` ``kernel_size`` x ``kernel_size`` filters (no
    padding), batch-norm, ReLU, feature dropout, flatten, a linear map to ``D``, hidden
    dropout, batch-norm, ReLU, then a dot product with every entity plus a bias per entity.
    (Dettmers et al. stack the two reshaped vectors one above the other; CompGCN interleaves
    them, which is what the paper's numbers used.) The dropout of the encoder's output
    (CompGCN's ``hid_drop``) belongs to the encoder.

    Args:
        num_entities: ``N``, the entities scored (and biases).
        dim: embedding width ``D``; must equal ``k_w * k_h``.
        k_w, k_h: the image is ``2 k_w`` x ``k_h`` (CompGCN: 10, 20).
        num_filters: convolution channels (CompGCN: 200).
        kernel_size: square kernel side (CompGCN: 7); at most ``min(2 k_w, k_h)``.
        feature_dropout: dropout after the convolution (CompGCN ``feat_drop``: 0.3).
        hidden_dropout: dropout after the linear map (CompGCN ``hid_drop2``: 0.3).
        conv_bias: bias in the convolution (CompGCN's ``-bias`` flag, off by default).

    Shapes: ``head`` ``[B, D]``, ``relation`` ``[B, D]`` (the inverse relation's embedding for a
    head query), ``entities`` ``[N, D]`` -> ``[B, N]`` logits (train with
    :func:`one_to_n_loss`). In training mode ``B`` must exceed 1 (batch-norm statistics).

    Example:
        >>> decoder = ConvEDecoder(num_entities=7, dim=200).eval()
        >>> decoder(torch.randn(3, 200), torch.randn(3, 200), torch.randn(7, 200)).shape
        torch.Size([3, 7])
    """

    def __init__(
        self,
        num_entities: int,
        dim: int = 200,
        *,
        k_w: int = 10,
        k_h: int = 20,
        num_filters: int = 200,
        kernel_size: int = 7,
        feature_dropout: float = 0.3,
        hidden_dropout: float = 0.3,
        conv_bias: bool = False,
    ) -> None:
        super().__init__()
        num_entities, dim = check_int("num_entities", num_entities, 1), check_int("dim", dim, 1)
        k_w, k_h = check_int("k_w", k_w, 1), check_int("k_h", k_h, 1)
        num_filters, kernel_size = (
            check_int("num_filters", num_filters, 1),
            check_int("kernel_size", kernel_size, 1),
        )
        # NaN passes nn.Dropout's check and fails at the first forward.
        feature_dropout = check_fraction("feature_dropout", feature_dropout)
        hidden_dropout = check_fraction("hidden_dropout", hidden_dropout)
        if dim != k_w * k_h:
            raise ValueError(f"dim must equal k_w * k_h, got dim={dim}, k_w={k_w}, k_h={k_h}")
        if kernel_size > min(2 * k_w, k_h):
            raise ValueError(f"kernel_size={kernel_size} does not fit the {2 * k_w} x {k_h} image")
        self.num_entities, self.dim, self.k_w, self.k_h = num_entities, dim, k_w, k_h
        self.input_norm = nn.BatchNorm2d(1)
        self.conv = nn.Conv2d(1, num_filters, kernel_size, bias=check_flag("conv_bias", conv_bias))
        self.conv_norm = nn.BatchNorm2d(num_filters)
        self.feature_dropout = nn.Dropout(feature_dropout)
        out_h, out_w = 2 * k_w - kernel_size + 1, k_h - kernel_size + 1
        self.fc = nn.Linear(num_filters * out_h * out_w, dim)
        self.hidden_dropout = nn.Dropout(hidden_dropout)
        self.hidden_norm = nn.BatchNorm1d(dim)
        self.bias = nn.Parameter(torch.zeros(num_entities))

    def query(self, head: Tensor, relation: Tensor) -> Tensor:
        """``[B, D]``: the query vector each entity embedding is scored against."""
        if self.training and head.size(0) == 1:
            raise ValueError(
                "ConvEDecoder got one query in training mode: its batch norm takes statistics "
                "over the queries of a batch and needs at least 2 (score a single query in eval "
                "mode, decoder.eval())"
            )
        image = torch.stack([head, relation], dim=2).reshape(-1, 1, 2 * self.k_w, self.k_h)
        x = self.conv(self.input_norm(image))
        x = self.feature_dropout(F.relu(self.conv_norm(x)))
        x = self.hidden_dropout(self.fc(x.flatten(1)))
        return F.relu(self.hidden_norm(x))

    def forward(self, head: Tensor, relation: Tensor, entities: Tensor) -> Tensor:
        check_query_embeddings(head, relation, entities, self.dim, self.num_entities)
        weight = self.fc.weight
        autocast = torch.is_autocast_enabled(head.device.type)  # casts the layers' inputs itself
        if head.dtype != weight.dtype and not autocast:
            raise ValueError(
                f"head, relation and entities are {head.dtype} but the decoder's parameters are "
                f"{weight.dtype}: cast the inputs or the decoder (e.g. decoder.to({head.dtype}))"
            )
        return self.query(head, relation) @ entities.t() + self.bias
