"""Plain-Python Philox4x32-10 (Random123's philox4x32 with 10 rounds), the twin of
csrc/common/philox.h that the sampler references check the kernels against."""

from __future__ import annotations

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
