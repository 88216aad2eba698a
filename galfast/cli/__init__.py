"""The ``galfast`` command line: ``demo``, ``run``, ``sweep``, ``audit`` and ``tsne``.

Every subcommand explains its options with ``galfast <command> --help``. A mistake in the
options or in the files they name prints one line, ``galfast <command>: error: ...``, naming
the option to change, and exits with status 2 (as argparse does for malformed options).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from galfast.cli import audit_cmd, demo, run, sweep, tsne
from galfast.cli.errors import UsageError
from galfast.cli.options import HelpFormatter

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
        sub.formatter_class = HelpFormatter
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``galfast`` script and ``python -m galfast``."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as error:
        print(f"galfast {args.command}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"galfast {args.command}: interrupted", file=sys.stderr)
        return 130
