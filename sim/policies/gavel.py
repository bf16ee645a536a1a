"""Gavel's policies (algorithms.md §5.7; gavel ``scheduler/policies/*.py``), by Gavel's names.

Each policy is an allocation rule (jobs x GPU types time fractions) run by Gavel's round
mechanism (:mod:`sim.policies.gavel_rounds`).  The LPs are in :mod:`sim.policies.gavel_lp`.
Throughputs come from the state (``SchedState.type_throughputs``: consolidated, at the
requested GPU count); the scale factor is the requested GPU count and the priority weight
``JobSpecs.priority``.  A heterogeneity-agnostic policy ("agnostic") hands its LP a
throughput matrix that cannot tell types apart: all ones (max-min fairness) or every type at
the reference type's rate (finish-time fairness; Gavel hard-codes v100); the round mechanism
still never runs a job where its real throughput is 0.
"""
from __future__ import annotations

import random
from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..state import SchedState
from . import register
from .gavel_lp import (DEFAULT_SOLVER, AllocationLP, finish_time_fair_allocation,
                       isolated_allocation, makespan_allocation, max_min_coefficients,
                       proportional_share)
from .gavel_rounds import GavelRounds


class _GavelLP(GavelRounds):
    """A Gavel policy whose allocation comes from an LP over ``lp_view`` throughputs."""

    #: what the LP sees: "measured" (the oracle), "ones", or "reference" (reference type)
    lp_view: ClassVar[str] = "measured"

    def _lp(self, state: SchedState) -> AllocationLP:
        return AllocationLP(state.demand, self._type_capacity(state.cluster), self.solver)

    def _lp_throughputs(self, state: SchedState, thr: np.ndarray) -> np.ndarray:
        if self.lp_view == "ones":
            return np.ones_like(thr)
        if self.lp_view == "reference":
            ids = state.active
            ref = state.jobs.work[ids] / state.jobs.est_duration[ids]
            return np.repeat(ref[:, None], thr.shape[1], axis=1)
        return thr


class _MaxMinFairness(_GavelLP):
    """``max_X min_i s_i y_i(X) / (w_i y_i(X_prop))`` (``max_min_fairness.py``)."""

    def allocation(self, state, thr):
        lp = self._lp(state)
        share = proportional_share(lp.n, lp.capacity)
        weight = state.jobs.priority[state.active]
        return lp.max_min(max_min_coefficients(self._lp_throughputs(state, thr), lp.scale,
                                               weight, share))[0]


@register
class GavelMaxMinFairness(_MaxMinFairness):
    name = "gavel-max-min-fairness"
    description = ("Gavel's heterogeneity-agnostic LAS (max-min fairness over time shares, "
                   "all types alike) with Gavel's 360 s rounds")
    lp_view = "ones"
    shuffle_types = True


@register
class GavelMaxMinFairnessPerf(_MaxMinFairness):
    name = "gavel-max-min-fairness-perf"
    description = ("Gavel's heterogeneity-aware LAS: max-min of throughput normalized by an "
                   "equal split, weighted by priority and scale factor; 360 s rounds")


