"""The input checks the knowledge-graph decoders share."""

from __future__ import annotations

from torch import Tensor

__all__ = ["check_query_embeddings"]


def check_query_embeddings(
    head: Tensor, relation: Tensor, entities: Tensor, dim: int, num_entities: int
) -> None:
    """Raises ValueError unless ``head`` and ``relation`` are ``[B, dim]`` float tensors and
    ``entities`` is ``[num_entities, dim]`` of the same dtype."""
    for name, value in (("head", head), ("relation", relation)):
        if not isinstance(value, Tensor) or value.dim() != 2 or value.size(1) != dim:
            raise ValueError(f"{name} must be a [B, {dim}] tensor, got {_shape(value)}")
        if not value.is_floating_point():
            raise ValueError(f"{name} must be a float tensor, got {value.dtype}")
    if head.size(0) != relation.size(0):
        raise ValueError(
            f"head and relation must have the same rows, got {head.size(0)} and {relation.size(0)}"
        )
    if not isinstance(entities, Tensor) or list(entities.shape) != [num_entities, dim]:
        raise ValueError(
            f"entities must be a [{num_entities}, {dim}] tensor, got {_shape(entities)}"
        )
    if entities.dtype != head.dtype or relation.dtype != head.dtype:
        raise ValueError(
            f"head, relation and entities must share a dtype, got {head.dtype}, "
            f"{relation.dtype} and {entities.dtype}"
        )


def _shape(value: object) -> str:
    return str(list(value.shape)) if isinstance(value, Tensor) else type(value).__name__
