"""The compact ``.npz`` form of a parsed Planetoid dataset with binary features, used to ship
Cora inside the package (``galfast/datasets/data/cora.npz``, built by
``scripts/build_bundled_cora.py``).

Layout (all arrays; integers stored in the narrowest type that holds them):
``feature_indices`` / ``feature_indptr`` / ``num_features`` (the CSR pattern of the 0/1
features), ``labels`` (-1 = unknown), ``num_classes``, ``pairs`` ([2, P] undirected edges
``u < v``), ``num_train`` (the first ``num_train`` nodes are the public training nodes, the
next 500 validation), ``test_index`` (``test.index`` order).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from galfast.datasets.planetoid_raw import NUM_VAL, PlanetoidRaw

__all__ = ["BUNDLED_DIR", "load_bundled", "save_bundled"]

BUNDLED_DIR = Path(__file__).resolve().parent / "data"


def _narrow(values: np.ndarray) -> np.ndarray:
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.int64)


def save_bundled(raw: PlanetoidRaw, path: Path) -> None:
    """Writes `raw` compressed to `path`. Features must be present and binary (0/1)."""
    if raw.features is None:
        raise ValueError("only datasets with features can be bundled")
    features = raw.features.tocsr()
    features.sort_indices()
    if not np.all(features.data == 1):
        raise ValueError("bundled features must be binary (every stored value 1)")
    np.savez_compressed(
        path,
        feature_indices=_narrow(features.indices),
        feature_indptr=_narrow(features.indptr),
        num_features=np.int64(features.shape[1]),
        labels=_narrow(raw.labels),
        num_classes=np.int64(raw.num_classes),
        pairs=_narrow(raw.pairs),
        num_train=np.int64(raw.train_index.size),
        test_index=_narrow(raw.test_index),
    )


def load_bundled(path: Path) -> PlanetoidRaw:
    """Reads a file written by :func:`save_bundled`."""
    import scipy.sparse as sp  # here, not at import: `import galfast` stays free of scipy

    with np.load(path) as stored:
        indptr = stored["feature_indptr"].astype(np.int64)
        indices = stored["feature_indices"].astype(np.int64)
        labels = stored["labels"].astype(np.int64)
        num_train = int(stored["num_train"])
        features = sp.csr_matrix(
            (np.ones(indices.size, dtype=np.float32), indices, indptr),
            shape=(labels.size, int(stored["num_features"])),
        )
        return PlanetoidRaw(
            features=features,
            labels=labels,
            num_classes=int(stored["num_classes"]),
            pairs=stored["pairs"].astype(np.int64),
            train_index=np.arange(num_train, dtype=np.int64),
            val_index=np.arange(num_train, num_train + NUM_VAL, dtype=np.int64),
            test_index=stored["test_index"].astype(np.int64),
        )
