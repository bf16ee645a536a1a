"""Inside a category: the matching market, node packing and pairwise-swap local search.

Given a category ``K`` (workers per job), job i is split into ``K_i`` identical slots and the
free workers are the goods.  Each slot values a worker of class c at the first-order reduction
of its job's completion time, ``v[i,c] = T_i P_i rho[i,c] / (K_i rho_bar_i)^2`` (``rho_bar_i``:
mean throughput of the job's ``K_i`` fastest free workers; ``-inf`` where ``rho`` is 0).  The
market clears by an ascending-price auction: an unassigned slot bids for the cheapest worker of
its best class (payoff ``v - price``), raising that worker's price by its margin over the
second-best payoff plus ``eps``; an outbid slot bids again.  This is Demange, Gale and
Sotomayor's ascending auction in Bertsekas' eps form, run with eps-scaling; at the end the
assignment is within ``workers * eps`` of the best total value (dummy bidders valuing every
worker at 0 square the market), which :func:`lsa_assignment`
(scipy's exact Hungarian-type solver on the expanded matrix) checks.  Workers of one class are
interchangeable, so each class keeps its workers' prices in a min-heap.

The market's classes are then packed onto nodes (:func:`pack`), after a pairwise-swap local
search on the true (nonlinear) completion times at class level (:func:`local_search`).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from .instance import Classes, Instance
from .latency import GBIT_BYTES

__all__ = ["valuations", "category_valuations", "matchable", "auction", "lsa_assignment",
           "local_search", "class_times", "pack", "solve_category", "solve_categories"]


def valuations(inst: Instance, cls: Classes, K: np.ndarray) -> np.ndarray:
    """float64 [S, C] value of one worker of each class to one slot of each job."""
    return category_valuations(inst, cls, np.asarray(K)[None, :])[0]


def category_valuations(inst: Instance, cls: Classes, cats: np.ndarray) -> np.ndarray:
    """float64 [n, S, C]: :func:`valuations` of each category ``cats`` [n, S] at once."""
    order = np.argsort(-cls.rho, axis=1, kind="stable")
    capo = cls.cap[order]
    before = np.cumsum(capo, axis=1) - capo
    take = np.clip(cats[:, :, None] - before[None], 0, capo[None])
    best = np.take_along_axis(cls.rho, order, axis=1)
    rbar = (take * best[None]).sum(axis=2) / np.maximum(cats, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(rbar > 0, inst.remaining * inst.P / (cats * rbar) ** 2, 0.0)
    return np.where(cls.rho[None] > 0, scale[:, :, None] * cls.rho[None], -np.inf)


#: eps falls by this factor between the auction's eps-scaling phases (our choice, measured:
#: factors 4-10 beat 30 and 100 on the scale part of scalability/smjp_experiment.py)
EPS_FACTOR = 5.0


def _eps_schedule(value: np.ndarray, rel: float) -> np.ndarray:
    return _eps_schedules(value[None], rel)[0]


def _eps_schedules(values: np.ndarray, rel: float) -> np.ndarray:
    """[n, steps] eps of each market ``values`` [n, S, C]: from a quarter of its span of
    finite values down by EPS_FACTOR to ``rel`` of it."""
    finite = np.isfinite(values)
    hi = np.where(finite, values, -np.inf).max(axis=(1, 2), initial=-np.inf)
    lo = np.where(finite, values, np.inf).min(axis=(1, 2), initial=np.inf)
    top = np.where(finite, np.abs(values), 0.0).max(axis=(1, 2), initial=0.0)
    span = np.where(np.isfinite(hi), hi - lo, 0.0)
    span = np.where(span > 0, span, np.maximum(top, 1.0))
    steps = int(np.ceil(np.log(0.25 / rel) / np.log(EPS_FACTOR))) + 1
    return span[:, None] * 0.25 * np.power(1.0 / EPS_FACTOR, np.arange(steps))[None, :]


def matchable(allowed: np.ndarray, K: np.ndarray, cap: np.ndarray) -> bool:
    """Can every job get its ``K_i`` workers from classes it may use (``allowed`` [S, C])?
    A max flow source -> jobs -> classes -> sink."""
    S, C = allowed.shape
    if allowed.all():
        return int(K.sum()) <= int(cap.sum())
    r, c = np.nonzero(allowed)
    src = np.concatenate([np.zeros(S, np.int64), 1 + r, 1 + S + np.arange(C)])
    dst = np.concatenate([1 + np.arange(S), 1 + S + c, np.full(C, 1 + S + C)])
    w = np.concatenate([K, np.full(r.size, int(K.sum())), cap]).astype(np.int32)
    g = csr_matrix((w, (src, dst)), shape=(S + C + 2, S + C + 2))
    return int(maximum_flow(g, 0, S + C + 1).flow_value) == int(K.sum())


def auction(value: np.ndarray, K: np.ndarray, cap: np.ndarray, rel_eps: float = 1e-6):
    """The ascending-price market: (y [S, C] workers of each class per job, or None when the
    slots cannot all be matched; the final eps)."""
    if not matchable(np.isfinite(value), K, cap):
        return None, 0.0
    S, C = value.shape
    cap = np.minimum(np.asarray(cap, np.int64), int(K.sum()))
    # dummy bidders that value every worker at 0 take the workers nobody needs: a square
    # market, where eps-complementary slackness bounds the loss at every eps-scaling phase
    slots = np.repeat(np.arange(S + 1, dtype=np.int64), np.append(K, int(cap.sum() - K.sum())))
    eps = _eps_schedule(value, rel_eps)
    ext = np.vstack([np.asarray(value, float), np.zeros((1, C))])
    ok, y = _auction(ext, slots, cap, eps)
    return (y[:S] if ok else None), float(eps[-1])


@njit(cache=True)
def _sift_down(hp, hu, c, size):
    k = 0
    while True:
        a, b, m = 2 * k + 1, 2 * k + 2, k
        if a < size and hp[c, a] < hp[c, m]:
            m = a
        if b < size and hp[c, b] < hp[c, m]:
            m = b
        if m == k:
            return
        hp[c, k], hp[c, m] = hp[c, m], hp[c, k]
        hu[c, k], hu[c, m] = hu[c, m], hu[c, k]
        k = m


@njit(cache=True)
def _auction(value, slot_job, cap, eps_list):
    S, C = value.shape
    n = slot_job.shape[0]
    size = np.minimum(cap, n)
    width = max(size.max() if C else 1, 1)
    hp = np.zeros((C, width))
    hu = np.full((C, width), -1, np.int64)
    unit_cls = np.empty(size.sum(), np.int64)
    u = 0
    for c in range(C):
        for j in range(size[c]):
            hu[c, j] = u
            unit_cls[u] = c
            u += 1
    owner = np.full(u, -1, np.int64)
    slot_unit = np.full(n, -1, np.int64)
    stack = np.empty(n, np.int64)
    vmax = 0.0
    for i in range(S):
        for c in range(C):
            if np.isfinite(value[i, c]):
                vmax = max(vmax, abs(value[i, c]))
    reach = (2.0 * vmax + eps_list[0]) * (2 * n + 2)
    y = np.zeros((S, C), np.int64)
    for eps in eps_list:
        # the market is square (every worker is taken), so lowering every price by the same
        # amount keeps eps-complementary slackness: start each phase with the cheapest worker
        # at 0, and a phase whose prices climb past ``reach`` above the dearest start price is
        # stuck (infeasible), never merely slow
        low, high = np.inf, -np.inf
        for c in range(C):
            for j in range(size[c]):
                low = min(low, hp[c, j])
        for c in range(C):
            for j in range(size[c]):
                hp[c, j] -= low
                high = max(high, hp[c, j])
        limit = high + reach
        owner[:] = -1
        slot_unit[:] = -1
        for s in range(n):
            stack[s] = n - 1 - s
        top = n
        while top > 0:
            top -= 1
            s = stack[top]
            i = slot_job[s]
            best, second, bc = -np.inf, -np.inf, -1
            for c in range(C):
                if size[c] == 0 or not np.isfinite(value[i, c]):
                    continue
                pay = value[i, c] - hp[c, 0]
                if pay > best:
                    second, best, bc = best, pay, c
                elif pay > second:
                    second = pay
            if bc < 0 or hp[bc, 0] > limit:
                return False, y
            if size[bc] > 1:
                m2 = hp[bc, 1]
                if size[bc] > 2 and hp[bc, 2] < m2:
                    m2 = hp[bc, 2]
                second = max(second, value[i, bc] - m2)
            if second == -np.inf:
                second = best
            unit = hu[bc, 0]
            prev = owner[unit]
            owner[unit] = s
            slot_unit[s] = unit
            hp[bc, 0] += best - second + eps
            _sift_down(hp, hu, bc, size[bc])
            if prev >= 0:
                slot_unit[prev] = -1
                stack[top] = prev
                top += 1
    for s in range(n):
        y[slot_job[s], unit_cls[slot_unit[s]]] += 1
    return True, y


def lsa_assignment(value: np.ndarray, K: np.ndarray, cap: np.ndarray):
    """The exact optimum of the same market (scipy.optimize.linear_sum_assignment on slots x
    workers): (y [S, C] or None if infeasible, total value)."""
    slots = np.repeat(np.arange(value.shape[0]), K)
    units = np.repeat(np.arange(value.shape[1]), np.minimum(cap, slots.size))
    w = value[slots][:, units]
    forbidden = ~np.isfinite(w)
    big = (np.abs(w[~forbidden]).max(initial=1.0) + 1.0) * (slots.size + 1) * 4
    r, c = linear_sum_assignment(np.where(forbidden, -big, w), maximize=True)
    if r.size < slots.size or forbidden[r, c].any():
        return None, -np.inf
    y = np.zeros(value.shape, np.int64)
    np.add.at(y, (slots[r], units[c]), 1)
    return y, float(w[r, c].sum())


@njit(cache=True)
def _job_time(i, y, rho, P, grad, node_max, intra, inter):
    """Class-level estimate of one job's iteration time (continuous shares): one node when
    all its workers are of one class and fit on that class's largest free node."""
    n, rsum, ncls, last, imin = 0, 0.0, 0, -1, np.inf
    for c in range(y.shape[1]):
        if y[i, c] > 0:
            if rho[i, c] <= 0:
                return np.inf
            n += y[i, c]
            rsum += y[i, c] * rho[i, c]
            ncls += 1
            last = c
            imin = min(imin, inter[c])
    if n == 0:
        return np.inf
    r = intra[last] if ncls == 1 and y[i, last] <= node_max[last] else imin
    comm = 0.0
    if n > 1:
        comm = 2.0 * (n - 1) / n * grad[i] / r if r > 0 else np.inf
    return P[i] / rsum + comm