class _FinishTimeFairness(_GavelLP):
    """``min_X max_i rho_i(X)`` (``finish_time_fairness.py``, Themis' rho).

    The isolated finish time accumulates, per job, the isolated time of the progress it made
    between two allocations (Gavel's ``_cumulative_isolated_time``) plus the remaining work at
    the isolated throughput.  ``rel_tol``: stopping tolerance of our bisection on rho."""

    #: reads the true remaining work (an oracle baseline): given it in learning runs too
    clairvoyant = True

    def __init__(self, placement: str = "consolidated", time_per_round_s: float = 360.0,
                 reset_interval_s: float = 1920.0, seed: int = 0, solver: str = DEFAULT_SOLVER,
                 rel_tol: float = 1e-4):
        if not (0 < float(rel_tol) < 1):
            raise ConfigError(f"policy {self.name}: rel_tol must be in (0, 1), got {rel_tol!r}")
        self.rel_tol = float(rel_tol)
        super().__init__(placement, time_per_round_s, reset_interval_s, seed, solver)

    def _reset_run(self, state):
        n = 0 if state is None else len(state.jobs)
        self.iso_time = np.zeros(n)              # Gavel's _cumulative_isolated_time
        self.prev_remaining = np.full(n, np.nan)  # NaN: not in the previous allocation
        self.prev_iso = np.zeros(n)

    def allocation(self, state, thr):
        ids = state.active
        lp = self._lp(state)
        t = self._lp_throughputs(state, thr)
        iso = np.sum(t * isolated_allocation(lp.scale, lp.capacity), axis=1)
        was = ~np.isnan(self.prev_remaining[ids])
        self.iso_time[ids[was]] += ((self.prev_remaining[ids[was]] - state.remaining[was])
                                    / self.prev_iso[ids[was]])
        self.prev_remaining[:] = np.nan
        self.prev_remaining[ids], self.prev_iso[ids] = state.remaining, iso
        remaining = np.maximum(state.remaining, 1e-12)
        expected_iso = self.iso_time[ids] + remaining / iso
        since = state.now - state.jobs.arrival[ids]
        return finish_time_fair_allocation(lp, t, since, remaining, expected_iso, self.rel_tol)

    def params(self):
        return {**super().params(), "rel_tol": self.rel_tol}


@register
class GavelFinishTimeFairness(_FinishTimeFairness):
    name = "gavel-finish-time-fairness"
    description = ("Gavel's heterogeneity-agnostic finish-time fairness (every type at the "
                   "reference type's throughput); 360 s rounds")
    lp_view = "reference"
    shuffle_types = True


@register
class GavelFinishTimeFairnessPerf(_FinishTimeFairness):
    name = "gavel-finish-time-fairness-perf"
    description = "Gavel's heterogeneity-aware finish-time fairness (min max rho); 360 s rounds"


@register
class GavelMinTotalDurationPerf(_GavelLP):
    name = "gavel-min-total-duration-perf"
    description = ("Gavel's makespan policy: bisection on the time T by which every active "
                   "job can finish; 360 s rounds")
    #: reads the true remaining work (an oracle baseline): given it in learning runs too
    clairvoyant = True

    def allocation(self, state, thr):
        return makespan_allocation(self._lp(state), thr, np.maximum(state.remaining, 1e-12))


@register
class GavelMaxSumThroughputPerf(_GavelLP):
    name = "gavel-max-sum-throughput-perf"
    description = "Gavel's total-throughput policy (max sum of iterations/s); 360 s rounds"

    def allocation(self, state, thr):
        return self._lp(state).max_sum(thr)


@register
class GavelIsolated(_GavelLP):
    name = "gavel-isolated"
    description = ("Gavel's isolated split: each job 1/n of every type over its scale factor "
                   "(the finish-time fairness denominator); 360 s rounds")
    shuffle_types = True

    def allocation(self, state, thr):
        lp = self._lp(state)
        return isolated_allocation(lp.scale, lp.capacity)


