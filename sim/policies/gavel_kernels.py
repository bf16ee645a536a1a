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

#: Gavel's priority for a job on a type whose time total is still 0 (``allocation * 1e9``)
UNRUN_PRIORITY = 1.0e9


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
    jobs_buf = np.empty(chosen.shape[0], np.int64)
    for t in order:
        jobs = _by_scale(chosen, t, scale, jobs_buf)
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


@njit(cache=True)
def _by_scale(chosen, t, scale, out):
    """The jobs chosen for type t, by scale factor descending, ties by position (a stable
    sort: one pass per distinct scale factor, of which there are few)."""
    k = 0
    top = -1
    for i in range(chosen.shape[0]):
        if chosen[i] == t:
            top = max(top, scale[i])
            k += 1
    done = 0
    while done < k:
        cur = top
        top = -1
        for i in range(chosen.shape[0]):
            if chosen[i] != t:
                continue
            if scale[i] == cur:
                out[done] = i
                done += 1
            elif scale[i] < cur:
                top = max(top, scale[i])
    return out[:k]


def round_plan(ids, thr, alloc, deficit, time_so_far, in_alloc, worker_time, order, scale, left,
               skip_zero_priority: bool, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus,
               name: str) -> tuple:
    """One whole Gavel round in one compiled call: the priorities, the per-type queues, the
    greedy pick (:func:`select_jobs`) and the worker assignment (:func:`assign_workers`), and
    the plan as CSR aligned with ``ids``.

    Args:
        ids: int64 [n] the active job ids; ``alloc``, ``deficit``, ``time_so_far`` float64
            [n_jobs, m] and ``in_alloc`` bool [n_jobs] are indexed by job id.
        thr: float64 [n, m] throughputs; ``worker_time`` float64 [m] each type's total time;
        order, scale, left, skip_zero_priority: as :func:`select_jobs`.
        pl_indptr, pl_nodes, pl_counts: the current placement (CSR aligned with ``ids``);
        node_type, node_gpus: the cluster.

    Returns (chosen int64 [n] type or -1, indptr int64 [n+1], nodes int32, counts int32,
    lease extensions); raises SimError naming the job when a type runs out of GPUs."""
    # integer arrays go in as they are (int32 or int64: no copies), in the kernel's types
    ints = [np.ascontiguousarray(a) for a in
            (ids, scale, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus)]
    f64 = [np.ascontiguousarray(a, np.float64) for a in (thr, alloc, deficit, time_so_far, worker_time)]
    chosen, indptr, nodes, counts, kept, bad = _round_plan(
        ints[0], *f64, np.ascontiguousarray(in_alloc, np.bool_), np.asarray(order, np.int64),
        ints[1], np.array(left, np.int64), bool(skip_zero_priority), *ints[2:])
    if bad >= 0:
        raise SimError(f"policy {name}: could not assign {int(scale[bad])} GPUs to job "
                       f"{int(ids[bad])}")
    return chosen, indptr, nodes, counts, int(kept)


@njit(cache=True)
def _priorities(x, frac_num, worker_time, thr, placeable):
    """Gavel's per-type priorities: ``X / fraction`` of time received, ``X * 1e9`` while the
    type's total is 0, 0 where the throughput is 0 (with X > 0) or the job has no allocation."""
    n, m = x.shape
    pri = np.zeros((n, m))
    for i in range(n):
        if not placeable[i]:
            continue
        for t in range(m):
            frac = frac_num[i, t] / worker_time[t] if worker_time[t] > 0 else 0.0
            p = x[i, t] / frac if frac > 0 else x[i, t] * UNRUN_PRIORITY
            if x[i, t] > 0 and thr[i, t] <= 0:
                p = 0.0
            pri[i, t] = p
    return pri


#: runs sorted by insertion before :func:`_sort_range` merges them
QUEUE_RUN = 16


@njit(cache=True)
def _queues(pri, deficit, x):
    """Per type, the jobs by (priority, deficit, allocation) descending, ties by position
    (the order of ``np.lexsort((-x, -deficit, -pri))``): a stable radix sort on the
    priority's top 32 bits (:func:`_descending_bits`: an order consistent with the
    priority's), then each run of equal top bits sorted stably on the whole comparison
    (:func:`_sort_range`).  Priorities are never NaN."""
    n, m = pri.shape
    queues = np.empty((m, n), np.int64)
    buf = np.empty(n, np.int64)
    keys = np.empty((3, n))
    bits = np.empty(n, np.uint32)
    for t in range(m):
        for i in range(n):
            keys[0, i], keys[1, i], keys[2, i] = pri[i, t], deficit[i, t], x[i, t]
            bits[i] = _descending_bits(pri[i, t]) >> np.uint64(32)
        q = queues[t]
        _radix_sort(q, buf, bits)
        lo = 0
        while lo < n:
            hi = lo + 1
            while hi < n and bits[q[hi]] == bits[q[lo]]:
                hi += 1
            if hi - lo > 1:
                _sort_range(q, buf, lo, hi, keys)
            lo = hi
    return queues


