"""Gavel's round-based mechanism (algorithms.md §5.7; gavel ``scheduler/scheduler.py``).

A policy computes an allocation matrix ``X`` (time fractions, jobs x GPU types); this module
turns it into placements round by round, as Gavel's simulator does:

* **Rounds** of ``time_per_round_s`` (Gavel's ``time_per_iteration``, 360 s).  The policy
  keeps its own round clock (engine timers), because Gavel's rounds are not a fixed grid: a
  round ends early when every job dispatched in it has finished, and an idle cluster starts a
  round at the next arrival.  Arrivals and completions inside a round change nothing until the
  round ends (the freed GPUs stay idle, as in Gavel).
* **Integral steps** (Gavel's ``_get_num_steps`` and ``_get_job_steps_and_finish_times``): a
  job dispatched for a round runs ``min(int(rate * time_per_round_s), remaining)`` whole
  iterations at its rate and stops; the round ends when the last of them stops, a fraction of
  a second before ``time_per_round_s`` (Gavel's round end is the latest micro-task finish).
  Here a job runs to the round's end under ``Plan.rate_scale`` = its iterations / (rate x
  round length), so it does exactly its iterations; a job whose remaining iterations fit in
  the round runs at its full rate and finishes when Gavel's does.  (Gavel's jobs declare their
  total steps, so its scheduler knows what is left; in a learning run, where ``remaining`` is
  the simulator's truth -- the information contract of ``Policy.clairvoyant`` --, the policy
  does not read it and every job gets whole rounds.  A rate below one iteration per round,
  where Gavel's micro-task would fail, is not truncated.  Gavel's simulator runs every job at
  the rate it plans with; ours may not -- restart delays, slower servers, spread placements --,
  so a job that was to finish in a round and did not is never again planned to finish early:
  it gets whole rounds, which keeps rounds from shrinking to nothing around it.)
* **Time received**: each job starts with ``time_per_round_s / 2`` on every type (Gavel's
  "initial time"); a round adds, to the job's counter and to its type's total, the job's
  finish time (its last iteration's end, or its completion) minus Gavel's round start
  (``current_round_start_time``: the end of the previous round that ran jobs, 0 before the
  first, so the first round after an idle cluster counts the idle time too, as Gavel's
  simulator does).  These sub-second differences decide Gavel's order among jobs whose
  priorities are otherwise equal (FIFO: every job's allocation is 1 on its type), so they
  are ported to the last digit.
* **Resets and allocation**: when the job set has changed and at least ``reset_interval_s``
  (Gavel's ``minimum_time_between_allocation_resets``, 1920 s) passed since the last reset --
  or the last reset happened at time 0, Gavel's quirk -- deficits accumulate ``X * elapsed -
  received``, counters restart at the initial time, and the allocation is recomputed (also
  with no job active: Gavel's FIFO then forgets the types of its finished jobs).  A job
  that arrived since has no allocation until then: it is not placed, even on idle GPUs.
* **Priorities** per type: ``X / fraction`` (fraction = job's time / type's time), ``X * 1e9``
  while the type's total is 0, 0 where the job's throughput is 0 or it has no allocation.
* **Selection**: types in order (the cluster's order for ``_perf`` policies -- gavel-108:
  v100, p100, k80, Gavel's hard-coded list --, shuffled each round with ``random.Random(seed +
  5)`` for the agnostic ones, as Gavel), each type's jobs by (priority, deficit, allocation)
  descending; a job is taken if not taken yet, its throughput there is > 0 (FIFO: its priority
  too) and its scale factor fits in the type's GPUs left.
* **Placement**: per type, largest scale factor first; a job that ran on this type keeps its
  GPUs if they are still free (lease extension), others take free GPUs walking the type's
  servers in cluster order with one pointer (Gavel's strided assignment).  A job never mixes
  types and never runs where its throughput is 0.  (``placement`` is accepted, as by every
  policy, but Gavel's walk decides the servers whatever its value.)

Left out (docs/gavel.md): space sharing (packing: sim.policies.gavel_packing), the EMA of measured throughputs (Gavel
applies it only on a physical cluster; its simulator reads the oracle), and the physical
mode's mid-round recomputation.

Per-job memory lives in numpy arrays indexed by job id; a policy object remembers one run and
starts afresh on a different JobSpecs or when time goes backwards.
"""
from __future__ import annotations

