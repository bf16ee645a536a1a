"""Numba kernels of Gavel's round mechanism (:mod:`sim.policies.gavel_rounds`): the greedy
pick of the jobs that run this round, and the worker assignment.

Both walk jobs in an order that each pick changes (GPUs left per type, free GPUs per server),
so they are sequential loops; compiled, a round costs microseconds instead of a Python loop
per job.  Plain-Python references: tests/reference_gavel_rounds.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import SimError


def select_jobs(order, queues, thr, pri, scale, left, skip_zero_priority: bool) -> np.ndarray:
    """The type each active job runs on this round (-1: none).

    Args:
        order: int64 [k] the GPU types in the order they are served.
        queues: int64 [m, n] per type, the active jobs by (priority, deficit, allocation)
            descending.
        thr, pri: float64 [n, m] throughputs and priorities; scale: int64 [n] GPUs per job;
        left: int64 [m] GPUs of each type (not modified).
        skip_zero_priority: skip jobs whose priority is 0 (Gavel's FIFO).
    """
    return _select(np.ascontiguousarray(order, np.int64), np.ascontiguousarray(queues, np.int64),
                   np.ascontiguousarray(thr, np.float64), np.ascontiguousarray(pri, np.float64),
                   np.ascontiguousarray(scale, np.int64), np.array(left, np.int64),
                   bool(skip_zero_priority))


@njit(cache=True)
def _select(order, queues, thr, pri, scale, left, skip_zero):
    n = scale.shape[0]
    chosen = np.full(n, -1, np.int64)
    for t in order:
        for q in range(n):
            if left[t] == 0:
                break
            i = queues[t, q]
            if thr[i, t] <= 0.0 or (skip_zero and not pri[i, t] > 0.0):
                continue
            if chosen[i] < 0 and scale[i] <= left[t]:
                chosen[i] = t
                left[t] -= scale[i]
    return chosen


def assign_workers(order, chosen, scale, placeable, prev_type, pl_indptr, pl_nodes, pl_counts,
                   node_type, node_gpus, name: str, job_ids) -> tuple:
    """GPUs for the chosen jobs, type by type in ``order``, largest scale factor first: a job
    that ran on its type keeps its GPUs if they are all still free (lease extension), the
    others (if ``placeable``) take free GPUs walking the type's servers in cluster order with
    one pointer (Gavel's strided assignment).

    Returns (owner int64, nodes int32, counts int32, lease extensions); raises SimError naming
    the job when a type runs out of GPUs."""
    args = [np.ascontiguousarray(a, np.int64) for a in
            (order, chosen, scale, prev_type, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus)]
    owner, nodes, counts, used, kept, bad = _assign(*args[:3], np.ascontiguousarray(placeable, np.bool_),
                                                     *args[3:])
    if bad >= 0:
        raise SimError(f"policy {name}: could not assign {int(scale[bad])} GPUs to job "
                       f"{int(job_ids[bad])}")
    return owner[:used], nodes[:used].astype(np.int32), counts[:used].astype(np.int32), int(kept)


@njit(cache=True)
def _assign(order, chosen, scale, placeable, prev_type, pl_indptr, pl_nodes, pl_counts,
            node_type, node_gpus):
    free = node_gpus.copy()
    size = int(node_gpus.sum()) + 1
    owner = np.empty(size, np.int64)
    nodes = np.empty(size, np.int64)
    counts = np.empty(size, np.int64)
    used = 0
    kept_total = 0
    kept = np.zeros(chosen.shape[0], np.bool_)
    for t in order:
        jobs = np.flatnonzero(chosen == t)
        jobs = jobs[np.argsort(-scale[jobs], kind="mergesort")]
        servers = np.flatnonzero(node_type == t)
        ptr = 0
        g0 = 0
        while g0 < jobs.shape[0]:
            sf = scale[jobs[g0]]
            g1 = g0
            while g1 < jobs.shape[0] and scale[jobs[g1]] == sf:
                g1 += 1
            for q in range(g0, g1):                       # lease extension
                i = jobs[q]
                if prev_type[i] != t:
                    continue
                ok = True
                for e in range(pl_indptr[i], pl_indptr[i + 1]):
                    if free[pl_nodes[e]] < pl_counts[e]:
                        ok = False
                if ok:
                    for e in range(pl_indptr[i], pl_indptr[i + 1]):
                        free[pl_nodes[e]] -= pl_counts[e]
                        owner[used], nodes[used], counts[used] = i, pl_nodes[e], pl_counts[e]
                        used += 1
                    kept[i] = True
                    kept_total += 1
            for q in range(g0, g1):                       # the strided walk
                i = jobs[q]
                if kept[i] or not placeable[i]:
                    continue
                need = sf
                while need > 0:
                    if ptr >= servers.shape[0]:
                        return owner, nodes, counts, used, kept_total, i
                    node = servers[ptr]
                    take = min(need, free[node])
                    if take > 0:
                        free[node] -= take
                        owner[used], nodes[used], counts[used] = i, node, take
                        used += 1
                        need -= take
                    if free[node] == 0:
                        ptr += 1
            g0 = g1
    return owner, nodes, counts, used, kept_total, -1
