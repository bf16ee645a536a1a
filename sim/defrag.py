"""Defragmentation: re-place spread jobs onto fewer nodes when room appears (issue 16).

A job that starts spread over several nodes (no node had room) keeps that placement under
the greedy placer as long as its GPU count does not change; with Gavel's unconsolidated
rates (LM: ~8x slower) it can then run for weeks.  A policy that wants it sets the class
flag ``defragment = True`` (or the constructor parameter of the same name where it has
one); the engine (``sim.engine``, and the reference engine of the tests) then passes the
policy's plan through :func:`defragment_plan` before applying it.

Rule (every choice ours [I]):

* candidates: placed jobs whose plan spans more nodes than ``ceil(GPUs / largest node)``
  and whose placement the plan does not already change, most nodes spanned first (ties:
  position in the active list);
* each candidate is re-placed with the consolidated placer (``sim.placement.place_one``)
  on the GPUs left free by the plan plus its own; GPUs freed by other candidates are not
  reused, so any subset of the moves is a valid plan;
* a move is kept when it spans fewer nodes and, with a throughput oracle in the state, its
  rate is at least ``1 + min_gain`` times the current one (``DEFRAG_MIN_GAIN``); the
  moved job pays its restart delay like any other placement change (the engine's rule).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .errors import ConfigError
from .placement import CONSOLIDATED, place_one, placement_summary
from .state import Plan, SchedState

#: a move must make the job at least this much faster (relative rate gain) [I]
DEFRAG_MIN_GAIN = 0.10


@njit(cache=True)
def _candidates(indptr, nodes, counts, cur_indptr, cur_nodes, cur_counts, free, node_type,
                n_types, per_node):
    """Consolidated re-placements of spread jobs.  Returns (job index per move, CSR of the
    new placements).  ``free`` (GPUs left by the plan) is updated for the moves."""
    n = indptr.shape[0] - 1
    gpus = np.zeros(n, np.int64)
    span = np.zeros(n, np.int64)
    for i in range(n):
        span[i] = indptr[i + 1] - indptr[i]
        for k in range(indptr[i], indptr[i + 1]):
            gpus[i] += counts[k]
    order = np.argsort(-span, kind="mergesort")
    jobs = np.empty(n, np.int64)
    new_indptr = np.zeros(n + 1, np.int64)
    new_nodes = np.empty(counts.sum(), np.int32)
    new_counts = np.empty(counts.sum(), np.int32)
    m = 0
    for p in range(n):
        i = order[p]
        if span[i] <= 1 or span[i] <= (gpus[i] + per_node - 1) // per_node:
            continue
        lo, hi, clo, chi = indptr[i], indptr[i + 1], cur_indptr[i], cur_indptr[i + 1]
        same = (hi - lo) == (chi - clo)
        for k in range(hi - lo):
            if same and (nodes[lo + k] != cur_nodes[clo + k] or counts[lo + k] != cur_counts[clo + k]):
                same = False
        if not same:
            continue
        trial = free.copy()
        mask = np.int64(0)                # it stays on the GPU type(s) it holds
        for k in range(lo, hi):
            trial[nodes[k]] += counts[k]
            mask |= np.int64(1) << np.int64(node_type[nodes[k]])
        nn, cc = place_one(trial, node_type, n_types, gpus[i], CONSOLIDATED, mask,
                           np.zeros(n_types))
        if nn.shape[0] == 0 or nn.shape[0] >= span[i]:
            continue
        for k in range(nn.shape[0]):
            free[nn[k]] -= cc[k]          # its old GPUs are not handed to later moves
        jobs[m] = i
        e = new_indptr[m]
        new_nodes[e:e + nn.shape[0]] = nn
        new_counts[e:e + nn.shape[0]] = cc
        new_indptr[m + 1] = e + nn.shape[0]
        m += 1
    return jobs[:m].copy(), new_indptr[:m + 1].copy(), new_nodes, new_counts


@njit(cache=True)
def _splice(indptr, nodes, counts, jobs, keep, mv_indptr, mv_nodes, mv_counts):
    """The plan with the kept moves substituted (CSR aligned with the same jobs)."""
    n = indptr.shape[0] - 1
    src = np.full(n, -1, np.int64)
    for r in range(jobs.shape[0]):
        if keep[r]:
            src[jobs[r]] = r
    out_indptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        r = src[i]
        size = indptr[i + 1] - indptr[i] if r < 0 else mv_indptr[r + 1] - mv_indptr[r]
        out_indptr[i + 1] = out_indptr[i] + size
    out_nodes = np.empty(out_indptr[n], np.int32)
    out_counts = np.empty(out_indptr[n], np.int32)
    for i in range(n):
        r = src[i]
        a, b = (indptr[i], indptr[i + 1]) if r < 0 else (mv_indptr[r], mv_indptr[r + 1])
        o = out_indptr[i]
        for k in range(b - a):
            out_nodes[o + k] = nodes[a + k] if r < 0 else mv_nodes[a + k]
            out_counts[o + k] = counts[a + k] if r < 0 else mv_counts[a + k]
    return out_indptr, out_nodes, out_counts


def _rates(state: SchedState, jobs, indptr, nodes, counts) -> np.ndarray:
    c = state.cluster
    ng, nn, mask, ms = placement_summary(indptr, nodes, counts, c.node_type, c.node_speed)
    return np.asarray(state.oracle.rates(state.jobs.model[state.active[jobs]], ng, nn, mask, ms,
                                         c.gpu_types), float)


def defragment_plan(state: SchedState, plan: Plan, min_gain: float = DEFRAG_MIN_GAIN) -> Plan:
    """``plan`` with spread jobs moved onto fewer nodes where that pays (module docstring)."""
    if plan.shared is not None and np.any(plan.shared):
        raise ConfigError("defragmenting does not move space-shared placements (Plan.shared): "
                          "their partners would be split")
    c = state.cluster
    indptr = np.ascontiguousarray(plan.indptr, np.int64)
    nodes = np.ascontiguousarray(plan.nodes, np.int32)
    counts = np.ascontiguousarray(plan.counts, np.int32)
    used = np.bincount(nodes, weights=counts, minlength=c.n_nodes).astype(np.int32)
    free = (np.asarray(c.node_gpus, np.int32) - used).astype(np.int32)
    jobs, mv_indptr, mv_nodes, mv_counts = _candidates(
        indptr, nodes, counts, state.pl_indptr, state.pl_nodes, state.pl_counts, free,
        np.asarray(c.node_type, np.int32), len(c.gpu_types), int(np.max(c.node_gpus)))
    if jobs.size == 0:
        return plan
    keep = np.ones(jobs.size, np.bool_)
    if state.oracle is not None:
        old = _rates(state, jobs, *_rows(indptr, nodes, counts, jobs))
        new = _rates(state, jobs, mv_indptr, mv_nodes, mv_counts)
        keep = new >= (1.0 + min_gain) * old
        if not keep.any():
            return plan
    out = _splice(indptr, nodes, counts, jobs, keep, mv_indptr, mv_nodes, mv_counts)
    return Plan(*out, plan.wakeup, plan.rate_scale, plan.sampling)


def _rows(indptr, nodes, counts, jobs):
    """The CSR rows ``jobs`` of a placement, as their own CSR."""
    lens = indptr[jobs + 1] - indptr[jobs]
    sub = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    idx = (np.repeat(indptr[jobs] - sub[:-1], lens) + np.arange(sub[-1])).astype(np.int64)
    return sub, nodes[idx], counts[idx]
