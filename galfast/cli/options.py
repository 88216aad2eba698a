"""Argument types and the experiment options shared by ``run``, ``sweep`` and ``tsne``."""

from __future__ import annotations

import argparse
import ast
import os
import pickle
import zipfile
from typing import Any

import torch

from galfast.audit import STRENGTHS
from galfast.audit.attackers import FAMILIES
from galfast.cli.errors import UsageError, option_for
from galfast.datasets import DATASET_NAMES, DatasetNotFoundError
from galfast.datasets.registry import loader_defaults
from galfast.experiments import ConfigError, ExperimentConfig, Prepared, check_defence, prepare
from galfast.experiments.encoders import ENCODERS, MOLECULE_ENCODERS
from galfast.experiments.kg_options import KG_ENCODERS
from galfast.gal.pairing import check_walkable, parse_pairing

__all__ = [
    "HelpFormatter",
    "add_experiment_options",
    "comma_list",
    "config_kwargs",
    "experiment_config",
    "dataset_option",
    "device",
    "float_list",
    "int_at_least",
    "nonnegative_float",
    "nonnegative_int",
    "pairing",
    "pairing_list",
    "path_name",
    "positive_int",
    "prepare_checked",
    "seed_value",
]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's layout and adds an option's default to its help, once: not
    when the help already states it, not for flags or options without one, lists written as
    they are typed (comma-separated)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default in (None, "", [], ())
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or not action.option_strings
        ):
            return text
        shown = (
            ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in default)
            if (isinstance(default, (list, tuple)))
            else (f"{default:g}" if isinstance(default, float) else str(default))
        )
        return f"{text} (default: {shown.replace('%', '%%')})"


def int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    return int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    return int_at_least(text, 0)


def seed_value(text: str) -> int:
    """A seed: an integer in [0, 2**64), the range galfast's generators take."""
    value = int_at_least(text, 0)
    if value >= 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer below 2**64, got {value}")
    return value


def nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return abs(value)  # -0 is 0: one run, one run file


def _comma_items(text: str) -> list[str]:
    """The stripped items of a comma-separated list; an empty one (``"0,"``, ``"tv,,wass"``)
    is refused rather than dropped: the value meant after it is missing."""
    items = [part.strip() for part in text.split(",")]
    if any(not item for item in items):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated values, got {text!r}, which has an empty one"
        )
    return items


def float_list(text: str) -> list[float]:
    """``"0,0.5,1"`` -> ``[0.0, 0.5, 1.0]`` (each finite and >= 0, no two equal: ``-0`` is
    ``0``, ``0.1`` is ``0.10``)."""
    values = [nonnegative_float(part) for part in _comma_items(text)]
    if not values or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated numbers, got {text!r}")
    return values


def comma_list(choices: tuple[str, ...]):
    """An argument type: comma-separated distinct names among ``choices``."""

    def parse(text: str) -> list[str]:
        values = _comma_items(text)
        bad = [v for v in values if v not in choices]
        if not values or bad or len(set(values)) != len(values):
            raise argparse.ArgumentTypeError(
                f"expected distinct comma-separated names among {', '.join(choices)}, got {text!r}"
            )
        return values

    return parse


def pairing(text: str) -> str:
    """``node``, ``neighbor`` or ``nhop:N`` (N at most the walk's limit in the default walk
    mode, which training and the audit use), normalised to the trainer's pairing name."""
    try:
        parsed = parse_pairing(text)
        check_walkable(parsed, "paper")
        return parsed.name
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def pairing_list(text: str) -> list[str]:
    values = [pairing(part) for part in _comma_items(text)]
    if not values or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(
            f"expected distinct comma-separated pairings, got {text!r}"
        )
    return values


def device(text: str) -> str:
    if text not in ("cpu", "cuda") and not text.startswith("cuda:"):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if text != "cpu" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"--device {text}: no CUDA device is available")
    index = text.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        raise argparse.ArgumentTypeError(
            f"--device {text}: the CUDA devices are cuda:0..cuda:{torch.cuda.device_count() - 1}"
        )
    return text


