"""SAGEConv's aggregations beyond one fused reduce: PyG's ``Aggregation`` modules, learned
(``"lstm"``, ``"softmax"``, ``MLPAggregation``, ...) or not, and lists of them
(``MultiAggregation``).

The module itself is PyG's (resolved by PyG's own resolver, so its parameters, state-dict keys
and arithmetic are PyG's). What galfast changes is where the plain reductions run: inside the
module, every sum, mean, max and min (and the means that variance and standard deviation are
made of) is computed by galfast's fused CSR kernel on the node features, so no ``[E, F]``
message tensor is built for them; only the other aggregations get the per-edge messages
``x_j``, in PyG's order (see :mod:`galfast.nn._message_edges`). The results are then combined
by the module's own ``combine`` (concatenation, projection, attention, ...).

As in PyG, these aggregations see unweighted messages: a sparse ``adj_t``'s values weight
only the single string reductions PyG fuses (``"mean"``, ``"sum"``, ``"max"``, ``"min"``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._message_edges import MessageEdges
from galfast.nn._node_features import aggregate

__all__ = ["aggregated_channels", "pyg_aggregation", "run_aggregation"]


def _pyg_aggr() -> Any:
    try:
        import torch_geometric.nn.aggr as pyg_aggr
    except ImportError as err:
        raise ImportError(
            "this SAGEConv aggregation is PyG's Aggregation module (learned or made of several "
            "reductions): install torch_geometric to use it; galfast's own fused aggregations "
            "are 'mean', 'sum'/'add', 'max' and 'min'"
        ) from err
    return pyg_aggr


def pyg_aggregation(aggr: Any, aggr_kwargs: Optional[dict], in_channels: int) -> torch.nn.Module:
    """PyG's aggregation module for ``aggr`` (a name, a list, or an ``Aggregation``), resolved
    as PyG's ``SAGEConv`` resolves it (an LSTM reads and writes ``in_channels``)."""
    pyg_aggr = _pyg_aggr()
    from torch_geometric.nn.resolver import aggregation_resolver

    parts = aggr if isinstance(aggr, (list, tuple)) else [aggr]
    # PyG's resolver hands back what it does not know (a number, None) as if it were a module.
    if not parts or not all(isinstance(a, (str, pyg_aggr.Aggregation)) for a in parts):
        shown = type(aggr).__name__ if isinstance(aggr, torch.nn.Module) else repr(aggr)
        raise ValueError(
            f"aggr must be a name, a list of names or a torch_geometric Aggregation, got {shown}"
        )
    kwargs = dict(aggr_kwargs or {})
    if aggr == "lstm":
        kwargs.setdefault("in_channels", in_channels)
        kwargs.setdefault("out_channels", in_channels)
    try:
        return aggregation_resolver(aggr, **kwargs)
    except ValueError as err:  # PyG's "Could not resolve 'x' ..." does not say which argument
        raise ValueError(f"aggr: {err}") from None


def aggregated_channels(module: torch.nn.Module, in_channels: int) -> int:
    """Width of the module's output for ``in_channels`` inputs (what ``lin_l`` reads)."""
    if isinstance(module, _pyg_aggr().MultiAggregation):
        return module.get_out_channels(in_channels)
    return in_channels


def _plain_kind(part: torch.nn.Module) -> Optional[str]:
    """The reduction a PyG aggregation computes when galfast's kernel can compute it."""
    pyg_aggr = _pyg_aggr()
    kinds = {
        pyg_aggr.SumAggregation: "sum",
        pyg_aggr.MeanAggregation: "mean",
        pyg_aggr.MaxAggregation: "max",
        pyg_aggr.MinAggregation: "min",
        pyg_aggr.VarAggregation: "var",
        pyg_aggr.StdAggregation: "std",
    }
    return kinds.get(type(part))  # exact types: a subclass may compute something else


class _Reductions:
    """The fused reductions of one call, each computed at most once."""

    def __init__(self, graph: Graph, x: Tensor) -> None:
        self.graph, self.x, self._done = graph, x, {}

    def get(self, key: str, build: Callable[[], Tensor]) -> Tensor:
        if key not in self._done:
            self._done[key] = build()
        return self._done[key]

    def reduce(self, reduce: str) -> Tensor:
        if reduce == "min":  # an empty neighbourhood gives 0 either way
            return self.get("min", lambda: -aggregate(self.graph, -self.x, reduce="max"))
        return self.get(reduce, lambda: aggregate(self.graph, self.x, reduce=reduce))

    def variance(self, semi_grad: bool) -> Tensor:
        """mean(x^2) - mean(x)^2, PyG's formula (the squares' mean without gradient for
        ``semi_grad``)."""

        def build() -> Tensor:
            square = self.x.detach() * self.x.detach() if semi_grad else self.x * self.x
            mean_square = aggregate(self.graph, square, reduce="mean")
            mean = self.reduce("mean")
            return mean_square - mean * mean

        return self.get(f"var{semi_grad}", build)

    def std(self, semi_grad: bool) -> Tensor:
        # PyG's StdAggregation: a floor under the variance, and 0 where it was hit.
        out = self.variance(semi_grad).clamp(min=1e-5).sqrt()
        return out.masked_fill(out <= math.sqrt(1e-5), 0.0)


def _semi_grad(part: torch.nn.Module, multi: Optional[torch.nn.Module]) -> bool:
    # Inside a MultiAggregation PyG's FusedAggregation decides, from the Var members only.
    if multi is not None:
        fused = getattr(multi, "fused_aggr", None)
        return bool(fused is not None and fused.semi_grad)
    var = part.var_aggr if hasattr(part, "var_aggr") else part
    return bool(var.semi_grad)


def run_aggregation(
    module: torch.nn.Module,
    graph: Graph,
    x: Tensor,
    edges: Callable[[], MessageEdges],
    num_dst: int,
) -> Tensor:
    """``module`` applied to the messages ``x[source] -> target`` of ``graph`` (``edges()``
    gives them in PyG's order, built only when an aggregation needs them)."""
    multi = module if isinstance(module, _pyg_aggr().MultiAggregation) else None
    parts = list(multi.aggrs) if multi is not None else [module]
    fused = _Reductions(graph, x)
    messages: Optional[tuple[Tensor, MessageEdges]] = None
    outs = []
    for part in parts:
        kind = _plain_kind(part)
        if kind in ("sum", "mean", "max", "min"):
            outs.append(fused.reduce(kind))
        elif kind == "var":
            outs.append(fused.variance(_semi_grad(part, multi)))
        elif kind == "std":
            outs.append(fused.std(_semi_grad(part, multi)))
        else:
            if messages is None:
                found = edges()
                messages = x.index_select(0, found.source), found
            x_j, found = messages
            if isinstance(part, _pyg_aggr().LSTMAggregation) and not found.target.numel():
                # PyG's LSTM fails inside torch.nn.LSTM ("sequence length ... larger than 0").
                raise ValueError(
                    "an LSTM aggregation needs at least one edge: it reads each neighbourhood "
                    "as a sequence, and a graph without edges gives none"
                )
            outs.append(part(x_j, found.target, ptr=found.ptr, dim_size=num_dst, dim=-2))
    return multi.combine(outs) if multi is not None else outs[0]
