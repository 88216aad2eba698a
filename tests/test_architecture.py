"""The import rules of docs/architecture.md: which galfast package may import which.

Every module under galfast/ is parsed (not imported) and every import in it, at module level,
inside functions or under ``if TYPE_CHECKING``, is checked against ``ALLOWED``.
"""

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "galfast"

# The base every layer may use: the Graph, the native extension, the dtype helpers, the
# argument checks and the in-place edit check.
BASE = {"graph", "_native", "_dtypes", "_args", "_versions"}

# unit -> the other units it may import. A unit is a subpackage (ops, nn, ...) or a
# top-level module (graph, _native, ...); "galfast" is the package's own __init__.
ALLOWED = {
    "_dtypes": {"_native"},
    "_native": {"_elf_extent", "_startup"},
    "_elf_extent": set(),
    "_versions": set(),
    "_startup": {"heap"},
    "heap": set(),
    "_args": {"_dtypes"},
    "graph": {"_native", "_dtypes", "_args", "_versions"},
    "ops": BASE,
    "nn": BASE | {"ops"},
    "models": BASE | {"ops", "nn"},
    "datasets": BASE,
    "gal": BASE | {"ops"},
    "train": BASE | {"ops", "nn", "models", "gal"},
    "audit": BASE | {"ops", "nn", "models", "gal"},
    "experiments": BASE | {"ops", "nn", "models", "gal", "train", "audit", "datasets"},
    "cli": BASE
    | {
        "_startup",
        "heap",
        "ops",
        "nn",
        "models",
        "gal",
        "train",
        "audit",
        "datasets",
        "experiments",
    },
    "galfast": BASE
    | {"_startup", "heap", "ops", "nn", "models", "gal", "train", "audit", "datasets"},
    "__main__": {"cli"},
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """``galfast.train.trainer`` -> ``train``, ``galfast.graph`` -> ``graph``, ``galfast``
    -> ``galfast``; the compiled extension ``galfast._C`` belongs to ``_native``."""
    parts = module.split(".")
    unit = parts[1] if len(parts) > 1 else parts[0]
    return "_native" if unit == "_C" else unit


def imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """Every galfast module ``source`` imports, anywhere in the file. ``from galfast import
    ops`` counts as ``galfast.ops``; relative imports are resolved against ``module``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base == "galfast":  # from galfast import ops: the subpackage, not the root
                found.update(f"galfast.{alias.name}" for alias in node.names)
            else:
                found.add(base)
    return {m for m in found if m == "galfast" or m.startswith("galfast.")}


def violations(root: Path) -> list[str]:
    """``"importer -> imported"`` for every import that crosses a forbidden boundary."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        unit = unit_of(module)
        allowed = ALLOWED.get(unit)
        if allowed is None:
            bad.append(f"{module}: package {unit!r} has no import rule (add it to ALLOWED)")
            continue
        source = path.read_text(encoding="utf-8")
        for target in imported_modules(source, module, path.name == "__init__.py"):
            target_unit = unit_of(target)
            if target == "galfast" and unit != "galfast":
                bad.append(f"{module} -> galfast (import the package it needs, not the root)")
            elif target_unit != unit and target_unit not in allowed:
                bad.append(f"{module} -> {target}")
    return bad


def test_galfast_follows_its_import_rules():
    assert PACKAGE_ROOT.is_dir()
    assert violations(PACKAGE_ROOT) == []


def test_every_rule_names_known_units():
    units = {unit_of(module_name(p, PACKAGE_ROOT)) for p in PACKAGE_ROOT.rglob("*.py")}
    assert units == set(ALLOWED)
    for allowed in ALLOWED.values():
        assert allowed <= set(ALLOWED)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "galfast"
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("audit/report.py", "from galfast.train import GALTrainer\n", "galfast.train"),
        ("train/trainer.py", "import galfast.audit.metrics\n", "galfast.audit.metrics"),
        (
            "ops/aggregate.py",
            "def f():\n    from galfast.nn import GCNConv\n    return GCNConv\n",
            "galfast.nn",
        ),
        ("ops/aggregate.py", "from galfast import train\n", "galfast.train"),
        ("nn/gcn_conv.py", "from ..train import trainer\n", "galfast.train"),
        ("datasets/registry.py", "from galfast.nn import norm\n", "galfast.nn"),
        (
            "gal/pairing.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from galfast.cli import main\n",
            "galfast.cli",
        ),
        (
            "experiments/runner.py",
            "from galfast.cli.options import device\n",
            "galfast.cli.options",
        ),
    ],
)
def test_the_checker_catches_a_forbidden_import(tmp_path, name, source, expected):
    root = _tree(tmp_path, {"__init__.py": "", name: source})
    module = module_name(root / name, root)
    assert violations(root) == [f"{module} -> {expected}"]


def test_the_checker_allows_the_layering_and_flags_unknown_packages(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "from galfast.train import GALTrainer\n",
            "train/trainer.py": "from galfast.gal import pairing\nfrom . import batches\n",
            "audit/report.py": "from galfast.gal.seeding import derive_seed\n",
            "cli/run.py": "from galfast.experiments import run_experiment\n",
            "newthing/mod.py": "",
        },
    )
    assert violations(root) == [
        "galfast.newthing.mod: package 'newthing' has no import rule (add it to ALLOWED)"
    ]
