"""Gavel as the Sia simulator runs it (siasosp23/artifacts ``sia-simulator/gavel.py``,
``multi_simulator.py --policy=gavel --interval=360``), registered as ``sia-gavel``.  It differs
from our ``gavel-*`` ports of Gavel's own simulator (sim.policies.gavel); docs/goodput.md.

* **Jobs are rigid**: each asks for the workload's ``num_replicas`` GPUs (Gavel's scale factor)
  and trains at the workload's batch size, fixed (no batch tuning), split over the GPUs by the
  Sia simulator's rule (the placement's own largest per-GPU batch, then its memory cap:
  ``JobModel(sia_batch_limits=True)``).  Progress is the Pollux model's (statistical efficiency
  included), as for every goodput policy.
* **Throughput row** of a job on a GPU type (its ``predict_throughput``): iterations per second
  ``calibration / (step + s (step - sync))`` of the profile at the scale factor packed onto that
  type's nodes, with the same batch split (accumulation ``s`` at least 1 on one GPU; no memory
  cap); 0.1 on a type with fewer GPUs than the job asks for (their placeholder).
* **Allocation**: every round, ``max sum_{i,t} thr[i, t] X[i, t]`` under Gavel's base
  constraints (Sia's ``gavel_default_policy = "max_sum_throughput_perf"``), raw throughputs, on
  our structured interior point (``solver``; :mod:`sim.policies.gavel_ipm`; theirs: ECOS through
  cvxpy), rounded to 5 decimals, clipped to [0, 1].  With HiGHS's IPM (``solver="ipm"``, the
  default until the twenty-seventh session) all 18 saturn and philly runs end the same, to the
  second.
* **Priorities**: ``X / fraction`` with fraction = the job's time on the type over the type's
  total; each job joins with half a round on every type (added to the totals), a round adds a
  whole round to its job and type (even when the job finishes inside it); 0 where ``X`` is 0.
  Never reset (their reset and deficit code is commented out: deficits stay 0).
* **Pick**: all (job, type) pairs in one list (types in the Sia simulator's cluster order,
  :data:`sim.policies.sia.SOURCE_ORDER`, jobs by arrival), sorted by (priority, allocation)
  descending, stable; a pair is taken if the job has no type yet and its scale factor fits in
  the GPUs of the type not yet taken (no throughput test: leftover GPUs go to priority-0 jobs).
* **Workers**: per type, largest scale factor first; a job that ran on the type keeps its
  exact workers if none is taken yet (lease extension), the others walk the type's servers'
  worker lists with one pointer (Gavel's ``assign_workers_to_job``), all by worker identity.
* **Restarts** (their ``Cluster.optimize_policy``): as :mod:`sim.policies.peer_placement`
  says (a job keeping its type and GPUs-per-node tuple on other workers does not restart); the
  first start pays its delay too, through the engine (``EngineConfig.first_start_delay``, on by
  default for the goodput family).
* **Rounds** every 360 s at multiples of 360 s from time 0 (theirs: the first decision at 360 s,
  after the first step), whatever the first arrival; arrivals wake the policy, which waits for
  the next round.  Between rounds placements stay.
"""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..errors import ConfigError, SimError
from ..goodput.goodput import EPS
from ..state import ARRIVAL, Plan, SchedState
from .gavel_lp import DEFAULT_SOLVER, AllocationLP, check_solver
from .gavel_rounds import check_positive
from .goodput_base import GoodputPolicy, packed_counts
from .peer_placement import PeerPlacer, peer_restarts
from .registry import register
from .sia import source_order

__all__ = ["SiaGavel", "ROUND_S", "MISSING_TYPE_THROUGHPUT", "ALLOC_DECIMALS"]

#: the Sia simulator's Gavel interval (run_experiment.sh ``--interval=360``)
ROUND_S = 360.0
#: throughput of a job on a type with fewer GPUs than it asks for (``predict_throughput``)
MISSING_TYPE_THROUGHPUT = 0.1
#: decimals the allocation is rounded to (``x.value.round(decimals=5)``)
ALLOC_DECIMALS = 5


