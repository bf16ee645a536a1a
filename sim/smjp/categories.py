"""Feasible solution categories: how many workers each job gets (paper 2, §3.4 of algorithms.md).

A category is a vector ``K`` with ``kmin_i <= K_i <= kmax_i`` and ``sum K <= total`` free workers.
:func:`enumerate_categories` lists them all (small instances); :func:`sample_categories` draws
``n`` around the work-proportional split: always the split proportional to ``w_i^theta`` and the
equal split, the rest ``kmin + Multinomial(total - sum kmin, pi)``, ``pi ~ w^theta``, with the
work ``w_i = T_i P_i / rho_bar_i`` (``theta`` = 1: proportional to work, 0: equal split).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["enumerate_categories", "bounded_split", "sample_categories", "work_weights"]


def enumerate_categories(kmin: np.ndarray, kmax: np.ndarray, total: int,
                         exact_sum: bool = False) -> np.ndarray:
    """int64 [n_categories, S]: every ``K`` within the bounds with ``sum K <= total`` (``==``
    with ``exact_sum``), in lexicographic order."""
    kmin, kmax = np.asarray(kmin, np.int64), np.asarray(kmax, np.int64)
    cats = np.zeros((1, 0), np.int64)
    rest_min = np.concatenate([np.cumsum(kmin[::-1])[::-1], [0]])
    for i in range(kmin.shape[0]):
        used = cats.sum(axis=1)
        k = np.arange(kmin[i], kmax[i] + 1)
        ok = used[:, None] + k[None, :] + rest_min[i + 1] <= total
        r, c = np.nonzero(ok)
        cats = np.column_stack([cats[r], k[c]])
    if exact_sum:
        cats = cats[cats.sum(axis=1) == min(total, int(kmax.sum()))]
    return cats


def bounded_split(weights: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, total: int) -> np.ndarray:
    """``total`` workers split proportionally to ``weights`` within ``[kmin, kmax]`` (water
    filling, integers by largest remainder).  ``total`` is capped at ``sum kmax``."""
    k = np.asarray(kmin, np.int64).copy()
    kmax = np.asarray(kmax, np.int64)
    left = min(int(total), int(kmax.sum())) - int(k.sum())
    if left < 0:
        raise ConfigError(f"SMJP: {int(k.sum())} workers needed at least, only {total} free")
    w = np.maximum(np.asarray(weights, float), 0.0)
    while left > 0:
        room = kmax - k
        ww = np.where(room > 0, w, 0.0)
        if ww.sum() <= 0:
            ww = (room > 0).astype(float)
        share = np.minimum(left * ww / ww.sum(), room)
        add = np.floor(share).astype(np.int64)
        if add.sum() == 0:                      # largest remainders, one each
            order = np.argsort(-(share - add), kind="stable")
            add[order[:left]] = 1
            add = np.minimum(add, room)
        k += add
        left -= int(add.sum())
    return k


def work_weights(remaining, P, rho_bar, theta: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(rho_bar > 0, remaining * P / rho_bar, 0.0)
    return np.power(w / max(float(w.max(initial=0.0)), 1e-300), theta)


def sample_categories(weights: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, total: int,
                      n: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [<= n, S] distinct categories that use ``min(total, sum kmax)`` workers: the
    split proportional to ``weights``, the equal split, then multinomial draws around them."""
    S = len(kmin)
    first = [bounded_split(weights, kmin, kmax, total), bounded_split(np.ones(S), kmin, kmax, total)]
    extra = max(int(n) - 2, 0)
    if extra:
        left = min(int(total), int(np.sum(kmax))) - int(np.sum(kmin))
        pi = np.asarray(weights, float) + 1e-12
        draws = rng.multinomial(left, pi / pi.sum(), size=extra) + np.asarray(kmin)[None, :]
        first += list(_repair(draws, np.asarray(kmax), pi, rng))
    cats = np.asarray(first, np.int64)
    _, idx = np.unique(cats, axis=0, return_index=True)
    return cats[np.sort(idx)][:max(int(n), 1)]


def _repair(draws: np.ndarray, kmax: np.ndarray, pi: np.ndarray, rng) -> np.ndarray:
    """Clip draws [n, S] to ``kmax`` and hand what was cut from each to its jobs with room,
    drawn again by ``pi`` (all draws over the limit at once, until none is)."""
    k = np.minimum(draws, kmax[None, :])
    cut = (draws - k).sum(axis=1)
    while np.any(cut > 0):
        rows = np.flatnonzero(cut > 0)
        room = kmax[None, :] - k[rows]
        p = np.where(room > 0, pi[None, :], 0.0)
        add = np.minimum(rng.multinomial(cut[rows], p / p.sum(axis=1, keepdims=True)), room)
        k[rows] += add
        cut[rows] -= add.sum(axis=1)
    return k
