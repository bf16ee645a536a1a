"""Pollux (OSDI'21; algorithms.md §5.5): goodput-driven co-adaptive scheduling, as the authors'
simulator runs it (petuum/adaptdl ``simulator/pollux.py``, ``simulator.py``).

Every 60 s round:

* jobs are ordered by attained GPU-seconds, then arrival (ties in the repair go to earlier jobs);
* each job's **speedup table** ``S(n, r)``: its best goodput (batch size and accumulation steps
  optimized, :func:`sim.goodput.goodput.speedup_tables`) on ``n`` nodes and ``r`` GPUs over its
  best at a fair share (1 node, ``ceil(G / jobs)`` GPUs), with the fitted 7-parameter model and
  the gradient statistics it last measured; a job that has not run yet has ``S = r / fair``;
* a job may grow to ``min(max(2 x the most GPUs it has run on, 1), 64, M_max / b_min)`` GPUs
  (NCF: 1; its batch is fixed at 32768, the authors' setting);
* at most one distributed job per node (the authors' interference avoidance;
  ``avoid_interference=False`` drops it, their Fig. 8c variant);
* the allocation maximises the power mean (p = -1) of the scaled speedups with the restart
  penalty (:mod:`sim.policies.pollux_search`): ``search="dp"`` (default; ours: dynamic
  programming over GPU counts, then placement) or ``search="nsga2"`` (the authors' genetic search,
  population 100, 100 generations, about 10x the CPU).  docs/goodput.md compares them: on the
  Pollux job-load workloads their avg JCTs agree within 2% and both are within 3% of the
  authors' simulator, so the faster one is the default;
* between rounds the batch size is re-optimized at each epoch boundary (the job model).

Random draws come from a generator seeded with ``seed`` at the start of each run.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..goodput.goodput import speedup_tables
from ..state import Plan, SchedState
from .goodput_base import GoodputPolicy, csr_plan
from .pollux_search import (GENERATIONS, POPULATION, PREV_MATCH, SURVIVAL, MAX_NODES_PER_JOB, PolluxProblem, PolluxSearch,
                            allocation_pairs, current_allocation, restart_factor)
from .registry import register

#: the authors' cap on GPUs per job ("simulator can't handle more")
MAX_GPUS_PER_JOB = 64
#: restart delay assumed by the restart penalty (the authors' ``delay = 30``)
RESTART_PENALTY_S = 30.0


@register
class Pollux(GoodputPolicy):
    name = "pollux"
    description = "Pollux: goodput speedups, power mean p=-1, restart penalty, dp (or NSGA-II) search"
    adaptive = True
    batch_override = {"ncf": 32768}
    rigid_policy = "pollux-learning"

    def __init__(self, placement: str = "consolidated", search: str = "dp", population: int = POPULATION,
                 generations: int = GENERATIONS, seed: int = 0, restart_penalty_s: float = RESTART_PENALTY_S,
                 avoid_interference: bool = True, polish: bool = True, prev_match: str = PREV_MATCH,
                 survival: str = SURVIVAL):
        super().__init__(placement)
        self.searcher = PolluxSearch(self.name, search, population, generations, seed, polish, prev_match,
                                     survival)
        self.restart_penalty_s = float(restart_penalty_s)
        self.avoid_interference = bool(avoid_interference)

    def params(self) -> dict:
        return {**super().params(), **self.searcher.params(), "restart_penalty_s": self.restart_penalty_s,
                "avoid_interference": self.avoid_interference}

    def reset(self, n_jobs: int) -> None:
        self.searcher.reset()

    # -- the problem --------------------------------------------------------
    def job_app(self, job: int):
        """The application profile ``job``'s speedups are predicted with (Pollux is
        heterogeneity-unaware: the oracle's default one)."""
        m = self.model
        return m.oracle.app(m.oracle_model(int(job)))

    def job_thetas(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(step-time models ``[J, 8]``, has none yet ``[J]``) the speedups are computed with: the
        application's fitted model, none before the job has run."""
        m = self.model
        return m.oracle.theta[m._model[ids]], ~m.started[ids]

    def most_run(self, j: int) -> int:
        """Most GPUs ``j`` has run on (the growth cap's ``2 x``)."""
        return int(self.model.max_seen[j])

    def gpu_cap(self, state: SchedState) -> int:
        """GPUs a job may have at most."""
        return MAX_GPUS_PER_JOB

    def max_replicas(self, state: SchedState, ids: np.ndarray) -> np.ndarray:
        top = self.gpu_cap(state)
        out = np.empty(ids.shape[0], np.int64)
        for i, j in enumerate(ids):
            app = self.job_app(int(j))
            cap = min(max(2 * self.most_run(int(j)), 1), top, app.max_batch_size // app.min_local_bsz)
            out[i] = 1 if app.name in self.batch_override else cap
        return out

    def speedups(self, ids: np.ndarray, cap: np.ndarray, fair: int, max_nodes: int) -> np.ndarray:
        m = self.model
        apps = [self.job_app(int(j)) for j in ids]
        sqr, var = np.zeros(ids.shape[0]), np.zeros(ids.shape[0])
        for i, (j, app) in enumerate(zip(ids, apps)):
            sqr[i], var[i] = app.grad_stats(m.stat_batch[j], m.stat_epoch[j])
        theta, fresh = self.job_thetas(ids)
        col = lambda f: np.array([f(a) for a in apps], float)   # noqa: E731
        tab = speedup_tables(theta, sqr, var, col(lambda a: a.init_batch_size), col(lambda a: a.max_batch_size),
                             col(lambda a: a.min_local_bsz), col(lambda a: a.max_local_bsz), max_nodes, cap,
                             base=(1, fair))
        if fresh.any():
            tab[fresh] = linear_speedups(tab.shape[1], tab.shape[2], cap[fresh], fair)
        return tab

    def search_nodes(self, state: SchedState) -> np.ndarray:
        """GPUs of each node the search allocates over (the cluster's nodes)."""
        return state.cluster.node_gpus.astype(np.int64)

    def base_allocation(self, state: SchedState, order: np.ndarray) -> np.ndarray:
        """``[J, N]`` the allocation the search starts from and charges restarts against."""
        return current_allocation(state, order)

    def problem(self, state: SchedState, order: np.ndarray) -> PolluxProblem:
        ids = state.active[order]
        nodes = self.search_nodes(state)
        fair = fair_share(state, ids)
        cap = self.max_replicas(state, ids)
        tab = self.speedups(ids, cap, fair, min(MAX_NODES_PER_JOB, nodes.shape[0]))
        age = state.now - state.jobs.arrival[ids]
        factor = restart_factor(age, self.model.restarts[ids], self.restart_penalty_s)
        return PolluxProblem(tab, self.base_allocation(state, order), nodes, cap, factor,
                             avoid_interference=self.avoid_interference)

    # -- the round ------------------------------------------------------------
    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        order = attained_order(state)
        problem = self.problem(state, order)
        x = self.searcher.solve(problem, state.active[order], int(problem.capacity.max()))
        return self.plan(state, order, x)

    def plan(self, state: SchedState, order: np.ndarray, x: np.ndarray) -> Plan:
        """The engine plan of the search's allocation ``x`` (rows ``order``)."""
        return csr_plan(allocation_pairs(x, order))


def attained_order(state: SchedState) -> np.ndarray:
    """Pollux's job order: attained GPU-seconds, then arrival (positions in ``state.active``)."""
    return np.lexsort((state.jobs.arrival[state.active], state.attained_gpu_s))


def fair_share(state: SchedState, ids: np.ndarray) -> int:
    """GPUs of a fair share, ``ceil(G / jobs)``: the speedups' base (on one node)."""
    return int(np.ceil(state.cluster.node_gpus.sum() / max(ids.shape[0], 1)))


def linear_speedups(n_nodes: int, n_gpus: int, cap: np.ndarray, fair: int) -> np.ndarray:
    """The authors' speedup table of a job that has not run yet: ``r / fair`` on 1 <= nodes <= r
    GPUs up to its cap, else 0; ``[J, n_nodes, n_gpus]``."""
    n = np.arange(n_nodes)[:, None]
    r = np.arange(n_gpus)[None, :]
    return np.where((n >= 1) & (n <= r) & (r <= cap[:, None, None]), r / fair, 0.0)
