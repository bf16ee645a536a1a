"""Tiresias discretized 2D-LAS (algorithms.md §5.2; Gu et al., NSDI'19).

K priority queues Q0..Q(K-1) over attained service in GPU-seconds (2D: #GPUs x
time held).  ``thresholds`` holds the K-1 queue limits: a job in Qk is demoted
to Q(k+1) once its attained service reaches ``thresholds[k]``.

Rules, as implemented:

* A new job enters Q0.  Demotion: attained >= the current queue's limit (a job
  that passes several limits at once falls through all of them).
* Order: queues high to low; inside a queue, running jobs are kept ahead of
  pending ones, each group FIFO by the time it entered the queue (arrival,
  demotion or promotion; ties by arrival, then job id).  A job demoted at this
  decision joins the *tail* of its new queue, behind that queue's pending jobs,
  as in the authors' simulator (``dlas_sim_jobs`` appends the demoted job and
  only afterwards moves running jobs ahead of pending ones).
* Scheduling is preemptive and not blocking: in that order, every job whose GPU
  count still fits is selected; running jobs that are not selected lose their
  GPUs (the greedy placer in sim.placement does this).
* PromoteKnob (starvation prevention, ``promote_knob`` > 0): a pending job in a
  lower queue whose pending time since it last lost its GPUs reaches
  ``promote_knob`` x its executed (run) time is promoted to Q0.  The promotion
  resets the job's executed time and attained service *for queueing purposes*
  (the engine's totals are untouched), so it must earn Q0's limit again.
  0 switches the knob off (the default, algorithms.md §7 item 5).  The authors'
  code accrues the pending time over all pending periods since the last
  promotion; we use the current pending period (SchedState.queued_since).
  Our guard [I]: only a job that did some work since it last entered Q0 is
  promoted.  The authors' simulator has no restart delay; with one, two jobs
  whose Q0 stint (limit / GPUs) is shorter than the delay could otherwise
  promote and demote each other forever without progress.
* Event driven: the policy asks to be woken at the exact next demotion (a job
  holding g GPUs gains g GPU-seconds per second, restart delays included) or
  promotion, computed from the allocation the plan leaves in place -- but only while
  some job waits.  Without a waiting job a demotion changes no placement, so it is
  folded in at the next decision instead, with the exact time the job crossed the
  limit (its allocation has not changed since the last decision, so the crossing is
  ``now - (service - limit) / GPUs``) as its queue-entry time, and not counted as
  demoted *at* that decision.  The results are those of waking at every demotion
  (tested), with far fewer decisions; ``wake_without_contention = True`` restores the
  wakeups.  Completions with nothing queued are skipped by the engine
  (``skip_idle_completions``): every job runs and keeps its GPUs.

Defaults: K = 2 with one limit of 3600 GPU-s, the paper's default as recalled
in algorithms.md §5.2 [R] and the README example of the authors' simulator.
``thresholds="code"`` gives the simulator's ``queue_limit`` [3250, 7200, 18000]
(K = 4 here; the simulator's default ``num_queue = 3`` uses only the first two).

Per-job memory (queue, FIFO key, offsets reset by promotion) lives in numpy
arrays indexed by job id, allocated on the first call of a run; every update is
vectorized.  A policy object remembers one run: it starts afresh when it sees a
different JobSpecs or time goes backwards.
"""
from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..state import ARRIVAL, COMPLETION, Plan, SchedState
from . import register
from .base import Policy, stable_order

#: relative slack when testing "attained >= limit" at a demotion wakeup, which the
#: engine reaches by accruing in steps, so float rounding may leave it a hair short
_REL_TOL = 1e-9


def _parse_thresholds(thresholds) -> np.ndarray:
    if isinstance(thresholds, str):
        named = {"paper": Tiresias.PAPER_THRESHOLDS, "code": Tiresias.CODE_THRESHOLDS}
        if thresholds not in named:
            raise ConfigError(f"policy tiresias: unknown thresholds {thresholds!r}; give a list "
                              f"of GPU-seconds or one of {sorted(named)}")
        thresholds = named[thresholds]
    try:
        thr = np.array([float(t) for t in thresholds], float)
    except (TypeError, ValueError):
        raise ConfigError(f"policy tiresias: thresholds must be numbers, got {thresholds!r}") from None
    if thr.size and (not np.all(np.isfinite(thr)) or thr[0] <= 0 or np.any(np.diff(thr) <= 0)):
        raise ConfigError(f"policy tiresias: thresholds must be finite, > 0 and strictly "
                          f"increasing, got {thresholds!r}")
    return thr


