"""Checks and helpers shared by the dataset types (sensitive attributes, device moves)."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypeVar

import torch
from torch import Tensor

from galfast._args import check_device
from galfast.datasets.link_split import LinkSplit
from galfast.graph import Graph

T = TypeVar("T")


def check_attributes(
    attributes: dict[str, Tensor],
    attribute_classes: dict[str, tuple[str, ...]],
    attribute_nodes: Tensor,
    num_nodes: int,
) -> None:
    """Raises ValueError unless every attribute is an int64 code vector aligned with
    `attribute_nodes`, with codes in ``[0, len(attribute_classes[name]))``.

    Value ranges are checked on CPU only: reading them off an accelerator would synchronise,
    and a dataset is checked on CPU when it is built, before any ``.to(device)``."""
    if attribute_nodes.dtype != torch.int64 or attribute_nodes.dim() != 1:
        raise ValueError("attribute_nodes must be a 1-D int64 tensor of node ids")
    on_cpu = attribute_nodes.device.type == "cpu"
    if (
        on_cpu
        and attribute_nodes.numel()
        and not (0 <= int(attribute_nodes.min()) and int(attribute_nodes.max()) < num_nodes)
    ):
        raise ValueError(f"attribute_nodes must lie in [0, {num_nodes})")
    if set(attributes) != set(attribute_classes):
        raise ValueError(
            f"attributes {sorted(attributes)} and attribute_classes {sorted(attribute_classes)} "
            "must name the same attributes"
        )
    for name, codes in attributes.items():
        cardinality = len(attribute_classes[name])
        if codes.dtype != torch.int64 or codes.shape != attribute_nodes.shape:
            raise ValueError(
                f"attribute {name!r} must be int64 with shape {list(attribute_nodes.shape)}, "
                f"got {codes.dtype} {list(codes.shape)}"
            )
        if (
            on_cpu
            and codes.numel()
            and not (0 <= int(codes.min()) and int(codes.max()) < cardinality)
        ):
            raise ValueError(f"attribute {name!r} holds codes outside [0, {cardinality})")


def to_device(dataset: T, device: Any) -> T:
    """A copy of a dataset dataclass with every tensor, graph and split moved to `device`."""
    device = check_device(device)

    def move(value: Any) -> Any:
        if isinstance(value, (Tensor, Graph, LinkSplit)):
            return value.to(device)
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        return value

    return replace(dataset, **{f.name: move(getattr(dataset, f.name)) for f in fields(dataset)})


def attribute_summary(attribute_classes: dict[str, tuple[str, ...]]) -> str:
    return ", ".join(f"{name} ({len(classes)})" for name, classes in attribute_classes.items())
