"""galfast's compiled operators, registered as torch.library custom ops."""

from galfast.ops.aggregate import aggregate
from galfast.ops.sample_nhop import sample_nhop

__all__ = ["aggregate", "sample_nhop"]
