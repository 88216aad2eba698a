"""The ``galfast`` command line: ``demo``, ``run``, ``sweep``, ``audit`` and ``tsne``.

Every subcommand explains its options with ``galfast <command> --help``. A mistake in the
options or in the files they name prints one line, ``galfast <command>: error: ...``, naming
the option to change, and exits with status 2 (as argparse does for malformed options).
"""

from __future__ import annotations

import argparse
import atexit
import multiprocessing
import os
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import NoReturn, Optional

from galfast import _startup
from galfast._native import _C
from galfast.cli import audit_cmd, demo, run, sweep, tsne
from galfast.cli.errors import OneLineErrorParser, error_line
from galfast.cli.files import folders_removed_on_failure
from galfast.cli.options import HelpFormatter
from galfast.heap import keep_large_blocks_out_of_the_heap

__all__ = ["build_parser", "main", "run_and_exit"]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="galfast",
        description="GAL (Information Obfuscation of Graph Neural Networks): train encoders "
        "that hide a sensitive attribute, and audit what embeddings leak.",
    )
    parser.add_argument(
        "--version", action="version", version=f"galfast {_C.build_info()['version']}"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, run, sweep, audit_cmd, tsne):
        sub = module.add_parser(subparsers)
        sub.formatter_class = HelpFormatter
        sub.set_defaults(command_parser=sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one command line (``sys.argv[1:]`` by default) and returns its exit status."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # the command's own error: the top-level parser's would not name the command
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _startup.release()  # an interrupt from here unwinds the command: its clean-up runs
    shown_as = warnings.formatwarning
    warnings.formatwarning = _warning_line(args.command)
    try:
        with folders_removed_on_failure():
            return args.handler(args)
    except Exception as error:
        line = error_line(error)
        if line is None:
            raise
        print(f"galfast {args.command}: error: {' '.join(line.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"galfast {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = shown_as


def _warning_line(command: str):
    """A ``warnings.formatwarning`` giving one line, ``galfast <command>: warning: ...``:
    Python's own format adds the library's file and source line, which mean nothing to the
    user of the command. (Replacing the format, not ``showwarning``, leaves the warnings to
    whoever records them, such as ``pytest.warns``.)"""

    def line(message, category, filename, lineno, line=None) -> str:
        return f"galfast {command}: warning: {' '.join(str(message).split())}\n"

    return line


def run_and_exit() -> NoReturn:
    """Entry point of the ``galfast`` script and ``python -m galfast``: :func:`main`, then the
    end of the process.

    With torch loaded, the interpreter's teardown (a last garbage collection over torch's
    objects, then freeing every module) takes about half a second, a second or two of CPU
    on every short command. A command that returns has written and closed its files and
    reaped its workers, so once the exit handlers have run (``atexit``: logging's flush, and
    the clean-up of what libraries made for the process, such as matplotlib's temporary
    config folder when HOME is not writable) and the streams are flushed, the process ends at
    once (``os._exit``); where a child process or a non-daemon thread is still alive, or the
    command raised, Python exits as usual. Before the command runs, large blocks are kept out
    of malloc's heap (:mod:`galfast.heap`)."""
    keep_large_blocks_out_of_the_heap()
    code = main()
    if _teardown_needed():
        sys.exit(code)
    atexit._run_exitfuncs()  # what Python's exit runs too; a few milliseconds
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``galfast ... | head``) or stream
            pass
    os._exit(code)


def _teardown_needed() -> bool:
    """Whether something still running relies on the interpreter's exit to be waited for."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    return bool(multiprocessing.active_children()) or any(not t.daemon for t in others)
