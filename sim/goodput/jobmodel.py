"""The Pollux job model during a run (:class:`JobModel`): epochs, batch configurations, goodput.

What the authors' simulator does in ``Job.step`` / ``Job.update_local_bsz`` (petuum/adaptdl
``simulator/simulator.py``), in the engine's exact time:

* a job's **progress** is the engine's work done (``work - remaining``); its **epoch** is where
  that progress lies among its application's epoch starts;
* its **batch configuration** (atomic batch, accumulation steps) on ``r`` GPUs over ``n`` nodes:
  a fixed global batch ``B`` (the workload's, for Tiresias and Optimus; per-application
  overrides, e.g. Pollux's NCF at 32768) is split by Pollux's rule; a goodput-adaptive job
  (Pollux) picks the batch of best predicted goodput (:func:`sim.goodput.goodput.optimize`)
  with the gradient statistics it last observed, and, before it has run at all, uses
  ``max(M0, r * b_min)``; the atomic batch is then capped at ``M_max / (r (s + 1))``;
* its **goodput** (progress per second) is measured, not predicted: the profile's step and sync
  times of the placement at that atomic batch and the gradient statistics of the current epoch at
  the global batch give ``gain / (step + s * (step - sync))``;
* the engine runs each job at the oracle's rate times ``Plan.rate_scale``; :meth:`finish`
  returns the scale that makes it the measured goodput, and a wakeup at the next epoch boundary,
  where statistics (and the adaptive batch) change.

Per-job memory is numpy arrays indexed by job id; a model serves one run.
"""
from __future__ import annotations

import numpy as np

from ..state import JobSpecs, Plan, SchedState
from .goodput import EPS, gain, optimize, split_batch
from .oracle import GoodputOracle

__all__ = ["JobModel", "EPOCH_TOL", "placement_counts"]

#: Progress within this of an epoch start counts as having reached it (float round-off of the
#: engine's accrual).
EPOCH_TOL = 1e-6


def placement_counts(indptr, nodes, counts, i: int) -> tuple[int, ...]:
    """GPUs per node of job ``i`` of a CSR placement, in node order (zeros dropped)."""
    s = slice(int(indptr[i]), int(indptr[i + 1]))
    order = np.argsort(nodes[s], kind="stable")
    return tuple(int(c) for c in counts[s][order] if c)


