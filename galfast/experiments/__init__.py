"""The paper's experiments as library code: one module per setup (:mod:`.planetoid` link
prediction, :mod:`.movielens` rating prediction), the encoders they build by name, and the
runner that trains at one lambda and audits the result. The ``galfast`` CLI only parses
options into an :class:`ExperimentConfig` and prints what :func:`run_experiment` returns.
"""

from galfast.experiments.config import ConfigError, ExperimentConfig, Outcome
from galfast.experiments.encoders import ENCODERS, GNNStack, make_conv, make_encoder
from galfast.experiments.movielens import MOVIELENS
from galfast.experiments.planetoid import PLANETOID
from galfast.experiments.runner import (
    SETUPS,
    Prepared,
    TrainingDiverged,
    check_defence,
    load_dataset,
    prepare,
    run_experiment,
    sensitive_attribute,
    setup_defaults,
    setup_for,
)
from galfast.experiments.setup import Setup

__all__ = [
    "ENCODERS",
    "MOVIELENS",
    "PLANETOID",
    "SETUPS",
    "ConfigError",
    "ExperimentConfig",
    "GNNStack",
    "Outcome",
    "Prepared",
    "Setup",
    "TrainingDiverged",
    "check_defence",
    "load_dataset",
    "make_conv",
    "make_encoder",
    "prepare",
    "run_experiment",
    "sensitive_attribute",
    "setup_defaults",
    "setup_for",
]
