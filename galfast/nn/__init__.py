"""GNN layers on galfast's fused kernels, numerically equal to PyG's for the same weights.

Each layer takes ``forward(x, edge_index_or_graph, ...)``: a PyG-style ``[2, E]`` edge_index
(its CSR is built once per tensor and cached) or a :class:`~galfast.Graph` (the fast path).
Graph normalisations live in :mod:`galfast.nn.norm` and are cached on the Graph.
"""

from galfast.nn.cheb_conv import ChebConv
from galfast.nn.gat_conv import GATConv
from galfast.nn.gcn_conv import GCNConv
from galfast.nn.gin_conv import GINConv
from galfast.nn.sage_conv import SAGEConv

__all__ = ["ChebConv", "GATConv", "GCNConv", "GINConv", "SAGEConv"]
