"""Numba kernel of our Pollux search's count DP (:func:`sim.policies.pollux_search.dp_search`).

The DP chooses each job's GPU count minimising ``sum_j v[j, r_j]`` under the cluster's GPUs: a
knapsack over jobs in order, ``f_k[a] = min_r f_{k-1}[a - r] + v[k, r]`` (``f_0 = 0``: ``f[a]``
is the least cost within ``a`` GPUs), the first ``r`` of least cost kept as ``choice[k, a]``,
then a walk back from ``a = G``.  The kernel gives the same counts as the numpy version it
replaced (tests/reference_pollux_search.py holds it to that, bit for bit) and is cheaper in two
exact ways:

* only a job's finite entries are tried (``r`` above its cap costs ``inf`` and never wins;
  ``r = 0`` is always finite, so every ``a`` has a finite candidate);
* ``f_k`` is constant for ``a`` at or above the sum of the first ``k`` jobs' largest finite
  ``r`` (``top_k``): every candidate there reads the constant part of ``f_{k-1}``, so the table
  stops at ``min(G, top_k)`` and the walk back reads ``choice[k, min(a, top_k)]``.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def dp_counts(v: np.ndarray, g: int) -> np.ndarray:
    """GPUs per job (rows of ``v``, float64 ``[J, W + 1]``, ``v[j, r]`` the cost of ``r``
    GPUs, ``inf`` where ``r`` is not allowed; ``v[j, 0]`` finite) within ``g`` GPUs."""
    v = np.ascontiguousarray(v, np.float64)
    if v.shape[0] and not np.all(np.isfinite(v[:, 0])):
        raise ValueError("dp_counts: v[:, 0] must be finite (0 GPUs is always allowed)")
    if np.isnan(v).any():
        raise ValueError("dp_counts: v has NaN")
    return _dp_counts(v, int(g))


@njit(cache=True)
def _dp_counts(v, g):
    j, w = v.shape[0], v.shape[1]
    top = np.zeros(j, np.int64)           # min(g, sum of the first k + 1 jobs' largest finite r)
    acc = 0
    for k in range(j):
        last = 0
        for r in range(min(w, g + 1)):
            if v[k, r] < np.inf:
                last = r
        acc = min(g, acc + last)
        top[k] = acc
    f = np.zeros(g + 1)
    nf = np.zeros(g + 1)
    choice = np.zeros((j, g + 1), np.int32)
    rs = np.empty(w, np.int64)
    lo = 0                                  # f's constant part starts at lo
    for k in range(j):
        n = 0
        for r in range(min(w, g + 1)):
            if v[k, r] < np.inf:
                rs[n] = r
                n += 1
        hi = top[k]
        for a in range(hi + 1):
            best = np.inf
            bi = 0
            for q in range(n):
                r = rs[q]
                if r > a:
                    break
                c = f[min(a - r, lo)] + v[k, r]
                if c < best:
                    best = c
                    bi = r
            choice[k, a] = bi
            nf[a] = f[min(a - bi, lo)] + v[k, bi]
        for a in range(hi + 1):
            f[a] = nf[a]
        lo = hi
    counts = np.zeros(j, np.int64)
    a = g
    for k in range(j - 1, -1, -1):
        c = choice[k, min(a, top[k])]
        counts[k] = c
        a -= c
    return counts