@njit(cache=True, inline="always")
def _descending_bits(v):
    """An unsigned key whose ascending order is v's descending order (v not NaN; -0.0 and 0.0
    alike, as they compare equal)."""
    b = np.float64(v + 0.0).view(np.uint64)
    if b >> np.uint64(63):
        return b                       # negative: larger magnitude, larger key
    return ~(b | np.uint64(1 << 63))   # positive: larger value, smaller key


@njit(cache=True)
def _radix_sort(q, buf, bits):
    """q = the positions 0..n-1 ordered by ``bits`` (uint32) ascending, stably (LSD radix, 8
    bits a pass; a pass where every key has the same digit is skipped)."""
    n = bits.shape[0]
    for i in range(n):
        q[i] = i
    count = np.empty(257, np.int64)
    src, dst = q, buf
    for shift in range(0, 32, 8):
        count[:] = 0
        for i in range(n):
            count[((bits[i] >> np.uint32(shift)) & np.uint32(255)) + 1] += 1
        if count.max() == n:
            continue
        for d in range(256):
            count[d + 1] += count[d]
        for k in range(n):
            i = src[k]
            d = (bits[i] >> np.uint32(shift)) & np.uint32(255)
            dst[count[d]] = i
            count[d] += 1
        src, dst = dst, src
    if src is not q:
        q[:] = src


@njit(cache=True)
def _sort_range(q, buf, lo, hi, keys):
    """Sort q[lo:hi] stably by :func:`_before`: insertion sort of short runs, then bottom-up
    merges through ``buf``."""
    for a in range(lo, hi, QUEUE_RUN):
        _insertion_sort(q, a, min(a + QUEUE_RUN, hi), keys)
    width = QUEUE_RUN
    src, dst = q, buf
    while width < hi - lo:
        for a in range(lo, hi, 2 * width):
            _merge(src, dst, a, min(a + width, hi), min(a + 2 * width, hi), keys)
        src, dst = dst, src
        width *= 2
    if src is buf:
        q[lo:hi] = buf[lo:hi]


@njit(cache=True)
def _insertion_sort(q, lo, hi, keys):
    """Sort q[lo:hi] in place by :func:`_before`, stably (a job moves only past jobs it is
    strictly before)."""
    for i in range(lo + 1, hi):
        v = q[i]
        j = i - 1
        while j >= lo and _before(v, q[j], keys):
            q[j + 1] = q[j]
            j -= 1
        q[j + 1] = v


@njit(cache=True)
def _merge(src, dst, lo, mid, hi, keys):
    """Merge the sorted runs src[lo:mid] and src[mid:hi] into dst[lo:hi], stably."""
    a, b, k = lo, mid, lo
    while a < mid and b < hi:
        if _before(src[b], src[a], keys):
            dst[k] = src[b]
            b += 1
        else:
            dst[k] = src[a]
            a += 1
        k += 1
    while a < mid:
        dst[k] = src[a]
        a += 1
        k += 1
    while b < hi:
        dst[k] = src[b]
        b += 1
        k += 1


@njit(cache=True, inline="always")
def _before(i, j, keys):
    """Job i strictly before job j (``keys``: priority, deficit, allocation on one type;
    the earlier position wins ties: stable)."""
    if keys[0, i] != keys[0, j]:
        return keys[0, i] > keys[0, j]
    if keys[1, i] != keys[1, j]:
        return keys[1, i] > keys[1, j]
    return keys[2, i] > keys[2, j]


@njit(cache=True)
def _previous_types(pl_indptr, pl_nodes, node_type):
    """The GPU type each job ran on: -1 for none, or for several types."""
    n = pl_indptr.shape[0] - 1
    prev = np.full(n, -1, np.int64)
    for i in range(n):
        lo, hi = pl_indptr[i], pl_indptr[i + 1]
        if hi == lo:
            continue
        t = node_type[pl_nodes[lo]]
        for e in range(lo + 1, hi):
            if node_type[pl_nodes[e]] != t:
                t = -1
                break
        prev[i] = t
    return prev


@njit(cache=True)
def _plan_csr(n, owner, nodes, counts):
    """(indptr, nodes, counts) grouped by owner, entries in their order within a job."""
    indptr = np.zeros(n + 1, np.int64)
    for e in range(owner.shape[0]):
        indptr[owner[e] + 1] += 1
    for i in range(n):
        indptr[i + 1] += indptr[i]
    pos = indptr[:-1].copy()
    out_nodes = np.empty(owner.shape[0], np.int32)
    out_counts = np.empty(owner.shape[0], np.int32)
    for e in range(owner.shape[0]):
        k = pos[owner[e]]
        out_nodes[k], out_counts[k] = nodes[e], counts[e]
        pos[owner[e]] += 1
    return indptr, out_nodes, out_counts