import random
from typing import ClassVar

import numpy as np

from ..errors import ConfigError, SimError
from ..state import ARRIVAL, COMPLETION, Plan, SchedState, type_throughput_rows
from .base import Policy
from .gavel_kernels import (credit_completed, credit_finished, credit_running, micro_tasks,
                            round_plan, settle_deficits)
from .gavel_lp import DEFAULT_SOLVER, check_solver

class RoundClock(Policy):
    """What Gavel's round mechanisms share (over jobs here, over job combinations in
    sim.policies.gavel_packing): parameters, per-run memory, and the round boundary -- a
    decision inside a round keeps every placement."""

    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    preemptive = True
    #: the engine may skip a decision inside a round on arrivals and completions while jobs
    #: run, telling the policy of the completions instead (:meth:`between_rounds`,
    #: :meth:`note_completed`; ``Engine._mid_round``): such a decision keeps every placement
    skips_mid_round: ClassVar[bool] = False
    #: a job runs on one GPU type only, so it may not ask for more GPUs than a type has
    single_type_jobs: ClassVar[bool] = True

    def __init__(self, placement: str = "consolidated", time_per_round_s: float = 360.0,
                 reset_interval_s: float = 1920.0, seed: int = 0, solver: str = DEFAULT_SOLVER):
        super().__init__(placement)
        self.time_per_round_s = check_positive(self.name, "time_per_round_s", time_per_round_s)
        self.reset_interval_s = check_positive(self.name, "reset_interval_s", reset_interval_s, zero=True)
        self.seed = int(seed)
        self.solver = check_solver(solver)
        self._reset(None)

    def params(self) -> dict:
        return {**super().params(), "time_per_round_s": self.time_per_round_s,
                "reset_interval_s": self.reset_interval_s, "seed": self.seed,
                "solver": self.solver}

    def schedule(self, state: SchedState) -> Plan:
        if self._jobs is not state.jobs or state.now < self._now:
            self._reset(state)
        self._now = now = state.now
        self._credit_finished(state)
        boundary = (self.round_end is None or now >= self.round_end * (1 - 1e-12)
                    or not state.running.any())
        if not boundary:
            return self._hold(state)
        return self._round(state)

    def between_rounds(self, now: float, jobs) -> bool:
        """Whether a decision at ``now`` on arrivals or completions alone, with jobs still
        running, falls inside a round of this run (:meth:`schedule` would hold)."""
        until = self.hold_until(now, jobs)
        return until is not None and now < until

    def hold_until(self, now: float, jobs) -> float | None:
        """The time before which every decision from ``now`` on, on arrivals or completions
        alone with jobs still running, falls inside this run's round (None: not known)."""
        if self.skips_mid_round and self._jobs is jobs and self.round_end is not None \
                and self._now <= now:
            return self.round_end * (1 - 1e-12)
        return None

    def note_completed(self, now: float, job_ids: np.ndarray, at: np.ndarray | None = None) -> None:
        """The jobs ``job_ids`` finished inside a round (at skipped decisions), at ``now`` or
        at the times ``at`` (aligned with ``job_ids``, in order, none after ``now``)."""
        raise NotImplementedError

    def _hold(self, state: SchedState) -> Plan:
        """Inside a round: every placement stays."""
        return Plan(state.pl_indptr, state.pl_nodes, state.pl_counts)

    def _reset(self, state: SchedState | None) -> None:
        """Forget the last run: the clock's memory here, the mechanism's in _reset_memory, the
        allocation policy's in _reset_run."""
        n = 0 if state is None else len(state.jobs)
        m = 0 if state is None else len(state.cluster.gpu_types)
        self._jobs = None if state is None else state.jobs
        self._now = -np.inf
        self.worker_time = np.zeros(m)           # Gavel's _worker_time_so_far
        self.last_reset = 0.0
        self.need_update = False
        self.round_end: float | None = None
        self.credit_start = 0.0                  # Gavel's current_round_start_time
        self.last_round_end: float | None = None  # Gavel's current_round_end_time
        self.to_finish = np.zeros(n, bool)       # dispatched to finish within the round
        self.overran = np.zeros(n, bool)         # did not: whole rounds from now on
        self.rounds = self.resets = self.lease_extensions = 0
        self._thr_cache = ThroughputCache()
        self._reset_memory(n, m)
        self._reset_run(state)

    def _reset_memory(self, n: int, m: int) -> None:
        """Per-run memory of the mechanism (n jobs, m GPU types)."""

    def _reset_run(self, state: SchedState | None) -> None:
        """Subclass hook: per-run memory of the allocation policy."""

    def _credit_finished(self, state: SchedState) -> None:
        raise NotImplementedError

    def _round(self, state: SchedState) -> Plan:
        raise NotImplementedError


