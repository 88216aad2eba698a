"""GNN layers on galfast's fused kernels, numerically equal to PyG's for the same weights.

Each layer takes ``forward(x, edge_index_or_graph, ...)``: a PyG-style ``[2, E]`` edge_index
(its CSR is built once per tensor and cached) or a :class:`~galfast.Graph` (the fast path).
Graph normalisations live in :mod:`galfast.nn.norm` and are cached on the Graph. Besides the
layers: gradient reversal (GAL's encoder-side trick) and an adapter for PyG-style modules.
"""

from galfast.nn.batch_norm import BatchNorm
from galfast.nn.cheb_conv import ChebConv
from galfast.nn.compgcn_conv import CompGCNConv
from galfast.nn.compgcn_graphs import CompGCNGraphs, compgcn_graphs
from galfast.nn.edge_index_adapter import EdgeIndexAdapter
from galfast.nn.gat_conv import GATConv
from galfast.nn.gcn_conv import GCNConv
from galfast.nn.gin_conv import GINConv
from galfast.nn.grad_reverse import GradReverse, grad_reverse
from galfast.nn.layer_graphs import is_blocks, layer_graphs
from galfast.nn.nn_conv import NNConv
from galfast.nn.sage_conv import SAGEConv
from galfast.nn.set2set import Set2Set

__all__ = [
    "ChebConv",
    "EdgeIndexAdapter",
    "GATConv",
    "GCNConv",
    "GINConv",
    "GradReverse",
    "NNConv",
    "SAGEConv",
    "Set2Set",
    "grad_reverse",
]
__all__ += ["CompGCNConv", "CompGCNGraphs", "compgcn_graphs"]
__all__ += ["is_blocks", "layer_graphs"]
__all__ += ["BatchNorm"]
