"""The Python twin of csrc/common/philox.h against Random123's known answers. The kernels are
in turn checked bit for bit against this twin (test_sample_neighbors.py), so together these pin
the C++/CUDA generator to the published Philox4x32-10."""

from __future__ import annotations

import pytest
from ref_philox import philox4x32_10

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
