"""Rebuilds galfast/datasets/data/cora.npz, the Cora copy shipped inside the package.

Usage (from the repository root, galfast importable: built in place or installed):

    PYTHONPATH=. python scripts/build_bundled_cora.py RAW_DIR [--out galfast/datasets/data/cora.npz]

RAW_DIR holds ``ind.cora.{y,ty,ally,allx,tx,graph,test.index}`` from
https://github.com/kimiyoung/planetoid/tree/master/data (MIT licence; keep
galfast/datasets/data/LICENSE-planetoid.txt next to the output). The files are verified
against the SHA-256s galfast pins, parsed exactly as
``galfast.datasets.planetoid("cora", root=RAW_DIR)`` does, and written with
:func:`galfast.datasets.bundled.save_bundled` (binary CSR features, labels, undirected edges,
public split; about 85 KB). The script then reloads the file and checks it equals the parse, so
``planetoid("cora")`` gives the same dataset from either source.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

from galfast.datasets.bundled import BUNDLED_DIR, load_bundled, save_bundled
from galfast.datasets.planetoid_loader import planetoid_resources
from galfast.datasets.planetoid_raw import read_planetoid_raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw_dir", type=Path, help="folder holding the ind.cora.* raw files")
    parser.add_argument("--out", type=Path, default=BUNDLED_DIR / "cora.npz")
    args = parser.parse_args()

    for resource in planetoid_resources("cora").values():
        digest = hashlib.sha256((args.raw_dir / resource.filename).read_bytes()).hexdigest()
        if digest != resource.sha256:
            raise SystemExit(f"{resource.filename}: SHA-256 {digest} != pinned {resource.sha256}")

    raw = read_planetoid_raw(args.raw_dir, "cora")
    save_bundled(raw, args.out)
    again = load_bundled(args.out)
    same = (
        (again.features != raw.features).nnz == 0
        and all(
            np.array_equal(getattr(again, field), getattr(raw, field))
            for field in ("labels", "pairs", "train_index", "val_index", "test_index")
        )
        and again.num_classes == raw.num_classes
    )
    if not same:
        raise SystemExit("the written file does not reproduce the raw parse")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
