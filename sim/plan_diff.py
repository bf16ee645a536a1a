"""Numba kernel: what a plan changes, in one pass.

Given the current placement and a plan's target placement (CSR arrays aligned with
the same active jobs) it returns the jobs whose placement changed or whose rate
scale must be re-applied, their target placements as a compact CSR, and the
placement summary the throughput oracle needs (GPUs, nodes spanned, bit mask of
GPU types, slowest server speed).  tests/test_plan_diff.py holds it to
sim.placement.changed_jobs + placement_summary, its plain-array twin.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def plan_changes(old_indptr, old_nodes, old_counts, new_indptr, new_nodes, new_counts,
                 force, node_type, node_speed):
    """force[i]: treat job i as changed if its target placement is not empty."""
    n = new_indptr.shape[0] - 1
    changed = np.zeros(n, np.bool_)
    m = 0
    entries = 0
    for i in range(n):
        lo, hi = new_indptr[i], new_indptr[i + 1]
        olo, ohi = old_indptr[i], old_indptr[i + 1]
        diff = (hi - lo) != (ohi - olo)
        if not diff:
            for k in range(hi - lo):
                if new_nodes[lo + k] != old_nodes[olo + k] or new_counts[lo + k] != old_counts[olo + k]:
                    diff = True
                    break
        if diff or (force[i] and hi > lo):
            changed[i] = True
            m += 1
            entries += hi - lo
    idx = np.empty(m, np.int64)
    sub_indptr = np.zeros(m + 1, np.int64)
    sub_nodes = np.empty(entries, np.int32)
    sub_counts = np.empty(entries, np.int32)
    ngpu = np.zeros(m, np.int64)
    n_nodes = np.zeros(m, np.int64)
    mask = np.zeros(m, np.int64)
    min_speed = np.ones(m, np.float64)
    j = 0
    e = 0
    for i in range(n):
        if not changed[i]:
            continue
        idx[j] = i
        lo, hi = new_indptr[i], new_indptr[i + 1]
        if hi > lo:
            min_speed[j] = np.inf
        for k in range(lo, hi):
            node = new_nodes[k]
            sub_nodes[e] = node
            sub_counts[e] = new_counts[k]
            e += 1
            ngpu[j] += new_counts[k]
            n_nodes[j] += 1
            mask[j] |= np.int64(1) << np.int64(node_type[node])
            if node_speed[node] < min_speed[j]:
                min_speed[j] = node_speed[node]
        sub_indptr[j + 1] = e
        j += 1
    return idx, sub_indptr, sub_nodes, sub_counts, ngpu, n_nodes, mask, min_speed
