"""Shared machinery of the policies of Pollux-model workloads (``pollux``, ``optimus``,
``pollux-tiresias``; docs/goodput.md).

Like the authors' simulator (petuum/adaptdl ``simulator/simulator.py``) they decide every
``round_s`` = 60 s only (no arrival or completion triggers).  Between rounds the policy is woken at
each job's next epoch boundary, keeps every placement and refreshes only the rate scales
(:class:`~sim.goodput.jobmodel.JobModel`): gradient statistics, and for Pollux the batch size,
change there.  The run's oracle must be a :class:`~sim.goodput.oracle.GoodputOracle`.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..goodput.jobmodel import JobModel
from ..goodput.oracle import GoodputOracle
from ..state import ROUND, Plan, SchedState
from .base import Policy

__all__ = ["AUTHORS_SIM_ROUND_ORIGIN", "GoodputPolicy", "most_free_placement", "csr_plan", "packed_counts",
           "keep_or_place", "current_pairs"]

#: both authors' simulators step their clock by the interval from time 0 (the Pollux simulator's
#: and the Sia simulator's ``Cluster.step``), so their rounds fall at multiples of the interval
#: whatever the first arrival: the round origin of every policy ported from them; docs/goodput.md
AUTHORS_SIM_ROUND_ORIGIN = 0.0


class GoodputPolicy(Policy):
    """Base class: subclasses implement :meth:`decide` (a plan for a round)."""

    triggers: ClassVar[int] = 0
    #: the kind of workload the policy runs on: Pollux-model jobs with a GoodputOracle
    workload_kind: ClassVar[str] = "goodput"
    round_s: ClassVar[float | None] = 60.0
    preemptive = True
    #: choose batch sizes by goodput (Pollux) rather than the workload's batch
    adaptive: ClassVar[bool] = False
    #: application -> fixed global batch of its jobs
    batch_override: ClassVar[dict[str, int]] = {}
    #: jobs predict with models fitted on what each has run (:mod:`sim.goodput.observed`), not
    #: their application's profile-fitted model
    observed_models: bool = False
    #: those models are one per job over all GPU types (the Sia simulator's unaware jobs)
    observed_across_types: ClassVar[bool] = False
    #: the policy to name for a throughput-table (non-Pollux) workload in the error
    rigid_policy: ClassVar[str | None] = None
    #: the Sia simulator's per-placement limits on a job's own batch (JobModel)
    sia_batch_limits: ClassVar[bool] = False
    #: a running job re-picks its batch only when it moves, enters a new epoch or a round begins,
    #: as the Sia simulator's jobs (JobModel ``batch_at_segments``)
    sia_batch_timing: ClassVar[bool] = False
    #: a job's first start pays its restart delay, as both authors' simulators charge their
    #: re-scale delay at every allocation (EngineConfig.first_start_delay)
    first_start_delay: ClassVar[bool] = True
    #: where the engine phases this policy's rounds from (EngineConfig.round_origin; None: the
    #: first arrival)
    round_origin: ClassVar[float | None] = AUTHORS_SIM_ROUND_ORIGIN
    #: an epoch ending within a round lasts whole seconds, as both authors' simulators round each
    #: epoch crossing (``Job.step``; JobModel ``whole_second_epochs``)
    whole_second_epochs: ClassVar[bool] = True

    def __init__(self, placement: str = "consolidated"):
        super().__init__(placement)
        self._jobs = None
        self.model: JobModel | None = None
        self._decided = False

    def _start(self, state: SchedState) -> None:
        if not isinstance(state.oracle, GoodputOracle):
            raise ConfigError(f"policy {self.name} needs a Pollux-model workload (a GoodputOracle; "
                              f"read the workload with sim.goodput.workload.read_goodput_workload"
                              + (f"; for other workloads use {self.rigid_policy})" if self.rigid_policy else ")"))
        self._jobs = state.jobs
        self.model = JobModel(state.oracle, state.jobs, self.adaptive, self.batch_override, self.observed_models,
                              self.sia_batch_limits,
                              state.first_start_delay, self.whole_second_epochs,
                              observed_across_types=self.observed_across_types,
                              batch_at_segments=self.sia_batch_timing)
        self._decided = False
        self._round_at = 0.0
        self.reset(len(state.jobs))

    def reset(self, n_jobs: int) -> None:
        """Per-run memory of a subclass (arrays indexed by job id)."""

    def schedule(self, state: SchedState) -> Plan:
        if state.jobs is not self._jobs:
            self._start(state)
        epochs = self.model.begin(state)
        if state.reasons & ROUND or not self._decided:
            plan = self.decide(state, epochs)
            self._decided = True
            self._round_at = state.now
        else:
            plan = Plan(state.pl_indptr, state.pl_nodes, state.pl_counts)
        return self.model.finish(state, plan, self.step(state))

    def step(self, state: SchedState) -> tuple[float, float] | None:
        """The (start, end) of the current round: the authors' ``Cluster.step`` interval."""
        return (self._round_at, self._round_at + self.round_s) if self.round_s else None

    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        raise NotImplementedError