class GavelRounds(RoundClock):
    """Gavel's round mechanism around an allocation; subclasses define :meth:`allocation`."""

    skips_mid_round = True
    #: the engine may decide the rounds in C between resets (sim.native_rounds), calling
    #: :meth:`_maybe_reset` and :meth:`_type_order` here; a subclass that overrides a method
    #: of the round procedure (sim.native_rounds.MECHANISM) runs in Python by itself, one that
    #: changes it otherwise sets this False
    native_rounds: ClassVar[bool] = True

    #: walk GPU types in a seeded random order each round (Gavel: policies without "Perf")
    shuffle_types: ClassVar[bool] = False
    #: skip jobs whose priority is 0 (Gavel does so for FIFO only)
    skip_zero_priority: ClassVar[bool] = False

    def allocation(self, state: SchedState, thr: np.ndarray) -> np.ndarray:
        """X [n_active, n_types] for the jobs of ``state`` (``thr``: state.type_throughputs)."""
        raise NotImplementedError

    # -- per-run memory -------------------------------------------------------------
    def _reset_memory(self, n: int, m: int) -> None:
        self.member = np.zeros(n, bool)          # in the job set (seen, not finished)
        self.time_so_far = np.zeros((n, m))      # Gavel's _job_time_so_far
        self.deficit = np.zeros((n, m))
        self.alloc = np.zeros((n, m))
        self.in_alloc = np.zeros(n, bool)
        self.ran_on = np.full(n, -1, np.int64)   # type dispatched on this round, -1 none
        self.credit = np.zeros(n)                # per job dispatched: seconds at the round's end
        self._shuffler = random.Random(self.seed + 5)
        self._type_capacity = TypeCapacity()


    # -- one round ---------------------------------------------------------------------
    def _round(self, state: SchedState) -> Plan:
        now, ids = state.now, state.active
        self._credit_running(state)
        thr = self._throughputs(state)
        self._join(state, thr)
        if not state.running.any() and not (state.jobs.arrival > now).any():
            self.last_reset = 0.0          # Gavel forces a reset when nothing runs or comes
        self._maybe_reset(state, thr)
        order = self._type_order(len(state.cluster.gpu_types))
        chosen_type, indptr, nodes, counts = self._plan(state, thr, order)
        self.rounds += 1
        self.ran_on[ids] = -1
        placed = np.flatnonzero(indptr[1:] != indptr[:-1])
        self.ran_on[ids[placed]] = chosen_type[placed]
        if placed.size == 0:
            self.round_end = None
            if ids.size and not (state.jobs.arrival > now).any():
                raise SimError(f"policy {self.name}: no active job can be scheduled at t={now} "
                               f"(first: job {int(ids[0])}) and no job is left to arrive")
            return Plan(indptr, nodes, counts)
        scale = self._micro_tasks(state, thr, placed, chosen_type[placed])
        return Plan(indptr, nodes, counts, wakeup=self.round_end, rate_scale=scale)

    def _micro_tasks(self, state: SchedState, thr: np.ndarray, placed: np.ndarray,
                     types: np.ndarray) -> np.ndarray:
        """Gavel's micro-tasks for the jobs dispatched this round (``placed``: positions in
        ``state.active``, on ``types``): each runs ``min(int(rate * round), remaining)``
        iterations and the round ends when the last one stops.  Sets the round's end and
        each job's credit (its finish minus Gavel's round start: the previous dispatching
        round's end); returns the rate scale (aligned with ``state.active``) under which each
        job's iterations end at the round's end (1 for a job that finishes in the round)."""
        rate = thr[placed, types]
        # Gavel knows the steps left (its jobs declare their total); a learning run hides them
        rem = state.remaining[placed] if state.learning is None else np.full(placed.size, np.nan)
        self.credit_start = 0.0 if self.last_round_end is None else self.last_round_end
        self.round_end, scale = micro_tasks(state.now, self.time_per_round_s, rate, rem,
                                            state.active, placed, self.overran, self.to_finish,
                                            self.credit, self.credit_start)
        self.last_round_end = self.round_end
        return scale

    def _throughputs(self, state: SchedState) -> np.ndarray:
        return self._thr_cache.get(state)

    def _credit_finished(self, state: SchedState) -> None:
        """Jobs dispatched this round that have finished: their time (to their completion,
        from Gavel's round start) counts for their type."""
        if credit_finished(state.active, self.ran_on, self.member, self.worker_time,
                           state.now - self.credit_start):
            self.need_update = True

    def note_completed(self, now: float, job_ids: np.ndarray, at: np.ndarray | None = None) -> None:
        """What :meth:`_credit_finished` does at a decision, for skipped ones."""
        self._now = now
        if credit_completed(job_ids, self.ran_on, self.member, self.worker_time,
                            (now if at is None else at) - self.credit_start):
            self.need_update = True

    def _credit_running(self, state: SchedState) -> None:
        if credit_running(state.active, self.ran_on, self.member, self.time_so_far,
                          self.worker_time, self.credit):
            self.need_update = True

    def _join(self, state: SchedState, thr: np.ndarray) -> None:
        ids = state.active
        new = ~self.member[ids]
        if not new.any():
            return
        validate_runnable(self.name, state, thr, new)
        nid = ids[new]
        self.member[nid] = True
        self.time_so_far[nid] = self.time_per_round_s / 2.0
        self.deficit[nid] = 0.0
        self.need_update = True

    def _maybe_reset(self, state: SchedState, thr: np.ndarray) -> None:
        now, ids = state.now, state.active
        due = now - self.last_reset >= self.reset_interval_s or self.last_reset == 0.0
        if not (self.need_update and due):
            return
        settle_deficits(ids, self.in_alloc, self.alloc, self.time_so_far, self.deficit,
                        now - self.last_reset, self.time_per_round_s / 2.0)
        self.worker_time[:] = ids.size * self.time_per_round_s / 2.0
        self.last_reset = now
        self.in_alloc[:] = False
        if ids.size:
            self.alloc[ids] = self.allocation(state, thr)
            self.in_alloc[ids] = True
        else:
            self._no_jobs_allocation()
        self.need_update = False
        self.resets += 1

    def _no_jobs_allocation(self) -> None:
        """Gavel computes an allocation also when no job is active (its policy sees an empty
        job set); a policy that remembers jobs across allocations forgets the finished ones
        here.  Default: nothing to forget."""

    def _type_order(self, m: int) -> list[int]:
        order = list(range(m))
        if self.shuffle_types:
            self._shuffler.shuffle(order)
        return order

    def _plan(self, state: SchedState, thr: np.ndarray, order) -> tuple:
        """Gavel's priorities, per-type queues, greedy pick and worker assignment (lease
        extension first, then the strided walk), in one kernel call: (type per job, and the
        plan's indptr, nodes and counts)."""
        c = state.cluster
        left = self._type_capacity(c)
        chosen, indptr, nodes, counts, kept = round_plan(
            state.active, thr, self.alloc, self.deficit, self.time_so_far, self.in_alloc,
            self.worker_time, order, state.demand, left, self.skip_zero_priority,
            state.pl_indptr, state.pl_nodes, state.pl_counts, c.node_type, c.node_gpus, self.name)
        self.lease_extensions += kept
        return chosen, indptr, nodes, counts


