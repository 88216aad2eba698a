"""The checks of what the adversary losses are given (:mod:`galfast.gal.adversary_losses`):
outputs and targets that fit the attribute's kind, each mistake named rather than left to
torch's low-level errors or to silent garbage (a float class id read as a probability, an
out-of-range id read past its class's row, a NaN making the loss NaN)."""

from __future__ import annotations

from torch import Tensor

from galfast._dtypes import holds_integers

__all__ = ["check_adversary_inputs"]

_CLASSES = ("binary", "categorical")


def check_adversary_inputs(outputs: Tensor, targets: Tensor, kind: str, values: bool) -> None:
    """Raises ValueError unless ``targets`` fit ``outputs`` for an attribute of ``kind``.
    Shapes, dtypes and devices are checked always (free); with ``values``, the targets' values
    too (class ids in range, 0/1 labels, finite values), which waits for the device once: the
    trainer, whose targets its SensitiveAttribute checked when built, skips that."""
    _check_layout(outputs, targets, kind)
    if values:
        _check_values(outputs, targets, kind)


def _check_layout(outputs: Tensor, targets: Tensor, kind: str) -> None:
    for name, tensor in (("outputs", outputs), ("targets", targets)):
        if not isinstance(tensor, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if not outputs.is_floating_point():
        raise ValueError(f"outputs must be a float tensor (scores or logits), got {outputs.dtype}")
    if outputs.device != targets.device:
        raise ValueError(
            f"outputs are on {outputs.device} but targets on {targets.device}; move them to one"
        )
    if outputs.dim() not in (1, 2) or targets.dim() not in (1, 2):
        raise ValueError(
            f"outputs and targets must have one row per node, got shapes {list(outputs.shape)} "
            f"and {list(targets.shape)}"
        )
    if outputs.size(0) != targets.size(0) or outputs.size(0) == 0:
        raise ValueError(
            f"outputs and targets need the same number of rows, at least one, got shapes "
            f"{list(outputs.shape)} and {list(targets.shape)}"
        )
    if kind in _CLASSES:
        _check_class_layout(outputs, targets, kind)
    elif targets.is_complex():
        raise ValueError(f"{kind} targets must be real, got {targets.dtype}")
    elif kind == "multilabel" and targets.shape != outputs.shape:
        raise ValueError(
            f"multilabel targets must have the outputs' shape {list(outputs.shape)} (one 0/1 "
            f"column per label), got {list(targets.shape)}"
        )
    elif kind == "continuous" and targets.numel() != outputs.numel():
        raise ValueError(
            f"continuous targets must hold one value per output, got shapes "
            f"{list(outputs.shape)} and {list(targets.shape)}"
        )


def _check_class_layout(outputs: Tensor, targets: Tensor, kind: str) -> None:
    if targets.dim() != 1 or not holds_integers(targets):
        raise ValueError(
            f"{kind} targets must be a 1-D integer tensor of class ids, got shape "
            f"{list(targets.shape)} dtype {targets.dtype}"
        )
    width = 1 if outputs.dim() == 1 else outputs.size(1)
    if kind == "binary" and width not in (1, 2):
        raise ValueError(
            f"a binary attribute needs 1 or 2 outputs per row, got shape {list(outputs.shape)}"
        )
    if kind == "categorical" and (outputs.dim() != 2 or width < 2):
        raise ValueError(
            f"a categorical attribute needs [rows, classes] outputs with 2 classes or more, got "
            f"shape {list(outputs.shape)}"
        )


def _check_values(outputs: Tensor, targets: Tensor, kind: str) -> None:
    """One device wait when the targets are valid; a second, for the message, when not."""
    if kind == "continuous":
        valid = targets.isfinite()
    elif kind == "categorical":
        valid = (targets >= 0) & (targets < outputs.size(1))
    else:
        valid = (targets == 0) | (targets == 1)
    if bool(valid.all()):
        return
    bad = targets[~valid][0].item()
    if kind == "continuous":
        raise ValueError(f"continuous targets must be finite, got {bad}")
    if kind == "categorical":
        raise ValueError(
            f"categorical targets must be class ids in [0, {outputs.size(1)}) (one per output "
            f"column), got {bad}"
        )
    raise ValueError(f"{kind} targets must be 0 or 1, got {bad}")
