"""Plain-Python reference of galfast.ops.sample_nhop, used only by the tests.

It shares nothing with the kernel but the specification (csrc/walk/sample_nhop.h): its own
Philox4x32-10, adjacency lists built with Python sets, a materialised Fisher-Yates shuffle of a
copy of each row instead of the swap map, and breadth-first search instead of the bounded
meet-in-the-middle distance check. Walks drawn with the same counters must match the kernel
bit for bit.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Callable, Optional

MASK32 = 0xFFFFFFFF
_MUL = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)


def philox4x32_10(counter: tuple[int, ...], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Random123's philox4x32 with 10 rounds: four 32-bit words from a 4-word counter and a
    2-word key."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_ in range(10):
        if round_:
            k0, k1 = (k0 + _WEYL[0]) & MASK32, (k1 + _WEYL[1]) & MASK32
        p0, p1 = _MUL[0] * c0, _MUL[1] * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return c0, c1, c2, c3


def philox_uniform(seed: int, walk: int, attempt: int, hop: int, draw: int, n: int) -> int:
    """The kernel's draw: an integer in [0, n) for draw `draw` of hop `hop` (counter layout in
    csrc/walk/sample_nhop.h)."""
    if draw == 0:
        group = walk // 4
        counter, word = (group & MASK32, group >> 32, attempt, hop), walk % 4
    else:
        redraw = (1 << 31) | (hop << 16) | ((draw - 1) // 4)
        counter, word = (walk & MASK32, walk >> 32, attempt, redraw), (draw - 1) % 4
    return (philox4x32_10(counter, (seed & MASK32, seed >> 32))[word] * n) >> 32


def adjacency(edges: list[tuple[int, int]], num_nodes: int) -> list[list[int]]:
    """Sorted lists of the distinct out-neighbours of every node."""
    out_sets = [set() for _ in range(num_nodes)]
    for src, dst in edges:
        out_sets[src].add(dst)
    return [sorted(s) for s in out_sets]


def bfs_distance(out_rows: list, source: int, target: int) -> Optional[int]:
    """Shortest-path distance along out-edges, None when unreachable."""
    dist = {source: 0}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        if u == target:
            return dist[u]
        for v in out_rows[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return None


Uniform = Callable[[int, int, int, int], int]  # (attempt, hop, draw, n) -> [0, n)


def reference_walk(
    out_rows: list, start: int, hops: int, mode: str, uniform: Uniform, max_retries: int = 0
) -> tuple[int, list]:
    """One walk: returns (end or -1, path of the final attempt, -1 padded to hops + 1)."""
    attempt = 0
    while True:
        path, stuck = [start], False
        for hop in range(hops):
            row = list(out_rows[path[-1]])
            blocked = set(path[1:] if mode == "paper" else path)
            for draw in range(len(row)):
                k = draw + uniform(attempt, hop, draw, len(row) - draw)
                row[draw], row[k] = row[k], row[draw]
                if row[draw] not in blocked:
                    path.append(row[draw])
                    break
            else:
                stuck = True
                break
        padded = path + [-1] * (hops + 1 - len(path))
        if mode != "exact":
            return (-1 if stuck else path[-1]), padded
        if not stuck and bfs_distance(out_rows, start, path[-1]) == hops:
            return path[-1], padded
        if (stuck and len(path) == 1) or attempt == max_retries:
            return -1, padded
        attempt += 1


def reference_sample(
    out_rows: list,
    starts: list,
    hops: int,
    mode: str,
    seed: int,
    max_retries: int = 16,
    walk_offset: int = 0,
) -> tuple[list, list]:
    """All walks with the kernel's Philox draws: (ends, paths)."""
    ends, paths = [], []
    for i, start in enumerate(starts):
        walk = walk_offset + i

        def uniform(attempt, hop, draw, n, walk=walk):
            return philox_uniform(seed, walk, attempt, hop, draw, n)

        end, path = reference_walk(out_rows, start, hops, mode, uniform, max_retries)
        ends.append(end)
        paths.append(path)
    return ends, paths


def end_distribution(out_rows: list, start: int, hops: int, mode: str) -> dict[int, Fraction]:
    """Exact probability of each end (-1: failure) of a paper/simple walk, by enumeration:
    each step moves to a uniform legal neighbour (drawing without replacement until one is
    legal picks each legal neighbour with equal probability)."""
    result: dict[int, Fraction] = {}

    def visit(path: list, prob: Fraction) -> None:
        if len(path) == hops + 1:
            result[path[-1]] = result.get(path[-1], Fraction(0)) + prob
            return
        blocked = set(path[1:] if mode == "paper" else path)
        legal = [v for v in out_rows[path[-1]] if v not in blocked]
        if not legal:
            result[-1] = result.get(-1, Fraction(0)) + prob
            return
        for v in legal:
            visit(path + [v], prob / len(legal))

    visit([start], Fraction(1))
    return result
