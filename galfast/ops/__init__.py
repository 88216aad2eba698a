"""galfast's compiled operators, registered as torch.library custom ops."""

from galfast.ops.aggregate import aggregate
from galfast.ops.compgcn_aggregate import compgcn_aggregate
from galfast.ops.gat_aggregate import gat_aggregate
from galfast.ops.sample_nhop import sample_nhop

__all__ = ["aggregate", "gat_aggregate", "sample_nhop"]
__all__ += ["compgcn_aggregate"]
