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
* the allocation maximises the power mean (p = -1) of the scaled speedups with the restart
  penalty (:mod:`sim.policies.pollux_search`): ``search="nsga2"`` (default: the authors' genetic
  search, population 100, 100 generations) or ``search="dp"`` (ours: dynamic programming over
  GPU counts, then placement; docs/goodput.md compares them);
* between rounds the batch size is re-optimized at each epoch boundary (the job model).

Random draws come from a generator seeded with ``seed`` at the start of each run.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..goodput.goodput import speedup_tables
from ..state import Plan, SchedState
from .goodput_base import GoodputPolicy, csr_plan
from .pollux_search import GENERATIONS, POPULATION, MAX_NODES_PER_JOB, PolluxProblem, dp_search, nsga2
from .registry import register

#: the authors' cap on GPUs per job ("simulator can't handle more")
MAX_GPUS_PER_JOB = 64
#: restart delay assumed by the restart penalty (the authors' ``delay = 30``)
RESTART_PENALTY_S = 30.0
SEARCHES = ("nsga2", "dp")


@register
class Pollux(GoodputPolicy):
    name = "pollux"
    description = "Pollux: goodput speedups, power mean p=-1, restart penalty, NSGA-II (or dp) search"
    adaptive = True
    batch_override = {"ncf": 32768}

    def __init__(self, placement: str = "consolidated", search: str = "nsga2", population: int = POPULATION,
                 generations: int = GENERATIONS, seed: int = 0, restart_penalty_s: float = RESTART_PENALTY_S):
        super().__init__(placement)
        if search not in SEARCHES:
            raise ConfigError(f"policy pollux: search must be one of {SEARCHES}, got {search!r}")
        self.search, self.population, self.generations = search, int(population), int(generations)
        self.seed, self.restart_penalty_s = int(seed), float(restart_penalty_s)

    def params(self) -> dict:
        return {**super().params(), "search": self.search, "population": self.population,
                "generations": self.generations, "seed": self.seed,
                "restart_penalty_s": self.restart_penalty_s}

    def reset(self, n_jobs: int) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.prev_states: np.ndarray | None = None    # [K, J_prev, N] last Pareto set
        self.prev_jobs = np.zeros(0, np.int64)

    # -- the problem --------------------------------------------------------
    def max_replicas(self, ids: np.ndarray) -> np.ndarray:
        m = self.model
        out = np.empty(ids.shape[0], np.int64)
        for i, j in enumerate(ids):
            app = m.oracle.app(m.oracle_model(int(j)))
            cap = min(max(2 * int(m.max_seen[j]), 1), MAX_GPUS_PER_JOB, app.max_batch_size // app.min_local_bsz)
            out[i] = 1 if app.name in self.batch_override else cap
        return out

    def speedups(self, ids: np.ndarray, cap: np.ndarray, fair: int, max_nodes: int) -> np.ndarray:
        m = self.model
        apps = [m.oracle.app(m.oracle_model(int(j))) for j in ids]
        sqr, var = np.zeros(ids.shape[0]), np.zeros(ids.shape[0])
        for i, (j, app) in enumerate(zip(ids, apps)):
            sqr[i], var[i] = app.grad_stats(m.stat_batch[j], m.stat_epoch[j])
        theta = m.oracle.theta[m._model[ids]]
        col = lambda f: np.array([f(a) for a in apps], float)   # noqa: E731
        tab = speedup_tables(theta, sqr, var, col(lambda a: a.init_batch_size), col(lambda a: a.max_batch_size),
                             col(lambda a: a.min_local_bsz), col(lambda a: a.max_local_bsz), max_nodes, cap,
                             base=(1, fair))
        fresh = ~m.started[ids]
        if fresh.any():
            r = np.arange(tab.shape[2])
            lin = np.where((np.arange(tab.shape[1])[:, None] >= 1) & (np.arange(tab.shape[1])[:, None] <= r[None, :])
                           & (r[None, :] <= cap[fresh][:, None, None]), r[None, :] / fair, 0.0)
            tab[fresh] = lin
        return tab

    def problem(self, state: SchedState, order: np.ndarray) -> PolluxProblem:
        ids = state.active[order]
        nodes = state.cluster.node_gpus.astype(np.int64)
        fair = int(np.ceil(nodes.sum() / max(ids.shape[0], 1)))
        cap = self.max_replicas(ids)
        tab = self.speedups(ids, cap, fair, min(MAX_NODES_PER_JOB, nodes.shape[0]))
        base = np.zeros((ids.shape[0], nodes.shape[0]), np.int64)
        for row, i in enumerate(order):
            s = slice(int(state.pl_indptr[i]), int(state.pl_indptr[i + 1]))
            np.add.at(base[row], state.pl_nodes[s], state.pl_counts[s])
        age = state.now - state.jobs.arrival[ids]
        restarts = np.maximum(self.model.restarts[ids], 0)
        d = self.restart_penalty_s
        factor = np.maximum(age - restarts * d, 0.0) / (age + d)
        return PolluxProblem(tab, base, nodes, cap, factor)

    # -- the round ------------------------------------------------------------
    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        order = np.lexsort((state.jobs.arrival[state.active], state.attained_gpu_s))
        ids = state.active[order]
        problem = self.problem(state, order)
        if self.search == "dp":
            x = dp_search(problem, int(state.cluster.node_gpus.max()), self.rng)
        else:
            states, f = nsga2(problem, self._seed_states(ids, problem), self.rng, self.population,
                              self.generations)
            self.prev_states, self.prev_jobs = states, ids
            x = states[int(np.argmin(f[:, 0]))]
        per_job: list[list[tuple[int, int]]] = [[] for _ in range(ids.shape[0])]
        for row, i in enumerate(order):
            nz = np.flatnonzero(x[row])
            per_job[i] = [(int(n), int(x[row, n])) for n in nz]
        return csr_plan(per_job)

    def _seed_states(self, ids: np.ndarray, problem: PolluxProblem) -> np.ndarray:
        """The previous Pareto set with rows moved to the same jobs (new jobs empty), or the
        current allocation (the authors' ``_adapt_prev_states``)."""
        if self.prev_states is None:
            return problem.base[None].copy()
        out = np.zeros((self.prev_states.shape[0], *problem.base.shape), np.int64)
        src = {int(j): k for k, j in enumerate(self.prev_jobs)}
        rows = [(r, src[int(j)]) for r, j in enumerate(ids) if int(j) in src]
        if rows:
            dst, s = map(np.array, zip(*rows))
            out[:, dst] = self.prev_states[:, s]
        return out
