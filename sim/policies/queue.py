"""Classic queue policies (algorithms.md §5.1): FIFO, SJF, SRTF, LAS.

Durations for SJF/SRTF are oracle values: the job's work at its requested size
on the reference GPU type (``JobSpecs.est_duration``), as in the Tiresias and
Gavel simulators.
"""
from __future__ import annotations

import numpy as np

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
    preemptive = True
    skip_idle_completions = True
    place_lone_arrivals = True

    def order(self, state):
        ids = state.active
        left = state.remaining / state.jobs.work[ids] * state.jobs.est_duration[ids]
        return stable_order(state.jobs.arrival[ids], left * state.jobs.demand[ids])


@register
class LAS(Policy):
    name = "las"
    native = "las"
    description = "least attained service (2D: GPU-seconds); preemptive at rounds"
    preemptive = True
    skip_idle_completions = True
    place_lone_arrivals = True
    round_s = 60.0

    def order(self, state):
        return stable_order(state.jobs.arrival[state.active], state.attained_gpu_s)
