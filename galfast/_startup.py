"""Ctrl-C while the ``galfast`` command is still importing: the command's one line.

Importing torch takes a second or more, before :func:`galfast.cli.main` can catch an
interrupt; Python's own handler would print a traceback from deep inside torch, and a handler
there that swallows the KeyboardInterrupt can leave a module half imported (a later
RecursionError). Importing this module (the first thing ``galfast/__init__.py`` does, since
every galfast import runs it) therefore lets an interrupt end the command line's process at
once, with ``galfast <command>: interrupted`` and status 130, as for a running command.
:func:`galfast.cli.main` calls :func:`release` once the options are parsed: from there an
interrupt unwinds the command, whose clean-up runs. Only the command line's process is
guarded (``python -m galfast``, the ``galfast`` script), never a program importing galfast.

The command line's process also asks PyTorch here for huge pages (:mod:`galfast.heap`): PyTorch
reads that setting at its first allocation, so it must be made before torch is imported.
"""

from __future__ import annotations

import os
import signal
import sys

from galfast import heap

__all__ = ["is_the_command_line", "release"]


def release() -> None:
    """Gives Ctrl-C back to Python (a KeyboardInterrupt) if the import guard holds it."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(signum, frame) -> None:
    command = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None
    sys.stderr.write(f"galfast {command}: interrupted\n" if command else "galfast: interrupted\n")
    sys.stderr.flush()
    # Nothing is written or started yet, and an exception would unwind through the imports.
    os._exit(130)


def is_the_command_line() -> bool:
    """Whether this process runs the ``galfast`` command (its script or ``python -m galfast``)."""
    if sys.argv[:1] == ["-m"]:  # python -m NAME, while NAME's package imports
        original = getattr(sys, "orig_argv", [])  # Python >= 3.10; 3.9 goes unguarded
        name = original[len(original) - len(sys.argv)] if len(original) >= len(sys.argv) else ""
        return name in ("galfast", "-mgalfast")
    return os.path.basename(sys.argv[0]) == "galfast"  # the installed script


if is_the_command_line():
    heap.ask_torch_for_huge_pages()

# Python's own handler only: an ignored SIGINT (a background job) stays ignored.
if is_the_command_line() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted)
