"""Parser of the original Planetoid raw files (Yang et al. 2016, kimiyoung/planetoid ``data/``).

For a dataset ``<name>`` the files ``ind.<name>.<part>`` are Python 2 pickles:

* ``allx``: scipy CSR ``[n_all, F]`` features of the nodes ``0 .. n_all-1`` (its first rows are
  ``x``, the labelled training nodes, so ``x`` itself is never needed);
* ``tx``: CSR ``[n_test, F]`` features of the test nodes, row ``k`` for node ``test.index[k]``;
* ``ally``, ``ty``, ``y``: one-hot labels matching ``allx``, ``tx``, ``x``;
* ``graph``: ``defaultdict(list)`` node -> neighbour list;
* ``test.index``: text, one test node id per line.

Test nodes occupy ids ``n_all .. max(test.index)``; CiteSeer's range has 15 ids with no test
row (isolated nodes without features or label): as the usual loaders do, their features are
zero rows; their label is recorded as unknown (-1) rather than class 0.
"""

from __future__ import annotations

import codecs
import collections
import io
import operator
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from galfast.datasets.link_split import undirected_pairs

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "FEATURE_PARTS",
    "PlanetoidRaw",
    "STRUCTURE_PARTS",
    "load_pickle",
    "read_planetoid_raw",
]

STRUCTURE_PARTS = ("y", "ty", "ally", "graph", "test.index")
FEATURE_PARTS = ("allx", "tx")
NUM_VAL = 500


def _numpy_reconstruct() -> Any:
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    return _reconstruct


def _allowed_globals() -> dict[tuple[str, str], Any]:
    """The only globals the raw files (and faithful re-creations of them) reference. Anything
    else is refused: a pickle can run arbitrary code, and these files come from the network.
    Built when a file is read, so ``import galfast`` does not load scipy."""
    import scipy.sparse as sp

    return {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
        ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
        ("scipy.sparse.csr", "csr_matrix"): sp.csr_matrix,
        ("scipy.sparse._csr", "csr_matrix"): sp.csr_matrix,
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,
        ("builtins", "list"): list,
        ("_codecs", "encode"): codecs.encode,
    }


class _PlanetoidUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        allowed = _allowed_globals()
        if (module, name) not in allowed:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return allowed[(module, name)]


def load_pickle(path: Path) -> Any:
    """Unpickles a Planetoid raw file (Python 2 pickle, latin-1 strings), allowing only numpy
    arrays, scipy CSR matrices and the adjacency dict."""
    data = path.read_bytes()
    try:
        return _PlanetoidUnpickler(io.BytesIO(data), encoding="latin1").load()
    # Corrupt bytes make the unpickler raise nearly anything (pickle's docs say so): a codec
    # name a flipped byte garbled (LookupError), a length no memory holds (MemoryError), ...
    except Exception as err:
        raise ValueError(
            f"{path} is not a valid Planetoid pickle: {type(err).__name__}: {err}"
        ) from err


@dataclass(frozen=True, eq=False)
class PlanetoidRaw:
    """What the raw files hold, in node order.

    Attributes:
        features: ``[N, F]`` float32 CSR, or ``None`` when a feature file is missing.
        labels: ``[N]`` int64 class, ``-1`` where unknown.
        num_classes: width of the one-hot label rows.
        pairs: ``[2, P]`` int64 unique undirected edges ``u < v`` (self loops and duplicate
            edges of the raw adjacency dropped, as PyG does).
        train_index, val_index, test_index: the public split (first ``len(y)`` nodes, the next
            500, the ``test.index`` nodes in file order).
    """

    features: Optional[sp.csr_matrix]
    labels: np.ndarray
    num_classes: int
    pairs: np.ndarray
    train_index: np.ndarray
    val_index: np.ndarray
    test_index: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.labels.size


def _one_hot(value: Any, path: Path) -> np.ndarray:
    import scipy.sparse as sp

    if sp.issparse(value):
        value = _csr(value, path).toarray()
    try:
        array = np.asarray(value)
    except ValueError as err:  # a ragged list of rows
        raise ValueError(f"{path} must hold a 2-D one-hot label matrix: {err}") from err
    if array.ndim != 2:
        raise ValueError(f"{path} must hold a 2-D one-hot label matrix, got shape {array.shape}")
    # One 1 per row, or none (a node without a label, as CiteSeer has): argmax of anything else
    # (NaN, a multi-hot row, 2s) would be a made-up class.
    if not np.isin(array, (0, 1)).all() or (array.sum(axis=1) > 1).any():
        raise ValueError(f"{path} must hold one-hot label rows (0/1, at most one 1 per row)")
    return array


def _csr(value: Any, path: Path) -> sp.csr_matrix:
    import scipy.sparse as sp

    if not isinstance(value, sp.csr_matrix):  # the only sparse class the unpickler allows
        raise ValueError(f"{path} must hold a 2-D scipy sparse matrix, got {type(value).__name__}")
    # The unpickler sets the matrix's arrays as the file has them: an index past the shape or
    # a decreasing indptr would make scipy's C++ kernels write out of bounds (a segfault).
    try:
        value.check_format(full_check=True)
        return sp.csr_matrix(value, dtype=np.float32)
    except (AttributeError, TypeError, ValueError, IndexError, OverflowError) as err:
        raise ValueError(f"{path} holds a corrupt sparse matrix: {err}") from err


