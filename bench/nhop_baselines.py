"""Peers of galfast.ops.sample_nhop for the benchmarks, both running the paper's algorithm
(mode "paper": the start is not on the path; draw neighbours without replacement until one is
off the path; fail when none is left; -1 marks a failed walk):

* `networkx_nhop`: the original per-node Python loop over networkx adjacency lists, as the
  reference code ran it inside every training step;
* `numba_nhop`: a compiled CSR version with numba (``@njit(parallel=True)``), using the same
  virtual Fisher-Yates draw (a small swap map over the row) as galfast's kernel, one walk
  after the other, drawing from numba's Mersenne Twister;
* `numba_splitmix_gather_nhop`: counter-based draws (one SplitMix64 hash per draw, no
  generator state), and hop-major blocks of 512 walks whose random reads are gathered in a
  loop of their own, so the core overlaps them (2-3x `numba_nhop`; docs/benchmarks.md,
  "n-hop sampler against a splitmix64 peer"); the ends of a large batch are written with
  non-temporal stores, as galfast writes them (faster at 1 hop; not in the prefetching
  version below, where they measured slower);
* `numba_splitmix_nhop`: the fastest numba peer we could write, the same walks and results as
  the gather version, in blocks of 128 walks: each draw prefetches its slot (LLVM's prefetch
  through a numba intrinsic), one loop per hop reads, checks and draws, and the loop that ends
  a block's last hop starts the next block (as galfast's kernel; docs/benchmarks.md, "n-hop
  sampler: AVX-512 walks against a prefetching peer").

`reads_only` is no sampler but a floor under every 1-hop one: it only reads each walk's
neighbour from slots drawn beforehand (`one_hop_slots`) and writes it out as int64 (streamed,
as above, when large), the random reads and the streams a 1-hop walk cannot avoid, in one loop
the core overlaps freely.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = [
    "networkx_nhop",
    "numba_nhop",
    "numba_splitmix_gather_nhop",
    "numba_splitmix_nhop",
    "one_hop_slots",
    "reads_only",
]


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


def _numba_splitmix_kernel():
    from numba import njit, prange

    block = 512
    gamma = np.uint64(0x9E3779B97F4A7C15)
    mul1, mul2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s27, s30, s31, s32 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(32)

    stream = _stream_intrinsic()

    @njit(inline="always")
    def store(out, i, value, streamed):
        if streamed:
            stream(out, i, value)
        else:
            out[i] = value

    @njit(inline="always")
    def mix(z):
        z = (z ^ (z >> s30)) * mul1
        z = (z ^ (z >> s27)) * mul2
        return z ^ (z >> s31)

    @njit(inline="always")
    def draw(key, walk, hop, d, n):
        # draw d of hop `hop` of walk `walk`: counter walk * 4096 + hop * 64 + d, in [0, n)
        counter = np.uint64(walk) * np.uint64(4096) + np.uint64(hop * 64 + d)
        return np.int64(((mix(key + counter * gamma) >> s32) * np.uint64(n)) >> s32)

    @njit(inline="always")
    def redraw(ptr, nbr, path, j, hop, first, key, walk, kk, vv):
        # the first draw `first` hit the path: draws 1, 2, ... without replacement (virtual
        # Fisher-Yates over a swap map), -1 when no legal neighbour is left
        begin = np.int64(ptr[path[hop, j]])
        degree = np.int64(ptr[path[hop, j] + 1]) - begin
        size = 0
        if first != 0:
            kk[0], vv[0], size = first, 0, 1
        for d in range(1, min(degree, hop + 1)):
            k = d + draw(key, walk, hop, d, degree - d)
            picked, at_d, found = k, d, -1
            for s in range(size):
                if kk[s] == k:
                    picked, found = vv[s], s
                if kk[s] == d:
                    at_d = vv[s]
            if found >= 0:
                vv[found] = at_d
            else:
                kk[size], vv[size] = k, at_d
                size += 1
            node = np.int64(nbr[begin + picked])
            blocked = False
            for p in range(1, hop + 1):
                blocked |= path[p, j] == node
            if not blocked:
                return node
        return -1

    @njit(parallel=True, cache=False)
    def walk(ptr, nbr, starts, hops, seed, out, streamed):
        num_walks = starts.shape[0]
        key = mix(np.uint64(seed))
        for b in prange((num_walks + block - 1) // block):
            lo = b * block
            n = min(num_walks, lo + block) - lo
            path = np.empty((hops + 1, block), np.int64)  # path[h, j]: node after hop h
            slot = np.empty(block, np.int64)
            kk = np.empty(hops + 1, np.int64)
            vv = np.empty(hops + 1, np.int64)
            for j in range(n):
                path[0, j] = starts[lo + j]
            for hop in range(hops):
                for j in range(n):  # draw every live walk's slot
                    u = path[hop, j]
                    slot[j] = -1
                    if u >= 0:
                        begin, degree = np.int64(ptr[u]), np.int64(ptr[u + 1] - ptr[u])
                        if degree > 0:
                            slot[j] = begin + draw(key, lo + j, hop, 0, degree)
                for j in range(n):  # the random reads, independent of each other
                    path[hop + 1, j] = nbr[slot[j]] if slot[j] >= 0 else -1
                for j in range(n):  # the path check (paper mode: the start is not on it)
                    node = path[hop + 1, j]
                    if node < 0:
                        continue
                    blocked = False
                    for p in range(1, hop + 1):
                        blocked |= path[p, j] == node
                    if blocked:
                        first = slot[j] - np.int64(ptr[path[hop, j]])
                        walk_number = lo + j
                        path[hop + 1, j] = redraw(
                            ptr, nbr, path, j, hop, first, key, walk_number, kk, vv
                        )
            for j in range(n):
                store(out, lo + j, path[hops, j], streamed)

    prefetch, prefetch_l2 = _prefetch_intrinsic(3), _prefetch_intrinsic(2)
    prefetch_nta = _prefetch_intrinsic(0)
    small_block = 128  # the prefetched lines of a block stay in L1 until read
    # The starts are read once: prefetchnta, as galfast's kernel does, keeps them out of L2 and
    # L3 (1 hop: 187M against 174M walks/s). The ends are not streamed: scalar non-temporal
    # stores made this loop slower (119M walks/s at 1 hop).
    starts_ahead = 256

    @njit(inline="always")
    def take(ptr, nbr, path, slot, j, hop, key, walk):
        # the neighbour in walk j's drawn slot (prefetched), redrawn when on the path
        if slot[j] < 0:
            return -1
        node = np.int64(nbr[slot[j]])
        blocked = False
        for p in range(1, hop + 1):
            blocked |= path[p, j] == node
        if blocked:
            first = slot[j] - np.int64(ptr[path[hop, j]])
            kk, vv = np.empty(hop + 1, np.int64), np.empty(hop + 1, np.int64)
            node = redraw(ptr, nbr, path, j, hop, first, key, walk, kk, vv)
        return node

    @njit(inline="always")
    def draw_slot(ptr, nbr, slot, j, u, key, walk, hop):
        # walk j, at node u (-1: failed), draws its slot of hop `hop` and prefetches it: into
        # L1 at the first hop, into L2 at the later ones, as galfast's kernel does
        slot[j] = -1
        if u >= 0:
            begin, degree = np.int64(ptr[u]), np.int64(ptr[u + 1] - ptr[u])
            if degree > 0:
                slot[j] = begin + draw(key, walk, hop, 0, degree)
                if hop == 0:
                    prefetch(nbr, slot[j])
                else:
                    prefetch_l2(nbr, slot[j])

    @njit(parallel=True, cache=False)
    def walk_prefetched(ptr, nbr, starts, hops, seed, out):
        # hop-major blocks as above, but each draw prefetches its slot and one loop per hop
        # reads, checks and draws (misses overlap the arithmetic); the loop that finishes a
        # block's last hop also starts the next block, so reads stay in flight between blocks
        num_walks = starts.shape[0]
        key = mix(np.uint64(seed))
        per_chunk = 32 * small_block
        for c in prange((num_walks + per_chunk - 1) // per_chunk):
            paths = np.empty((2, hops + 1, small_block), np.int64)
            slots = np.empty((2, small_block), np.int64)
            end = min(num_walks, (c + 1) * per_chunk)
            prev_lo, prev_n, buf = 0, 0, 0
            for lo in range(c * per_chunk, end, small_block):
                n = min(end, lo + small_block) - lo
                path, slot = paths[buf], slots[buf]
                prev_path, prev_slot = paths[1 - buf], slots[1 - buf]
                for j in range(max(n, prev_n)):
                    if j < prev_n:
                        out[prev_lo + j] = take(
                            ptr, nbr, prev_path, prev_slot, j, hops - 1, key, prev_lo + j
                        )
                    if j < n:
                        if j % 8 == 0 and lo + j + starts_ahead < num_walks:
                            prefetch_nta(starts, lo + j + starts_ahead)
                        path[0, j] = starts[lo + j]
                        draw_slot(ptr, nbr, slot, j, path[0, j], key, lo + j, 0)
                for hop in range(hops - 1):
                    for j in range(n):
                        node = take(ptr, nbr, path, slot, j, hop, key, lo + j)
                        path[hop + 1, j] = node
                        draw_slot(ptr, nbr, slot, j, node, key, lo + j, hop + 1)
                prev_lo, prev_n, buf = lo, n, 1 - buf
            prev_path, prev_slot = paths[1 - buf], slots[1 - buf]
            for j in range(prev_n):
                out[prev_lo + j] = take(
                    ptr, nbr, prev_path, prev_slot, j, hops - 1, key, prev_lo + j
                )

    return walk, walk_prefetched


def _stream_intrinsic():
    """stream(array, i, value): array[i] = value as a non-temporal store (LLVM's !nontemporal,
    movnti on x86), which writes the line without reading it first, as galfast's kernel writes
    the ends of a large batch."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def stream(typingctx, array, index, value):
        def codegen(context, builder, signature, args):
            array_type = signature.args[0]
            array_value = context.make_array(array_type)(context, builder, args[0])
            address = cgutils.get_item_pointer(
                context, builder, array_type, array_value, [args[1]], wraparound=False
            )
            item = context.cast(builder, args[2], signature.args[2], array_type.dtype)
            store = builder.store(item, address)
            store.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
            return context.get_dummy_value()

        return types.void(array, index, value), codegen

    return stream


