"""Benchmarks run with `pytest bench/ --benchmark-only`; bench/ modules import each other."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