def _labels(one_hot: np.ndarray) -> np.ndarray:
    labels = one_hot.argmax(axis=1).astype(np.int64)
    labels[one_hot.sum(axis=1) == 0] = -1
    return labels


def _edges(adjacency: dict, path: Path) -> np.ndarray:
    """``[2, E]`` int64 (node, neighbour) pairs of the adjacency dict read from ``path``."""
    try:
        # operator.index: a float (1.7) or a string ("3") is an error, not a truncated id.
        sources = [operator.index(u) for u, vs in adjacency.items() for _ in vs]
        targets = [operator.index(v) for vs in adjacency.values() for v in vs]
        return np.array([sources, targets], dtype=np.int64).reshape(2, -1)
    except (TypeError, OverflowError) as err:
        raise ValueError(f"{path} must map integer node ids to lists of them: {err}") from err


def read_planetoid_raw(folder: Path, name: str) -> PlanetoidRaw:
    """Parses ``folder/ind.<name>.*``.

    The structure files (``y, ty, ally, graph, test.index``) are required; when a feature file
    (``allx`` or ``tx``) is absent, ``features`` is ``None``.

    Raises:
        FileNotFoundError: a structure file is missing.
        ValueError: a file is malformed or the files disagree (sizes, node ids).
    """
    folder = Path(folder)
    path = {part: folder / f"ind.{name}.{part}" for part in STRUCTURE_PARTS + FEATURE_PARTS}
    missing = [str(path[part]) for part in STRUCTURE_PARTS if not path[part].is_file()]
    if missing:
        raise FileNotFoundError(f"missing Planetoid files: {', '.join(missing)}")

    y = _one_hot(load_pickle(path["y"]), path["y"])
    ty = _one_hot(load_pickle(path["ty"]), path["ty"])
    ally = _one_hot(load_pickle(path["ally"]), path["ally"])
    try:
        test_index = np.array([int(t) for t in path["test.index"].read_text().split()], np.int64)
    except (ValueError, OverflowError) as err:  # OverflowError: an id past int64
        raise ValueError(f"{path['test.index']} must hold one node id per line: {err}") from err
    adjacency = load_pickle(path["graph"])
    if not isinstance(adjacency, dict):
        raise ValueError(f"{path['graph']} must hold a dict of neighbour lists")

    num_all, num_classes = ally.shape
    if y.shape[1] != num_classes or ty.shape[1] != num_classes:
        raise ValueError(f"{name}: y, ty and ally disagree on the number of classes")
    if ty.shape[0] != test_index.size or test_index.size == 0:
        raise ValueError(
            f"{name}: ty has {ty.shape[0]} rows but test.index lists {test_index.size} nodes"
        )
    if np.unique(test_index).size != test_index.size or test_index.min() != num_all:
        raise ValueError(
            f"{name}: test.index must list distinct ids starting at len(ally) = {num_all}"
        )
    if y.shape[0] + NUM_VAL > num_all:
        raise ValueError(f"{name}: ally has {num_all} rows, fewer than len(y) + {NUM_VAL}")
    num_nodes = int(test_index.max()) + 1
    # Ids in the test range without a test row become featureless nodes (CiteSeer has 15 of
    # 1,015). One mistyped id far out would add millions of them, or exhaust the memory.
    if num_nodes - num_all > 2 * test_index.size:
        raise ValueError(
            f"{path['test.index']} lists node {num_nodes - 1}, which would make "
            f"{num_nodes - num_all - test_index.size} test-range nodes without a row in ty "
            f"(more than the {test_index.size} it has): a corrupt id?"
        )

    one_hot = np.zeros((num_nodes, num_classes), dtype=np.int64)
    one_hot[:num_all] = ally
    one_hot[test_index] = ty

    edges = _edges(adjacency, path["graph"])
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"{path['graph']} refers to nodes outside [0, {num_nodes})")

    features = None
    if all(path[part].is_file() for part in FEATURE_PARTS):
        import scipy.sparse as sp

        allx = _csr(load_pickle(path["allx"]), path["allx"])
        tx = _csr(load_pickle(path["tx"]), path["tx"])
        if (
            allx.shape[0] != num_all
            or tx.shape[0] != test_index.size
            or allx.shape[1] != tx.shape[1]
        ):
            raise ValueError(
                f"{name}: allx {allx.shape} and tx {tx.shape} do not match ally and test.index"
            )
        # Test row k belongs to node test_index[k]; ids in the range without a row stay zero.
        tx = tx.tocoo()
        placed = sp.csr_matrix(
            (tx.data, (test_index[tx.row] - num_all, tx.col)),
            shape=(num_nodes - num_all, tx.shape[1]),
        )
        features = sp.vstack([allx, placed], format="csr", dtype=np.float32)

    return PlanetoidRaw(
        features=features,
        labels=_labels(one_hot),
        num_classes=num_classes,
        pairs=undirected_pairs(edges),
        train_index=np.arange(y.shape[0], dtype=np.int64),
        val_index=np.arange(y.shape[0], y.shape[0] + NUM_VAL, dtype=np.int64),
        test_index=test_index,
    )
