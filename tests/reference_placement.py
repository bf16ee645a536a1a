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


def per_type(values, node_type, n_types):
    return [sum(v for v, t in zip(values, node_type) if t == k) for k in range(n_types)]


def choose_type(allowed, key, tfree, tbudget, want):
    """The allowed type whose free GPUs hold `want` (tier 0), else whose budget does (tier 1);
    smallest key within the best tier, ties by lowest type; -1 if none."""
    cands = [(0 if tfree[t] >= want else 1, key[t], t) for t in range(len(key))
             if (allowed >> t) & 1 and (tfree[t] >= want or tbudget[t] >= want)]
    return min(cands)[2] if cands else -1


def place_in_type(free, node_type, t, want, mode):
    """Place `want` GPUs of type t; `free` (a list) is updated.  [(node, count)], [] if no room."""
    nodes = [i for i in range(len(free)) if node_type[i] == t]
    if want <= 0 or t < 0 or sum(free[i] for i in nodes) < want:
        return []
    taken: dict[int, int] = {}
    if mode == SPREAD:
        order = _most_free_first(free, nodes)
        left = {i: free[i] for i in order}
        need = want
        while need > 0:                      # one GPU per node per pass
            for i in order:
                if need > 0 and left[i] > 0:
                    left[i] -= 1
                    taken[i] = taken.get(i, 0) + 1
                    need -= 1
    else:
        fits = [i for i in nodes if free[i] >= want]
        if fits:                             # first fit on one node of the type
            taken[fits[0]] = want
        else:                                # fewest nodes of the type
            need = want
            for i in _most_free_first(free, nodes):
                if need == 0:
                    break
                g = min(free[i], need)
                taken[i] = g
                need -= g
    for i, g in taken.items():
        free[i] -= g
    return sorted(taken.items())


def place_one(free, node_type, n_types, want, mode, allowed=None, key=None):
    """Place `want` GPUs on the one type choose_type picks on the free GPUs."""
    allowed = (1 << n_types) - 1 if allowed is None else allowed
    key = list(range(n_types)) if key is None else key
    if want <= 0:
        return []
    tf = per_type(free, node_type, n_types)
    return place_in_type(free, node_type, choose_type(allowed, key, tf, tf, want), want, mode)


def greedy_place(order, want, current, node_cap, node_type, n_types, mode, preemptive, blocking,
                 allowed=None, keys=None):
    """Recompute all placements.  `current`: list (one per active job) of placements.

    Returns the new list of placements.  Rules (sim.placement.greedy_place):
    - only the first occurrence of a job in `order` counts; want <= 0: not a candidate;
    - every job gets GPUs of one type, an allowed one (`allowed[i]`, a bit mask), the one
      choose_type picks with its keys (`keys[i]`);
    - non-preemptive: running jobs keep their placement; candidates that are not
      running are placed in order on the GPUs left;
    - preemptive: walk the candidates in order with a budget per type (all its GPUs); a
      running job whose size is unchanged is selected on its own type if that type's budget
      still holds it; any other job (a running one then moves) if choose_type finds a type
      whose GPUs free now (less the new placements so far) hold it, else whose budget does;
      blocking: stop at the first that is not selected.  Selected running jobs whose size and
      type are unchanged keep their placement, every other job loses its GPUs; the remaining
      selected jobs are placed in order on the type they were selected on;
    - blocking: placement stops at the first candidate that cannot be placed.
    """
    n = len(want)
    allowed = [(1 << n_types) - 1] * n if allowed is None else [int(a) for a in allowed]
    keys = [list(range(n_types))] * n if keys is None else [list(k) for k in keys]
    cands = []
    for i in order:
        if i not in cands:
            cands.append(i)
    size = [sum(c for _, c in p) for p in current]
    types = [{node_type[node] for node, _ in p} for p in current]
    cur_t = [next(iter(ts)) if len(ts) == 1 else -1 for ts in types]
    sel_type = {}
    if preemptive:
        selected = set()
        budget = per_type(node_cap, node_type, n_types)
        free_now = list(budget)
        for p in current:
            for node, c in p:
                free_now[node_type[node]] -= c
        for i in cands:
            if want[i] <= 0:
                continue
            if size[i] > 0 and size[i] == want[i] and cur_t[i] >= 0 and budget[cur_t[i]] >= want[i]:
                t = cur_t[i]                 # it keeps its GPUs
            else:                            # a new job, or one whose type is taken: it moves
                t = choose_type(allowed[i], keys[i], free_now, budget, want[i])
                if t >= 0:
                    free_now[t] -= want[i]
            if t < 0:
                if blocking:
                    break
                continue
            selected.add(i)
            sel_type[i] = t
            budget[t] -= want[i]
        keep = {i for i in range(n) if i in selected and size[i] > 0 and size[i] == want[i]
                and cur_t[i] >= 0 and sel_type[i] == cur_t[i]}
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
        if preemptive:
            t = sel_type[i]
        else:
            tf = per_type(free, node_type, n_types)
            t = choose_type(allowed[i], keys[i], tf, tf, want[i])
        got = place_in_type(free, node_type, t, want[i], mode)
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


__all__ = ["CONSOLIDATED", "SPREAD", "choose_type", "place_in_type", "place_one", "greedy_place", "placement_summary",
           "changed_jobs", "to_lists", "to_csr"]