class JobModel:
    """Per-run state of Pollux-model jobs; see the module docstring.

    ``adaptive``: choose batch sizes by goodput (Pollux) instead of the workload's fixed batch.
    ``batch_override``: application -> fixed global batch for every job of it.
    """

    def __init__(self, oracle: GoodputOracle, jobs: JobSpecs, adaptive: bool,
                 batch_override: dict[str, int] | None = None):
        self.oracle = oracle
        self.jobs = jobs
        self._model = np.asarray(jobs.model, np.int64)
        n_jobs = len(jobs)
        self.adaptive = adaptive
        self.override = {oracle.models.index(a): b for a, b in (batch_override or {}).items()
                         if a in oracle.models}
        self.started = np.zeros(n_jobs, bool)          # has run: the model has been measured
        self.stat_batch = np.zeros(n_jobs)              # batch and epoch of the last statistics seen
        self.stat_epoch = np.zeros(n_jobs, np.int64)
        self.max_seen = np.zeros(n_jobs, np.int64)      # most GPUs it has run on
        self.restarts = np.full(n_jobs, -1, np.int64)   # Pollux's num_restarts (-1: never placed)
        self.resume_at = np.zeros(n_jobs)               # end of its current restart delay
        self.cur_batch = np.zeros(n_jobs)               # global batch of its current configuration
        self.cur_epoch = np.zeros(n_jobs, np.int64)
        self._memo: dict[int, tuple] = {}

    # -- progress and epochs ----------------------------------------------
    def epochs(self, state: SchedState) -> np.ndarray:
        ids = state.active
        prog = state.jobs.work[ids] - state.remaining
        model = state.jobs.model[ids]
        out = np.zeros(ids.shape[0], np.int64)
        for a in np.unique(model):
            sel = model == a
            starts = self.oracle.app(a).epoch_progress
            out[sel] = np.searchsorted(starts, prog[sel] + EPOCH_TOL, "right") - 1
        return out

    def observe(self, state: SchedState) -> None:
        """Record what running jobs have measured since the last decision."""
        ids = state.active[state.ngpu > 0]
        self.started[ids] = True
        self.max_seen[ids] = np.maximum(self.max_seen[ids], state.ngpu[state.ngpu > 0])
        self.stat_batch[ids] = self.cur_batch[ids]
        self.stat_epoch[ids] = self.cur_epoch[ids]

    def fixed_batch(self, job: int) -> int:
        model = int(self.oracle_model(job))
        if model in self.override:
            return self.override[model]
        if self.adaptive:
            return 0
        return int(self.oracle.job_batch[job]) if job < self.oracle.job_batch.shape[0] else 0

    def oracle_model(self, job: int) -> int:
        return int(self._model[job])

    # -- configurations and goodput ---------------------------------------
    def config(self, job: int, n: int, r: int) -> tuple[int, int]:
        """(atomic batch, accumulation steps) of ``job`` on ``r`` GPUs over ``n`` nodes."""
        app = self.oracle.app(self.oracle_model(job))
        fixed = self.fixed_batch(job)
        if fixed <= 0 and self.adaptive and self.started[job]:
            sqr, var = app.grad_stats(self.stat_batch[job], self.stat_epoch[job])
            _, atomic, steps = optimize(self.oracle.theta[self.oracle_model(job)], sqr, var,
                                        app.init_batch_size, n, r, app.max_batch_size,
                                        (app.min_local_bsz, app.max_local_bsz))
            atomic, steps = int(atomic[0]), int(steps[0])
        else:
            batch = fixed if fixed > 0 else max(app.init_batch_size, app.min_local_bsz * r)
            a, s = split_batch(np.ceil(batch / r - EPS), r, app.init_batch_size, app.max_local_bsz)
            atomic, steps = int(a), int(s)
        return min(atomic, int(app.max_batch_size / (r * (steps + 1)))), steps

    def measured_rate(self, job: int, counts: tuple[int, ...], epoch: int) -> tuple[float, float]:
        """(progress per second, global batch) of ``job`` on placement ``counts`` in ``epoch``."""
        model = self.oracle_model(job)
        app = self.oracle.app(model)
        r, n = sum(counts), len(counts)
        atomic, steps = self.config(job, n, r)
        step, sync = app.step_times(counts, atomic)
        batch = r * atomic * (steps + 1)
        sqr, var = app.grad_stats(batch, epoch)
        g = gain(batch, app.init_batch_size, sqr, var)
        return float(g) / (step + steps * (step - sync)), float(batch)

    def _rate_and_scale(self, job: int, counts: tuple[int, ...], epoch: int) -> tuple[float, float, float]:
        """(measured rate, global batch, rate / oracle rate), memoized per job while its placement,
        epoch and last statistics stay the same."""
        key = (counts, epoch, float(self.stat_batch[job]), int(self.stat_epoch[job]), bool(self.started[job]))
        hit = self._memo.get(job)
        if hit is not None and hit[0] == key:
            return hit[1]
        rate, batch = self.measured_rate(job, counts, epoch)
        base = self.oracle.rates(np.array([self._model[job]]), np.array([sum(counts)]), np.array([len(counts)]))[0]
        out = (rate, batch, rate / base)
        self._memo[job] = (key, out)
        return out

    # -- the plan -----------------------------------------------------------
    def begin(self, state: SchedState) -> np.ndarray:
        """Start a decision: record what running jobs measured since the last one (statistics,
        GPU counts); returns the active jobs' epochs."""
        self.observe(state)
        return self.epochs(state)

    def finish(self, state: SchedState, plan: Plan) -> Plan:
        """``plan`` with the rate scales of measured goodput and a wakeup at the next epoch end;
        updates the per-job memory (restarts, restart delays, configurations)."""
        ids, k = state.active, state.active.shape[0]
        epoch = self.epochs(state)
        prog = state.jobs.work[ids] - state.remaining
        scale = np.ones(k)
        wake = np.inf
        for i in range(k):
            new = placement_counts(plan.indptr, plan.nodes, plan.counts, i)
            if not new:
                continue
            j = int(ids[i])
            if _moved(state, plan, i):
                self.resume_at[j] = state.now + (state.jobs.restart_delay[j] if self.restarts[j] >= 0 else 0.0)
                self.restarts[j] += 1
            rate, batch, scale[i] = self._rate_and_scale(j, new, int(epoch[i]))
            self.cur_batch[j], self.cur_epoch[j] = batch, epoch[i]
            starts = self.oracle.app(state.jobs.model[j]).epoch_progress
            if epoch[i] + 1 < starts.shape[0]:
                wake = min(wake, max(state.now, self.resume_at[j]) + (starts[epoch[i] + 1] - prog[i]) / rate)
        wakeup = plan.wakeup
        if np.isfinite(wake):
            wakeup = wake if wakeup is None else min(wakeup, wake)
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup, scale)


def _pairs(indptr, nodes, counts, i: int) -> list[tuple[int, int]]:
    s = slice(int(indptr[i]), int(indptr[i + 1]))
    return sorted((int(a), int(b)) for a, b in zip(nodes[s], counts[s]) if b)


def _moved(state: SchedState, plan: Plan, i: int) -> bool:
    """Does job ``i`` get a placement other than the one it holds (the engine then restarts it)?"""
    return _pairs(state.pl_indptr, state.pl_nodes, state.pl_counts, i) != \
        _pairs(plan.indptr, plan.nodes, plan.counts, i)
