"""Pollux's scheduler on clustersim's own workloads and in learning runs (``pollux-learning``;
docs/eghs.md section 3, docs/goodput.md).

``pollux`` (:mod:`sim.policies.pollux`) runs Pollux-model workloads: jobs with the Pollux
profiles' step-time model, whose batch size it co-adapts.  This policy is the scheduling half
of the same Pollux (its round, speedup tables, power mean ``p = -1``, restart penalty and
search, shared through :class:`~sim.policies.pollux_search.PolluxSearch`) over the goodput a
scheduler observes on any throughput-table workload, learning runs included (it reads only
observations, never the learning truth):

* ``goodput_j(n, r) = rate_j(r GPUs on n nodes) x EFF_j(r b_j)``: the throughput oracle's rate
  on the cluster's first GPU type at speed 1 (Pollux is heterogeneity-unaware) times the
  statistical efficiency ``(phi + M0) / (phi + r b)`` at the noise scale the job measured
  (:class:`~sim.learning.observation.LearningObservation`: ``noise_scale``, ``local_batch``;
  ``M0 = demand x b``); without a learning world, ``EFF = 1`` (throughput only);
* the per-GPU batch ``b`` is the job's (the learning world keeps it; the batch-size half of
  Pollux, its agent, is not modelled here);
* speedups relative to the goodput at a fair share, 1 node and ``ceil(G / jobs)`` GPUs (the
  authors'); a job that has not run yet has ``S = r / fair`` (the authors');
* the job's GPU range (ours [I]; the authors' jobs have none): ``S = 0`` below ``gpus_min``, a
  search answer under a job's minimum is dropped to 0, and the growth cap is
  ``min(max(2 x the most GPUs it has run on, gpus_min, 1), gpus_max, 64)``;
* a job's GPUs only on nodes of the GPU types it can run on (throughput > 0); otherwise
  any node, GPU types mixed (Pollux is heterogeneity-unaware: a mixed job runs at the
  engine's rate of its slowest GPUs);
* every ``round_s`` = 60 s only (no arrival or completion triggers), order by attained
  GPU-seconds then arrival; restarts counted when a running job's placement changes.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..learning.stats_efficiency import efficiency
from ..placement import restarted_jobs, type_inputs
from ..state import Plan, SchedState
from .base import Policy
from .goodput_base import csr_plan
from .pollux import MAX_GPUS_PER_JOB, RESTART_PENALTY_S, attained_order, fair_share, linear_speedups
from .pollux_search import (GENERATIONS, MAX_NODES_PER_JOB, POPULATION, SURVIVAL, PolluxProblem, PolluxSearch,
                            allocation_pairs, current_allocation, restart_factor)
from .registry import register


@register
class PolluxLearning(Policy):
    name = "pollux-learning"
    description = ("Pollux's scheduler over observed goodput (throughput table x statistical efficiency "
                   "at the measured noise scale; fixed per-GPU batch): any throughput-table workload, "
                   "learning runs too")
    triggers: ClassVar[int] = 0
    round_s: ClassVar[float | None] = 60.0
    preemptive = True

    def __init__(self, placement: str = "consolidated", search: str = "nsga2", population: int = POPULATION,
                 generations: int = GENERATIONS, seed: int = 0, restart_penalty_s: float = RESTART_PENALTY_S,
                 polish: bool = True, prev_match: str = "job", survival: str = SURVIVAL):
        super().__init__(placement)
        self.searcher = PolluxSearch(self.name, search, population, generations, seed, polish, prev_match,
                                     survival)
        if not restart_penalty_s >= 0:
            raise ConfigError(f"policy {self.name}: restart_penalty_s must be >= 0, got {restart_penalty_s}")
        self.restart_penalty_s = float(restart_penalty_s)
        self._jobs = None

    def params(self) -> dict:
        return {**super().params(), **self.searcher.params(), "restart_penalty_s": self.restart_penalty_s}

    def _ensure(self, state: SchedState) -> None:
        if self._jobs is state.jobs:
            return
        if state.oracle is None:
            raise ConfigError(f"policy {self.name} needs the throughput oracle in its state")
        self._jobs = state.jobs
        self.max_seen = np.zeros(len(state.jobs), np.int64)
        self.restarts = np.zeros(len(state.jobs), np.int64)
        self.searcher.reset()

    def schedule(self, state: SchedState) -> Plan:
        self._ensure(state)
        ids = state.active
        self.max_seen[ids] = np.maximum(self.max_seen[ids], state.ngpu)
        order = attained_order(state)
        x = self.searcher.solve(self.problem(state, order), ids[order], int(state.cluster.node_gpus.max()))
        x[(x.sum(axis=1) < state.jobs.gpus_min[ids[order]])] = 0
        plan = csr_plan(allocation_pairs(x, order))
        after = np.zeros(ids.shape[0], np.int64)
        after[order] = x.sum(axis=1)
        self.restarts[ids[restarted_jobs(state, plan.indptr, plan.nodes, plan.counts, after)]] += 1
        return plan

    # -- the problem --------------------------------------------------------
    def max_replicas(self, ids: np.ndarray) -> np.ndarray:
        jobs = self._jobs
        grow = np.maximum(np.maximum(2 * self.max_seen[ids], jobs.gpus_min[ids]), 1)
        return np.minimum(np.minimum(grow, jobs.gpus_max[ids]), MAX_GPUS_PER_JOB).astype(np.int64)

    def problem(self, state: SchedState, order: np.ndarray) -> PolluxProblem:
        ids = state.active[order]
        nodes = state.cluster.node_gpus.astype(np.int64)
        base = current_allocation(state, order)
        cap = self.max_replicas(ids)
        width = int(max(cap.max(initial=1), base.sum(axis=1).max(initial=0))) + 1
        n_nodes = min(MAX_NODES_PER_JOB, nodes.shape[0]) + 1
        fair = fair_share(state, ids)
        tab = self.speedups(state, order, n_nodes, width, fair)
        fresh = self.max_seen[ids] == 0
        if fresh.any():
            tab[fresh] = linear_speedups(n_nodes, width, cap[fresh], fair)
        r = np.arange(width)[None, None, :]
        tab = np.where(r < state.jobs.gpus_min[ids][:, None, None], 0.0, tab)
        factor = restart_factor(state.now - state.jobs.arrival[ids], self.restarts[ids], self.restart_penalty_s)
        return PolluxProblem(tab, base, nodes, cap, factor, self.allowed_nodes(state, order))

    @staticmethod
    def allowed_nodes(state: SchedState, order: np.ndarray) -> np.ndarray | None:
        """``[J, N]``: the nodes of the GPU types each job (rows: ``order``) can run on (its
        throughput there > 0, :func:`sim.placement.type_inputs`); None where every job can
        run everywhere."""
        allowed, _ = type_inputs(state)
        ok = ((allowed[order][:, None] >> state.cluster.node_type.astype(np.int64)[None, :]) & 1) == 1
        return None if ok.all() else ok

    def speedups(self, state: SchedState, order: np.ndarray, n_nodes: int, width: int, fair: int) -> np.ndarray:
        """``S[j, n, r]`` = goodput on ``n`` nodes and ``r`` GPUs over that at (1, ``fair``);
        0 where ``n = 0``, ``n > r`` or ``r > n x largest node``."""
        ids = state.active[order]
        model = state.jobs.model[ids].astype(np.int64)
        n = np.arange(n_nodes)[None, :, None]
        r = np.arange(width)[None, None, :]
        shape = (ids.shape[0], n_nodes, width)
        good = self._goodput(state, order, model, np.broadcast_to(r, shape), np.broadcast_to(n, shape))
        base = self._goodput(state, order, model, np.full((ids.shape[0], 1, 1), fair), np.ones((ids.shape[0], 1, 1)))
        if np.any(~(base > 0)):
            bad = int(ids[np.flatnonzero(~(base.ravel() > 0))[0]])
            raise ConfigError(f"policy {self.name}: job {bad} has no throughput at a fair share of {fair} GPUs")
        per_node = int(state.cluster.node_gpus.max())
        ok = (n >= 1) & (n <= r) & (r <= n * per_node)
        return np.where(ok, good / base, 0.0)

    def _goodput(self, state, order, model, r, n) -> np.ndarray:
        """Throughput x statistical efficiency of each job (rows: ``order``) at ``r`` GPUs on ``n``
        nodes (arrays ``[J, ., .]``)."""
        shape = r.shape
        m = np.broadcast_to(model[:, None, None], shape).ravel()
        rate = np.asarray(state.oracle.rates(m, r.ravel().astype(np.int64), np.maximum(n, 1).ravel().astype(np.int64),
                                             np.ones(m.size, np.int64), np.ones(m.size),
                                             tuple(state.cluster.gpu_types)), float).reshape(shape)
        obs = state.learning
        if obs is None:
            return rate
        b = obs.local_batch[order][:, None, None]
        m0 = state.jobs.demand[state.active[order]][:, None, None] * b
        return rate * efficiency(np.maximum(r, 1) * b, m0, obs.noise_scale[order][:, None, None])