def csr_plan(per_job: list[list[tuple[int, int]]]) -> Plan:
    """A Plan from each active job's list of (node, GPUs)."""
    sizes = np.array([len(p) for p in per_job], np.int64)
    indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = [x for p in per_job for x in p]
    nodes = np.array([n for n, _ in flat], np.int32)
    counts = np.array([c for _, c in flat], np.int32)
    return Plan(indptr, nodes, counts)


def current_pairs(state: SchedState, i: int) -> list[tuple[int, int]]:
    s = slice(int(state.pl_indptr[i]), int(state.pl_indptr[i + 1]))
    return [(int(n), int(c)) for n, c in zip(state.pl_nodes[s], state.pl_counts[s]) if c]


def most_free_placement(free: np.ndarray, want: int) -> list[tuple[int, int]]:
    """Take ``want`` GPUs node by node, each time from the node with the most free GPUs (ties:
    lowest index), as the authors' ``Counter.most_common(1)`` does; ``free`` is updated.  The
    pairs come in the order taken: the authors' allocation list, whose order sets the profile
    row a placement reads (:meth:`sim.goodput.profiles.Application.step_times`)."""
    out: dict[int, int] = {}
    while want > 0:
        node = int(np.argmax(free))
        take = min(int(free[node]), want)
        if take <= 0:
            raise ConfigError(f"no free GPU left for a job wanting {want} more")
        free[node] -= take
        out[node] = out.get(node, 0) + take
        want -= take
    return list(out.items())


def packed_counts(r: int, per_node: int) -> tuple[int, ...]:
    """``r`` GPUs packed ``per_node`` to a node: (4, 4, 2) for 10 on 4-GPU nodes."""
    full, rest = divmod(int(r), int(per_node))
    return (per_node,) * full + ((rest,) if rest else ())


def keep_or_place(state: SchedState, order: np.ndarray, want: np.ndarray,
                  model: JobModel | None = None) -> Plan:
    """Jobs keeping their GPU count keep their placement; the others, in ``order``, take GPUs
    from the most free nodes (the authors' Optimus and Tiresias placement).  ``model`` is told
    the order each placed job took its nodes in (:meth:`JobModel.note_allocation_order`)."""
    k = state.active.shape[0]
    per_job: list[list[tuple[int, int]]] = [[] for _ in range(k)]
    free = state.cluster.node_gpus.astype(np.int64).copy()
    keep = np.zeros(k, bool)
    for i in range(k):
        cur = current_pairs(state, i)
        if want[i] > 0 and sum(c for _, c in cur) == want[i]:
            per_job[i], keep[i] = cur, True
            for n, c in cur:
                free[n] -= c
    for i in order:
        if want[i] > 0 and not keep[i]:
            per_job[i] = most_free_placement(free, int(want[i]))
            if model is not None:
                model.note_allocation_order(int(state.active[i]), tuple(c for _, c in per_job[i]))
    return csr_plan([sorted(p) for p in per_job])
