"""The knowledge-graph setup's model settings (``ExperimentConfig.model_options``, the CLI's
``--model-option KEY=VALUE``): their defaults, the paper's (CompGCN-ConvE as CompGCN's and GAL's
code configure it), and their checks. Kept apart from the setup so the config can check them
without importing the training code."""

from __future__ import annotations

from typing import Any

from galfast._args import check_fraction, check_int, check_real, plain_number

__all__ = ["KG_ENCODERS", "KG_MODEL_OPTIONS", "check_kg_model_options", "kg_model_options"]

KG_ENCODERS = ("compgcn",)

# name -> default. Choices and ranges are checked in check_kg_model_options.
KG_MODEL_OPTIONS: dict[str, Any] = {
    "decoder": "conve",  # or "distmult"
    "composition": "corr",  # or "sub", "mult"
    "dim": 200,  # embedding width; ConvE needs k_w * k_h
    "init_dim": 100,  # learned initial embeddings (CompGCN init_dim)
    "hidden_dim": 200,  # between two layers (CompGCN gcn_dim)
    "layers": 1,
    "num_bases": 0,  # 0: one vector per relation
    "lr": 0.001,
    "batch_size": 128,
    "label_smoothing": 0.1,
    "conv_dropout": 0.1,  # CompGCN gcn_drop
    "hidden_dropout": 0.3,  # CompGCN hid_drop, on the encoder's output
    "feature_dropout": 0.3,  # ConvE feat_drop
    "decoder_dropout": 0.3,  # ConvE hid_drop2
    "k_w": 10,
    "k_h": 20,
    "num_filters": 200,
    "kernel_size": 7,
    "max_batches": None,  # None: every query each epoch; N: the first N batches of each
    # epoch's seeded order (reduced CPU runs only; the paper trains on all)
}

_CHOICES = {
    "decoder": ("conve", "distmult"),
    "composition": ("sub", "mult", "corr"),
    "layers": (1, 2),
}
_RATES = ("label_smoothing", "conv_dropout", "hidden_dropout", "feature_dropout", "decoder_dropout")


def kg_model_options(options: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The defaults updated by ``options`` (checked; NumPy numbers taken as Python's)."""
    return {**KG_MODEL_OPTIONS, **dict(check_kg_model_options(options))}


def check_kg_model_options(options: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """``options`` with their numbers as Python's (rates and ``lr`` floats, counts ints, as
    the record stores them); raises ValueError naming the first unknown or out-of-range
    setting."""
    options = tuple((key, _checked(key, plain_number(value))) for key, value in options)
    merged = {**KG_MODEL_OPTIONS, **dict(options)}
    if merged["decoder"] == "conve":
        _check_conve(merged)
    return options


def _check_conve(merged: dict[str, Any]) -> None:
    """The settings the ConvE decoder needs together, checked now rather than when the run
    builds the model (where they surfaced as a traceback)."""
    if merged["dim"] != merged["k_w"] * merged["k_h"]:
        raise ValueError(
            f"the ConvE decoder needs dim = k_w * k_h, got dim={merged['dim']}, "
            f"k_w={merged['k_w']}, k_h={merged['k_h']}"
        )
    image = (2 * merged["k_w"], merged["k_h"])
    if merged["kernel_size"] > min(image):
        raise ValueError(
            f"model option kernel_size={merged['kernel_size']} does not fit the ConvE decoder's "
            f"{image[0]} x {image[1]} image (2 k_w x k_h): use at most {min(image)}"
        )
    # ConvE batch-normalises each batch of queries: torch refuses one query in training mode
    # ("Expected more than 1 value per channel"), at the first step of the run.
    if merged["batch_size"] == 1:
        raise ValueError(
            "model option batch_size=1: the ConvE decoder's batch norm needs at least 2 "
            "queries a batch; use a larger batch_size or decoder=distmult"
        )


def _checked(key: str, value: Any) -> Any:
    if key not in KG_MODEL_OPTIONS:
        raise ValueError(
            f"the knowledge-graph setup takes no model option {key!r}; its options are "
            f"{', '.join(KG_MODEL_OPTIONS)}"
        )
    name = f"model option {key}"
    if key in _CHOICES:
        # Of the choice's own type: layers=2.0 or layers=True would pass an == test.
        if not any(value == c and type(value) is type(c) for c in _CHOICES[key]):
            raise ValueError(f"{name} must be one of {_CHOICES[key]}, got {value!r}")
        return value
    if key in _RATES:
        return check_fraction(name, value)
    if key == "lr":
        lr = check_real(name, value)
        if lr <= 0:
            raise ValueError(f"{name} must be > 0, got {lr}")
        return lr
    if key == "max_batches" and value is None:
        return None
    return check_int(name, value, 0 if key == "num_bases" else 1)
