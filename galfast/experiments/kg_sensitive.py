"""A knowledge graph's entity attribute as the :class:`SensitiveAttribute` GAL trains and audits
on (datasets describe data only and do not import :mod:`galfast.gal`)."""

from __future__ import annotations

from galfast.datasets import KnowledgeGraphDataset
from galfast.gal import SensitiveAttribute

__all__ = ["kg_sensitive_attribute"]


def kg_sensitive_attribute(dataset: KnowledgeGraphDataset, name: str) -> SensitiveAttribute:
    """The attribute ``name`` of `dataset`, known on ``dataset.attribute_nodes[name]``:
    categorical with its number of classes, or multilabel with one column per label.

    Example:
        >>> types = kg_sensitive_attribute(galfast.datasets.fb15k_237(), "types")
        >>> types.kind, types.num_outputs
        ('multilabel', 50)
    """
    if name not in dataset.attributes:
        raise ValueError(
            f"{dataset.name} has no attribute {name!r}; it has {sorted(dataset.attributes)}"
        )
    kind = dataset.attribute_kinds[name]
    return SensitiveAttribute(
        name,
        kind,
        dataset.attributes[name],
        index=dataset.attribute_nodes[name],
        num_classes=len(dataset.attribute_classes[name]) if kind == "categorical" else None,
    )
