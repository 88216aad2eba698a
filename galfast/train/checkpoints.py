"""GALTrainer's checkpoint files: reading and writing them, and checking that what a file holds
is a checkpoint that fits the trainer before any of it is loaded (a half-loaded trainer, or a
fused optimizer step on state of the wrong shape, is worse than an error)."""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Mapping
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn

from galfast.train.config import GALConfig

__all__ = [
    "CHECKPOINT_FORMAT",
    "check_checkpoint",
    "check_module_state",
    "check_optimizer_state",
    "damaged_entry",
    "load_module_state",
    "module_state",
    "read_checkpoint",
    "write_checkpoint",
]

CHECKPOINT_FORMAT = 1
# What GALTrainer.state_dict() writes, all of which load_state_dict() reads ("sampler", added
# later, is compared when present).
_CHECKPOINT_KEYS = (
    "format",
    "config",
    "encoder",
    "task_head",
    "attacker",
    "task_optimizer",
    "adversary_optimizer",
    "epoch",
    "step",
    "history",
)
# State that torch's optimizers keep with one entry per parameter entry (Adam, AdamW, SGD,
# RMSprop): the fused Adam step writes it without checking its size.
_PARAMETER_SHAPED = (
    "exp_avg",
    "exp_avg_sq",
    "max_exp_avg_sq",
    "momentum_buffer",
    "square_avg",
    "grad_avg",
)


def read_checkpoint(path: Union[str, os.PathLike], map_location: Any) -> Any:
    """What ``torch.load`` reads from ``path`` (tensors and plain values only). A missing file
    or a folder raises the OSError that names it; a file torch cannot read, or whose bytes fail
    its archive's checksums, raises ValueError naming the file."""
    path = os.fspath(path)
    try:
        damaged = damaged_entry(path)
        if damaged is None:
            return torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"{path} is not a GALTrainer checkpoint: it holds Python objects other than tensors "
            "and plain values (a pickled module or trainer?)"
        ) from error
    except Exception as error:  # a damaged file fails in zip, pickle or EOF handling alike
        reason = ": ".join([type(error).__name__, *str(error).splitlines()[:1]])
        raise ValueError(
            f"{path} is not a readable checkpoint (truncated, damaged, or not written by "
            f"torch.save): {reason}"
        ) from error
    raise ValueError(
        f"{path} is damaged: its entry {damaged} fails the archive's CRC check (a disk, copy "
        "or transfer error?); use another copy of the checkpoint"
    )


def damaged_entry(path: str) -> Optional[str]:
    """The first entry of the zip archive ``path`` whose bytes fail their CRC-32, else None.
    torch.load checks no CRC, so a flipped bit in a stored tensor would load as a silently
    different weight. The check reads the file once more: 33 ms for a 100 MB checkpoint, 1.7
    ms for 5 MB, half of torch.load's own time (2-core development machine, warm page
    cache). A file that is no zip is left to torch.load, which reads torch's legacy format
    or says what is wrong."""
    if not zipfile.is_zipfile(path):
        return None
    with zipfile.ZipFile(path) as archive:
        return archive.testzip()


def write_checkpoint(state: Mapping[str, Any], path: Union[str, os.PathLike]) -> None:
    """Writes ``state`` to ``path`` atomically (a temporary file beside it is renamed), making
    its folder; a path that cannot name a file raises ValueError before anything is written."""
    path = prepare_checkpoint_path(path)
    tmp = f"{path}.tmp"
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):  # leave no half-written file beside the checkpoint
            os.remove(tmp)
        raise


def prepare_checkpoint_path(path: Union[str, os.PathLike]) -> str:
    """``path`` as a string, its folder made; ValueError if it cannot name a file."""
    path = os.fspath(path)
    if not path or os.path.isdir(path):
        what = "a folder" if path else "empty"
        raise ValueError(f"checkpoint path {path!r} is {what}: name a file")
    parent = os.path.dirname(path)
    if parent:
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as error:
            raise ValueError(
                f"cannot write checkpoint {path}: {error.filename} is a file, not a folder"
            ) from error
    return path