def path_name(text: str) -> str:
    """A file or folder to write: not empty (``--out ""``, an unset shell variable, would write
    nothing or into the working folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file or folder name, got an empty one")
    return text


def dataset_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` for the dataset loader; VALUE is read as a number, True, False or None
    when it is one (``num_users=500``), else kept as text."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return key, value
    if parsed is None or isinstance(parsed, (bool, int, float, str)):
        return key, parsed
    raise argparse.ArgumentTypeError(
        f"{key}: expected a number, True, False, None or text, got {value!r}"
    )


def add_experiment_options(parser: argparse.ArgumentParser, *, seeds: bool = True) -> None:
    """The options that define a model and its training (not lambda or the distance, which
    ``run`` takes one of and ``sweep`` takes lists of). ``seeds=False`` leaves out --seeds for
    a command that trains one seed."""
    parser.add_argument(
        "--dataset",
        choices=DATASET_NAMES,
        default="cora",
        help="Planetoid names and synthetic-graph use the link-prediction setup; movielens-* "
        "and synthetic-movielens(-1m) the rating setup (synthetic-movielens-1m: a stand-in "
        "for MovieLens-1M with its statistics and gender leak)",
    )
    parser.add_argument(
        "--root",
        type=path_name,
        default=None,
        help="folder holding the raw files (e.g. ~/data/planetoid); default: the bundled Cora, "
        "else the download cache ($GALFAST_DATA or ~/.cache/galfast)",
    )
    parser.add_argument(
        "--option",
        type=dataset_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra dataset-loader argument, repeatable, the last of a KEY wins (e.g. "
        "num_users=1000 for synthetic-movielens; a flag takes true/false, yes/no, on/off or "
        "1/0: download=false)",
    )
    parser.add_argument(
        "--encoder",
        choices=(*ENCODERS, *KG_ENCODERS, *MOLECULE_ENCODERS),
        default="gcn",
        help="message-passing layer; compgcn for the knowledge graphs (fb15k-237, wn18rr), mpnn "
        "(NNConv + GRU + Set2Set) for qm9",
    )
    parser.add_argument(
        "--model-option",
        type=dataset_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="knowledge graphs: a model setting, repeatable (decoder=distmult, "
        "composition=sub, dim=200, layers=2, lr=0.001, batch_size=128, ...; the paper's by "
        "default, all in galfast.experiments.kg_options)",
    )
    parser.add_argument(
        "--attribute",
        default=None,
        help="sensitive attribute (default: class for Planetoid, sensitive for "
        "synthetic-graph, gender for MovieLens, alpha for qm9, sense for wn18rr, types for "
        "fb15k-237); several joined by commas (gender,age,occupation) are hidden jointly, one "
        "adversary each, and each is audited",
    )
    parser.add_argument(
        "--pairing",
        type=pairing,
        default="node",
        help="what the training adversary reads: node, neighbor or nhop:N",
    )
    if seeds:
        parser.add_argument(
            "--seeds", type=positive_int, default=3, help="training seeds 0..K-1 (mean and 95%% CI)"
        )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="task epochs (default: 150 Planetoid, 25 MovieLens); 155 for knowledge graphs",
    )
    parser.add_argument(
        "--attacker-epochs",
        type=positive_int,
        default=None,
        help="audit attacker epochs (default: 80 Planetoid, 30 MovieLens); 30 for knowledge graphs",
    )
    parser.add_argument(
        "--attacks",
        type=pairing_list,
        default=["node", "neighbor"],
        help="audit attacks, comma-separated pairings",
    )
    parser.add_argument(
        "--attackers",
        type=comma_list(FAMILIES),
        default=list(FAMILIES),
        help="audit attacker families; the strongest is reported",
    )
    parser.add_argument(
        "--audit-seeds", type=positive_int, default=1, help="audit repetitions per trained model"
    )
    parser.add_argument(
        "--audit",
        choices=STRENGTHS,
        default="strong",
        help="strong: also graph attackers, a tuned search and k-NN / boosted trees, the "
        "headline the strongest of all; fast: the paper's fixed MLP and linear attackers",
    )
    parser.add_argument(
        "--adv-every",
        type=positive_int,
        default=1,
        help="an adversary step every N-th step (the paper's n_a)",
    )
    parser.add_argument(
        "--adv-schedule",
        choices=("after", "instead"),
        default="after",
        help="'after': the adversary step follows that step's task step; 'instead': it "
        "replaces it (the paper's Algorithm 1 with n_a > 1)",
    )
    parser.add_argument(
        "--adv-update",
        choices=("separate", "joint"),
        default="separate",
        help="'separate' (the paper): the adversary's own optimizer moves the encoder at lr x "
        "lambda; 'joint': the encoder follows task loss - lambda x adversary loss in the "
        "task optimizer (gradient reversal scaled by lambda), which keeps TV stable at "
        "large lambda (docs/results.md)",
    )
    parser.add_argument(
        "--pretrain-epochs",
        type=nonnegative_int,
        default=None,
        help="task-only epochs before the adversary starts (counted in --epochs; default: 0, "
        "35 for knowledge graphs)",
    )
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --device cuda: replay each training step from a CUDA graph (same steps, "
        "less host time per step; default: on for MovieLens and Planetoid setups)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def config_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """ExperimentConfig fields from parsed experiment options (all but lam, distance, seed).
    A repeated --option KEY keeps its last value."""
    return {
        "dataset": args.dataset,
        "root": args.root,
        "encoder": args.encoder,
        "attribute": args.attribute,
        "pairing": args.pairing,
        "epochs": args.epochs,
        "attacker_epochs": args.attacker_epochs,
        "attacks": tuple(args.attacks),
        "attackers": tuple(args.attackers),
        "audit_seeds": args.audit_seeds,
        "audit_strength": args.audit,
        "device": args.device,
        "cuda_graphs": args.cuda_graphs,
        "adv_every": args.adv_every,
        "adv_schedule": args.adv_schedule,
        "pretrain_epochs": args.pretrain_epochs,
        "adv_update": args.adv_update,
        "dataset_options": tuple(sorted(_with_flags(args.dataset, dict(args.option)).items())),
        "model_options": tuple(sorted(dict(args.model_option).items())),
    }


# How people write a yes/no on a command line; the loaders take only True or False.
_FLAG_SPELLINGS = {
    **dict.fromkeys(("true", "yes", "on", "1"), True),
    **dict.fromkeys(("false", "no", "off", "0"), False),
}


def _with_flags(dataset: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with each value of a loader flag (an option whose default is True or
    False) written as a yes/no (``download=false``, ``no``, ``0``, any case) read as that
    bool. Other options keep their value: ``num_classes=1`` stays a count."""
    defaults = loader_defaults(dataset)
    return {
        key: _FLAG_SPELLINGS.get(str(value).strip().lower(), value)
        if isinstance(defaults.get(key), bool) and not isinstance(value, bool)
        else value
        for key, value in options.items()
    }