@register
class SiaGavel(GoodputPolicy):
    name = "sia-gavel"
    description = ("Gavel as in the Sia simulator: rigid jobs, max-sum-throughput LP, "
                   "priorities X/fraction, 360 s rounds from t=0")
    triggers: ClassVar[int] = ARRIVAL
    round_s: ClassVar[float | None] = None
    sia_batch_limits: ClassVar[bool] = True
    rigid_policy: ClassVar[str | None] = "gavel-max-sum-throughput-perf"

    def __init__(self, placement: str = "consolidated", time_per_round_s: float = ROUND_S,
                 solver: str = DEFAULT_SOLVER):
        super().__init__(placement)
        self.time_per_round_s = check_positive(self.name, "time_per_round_s", time_per_round_s)
        self.solver = check_solver(solver)

    def params(self) -> dict:
        return {**super().params(), "time_per_round_s": self.time_per_round_s, "solver": self.solver}

    def reset(self, n_jobs: int) -> None:
        self.joined = np.zeros(n_jobs, bool)
        self.workers: dict[int, tuple[int, ...]] = {}  # job -> their worker ids (node * W + slot)
        self.alloc_key: dict[int, tuple] = {}          # job -> (type, node of each worker)
        self.order: list[int] | None = None            # GPU types in their cluster order
        self.last_round = -np.inf
        self.rounds = 0
        self.placer = PeerPlacer(self.name)
        self.last_x: np.ndarray | None = None

    def _start_cluster(self, state: SchedState) -> None:
        c, n = state.cluster, len(self.joined)
        m = len(c.gpu_types)
        self.order = source_order(c.gpu_types)
        self.capacity = np.bincount(c.node_type, weights=c.node_gpus, minlength=m).astype(np.int64)
        self.per_node = np.array([int(c.node_gpus[c.node_type == t].max(initial=0)) for t in range(m)])
        self.width = int(c.node_gpus.max())
        self.node_type = np.asarray(c.node_type, np.int64).copy()
        self.thr = np.zeros((n, m))
        self.job_time = np.zeros((n, m))
        self.type_time = np.zeros(m)

    # -- the engine's calls ------------------------------------------------------
    def schedule(self, state: SchedState) -> Plan:
        if state.jobs is not self._jobs:
            self._start(state)
        if self.order is None:
            self._start_cluster(state)
        self.model.begin(state)
        now, r = state.now, self.time_per_round_s
        k = round(now / r)
        if k >= 1 and abs(now - k * r) <= 1e-9 * r and now > self.last_round:
            plan = self.decide(state, None)
            self.last_round = now
        else:
            plan = Plan(state.pl_indptr, state.pl_nodes, state.pl_counts)
        return self._next_round(state, self.model.finish(state, plan, self.step(state)))

    def step(self, state: SchedState) -> tuple[float, float]:
        """The (start, end) of the current ``time_per_round_s`` round (their ``step(360)``)."""
        start = math.floor(state.now / self.time_per_round_s + 1e-9) * self.time_per_round_s
        return start, start + self.time_per_round_s

    def _next_round(self, state: SchedState, plan: Plan) -> Plan:
        """``plan`` woken at the earliest of the next round and the job model's wakeup."""
        wake = (math.floor(state.now / self.time_per_round_s + 1e-9) + 1) * self.time_per_round_s
        if plan.wakeup is not None:
            wake = min(wake, plan.wakeup)
        return Plan(plan.indptr, plan.nodes, plan.counts, wake, plan.rate_scale)

    # -- one round ------------------------------------------------------------------
    def decide(self, state: SchedState, epochs) -> Plan:
        ids = state.active
        self._join(state)
        x = self.allocation(state)
        pri = self.priorities(ids, x)
        chosen, picks = self.pick(ids, x, pri, state.jobs.demand[ids])
        workers = self.assign_workers(state, ids, chosen, picks)
        restart = self._restarts(ids, picks, workers)
        plan = self.engine_plan(state, picks, workers, restart)
        got = np.flatnonzero(chosen >= 0)
        self.job_time[ids[got], chosen[got]] += self.time_per_round_s
        np.add.at(self.type_time, chosen[got], self.time_per_round_s)
        self.workers = {int(ids[i]): workers[int(ids[i])] for i in got}
        self.alloc_key = {j: self._key(w) for j, w in self.workers.items()}
        self.rounds += 1
        return plan

    def _join(self, state: SchedState) -> None:
        """New jobs: throughput rows, half a round on every type (and on every type's total)."""
        ids = state.active
        new = ids[~self.joined[ids]]
        if new.size == 0:
            return
        big = new[state.jobs.demand[new] > self.capacity.max()]
        if big.size:
            raise ConfigError(f"policy {self.name}: job {int(big[0])} asks for "
                              f"{int(state.jobs.demand[big[0]])} GPUs, more than any GPU type has "
                              f"({dict(zip(state.cluster.gpu_types, self.capacity.tolist()))}); "
                              f"{big.size} such jobs")
        for j in new:
            self.thr[j] = [self.throughput(state, int(j), t) for t in range(self.capacity.shape[0])]
        self.joined[new] = True
        self.job_time[new] = self.time_per_round_s / 2.0
        self.type_time += new.size * self.time_per_round_s / 2.0

    def throughput(self, state: SchedState, j: int, t: int) -> float:
        """Iterations per second of job ``j`` on type ``t`` (module docstring)."""
        sf = int(state.jobs.demand[j])
        if sf > self.capacity[t]:
            return MISSING_TYPE_THROUGHPUT
        oracle, model = self.model.oracle, self.model.oracle_model(j)
        gpu_type = state.cluster.gpu_types[t] if oracle.typed else None
        app = oracle.app(model, gpu_type)
        counts = packed_counts(sf, int(self.per_node[t]))
        local = math.ceil(int(oracle.job_batch[j]) / sf - EPS)
        top = app.max_local_bsz_at(counts)
        top = app.max_local_bsz if not np.isfinite(top) else top
        steps = math.ceil(local / top - EPS) - 1
        steps = max(1, steps) if sf == 1 else steps
        atomic = min(math.ceil(local / (steps + 1) - EPS), int(app.max_batch_size / (sf * (steps + 1))))
        step, sync = self.model.step_sync(model, gpu_type, counts, atomic)
        return oracle.calibration(model) / (step + (step - sync) * steps)

    def allocation(self, state: SchedState) -> np.ndarray:
        """X [active, types]: the max-sum-throughput LP, rounded and clipped as theirs."""
        ids = state.active
        lp = AllocationLP(state.jobs.demand[ids], self.capacity, self.solver)
        x = np.clip(np.round(lp.max_sum(self.thr[ids]), ALLOC_DECIMALS), 0.0, 1.0)
        self.last_x = x
        return x

    def priorities(self, ids: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``X / fraction`` (``X * 1e9`` while a type's total is 0), 0 where X is 0."""
        frac = np.divide(self.job_time[ids], self.type_time, out=np.zeros_like(x), where=self.type_time > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(frac > 0, x / frac, x * 1e9)
        return np.where(x == 0.0, 0.0, p)

    def pick(self, ids, x, pri, demand) -> tuple[np.ndarray, list[int]]:
        """(type of each active job or -1, the chosen jobs in pick order): one list of (job,
        type) pairs, types in their cluster order, by (priority, allocation) descending."""
        k = ids.shape[0]
        types = np.repeat(np.array(self.order, np.int64), k)
        jobs = np.tile(np.arange(k), len(self.order))
        order = np.lexsort((-x[jobs, types], -pri[jobs, types]))
        left = self.capacity.copy()
        chosen = np.full(k, -1, np.int64)
        picks = []
        for e in order:
            i, t = int(jobs[e]), int(types[e])
            if left[t] == 0 or chosen[i] >= 0 or demand[i] > left[t]:
                continue
            chosen[i] = t
            left[t] -= demand[i]
            picks.append(i)
        return chosen, picks

    def assign_workers(self, state: SchedState, ids, chosen, picks) -> dict[int, tuple[int, ...]]:
        """Their worker ids per chosen job (lease extension, then the pointer walk), by type."""
        c, out = state.cluster, {}
        demand = state.jobs.demand[ids]
        for t in self.order:
            mine = sorted((i for i in picks if chosen[i] == t), key=lambda i: -int(demand[i]))
            servers = [[int(n) * self.width + s for s in range(int(c.node_gpus[n]))]
                       for n in np.flatnonzero(c.node_type == t)]
            taken: set[int] = set()
            ptr = 0
            for sf in sorted({int(demand[i]) for i in mine}, reverse=True):
                group = [int(ids[i]) for i in mine if demand[i] == sf]
                for j in group:
                    prev = self.workers.get(j)
                    if prev and self._type(prev) == t and taken.isdisjoint(prev):
                        out[j] = prev
                        taken.update(prev)
                for j in group:
                    if j not in out:
                        out[j], ptr = self._walk(servers, ptr, taken, sf, j)
        return out

    def _walk(self, servers, ptr, taken, sf, j) -> tuple[tuple[int, ...], int]:
        got: list[int] = []
        while len(got) < sf and ptr < len(servers):
            if not servers[ptr]:
                ptr += 1
                continue
            w = servers[ptr].pop(0)
            if w not in taken:
                got.append(w)
                taken.add(w)
        if len(got) != sf:
            raise SimError(f"policy {self.name}: could not assign workers to job {j}")
        return tuple(got), ptr

    def _type(self, workers) -> int:
        return int(self.node_type[workers[0] // self.width])

    def _key(self, workers) -> tuple:
        nodes = tuple(w // self.width for w in workers)
        return (int(self.node_type[nodes[0]]), nodes)

    def _restarts(self, ids, picks, workers) -> np.ndarray:
        """Does each picked job restart in their simulator (sim.policies.peer_placement)?"""
        out = np.zeros(ids.shape[0], bool)
        for i in picks:
            j = int(ids[i])
            out[i] = peer_restarts(self._key(workers[j]), self.alloc_key.get(j))
        return out

    def engine_plan(self, state: SchedState, picks, workers, restart) -> Plan:
        """Their workers as engine placements (sim.policies.peer_placement)."""
        keys = {i: self._key(workers[int(state.active[i])]) for i in picks}
        return self.placer.plan(state, picks, keys, restart, self.model)
