"""The Python twin of csrc/common/philox.h against Random123's known answers. The kernels are
in turn checked bit for bit against this twin (test_sample_nhop.py), so together these pin the
C++/CUDA generator to the published Philox4x32-10."""

from __future__ import annotations

import pytest
from ref_sample_nhop import philox4x32_10, philox_uniform

# Random123 kat_vectors, the "philox4x32 10" lines: counter (4 words), key (2 words), output.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_philox_matches_random123(counter, key, expected):
    assert philox4x32_10(counter, key) == expected


def test_uniform_draw_uses_the_documented_counter_layout():
    seed, walk = 0x0123456789ABCDEF, (7 << 32) | 5
    key = (0x89ABCDEF, 0x01234567)
    # the first draw of hop 6 in attempt 3: word walk % 4 = 1 of the block of walks
    # 4 * (walk // 4) .. + 3, whose counter starts with walk // 4 = (7 << 30) | 1
    block = philox4x32_10((1 | (3 << 30), 1, 3, 6), key)
    assert philox_uniform(seed, walk, 3, 6, 0, 1000) == (block[1] * 1000) >> 32
    # redraw 6 of hop 2: word (6 - 1) % 4 = 1 of the hop's redraw block (6 - 1) // 4 = 1
    block = philox4x32_10((5, 7, 3, (1 << 31) | (2 << 16) | 1), key)
    assert philox_uniform(seed, walk, 3, 2, 6, 1000) == (block[1] * 1000) >> 32


def test_uniform_draw_covers_the_range_evenly():
    counts = [0] * 5
    for walk in range(5000):
        counts[philox_uniform(42, walk, 0, 0, 0, 5)] += 1
    assert all(900 < c < 1100 for c in counts), counts
