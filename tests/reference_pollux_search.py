"""Plain-Python reference of the Pollux count DP kernel (sim/policies/pollux_kernels.py): the
numpy code ``pollux_kernels.dp_counts`` replaced in ``pollux_search._dp_counts``."""
from __future__ import annotations

import numpy as np


def dp_counts_reference(v: np.ndarray, g: int) -> np.ndarray:
    """GPUs per job minimising ``sum_j v[j, r_j]`` within ``g`` GPUs: ``f[a]`` the least cost
    within ``a`` GPUs, ``choice[k, a]`` the first least-cost ``r``, walked back from ``g``."""
    j, w = v.shape[0], v.shape[1] - 1
    f = np.zeros(g + 1)
    choice = np.zeros((j, g + 1), np.int64)
    idx, r = np.arange(g + 1), np.arange(w + 1)
    for k in range(j):
        # cand[a, r] = f[a - r] + v[k, r]
        prev = np.where(idx[:, None] >= r[None, :], f[np.maximum(idx[:, None] - r[None, :], 0)], np.inf)
        cand = prev + v[k][None, :]
        choice[k] = np.argmin(cand, axis=1)
        f = cand[idx, choice[k]]
    counts = np.zeros(j, np.int64)
    a = g
    for k in range(j - 1, -1, -1):
        counts[k] = choice[k, a]
        a -= counts[k]
    return counts