class _Fifo(GavelRounds):
    """Gavel's ``fifo.py``: jobs by arrival (job id) get a whole GPU type each, head-of-line
    blocking.  Types are visited in name order, as Gavel sorts them.

    ``-perf`` re-decides at every allocation and takes the fastest type with room for the
    job.  The agnostic mode keeps a job's type until it finishes; a finishing job's type goes
    to the queue head if it fits there.  For the others, ``type_rule`` says how the type is
    chosen: ``"gavel-code"`` (default) does what Gavel's code does -- it draws a random index
    among the types with room (``random.Random(seed)``) but then uses the *last* type in name
    order that has any free GPU, which may over-commit that type (the round mechanism then
    leaves what does not fit waiting); ``"random"`` uses the drawn type, which is what the code
    means to do (docs/gavel.md)."""

    skip_zero_priority = True
    perf: ClassVar[bool] = False
    TYPE_RULES: ClassVar[tuple] = ("gavel-code", "random")

    def __init__(self, placement: str = "consolidated", time_per_round_s: float = 360.0,
                 reset_interval_s: float = 1920.0, seed: int = 0, solver: str = DEFAULT_SOLVER,
                 type_rule: str = "gavel-code"):
        if type_rule not in self.TYPE_RULES:
            raise ConfigError(f"policy {self.name}: unknown type_rule {type_rule!r}; choose "
                              f"from {list(self.TYPE_RULES)}")
        self.type_rule = type_rule
        super().__init__(placement, time_per_round_s, reset_interval_s, seed, solver)

    def params(self):
        return {**super().params(), "type_rule": self.type_rule}

    def _reset_run(self, state):
        n = 0 if state is None else len(state.jobs)
        self.fifo_type = np.full(n, -1, np.int64)
        self._rng = random.Random(self.seed)

    def allocation(self, state, thr):
        ids, c = state.active, state.cluster
        scale = state.demand.astype(np.int64)
        avail = np.bincount(c.node_type, weights=c.node_gpus,
                            minlength=len(c.gpu_types)).astype(np.int64)
        kept = np.full(ids.size, -1, np.int64) if self.perf else self.fifo_type[ids]
        queue = list(np.flatnonzero(kept < 0))          # job-id order (active is sorted)
        if not self.perf:
            self._refill_finished(state, kept, queue, thr)
        np.subtract.at(avail, kept[kept >= 0], scale[kept >= 0])
        by_name = sorted(range(len(c.gpu_types)), key=lambda t: c.gpu_types[t])
        open_types = [t for t in by_name if avail[t] > 0]
        while queue and open_types:
            i = queue.pop(0)
            room = [k for k, t in enumerate(open_types) if avail[t] >= scale[i]]
            if not room:
                break
            k = self._pick(room, open_types, thr[i])
            t = open_types[-1] if self.type_rule == "gavel-code" and not self.perf else open_types[k]
            if thr[i, t] > 0:
                kept[i] = t
                avail[t] -= scale[i]
                if avail[t] == 0:
                    open_types.pop(k)
        self.fifo_type[:] = -1
        self.fifo_type[ids] = kept
        x = np.zeros(thr.shape)
        on = kept >= 0
        x[np.flatnonzero(on), kept[on]] = 1.0
        return x

    def _no_jobs_allocation(self) -> None:
        # Gavel's FIFOPolicy.get_allocation on an empty job set deletes every finished job
        # from its allocation, so the next arrival does not inherit a finished job's type
        self.fifo_type[:] = -1

    def _pick(self, room, open_types, thr_row) -> int:
        """Index into ``open_types``: the fastest with room (perf) or a random draw."""
        if self.perf:
            return max(room, key=lambda k: (thr_row[open_types[k]], -k))
        return room[self._rng.randrange(len(room))]

    def _refill_finished(self, state, kept, queue, thr) -> None:
        """Agnostic mode, Gavel's pass over the jobs holding a type (by job id): a running
        job takes its GPUs off the type's free count, a finished one hands its type to the
        queue head if the head fits in what is free so far."""
        ids, demand = state.active, state.jobs.demand
        c = state.cluster
        left = np.bincount(c.node_type, weights=c.node_gpus,
                           minlength=len(c.gpu_types)).astype(np.int64)
        pos = {int(j): k for k, j in enumerate(ids)}
        for j in np.flatnonzero(self.fifo_type >= 0):
            t = self.fifo_type[j]
            if int(j) in pos:
                left[t] -= demand[j]
            elif queue and demand[ids[queue[0]]] <= left[t] and thr[queue[0], t] > 0:
                i = queue.pop(0)
                kept[i] = t
                left[t] -= demand[ids[i]]


@register
class GavelFifo(_Fifo):
    name = "gavel-fifo"
    description = "Gavel's agnostic FIFO (random type among those with room); 360 s rounds"
    shuffle_types = True


@register
class GavelFifoPerf(_Fifo):
    name = "gavel-fifo-perf"
    description = "Gavel's FIFO taking the fastest type with room; 360 s rounds"
    perf = True