class TypeCapacity:
    """``cluster.gpus_per_type()`` (int64 [m]), computed once per cluster: call it with the
    state's cluster.  Callers must not modify the array."""

    def __init__(self):
        self._cluster, self._gpus = None, np.zeros(0, np.int64)

    def __call__(self, cluster) -> np.ndarray:
        if self._cluster is not cluster:
            self._cluster, self._gpus = cluster, cluster.gpus_per_type()
        return self._gpus


class ThroughputCache:
    """``state.type_throughputs``, reused while the active set is the same; every job's row
    is computed once per run, all in one vectorized call (a row depends only on the job's
    model and GPU count, which do not change during a run)."""

    def __init__(self):
        self._ids: np.ndarray | None = None
        self._thr = np.zeros((0, 0))
        self._source = None            # (jobs, oracle, GPU types) the rows were computed for
        self._rows = np.zeros((0, 0))  # [n_jobs, n_types]

    def get(self, state: SchedState) -> np.ndarray:
        if state.oracle is None:
            return state.type_throughputs            # raises the state's error
        types, was = state.cluster.gpu_types, self._source
        if was is None or not (state.jobs is was[0] and state.oracle is was[1] and types is was[2]):
            self._source, self._ids = (state.jobs, state.oracle, types), None
            self._rows = type_throughput_rows(state.oracle, state.jobs,
                                              np.arange(len(state.jobs)), types)
        elif self._ids is not None and self._ids.shape == state.active.shape \
                and (self._ids == state.active).all():
            return self._thr
        self._ids, self._thr = state.active.copy(), self._rows[state.active]
        return self._thr


