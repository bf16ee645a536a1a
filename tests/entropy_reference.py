"""Plain-Python float64 reference of the normalized entropy (no numpy in the math).

The same rules as sim.entropy (see its module docstring): C = 1 gives 0; NaN or +inf in
a row, or a row of only -inf, gives NaN; -inf entries are probability 0; the value is
clamped to [0, 1].  Sums use math.fsum and the form H = log k + log1p(r / k) - t / s,
whose terms are all >= 0, so tiny entropies are accurate too.
"""
from __future__ import annotations

import math


def sk_entropy_row(row) -> float:
    """Normalized entropy of one row of logits (any iterable of numbers)."""
    z = [float(v) for v in row]
    c = len(z)
    if c == 0:
        raise ValueError("C = 0")
    if any(math.isnan(v) for v in z):
        return math.nan
    m = max(z)
    if not math.isfinite(m):
        return math.nan
    if c == 1:
        return 0.0
    k = sum(1 for v in z if v == m)
    ds = [v - m for v in z if v != m and v != -math.inf]
    es = [math.exp(d) for d in ds]
    r = math.fsum(es)
    t = math.fsum(d * e for d, e in zip(ds, es))
    h = math.log(k) + math.log1p(r / k) - t / (k + r)
    return min(max(h / math.log(c), 0.0), 1.0)


def sk_entropy_rows(rows) -> list[float]:
    return [sk_entropy_row(r) for r in rows]


def sk_entropy_grouped(rows, groups, n_groups: int) -> list[float]:
    """Mean entropy per group (NaN for an empty group); rows given as None are skipped."""
    sums = [[] for _ in range(n_groups)]
    for row, g in zip(rows, groups):
        if row is None:
            continue
        sums[g].append(sk_entropy_row(row))
    return [math.fsum(s) / len(s) if s else math.nan for s in sums]
