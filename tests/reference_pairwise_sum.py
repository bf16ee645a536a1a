"""Plain-Python reference of sim/pairwise_sum.py: NumPy's pairwise summation order."""
from __future__ import annotations


def pairwise_sum_reference(a, lo: int, n: int) -> float:
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += float(a[i])
        return res
    if n <= 128:
        r = [float(a[lo + j]) for j in range(8)]
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += float(a[lo + i + j])
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for k in range(i, n):
            res += float(a[lo + k])
        return res
    half = n // 2
    half -= half % 8
    return pairwise_sum_reference(a, lo, half) + pairwise_sum_reference(a, lo + half, n - half)
