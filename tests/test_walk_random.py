"""The n-hop walks' generator (csrc/walk/walk_random.h): its Python twin against SplitMix64's
published outputs, and the documented layout of the draws. The kernels are checked bit for bit
against this twin (test_sample_nhop.py), so together these pin the C++/CUDA generator."""

from __future__ import annotations

import pytest
from ref_sample_nhop import mix64, splitmix64_output, walk_uniform, walk_word

MASK32 = 0xFFFFFFFF

# Outputs of the reference splitmix64.c (Vigna) from states 0 and 1234567 (the latter also in
# Java's SplittableRandom and Rust's rand_xoshiro tests).
KNOWN_ANSWERS = [
    (0, [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]),
    (
        1234567,
        [
            6457827717110365317,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ],
    ),
]


@pytest.mark.parametrize("state,expected", KNOWN_ANSWERS)
def test_splitmix64_matches_the_reference_outputs(state, expected):
    assert [splitmix64_output(state, i) for i in range(len(expected))] == expected


def test_draws_use_the_documented_layout():
    seed, walk = 0x0123456789ABCDEF, (7 << 32) | 5  # an odd walk: the high halves
    gamma = 0x9E3779B97F4A7C15
    pair_key = mix64((mix64(seed) + ((walk // 2) + 1) * gamma) & (2**64 - 1))
    # hop 0 of attempt 0 uses the pair key itself
    assert walk_word(seed, walk, 0, 0, 0) == pair_key >> 32
    assert walk_word(seed, walk - 1, 0, 0, 0) == pair_key & MASK32
    # the first draw of hop 6 in attempt 3: index 3 * 64 + 6 of the pair's stream
    bits = mix64((pair_key + (3 * 64 + 6) * gamma) & (2**64 - 1))
    assert walk_word(seed, walk, 3, 6, 0) == bits >> 32
    assert walk_uniform(seed, walk, 3, 6, 0, 1000) == ((bits >> 32) * 1000) >> 32
    # redraw 6 of hop 2: index 2^40 + ((3 * 64 + 2) * 32 + 5 // 2) * 2 + 1, high half (6 even)
    index = (1 << 40) + ((3 * 64 + 2) * 32 + 2) * 2 + 1
    bits = mix64((pair_key + index * gamma) & (2**64 - 1))
    assert walk_word(seed, walk, 3, 2, 6) == bits >> 32
    assert walk_word(seed, walk, 3, 2, 5) == bits & MASK32


def test_uniform_draw_covers_the_range_evenly():
    counts = [0] * 5
    for walk in range(5000):
        counts[walk_uniform(42, walk, 0, 0, 0, 5)] += 1
    assert all(900 < c < 1100 for c in counts), counts


def test_every_draw_of_a_walk_uses_distinct_bits():
    # first draws of all hops and attempts, and redraws, never share an index of one pair
    words = {
        (attempt, hop, draw): walk_word(7, 10, attempt, hop, draw)
        for attempt in range(3)
        for hop in range(32)
        for draw in range(8)
    }
    assert len(set(words.values())) == len(words)
