"""Hops (paper 3; algorithms.md §4): server-level throughput sensing, latency-ratio priority,
service window, prior-weighted ILP on HiGHS, and fragment plans with low-sensitivity jobs.

One decision (§4.10): priorities are taken at the last ``refresh_s`` tick; at a round start
(every ``round_s``) the profiling queue runs first (one GPU of each type per new job, reserved for
the round), then the first ILP places the service window on every GPU (placements end at the
round end), then up to ``max_plans - 1`` fragment plans place sensitivity-adjusted candidates on
the GPUs still idle.  Arrivals and completions between round starts get fragment plans only
(running jobs keep their GPUs).  Helpers live in :mod:`sim.hops`.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..hops.configs import Configs, generate_configs, requirement_sets, sensitivity
from ..hops.estimator import ThroughputEstimator
from ..hops.ilp import DEFAULT_MIP_GAP, gain, prior_weights, solve
from ..hops.priority import PRIORITIES, priority
from ..hops.window import sensitivity_adjust, service_window
from ..placement import changed_jobs, csr_rows
from ..state import ARRIVAL, COMPLETION, ROUND, Plan, SchedState
from . import register
from .base import Policy
from .sia import DEFAULT_RESTART_PENALTY_S
from .sia_rigid import rigid_restart_factors

#: why a job that waits was not placed (``Hops.waiting_reason``): for good ...
NO_FIT = "no count of its requirement set fits the GPUs of any one server type"
#: ... or at its last plan (cleared when it is placed)
NO_CONFIG = "every configuration of its requirement set is infeasible or has zero estimated throughput"


@register
class Hops(Policy):
    """Hops with named knobs (defaults: algorithms.md §4, [I] where the paper is silent).

    round_s: round period (60 s [I]); refresh_s: priority refresh (30 s [S]);
    priority: "lr" (latency ratio [S]), "las", "sjf", "srtf" or "ftf"; lam: lambda of the ILP
    weights (1 [S]; 2 in the FTF experiment); sigma: sensitivity threshold (1.4 [S]);
    mip_rel_gap: relative MIP gap (0.01 [I, Fig.14]); r_num: options generated from
    [gpus_min, gpus_max] (4 [I]); top_servers / dist_limit: aggregated servers per type and
    distributed runs per type kept per requirement (4 / 4 [I]); profile_iters, observe_iters:
    iterations per profiling run (30, within the paper's 10-50) and per running observation
    (20 [I]); keep_bonus: relative gain of a running job's current placement (0.05 [I]: avoids
    restarts between equal configurations); restart_penalty_s: the Sia restart penalty d the
    first plan charges a running job for any configuration but its current one (algorithms.md
    §4.10 [I]: the gain of another configuration times Sia's re-allocation factor
    ``max(age - restarts d, 0) / (age + d)``, 1 while the job has attained under d GPU-seconds;
    Sia's 30 s; 0: no charge, only ``keep_bonus``); max_plans: ILPs per decision (4 [I]);
    time_limit_s: HiGHS wall-clock limit per ILP (None: no limit, deterministic); max_nodes:
    HiGHS branch-and-bound node limit (None).  ``ilp_counts`` counts how each ILP ended
    (:class:`sim.hops.ilp.IlpOutcome`: "lp", "ilp", "limit", "fallback").
    """

    name = "hops"
    description = ("Hops: server-level throughput sensing, latency-ratio priority, service window, "
                   "prior-weighted ILP (HiGHS), fragment plans; 60 s rounds")
    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    round_s: ClassVar[float | None] = 60.0
    preemptive = True
    #: reads the true remaining work (latency ratio, SJF/SRTF/FTF priorities, the iteration-time
    #: model): given it in learning runs too
    clairvoyant = True
    #: a configuration never mixes GPU types (§4.7): a job needs a count that fits one type
    single_type_jobs: ClassVar[bool] = True

    def __init__(self, placement: str = "consolidated", round_s: float = 60.0, refresh_s: float = 30.0,
                 priority: str = "lr", lam: float = 1.0, sigma: float = 1.4,
                 mip_rel_gap: float = DEFAULT_MIP_GAP, r_num: int = 4, top_servers: int = 4,
                 dist_limit: int = 4, profile_iters: int = 30, observe_iters: int = 20,
                 keep_bonus: float = 0.05, max_plans: int = 4, time_limit_s: float | None = None,
                 max_nodes: int | None = None, restart_penalty_s: float = DEFAULT_RESTART_PENALTY_S):
        super().__init__(placement)
        if not restart_penalty_s >= 0:
            raise ConfigError(f"policy hops: restart_penalty_s must be >= 0, got {restart_penalty_s}")
        self.restart_penalty_s = float(restart_penalty_s)
        if priority not in PRIORITIES:
            raise ConfigError(f"policy hops: unknown priority {priority!r} (known: {', '.join(PRIORITIES)})")
        if not (round_s > 0 and refresh_s > 0 and sigma > 0 and lam >= 0 and 0 <= mip_rel_gap < 1):
            raise ConfigError("policy hops: round_s, refresh_s, sigma must be > 0, lam >= 0, "
                              "mip_rel_gap in [0, 1)")
        self.round_s, self.refresh_s, self.priority = float(round_s), float(refresh_s), priority
        self.lam, self.sigma, self.mip_rel_gap = float(lam), float(sigma), float(mip_rel_gap)
        self.r_num, self.top_servers, self.dist_limit = int(r_num), int(top_servers), int(dist_limit)
        self.profile_iters, self.observe_iters = int(profile_iters), int(observe_iters)
        self.keep_bonus, self.max_plans, self.time_limit_s = float(keep_bonus), int(max_plans), time_limit_s
        self.max_nodes = max_nodes
        self._jobs = None
        #: a list to append (active job ids, their priorities) to at every decision (diagnostics,
        #: scalability/hops_ftf_diagnosis.py); None records nothing
        self.priority_log: list[tuple[np.ndarray, np.ndarray]] | None = None

    def params(self) -> dict:
        return {**super().params(), **{k: getattr(self, k) for k in (
            "round_s", "refresh_s", "priority", "lam", "sigma", "mip_rel_gap", "r_num", "top_servers",
            "dist_limit", "profile_iters", "observe_iters", "keep_bonus", "max_plans", "time_limit_s",
            "max_nodes", "restart_penalty_s")}}

    # -- per-run state --------------------------------------------------------------------
    def _start(self, state: SchedState) -> None:
        jobs, c = state.jobs, state.cluster
        self._jobs, self._now = jobs, state.now
        self.reqs = requirement_sets(jobs.demand, jobs.gpus_min, jobs.gpus_max, jobs.gpus_allowed, self.r_num)
        most = int(np.bincount(c.node_type, weights=c.node_gpus, minlength=c.n_types).max())
        self.reqs = [r[r <= most] for r in self.reqs]            # configs never mix GPU types
        self.r_min = np.array([r[0] if r.size else 0 for r in self.reqs], np.int64)
        self.r_avg = np.array([r.mean() if r.size else 1.0 for r in self.reqs])
        models = jobs.model.astype(np.int64)
        rho = [sensitivity(state.oracle, models, c.gpu_types, t) for t in range(c.n_types)]
        self.rho = np.mean(rho, axis=0)
        self.est = ThroughputEstimator(len(jobs), c.node_type, c.n_types)
        self.last_full = -np.inf
        self.waiting_reason: dict[int, str] = {int(j): NO_FIT for j in np.flatnonzero(self.r_min == 0)}
        self.ilp_counts: dict[str, int] = {}
        self.restarts = np.zeros(len(jobs), np.int64)        # placement changes after the first start
        self.started = np.zeros(len(jobs), np.bool_)
        #: GPUs per server the current round's profiling holds (the engine sees them idle)
        self.reserved = np.zeros(c.n_nodes, np.int64)
        #: per full round with profiling: (time, GPUs it holds, jobs it profiles), for metrics
        #: that must count those GPUs busy (sim.hops.metrics.fragments_per_round)
        self.profile_log: list[tuple[float, int, int]] = []

    def schedule(self, state: SchedState) -> Plan:
        if self._jobs is not state.jobs or state.now < self._now:
            self._start(state)
        self._now = state.now
        full = bool(state.reasons & ROUND) or state.now >= self.last_full + self.round_s
        if full:
            self.last_full = state.now
            self._observe(state)
            self.reserved = self._profile(state)
        reserved = self.reserved
        ids = state.active
        tick = np.floor(state.now / self.refresh_s) * self.refresh_s
        prio = priority(self.priority, state, tick, self.r_avg[ids])
        if self.priority_log is not None:
            self.priority_log.append((ids.copy(), prio.copy()))
        order = np.lexsort((-prio,))
        ok = self.est.profiled[ids] & (self.r_min[ids] > 0)
        rows = self._plan(state, order, ok, prio, full, reserved)
        lens, flat = csr_rows(self._pool_indptr, rows)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        nodes, counts = self._pool_nodes[flat].astype(np.int32), self._pool_counts[flat].astype(np.int32)
        after = np.bincount(np.repeat(np.arange(ids.size), lens), weights=counts, minlength=ids.size)
        # restarts as the engine and Sia count them: a new non-empty placement after the first start
        moved = changed_jobs(state.pl_indptr, state.pl_nodes, state.pl_counts, indptr, nodes, counts) & (after > 0)
        self.restarts[ids[moved & self.started[ids]]] += 1
        self.started[ids[after > 0]] = True
        # jobs that can never run (NO_FIT) do not keep the run awake
        waiting = ((rows < 0) & (self.r_min[ids] > 0)).any() or reserved.any()
        return Plan(indptr, nodes, counts,
                    wakeup=self.last_full + self.round_s if waiting else None)

    # -- sensing -----------------------------------------------------------------------------
    def _observe(self, state: SchedState) -> None:
        """One running-mode observation per running job (layers 1 and 2)."""
        if state.monitor is None:
            return
        for p in np.flatnonzero(state.ngpu > 0).tolist():
            nodes = state.pl_nodes[state.pl_indptr[p]:state.pl_indptr[p + 1]]
            j = int(state.active[p])
            self.est.record(j, nodes, state.monitor.observe(j, nodes, self.observe_iters))

    def _profile(self, state: SchedState) -> np.ndarray:
        """Run the profiling queue: each new job on one GPU of every type (the server with the
        most GPUs, least reserved first); returns GPUs reserved per server for this round."""
        c = state.cluster
        new = state.active[~self.est.profiled[state.active]]
        reserved = np.zeros(c.n_nodes, np.int64)
        if state.monitor is None:
            self.est.profiled[new] = True
            return reserved
        for j in new.tolist():
            for t in range(c.n_types):
                room = np.where(c.node_type == t, c.node_gpus - reserved, -1)
                s = int(np.argmax(room))
                if room[s] > 0:
                    reserved[s] += 1
                    self.est.record_profile(j, s, state.monitor.profile(j, s, self.profile_iters))
            self.est.profiled[j] = True
        if new.size:
            self.profile_log.append((state.now, int(reserved.sum()), int(new.size)))
        return reserved

    # -- planning ----------------------------------------------------------------------------
    def _plan(self, state, order, ok, prio, full, reserved) -> np.ndarray:
        """Per active job its row in the pool (current placements, then configs); -1: none."""
        c, ids = state.cluster, state.active
        k = ids.shape[0]
        rows = np.full(k, -1, np.int64)
        pools = [Configs(np.arange(k), state.pl_indptr, state.pl_nodes.astype(np.int64),
                         state.pl_counts.astype(np.int64))]
        offset = k
        if full:
            cap = c.node_gpus.astype(np.int64) - reserved
        else:
            cap = np.maximum(state.node_free.astype(np.int64) - reserved, 0)
            rows[state.ngpu > 0] = np.flatnonzero(state.ngpu > 0)
        elig = order[ok[order]]
        win = service_window(self.r_min[ids[elig]], c.total_gpus)
        in_set = np.zeros(elig.shape[0], np.bool_)
        in_set[:win] = True
        in_set &= rows[elig] < 0
        for plan_no in range(self.max_plans):
            if plan_no > 0 or not full:
                unplaced = rows[elig] < 0
                in_set = sensitivity_adjust(self.rho[ids[elig]], self.r_min[ids[elig]], in_set & unplaced,
                                            win, int(cap.sum())) & unplaced
            cand = elig[in_set]
            if cand.size == 0 or cap.sum() == 0:
                break
            cfg, chosen = self._ilp(state, cand, prio, cap, first=full and plan_no == 0)
            placed = np.flatnonzero(chosen >= 0)
            if placed.size == 0:
                break
            pos = cand[placed]
            sel = chosen[placed]
            lens, flat = csr_rows(cfg.indptr, sel)
            np.subtract.at(cap, cfg.nodes[flat], cfg.counts[flat])
            pools.append(Configs(cfg.job[sel], np.concatenate([[0], np.cumsum(lens)]), cfg.nodes[flat],
                                 cfg.counts[flat]))
            rows[pos] = offset + np.arange(placed.size)
            offset += placed.size
            in_set[np.isin(elig, pos)] = False
        self._pool_indptr = np.concatenate([[0], np.cumsum(np.concatenate([np.diff(p.indptr) for p in pools]))])
        self._pool_nodes = np.concatenate([p.nodes for p in pools])
        self._pool_counts = np.concatenate([p.counts for p in pools])
        return rows

    def _ilp(self, state, cand, prio, cap, first) -> tuple[Configs, np.ndarray]:
        """Configurations of the candidates on ``cap`` and the ILP's choice per candidate."""
        c, ids = state.cluster, state.active
        jobs = ids[cand]
        fac = self.est.factors(jobs)
        cfg = generate_configs([self.reqs[j] for j in jobs.tolist()], fac, self.rho[jobs] > self.sigma,
                               cap, c.node_type, c.node_gpus, c.n_types, self.top_servers, self.dist_limit)
        thr = self._throughput(state, jobs, cfg, fac)
        g = gain(cfg.job, thr, cand.shape[0])
        if first:
            current = self._is_current(state, cand, cfg)
            g = g * (1.0 + self.keep_bonus * current) * np.where(current > 0, 1.0, self._restart_factor(state, cand)[cfg.job])
        w = prior_weights(prio[cand], self.lam)[cfg.job] * g
        keep = thr > 0
        cfg = Configs(cfg.job[keep], *self._subset(cfg, keep))
        out = solve(cfg, w[keep], cand.shape[0], cap, self.mip_rel_gap, self.time_limit_s, self.max_nodes)
        self.ilp_counts[out.how] = self.ilp_counts.get(out.how, 0) + 1
        has_cfg = np.bincount(cfg.job, minlength=cand.shape[0]) > 0
        self._note_reasons(jobs, has_cfg | (not first), out.choice >= 0)
        return cfg, out.choice

    def _note_reasons(self, jobs: np.ndarray, has_cfg: np.ndarray, placed: np.ndarray) -> None:
        """Record why candidates without any usable configuration on the whole cluster (a round's
        first plan) wait; forget placed ones."""
        for j in jobs[~has_cfg].tolist():
            self.waiting_reason.setdefault(j, NO_CONFIG)
        for j in jobs[placed].tolist():
            self.waiting_reason.pop(j, None)

    @staticmethod
    def _subset(cfg: Configs, keep: np.ndarray):
        lens, flat = csr_rows(cfg.indptr, np.flatnonzero(keep))
        return np.concatenate([[0], np.cumsum(lens)]), cfg.nodes[flat], cfg.counts[flat]

    def _throughput(self, state, jobs, cfg: Configs, fac) -> np.ndarray:
        """Estimated rate of each config: the oracle's type-level rate times the slowest
        server's estimated factor (§4.3: the slowest GPU dominates)."""
        if cfg.job.size == 0:
            return np.zeros(0)
        c = state.cluster
        lens = np.diff(cfg.indptr)
        first = cfg.nodes[cfg.indptr[:-1]]
        mask = np.left_shift(np.int64(1), c.node_type[first].astype(np.int64))
        base = state.oracle.rates(state.jobs.model[jobs[cfg.job]].astype(np.int64), cfg.size, lens, mask,
                                  np.ones(lens.size), c.gpu_types)
        f = np.minimum.reduceat(fac[np.repeat(cfg.job, lens), cfg.nodes], cfg.indptr[:-1])
        return np.asarray(base, float) * f

    def _restart_factor(self, state, cand) -> np.ndarray:
        """Per candidate: Sia's re-allocation factor if it runs now (a move restarts it), else 1."""
        if self.restart_penalty_s == 0:
            return np.ones(cand.shape[0])
        jobs = state.active[cand]
        f = rigid_restart_factors(state.now - state.jobs.arrival[jobs], self.restarts[jobs],
                                  np.asarray(state.attained_gpu_s, float)[cand], self.restart_penalty_s)
        return np.where(state.ngpu[cand] > 0, f, 1.0)

    @staticmethod
    def _is_current(state, cand, cfg: Configs) -> np.ndarray:
        """1.0 where a config equals its job's current placement."""
        p = cand[cfg.job]
        cur = state.pl_indptr
        same = (np.diff(cfg.indptr) == (cur[p + 1] - cur[p]))
        one = same & (np.diff(cfg.indptr) == 1)
        node = cfg.nodes[cfg.indptr[:-1]]
        cn = state.pl_nodes[np.minimum(cur[p], max(state.pl_nodes.size - 1, 0))] if state.pl_nodes.size \
            else np.full(p.size, -1)
        cc = state.pl_counts[np.minimum(cur[p], max(state.pl_counts.size - 1, 0))] if state.pl_counts.size \
            else np.full(p.size, -1)
        return (one & (node == cn) & (cfg.counts[cfg.indptr[:-1]] == cc)).astype(float)
