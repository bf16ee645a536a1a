"""Elastic GPU quotas shared by the EGHS family: admission in priority order, water-filling
of GPUs by weighted marginal gain with the restart cost, and the throughput table they use.

* admission, in the given order: a running job stays if its minimum still fits; a waiting
  job is admitted if its minimum fits in the GPUs not reserved by the minimums of the
  admitted jobs and of the running jobs not yet visited, or if ``U_j >= theta_med`` and its
  minimum fits next to the admitted ones (it may then displace lower-ranked running jobs);
* quotas: greedy water-filling from each admitted job's minimum ``R_min``: GPUs go to the
  largest ``gainw_j * (thr_j(n') - thr_j(n)) / (n' - n) / thr_j(1)``, times the restart
  factor, until GPUs run out or no gain is positive; capped at ``R_max``.  ``n'`` is the next
  vertex of the upper concave envelope of ``thr_j`` above ``n`` (a jump over a throughput
  dip, e.g. the LM table's 2 -> 8 GPUs; a jump that does not fit leaves the job where it is);
* restart factor (Pollux's, algorithms.md §5.5): ``r_j = max(r_min, (age_j - restarts_j
  delta_j) / (age_j + delta_j))``; for a running job at ``c`` GPUs, steps beyond ``c`` are
  multiplied by ``r_j`` and steps back up to ``c`` divided by it.
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit


@njit(cache=True)
def _next_size(thr, i, n, rmax):
    """The next vertex of the upper concave envelope of thr[i, n..rmax] after n (the size
    a job grows to next: water-filling walks through throughput dips, e.g. a table whose
    rate at 3-4 GPUs is below that at 2 but far above at 8).  Returns (size, gain per GPU)."""
    best = -np.inf
    nxt = n
    for m in range(n + 1, rmax + 1):
        s = (thr[i, m] - thr[i, n]) / (m - n)
        if s > best:           # ties: the smaller size (one GPU at a time where thr is linear)
            best = s
            nxt = m
    return nxt, best


@njit(cache=True)
def admit_fill(order, running, rmin, rmax, cur, U, theta_med, gainw, thr, total, rfac):
    """Admission and water-filling (module docstring).  Returns GPUs per active job."""
    n = rmin.shape[0]
    alloc = np.zeros(n, np.int64)
    admitted = np.zeros(n, np.bool_)
    reserved = 0
    for i in range(n):
        if running[i]:
            reserved += rmin[i]
    used = 0
    for p in range(order.shape[0]):
        i = order[p]
        if running[i]:
            reserved -= rmin[i]
            if used + rmin[i] <= total:
                admitted[i] = True
        else:
            free = total - used - reserved
            if rmin[i] <= free or (U[i] >= theta_med and used + rmin[i] <= total):
                admitted[i] = True
        if admitted[i]:
            alloc[i] = rmin[i]
            used += rmin[i]
    left = total - used
    heap = [(0.0, np.int64(0), np.int64(0))]
    heap.pop()
    for p in range(order.shape[0]):
        i = order[p]
        if admitted[i] and alloc[i] < rmax[i]:
            m, g = _step_gain(i, alloc[i], rmax[i], running, cur, gainw, thr, rfac)
            if g > 0:
                heapq.heappush(heap, (-g, p, m))
    while left > 0 and len(heap) > 0:
        negg, p, m = heapq.heappop(heap)
        i = order[p]
        need = m - alloc[i]
        if need > left:
            continue           # the next size does not fit: the job stays where it is
        alloc[i] = m
        left -= need
        if alloc[i] < rmax[i]:
            m2, g = _step_gain(i, alloc[i], rmax[i], running, cur, gainw, thr, rfac)
            if g > 0:
                heapq.heappush(heap, (-g, p, m2))
    return alloc


@njit(cache=True)
def _step_gain(i, n, rmax, running, cur, gainw, thr, rfac):
    """(next size, weighted gain per GPU) of growing job i from n GPUs."""
    t1 = thr[i, 1]
    if t1 <= 0:
        return n, 0.0
    m, s = _next_size(thr, i, n, rmax)
    g = gainw[i] * s / t1
    if running[i]:
        if m > cur[i]:
            g *= rfac[i]
        else:
            g /= rfac[i]
    return m, g


def restart_factor(age, restarts, delay, floor) -> np.ndarray:
    """Pollux's restart factor ``max(floor, (age - restarts delay) / (age + delay))``."""
    return np.maximum((age - restarts * delay) / (age + delay + 1e-12), floor)


def throughput_table(oracle, model, gpus_max, cluster) -> np.ndarray:
    """thr[job, n] for n = 0..max(gpus_max)+1: the oracle's rate at n GPUs of the cluster's
    first GPU type on the fewest nodes (``ceil(n / largest node)``; its spread rate beyond
    one node), speed 1."""
    kc = int(max(gpus_max.max() if len(gpus_max) else 1, 1)) + 1
    models = np.arange(int(model.max()) + 1 if len(model) else 1)
    m, k = np.meshgrid(models, np.arange(kc + 1), indexing="ij")
    per_node = int(np.max(cluster.node_gpus))
    nn = np.maximum(1, -(-k // per_node))
    tab = np.asarray(oracle.rates(m.ravel(), k.ravel(), nn.ravel(), np.ones(m.size, np.int64),
                                  np.ones(m.size), tuple(cluster.gpu_types)), float).reshape(m.shape)
    tab[:, 0] = 0.0
    return np.ascontiguousarray(tab[model])
