"""Peers of galfast.ops.sample_nhop for the benchmarks, both running the paper's algorithm
(mode "paper": the start is not on the path; draw neighbours without replacement until one is
off the path; fail when none is left; -1 marks a failed walk):

* `networkx_nhop`: the original per-node Python loop over networkx adjacency lists, as the
  reference code ran it inside every training step;
* `numba_nhop`: a compiled CSR version with numba (``@njit(parallel=True)``), using the same
  virtual Fisher-Yates draw (a small swap map over the row) as galfast's kernel.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["networkx_nhop", "numba_nhop"]


def networkx_nhop(graph, starts, hops: int, rng: random.Random) -> list[int]:
    """The appendix algorithm, node by node, on a networkx graph."""
    ends = []
    for start in starts:
        path, cur = set(), start
        for _ in range(hops):
            candidates = list(graph.neighbors(cur))
            nxt = -1
            while candidates:
                node = candidates.pop(rng.randrange(len(candidates)))
                if node not in path:
                    nxt = node
                    break
            if nxt < 0:
                cur = -1
                break
            path.add(nxt)
            cur = nxt
        ends.append(cur)
    return ends


def _numba_kernel():
    from numba import njit, prange

    chunk = 1024

    @njit(parallel=True, cache=False)
    def walk(ptr, nbr, starts, hops, out):
        num_walks = starts.shape[0]
        for c in prange((num_walks + chunk - 1) // chunk):
            path = np.empty(hops, np.int64)
            key = np.empty(hops + 1, np.int64)
            value = np.empty(hops + 1, np.int64)
            for i in range(c * chunk, min(num_walks, (c + 1) * chunk)):
                cur = starts[i]
                for h in range(hops):
                    begin, degree = ptr[cur], ptr[cur + 1] - ptr[cur]
                    size = 0
                    nxt = -1
                    for d in range(min(degree, h + 1)):
                        k = d + np.random.randint(0, degree - d)  # noqa: NPY002 (numba: legacy API only)
                        picked, at_d = k, d  # virtual Fisher-Yates: swap slots d and k
                        found_k = -1
                        for s in range(size):
                            if key[s] == k:
                                picked, found_k = value[s], s
                            if key[s] == d:
                                at_d = value[s]
                        if found_k >= 0:
                            value[found_k] = at_d
                        else:
                            key[size], value[size] = k, at_d
                            size += 1
                        node = nbr[begin + picked]
                        blocked = False
                        for p in range(h):
                            if path[p] == node:
                                blocked = True
                        if not blocked:
                            nxt = node
                            break
                    if nxt < 0:
                        cur = -1
                        break
                    path[h] = nxt
                    cur = nxt
                out[i] = cur

    return walk


_KERNEL = None


def numba_nhop(ptr: np.ndarray, nbr: np.ndarray, starts: np.ndarray, hops: int) -> np.ndarray:
    """The appendix algorithm over a CSR (ptr, nbr with distinct, any-order rows), compiled
    with numba and parallel over chunks of walks (numba's per-thread generators)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _numba_kernel()
    out = np.empty(starts.shape[0], np.int64)
    _KERNEL(ptr, nbr, starts, hops, out)
    return out
