"""GALConfig: the trainer's hyperparameters, checked once, recorded in every checkpoint."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from galfast._dtypes import as_int
from galfast.gal.adversary_losses import DISTANCES
from galfast.gal.pairing import WALK_MODES, Pairing, PairingSpec, check_walkable, parse_pairing
from galfast.gal.seeding import check_seed
from galfast.train.optimizers import OptimizerSpec, check_optimizer

__all__ = ["ADV_UPDATES", "SCHEDULES", "GALConfig", "check_number"]

SCHEDULES = ("after", "instead")
# How the encoder takes the adversary's gradient (see GALTrainer, adv_update).
ADV_UPDATES = ("separate", "joint")


def check_number(
    name: str, value: Any, *, minimum: float, strict: bool = False, integer: bool = False
) -> Union[int, float]:
    """``value`` as a Python int (``integer``) or number; ValueError unless it is a finite number
    (NumPy's too; an integer of any type if ``integer``) at least ``minimum`` (above it if
    ``strict``); bools are not numbers here. A 0-d real tensor is taken as its value, as
    galfast._args takes it; one that requires grad is refused (the setting would not train)."""
    if isinstance(value, torch.Tensor):
        value = _tensor_number(name, value)
    if integer:
        number = as_int(value)
    else:
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        # Python's numbers as given (a config records lr=1 as 1), NumPy's as floats
        number = (value if type(value) in (int, float) else float(value)) if real else None
    ok = number is not None and math.isfinite(number)
    if not (ok and (number > minimum if strict else number >= minimum)):
        what = "an int" if integer else "a finite number"
        raise ValueError(
            f"{name} must be {what} {'>' if strict else '>='} {minimum}, got {value!r}"
        )
    return number


def _tensor_number(name: str, value: torch.Tensor) -> Union[int, float]:
    """A 0-d real tensor's value; ValueError naming what else it is."""
    if value.requires_grad:
        raise ValueError(
            f"{name} must be a number, got a tensor that requires grad: a setting is not "
            "trained; pass its value (float(t.detach()))"
        )
    if value.dim() != 0:
        raise ValueError(
            f"{name} must be a number or a 0-d tensor, got a tensor of shape {tuple(value.shape)}"
        )
    if value.is_meta:
        raise ValueError(f"{name} must be a number, got a meta tensor (which holds no value)")
    if value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must be a real number, got a {value.dtype} tensor {value!r}")
    return value.item()