@njit(cache=True)
def _class_times(y, rho, P, grad, node_max, intra, inter):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = _job_time(i, y, rho, P, grad, node_max, intra, inter)
    return out


def _class_args(inst: Instance, cls: Classes):
    return (cls.rho, inst.P.astype(float), inst.grad.astype(float), cls.node_max,
            cls.intra * GBIT_BYTES, cls.inter * GBIT_BYTES)


def class_times(inst: Instance, y: np.ndarray) -> np.ndarray:
    """Seconds per iteration of each job, estimated from its workers per class."""
    return _class_times(np.ascontiguousarray(y, np.int64), *_class_args(inst, inst.classes))


@njit(cache=True)
def _local_search(y, free, kmin, T, rho, P, grad, node_max, intra, inter, passes):
    S, C = y.shape
    cost = np.empty(S)
    for i in range(S):
        cost[i] = T[i] * _job_time(i, y, rho, P, grad, node_max, intra, inter)
    moves = 0
    for _ in range(passes):
        improved = False
        for a in range(S):
            for c in range(C):
                if y[a, c] > 0 and y[a].sum() > kmin[a]:      # release a worker
                    y[a, c] -= 1
                    na = T[a] * _job_time(a, y, rho, P, grad, node_max, intra, inter)
                    if na < cost[a] * (1 - 1e-12):
                        cost[a] = na
                        free[c] += 1
                        moves += 1
                        improved = True
                    else:
                        y[a, c] += 1
                for d in range(C):
                    if d == c or y[a, c] == 0:
                        continue
                    if free[d] > 0:                       # to an idle worker
                        y[a, c] -= 1
                        y[a, d] += 1
                        na = T[a] * _job_time(a, y, rho, P, grad, node_max, intra, inter)
                        if na < cost[a] * (1 - 1e-12):
                            cost[a] = na
                            free[d] -= 1
                            free[c] += 1
                            moves += 1
                            improved = True
                            continue
                        y[a, c] += 1
                        y[a, d] -= 1
                    for b in range(S):                    # swap with another job
                        if b == a or y[b, d] == 0 or y[a, c] == 0:
                            continue
                        y[a, c] -= 1
                        y[a, d] += 1
                        y[b, d] -= 1
                        y[b, c] += 1
                        na = T[a] * _job_time(a, y, rho, P, grad, node_max, intra, inter)
                        nb = T[b] * _job_time(b, y, rho, P, grad, node_max, intra, inter)
                        if na + nb < (cost[a] + cost[b]) * (1 - 1e-12):
                            cost[a], cost[b] = na, nb
                            moves += 1
                            improved = True
                        else:
                            y[a, c] += 1
                            y[a, d] -= 1
                            y[b, d] += 1
                            y[b, c] -= 1
        if not improved:
            break
    return moves


