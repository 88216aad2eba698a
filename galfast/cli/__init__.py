"""The ``galfast`` command line: ``demo``, ``run``, ``sweep``, ``audit`` and ``tsne``.

Every subcommand explains its options with ``galfast <command> --help``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from galfast.cli import audit_cmd, demo, run, sweep, tsne

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="galfast",
        description="GAL (Information Obfuscation of Graph Neural Networks): train encoders "
        "that hide a sensitive attribute, and audit what embeddings leak.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, run, sweep, audit_cmd, tsne):
        sub = module.add_parser(subparsers)
        sub.formatter_class = _formatter(sub.formatter_class)
    return parser


def _formatter(base):
    """Adds the defaults to every option's help while keeping the description's layout."""

    class Formatter(argparse.ArgumentDefaultsHelpFormatter, base):
        pass

    return Formatter


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``galfast`` script and ``python -m galfast``."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as error:
        print(f"galfast {args.command}: error: {error}", file=sys.stderr)
        return 2
