"""NumPy's summation order, compiled (Numba): a kernel that sums with :func:`pairwise_sum`
gets the value ``np.sum`` gives for the same numbers, bit for bit.

NumPy sums float64 runs by pairwise summation (``pairwise_sum_DOUBLE``, numpy/_core/src/umath/
loops_utils.h.src): fewer than 8 numbers one after another from 0.0; up to 128 in eight
running sums (entry j takes every eighth number from j), combined as ``((r0 + r1) + (r2 +
r3)) + ((r4 + r5) + (r6 + r7))``, then the numbers left over; longer runs split in two at
half rounded down to a multiple of 8, each half summed so.  ``a.sum()`` of a 1-D array and
``a.sum(axis=1)`` of a C-ordered 2-D array are this sum over the whole run (checked against
NumPy in tests/test_pairwise_sum.py).  Plain-Python reference: tests/reference_pairwise_sum.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: NumPy's PW_BLOCKSIZE: runs up to this long are summed in eight running sums
BLOCK = 128


@njit(cache=True)
def pairwise_sum(a, lo, n):
    """``a[lo:lo + n]`` summed in NumPy's order (``a``: a 1-D float64 array).  NumPy recurses
    on long runs; here an explicit stack does (Numba's cache does not load recursive
    functions reliably)."""
    if n <= BLOCK:
        return _block_sum(a, lo, n)
    depth = 64                                   # halving: at most 63 levels below the top
    run_lo, run_n, stage = np.empty(depth, np.int64), np.empty(depth, np.int64), np.zeros(depth, np.int64)
    sums = np.empty(depth + 1)
    top, held = 0, 0
    run_lo[0], run_n[0] = lo, n
    while top >= 0:
        k = run_n[top]
        if k <= BLOCK:
            sums[held] = _block_sum(a, run_lo[top], k)
            held += 1
            top -= 1
            continue
        half = k // 2
        half -= half % 8
        if stage[top] == 2:                      # both halves summed: combine them
            held -= 1
            sums[held - 1] = sums[held - 1] + sums[held]
            top -= 1
            continue
        first = stage[top] == 0
        stage[top] += 1
        top += 1
        run_lo[top] = run_lo[top - 1] + (0 if first else half)
        run_n[top] = half if first else k - half
        stage[top] = 0
    return sums[0]


@njit(cache=True)
def _block_sum(a, lo, n):
    """A run of at most BLOCK numbers: one after another below 8, else eight running sums."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    whole = n - n % 8
    while i < whole:
        k = lo + i
        r0 += a[k]
        r1 += a[k + 1]
        r2 += a[k + 2]
        r3 += a[k + 3]
        r4 += a[k + 4]
        r5 += a[k + 5]
        r6 += a[k + 6]
        r7 += a[k + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res