def _as_one_wakeup(cross: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """Crossing times as a wakeup at the earliest would have seen them: a wakeup at ``t``
    demotes every job whose service is within the relative slack of its limit, i.e. that
    crosses by ``t + tol``, all with entry time ``t``.  So jobs crossing at the same
    instant (up to rounding) tie on entry time and fall back to FIFO by arrival, whatever
    the rounding of each crossing."""
    out = cross.copy()
    lead = -np.inf
    for i in np.argsort(cross, kind="stable"):   # the few jobs demoted at one decision
        if cross[i] > lead + tol[i]:
            lead = cross[i]
        out[i] = lead
    return out


@register
class Tiresias(Policy):
    name = "tiresias"
    description = ("Tiresias discretized 2D-LAS: K queues over attained GPU-seconds "
                   "(default one limit at 3600 GPU-s), FIFO inside a queue, PromoteKnob; "
                   "preemptive, wakes at exact demotions while a job waits")
    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    preemptive = True
    blocking = False
    skip_idle_completions = True
    #: wake at every demotion even when no job waits (slower; the same results)
    wake_without_contention: ClassVar[bool] = False

    @property
    def place_lone_arrivals(self) -> bool:
        """The engine may place a lone arrival (see Policy) unless we must set wakeups."""
        return not self.wake_without_contention

    native = "tiresias"

    def native_params(self) -> dict | None:
        """The native kernel folds demotions in as this class does; it has no PromoteKnob
        and no wakeups without contention (those settings decide in Python)."""
        if self.promote_knob > 0 or self.wake_without_contention:
            return None
        return {"thresholds": self.thresholds, "rel_tol": _REL_TOL}

    PAPER_THRESHOLDS: ClassVar[tuple] = (3600.0,)
    CODE_THRESHOLDS: ClassVar[tuple] = (3250.0, 7200.0, 18000.0)

    def __init__(self, placement: str = "consolidated", thresholds=PAPER_THRESHOLDS,
                 promote_knob: float = 0.0):
        super().__init__(placement)
        self.thresholds = _parse_thresholds(thresholds)
        try:
            knob = float(promote_knob)
        except (TypeError, ValueError):
            raise ConfigError(f"policy tiresias: promote_knob must be a number, "
                              f"got {promote_knob!r}") from None
        if not (np.isfinite(knob) and knob >= 0):
            raise ConfigError(f"policy tiresias: promote_knob must be finite and >= 0, got {knob}")
        self.promote_knob = knob
        #: PromoteKnob compares the remaining work with its value at the last promotion
        self.clairvoyant = knob > 0
        # demotion test: attained >= limit - slack
        self._limit_lo = self.thresholds * (1.0 - _REL_TOL)
        self._reset(None)

    # -- per-job memory ------------------------------------------------------
    def _reset(self, jobs) -> None:
        n = 0 if jobs is None else len(jobs)
        self._jobs = jobs
        self._now = -np.inf
        self._state = None               # the SchedState last folded into memory
        self.queue = np.full(n, -1, np.int64)      # -1: not seen yet
        self.entered = np.zeros(n, float)          # time the job entered its queue
        self.att_base = np.zeros(n, float)         # attained GPU-s at the last promotion
        self.run_base = np.zeros(n, float)         # run seconds at the last promotion
        self.rem_base = np.zeros(n, float)         # work left when the job last entered Q0
        self.promotions = np.zeros(n, np.int64)
        self._fresh = np.zeros(0, bool)            # aligned with state.active: moved now

    def _update(self, state: SchedState) -> None:
        """Fold a decision point into memory: arrivals, demotions, promotions."""
        if state is self._state:
            return
        if self._jobs is not state.jobs or state.now < self._now:
            self._reset(state.jobs)
        self._state, self._now = state, state.now
        ids, now = state.active, state.now
        q = self.queue[ids]
        new = q < 0
        if new.any():
            self.entered[ids[new]] = state.jobs.arrival[ids[new]]
            self.att_base[ids[new]] = 0.0
            self.run_base[ids[new]] = 0.0
            if self.promote_knob > 0:
                self.rem_base[ids[new]] = state.jobs.work[ids[new]]
            q = np.where(new, 0, q)
        service = state.attained_gpu_s - self.att_base[ids]
        level = np.searchsorted(self._limit_lo, service, side="right")
        demote = level > q
        entered = np.full(ids.size, now)
        fresh = demote.copy()
        if demote.any():
            entered[demote], fresh[demote] = self._crossings(state, service[demote],
                                                             level[demote], demote)
        q = np.where(demote, level, q)
        if self.promote_knob > 0:
            due = self._promotion_due(state, q, state.queued_since)
            promote = (state.ngpu == 0) & (now >= due)
            if promote.any():
                pid = ids[promote]
                q = np.where(promote, 0, q)
                self.att_base[pid] = state.attained_gpu_s[promote]
                self.run_base[pid] = state.run_s[promote]
                self.rem_base[pid] = state.remaining[promote]
                self.promotions[pid] += 1
                fresh |= promote
        moved = demote | fresh
        self.entered[ids[moved]] = entered[moved]
        self.queue[ids] = q
        self._fresh = fresh

    def _crossings(self, state: SchedState, service: np.ndarray, level: np.ndarray,
                   sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """When the selected jobs crossed their last limit, and whether that is now.

        Their allocation is unchanged since the last decision (allocations only change
        at decisions), so service grew at ``ngpu`` GPU-s per second until now."""
        limit = self.thresholds[level - 1]
        over = np.maximum(service - limit, 0.0)
        g = np.maximum(state.ngpu[sel], 1)
        at_now = (over <= _REL_TOL * limit) | (state.ngpu[sel] <= 0)
        cross = np.where(at_now, state.now, state.now - over / g)
        return _as_one_wakeup(cross, _REL_TOL * limit / g), at_now

    # -- the policy steps -------------------------------------------------------
    def order(self, state: SchedState) -> np.ndarray:
        self._update(state)
        ids = state.active
        settled_running = (state.ngpu > 0) & ~self._fresh
        return stable_order(state.jobs.arrival[ids], self.entered[ids],
                            (~settled_running).astype(np.int8), self.queue[ids])

    def schedule(self, state: SchedState) -> Plan:
        order = self.order(state)
        want = self.allocate(state, order)
        plan = self.place(state, order, want)
        lens = np.diff(plan.indptr)
        after = np.bincount(np.repeat(np.arange(len(lens)), lens), weights=plan.counts,
                            minlength=len(lens)).astype(np.int64)
        return replace(plan, wakeup=self.next_wakeup(state, after))

    def next_wakeup(self, state: SchedState, ngpu: np.ndarray | None = None) -> float | None:
        """The exact next demotion or promotion time, or None.

        ngpu: GPUs each active job holds after this decision (default: as now).
        """
        self._update(state)
        ids, now = state.active, state.now
        if ids.size == 0:
            return None
        ngpu = state.ngpu if ngpu is None else np.asarray(ngpu)
        if not self.wake_without_contention and np.all(ngpu > 0):
            return None        # nobody waits: demotions are folded in at the next decision
        q = self.queue[ids]
        times = []
        run = (ngpu > 0) & (q < self.thresholds.size)
        if run.any():
            left = self.thresholds[q[run]] - (state.attained_gpu_s[run] - self.att_base[ids[run]])
            times.append(np.min(now + np.maximum(left, 0.0) / ngpu[run]))
        if self.promote_knob > 0:
            since = np.where(state.ngpu > 0, now, state.queued_since)      # preempted now: now
            due = np.where(ngpu == 0, self._promotion_due(state, q, since), np.inf)
            if np.isfinite(due).any():
                times.append(np.min(due))
        if not times:
            return None
        t = float(min(times))
        return t if t > now else float(np.nextafter(now, np.inf))

    def _promotion_due(self, state: SchedState, q: np.ndarray, since: np.ndarray) -> np.ndarray:
        """When each job, pending from `since`, is promoted (inf: not eligible).

        Eligible: in a lower queue, with executed time > 0 since the last promotion,
        and some work done since it last entered Q0 (see the module notes).
        """
        ids = state.active
        executed = state.run_s - self.run_base[ids]
        ok = (q > 0) & (executed > 0) & (state.remaining < self.rem_base[ids])
        return np.where(ok, since + self.promote_knob * executed, np.inf)

    def params(self) -> dict:
        return {**super().params(), "thresholds": self.thresholds.tolist(),
                "promote_knob": self.promote_knob}