def local_search(inst: Instance, y: np.ndarray, passes: int = 2) -> int:
    """Improve ``y`` in place while the sum of ``T_i`` x iteration time falls: release one
    worker of a job (down to ``kmin``, when the all-reduce costs more than the worker brings),
    move one to an idle worker of another class, or swap one between two jobs; at most
    ``passes`` sweeps.  Returns the number of moves."""
    cls = inst.classes
    free = cls.cap - y.sum(axis=0)
    return int(_local_search(y, free, inst.kmin.astype(np.int64), inst.remaining.astype(float),
                             *_class_args(inst, cls), int(passes)))


def pack(inst: Instance, y: np.ndarray) -> np.ndarray:
    """Node placement x [S, N] of class counts y [S, C]: within each class, jobs that use one
    class go first, those with the most all-reduce traffic to keep inside a node
    (``T_i D_i (n_i - 1) / n_i``) before the others, each on the fullest node that holds it
    (best fit), else over the nodes with most free workers."""
    cls = inst.classes
    free = inst.cap.astype(np.int64).copy()
    x = np.zeros(inst.rho.shape, np.int64)
    multi = (y > 0).sum(axis=1) > 1
    n = np.maximum(y.sum(axis=1), 1)
    traffic = inst.remaining * inst.grad * (n - 1) / n
    for c in np.flatnonzero(y.sum(axis=0) > 0):
        nodes = np.flatnonzero(cls.of_node == c)
        jobs = np.flatnonzero(y[:, c] > 0)
        jobs = jobs[np.lexsort((-y[jobs, c], -traffic[jobs], multi[jobs]))]
        for i in jobs:
            need = int(y[i, c])
            f = free[nodes]
            fit = np.flatnonzero(f >= need)
            if fit.size:
                n = nodes[fit[np.argmin(f[fit])]]
                x[i, n] += need
                free[n] -= need
                continue
            for n in nodes[np.argsort(-f, kind="stable")]:
                take = min(need, int(free[n]))
                x[i, n] += take
                free[n] -= take
                need -= take
                if need == 0:
                    break
    return x


