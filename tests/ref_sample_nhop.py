"""Plain-Python reference of galfast.ops.sample_nhop, used only by the tests.

It shares nothing with the kernel but the specification (csrc/walk/sample_nhop.h and
csrc/walk/walk_random.h): its own SplitMix64 hash, adjacency lists built with Python sets, a
materialised Fisher-Yates shuffle of a copy of each row instead of the swap map, and
breadth-first search instead of the bounded meet-in-the-middle distance check. Walks drawn
with the same counters must match the kernel bit for bit.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Callable, Optional

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
REDRAW_BASE = 1 << 40


def mix64(z: int) -> int:
    """SplitMix64's output function (Stafford's variant 13 of the MurmurHash3 finaliser)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64_output(state: int, i: int) -> int:
    """Output i (from 0) of the SplitMix64 stream with state `state`."""
    return mix64((state + (i + 1) * GAMMA) & MASK64)


def pair_bits(seed: int, pair: int, i: int) -> int:
    """B(p, i) of csrc/walk/walk_random.h: the pair key K(p) (output p of the stream seeded by
    mix64(seed)) for i = 0, else output i - 1 of the stream seeded by K(p)."""
    key = splitmix64_output(mix64(seed), pair)
    return key if i == 0 else splitmix64_output(key, i - 1)


def walk_word(seed: int, walk: int, attempt: int, hop: int, draw: int) -> int:
    """The 32-bit word of draw `draw` of hop `hop` in attempt `attempt` of walk `walk`."""
    pair, lane = walk // 2, walk % 2
    if draw == 0:
        return (pair_bits(seed, pair, attempt * 64 + hop) >> (32 * lane)) & 0xFFFFFFFF
    slot = (attempt * 64 + hop) * 32 + (draw - 1) // 2
    bits = pair_bits(seed, pair, REDRAW_BASE + slot * 2 + lane)
    return (bits >> (32 * ((draw - 1) % 2))) & 0xFFFFFFFF


def walk_uniform(seed: int, walk: int, attempt: int, hop: int, draw: int, n: int) -> int:
    """The kernel's draw: an integer in [0, n) (a multiply-shift of walk_word)."""
    return (walk_word(seed, walk, attempt, hop, draw) * n) >> 32


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
    """All walks with the kernel's draws: (ends, paths)."""
    ends, paths = [], []
    for i, start in enumerate(starts):
        walk = walk_offset + i

        def uniform(attempt, hop, draw, n, walk=walk):
            return walk_uniform(seed, walk, attempt, hop, draw, n)

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
