"""The MPNN of Gilmer et al. for molecules: NNConv + GRU message passing, Set2Set readout."""

from __future__ import annotations

from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast._args import check_flag, check_int
from galfast.graph import Graph
from galfast.nn import NNConv, Set2Set
from galfast.nn._graph_input import graph_and_order

__all__ = ["MPNN"]


class MPNN(torch.nn.Module):
    r"""The message-passing neural network of Gilmer et al., "Neural Message Passing for
    Quantum Chemistry" (ICML 2017), as PyG's ``examples/qm9_nn_conv.py`` builds it, for a
    batch of graphs (the union of the molecules and a ``batch`` vector):

    .. math::
        h^0 = \mathrm{ReLU}(W_0 x), \quad
        m^{t} = \mathrm{ReLU}(\mathrm{NNConv}(h^{t-1}, e)), \quad
        h^{t} = \mathrm{GRU}(m^{t}, h^{t-1}) \quad (t = 1..T)

    then ``Set2Set`` over each graph's nodes, :math:`z = \mathrm{ReLU}(W_1 \cdot)` (the graph
    embedding) and :math:`y = W_2 z`. One ``NNConv`` (edge network ``Linear(edge_channels,
    edge_hidden) - ReLU - Linear(edge_hidden, dim * dim)``, so it runs on the fused kernel) and
    one GRU are shared by the T steps. Parameter names are those of PyG's example ``Net``
    (``lin0``, ``conv``, ``gru``, ``set2set``, ``lin1``, ``lin2``), so its state dict loads
    here and back.

    Args:
        in_channels: node features (11 for PyG's QM9).
        edge_channels: edge features (5: bond type one-hot plus distance, as the example).
        dim: hidden size (64).
        out_channels: targets per graph (1).
        message_steps: T (3).
        processing_steps: Set2Set steps (3).
        edge_hidden: hidden size of the edge network (128).
        aggr: NNConv aggregation (``"mean"``, as the example).

    Shapes:
        x ``[N, in_channels]``, ``edge_index_or_graph`` ``[2, E]`` or a
        :class:`~galfast.Graph`, ``edge_attr`` ``[E, edge_channels]`` (edge_index column
        order, or the Graph's CSR order), ``batch`` ``[N]`` graph ids -> ``[num_graphs,
        out_channels]``; :meth:`embed` gives the ``[num_graphs, dim]`` embeddings :math:`z`
        that the task head reads, :meth:`readout` the ``[num_graphs, 2 * dim]`` Set2Set
        output before ``lin1`` (what GAL's QM9 adversary reads).

    ``torch.export`` traces it (with ``num_graphs``); ``torch.compile(fullgraph=True)`` refuses
    it: torch does not trace its ``torch.nn.GRU`` and LSTM (without fullgraph the graph breaks
    there).

    Example:
        >>> model = MPNN(in_channels=11, dim=16)
        >>> x, edge_attr = torch.randn(4, 11), torch.randn(4, 5)
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
        >>> model(x, edge_index, edge_attr, torch.tensor([0, 0, 1, 1])).shape
        torch.Size([2, 1])
    """

    def __init__(
        self,
        in_channels: int = 11,
        edge_channels: int = 5,
        dim: int = 64,
        out_channels: int = 1,
        message_steps: int = 3,
        processing_steps: int = 3,
        edge_hidden: int = 128,
        aggr: str = "mean",
    ) -> None:
        super().__init__()
        in_channels, edge_channels = (
            check_int("in_channels", in_channels, 1),
            check_int("edge_channels", edge_channels, 1),
        )
        dim, out_channels = check_int("dim", dim, 1), check_int("out_channels", out_channels, 1)
        edge_hidden = check_int("edge_hidden", edge_hidden, 1)
        message_steps = check_int("message_steps", message_steps, 0)  # True is no step count
        processing_steps = check_int("processing_steps", processing_steps, 0)
        self.message_steps = message_steps
        self.lin0 = torch.nn.Linear(in_channels, dim)
        edge_nn = torch.nn.Sequential(
            torch.nn.Linear(edge_channels, edge_hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(edge_hidden, dim * dim),
        )
        self.conv = NNConv(dim, dim, edge_nn, aggr=aggr)
        self.gru = torch.nn.GRU(dim, dim)
        self.set2set = Set2Set(dim, processing_steps=processing_steps)
        self.lin1 = torch.nn.Linear(2 * dim, dim)
        self.lin2 = torch.nn.Linear(dim, out_channels)

    def embed(
        self,
        x: Tensor,
        edge_index_or_graph: Union[Tensor, Graph],
        edge_attr: Tensor,
        batch: Tensor,
        num_graphs: Optional[int] = None,
    ) -> Tensor:
        """The graph embeddings ``[num_graphs, dim]`` (after ``lin1`` and its ReLU)."""
        return F.relu(self.lin1(self.readout(x, edge_index_or_graph, edge_attr, batch, num_graphs)))

    def readout(
        self,
        x: Tensor,
        edge_index_or_graph: Union[Tensor, Graph],
        edge_attr: Tensor,
        batch: Tensor,
        num_graphs: Optional[int] = None,
    ) -> Tensor:
        """The Set2Set readout ``[num_graphs, 2 * dim]``, before ``lin1``: the graph
        embedding GAL's QM9 adversary and attacker read."""
        self._check_features("x", x, "in_channels", self.lin0)
        # The CSR and the edge order once for all T steps.
        graph, order = graph_and_order(edge_index_or_graph, x.size(0))
        self._check_features("edge_attr", edge_attr, "edge_channels", self.conv.nn[0])
        if edge_attr.size(0) != graph.num_edges:
            raise ValueError(
                f"edge_attr must have one row per edge ({graph.num_edges}), got {edge_attr.size(0)}"
            )
        if order is not None:
            edge_attr = edge_attr[order]
        out = F.relu(self.lin0(x))
        state = out.unsqueeze(0)
        for _ in range(self.message_steps):
            messages = F.relu(self.conv(out, graph, edge_attr))
            out, state = self.gru(messages.unsqueeze(0), state)
            out = out.squeeze(0)
        return self.set2set(out, batch, dim_size=num_graphs)

    @staticmethod
    def _check_features(name: str, value: Tensor, channels: str, linear: torch.nn.Linear) -> None:
        """``value`` is ``[rows, linear.in_features]`` in the dtype of ``linear``'s weight
        (any float dtype under autocast, which casts it)."""
        width = linear.in_features
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(value).__name__}")
        if value.dim() != 2 or value.size(1) != width:
            raise ValueError(
                f"{name} must have shape [rows, {channels}={width}], got {list(value.shape)}"
            )
        dtype = linear.weight.dtype
        if not value.is_floating_point() or (
            value.dtype != dtype and not torch.is_autocast_enabled(value.device.type)
        ):
            raise TypeError(
                f"{name} must be a {dtype} tensor (the model's parameters), got {value.dtype}"
            )

    def forward(
        self,
        x: Tensor,
        edge_index_or_graph: Union[Tensor, Graph],
        edge_attr: Tensor,
        batch: Tensor,
        num_graphs: Optional[int] = None,
        return_embedding: bool = False,
    ) -> Union[Tensor, tuple[Tensor, Tensor]]:
        """``[num_graphs, out_channels]``, or ``(outputs, embeddings)`` with
        ``return_embedding``."""
        z = self.embed(x, edge_index_or_graph, edge_attr, batch, num_graphs)
        out = self.lin2(z)
        return (out, z) if check_flag("return_embedding", return_embedding) else out
