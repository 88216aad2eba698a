"""A learned-embedding encoder: one trainable vector per node, BatchNorm, then GNN layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import Tensor, nn

from galfast._args import check_flag, check_int, check_real
from galfast._versions import tensor_versions
from galfast.graph import Graph
from galfast.nn import BatchNorm, is_blocks, layer_graphs

__all__ = ["EmbeddingEncoder"]


class EmbeddingEncoder(nn.Module):
    r"""The paper's MovieLens encoder: trainable node embeddings, BatchNorm, then message
    passing layers:

    .. math::
        h^{(0)} = \mathrm{BN}(E[\mathrm{ids}]), \qquad
        h^{(k)} = \sigma(\mathrm{conv}_k(h^{(k-1)}, G)) \;(k < K), \qquad
        z = \mathrm{conv}_K(h^{(K-1)}, G)

    Args:
        num_nodes: embedding rows (users + items for MovieLens: 9,940).
        dim: embedding size (20 in the paper).
        convs: layers called as ``conv(h, graph)`` (``galfast.nn`` layers; wrap PyG layers in
            :class:`galfast.nn.EdgeIndexAdapter`). Empty = embeddings only.
        batch_norm: apply BatchNorm to the embeddings (:class:`galfast.nn.BatchNorm`: PyG's
            layer on galfast's fused CPU kernel). A single input row (a sampled batch of one
            isolated node) is normalised by the running statistics, as in eval mode.
        activation: between layers (not after the last); default ReLU.
        max_norm: if given, rows looked up in a forward are first rescaled in place to L2 norm
            at most ``max_norm``, as ``nn.Embedding(max_norm=...)`` does (the original GAL
            MovieLens code uses 1); in eval mode the rows read are rescaled out of place and
            the table is left as it is. Done by one vectorised ``renorm`` over the whole table
            when message passing reads every node (no ``unique``, so no GPU sync), where
            ``nn.Embedding`` loops over the rows on the CPU. The ids are checked first
            (TypeError unless int64/int32; on the CPU, ValueError for an id outside
            ``[0, num_nodes)``), so a bad id never renormalises a row.

    Called as the trainer's encoder with node ids: ``encoder(ids, graph) -> [len(ids), D']``
    (``ids`` must cover all graph nodes, in order, whenever ``convs`` is not empty), or on a
    mini-batch's sampled blocks ``encoder(blocks[-1].src_nodes, blocks) -> [num_seeds, D']``
    (one block per conv). ``input_rows`` and ``layer`` run it layer by layer (the trainer's
    chunked ``embed``; BatchNorm then needs eval mode, its running statistics).

    Example:
        >>> enc = EmbeddingEncoder(10, 4)
        >>> enc(torch.arange(10), graph).shape  # doctest: +SKIP
        torch.Size([10, 4])
    """

    def __init__(
        self,
        num_nodes: int,
        dim: int,
        convs: Sequence[nn.Module] = (),
        batch_norm: bool = True,
        activation: Optional[nn.Module] = None,
        max_norm: Optional[float] = None,
    ) -> None:
        super().__init__()
        num_nodes, dim = check_int("num_nodes", num_nodes, 1), check_int("dim", dim, 1)
        if max_norm is not None:
            # A string failed the comparison with a TypeError; True passed as 1.
            max_norm = check_real("max_norm", max_norm)
            if max_norm <= 0:
                raise ValueError(f"max_norm must be > 0, got {max_norm}")
        # A name ("relu") would fail only at the first forward, as "'str' is not callable".
        if activation is not None and not callable(activation):
            raise ValueError(f"activation must be a module or callable, got {activation!r}")
        self.max_norm = max_norm
        self.embedding = nn.Embedding(num_nodes, dim)
        batch_norm = check_flag("batch_norm", batch_norm)  # "no" is truthy
        # A sampled batch whose seeds have no neighbours can hold one input row, which has no
        # batch variance: it is normalised by the running statistics instead of failing.
        self.norm = BatchNorm(dim, allow_single_element=True) if batch_norm else nn.Identity()
        self.convs = nn.ModuleList(convs)
        self.activation = nn.ReLU() if activation is None else activation

    def forward(self, ids: Tensor, graph: Graph) -> Tensor:
        if not isinstance(ids, Tensor):
            raise TypeError(f"ids must be a tensor of node ids, got {type(ids).__name__}")
        if ids.dim() != 1:  # [1, B] ids failed in BatchNorm on a [1, B, D] tensor
            raise ValueError(f"ids must be a 1-D tensor of node ids, got shape {list(ids.shape)}")
        sampled = is_blocks(graph)
        if self.convs and not sampled and not isinstance(graph, Graph):
            # An edge_index failed with "'Tensor' object has no attribute 'num_nodes'".
            raise TypeError(
                "graph must be a galfast.Graph or a list of sampled Blocks, got "
                f"{type(graph).__name__}; build one with Graph.from_edge_index(edge_index, "
                "num_nodes=...)"
            )
        if self.convs and not sampled and ids.numel() != graph.num_nodes:
            raise ValueError(
                f"message passing needs all {graph.num_nodes} node ids, got {ids.numel()}"
            )
        if self.convs and sampled and ids.numel() != graph[-1].num_src:
            raise ValueError(
                f"on sampled blocks the ids must be blocks[-1].src_nodes ({graph[-1].num_src} "
                f"nodes), got {ids.numel()}"
            )
        h = self._embedded(ids, every_node=bool(self.convs) and not sampled)
        for i, layer_graph in enumerate(layer_graphs(graph, len(self.convs))):
            h = self.layer(i, h, layer_graph)
        return h

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def input_rows(self, ids: Tensor) -> Tensor:
        """The first conv's input for the nodes ``ids``: their normalised embeddings."""
        return self._embedded(ids, every_node=False)

    def layer(self, i: int, h: Tensor, graph) -> Tensor:
        """Conv ``i`` (with the activation between layers) on a Graph or a Block."""
        h = self.convs[i](h, graph)
        return self.activation(h) if i < len(self.convs) - 1 else h

    def _embedded(self, ids: Tensor, every_node: bool) -> Tensor:
        # The ids are checked before the in-place renorm can write a row. The trainer's
        # per-step ids (the cached arange, recognised by identity) need no further check.
        in_order = every_node and self._every_row_in_order(ids)
        if not in_order:
            self._check_ids(ids)
        # In eval mode (embed(), an evaluation between epochs) the rows are rescaled out of
        # place: an embed() of a sampled trainer rewrote rows the next steps would not have.
        renorm_in_place = self.max_norm is not None and self.training
        if renorm_in_place:
            self._renorm_looked_up(ids, every_node)
        if in_order:
            # The table itself: no gather, and its gradient arrives without a scatter.
            h = self.embedding.weight
        elif self.convs:
            # A gather whose backward is one index_add (each row once when every node is
            # read); nn.Embedding's CUDA backward sorts the ids and syncs with the host.
            h = self.embedding.weight.index_select(0, ids)
        else:
            h = self.embedding(ids)
        if self.max_norm is not None and not renorm_in_place:
            h = h.renorm(2, 0, self.max_norm)  # ATen's rule, as _renorm_looked_up
        return self.norm(h)

    def _check_ids(self, ids: Tensor) -> None:
        """Raises TypeError unless ``ids`` is an int64/int32 tensor, and ValueError (naming
        the first bad id) when one lies outside ``[0, num_nodes)``. Values are read on the
        CPU only: on an accelerator that would make every step wait for the device (there,
        an id out of range fails in torch's own device-side check)."""
        if not isinstance(ids, Tensor):
            raise TypeError(f"ids must be a tensor of node ids, got {type(ids).__name__}")
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"ids must be an int64 or int32 tensor of node ids, got {ids.dtype}")
        if ids.device.type != "cpu" or ids.numel() == 0 or torch.compiler.is_compiling():
            return
        rows = self.embedding.num_embeddings
        if int(ids.min()) < 0 or int(ids.max()) >= rows:
            bad = ids.reshape(-1)[((ids < 0) | (ids >= rows)).reshape(-1)][0]
            raise ValueError(f"ids must lie in [0, num_nodes={rows}), got node id {int(bad)}")

    def _every_row_in_order(self, ids: Tensor) -> bool:
        """``ids`` is ``arange(num_nodes)`` (the trainer's full-graph encoding, every step).
        On the CPU only: the comparison would make a CUDA step wait for the device. Checked
        once per ids tensor: its identity and version are remembered."""
        rows = self.embedding.num_embeddings
        if ids.device.type != "cpu" or ids.dim() != 1 or ids.numel() != rows:
            return False
        if torch.compiler.is_compiling():
            return False  # reading values would break the traced graph: gather, as before
        checked = self.__dict__.get("_checked_ids")
        version = tensor_versions([ids])[0]  # None for an inference tensor: not remembered
        if (
            checked is not None
            and checked[0] is ids
            and version is not None
            and checked[1] == version
        ):
            return True
        if ids.dtype not in (torch.int64, torch.int32) or not torch.equal(
            ids, torch.arange(rows, dtype=ids.dtype)
        ):
            return False
        if version is not None:
            self.__dict__["_checked_ids"] = (ids, version)
        return True

    @torch.no_grad()
    def _renorm_looked_up(self, ids: Tensor, every_node: bool) -> None:
        # Same rule as ATen's embedding_renorm_: rows with norm > max_norm are scaled by
        # max_norm / (norm + 1e-7), which is what Tensor.renorm computes.
        weight = self.embedding.weight
        if every_node:
            weight.copy_(weight.renorm(2, 0, self.max_norm))
        else:
            rows = ids.unique()
            weight[rows] = weight[rows].renorm(2, 0, self.max_norm)
