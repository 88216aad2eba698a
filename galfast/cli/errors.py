"""User errors of the command line: what was wrong and which option to change, printed by
:func:`galfast.cli.main` as one line (``galfast <command>: error: ...``), exit status 2.

Only mistakes in what the user gave become a :class:`UsageError`, converted where the input is
read (options, files, the dataset); :func:`error_line` also words the library's exceptions
that report the user's settings (a lambda too large to train, a graph without walks). An
exception anywhere else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
from typing import NoReturn, Optional

from galfast.audit import WalksFailed
from galfast.experiments import TrainingDiverged

__all__ = ["OneLineErrorParser", "UsageError", "error_line", "option_for"]


class UsageError(Exception):
    """A mistake in the command line or in a file it names; the message says what to change."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``galfast <command>: error: ...``, exit
    status 2: argparse's usage block before it (a dozen lines for ``run``) buries the line
    that says what to change; ``--help`` still shows the usage. The subcommands' parsers are
    of this class too (argparse builds them with their parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def error_line(error: BaseException) -> Optional[str]:
    """The one line that reports ``error`` to the user, None when it is not the user's (a bug,
    which keeps its traceback)."""
    if isinstance(error, UsageError):
        return str(error)
    if isinstance(error, TrainingDiverged):
        return f"{error}; try a smaller --lam" if error.lam > 0 else str(error)
    if isinstance(error, WalksFailed):  # the graph given leaves the walk attacks nothing
        return f"{error}; leave out the neighbor and nhop attacks (--attacks node) for it"
    return None


# ExperimentConfig fields whose option is not simply "--" + the field with dashes.
_OPTION_OF_FIELD = {"dataset_options": "--option", "seed": "--seeds"}
_OPTION_OF_FIELD["model_options"] = "--model-option"


def option_for(field: Optional[str]) -> str:
    """The command-line option that sets the ExperimentConfig ``field``."""
    if field is None:
        return "the options"
    return _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))
