"""Plain reference of sim/policies/themis_kernels.py: the numpy code the kernels replaced."""
from __future__ import annotations

import math

import numpy as np


def isolated_allocation_reference(scale, capacity):
    n = scale.shape[0]
    x = np.asarray(capacity, float)[None, :] / max(n, 1) / np.asarray(scale, float)[:, None]
    return x / np.maximum(x.sum(axis=1), 1.0)[:, None]


def rhos_reference(thr, demand, capacity, work, since, remaining, lease_s):
    y_iso = np.sum(thr * isolated_allocation_reference(np.asarray(demand, float), capacity), axis=1)
    t_id = work / y_iso
    rem = np.maximum(remaining, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        on_type = (since[:, None] + rem[:, None] / thr) / t_id[:, None]
    now = (since + rem / y_iso) / t_id
    none = (since + lease_s + rem / y_iso) / t_id
    return now, none, on_type


def free_per_type_reference(capacity, held, pl_indptr, pl_nodes, pl_counts, node_type):
    lens = np.diff(pl_indptr)
    mine = np.repeat(held, lens)
    used = np.bincount(node_type[pl_nodes[mine]], weights=pl_counts[mine], minlength=len(capacity))
    return (np.asarray(capacity, float) - used).astype(np.int64)


def greedy_auction_reference(gain, demand, free, skip=-1):
    p, m = gain.shape
    won = np.full(p, -1, np.int64)
    left = free.astype(np.int64).copy()
    g = np.where(np.isfinite(gain) & (gain > 0), gain, -np.inf)
    if 0 <= skip < p:
        g[skip] = -np.inf
    flat = np.argsort(-g, axis=None, kind="stable")
    flat = flat[np.isfinite(g.ravel()[flat])]
    for k in flat:
        i, t = divmod(int(k), m)
        if won[i] < 0 and demand[i] <= left[t]:
            won[i] = t
            left[t] -= demand[i]
            if not left.any():
                break
    return won


def auction_reference(gain, demand, free):
    """(won, partial fractions) as the greedy auction and partial_fractions did."""
    won = greedy_auction_reference(gain, demand, free)
    rows = np.arange(won.size)
    got = np.where(won >= 0, gain[rows, np.maximum(won, 0)], 0.0)
    frac = np.ones(won.size)
    for i in np.flatnonzero(won >= 0):
        alt = greedy_auction_reference(gain, demand, free, skip=int(i))
        alt_got = np.where(alt >= 0, gain[rows, np.maximum(alt, 0)], 0.0)
        frac[i] = math.exp(min(0.0, (got.sum() - got[i]) - alt_got.sum()))
    return won, frac


def leftovers_reference(rest, thr, demand, left, chosen):
    for i in rest:
        if not left.any():
            return
        fits = (thr[i] > 0) & (left >= demand[i])
        if fits.any():
            t = int(np.argmax(np.where(fits, thr[i], -1.0)))
            chosen[i] = t
            left[t] -= demand[i]


def _fullest_first(free, node_type, t, need):
    cand = np.flatnonzero((node_type == t) & (free > 0))
    cand = cand[np.argsort(-free[cand], kind="stable")]
    take = np.minimum(free[cand], np.maximum(need - np.r_[0, np.cumsum(free[cand])[:-1]], 0))
    sel = np.flatnonzero(take > 0)
    sel = sel[np.argsort(cand[sel])]
    return cand[sel], take[sel]


def place_reference(held, chosen, demand, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus):
    lens = np.diff(pl_indptr)
    job_of = np.repeat(np.arange(lens.size), lens)
    free = node_gpus.astype(np.int64).copy()
    keep = held[job_of]
    np.subtract.at(free, pl_nodes[keep], pl_counts[keep])
    owner, nodes, counts = [job_of[keep]], [pl_nodes[keep]], [pl_counts[keep]]
    for i in np.flatnonzero(chosen >= 0):
        pn = pl_nodes[pl_indptr[i]:pl_indptr[i + 1]]
        pc = pl_counts[pl_indptr[i]:pl_indptr[i + 1]]
        if pn.size and np.all(node_type[pn] == chosen[i]) and np.all(free[pn] >= pc):
            take_n, take_c = pn, pc
        else:
            take_n, take_c = _fullest_first(free, node_type, int(chosen[i]), int(demand[i]))
        free[take_n] -= take_c
        owner.append(np.full(take_n.size, i))
        nodes.append(take_n)
        counts.append(take_c)
    return (np.concatenate(owner).astype(np.int64), np.concatenate(nodes).astype(np.int32),
            np.concatenate(counts).astype(np.int32))


def decide_reference(rank, k, log_none, log_type, thr, demand, free, lease_s):
    """What Themis._decide did after ranking the contenders (``rank``) and taking the logs."""
    n = thr.shape[0]
    chosen, lease = np.full(n, -1, np.int64), np.full(n, lease_s)
    part = rank[:k]
    gain = log_none[part][:, None] - log_type[part]
    gain[(thr[part] <= 0)] = np.nan
    won, share = auction_reference(gain, demand[part], free)
    lease[part] = lease_s * share
    chosen[part] = won
    left = free - np.bincount(won[won >= 0], weights=demand[part][won >= 0],
                              minlength=free.size).astype(np.int64)
    leftovers_reference(np.r_[rank[k:], part[won < 0]], thr, demand, left, chosen)
    return chosen, lease


def contenders_reference(running, lease_end, now, thr, demand, capacity, work, since, remaining,
                         lease_s, pl_indptr, pl_nodes, pl_counts, node_type):
    """What Themis.schedule and _decide did before the auction (the numpy code)."""
    held = running & (lease_end > now * (1 + 1e-12))
    free = free_per_type_reference(capacity, held, pl_indptr, pl_nodes, pl_counts, node_type)
    cont = np.flatnonzero(~held)
    if cont.size == 0 or not free.any():
        return held, free, cont[:0], np.empty(0), np.empty((0, thr.shape[1]))
    rho_now, rho_none, rho_type = rhos_reference(thr, demand, capacity, work, since, remaining, lease_s)
    return held, free, cont[np.lexsort((cont, -rho_now[cont]))], rho_none, rho_type


def decide_and_place_reference(rank, k, log_none, log_type, thr, demand, free, lease_s, held,
                               pl_indptr, pl_nodes, pl_counts, node_type, node_gpus, lease_end, now):
    """What Themis.schedule did after the auction's logarithms (the numpy code)."""
    n = thr.shape[0]
    if rank.size:
        chosen, lease = decide_reference(rank, k, log_none, log_type, thr, demand, free, lease_s)
    else:
        chosen, lease = np.full(n, -1, np.int64), np.full(n, lease_s)
    owner, nodes, counts = place_reference(held, chosen, demand, pl_indptr, pl_nodes, pl_counts,
                                           node_type, node_gpus)
    placed = chosen >= 0
    lease_end[placed] = now + lease[placed]
    lease_end[~placed & ~held] = -np.inf
    order = np.argsort(owner, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=indptr[1:])
    running = held | placed
    wake = float(lease_end[running].min()) if running.any() else np.nan
    return indptr, nodes[order], counts[order], wake
