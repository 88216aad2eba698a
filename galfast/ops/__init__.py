"""galfast's compiled operators, registered as torch.library custom ops."""

from galfast.ops.aggregate import aggregate

__all__ = ["aggregate"]