@njit(cache=True)
def _round_plan(ids, thr, alloc, deficit, time_so_far, worker_time, in_alloc, order, scale, left,
                skip_zero, pl_indptr, pl_nodes, pl_counts, node_type, node_gpus):
    n, m = thr.shape
    x = np.empty((n, m))
    d = np.empty((n, m))
    got = np.empty((n, m))
    placeable = np.empty(n, np.bool_)
    for k in range(n):
        j = ids[k]
        placeable[k] = in_alloc[j]
        for t in range(m):
            x[k, t], d[k, t], got[k, t] = alloc[j, t], deficit[j, t], time_so_far[j, t]
    pri = _priorities(x, got, worker_time, thr, placeable)
    chosen = _select(order, _queues(pri, d, x), thr, pri, scale, left, skip_zero)
    prev = _previous_types(pl_indptr, pl_nodes, node_type)
    owner, nodes, counts, used, kept, bad = _assign(order, chosen, scale, placeable, prev,
                                                   pl_indptr, pl_nodes, pl_counts, node_type,
                                                   node_gpus)
    indptr, nodes, counts = _plan_csr(n, owner[:used], nodes[:used], counts[:used])
    return chosen, indptr, nodes, counts, kept, bad


def credit_finished(ids, ran_on, member, worker_time, elapsed: float) -> bool:
    """Jobs dispatched this round (``ran_on[j] >= 0``, indexed by job id) that are no longer
    active (``ids``) have finished: their ``elapsed`` seconds count for their type's total,
    they leave the round and the job set.  Updates the arrays in place; True if any left."""
    return bool(_credit_finished(np.ascontiguousarray(ids, np.int64), ran_on, member,
                                 worker_time, float(elapsed)))


def credit_completed(job_ids, ran_on, member, worker_time, elapsed) -> bool:
    """:func:`credit_finished` for jobs known to have finished (``job_ids``, at skipped
    decisions): those dispatched this round credit ``elapsed`` (seconds, one for all or one
    a job) to their type, in order, and leave the round and the job set.  In place; True if
    any left."""
    ids = np.ascontiguousarray(job_ids, np.int64)
    return bool(_credit_completed(ids, ran_on, member, worker_time,
                                  np.broadcast_to(np.asarray(elapsed, np.float64), ids.shape)))


def micro_tasks(now: float, round_s: float, rate, remaining, active, placed, overran, to_finish,
                credit, credit_start: float) -> tuple[float, np.ndarray]:
    """Gavel's micro-tasks for the jobs dispatched this round (``placed``: positions in
    ``active``, running at ``rate``, with ``remaining`` iterations, NaN where hidden): each runs
    ``min(int(rate * round_s), remaining)`` iterations (all of a round's if that is 0) and the
    round ends when the last one stops.  A job that was to finish in the previous round and is
    still active has overrun (``overran``, by job id: whole rounds from now on).  Updates
    ``overran``, ``to_finish`` and ``credit`` (its finish minus ``credit_start``) in place;
    returns (the round's end, the rate scale aligned with ``active`` under which each job's
    iterations end at the round's end, 1 for a job that finishes in the round)."""
    return _micro_tasks(float(now), float(round_s), np.ascontiguousarray(rate, np.float64),
                        np.ascontiguousarray(remaining, np.float64),
                        np.ascontiguousarray(active, np.int64), np.ascontiguousarray(placed, np.int64),
                        overran, to_finish, credit, float(credit_start))


def credit_running(ids, ran_on, member, time_so_far, worker_time, credit) -> bool:
    """At a round's end: each active job j dispatched this round received ``credit[j]``
    seconds (float64, indexed by job id) on its type (its counter and the type's total, in
    job-id order); members no longer active (finished without being dispatched) leave the
    job set.  In place; True if any left."""
    return bool(_credit_running(np.ascontiguousarray(ids, np.int64), ran_on, member,
                                time_so_far, worker_time, np.ascontiguousarray(credit, np.float64)))