def plan_from_owners(n: int, owner: np.ndarray, nodes: np.ndarray, counts: np.ndarray) -> Plan:
    order = np.argsort(owner, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=indptr[1:])
    return Plan(indptr, nodes[order], counts[order])


def validate_runnable(name: str, state: SchedState, thr: np.ndarray, new: np.ndarray) -> None:
    """New jobs must be able to run somewhere: throughput > 0 on a type with enough GPUs."""
    c = state.cluster
    cap = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types))
    rows = np.flatnonzero(new)
    runnable = (thr[rows] > 0) & (state.demand[rows, None] <= cap[None, :])
    bad = rows[~runnable.any(axis=1)]
    if bad.size:
        i = int(bad[0])
        j = int(state.active[i])
        if not (thr[i] > 0).any():
            why = "its throughput is 0 on every GPU type of the cluster"
        else:
            why = (f"it asks for {int(state.demand[i])} GPUs, more than any GPU type it can run "
                   f"on has ({', '.join(f'{t}: {int(n)}' for t, n in zip(c.gpu_types, cap))})")
        raise ConfigError(f"policy {name}: job {j} cannot be scheduled: {why} "
                          f"({bad.size} such jobs)")


def check_positive(name: str, what: str, value, zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"policy {name}: {what} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise ConfigError(f"policy {name}: {what} must be finite and {'>=' if zero else '>'} 0, "
                          f"got {value!r}")
    return v
