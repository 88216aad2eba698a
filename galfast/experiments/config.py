"""What defines one experiment run, and what a finished run hands back."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast._args import plain_number
from galfast.audit import STRENGTHS
from galfast.audit.attackers import FAMILIES
from galfast.datasets import DATASET_NAMES, KG_NAMES
from galfast.datasets.registry import MOLECULE_NAMES, loader_defaults, loader_options
from galfast.datasets.synthetic_graph import synthetic_graph
from galfast.experiments.encoders import ENCODERS, MOLECULE_ENCODERS
from galfast.experiments.kg_options import KG_ENCODERS, check_kg_model_options
from galfast.gal import SensitiveAttribute, check_walkable, parse_pairing
from galfast.train import GALConfig
from galfast.train.config import check_number

__all__ = ["ConfigError", "ExperimentConfig", "Outcome"]


class ConfigError(ValueError):
    """A setting of an :class:`ExperimentConfig` is invalid. ``field`` names it (``None`` when
    no single setting is to blame), so a front end can point at its own option for it."""

    def __init__(self, field: Optional[str], message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines one run (one training seed). ``None`` fields take the
    setup's defaults (:func:`~galfast.experiments.setup_defaults`). The trainer's settings
    among them are checked on construction, as :class:`~galfast.train.GALConfig` checks them."""

    dataset: str = "cora"
    root: Optional[str] = None
    encoder: str = "gcn"
    distance: str = "tv"
    lam: float = 0.0
    # One attribute name, or several joined by commas ("gender,age,occupation") to hide them
    # jointly: one adversary each during training, one audit each after.
    attribute: Optional[str] = None
    pairing: str = "node"
    epochs: Optional[int] = None
    attacker_epochs: Optional[int] = None
    attacks: tuple[str, ...] = ("node", "neighbor")
    attackers: tuple[str, ...] = ("mlp", "linear")
    audit_seeds: int = 1
    # "fast": the paper's fixed MLP and linear attackers; "strong": also graph attackers, a tuned
    # search and non-neural families (galfast.audit), the headline the strongest of all.
    audit_strength: str = "fast"
    seed: int = 0
    device: str = "cpu"
    adv_every: int = 1
    adv_schedule: str = "after"
    # None: the setup's default (0; 35 for knowledge graphs).
    pretrain_epochs: Optional[int] = None
    # None: the setup's default on a CUDA device (see cuda_graphs_for), off on the CPU.
    cuda_graphs: Optional[bool] = None
    dataset_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    # "separate" (the paper) or "joint": how the encoder takes the adversary's gradient.
    adv_update: str = "separate"
    # Settings of the setup's model (knowledge graphs: galfast.experiments.kg_options).
    model_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in _NORMALISED:
            try:
                object.__setattr__(self, name, _normalised(name, getattr(self, name)))
            except ValueError as error:
                raise ConfigError(name, str(error)) from None
        for name, check in (
            ("attribute", self._check_attribute),
            ("dataset", self._check_dataset),
            ("encoder", self._check_encoder),
            ("distance", self._check_molecule_distance),
            ("attacks", self._check_attacks),
            ("attackers", self._check_attackers),
            ("audit_strength", self._check_audit_strength),
            ("device", self._check_device),
            ("cuda_graphs", self._check_cuda_graphs),
            ("dataset_options", self._check_dataset_options),
            ("model_options", self._check_model_options),
        ):
            try:
                check()
            except ValueError as error:
                raise ConfigError(name, str(error)) from None
        for name in ("epochs", "attacker_epochs"):
            if getattr(self, name) is not None:
                self._number(name, minimum=1)
        self._number("audit_seeds", minimum=1)
        try:
            gal = self.gal_config()
        except ValueError as error:
            raise ConfigError(_first_field_named(str(error)), str(error)) from None
        # Stored as the trainer takes it: lam=1 and lam=1.0 are one run, recorded as 1.0.
        object.__setattr__(self, "lam", gal.lam)

    def _number(self, name: str, minimum: int) -> None:
        try:
            check_number(name, getattr(self, name), minimum=minimum, integer=True)
        except ValueError as error:
            raise ConfigError(name, str(error)) from None

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes to hide, in order; empty for the setup's default one."""
        return () if self.attribute is None else tuple(self.attribute.split(","))

    def _check_attribute(self) -> None:
        if self.attribute is None:
            return
        if not isinstance(self.attribute, str):
            raise ValueError(
                f"attribute must be a name or names joined by commas, got {self.attribute!r}"
            )
        names = self.attribute_names
        if any(not name or name != name.strip() for name in names):
            raise ValueError(
                f"attribute {self.attribute!r} has an empty or space-padded name; "
                "write names joined by commas, e.g. gender,age"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"attribute {self.attribute!r} names an attribute twice")

    def _check_dataset(self) -> None:
        if self.dataset not in DATASET_NAMES:
            raise ValueError(f"unknown dataset {self.dataset!r}; expected one of {DATASET_NAMES}")
        if self.root is not None and self.dataset.startswith("synthetic-"):
            raise ValueError(f"{self.dataset} is generated: it reads no root folder")

    def _check_encoder(self) -> None:
        known = ENCODERS + KG_ENCODERS + MOLECULE_ENCODERS
        if self.encoder not in known:
            raise ValueError(f"unknown encoder {self.encoder!r}; expected one of {known}")
        if self.dataset in KG_NAMES and self.encoder not in KG_ENCODERS:
            raise ValueError(
                f"{self.dataset} is a knowledge graph: its encoder is one of {KG_ENCODERS}, "
                f"not {self.encoder!r}"
            )
        if self.dataset not in KG_NAMES and self.encoder in KG_ENCODERS:
            raise ValueError(
                f"{self.encoder} encodes knowledge graphs ({', '.join(KG_NAMES)}); "
                f"{self.dataset} takes one of {ENCODERS}"
            )
        if self.encoder in MOLECULE_ENCODERS and self.dataset not in MOLECULE_NAMES:
            raise ValueError(
                f"{self.encoder} encodes molecules (edge features, one embedding per molecule): "
                f"use it with a molecule dataset ({', '.join(MOLECULE_NAMES)}), not {self.dataset}"
            )
        if self.dataset in MOLECULE_NAMES and self.encoder not in MOLECULE_ENCODERS:
            raise ValueError(
                f"{self.dataset} trains the paper's MPNN on molecules: use encoder "
                f"{' or '.join(MOLECULE_ENCODERS)}, not {self.encoder}"
            )

    def _check_model_options(self) -> None:
        keys = [key for key, _ in self.model_options]
        if len(set(keys)) != len(keys):
            raise ValueError(f"model_options names an option twice: {keys}")
        if self.dataset in KG_NAMES:  # stored as checked: a 0-d tensor rate as a float
            object.__setattr__(self, "model_options", check_kg_model_options(self.model_options))
        elif self.model_options:
            raise ValueError(
                f"model options apply to the knowledge-graph setup ({', '.join(KG_NAMES)}); "
                f"{self.dataset} takes none"
            )

    def _check_molecule_distance(self) -> None:
        # Molecule datasets hide a continuous attribute (QM9's alpha): the Wasserstein dual
        # compares class-conditional means, which a continuous attribute does not have.
        if self.dataset in MOLECULE_NAMES and self.distance == "wasserstein":
            raise ValueError(
                f"{self.dataset} hides a continuous attribute: distance wasserstein needs "
                "classes; use tv"
            )

    def _check_attacks(self) -> None:
        # The audit walks in sample_nhop's default ("paper") mode.
        pairings = [parse_pairing(a) for a in self.attacks]
        for pairing in pairings:
            check_walkable(pairing, "paper")
        if not pairings or len({p.name for p in pairings}) != len(pairings):
            raise ValueError(f"attacks must be distinct pairings, at least one, got {self.attacks}")

    def _check_audit_strength(self) -> None:
        if self.audit_strength not in STRENGTHS:
            raise ValueError(
                f"audit_strength must be one of {STRENGTHS}, got {self.audit_strength!r}"
            )

    def _check_attackers(self) -> None:
        names = list(self.attackers)
        if not names or any(n not in FAMILIES for n in names) or len(set(names)) != len(names):
            raise ValueError(
                f"attackers must be distinct names among {FAMILIES}, got {self.attackers}"
            )

    def _check_device(self) -> None:
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", self.device):
            raise ValueError(
                f"device must be 'cpu', 'cuda' or 'cuda:N' (or a torch.device of those), "
                f"got {self.device!r}"
            )

    def _check_cuda_graphs(self) -> None:
        if self.cuda_graphs is not None and not isinstance(self.cuda_graphs, bool):
            raise ValueError(f"cuda_graphs must be True, False or None, got {self.cuda_graphs!r}")
        if self.cuda_graphs and self.device == "cpu":
            raise ValueError(f"cuda_graphs needs a CUDA device, not {self.device!r}")

    def cuda_graphs_for(self, by_default: bool) -> bool:
        """Whether a setup's trainer replays its steps from CUDA graphs: as ``cuda_graphs``
        says, or (None) on a CUDA device where the setup replays them ``by_default``: one
        whose steps keep their shapes, so that each kind of step is captured once."""
        if self.cuda_graphs is not None:
            return self.cuda_graphs
        return by_default and self.device != "cpu"

    def _check_dataset_options(self) -> None:
        keys = [key for key, _ in self.dataset_options]
        if len(set(keys)) != len(keys):
            raise ValueError(f"dataset_options names an option twice: {keys}")
        unknown = sorted(set(keys) - set(loader_options(self.dataset)))
        if unknown:
            raise ValueError(
                f"{self.dataset} takes no option {', '.join(map(repr, unknown))}; its options "
                f"are {', '.join(loader_options(self.dataset))}"
            )
        for key, value in self.dataset_options:
            try:
                hash(value)  # the loaded dataset is cached by its options
            except TypeError:
                raise ValueError(
                    f"dataset option {key} must be a plain value, got {value!r}"
                ) from None
        _check_option_types(self.dataset, self.dataset_options)
        if self.dataset == "synthetic-graph":
            _check_mean_degree(dict(self.dataset_options))

    def gal_config(self, **setup: Any) -> GALConfig:
        """The trainer's config for this run; ``setup`` adds the setup's own settings (the
        MovieLens adversary batch, say)."""
        return GALConfig(
            distance=self.distance,
            lam=self.lam,
            pairing=self.pairing,
            adv_every=self.adv_every,
            adv_schedule=self.adv_schedule,
            pretrain_epochs=self.pretrain_epochs or 0,
            adv_update=self.adv_update,
            seed=self.seed,
            **setup,
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["attacks"], out["attackers"] = list(self.attacks), list(self.attackers)
        out["dataset_options"] = {k: _json_ready(v) for k, v in self.dataset_options}
        out["model_options"] = {k: _json_ready(v) for k, v in self.model_options}
        return out


def _json_ready(value: Any) -> Any:
    """An option's value as the record (JSON) holds it: a callable (the loaders' ``opener``)
    by its qualified name, which json.dumps would refuse."""
    if callable(value):
        module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        return f"{module}.{name}" if module and name else repr(value)
    return value


# Counts taken as NumPy or tensor integers too (stored as ints: the run's record is written as
# JSON, which takes no numpy.int64).
_COUNTS = ("epochs", "attacker_epochs", "audit_seeds", "seed", "adv_every", "pretrain_epochs")
_NORMALISED = (
    *_COUNTS,
    "lam",
    "root",
    "pairing",
    "attacks",
    "attackers",
    "device",
    "cuda_graphs",
    "dataset_options",
    "model_options",
)


def _normalised(name: str, value: Any) -> Any:
    """``value`` of field ``name`` as the config stores it: hashable (the loaded dataset is
    cached by the options) and JSON-ready (the record). A list or a dict where a tuple is
    stored would fail in the loader's cache with "unhashable type"; a string of attacks would
    be read letter by letter; a root of another type fails deep in os.path."""
    if name in _COUNTS or name == "lam":
        return plain_number(value)
    if name == "root":
        if value is None:
            return None
        path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
        if not isinstance(path, str):
            raise ValueError(f"root must be a folder path (a str or os.PathLike), got {value!r}")
        return path
    if name == "pairing":
        return _pairing_name(value)
    if name in ("attacks", "attackers"):
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{name} must be a tuple or list of names, got {value!r}")
        return tuple(map(_pairing_name, value)) if name == "attacks" else tuple(value)
    if name == "device":
        return _device_name(value)
    if name == "cuda_graphs":
        return _plain_flag(value)
    # dataset_options, model_options: (key, value) pairs, or a dict of them
    pairs = tuple(value.items()) if isinstance(value, Mapping) else value
    if not isinstance(pairs, (tuple, list)) or not all(
        isinstance(pair, (tuple, list)) and len(pair) == 2 for pair in pairs
    ):
        raise ValueError(
            f"{name} must be (key, value) pairs or a dict, e.g. (('download', False),); "
            f"got {value!r}"
        )
    for key, _ in pairs:
        if not isinstance(key, str):
            raise ValueError(f"{name}: option names must be strings, got {key!r}")
    # Sorted by name: the same options in another order are the same run (one cached load,
    # one record, one printed line).
    pairs = sorted(pairs, key=lambda pair: pair[0])
    return tuple((key, plain_number(_plain_flag(option))) for key, option in pairs)


def _plain_flag(value: Any) -> Any:
    """A NumPy bool as a Python bool (JSON takes no numpy.bool_); anything else as it is."""
    return bool(value) if isinstance(value, np.bool_) else value


def _pairing_name(spec: Any) -> str:
    """A pairing (``"nhop:2"``, ``("nhop", 2)``, a :class:`~galfast.gal.Pairing`) by its canonical
    name, the one the audit reports it under: a tuple with a NumPy count would not go into the
    record's JSON, a tuple comes back from it as a list (which no pairing is), and ``"nhop:02"``
    or ``"neighbour"`` would not match the audit's ``"nhop:2"`` and ``"neighbor"``."""
    return parse_pairing(spec).name


def _device_name(value: Any) -> Any:
    """A torch.device or a device name as the name the config stores (``"cpu"``, ``"cuda"`` or
    ``"cuda:N"``): torch.device("cpu") and "cpu:0" name the CPU, as everywhere else in the API.
    Anything else is left to the check, which names it."""
    if not isinstance(value, (str, torch.device)):
        return value
    try:
        device = torch.device(value)
    except RuntimeError:
        return value
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        return "cuda" if device.index is None else f"cuda:{device.index}"
    return value


def _check_option_types(dataset: str, options: tuple[tuple[str, Any], ...]) -> None:
    """Each loader option takes its default's kind of value: a flag True or False (the loaders
    test its truth, so download="false" would download), a count a whole number, a fraction or
    strength a number, a callable (``opener``) a callable. A value of another kind would fail
    deep in the loader with Python's own words, or be read wrongly."""
    defaults = loader_defaults(dataset)
    for key, value in options:
        default = defaults[key]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"dataset option {key} must be True or False, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"dataset option {key} must be a whole number, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"dataset option {key} must be a number, got {value!r}")
        elif callable(default) and not callable(value):
            raise ValueError(f"dataset option {key} must be a callable, got {value!r}")


