"""``python -m galfast`` runs the command line."""

from galfast.cli import run_and_exit

run_and_exit()
