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


# -- the authors' NSGA-II operators: the numpy expressions pollux_kernels' operator kernels replaced
# in PolluxProblem.repair / .mutate and pollux_search._tournament (the same draws, in order)
def repair_reference(problem, states, rng, max_nodes: int = 16):
    s = states.copy() if problem.allowed is None else np.where(problem.allowed[None], states, 0)
    if problem.avoid_interference:
        dist = np.count_nonzero(s, axis=2) > 1
        clash = np.cumsum((s * dist[:, :, None]) > 0, axis=1) > 1
        s[clash] = 0
    shuffle = np.argsort(rng.random(s.shape), axis=2)
    s = np.take_along_axis(s, shuffle, axis=2)
    s = np.diff(np.minimum(np.cumsum(s, axis=2), problem.max_replicas[None, :, None]), axis=2, prepend=0)
    keep = np.diff(np.minimum(np.cumsum(s > 0, axis=2), max_nodes), axis=2, prepend=0)
    s[keep == 0] = 0
    s = np.take_along_axis(s, np.argsort(shuffle, axis=2), axis=2)
    return np.diff(np.minimum(np.cumsum(s, axis=1), problem.capacity[None, None, :]), axis=1, prepend=0)


def mutate_reference(problem, states, rng, reset_p=0.1, zero_job_p=0.1, zero_p=0.1):
    p, j, _ = states.shape
    s = np.where((rng.random((p, j)) < reset_p)[:, :, None], problem.base[None], states)
    prob = np.where(rng.random((p, j)) < zero_job_p, zero_p, 0.0)
    s = np.where(rng.random(s.shape) < prob[:, :, None], 0, s)
    free = problem.capacity[None, :] - s.sum(axis=1)                       # [P, N]
    fits = np.broadcast_to((free >= 1)[:, None, :], s.shape)
    p1 = fits / np.maximum(fits.sum(axis=1, keepdims=True), 1.0)
    has = (s > 0) & fits
    p2 = has / np.maximum(has.sum(axis=1, keepdims=True), 1.0)
    m = rng.random(s.shape) < p1 + p2 - p1 * p2
    high = np.broadcast_to(problem.capacity[None, None, :] + 1, s.shape)
    r = rng.integers(np.minimum(s, high - 1), high)
    return np.where(m, r, s)


def tournament_reference(rank, crowd, f, n, rng):
    m = rank.shape[0]
    perm = np.concatenate([rng.permutation(m) for _ in range(-(-2 * n // m))])[:2 * n]
    a, b = perm[0::2], perm[1::2]
    le = np.all(f[a] <= f[b], axis=1) & np.any(f[a] < f[b], axis=1)
    ge = np.all(f[b] <= f[a], axis=1) & np.any(f[b] < f[a], axis=1)
    return np.where(le, a, np.where(ge, b, np.where(crowd[a] > crowd[b], a,
                                                    np.where(crowd[b] > crowd[a], b,
                                                             np.where(rng.random(n) < 0.5, a, b)))))


# -- NSGA-II's survival keys: the numpy code pollux_kernels.survival_keys replaced in
# pollux_search._survive
def _fronts_reference(f):
    le = np.all(f[:, None, :] <= f[None, :, :], axis=2)
    lt = np.any(f[:, None, :] < f[None, :, :], axis=2)
    dom = le & lt                                  # dom[a, b]: a dominates b
    rank = np.full(f.shape[0], -1)
    count = dom.sum(axis=0)                        # how many dominate each
    cur = count == 0
    r = 0
    while cur.any():
        rank[cur] = r
        count = count - dom[cur].sum(axis=0)
        count[rank >= 0] = -1
        cur = count == 0
        r += 1
    return rank


def _crowding_reference(f):
    n = f.shape[0]
    if n <= 2:
        return np.full(n, np.inf)
    d = np.zeros(n)
    for k in range(f.shape[1]):
        o = np.argsort(f[:, k], kind="stable")
        span = f[o[-1], k] - f[o[0], k]
        d[o[0]] = d[o[-1]] = np.inf
        if span > 0:
            d[o[1:-1]] += (f[o[2:], k] - f[o[:-2], k]) / span
    return d


def _crowding_pymoo_reference(f):
    """pymoo 0.4.2.1's ``calc_crowding_distance`` on one front (its rows in index order), written
    out: duplicates (Euclidean distance below 1e-24 from an earlier row) get 0 and are left out;
    the others' distances to the previous and next row of each sorted objective (-inf / +inf
    beyond the ends), divided by the objective's span, a NaN quotient (span 0) counting 0,
    summed over objectives and divided by their number."""
    n, k = f.shape
    if n <= 2:
        return np.full(n, np.inf)
    dist = np.sqrt(((f[:, None, :] - f[None, :, :]) ** 2).sum(axis=2))
    earlier = np.tril(np.ones((n, n), bool), -1)
    unique = ~np.any(earlier & (dist < 1e-24), axis=1)
    g = f[unique]
    total = np.zeros(g.shape[0])
    for c in range(k):
        o = np.argsort(g[:, c], kind="stable")
        x = g[o, c]
        norm = np.max(x) - np.min(x)
        if norm == 0:
            norm = np.nan
        prev = np.concatenate([[-np.inf], x[:-1]])
        nxt = np.concatenate([x[1:], [np.inf]])
        with np.errstate(invalid="ignore"):
            to_last, to_next = (x - prev) / norm, (nxt - x) / norm
        to_last[np.isnan(to_last)] = 0.0
        to_next[np.isnan(to_next)] = 0.0
        total[o] += to_last + to_next
    out = np.zeros(n)
    out[unique] = total / k
    return out


def _pymoo_fronts_reference(f):
    """The fronts as lists, in the order pymoo 0.4.2.1's ``fast_non_dominated_sort`` builds them:
    each row's dominated rows in row order, the first front in row order, each next front in the
    order its rows' counts of dominators reach 0 while the previous front is walked."""
    n = f.shape[0]
    le = np.all(f[:, None, :] <= f[None, :, :], axis=2)
    lt = np.any(f[:, None, :] < f[None, :, :], axis=2)
    dom = le & lt
    count = dom.sum(axis=0)
    fronts = [[a for a in range(n) if count[a] == 0]]
    while sum(map(len, fronts)) < n:
        nxt = []
        for a in fronts[-1]:
            for b in np.flatnonzero(dom[a]):
                count[b] -= 1
                if count[b] == 0:
                    nxt.append(int(b))
        fronts.append(nxt)
    return fronts


def survival_keys_reference(f, pymoo_crowding=False):
    """(non-domination rank, crowding distance within the rank's front) of each row of ``f``;
    ``pymoo_crowding``: pymoo's crowding over each front in pymoo's order of its rows."""
    rank = _fronts_reference(f)
    crowd = np.zeros(f.shape[0])
    if pymoo_crowding:
        for front in _pymoo_fronts_reference(f) if f.shape[0] else []:
            crowd[front] = _crowding_pymoo_reference(f[front])
        return rank, crowd
    for r in np.unique(rank):
        sel = rank == r
        crowd[sel] = _crowding_reference(f[sel])
    return rank, crowd