def solve_category(inst: Instance, K: np.ndarray):
    """The market of one category: (y [S, C], estimated iteration times [S]), or None when
    the category cannot be matched."""
    return solve_categories(inst, np.asarray(K, np.int64)[None, :])[0]


def solve_categories(inst: Instance, cats: np.ndarray, rel_eps: float = 1e-6) -> list:
    """:func:`solve_category` of each category ``cats`` [n, S], the markets cleared in one
    Numba call (the same auction as :func:`auction`)."""
    cls = inst.classes
    cats = np.ascontiguousarray(cats, np.int64)
    values = category_valuations(inst, cls, cats)
    allowed = np.isfinite(values[0]) if cats.shape[0] else np.ones((0, 0), bool)
    ok = np.array([matchable(allowed, K, cls.cap) for K in cats], bool)
    ys, times, cleared = _solve_markets(values, cats, cls.cap.astype(np.int64),
                                        _eps_schedules(values, rel_eps), ok,
                                        *_class_args(inst, cls))
    return [(ys[k], times[k]) if cleared[k] else None for k in range(cats.shape[0])]


@njit(cache=True)
def _solve_markets(values, cats, cap, eps, ok, rho, P, grad, node_max, intra, inter):
    n, S, C = values.shape
    ys = np.zeros((n, S, C), np.int64)
    times = np.full((n, S), np.inf)
    cleared = np.zeros(n, np.bool_)
    ext = np.zeros((S + 1, C))
    for k in range(n):
        if not ok[k]:
            continue
        total = cats[k].sum()
        capk = np.minimum(cap, total)
        slots = np.repeat(np.arange(S + 1), np.append(cats[k], capk.sum() - total))
        ext[:S] = values[k]
        done, y = _auction(ext, slots, capk, eps[k])
        if done:
            ys[k] = y[:S]
            times[k] = _class_times(ys[k], rho, P, grad, node_max, intra, inter)
            cleared[k] = True
    return ys, times, cleared
