"""Plain-Python references of the Gavel round kernels (sim/policies/gavel_kernels.py): the
code the kernels replaced, one job at a time."""
from __future__ import annotations

import numpy as np


def select_jobs_reference(order, queues, thr, pri, scale, left, skip_zero_priority):
    left = np.array(left, np.int64)
    chosen = np.full(scale.shape[0], -1, np.int64)
    for t in order:
        queue = queues[t]
        ok = (thr[queue, t] > 0) & ((pri[queue, t] > 0) | (not skip_zero_priority))
        for i in queue[ok]:
            if left[t] == 0:
                break
            if chosen[i] < 0 and scale[i] <= left[t]:
                chosen[i] = t
                left[t] -= scale[i]
    return chosen


def assign_workers_reference(order, chosen, scale, placeable, prev_type, pl_indptr, pl_nodes,
                             pl_counts, node_type, node_gpus):
    """(owner, nodes, counts, lease extensions), or None when a type runs out of GPUs."""
    free = np.asarray(node_gpus, np.int64).copy()
    nodes, counts, owner, kept_total = [], [], [], 0
    for t in order:
        jobs = np.flatnonzero(chosen == t)
        jobs = jobs[np.argsort(-scale[jobs], kind="stable")]
        servers = np.flatnonzero(node_type == t)
        ptr = 0
        for sf in np.unique(scale[jobs])[::-1]:
            group = jobs[scale[jobs] == sf]
            kept = set()
            for i in group[prev_type[group] == t]:
                pn = pl_nodes[pl_indptr[i]:pl_indptr[i + 1]]
                pc = pl_counts[pl_indptr[i]:pl_indptr[i + 1]]
                if np.all(free[pn] >= pc):
                    free[pn] -= pc
                    nodes += list(pn)
                    counts += list(pc)
                    owner += [i] * len(pn)
                    kept.add(int(i))
                    kept_total += 1
            for i in group:
                if int(i) in kept or not placeable[i]:
                    continue
                need = int(sf)
                while need > 0:
                    if ptr >= servers.size:
                        return None
                    node = servers[ptr]
                    take = min(need, int(free[node]))
                    if take:
                        free[node] -= take
                        nodes.append(int(node))
                        counts.append(take)
                        owner.append(int(i))
                        need -= take
                    if free[node] == 0:
                        ptr += 1
    return np.asarray(owner, np.int64), np.asarray(nodes), np.asarray(counts), kept_total


def round_plan_reference(ids, thr, alloc, deficit, time_so_far, in_alloc, worker_time, order,
                         scale, left, skip_zero_priority, pl_indptr, pl_nodes, pl_counts,
                         node_type, node_gpus):
    """The numpy code that ``gavel_kernels.round_plan`` replaced: priorities, lexsorted
    queues, the pick, the assignment, the plan grouped by job.  (chosen, indptr, nodes,
    counts, lease extensions), or None when a type runs out of GPUs."""
    x, placeable = alloc[ids], in_alloc[ids]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(worker_time > 0, time_so_far[ids] / worker_time, 0.0)
        pri = np.where(frac > 0, x / frac, x * 1.0e9)
    pri = np.where((x > 0) & (thr <= 0), 0.0, pri)
    pri = np.where(placeable[:, None], pri, 0.0)
    d = deficit[ids]
    queues = np.stack([np.lexsort((-x[:, t], -d[:, t], -pri[:, t])) for t in range(thr.shape[1])]) \
        if ids.size else np.zeros((thr.shape[1], 0), np.int64)
    chosen = select_jobs_reference(order, queues, thr, pri, scale, left, skip_zero_priority)
    lens = np.diff(pl_indptr)
    prev = np.full(ids.size, -1, np.int64)
    for i in np.flatnonzero(lens):
        types = set(node_type[pl_nodes[pl_indptr[i]:pl_indptr[i + 1]]].tolist())
        prev[i] = types.pop() if len(types) == 1 else -1
    got = assign_workers_reference(order, chosen, scale, placeable, prev, pl_indptr, pl_nodes,
                                   pl_counts, node_type, node_gpus)
    if got is None:
        return None
    owner, nodes, counts, kept = got
    by_job = np.argsort(owner, kind="stable")
    indptr = np.r_[0, np.cumsum(np.bincount(owner, minlength=ids.size))].astype(np.int64)
    return chosen, indptr, nodes[by_job], counts[by_job], kept


def credit_finished_reference(ids, ran_on, member, worker_time, elapsed):
    """The numpy code ``gavel_kernels.credit_finished`` replaced (in place; True if any left)."""
    active = np.zeros(ran_on.shape[0], bool)
    active[ids] = True
    ran = np.flatnonzero(ran_on >= 0)
    gone = ran[~active[ran]]
    if gone.size:
        np.add.at(worker_time, ran_on[gone], elapsed)
        ran_on[gone] = -1
        member[gone] = False
    return bool(gone.size)


def credit_running_reference(ids, ran_on, member, time_so_far, worker_time, credit):
    t = ran_on[ids]
    on = t >= 0
    if on.any():
        time_so_far[ids[on], t[on]] += credit[ids[on]]
        np.add.at(worker_time, t[on], credit[ids[on]])
    active = np.zeros(member.shape[0], bool)
    active[ids] = True
    gone = np.flatnonzero(member & ~active)
    member[gone] = False
    return bool(gone.size)


def settle_deficits_reference(ids, in_alloc, alloc, time_so_far, deficit, elapsed, half_round):
    """The numpy code ``gavel_kernels.settle_deficits`` replaced (in place)."""
    received = time_so_far[ids] - half_round
    should = np.where(in_alloc[ids, None], alloc[ids] * elapsed, 0.0)
    deficit[ids] += should - received
    time_so_far[ids] = half_round


def credit_completed_reference(job_ids, ran_on, member, worker_time, elapsed):
    """What credit_finished_reference does to the finished jobs, given them."""
    done = np.asarray(job_ids, np.int64)
    done = done[ran_on[done] >= 0]
    np.add.at(worker_time, ran_on[done], elapsed)
    ran_on[done] = -1
    member[done] = False
    return done.size > 0


def micro_tasks_reference(now, round_s, rate, remaining, active, placed, overran, to_finish,
                          credit, credit_start):
    """The numpy code GavelRounds._micro_tasks ran before its kernel."""
    full = np.floor(rate * round_s)
    full = np.where(full > 0, full, rate * round_s)
    ids = active[placed]
    overran[active[to_finish[active]]] = True
    to_finish[:] = False
    finishes = (remaining <= full) & ~overran[ids]
    to_finish[ids[finishes]] = True
    steps = np.where(finishes, remaining, full)
    fin = now + steps / rate
    round_end = float(fin.max())
    credit[ids] = fin - credit_start
    scale = np.ones(active.size)
    go_on = ~finishes
    scale[placed[go_on]] = steps[go_on] / (rate[go_on] * (round_end - now))
    return round_end, scale


def pick_combinations_reference(queues, low, scale, members, left, n_jobs):
    """The Python loop ``gavel_kernels.pick_combinations`` replaced (gavel_packing._select)."""
    left = np.array(left, np.int64)
    taken, picked, types = set(), [], []
    for t in range(queues.shape[0]):
        for i in queues[t].tolist():
            if left[t] == 0:
                break
            jobs = {int(j) for j in members[i] if j >= 0}
            if not low[i, t] > 0 or scale[i] > left[t] or taken.intersection(jobs):
                continue
            left[t] -= scale[i]
            taken.update(jobs)
            picked.append(i)
            types.append(t)
    return np.array(picked, np.int64), np.array(types, np.int64)