def _prefetch_intrinsic(locality: int):
    """prefetch(array, i): LLVM's prefetch of array[i] (numba has no such call), with LLVM's
    locality: 3 keeps the line in L1 (x86 prefetcht0), 2 in L2 (prefetcht1), 0 reads it past L2
    and L3 (prefetchnta)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, array, index):
        def codegen(context, builder, signature, args):
            array_type = signature.args[0]
            array_value = context.make_array(array_type)(context, builder, args[0])
            address = cgutils.get_item_pointer(
                context, builder, array_type, array_value, [args[1]], wraparound=False
            )
            i32 = ir.IntType(32)
            # one declaration serves arrays of every dtype: the address goes as a byte pointer
            address = builder.bitcast(address, ir.IntType(8).as_pointer())
            fn = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]),
                "llvm.prefetch.p0",
            )
            builder.call(fn, [address, i32(0), i32(locality), i32(1)])  # read, locality, data
            return context.get_dummy_value()

        return types.void(array, index), codegen

    return prefetch


_SPLITMIX_KERNELS = None
# Outputs from this size on are written with non-temporal stores (as galfast's kernel does).
STREAMED_BYTES = 2 << 20


def _streamed(out: np.ndarray) -> bool:
    return out.nbytes >= STREAMED_BYTES


def _splitmix_kernels():
    global _SPLITMIX_KERNELS
    if _SPLITMIX_KERNELS is None:
        _SPLITMIX_KERNELS = _numba_splitmix_kernel()
    return _SPLITMIX_KERNELS


def numba_splitmix_nhop(
    ptr: np.ndarray, nbr: np.ndarray, starts: np.ndarray, hops: int, seed: int = 1
) -> np.ndarray:
    """The appendix algorithm over a CSR (ptr, nbr with distinct rows), compiled with numba:
    hop-major blocks of walks, parallel over chunks of blocks, each draw a SplitMix64 hash of
    (seed, walk, hop, draw) whose slot is prefetched a loop before it is read."""
    out = np.empty(starts.shape[0], np.int64)
    _splitmix_kernels()[1](ptr, nbr, starts, hops, seed, out)
    return out


def numba_splitmix_gather_nhop(
    ptr: np.ndarray, nbr: np.ndarray, starts: np.ndarray, hops: int, seed: int = 1
) -> np.ndarray:
    """The same walks (same results) with the reads of a hop in a gather loop of their own
    instead of prefetches: the previous peer, kept to show what the prefetches gain."""
    out = np.empty(starts.shape[0], np.int64)
    _splitmix_kernels()[0](ptr, nbr, starts, hops, seed, out, _streamed(out))
    return out


def one_hop_slots(ptr: np.ndarray, starts: np.ndarray, seed: int = 0) -> np.ndarray:
    """A uniform slot of each start's row (starts with empty rows are not allowed)."""
    degree = ptr[starts + 1] - ptr[starts]
    draws = np.random.default_rng(seed).random(starts.shape[0])
    return (ptr[starts] + (draws * degree).astype(np.int64)).astype(np.int64)


_READS_KERNEL = None


def reads_only(nbr: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """nbr[slots] as int64 in one compiled loop: the memory floor of a 1-hop walk."""
    global _READS_KERNEL
    if _READS_KERNEL is None:
        from numba import njit

        stream = _stream_intrinsic()

        @njit(cache=False)
        def gather(nbr, slots, out, streamed):
            if streamed:
                for i in range(slots.shape[0]):
                    stream(out, i, nbr[slots[i]])
            else:
                for i in range(slots.shape[0]):
                    out[i] = nbr[slots[i]]

        _READS_KERNEL = gather
    out = np.empty(slots.shape[0], np.int64)
    _READS_KERNEL(nbr, slots, out, _streamed(out))
    return out