@dataclass(frozen=True)
class GALConfig:
    """The hyperparameters of a GAL run (see :class:`~galfast.train.GALTrainer` for what each
    one does). Built from plain values, checked on construction (a bad value raises
    ValueError naming it), and normalised: ``pairing`` becomes a
    :class:`~galfast.gal.Pairing`, ``lam`` a float, ``seed`` an int. A resumed trainer must
    match the saved config to be exact, so checkpoints store :meth:`to_checkpoint` and compare
    it."""

    distance: str = "tv"
    lam: float = 0.5
    pairing: Union[Pairing, PairingSpec] = "node"
    adv_every: int = 1
    adv_schedule: str = "after"
    adv_batch_size: Optional[int] = None
    pretrain_epochs: int = 0
    lr: float = 0.01
    clip: float = 1.0
    seed: int = 0
    optimizer: OptimizerSpec = "adam"
    walk_mode: str = "paper"
    adv_update: str = "separate"

    def __post_init__(self) -> None:
        if self.distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}, got {self.distance!r}")
        # Stored as Python numbers (NumPy's are taken): checkpoints compare and record them.
        object.__setattr__(self, "lam", float(check_number("lam", self.lam, minimum=0)))
        object.__setattr__(
            self, "adv_every", check_number("adv_every", self.adv_every, minimum=1, integer=True)
        )
        if self.adv_schedule not in SCHEDULES:
            raise ValueError(f"adv_schedule must be one of {SCHEDULES}, got {self.adv_schedule!r}")
        if self.adv_schedule == "instead" and self.adv_every < 2:
            raise ValueError(
                "adv_schedule='instead' needs adv_every >= 2 (with 1 no batch "
                "would be left for the task)"
            )
        if self.adv_batch_size is not None:
            size = check_number("adv_batch_size", self.adv_batch_size, minimum=1, integer=True)
            object.__setattr__(self, "adv_batch_size", size)
        if self.adv_update not in ADV_UPDATES:
            raise ValueError(f"adv_update must be one of {ADV_UPDATES}, got {self.adv_update!r}")
        if self.adv_update == "joint" and self.adv_schedule == "instead":
            raise ValueError(
                "adv_update='joint' adds the adversary's gradient to the task step, which "
                "adv_schedule='instead' skips: use adv_schedule='after'"
            )
        pretrain = check_number("pretrain_epochs", self.pretrain_epochs, minimum=0, integer=True)
        object.__setattr__(self, "pretrain_epochs", pretrain)
        object.__setattr__(self, "lr", check_number("lr", self.lr, minimum=0, strict=True))
        object.__setattr__(self, "clip", check_number("clip", self.clip, minimum=0, strict=True))
        if not math.isfinite(self.lr * self.lam):
            raise ValueError(
                f"lr * lam, the adversary's learning rate, must be finite, got lr={self.lr!r} "
                f"and lam={self.lam!r}"
            )
        check_optimizer(self.optimizer)
        if self.walk_mode not in WALK_MODES:
            raise ValueError(f"walk_mode must be one of {WALK_MODES}, got {self.walk_mode!r}")
        # Frozen to its users; normalising here is the one write.
        object.__setattr__(self, "pairing", parse_pairing(self.pairing))
        check_walkable(self.pairing, self.walk_mode)
        object.__setattr__(self, "seed", check_seed("seed", self.seed))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The field names, which are also the keys of :meth:`to_checkpoint`."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_checkpoint(self) -> dict[str, Any]:
        """Plain values a checkpoint can hold: the pairing by name, and ``optimizer`` None when
        it is a factory (a checkpoint cannot store code)."""
        out = {k: getattr(self, k) for k in self.keys()}
        out["pairing"] = self.pairing.name
        if not isinstance(self.optimizer, str):
            out["optimizer"] = None
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> GALConfig:
        """A config from plain values (e.g. read from JSON); a key left out takes its default,
        an unknown one (a typo would otherwise be dropped) raises ValueError naming it."""
        unknown = [k for k in values if k not in cls.keys()]
        if unknown:
            raise ValueError(f"config has unknown keys {unknown}; the keys are {cls.keys()}")
        return cls(**values)

    @classmethod
    def from_checkpoint(
        cls, saved: Mapping[str, Any], optimizer: Optional[OptimizerSpec] = None
    ) -> GALConfig:
        """The config a checkpoint recorded (:meth:`to_checkpoint`). ``optimizer`` is needed
        exactly when the saved run used a factory."""
        values = {k: saved[k] for k in cls.keys() if k in saved}
        if values.get("optimizer") is None:
            if optimizer is None:
                raise ValueError("the saved run used an optimizer factory: pass optimizer=")
            values["optimizer"] = optimizer
        elif optimizer is not None:
            raise ValueError(
                f"the saved run used optimizer {values['optimizer']!r}; do not pass another"
            )
        return cls(**values)

    def differences(self, saved: Mapping[str, Any]) -> list[str]:
        """The settings where ``saved`` (a checkpoint's config) differs from this config, each
        described as ``"key: saved ..., now ..."``."""
        mine = self.to_checkpoint()
        # A setting added after a checkpoint was written took its default in that run.
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        return [
            f"{k}: saved {saved.get(k, defaults[k])!r}, now {mine[k]!r}"
            for k in self.keys()
            if saved.get(k, defaults[k]) != mine[k]
        ]

    def trainer_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~galfast.train.GALTrainer` this config stands for."""
        return {k: getattr(self, k) for k in self.keys()}
