"""Sia on rigid jobs (SOSP'23; the authors' simulator's job category ``"rigid"``:
siasosp23/artifacts ``sia-simulator/sia.py`` ``_compute_rigid_job_goodput_single`` and
``__solve_mip_rescaled``; docs/goodput.md).

A rigid job runs on exactly its requested GPU count with its own batch size: Sia chooses only
its GPU type (or none).  Every ``round_s`` = 60 s:

* **goodput** of job ``j`` on type ``t`` = its throughput there (the run's throughput table at
  its request, consolidated: :attr:`sim.state.SchedState.type_throughputs`), scaled so that its
  slowest usable type has goodput = its GPU count;  a type where it cannot run is not offered;
* **restart factor** (Pollux's, as Sia applies it to rigid jobs): every type but the one the job
  holds is scaled by ``max(age - restarts x d, 0) / (age + d)``, and by 1 while its attained
  service is below ``d`` GPU-seconds; ``d`` is Sia's per-application restart penalty (30 s for
  models it does not list: every model of the throughput tables);
* the ILP of :mod:`sim.policies.sia_ilp`: minimize ``sum round(S^p, 2) + lambda_n x
  unallocated`` under each type's GPU count, one type per job; a job still restoring its
  checkpoint keeps its type;
* **placement** per type as :func:`sim.policies.sia.place_by_type` (jobs keeping their type keep
  their GPUs; the others, most GPUs first, whole nodes first).

``restarts`` counts placement changes after a job's first start, as the authors' ``Job.reallocate``
does; a job is restoring for its restart delay after each placement change.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..state import Plan, SchedState
from .base import Policy
from .registry import register
from .sia import (DEFAULT_RESTART_PENALTY_S, GOODPUT_CLIP, LAMBDA_N, P_FAIRNESS, place_by_type,
                  realloc_factor)
from .sia_ilp import MIP_REL_GAP, TIME_LIMIT_S, solve_sia_ilp

__all__ = ["SiaRigid", "rigid_goodputs", "rigid_restart_factors"]


def rigid_goodputs(rates: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """``[J, T]``: each row's throughputs over its smallest positive one, times the job's GPU
    count (0 where the job cannot run; an all-zero row stays 0)."""
    rates = np.asarray(rates, np.float64)
    low = np.where(rates > 0, rates, np.inf).min(axis=1, keepdims=True)
    scale = np.where(np.isfinite(low), np.asarray(gpus, np.float64)[:, None] / low, 0.0)
    return np.where(rates > 0, rates * scale, 0.0)


def rigid_restart_factors(age: np.ndarray, restarts: np.ndarray, attained_gpu_s: np.ndarray,
                          penalty_s) -> np.ndarray:
    """Sia's re-allocation factor of rigid jobs: ``max(age - restarts d, 0) / (age + d)``, 1 while
    the attained service (GPU-seconds) is below ``d``."""
    return np.where(attained_gpu_s < penalty_s, 1.0, realloc_factor(age, restarts, penalty_s))


@register
class SiaRigid(Policy):
    name = "sia-rigid"
    description = "Sia on rigid jobs: a GPU type per job by normalized throughput, p=-0.5 ILP on HiGHS every 60 s"
    triggers = 0
    round_s = 60.0
    preemptive = True

    def __init__(self, placement: str = "consolidated", p: float = P_FAIRNESS, lambda_n: float = LAMBDA_N,
                 restart_penalty_s: float = DEFAULT_RESTART_PENALTY_S, mip_rel_gap: float = MIP_REL_GAP,
                 time_limit_s: float = TIME_LIMIT_S, goodput_clip: float = GOODPUT_CLIP):
        super().__init__(placement)
        if p >= 0 or lambda_n <= 1 or restart_penalty_s <= 0:
            raise ConfigError(f"policy sia-rigid: need p < 0, lambda_n > 1 and restart_penalty_s > 0 "
                              f"(Sia's rules), got p={p}, lambda_n={lambda_n}, "
                              f"restart_penalty_s={restart_penalty_s}")
        self.p, self.lambda_n = float(p), float(lambda_n)
        self.restart_penalty_s = float(restart_penalty_s)
        self.mip_rel_gap, self.time_limit_s = float(mip_rel_gap), float(time_limit_s)
        self.goodput_clip = float(goodput_clip)
        self._jobs = None

    def params(self) -> dict:
        return {**super().params(), "p": self.p, "lambda_n": self.lambda_n,
                "restart_penalty_s": self.restart_penalty_s, "mip_rel_gap": self.mip_rel_gap,
                "time_limit_s": self.time_limit_s, "goodput_clip": self.goodput_clip}

    def _start(self, state: SchedState) -> None:
        n = len(state.jobs)
        self._jobs = state.jobs
        self.restarts = np.full(n, -1, np.int64)          # -1: never started (Sia's None)
        self.resume_at = np.full(n, -np.inf)              # end of the current checkpoint-restore
        self.last = None                                  # the last round's IlpResult

    def schedule(self, state: SchedState) -> Plan:
        if state.jobs is not self._jobs:
            self._start(state)
        ids = state.active
        c = state.cluster
        per_node = np.zeros(len(c.gpu_types), np.int64)
        np.maximum.at(per_node, c.node_type, c.node_gpus.astype(np.int64))
        cur = self.current_types(state)
        cost, valid, col_type, col_gpus = self.columns(state, cur)
        restoring = (self.resume_at[ids] > state.now) & (cur >= 0)
        col_of_cur = np.array([self._column(col_type, col_gpus, t, g) for t, g in zip(cur, state.demand)],
                              np.int64)
        fixed = np.where(restoring, col_of_cur, -1)
        res = solve_sia_ilp(cost, valid, col_type, col_gpus, c.gpus_per_type().astype(np.int64),
                            self.lambda_n, fixed, self.mip_rel_gap, self.time_limit_s)
        self.last = res
        chosen = res.choice >= 0
        job_type = np.where(chosen, col_type[np.maximum(res.choice, 0)], -1)
        plan = place_by_type(state, chosen & (job_type == cur), job_type, state.demand.astype(np.int64), per_node)
        self._count_restarts(state, plan)
        return plan

    # -- the round's inputs -------------------------------------------------------
    def current_types(self, state: SchedState) -> np.ndarray:
        """int64 per active job: the GPU type it holds now, -1 if none (a job holds one type)."""
        out = np.full(state.active.shape[0], -1, np.int64)
        held = np.flatnonzero(np.asarray(state.ngpu) > 0)
        out[held] = state.cluster.node_type[state.pl_nodes[state.pl_indptr[held]]]
        return out

    def rates(self, state: SchedState) -> np.ndarray:
        table = getattr(state.jobs, "type_rates", None)
        return table[state.active] if table is not None else state.type_throughputs

    def columns(self, state: SchedState, cur: np.ndarray):
        """(cost A, valid, column type, column GPUs): one column per (type, distinct request)."""
        ids, demand = state.active, state.demand.astype(np.int64)
        n_types = len(state.cluster.gpu_types)
        sizes = np.unique(demand)
        col_type = np.repeat(np.arange(n_types, dtype=np.int64), sizes.size)
        col_gpus = np.tile(sizes, n_types)
        g = rigid_goodputs(self.rates(state), demand)                     # [J, T]
        self._check_runnable(state, g)
        factor = rigid_restart_factors(state.now - state.jobs.arrival[ids], np.maximum(self.restarts[ids], 0),
                                       np.asarray(state.attained_gpu_s, np.float64),
                                       self.restart_penalty_s)
        scaled = np.where((np.arange(n_types)[None, :] == cur[:, None]) | (cur[:, None] < 0), g, g * factor[:, None])
        s = scaled[:, col_type]                                           # [J, C]
        valid = (s > 0) & (col_gpus[None, :] == demand[:, None])
        with np.errstate(divide="ignore"):
            a = np.round(np.power(np.where(valid, s, 1.0), self.p), 2)
        return np.minimum(a, self.goodput_clip), valid, col_type, col_gpus

    @staticmethod
    def _check_runnable(state: SchedState, g: np.ndarray) -> None:
        room = np.where(g > 0, state.cluster.gpus_per_type()[None, :], 0).max(axis=1, initial=0)
        bad = np.flatnonzero(state.demand > room)
        if bad.size:
            j = int(state.active[bad[0]])
            raise ConfigError(f"policy sia-rigid: job {j} wants {int(state.demand[bad[0]])} GPUs, more than any "
                              f"GPU type it can run on has ({int(room[bad[0]])})")

    @staticmethod
    def _column(col_type: np.ndarray, col_gpus: np.ndarray, t: int, g: int) -> int:
        if t < 0:
            return -1
        return int(np.flatnonzero((col_type == t) & (col_gpus == g))[0])

    def _count_restarts(self, state: SchedState, plan: Plan) -> None:
        """Sia's ``Job.reallocate``: a changed, non-empty placement starts a checkpoint-restore and
        counts a restart (not the first start)."""
        for i, j in enumerate(state.active):
            new = slice(int(plan.indptr[i]), int(plan.indptr[i + 1]))
            old = slice(int(state.pl_indptr[i]), int(state.pl_indptr[i + 1]))
            if new.stop == new.start:
                continue
            same = (np.array_equal(plan.nodes[new], state.pl_nodes[old])
                    and np.array_equal(plan.counts[new], state.pl_counts[old]))
            if not same:
                self.restarts[j] += 1
                self.resume_at[j] = state.now + float(state.jobs.restart_delay[j])
