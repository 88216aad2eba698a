"""ChebConv: the Chebyshev spectral graph convolution on galfast's fused aggregation."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from galfast._args import check_choice, check_flag, check_int, check_real
from galfast.graph import Graph
from galfast.nn._block_input import block_features, cheb_block_terms
from galfast.nn._graph_input import layer_graph
from galfast.nn._layer_checks import check_channels, check_features, split_features
from galfast.nn._node_features import aggregate
from galfast.nn._pyg_compat import FusedLayer, make_linear
from galfast.nn.norm import cheb_gcn_form, cheb_norm
from galfast.ops import Block, block_aggregate
from galfast.ops._functorch import transforms_active

__all__ = ["ChebConv"]


class ChebConv(FusedLayer):
    r"""The Chebyshev spectral convolution of Defferrard et al., "Convolutional Neural Networks
    on Graphs with Fast Localized Spectral Filtering" (NeurIPS 2016), equal to PyG's
    ``ChebConv`` for the same weights.

    .. math::
        X' = \sum_{k=0}^{K-1} Z^{(k)} \Theta^{(k)} + b, \quad Z^{(0)} = X, \quad
        Z^{(1)} = \tilde L X, \quad Z^{(k)} = 2 \tilde L Z^{(k-1)} - Z^{(k-2)}

    with the scaled Laplacian :math:`\tilde L = 2L/\lambda_{max} - I` of
    :func:`galfast.nn.norm.cheb_norm` (self loops of the input are dropped).

    Args:
        in_channels: input features per node; -1 infers them on the first call.
        out_channels: output features per node.
        K: Chebyshev filter size (hops = K - 1); the paper's MovieLens encoder uses K = 2.
        normalization: Laplacian ``None`` (:math:`D - A`), ``"sym"`` (default) or ``"rw"``.
        bias: learn an additive bias. Default True.
        **kwargs: PyG's ``MessagePassing`` options; ``flow="target_to_source"`` is refused
            (PyG's Laplacian then mixes both directions).

    Shapes:
        x ``[N, in_channels]``; ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t`` or a
        :class:`~galfast.Graph`; ``edge_weight`` ``[E]`` (optional, differentiable);
        ``batch`` ``[N]`` graph id of each node (optional, PyG's ``Batch.batch``);
        ``lambda_max`` a float, a 0-d tensor or, with ``batch``, one value per graph (default
        :math:`2 \max L_{ij}` over the whole input) -> ``[N, out_channels]``. On a sampled
        :class:`~galfast.ops.Block` (K <= 2: one hop per layer): x ``[num_src, in_channels]``
        (the features of ``block.src_nodes``) -> ``[num_dst, out_channels]``, with the whole
        graph's Laplacian (``block.graph``'s degrees and default lambda_max), each sampled
        neighbour's term scaled by in-degree / sampled in-degree of its destination.

    Example:
        >>> conv = ChebConv(16, 32, K=2)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        K: int,
        normalization: Optional[str] = "sym",
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        in_channels, out_channels = check_channels(in_channels, out_channels, lazy=True)
        K = check_int("K", K, 1)
        normalization = check_choice("normalization", normalization, (None, "sym", "rw"))
        bias = check_flag("bias", bias)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.normalization = normalization
        self.lins = torch.nn.ModuleList(
            [
                make_linear(in_channels, out_channels, bias=False, weight_initializer="glorot")
                for _ in range(K)
            ]
        )
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            if not isinstance(lin.weight, torch.nn.parameter.UninitializedParameter):
                torch.nn.init.xavier_uniform_(lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: Tensor,
        edge_index: Union[Tensor, Graph, Any],
        edge_weight: Optional[Tensor] = None,
        batch: Optional[Tensor] = None,
        lambda_max: Optional[Union[float, Tensor]] = None,
    ) -> Tensor:
        if lambda_max is not None and not isinstance(lambda_max, Tensor):
            # The Laplacian is divided by it: 0 gives infinities, a string fails in torch.
            lambda_max = check_real("lambda_max", lambda_max)
            if lambda_max <= 0:
                raise ValueError(f"lambda_max must be > 0, got {lambda_max}")
        if isinstance(edge_index, Block):
            return self._forward_block(x, edge_index, edge_weight, batch, lambda_max)
        x, _ = split_features(x, bipartite=False)
        if self.flow != "source_to_target":
            # PyG's get_laplacian takes degrees by edge_index[0] whatever the flow and then
            # aggregates the other way round, an operator no flipped graph reproduces.
            raise ValueError(
                "galfast's ChebConv supports flow='source_to_target' only (PyG's ChebConv "
                "with target_to_source mixes the two directions); flip edge_index instead"
            )
        self._materialize(*((lin, x) for lin in self.lins))
        check_features(x, self.in_channels, self.lins[0].weight)
        graph, weight, _, _ = layer_graph(edge_index, x.size(0), None, edge_weight, flow=self.flow)
        lambda_max = _per_node_lambda_max(lambda_max, batch, x.size(0))
        # The terms are summed into the first in place (a product's backward keeps its inputs,
        # not its output): no [N, out] sum is allocated per term.
        out = self.lins[0](x)
        if len(self.lins) > 1:
            operator, negated = self._laplacian(graph, weight, lambda_max, x.dtype)
            # With L = -A (negated), Z_k = (-1)^k Y_k where Y_k follows the same recursion
            # with A: the signs go onto the weights of the odd terms. Bitwise the same output
            # (negation is exact), without negating [N, F] features forward and backward.
            previous, current = x, operator(x)
            out = _added(out, _signed_linear(self.lins[1], current, negated))
            for k in range(2, len(self.lins)):
                previous, current = current, 2.0 * operator(current) - previous
                out = _added(out, _signed_linear(self.lins[k], current, negated and k % 2 == 1))
        if self.bias is None:
            return out
        # Under autocast out may be narrower than the bias: out + bias then widens it (as PyG).
        return out.add_(self.bias) if out.dtype == self.bias.dtype else out + self.bias

    def _forward_block(self, x, block: Block, edge_weight, batch, lambda_max) -> Tensor:
        if len(self.lins) > 2:
            raise ValueError(
                f"ChebConv on a Block supports K <= 2 (one hop per layer); K = {len(self.lins)} "
                "reads K - 1 hops per layer, which a one-hop block does not hold"
            )
        if edge_weight is not None or batch is not None or isinstance(lambda_max, Tensor):
            raise ValueError(
                "ChebConv on a Block takes no edge_weight or batch (it reads block.graph) and "
                "lambda_max only as a float"
            )
        if self.flow != "source_to_target":
            raise ValueError("galfast's ChebConv supports flow='source_to_target' only")
        x, x_dst = block_features(x, block)
        self._materialize(*((lin, x) for lin in self.lins))
        check_features(x, self.in_channels, self.lins[0].weight)
        out = self.lins[0](x_dst)
        if len(self.lins) > 1:
            off, diag = cheb_block_terms(block, self.normalization, lambda_max, x.dtype)
            laplacian = block_aggregate(block, x, off) + diag.unsqueeze(-1) * x_dst
            out = out + self.lins[1](laplacian)
        return out if self.bias is None else out + self.bias

    def _laplacian(
        self, graph: Graph, weight, lambda_max, dtype
    ) -> tuple[Callable[[Tensor], Tensor], bool]:
        """(op, negated): z -> scaled Laplacian times z (or minus it when ``negated``), by the
        cheapest exact route."""
        fast = cheb_gcn_form(graph, weight, normalization=self.normalization, lambda_max=lambda_max)
        if fast is not None:
            return (lambda z: aggregate(fast, z, norm="gcn")), True
        target, off, diag = cheb_norm(
            graph, weight, normalization=self.normalization, lambda_max=lambda_max, dtype=dtype
        )
        diag = diag.to(dtype).unsqueeze(-1)
        return (lambda z: aggregate(target, z, off) + diag * z), False

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, K={len(self.lins)}, "
            f"normalization={self.normalization}"
        )


