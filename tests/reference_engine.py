"""Plain-Python reference of the event kernel (csrc/sk_engine.c) and its driver.

Same model, written for clarity: a heap of (time, kind, seq) events, per-job
dicts, progress accrued at every change (reading does not write).  tests/test_engine_reference.py holds the
C engine to it job by job.  Policies and the oracle are shared with the real
engine: this reference checks the event/progress/allocation bookkeeping.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from sim.defrag import defragment_plan
from sim.network import COMM_SHARE_CAP, GBIT_BYTES, gradient_bytes
from sim.placement import placement_summary
from sim.state import ARRIVAL, COMPLETION, ROUND, TIMER, SchedState

EV_COMPLETION, EV_ARRIVAL, EV_ROUND, EV_TIMER = 0, 1, 2, 3


class RefJob:
    def __init__(self, arrival, work, delay):
        self.arrival, self.work, self.delay = arrival, work, delay
        self.state = "future"
        self.remaining = work
        self.rate = 0.0
        self.placement: list[tuple[int, int]] = []
        self.resume_at = 0.0
        self.last_update = 0.0
        self.queued_since = math.nan
        self.first_start = math.nan
        self.finish = math.nan
        self.gpu_seconds = 0.0
        self.run_seconds = 0.0
        self.restarts = 0
        self.version = 0
        self.scale = 1.0
        self.shared = False         # Plan.shared: two shared placements a GPU, half charged

    @property
    def ngpu(self):
        return sum(c for _, c in self.placement)

    def live(self, t):
        """(GPU-seconds, run seconds, remaining) at t, without writing (as the C kernel)."""
        gpu_s, run_s, remaining = self.gpu_seconds, self.run_seconds, self.remaining
        if self.state == "running":
            dt = t - self.last_update
            gpu_s += (0.5 if self.shared else 1.0) * float(self.ngpu) * dt
            run_s += dt
            begin = max(self.last_update, self.resume_at)
            if t > begin:
                remaining -= self.rate * (t - begin)
        return gpu_s, run_s, remaining

    def accrue(self, t):
        self.gpu_seconds, self.run_seconds, self.remaining = self.live(t)
        self.last_update = t


def reference_run(cluster, jobs, policy, oracle, round_s, type_choice="first-fit", type_seed=0,
                  first_start_delay=None, round_origin=None):
    """``type_choice``/``type_seed``: the run's GPU type rule (EngineConfig's), handed to the
    policies through their SchedState; the placer (sim.placement, held to
    tests/reference_placement.py) applies it.  ``first_start_delay``: EngineConfig's (a first
    start pays the restart delay too; None: the policy's attribute).  ``round_origin``:
    EngineConfig's (rounds at origin + k round_s; None: the policy's attribute, else the first
    arrival)."""
    if round_origin is None:
        round_origin = getattr(policy, "round_origin", None)
    if first_start_delay is None:
        first_start_delay = bool(getattr(policy, "first_start_delay", False))
    n = len(jobs)
    js = [RefJob(float(jobs.arrival[i]), float(jobs.work[i]), float(jobs.restart_delay[i]))
          for i in range(n)]
    cap = [int(g) for g in cluster.node_gpus]
    used = Usage(len(cap))
    heap: list = []
    seq = [0]

    def push(t, kind, job=-1, version=0):
        heapq.heappush(heap, (t, kind, seq[0], job, version))
        seq[0] += 1

    first = min(j.arrival for j in js)
    start = first
    if round_origin is not None and round_s > 0:
        # the latest origin + k round_s (k an integer) at or before the first arrival
        k = math.ceil((round_origin - first) / round_s)
        start = round_origin - k * round_s
        if start > first:
            start -= round_s
    order = sorted(range(n), key=lambda i: (js[i].arrival, i))
    for i in order:
        push(js[i].arrival, EV_ARRIVAL, i)
    round_k = [0]

    def first_round_at_or_after(t):
        k = 0
        if t > start:
            k = int(math.floor((t - start) / round_s))
        while start + k * round_s < t:
            k += 1
        return k

    if round_s > 0:
        round_k[0] = first_round_at_or_after(js[order[0]].arrival)
        push(start + round_k[0] * round_s, EV_ROUND)
    now = start
    triggers = policy.triggers
    done = 0
    while done < n:
        reasons = 0
        while True:
            if not heap:
                if reasons:
                    break
                raise RuntimeError("reference engine stalled")
            t, kind, _, j, ver = heap[0]
            if reasons and t > now:
                break
            heapq.heappop(heap)
            now = max(now, t)
            if kind == EV_ARRIVAL:
                js[j].state = "queued"
                js[j].last_update = now
                js[j].queued_since = now
                reasons |= triggers & ARRIVAL
            elif kind == EV_COMPLETION:
                job = js[j]
                if ver != job.version or job.state != "running":
                    continue
                job.accrue(now)
                job.remaining = 0.0
                job.finish = now
                job.state = "done"
                used.release(job)
                job.rate = 0.0
                job.version += 1
                done += 1
                reasons |= triggers & COMPLETION
            elif kind == EV_ROUND:
                active = any(x.state in ("queued", "running") for x in js)
                if active:
                    reasons |= ROUND
                if done < n:
                    k = round_k[0] + 1
                    t_next = start + k * round_s
                    if not active:
                        future = [x.arrival for x in js if x.state == "future"]
                        if future:
                            k2 = first_round_at_or_after(min(future))
                            if k2 > k:
                                k, t_next = k2, start + k2 * round_s
                    round_k[0] = k
                    push(t_next, EV_ROUND)
            elif kind == EV_TIMER:
                if done < n:
                    reasons |= TIMER
            if done == n:
                break
        if done == n:
            break
        state = _state(now, reasons, cluster, jobs, js, cap, used, getattr(policy, "view", "all"),
                       oracle, type_choice, type_seed, first_start_delay)
        plan = policy.schedule(state)
        if getattr(policy, "defragment", False):
            plan = defragment_plan(state, plan)
        _apply(now, state, plan, js, used, cap, oracle, cluster, push,
               getattr(policy, "rate_model", None), first_start_delay)
        if plan.wakeup is not None and plan.wakeup > now:
            push(plan.wakeup, EV_TIMER)
    return {
        "first_start": np.array([j.first_start for j in js]),
        "finish": np.array([j.finish for j in js]),
        "gpu_seconds": np.array([j.gpu_seconds for j in js]),
        "restarts": np.array([j.restarts for j in js]),
    }


def _state(now, reasons, cluster, jobs, js, cap, used, view="all", oracle=None,
           type_choice="first-fit", type_seed=0, first_start_delay=False):
    listed = ("queued",) if view == "queued" else ("queued", "running")
    active = [i for i, j in enumerate(js) if j.state in listed]
    live = [js[i].live(now) for i in active]        # reading never writes
    indptr = [0]
    nodes, counts = [], []
    for i in active:
        for node, c in js[i].placement:
            nodes.append(node)
            counts.append(c)
        indptr.append(len(nodes))
    return SchedState(
        now=now, reasons=reasons, cluster=cluster, jobs=jobs,
        active=np.array(active, np.int64),
        ngpu=np.array([js[i].ngpu for i in active], np.int32),
        remaining=np.array([max(rem, 0.0) for _, _, rem in live]),
        attained_gpu_s=np.array([gpu_s for gpu_s, _, _ in live]),
        run_s=np.array([run_s for _, run_s, _ in live]),
        queued_since=np.array([js[i].queued_since if js[i].state == "queued" else math.nan
                               for i in active]),
        pl_indptr=np.array(indptr, np.int64), pl_nodes=np.array(nodes, np.int32),
        pl_counts=np.array(counts, np.int32),
        node_free=np.array([c - used.gpus(x) for x, c in enumerate(cap)], np.int32), oracle=oracle,
        type_choice=type_choice, type_seed=type_seed, first_start_delay=first_start_delay)


def _oracle_rate(state, i, placement, oracle, cluster, rate_model=None):
    ip = np.array([0, len(placement)], np.int64)
    if rate_model is not None:              # the policy's placement-level rate model
        return float(rate_model.rates(state.jobs, np.array([i], np.int64), ip,
                                      np.array([x for x, _ in placement], np.int32),
                                      np.array([c for _, c in placement], np.int32),
                                      cluster, oracle)[0])
    ng, nn, mask, ms = placement_summary(ip, np.array([x for x, _ in placement], np.int32),
                                         np.array([c for _, c in placement], np.int32),
                                         cluster.node_type, cluster.node_speed)
    rate = float(oracle.rates(state.jobs.model[[i]], ng, nn, mask, ms, cluster.gpu_types)[0])
    return _network_rate(rate, oracle, int(state.jobs.model[i]), placement, cluster)


def _network_rate(rate, oracle, model, placement, cluster):
    """sim.network's term, node by node: the measured ring all-reduce of the oracle's reference
    bandwidth replaced by the one over the placement's slowest link."""
    reference = getattr(oracle, "reference_bandwidth_gbps", None)
    k = sum(c for _, c in placement)
    if reference is None or k <= 1 or not rate > 0:
        return rate
    nodes = [x for x, _ in placement]
    if len(nodes) == 1:
        link, base = float(cluster.intra_bw_gbps[nodes[0]]), float(reference[0])
    else:
        link, base = min(float(cluster.inter_bw_gbps[x]) for x in nodes), float(reference[1])
    if link == base:
        return rate
    if link == 0:
        return 0.0
    tau = k / rate
    ring = 2.0 * (k - 1.0) / k * float(gradient_bytes([oracle.models[model]])[0]) / (base * GBIT_BYTES)
    return k / (tau + min(ring, COMM_SHARE_CAP * tau) * (base / link - 1.0))


