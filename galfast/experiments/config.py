"""What defines one experiment run, and what a finished run hands back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from torch import Tensor

from galfast.gal import SensitiveAttribute
from galfast.train import GALConfig

__all__ = ["ExperimentConfig", "Outcome"]


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
    attribute: Optional[str] = None
    pairing: str = "node"
    epochs: Optional[int] = None
    attacker_epochs: Optional[int] = None
    attacks: tuple[str, ...] = ("node", "neighbor")
    attackers: tuple[str, ...] = ("mlp", "linear")
    audit_seeds: int = 1
    seed: int = 0
    device: str = "cpu"
    adv_every: int = 1
    adv_schedule: str = "after"
    pretrain_epochs: int = 0
    cuda_graphs: bool = False
    dataset_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        self.gal_config()

    def gal_config(self, **setup: Any) -> GALConfig:
        """The trainer's config for this run; ``setup`` adds the setup's own settings (the
        MovieLens adversary batch, say)."""
        return GALConfig(
            distance=self.distance,
            lam=self.lam,
            pairing=self.pairing,
            adv_every=self.adv_every,
            adv_schedule=self.adv_schedule,
            pretrain_epochs=self.pretrain_epochs,
            seed=self.seed,
            **setup,
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["attacks"], out["attackers"] = list(self.attacks), list(self.attackers)
        out["dataset_options"] = dict(self.dataset_options)
        return out


@dataclass
class Outcome:
    """A finished run: its JSON-ready ``record`` and the frozen embeddings with the sensitive
    attribute (for t-SNE and ``--save-embeddings``)."""

    record: dict[str, Any]
    embeddings: Tensor
    attribute: SensitiveAttribute