def _check_mean_degree(options: dict[str, Any]) -> None:
    """A graph of n nodes has a mean degree of at most n - 1: synthetic_graph would draw (and
    hold in memory) n * avg_degree / 2 pairs for a larger one. Options of the wrong type are
    left to the loader to refuse."""
    defaults = inspect.signature(synthetic_graph).parameters
    nodes = options.get("num_nodes", defaults["num_nodes"].default)
    degree = options.get("avg_degree", defaults["avg_degree"].default)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (nodes, degree))
    if numbers and nodes >= 2 and degree > nodes - 1:
        raise ValueError(
            f"avg_degree={degree} exceeds num_nodes - 1 = {nodes - 1}, the largest mean degree "
            f"of a {nodes}-node graph"
        )


def _first_field_named(message: str) -> Optional[str]:
    """The ExperimentConfig field a trainer-settings message names first (``None`` if none):
    GALConfig's messages lead with the setting they reject."""
    found = [
        (match.start(), f.name)
        for f in fields(ExperimentConfig)
        if (match := re.search(rf"\b{f.name}\b", message))
    ]
    return min(found)[1] if found else None


@dataclass
class Outcome:
    """A finished run: its JSON-ready ``record`` and the frozen embeddings with the sensitive
    attribute (for t-SNE and ``--save-embeddings``), and the names of the attribute's classes."""

    record: dict[str, Any]
    embeddings: Tensor
    attribute: SensitiveAttribute
    class_names: tuple[str, ...] = ()