class Usage:
    """Per node: exclusive GPUs held, and the GPU counts of the shared placements on it (two
    a GPU, a job's own workers on distinct GPUs)."""

    def __init__(self, n):
        self.exclusive = [0] * n
        self.shared: list[list[int]] = [[] for _ in range(n)]

    def gpus(self, node):
        held = self.shared[node]
        return self.exclusive[node] + (max(max(held), (sum(held) + 1) // 2) if held else 0)

    def take(self, job, sign=1):
        for node, c in job.placement:
            if not job.shared:
                self.exclusive[node] += sign * c
            elif sign > 0:
                self.shared[node].append(c)
            else:
                self.shared[node].remove(c)

    def release(self, job):
        self.take(job, -1)
        job.placement = []
        job.shared = False


def _apply(now, state, plan, js, used, cap, oracle, cluster, push, rate_model=None, first_start_delay=False):
    changes = []
    scales = {}
    for a, i in enumerate(state.active):
        new = [(int(plan.nodes[k]), int(plan.counts[k]))
               for k in range(plan.indptr[a], plan.indptr[a + 1])]
        scale = 1.0 if plan.rate_scale is None else float(plan.rate_scale[a])
        shared = bool(new) and plan.shared is not None and bool(plan.shared[a])
        if new != js[i].placement or (new and shared != js[i].shared):
            changes.append((int(i), new, shared))
            scales[int(i)] = scale
        elif new and plan.rate_scale is not None and scale != js[i].scale:
            # same placement, new rate: no restart
            job = js[i]
            job.accrue(now)
            job.rate = _oracle_rate(state, i, new, oracle, cluster, rate_model) * scale
            job.scale = scale
            job.version += 1
            push(max(job.resume_at, now) + max(job.remaining, 0.0) / job.rate, EV_COMPLETION, i,
                 job.version)
    for i, new, _ in changes:                   # release first
        job = js[i]
        job.accrue(now)
        used.release(job)
        job.moved = job.state == "running"
    for i, new, shared in changes:
        job = js[i]
        if not new:
            if job.moved:
                job.state = "queued"
                job.queued_since = now
            job.rate = 0.0
            job.version += 1
            continue
        job.placement, job.shared = new, shared
        used.take(job)
        assert all(used.gpus(node) <= cap[node] for node, _ in new), "over-allocation"
        if job.state == "queued":
            job.state = "running"
        if math.isnan(job.first_start):
            job.first_start = now
            job.resume_at = now + (job.delay if first_start_delay else 0.0)
        else:
            job.restarts += 1
            job.resume_at = now + job.delay
        rate = _oracle_rate(state, i, new, oracle, cluster, rate_model) * scales[i]
        job.scale = scales[i]
        job.rate = rate
        job.version += 1
        begin = max(job.resume_at, now)
        push(begin + max(job.remaining, 0.0) / rate, EV_COMPLETION, i, job.version)
