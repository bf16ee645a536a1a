"""Plain-Python references of the placement kernels in sim/placement.py.

Written from the kernels' documented rules, for clarity rather than speed, with
lists and dicts instead of arrays.  tests/test_placement.py holds each Numba
kernel to its twin here exactly.

A placement is a list of ``(node, count)`` pairs, nodes strictly increasing.
"""
from __future__ import annotations

import numpy as np

CONSOLIDATED = 0
SPREAD = 1


def _most_free_first(free, nodes):
    """The nodes among `nodes` that have free GPUs, most free first, ties by lowest index."""
    return sorted((i for i in nodes if free[i] > 0), key=lambda i: (-free[i], i))


def place_one(free, node_type, n_types, want, mode):
    """Place `want` GPUs; `free` (a list) is updated.  Returns [(node, count)], [] if impossible."""
    if want <= 0 or sum(free) < want:
        return []
    taken: dict[int, int] = {}
    if mode == SPREAD:
        order = _most_free_first(free, range(len(free)))
        left = {i: free[i] for i in order}
        need = want
        while need > 0:                      # one GPU per node per pass
            for i in order:
                if need > 0 and left[i] > 0:
                    left[i] -= 1
                    taken[i] = taken.get(i, 0) + 1
                    need -= 1
    else:
        fits = [i for i in range(len(free)) if free[i] >= want]
        if fits:                             # first fit on one node
            taken[fits[0]] = want
        else:
            per_type = [sum(free[i] for i in range(len(free)) if node_type[i] == t)
                        for t in range(n_types)]
            enough = [t for t in range(n_types) if per_type[t] >= want]
            if enough:                       # one type: the one with most free (ties: lowest)
                best = max(enough, key=lambda t: (per_type[t], -t))
                pool = [i for i in range(len(free)) if node_type[i] == best]
            else:                            # across types
                pool = list(range(len(free)))
            need = want
            for i in _most_free_first(free, pool):
                if need == 0:
                    break
                g = min(free[i], need)
                taken[i] = g
                need -= g
    for i, g in taken.items():
        free[i] -= g
    return sorted(taken.items())


def greedy_place(order, want, current, node_cap, node_type, n_types, mode, preemptive, blocking):
    """Recompute all placements.  `current`: list (one per active job) of placements.

    Returns the new list of placements.  Rules (sim.placement.greedy_place):
    - only the first occurrence of a job in `order` counts; want <= 0: not a candidate;
    - non-preemptive: running jobs keep their placement; candidates that are not
      running are placed in order;
    - preemptive: walk the candidates in order, selecting those whose GPU count
      still fits in the cluster's total (blocking: stop at the first that does
      not); selected running jobs whose size is unchanged keep their placement,
      every other job loses its GPUs; the remaining selected jobs are placed in
      order;
    - blocking: placement stops at the first candidate that cannot be placed.
    """
    n = len(want)
    cands = []
    for i in order:
        if i not in cands:
            cands.append(i)
    size = [sum(c for _, c in p) for p in current]
    if preemptive:
        selected = set()
        budget = sum(node_cap)
        for i in cands:
            if want[i] <= 0:
                continue
            if want[i] <= budget:
                selected.add(i)
                budget -= want[i]
            elif blocking:
                break
        keep = {i for i in range(n) if i in selected and size[i] > 0 and size[i] == want[i]}
    else:
        selected = set(cands)
        keep = {i for i in range(n) if size[i] > 0}
    free = list(node_cap)
    out = [[] for _ in range(n)]
    for i in keep:
        out[i] = list(current[i])
        for node, c in current[i]:
            free[node] -= c
    for i in cands:
        if i in keep or i not in selected or want[i] <= 0:
            continue
        got = place_one(free, node_type, n_types, want[i], mode)
        if not got:
            if blocking:
                break
            continue
        out[i] = got
    return out


def placement_summary(placements, node_type, node_speed):
    """Per job: (GPUs, nodes spanned, bit mask of GPU types, slowest server speed; 1.0 if none)."""
    rows = []
    for p in placements:
        ngpu = sum(c for _, c in p)
        mask = 0
        for node, _ in p:
            mask |= 1 << int(node_type[node])
        speed = min((float(node_speed[node]) for node, _ in p), default=1.0)
        rows.append((ngpu, len(p), mask, speed if p else 1.0))
    return rows


def changed_jobs(a, b):
    """True where two aligned lists of placements differ."""
    return [list(x) != list(y) for x, y in zip(a, b)]


# -- CSR helpers -------------------------------------------------------------
def to_lists(indptr, nodes, counts):
    return [[(int(nodes[k]), int(counts[k])) for k in range(indptr[i], indptr[i + 1])]
            for i in range(len(indptr) - 1)]


def to_csr(placements):
    indptr = np.zeros(len(placements) + 1, np.int64)
    indptr[1:] = np.cumsum([len(p) for p in placements]) if placements else []
    nodes = np.array([n for p in placements for n, _ in p], np.int32)
    counts = np.array([c for p in placements for _, c in p], np.int32)
    return indptr, nodes, counts


__all__ = ["CONSOLIDATED", "SPREAD", "place_one", "greedy_place", "placement_summary",
           "changed_jobs", "to_lists", "to_csr"]