def check_checkpoint(state: Any, source: str) -> None:
    """ValueError unless ``state`` (read from ``source``) is what :meth:`GALTrainer.state_dict`
    writes, in this format: another file would fail later with a bare KeyError."""
    if not isinstance(state, Mapping):
        raise ValueError(
            f"{source} is not a GALTrainer checkpoint: it holds a {type(state).__name__}, "
            "not a dict"
        )
    missing = [key for key in _CHECKPOINT_KEYS if key not in state]
    if missing or not isinstance(state["config"], Mapping):
        lacks = ", ".join(missing) if missing else "a config dict"
        raise ValueError(f"{source} is not a GALTrainer checkpoint: it lacks {lacks}")
    if state["format"] != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{source} is a checkpoint of format {state['format']!r}; this version reads "
            f"format {CHECKPOINT_FORMAT}"
        )
    # A newer galfast's setting would be dropped here, and the run continue without it.
    unknown = sorted(set(state["config"]) - set(GALConfig.keys()))
    if unknown:
        raise ValueError(
            f"{source} records settings this version of galfast does not know "
            f"({', '.join(map(str, unknown))}): it was written by a newer galfast"
        )
    for key in ("epoch", "step"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{source}: the checkpoint's {key} must be an int >= 0, got {value!r}")
    history = state["history"]
    if not isinstance(history, list) or not all(isinstance(r, Mapping) for r in history):
        raise ValueError(f"{source}: the checkpoint's history must be a list of dicts")


# torch.compile's wrapper (OptimizedModule) holds the module as _orig_mod, and its state dict's
# keys carry this prefix.
_COMPILED_PREFIX = "_orig_mod."


def _plain(module: nn.Module) -> nn.Module:
    return getattr(module, "_orig_mod", module)


def _unprefixed(saved: Any) -> Any:
    """A compiled module's state as its plain module's (checkpoints written before
    :func:`module_state`); any other state as it is."""
    if (
        isinstance(saved, Mapping)
        and saved
        and all(isinstance(key, str) and key.startswith(_COMPILED_PREFIX) for key in saved)
    ):
        return {key[len(_COMPILED_PREFIX) :]: value for key, value in saved.items()}
    return saved


def module_state(module: nn.Module) -> dict[str, Any]:
    """The state dict of ``module`` as the plain module has it, whether torch.compile wraps it
    or not: a checkpoint loads into the compiled and the plain module alike."""
    return _plain(module).state_dict()


def load_module_state(module: nn.Module, saved: Mapping[str, Any]) -> None:
    """Loads a :func:`module_state` (or a compiled module's own state dict) into ``module``,
    compiled or not."""
    _plain(module).load_state_dict(_unprefixed(saved))


def check_module_state(name: str, module: nn.Module, saved: Any, source: str) -> None:
    """ValueError unless ``saved`` loads into ``module`` (the same entries, each of the same
    shape and dtype) and holds finite parameters (NaN weights would only surface as a
    diverged loss)."""
    if not isinstance(saved, Mapping):
        raise ValueError(
            f"{source}: the checkpoint's {name} is a {type(saved).__name__}, not a state dict"
        )
    expected, saved = module_state(module), _unprefixed(saved)
    missing = [key for key in expected if key not in saved]
    unexpected = [key for key in saved if key not in expected]
    if missing or unexpected:
        raise ValueError(
            f"{source}: the checkpoint's {name} does not fit this {name} (another architecture?): "
            f"missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    for key, tensor in expected.items():
        value = saved[key]
        if not isinstance(tensor, Tensor) or nn.parameter.is_lazy(tensor):
            continue
        if not isinstance(value, Tensor) or value.shape != tensor.shape:
            shape = list(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise ValueError(
                f"{source}: the checkpoint's {name}.{key} has shape {shape}, this {name}'s "
                f"{list(tensor.shape)} (built with other sizes?)"
            )
        # load_state_dict would round (or widen) it into this dtype, and the optimizer's
        # moments with it: the resumed run would not be the saved one.
        if value.dtype != tensor.dtype:
            raise ValueError(
                f"{source}: the checkpoint's {name}.{key} is {value.dtype}, this {name}'s "
                f"{tensor.dtype} (a run in another precision? convert the modules with "
                ".to(dtype) before loading)"
            )
    for key, _ in _plain(module).named_parameters():
        value = saved[key]
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(
                f"{source}: the checkpoint's {name}.{key} holds NaN or infinite values (the "
                "saved run had diverged, or the file was edited)"
            )


def check_optimizer_state(
    name: str, optimizer: torch.optim.Optimizer, saved: Any, source: str
) -> None:
    """ValueError unless ``saved`` is an optimizer state over parameters of this optimizer's
    groups and shapes."""
    groups = saved.get("param_groups") if isinstance(saved, Mapping) else None
    if (
        not isinstance(groups, list)
        or not isinstance(saved.get("state"), Mapping)
        or not all(isinstance(g, Mapping) and isinstance(g.get("params"), list) for g in groups)
    ):
        raise ValueError(f"{source}: the checkpoint's {name} is not an optimizer state dict")
    sizes = [len(g["params"]) for g in optimizer.param_groups]
    saved_sizes = [len(g["params"]) for g in groups]
    if sizes != saved_sizes:
        raise ValueError(
            f"{source}: the checkpoint's {name} holds groups of {saved_sizes} parameters, this "
            f"trainer's {sizes} (modules with other parameters?)"
        )
    params = [p for g in optimizer.param_groups for p in g["params"]]
    ids = [i for g in groups for i in g["params"]]
    for index, param in zip(ids, params):
        entries = saved["state"].get(index, {})
        for key, value in entries.items() if isinstance(entries, Mapping) else ():
            shaped = key in _PARAMETER_SHAPED and isinstance(value, Tensor)
            if shaped and value.shape != param.shape:
                raise ValueError(
                    f"{source}: the checkpoint's {name} holds {key} of shape {list(value.shape)} "
                    f"for a parameter of shape {list(param.shape)}"
                )