def _added(out: Tensor, term: Tensor) -> Tensor:
    """``out + term``, in place where it can be: not under torch.func, where a term batched
    over edge weights (vmap) cannot be added into the unbatched first term."""
    return out + term if transforms_active() else out.add_(term)


def _signed_linear(lin: torch.nn.Module, h: Tensor, negated: bool) -> Tensor:
    """``lin(h)``, or ``-lin(h)`` by negating the (bias-free) weight instead of ``[N, F]``."""
    return torch.nn.functional.linear(h, -lin.weight) if negated else lin(h)


def _per_node_lambda_max(lambda_max: Any, batch: Optional[Tensor], num_nodes: int) -> Any:
    """PyG's rule: with a ``batch`` vector, a lambda_max of several values holds one per graph
    and each node takes its graph's; a single value (or no batch) applies to all nodes."""
    if batch is None or not isinstance(lambda_max, Tensor) or lambda_max.numel() == 1:
        return lambda_max
    if not isinstance(batch, Tensor) or batch.shape != (num_nodes,) or batch.is_floating_point():
        raise ValueError(
            f"batch must be an integer tensor [{num_nodes}] (one graph id per node), got "
            f"{type(batch).__name__} {list(getattr(batch, 'shape', []))}"
        )
    if lambda_max.dim() != 1 or (batch.numel() and int(batch.max()) >= lambda_max.numel()):
        raise ValueError(
            f"lambda_max must hold one value per graph of the batch, got shape "
            f"{list(lambda_max.shape)} for graph ids up to {int(batch.max())}"
        )
    return lambda_max[batch]
