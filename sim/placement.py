"""Placement kernels (Numba): turn per-job GPU counts into node placements.

Placements are CSR arrays aligned with a list of jobs: job i holds
``counts[indptr[i]:indptr[i+1]]`` GPUs on nodes ``nodes[indptr[i]:indptr[i+1]]``
(nodes strictly increasing).  Every kernel has a plain-Python twin in
tests/reference_placement.py that the property tests hold it to.

Strategies (``mode``):
- ``CONSOLIDATED`` (0): first fit on a single node (lowest index with enough free
  GPUs); otherwise the fewest nodes: within one GPU type if any type has enough
  free GPUs (the type with most free GPUs first), else across types, taking nodes
  by most free GPUs first (ties: lowest index).
- ``SPREAD`` (1): one GPU per node round robin over the nodes with free GPUs,
  most free first (ties: lowest index), until the request is met.
"""
from __future__ import annotations

import numpy as np
from numba import njit

CONSOLIDATED = 0
SPREAD = 1
PLACEMENT_MODES = {"consolidated": CONSOLIDATED, "spread": SPREAD}


@njit(cache=True)
def _nodes_by_free(free, node_type, only_type):
    """Node indices with free GPUs (of one type if only_type >= 0), most free first."""
    n = free.shape[0]
    keys = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if free[i] > 0 and (only_type < 0 or node_type[i] == only_type):
            keys[m] = -np.int64(free[i]) * n + i
            m += 1
    keys = np.sort(keys[:m])
    out = np.empty(m, np.int64)
    for k in range(m):
        out[k] = keys[k] % n if keys[k] % n >= 0 else keys[k] % n + n
    return out


@njit(cache=True)
def _take(free, order, want, out_nodes, out_counts):
    """Take GPUs greedily from nodes in `order`; returns the number of entries."""
    need = want
    m = 0
    for k in range(order.shape[0]):
        if need == 0:
            break
        i = order[k]
        g = min(free[i], need)
        if g > 0:
            out_nodes[m] = i
            out_counts[m] = g
            need -= g
            m += 1
    return m


@njit(cache=True)
def _sort_entries(nodes, counts, m):
    idx = np.argsort(nodes[:m])
    return nodes[:m][idx].copy(), counts[:m][idx].copy()


@njit(cache=True)
def place_one(free, node_type, n_types, want, mode):
    """Place `want` GPUs into `free` (updated in place).  Returns (nodes, counts),
    empty if the request cannot be met."""
    empty = (np.empty(0, np.int32), np.empty(0, np.int32))
    if want <= 0 or free.sum() < want:
        return empty
    nodes = np.empty(want, np.int32)
    counts = np.empty(want, np.int32)
    if mode == SPREAD:
        order = _nodes_by_free(free, node_type, -1)
        left = free.copy()
        taken = np.zeros(free.shape[0], np.int32)
        need = want
        while need > 0:
            for k in range(order.shape[0]):
                i = order[k]
                if need > 0 and left[i] > 0:
                    left[i] -= 1
                    taken[i] += 1
                    need -= 1
        m = 0
        for i in range(free.shape[0]):
            if taken[i] > 0:
                nodes[m] = i
                counts[m] = taken[i]
                free[i] -= taken[i]
                m += 1
        return nodes[:m].copy(), counts[:m].copy()
    for i in range(free.shape[0]):          # single node, first fit
        if free[i] >= want:
            free[i] -= want
            nodes[0] = i
            counts[0] = want
            return nodes[:1].copy(), counts[:1].copy()
    type_free = np.zeros(n_types, np.int64)
    for i in range(free.shape[0]):
        type_free[node_type[i]] += free[i]
    best = -1
    for t in range(n_types):
        if type_free[t] >= want and (best < 0 or type_free[t] > type_free[best]):
            best = t
    order = _nodes_by_free(free, node_type, best)
    m = _take(free, order, want, nodes, counts)
    for k in range(m):
        free[nodes[k]] -= counts[k]
    return _sort_entries(nodes, counts, m)