def experiment_config(**fields: Any) -> ExperimentConfig:
    """An ExperimentConfig, its rejection a UsageError naming the option to change."""
    try:
        return ExperimentConfig(**fields)
    except ConfigError as error:
        raise UsageError(f"{option_for(error.field)}: {error}") from None


# What a dataset loader raises for files it cannot read (a corrupt pickle, a broken zip).
_UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError)


def prepare_checked(cfg: ExperimentConfig) -> Prepared:
    """Loads the dataset and resolves the attribute before any training; the user's mistakes
    (missing or corrupt data, a bad --option, an unknown --attribute, a lambda no adversary
    step would train) become a UsageError."""
    where = f"--dataset {cfg.dataset}" + (f" (--root {cfg.root})" if cfg.root else "")
    settings = f" with --option {_options(cfg)}" if cfg.dataset_options else ""
    if cfg.root is not None and not os.path.isdir(os.path.expanduser(cfg.root)):
        if os.path.exists(os.path.expanduser(cfg.root)):
            raise UsageError(f"--root {cfg.root}: is a file, expected the folder holding it")
        raise UsageError(f"--root {cfg.root}: no such folder")
    try:
        prepared = prepare(cfg)
        check_defence(cfg, prepared)
        return prepared
    except ConfigError as error:
        raise UsageError(f"{option_for(error.field)}: {error}") from None
    except DatasetNotFoundError as error:
        if cfg.root is not None:
            raise UsageError(
                f"--root {cfg.root}: {error} (or leave out --root to use the download cache)"
            ) from None
        raise UsageError(f"{where}: {error} Or pass --root FOLDER holding the files.") from None
    except TypeError as error:
        # Only a loader option of the wrong type is the user's doing; anything else is a bug.
        if not cfg.dataset_options:
            raise
        raise UsageError(f"--option: {cfg.dataset} rejects {_options(cfg)}: {error}") from None
    except _UNREADABLE as error:
        raise UsageError(f"{where}{settings}: cannot load it: {error}") from None
    except MemoryError as error:  # a generated dataset sized past the memory (num_nodes=1e12)
        raise UsageError(f"{where}{settings}: too large for this machine: {error}") from None


def _options(cfg: ExperimentConfig) -> str:
    return " ".join(f"{key}={value!r}" for key, value in cfg.dataset_options)
