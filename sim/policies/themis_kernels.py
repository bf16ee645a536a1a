"""Numba kernels of Themis' decision (:mod:`sim.policies.themis`): the GPUs the leases leave
free, the finish-time fairness rho of every job, the auction with its partial allocation, the
work-conserving leftovers and the placement.

A decision makes two calls, :func:`contenders` and :func:`decide_and_place`, with NumPy's
logarithms of the bids in between (its log and the C library's differ in the last place now
and then); the pieces they are made of (:func:`free_per_type`, :func:`rhos`, :func:`auction`,
:func:`decide`, :func:`place`) are callable one by one, for tests and by-hand checks.  Each
takes the same operations in the same order as the numpy code it replaced (sums in NumPy's
order: :mod:`sim.pairwise_sum`), so a run is the same bit for bit.  Plain-Python references:
tests/reference_themis.py.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import SimError
from ..pairwise_sum import pairwise_sum


def free_per_type(capacity, held, pl_indptr, pl_nodes, pl_counts, node_type) -> np.ndarray:
    """int64 [m]: each type's GPUs (``capacity``) less those the jobs still on a lease
    (``held``, aligned with the placement CSR) hold."""
    return _free_per_type(np.ascontiguousarray(capacity, np.int64), np.ascontiguousarray(held, np.bool_),
                          np.ascontiguousarray(pl_indptr, np.int64), pl_nodes, pl_counts,
                          np.ascontiguousarray(node_type, np.int64))


@njit(cache=True)
def _free_per_type(capacity, held, pl_indptr, pl_nodes, pl_counts, node_type):
    free = capacity.copy()
    for i in range(held.shape[0]):
        if held[i]:
            for e in range(pl_indptr[i], pl_indptr[i + 1]):
                free[node_type[pl_nodes[e]]] -= pl_counts[e]
    return free


def rhos(thr, demand, capacity, work, since, remaining, lease_s: float):
    """(rho now, rho without GPUs for a lease, rho on each type [n, m]) of the active jobs
    (``thr`` [n, m] rates, ``demand`` GPUs, ``capacity`` [m] GPUs per type, ``work`` total
    and ``remaining`` iterations, ``since`` seconds since arrival; see the module docstring
    of :mod:`sim.policies.themis`)."""
    f64 = [np.ascontiguousarray(a, np.float64) for a in (thr, demand, capacity, work, since, remaining)]
    return _rhos(*f64, float(lease_s))


@njit(cache=True, error_model="numpy")
def _rhos(thr, demand, capacity, work, since, remaining, lease_s):
    n, m = thr.shape
    share = np.empty(m)
    x = np.empty(m)
    now, none, on_type = np.empty(n), np.empty(n), np.empty((n, m))
    for t in range(m):
        share[t] = capacity[t] / max(n, 1)
    for i in range(n):
        for t in range(m):                       # Gavel's isolated split, row i
            x[t] = share[t] / demand[i]
        total = pairwise_sum(x, 0, m)
        total = 1.0 if total < 1.0 else total        # np.maximum(total, 1.0): NaN stays
        for t in range(m):
            x[t] = thr[i, t] * (x[t] / total)
        y_iso = pairwise_sum(x, 0, m)
        t_id = work[i] / y_iso
        rem = 0.0 if remaining[i] < 0.0 else remaining[i]   # np.maximum: NaN stays
        for t in range(m):
            on_type[i, t] = (since[i] + rem / thr[i, t]) / t_id
        now[i] = (since[i] + rem / y_iso) / t_id
        none[i] = (since[i] + lease_s + rem / y_iso) / t_id
    return now, none, on_type


def auction(gain, demand, free) -> tuple[np.ndarray, np.ndarray]:
    """The greedy auction and its partial allocation: (the type each participant wins, -1
    none; each winner's share c_i of its lease, 1 for the others).  ``gain`` float [p, m]
    (NaN or <= 0: no bid), ``demand`` [p] GPUs, ``free`` [m] GPUs per type."""
    return _auction(np.ascontiguousarray(gain, np.float64), np.ascontiguousarray(demand, np.int64),
                    np.ascontiguousarray(free, np.int64))


@njit(cache=True)
def _bid_order(gain):
    """The bids (flat index i * m + t with a finite gain > 0), largest gain first, ties by
    index (``argsort(-gain, kind="stable")``)."""
    flat = gain.ravel()
    bids = np.empty(flat.shape[0], np.int64)
    k = 0
    for b in range(flat.shape[0]):
        if np.isfinite(flat[b]) and flat[b] > 0.0:
            bids[k] = b
            k += 1
    bids = bids[:k]
    return bids[np.argsort(-flat[bids], kind="mergesort")]     # stable: ties by index


@njit(cache=True)
def _greedy(bids, m, demand, free, skip, won):
    """Bids in ``bids`` order while the type has room; row ``skip`` (-1: none) sits out."""
    won[:] = -1
    left = free.copy()
    for b in bids:
        i, t = b // m, b % m
        if i == skip:
            continue
        if won[i] < 0 and demand[i] <= left[t]:
            won[i] = t
            left[t] -= demand[i]
            if not left.any():
                break


@njit(cache=True)
def _gains_won(gain, won, out):
    for i in range(won.shape[0]):
        out[i] = gain[i, won[i]] if won[i] >= 0 else 0.0


@njit(cache=True)
def _auction(gain, demand, free):
    p, m = gain.shape
    bids = _bid_order(gain)
    won = np.empty(p, np.int64)
    _greedy(bids, m, demand, free, -1, won)
    got, alt, alt_got = np.empty(p), np.empty(p, np.int64), np.empty(p)
    _gains_won(gain, won, got)
    total = pairwise_sum(got, 0, p)
    frac = np.ones(p)
    for i in range(p):
        if won[i] >= 0:
            _greedy(bids, m, demand, free, i, alt)
            _gains_won(gain, alt, alt_got)
            d = (total - got[i]) - pairwise_sum(alt_got, 0, p)
            frac[i] = math.exp(d) if d < 0.0 else 1.0      # exp(min(0, d)); NaN: 1
    return won, frac


def decide(rank, k: int, log_none, log_type, thr, demand, free, lease_s: float):
    """The auction among the first ``k`` contenders of ``rank`` (positions, worst rho first)
    and the leftovers: (type each active job starts a lease on, -1 none; the lease lengths).

    A participant's bid on type t is ``log rho_none - log rho_t`` (``log_none`` [n],
    ``log_type`` [n, m]: NumPy's logarithms of :func:`rhos`), none where its rate is 0; each
    winner holds its GPUs for its partial-allocation share of ``lease_s``.  The GPUs no winner
    took (``free`` [m] less the winners') go to the other contenders (the rest of ``rank``,
    then the losing participants), each on its fastest type with room, for a whole lease."""
    return _decide(np.ascontiguousarray(rank, np.int64), int(k), np.ascontiguousarray(log_none, np.float64),
                   np.ascontiguousarray(log_type, np.float64), np.ascontiguousarray(thr, np.float64),
                   np.ascontiguousarray(demand, np.int64), np.ascontiguousarray(free, np.int64),
                   float(lease_s))


@njit(cache=True, error_model="numpy")
def _decide(rank, k, log_none, log_type, thr, demand, free, lease_s):
    n, m = thr.shape
    chosen, lease = np.full(n, -1, np.int64), np.full(n, lease_s)
    k = min(k, rank.shape[0])
    part = rank[:k]
    gain, bid_demand = np.empty((k, m)), np.empty(k, np.int64)
    for j in range(k):
        i = part[j]
        bid_demand[j] = demand[i]
        for t in range(m):
            gain[j, t] = log_none[i] - log_type[i, t] if thr[i, t] > 0 else np.nan
    won, share = _auction(gain, bid_demand, free)
    left = free.copy()
    rest = np.empty(n, np.int64)
    r = 0
    for i in rank[k:]:
        rest[r] = i
        r += 1
    for j in range(k):
        i = part[j]
        lease[i] = lease_s * share[j]
        chosen[i] = won[j]
        if won[j] >= 0:
            left[won[j]] -= demand[i]
        else:
            rest[r] = i
            r += 1
    _leftovers(rest[:r], thr, demand, left, chosen)
    return chosen, lease


@njit(cache=True)
def _leftovers(rest, thr, demand, left, chosen):
    m = thr.shape[1]
    for i in rest:
        if not left.any():
            return
        best, top = -1, -1.0
        for t in range(m):
            if thr[i, t] > 0 and left[t] >= demand[i] and thr[i, t] > top:
                best, top = t, thr[i, t]
        if best >= 0:
            chosen[i] = best
            left[best] -= demand[i]


def place(held, chosen, demand, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus):
    """(owner int64, nodes int32, counts int32): held jobs keep their GPUs (in placement
    order); then each job with a chosen type (in position order) keeps its GPUs if they are
    all of that type and free, else takes the type's servers with the most free GPUs first
    (ties by node order), listed in node order."""
    ints = [np.ascontiguousarray(a, np.int64) for a in
            (chosen, demand, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus)]
    owner, nodes, counts, used = _place(np.ascontiguousarray(held, np.bool_), *ints)
    if used < 0:
        raise SimError("themis: the placement holds more entries than the cluster has GPUs "
                       "(a held job's GPUs are over-committed)")
    return owner[:used], nodes[:used].astype(np.int32), counts[:used].astype(np.int32)


@njit(cache=True)
def _take(owner, nodes, counts, used, i, node, count):
    """Append (i, node, count); -1 once the buffers are full (and from then on)."""
    if used < 0 or used >= owner.shape[0]:
        return -1
    owner[used], nodes[used], counts[used] = i, node, count
    return used + 1


@njit(cache=True)
def _fullest_first(free, node_type, t, need, cand, take):
    """How many of ``need`` GPUs of type ``t`` each server gives, most free first (ties by
    node order), into ``take`` (per node; zero on entry); ``cand``: scratch."""
    k = 0
    for v in range(free.shape[0]):
        if node_type[v] == t and free[v] > 0:
            cand[k] = v
            k += 1
    order = cand[:k][np.argsort(-free[cand[:k]], kind="mergesort")]   # stable: ties by node
    before = 0
    for a in range(k):
        v = order[a]
        take[v] = min(free[v], max(need - before, 0))
        before += free[v]


@njit(cache=True)
def _place(held, chosen, demand, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus):
    n, n_nodes = chosen.shape[0], node_gpus.shape[0]
    free = node_gpus.copy()
    size = pl_nodes.shape[0] + int(node_gpus.sum()) + 1
    owner, nodes, counts = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
    used = 0
    for i in range(n):
        if held[i]:
            for e in range(pl_indptr[i], pl_indptr[i + 1]):
                free[pl_nodes[e]] -= pl_counts[e]
                used = _take(owner, nodes, counts, used, i, pl_nodes[e], pl_counts[e])
    cand, take = np.empty(n_nodes, np.int64), np.zeros(n_nodes, np.int64)
    for i in range(n):
        t = chosen[i]
        if t < 0:
            continue
        lo, hi = pl_indptr[i], pl_indptr[i + 1]
        keep = hi > lo
        for e in range(lo, hi):
            if node_type[pl_nodes[e]] != t or free[pl_nodes[e]] < pl_counts[e]:
                keep = False
        if keep:
            for e in range(lo, hi):
                free[pl_nodes[e]] -= pl_counts[e]
                used = _take(owner, nodes, counts, used, i, pl_nodes[e], pl_counts[e])
            continue
        take[:] = 0
        _fullest_first(free, node_type, t, demand[i], cand, take)
        for v in range(n_nodes):
            if take[v] > 0:
                free[v] -= take[v]
                used = _take(owner, nodes, counts, used, i, v, take[v])
    return owner, nodes, counts, used


# -- a whole decision in two calls (the logarithms of the bids, NumPy's, in between) -------
def contenders(running, lease_end, now: float, thr, demand, capacity, work, since, remaining,
               lease_s: float, pl_indptr, pl_nodes, pl_counts, node_type):
    """Before the auction: (held: running jobs whose lease runs past ``now``; the GPUs per
    type the leases leave free; the contenders (the others), worst rho now first, ties by
    position (``lexsort``, NaN last); rho without GPUs and on each type, for the bids).  An
    empty ranking: no auction (no contender or no free GPU).  ``lease_end`` aligned with the
    active jobs; the other arrays as :func:`free_per_type` and :func:`rhos`."""
    f64 = [np.ascontiguousarray(a, np.float64) for a in (lease_end, thr, demand, capacity, work, since,
                                                          remaining)]
    return _contenders(np.ascontiguousarray(running, np.bool_), f64[0], float(now), *f64[1:],
                       float(lease_s), np.ascontiguousarray(pl_indptr, np.int64),
                       np.ascontiguousarray(pl_nodes, np.int64), np.ascontiguousarray(pl_counts, np.int64),
                       np.ascontiguousarray(node_type, np.int64))


@njit(cache=True, error_model="numpy")
def _contenders(running, lease_end, now, thr, demand, capacity, work, since, remaining, lease_s,
                pl_indptr, pl_nodes, pl_counts, node_type):
    n, m = thr.shape
    held = np.empty(n, np.bool_)
    for i in range(n):
        held[i] = running[i] and lease_end[i] > now * (1 + 1e-12)
    free = _free_per_type(capacity.astype(np.int64), held, pl_indptr, pl_nodes, pl_counts, node_type)
    cont = np.empty(n, np.int64)
    r = 0
    for i in range(n):
        if not held[i]:
            cont[r] = i
            r += 1
    if r == 0 or not free.any():
        return held, free, cont[:0], np.empty(0), np.empty((0, m))
    rho_now, rho_none, rho_type = _rhos(thr, demand, capacity, work, since, remaining, lease_s)
    cont = cont[:r]
    key = np.empty(r)
    for q in range(r):
        key[q] = -rho_now[cont[q]]
    # stable, NaN last, as lexsort((cont, key)) with cont increasing
    return held, free, cont[np.argsort(key, kind="mergesort")], rho_none, rho_type


def decide_and_place(rank, k: int, log_none, log_type, thr, demand, free, lease_s: float, held,
                     pl_indptr, pl_nodes, pl_counts, node_type, node_gpus, lease_end, now: float):
    """After the logarithms: :func:`decide` (when ``rank`` is not empty) and :func:`place`;
    updates ``lease_end`` (float64, aligned with the active jobs) in place: a job placed holds
    its GPUs until ``now`` plus its lease, one neither placed nor held has none (-inf).
    Returns the plan (indptr int64, nodes int32, counts int32, grouped by job) and the
    earliest lease end of the jobs that run (NaN: none runs)."""
    ints = [np.ascontiguousarray(a, np.int64) for a in (demand, free, pl_indptr, pl_nodes, pl_counts,
                                                          node_type, node_gpus)]
    indptr, nodes, counts, wake, used = _decide_and_place(
        np.ascontiguousarray(rank, np.int64), int(k), np.ascontiguousarray(log_none, np.float64),
        np.ascontiguousarray(log_type, np.float64), np.ascontiguousarray(thr, np.float64), ints[0],
        ints[1], float(lease_s), np.ascontiguousarray(held, np.bool_), *ints[2:], lease_end, float(now))
    if used < 0:
        raise SimError("themis: the placement holds more entries than the cluster has GPUs "
                       "(a held job's GPUs are over-committed)")
    return indptr, nodes.astype(np.int32), counts.astype(np.int32), wake


@njit(cache=True, error_model="numpy")
def _decide_and_place(rank, k, log_none, log_type, thr, demand, free, lease_s, held, pl_indptr,
                      pl_nodes, pl_counts, node_type, node_gpus, lease_end, now):
    n = thr.shape[0]
    if rank.shape[0]:
        chosen, lease = _decide(rank, k, log_none, log_type, thr, demand, free, lease_s)
    else:
        chosen, lease = np.full(n, -1, np.int64), np.full(n, lease_s)
    owner, nodes, counts, used = _place(held, chosen, demand, pl_indptr, pl_nodes, pl_counts,
                                        node_type, node_gpus)
    wake = np.nan
    for i in range(n):
        if chosen[i] >= 0:
            lease_end[i] = now + lease[i]
        elif not held[i]:
            lease_end[i] = -np.inf
        if (chosen[i] >= 0 or held[i]) and not lease_end[i] >= wake:
            wake = lease_end[i]
    indptr = np.zeros(n + 1, np.int64)
    if used < 0:
        return indptr, nodes[:0], counts[:0], wake, used
    for e in range(used):                        # group by job, stable (plan_from_owners)
        indptr[owner[e] + 1] += 1
    for i in range(n):
        indptr[i + 1] += indptr[i]
    at = indptr[:-1].copy()
    out_nodes, out_counts = np.empty(used, np.int64), np.empty(used, np.int64)
    for e in range(used):
        q = at[owner[e]]
        out_nodes[q], out_counts[q] = nodes[e], counts[e]
        at[owner[e]] += 1
    return indptr, out_nodes, out_counts, wake, used
