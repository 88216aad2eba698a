"""galfast's compiled operators, registered as torch.library custom ops."""

from galfast.ops.aggregate import aggregate
from galfast.ops.batch_norm import batch_norm
from galfast.ops.block import Block, block_aggregate
from galfast.ops.compgcn_aggregate import compgcn_aggregate
from galfast.ops.edge_scores import bilinear_edge_scores
from galfast.ops.gat_aggregate import gat_aggregate
from galfast.ops.gather_rows import gather_rows
from galfast.ops.neighbor_loader import NeighborLoader, SampledBatch
from galfast.ops.nnconv_aggregate import nnconv_aggregate
from galfast.ops.row_dots import row_dot_grads
from galfast.ops.sample_neighbors import sample_neighbors
from galfast.ops.sample_nhop import sample_nhop

__all__ = ["aggregate", "gat_aggregate", "sample_nhop"]
__all__ += ["Block", "NeighborLoader", "SampledBatch", "block_aggregate", "sample_neighbors"]
__all__ += ["nnconv_aggregate"]
__all__ += ["compgcn_aggregate"]
__all__ += ["batch_norm"]
__all__ += ["gather_rows", "row_dot_grads"]
__all__ += ["bilinear_edge_scores"]