@njit(cache=True)
def greedy_place(order, want, cur_indptr, cur_nodes, cur_counts, node_cap, node_type,
                 n_types, mode, preemptive, blocking):
    """Recompute the placement of all active jobs.

    order: candidate job indices (into the active list), highest priority first.
    want: GPUs each active job should get (0: not a candidate now).
    cur_*: current placement CSR aligned with the active list.
    Non-preemptive: running jobs keep their placement.  Preemptive: the jobs that
    fit by GPU count in priority order are selected; selected running jobs whose
    size is unchanged keep their placement, other running jobs are preempted.
    blocking: stop at the first candidate that cannot be placed (strict order).
    A job listed more than once in `order` counts at its first position only.
    Returns the new CSR (indptr, nodes, counts) aligned with the active list.
    """
    n = want.shape[0]
    free = node_cap.astype(np.int32).copy()
    cur_n = np.zeros(n, np.int64)
    for i in range(n):
        for k in range(cur_indptr[i], cur_indptr[i + 1]):
            cur_n[i] += cur_counts[k]
    keep = np.zeros(n, np.bool_)
    selected = np.zeros(n, np.bool_)
    if preemptive:
        budget = np.int64(free.sum())
        for k in range(order.shape[0]):
            i = order[k]
            if want[i] <= 0 or selected[i]:     # not a candidate, or a repeat
                continue
            if want[i] <= budget:
                selected[i] = True
                budget -= want[i]
            elif blocking:
                break
        for i in range(n):
            keep[i] = selected[i] and cur_n[i] > 0 and cur_n[i] == want[i]
    else:
        for i in range(n):
            keep[i] = cur_n[i] > 0
        for k in range(order.shape[0]):
            selected[order[k]] = True
    for i in range(n):
        if keep[i]:
            for k in range(cur_indptr[i], cur_indptr[i + 1]):
                free[cur_nodes[k]] -= cur_counts[k]
    cap_entries = cur_nodes.shape[0]
    for i in range(n):
        cap_entries += max(want[i], 0)
    out_nodes = np.empty(cap_entries, np.int32)
    out_counts = np.empty(cap_entries, np.int32)
    starts = np.full(n, -1, np.int64)
    lens = np.zeros(n, np.int64)
    m = 0
    for i in range(n):
        if keep[i]:
            starts[i] = m
            for k in range(cur_indptr[i], cur_indptr[i + 1]):
                out_nodes[m] = cur_nodes[k]
                out_counts[m] = cur_counts[k]
                m += 1
            lens[i] = cur_indptr[i + 1] - cur_indptr[i]
    for k in range(order.shape[0]):
        i = order[k]
        if keep[i] or not selected[i] or want[i] <= 0 or lens[i] > 0:   # lens: placed already
            continue
        nodes, counts = place_one(free, node_type, n_types, want[i], mode)
        if nodes.shape[0] == 0:
            if blocking:
                break
            continue
        starts[i] = m
        lens[i] = nodes.shape[0]
        for e in range(nodes.shape[0]):
            out_nodes[m] = nodes[e]
            out_counts[m] = counts[e]
            m += 1
    indptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        indptr[i + 1] = indptr[i] + lens[i]
    res_nodes = np.empty(indptr[n], np.int32)
    res_counts = np.empty(indptr[n], np.int32)
    for i in range(n):
        for e in range(lens[i]):
            res_nodes[indptr[i] + e] = out_nodes[starts[i] + e]
            res_counts[indptr[i] + e] = out_counts[starts[i] + e]
    return indptr, res_nodes, res_counts


@njit(cache=True)
def placement_summary(indptr, nodes, counts, node_type, node_speed):
    """Per job: GPUs, nodes spanned, bit mask of GPU types used, slowest server speed."""
    n = indptr.shape[0] - 1
    ngpu = np.zeros(n, np.int64)
    n_nodes = np.zeros(n, np.int64)
    type_mask = np.zeros(n, np.int64)
    min_speed = np.ones(n, np.float64)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo:
            min_speed[i] = np.inf
        for k in range(lo, hi):
            node = nodes[k]
            ngpu[i] += counts[k]
            n_nodes[i] += 1
            type_mask[i] |= np.int64(1) << np.int64(node_type[node])
            if node_speed[node] < min_speed[i]:
                min_speed[i] = node_speed[node]
    return ngpu, n_nodes, type_mask, min_speed


@njit(cache=True)
def changed_jobs(a_indptr, a_nodes, a_counts, b_indptr, b_nodes, b_counts):
    """True where placement a differs from placement b (CSR aligned with the same jobs)."""
    n = a_indptr.shape[0] - 1
    out = np.zeros(n, np.bool_)
    for i in range(n):
        la = a_indptr[i + 1] - a_indptr[i]
        lb = b_indptr[i + 1] - b_indptr[i]
        if la != lb:
            out[i] = True
            continue
        for k in range(la):
            if (a_nodes[a_indptr[i] + k] != b_nodes[b_indptr[i] + k]
                    or a_counts[a_indptr[i] + k] != b_counts[b_indptr[i] + k]):
                out[i] = True
                break
    return out