def pick_combinations(queues, low, scale, members, left, n_jobs: int) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's greedy pick over job combinations (:mod:`sim.policies.gavel_packing`): types in
    order, each type's entries in its queue order, an entry taken while its type has GPUs
    left if its slowest member runs there (``low[e, t] > 0``), its scale factor fits and none
    of its jobs is taken yet.

    Args:
        queues: int64 [m, E] entry positions per type, in priority order.
        low: float [E, m] the slowest member's rate; scale: int [E] GPUs per entry.
        members: int64 [E, 2] the entry's job ids (-1: a single job's second).
        left: int [m] GPUs of each type (not modified); n_jobs: job ids are below it.

    Returns (the entries taken, in order; the type each was taken on)."""
    return _pick_combinations(np.ascontiguousarray(queues, np.int64), np.ascontiguousarray(low, np.float64),
                              np.ascontiguousarray(scale, np.int64), np.ascontiguousarray(members, np.int64),
                              np.array(left, np.int64), int(n_jobs))


@njit(cache=True)
def _pick_combinations(queues, low, scale, members, left, n_jobs):
    m, n_entries = queues.shape
    taken = np.zeros(n_jobs, np.bool_)
    picked, types = np.empty(n_entries, np.int64), np.empty(n_entries, np.int64)
    k = 0
    for t in range(m):
        for q in range(n_entries):
            if left[t] == 0:
                break
            e = queues[t, q]
            a, b = members[e, 0], members[e, 1]
            if not low[e, t] > 0 or scale[e] > left[t] or taken[a] or (b >= 0 and taken[b]):
                continue
            left[t] -= scale[e]
            taken[a] = True
            if b >= 0:
                taken[b] = True
            picked[k], types[k] = e, t
            k += 1
    return picked[:k], types[:k]


def settle_deficits(ids, in_alloc, alloc, time_so_far, deficit, elapsed: float, half_round: float) -> None:
    """At an allocation reset, for each active job j (``ids``) and type t: the deficit grows
    by what the old allocation entitled it to over the ``elapsed`` seconds since the last
    reset (``alloc[j, t] * elapsed``, 0 if j was not in it: ``in_alloc``) minus the time it
    received (``time_so_far[j, t] - half_round``), and its counter restarts at
    ``half_round``.  In place (arrays indexed by job id)."""
    _settle_deficits(np.ascontiguousarray(ids, np.int64), in_alloc, alloc, time_so_far, deficit,
                     float(elapsed), float(half_round))


@njit(cache=True)
def _settle_deficits(ids, in_alloc, alloc, time_so_far, deficit, elapsed, half_round):
    for j in ids:
        for t in range(alloc.shape[1]):
            received = time_so_far[j, t] - half_round
            should = alloc[j, t] * elapsed if in_alloc[j] else 0.0
            deficit[j, t] += should - received
            time_so_far[j, t] = half_round


@njit(cache=True)
def _active_mask(ids, n_jobs):
    active = np.zeros(n_jobs, np.bool_)
    for j in ids:
        active[j] = True
    return active


@njit(cache=True)
def _credit_finished(ids, ran_on, member, worker_time, elapsed):
    active = _active_mask(ids, ran_on.shape[0])
    gone = np.flatnonzero((ran_on >= 0) & ~active)
    return _credit_completed(gone, ran_on, member, worker_time, np.full(gone.shape[0], elapsed))


@njit(cache=True)
def _credit_completed(job_ids, ran_on, member, worker_time, elapsed):
    gone = False
    for i in range(job_ids.shape[0]):
        j = job_ids[i]
        if ran_on[j] >= 0:
            worker_time[ran_on[j]] += elapsed[i]
            ran_on[j] = -1
            member[j] = False
            gone = True
    return gone


@njit(cache=True)
def _micro_tasks(now, round_s, rate, remaining, active, placed, overran, to_finish, credit,
                 credit_start):
    for j in active:
        if to_finish[j]:
            overran[j] = True
    to_finish[:] = False
    k = placed.shape[0]
    steps = np.empty(k)
    fin = np.empty(k)
    finishes = np.zeros(k, np.bool_)
    for i in range(k):
        j = active[placed[i]]
        full = np.floor(rate[i] * round_s)
        if not full > 0:
            full = rate[i] * round_s
        finishes[i] = remaining[i] <= full and not overran[j]   # False where NaN (hidden)
        steps[i] = remaining[i] if finishes[i] else full
        fin[i] = now + steps[i] / rate[i]            # Gavel: timestamp + num_steps / throughput
        if finishes[i]:
            to_finish[j] = True
    round_end = fin.max()
    scale = np.ones(active.shape[0])
    for i in range(k):
        credit[active[placed[i]]] = fin[i] - credit_start
        if not finishes[i]:
            scale[placed[i]] = steps[i] / (rate[i] * (round_end - now))
    return round_end, scale


@njit(cache=True)
def _credit_running(ids, ran_on, member, time_so_far, worker_time, credit):
    for j in ids:
        t = ran_on[j]
        if t >= 0:
            time_so_far[j, t] += credit[j]
            worker_time[t] += credit[j]
    active = _active_mask(ids, member.shape[0])
    gone = False
    for j in range(member.shape[0]):
        if member[j] and not active[j]:
            member[j] = False
            gone = True
    return gone
