"""Classic queue policies (algorithms.md §5.1): FIFO, SJF, SRTF, LAS.

Durations for SJF/SRTF are oracle values: the job's work at its requested size
on the reference GPU type (``JobSpecs.est_duration``), as in the Tiresias and
Gavel simulators.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..placement import changed_jobs
from . import register
from .base import Policy, stable_order


@register
class FIFO(Policy):
    name = "fifo"
    native = "fifo"
    description = "first in, first out by arrival; non-preemptive; strict (head-of-line blocking)"
    blocking = True
    skip_if_nothing_fits = True
    place_lone_arrivals = True
    view = "queued"

    def __init__(self, placement: str = "consolidated", backfill: bool = False):
        super().__init__(placement)
        self.backfill = backfill
        self.blocking = not backfill

    def order(self, state):
        queued = np.flatnonzero(state.ngpu == 0)
        return queued[stable_order(state.jobs.arrival[state.active[queued]])]

    def params(self):
        return {**super().params(), "backfill": self.backfill}


@register
class SJF(Policy):
    name = "sjf"
    native = "sjf"
    description = "shortest job first by oracle duration x GPUs; non-preemptive; backfills"
    #: reads the true remaining work (an oracle baseline): given it in learning runs too
    clairvoyant = True
    skip_if_nothing_fits = True
    place_lone_arrivals = True
    view = "queued"

    def order(self, state):
        queued = np.flatnonzero(state.ngpu == 0)
        ids = state.active[queued]
        size = state.jobs.est_duration[ids] * state.jobs.demand[ids]
        return queued[stable_order(state.jobs.arrival[ids], size)]


@register
class SRTF(Policy):
    name = "srtf"
    native = "srtf"
    description = "shortest remaining time first (oracle, x GPUs); preemptive at events"
    #: reads the true remaining work (an oracle baseline): given it in learning runs too
    clairvoyant = True
    preemptive = True
    skip_idle_completions = True
    place_lone_arrivals = True

    def order(self, state):
        ids = state.active
        left = state.remaining / state.jobs.work[ids] * state.jobs.est_duration[ids]
        return stable_order(state.jobs.arrival[ids], left * state.jobs.demand[ids])


@register
class LAS(Policy):
    """Least attained service (2D: GPU-seconds held), preemptive at rounds.

    Lease (our rule [I], after Gavel's lease extension): a job that starts or restarts keeps
    its GPUs until ``min_run_s`` seconds after its restart delay ends, so every stint makes
    progress.  Without it LAS livelocks when rounds are shorter than restart delays: GPU-seconds
    accrue during a restart, so two jobs can swap at every round and never progress.  Inside
    the lease a running job comes before every other job; after it, jobs are ordered by
    attained service (ties: arrival, then job id).
    """

    name = "las"
    native = "las"
    description = ("least attained service (2D: GPU-seconds); preemptive at rounds; a job keeps "
                   "its GPUs for min_run_s (default 60 s) after its restart delay")
    preemptive = True
    skip_idle_completions = True
    place_lone_arrivals = True
    round_s = 60.0

    def __init__(self, placement: str = "consolidated", min_run_s: float = 60.0):
        super().__init__(placement)
        try:
            self.min_run_s = float(min_run_s)
        except (TypeError, ValueError):
            raise ConfigError(f"policy las: min_run_s must be a number, got {min_run_s!r}") from None
        if not (np.isfinite(self.min_run_s) and self.min_run_s > 0):
            raise ConfigError(f"policy las: min_run_s must be finite and > 0, got {min_run_s!r}")
        self._reset(None)

    def _reset(self, jobs) -> None:
        n = 0 if jobs is None else len(jobs)
        self._jobs, self._now = jobs, -np.inf
        self.resume = np.full(n, np.nan)       # when the job's current stint makes progress
        self.started = np.zeros(n, np.bool_)   # has the job run before?

    def _catch_up(self, state) -> None:
        """Running jobs the policy did not place were placed by the engine at their arrival
        (Policy.place_lone_arrivals): a first start, progressing at once."""
        if self._jobs is not state.jobs or state.now < self._now:
            self._reset(state.jobs)
        self._now = state.now
        ids = state.active
        unseen = (state.ngpu > 0) & np.isnan(self.resume[ids])
        if unseen.any():
            self.resume[ids[unseen]] = state.jobs.arrival[ids[unseen]]
            self.started[ids[unseen]] = True

    def order(self, state):
        self._catch_up(state)
        ids = state.active
        leased = (state.ngpu > 0) & (state.now < self.resume[ids] + self.min_run_s)
        return stable_order(state.jobs.arrival[ids], state.attained_gpu_s, (~leased).astype(np.int8))

    def schedule(self, state):
        plan = super().schedule(state)
        ids = state.active
        after = np.diff(plan.indptr) > 0
        # a (re)start: a job that gets GPUs, or a running one moved to another GPU type
        start = after & ((state.ngpu == 0) | changed_jobs(state.pl_indptr, state.pl_nodes,
                                                           state.pl_counts, plan.indptr,
                                                           plan.nodes, plan.counts))
        if start.any():
            sid = ids[start]
            delay = np.where(self.started[sid], state.jobs.restart_delay[sid], 0.0)
            self.resume[sid] = state.now + delay
            self.started[sid] = True
        self.resume[ids[~after]] = np.nan
        return plan

    def native_params(self) -> dict:
        return {"lease_s": self.min_run_s}

    def params(self):
        return {**super().params(), "min_run_s": self.min_run_s}
