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
* the model it predicts with (:meth:`JobModel.batch_model`) is its application's fitted model,
  or, with ``observed=True`` (Sia, as the authors' simulator), the model fitted online on the
  configurations the job has run on that GPU type (:mod:`sim.goodput.observed`; none before it
  has run there, so the batch is then ``max(M0, r * b_min)``).  A configuration counts as run once
  the job has trained on it (after any restart delay) for some time before a decision;
* its **goodput** (progress per second) is measured, not predicted: the profile's step and sync
  times of the placement (its GPUs per node in the order the policy allocated them, as the
  authors' allocation lists: the profile's row is that sequence's smallest rotation) at that
  atomic batch and the gradient statistics of the current epoch at
  the global batch give ``gain / (step + s * (step - sync))``;
* with the oracle's ``interference`` > 0, a distributed job with a GPU on a node that hosts
  two or more distributed jobs runs at ``1 - interference`` of that goodput
  (:func:`interfered_jobs`; the Pollux simulator's ``Cluster.step``, per decision where theirs is
  per 60-s step);
* the engine runs each job at the oracle's rate times ``Plan.rate_scale``; :meth:`finish`
  returns the scale that makes it the measured goodput, and a wakeup at the next epoch boundary,
  where statistics (and the adaptive batch) change;
* with ``whole_second_epochs`` (both authors' simulators: ``Job.step``'s
  ``delta = round((next_progress - progress) / goodput)``) an epoch that ends within the
  policy's current step (its round: the authors' ``Cluster.step`` interval) ends a whole number
  of seconds after the job's segment began (the step's start, the end of its restart delay, or
  its previous epoch's end), rounded half to even as Python's ``round``; the job runs that
  segment at the rate that lands it there (:func:`rounded_epoch_end`).  An epoch the authors
  round to 0 s takes :data:`MIN_EPOCH_S`.

Per-job memory is numpy arrays indexed by job id; a model serves one run.
"""
from __future__ import annotations

import numpy as np

from ..state import JobSpecs, Plan, SchedState
from ..calibration.models import pollux_iter_time
from ..errors import TraceError
from .goodput import EPS, gain, optimize_memo, split_batch
from .observed import ObservedProfiles
from .oracle import GoodputOracle

__all__ = ["JobModel", "EPOCH_TOL", "MIN_EPOCH_S", "placement_counts", "interfered_jobs",
           "rounded_epoch_end"]

#: Progress within this of an epoch start counts as having reached it (float round-off of the
#: engine's accrual).
EPOCH_TOL = 1e-6

#: the time an epoch takes that the authors' whole-second rounding makes 0 s (the engine needs a
#: finite rate)
MIN_EPOCH_S = 1e-6

#: per-type (Sia) profiles: a placement outside the measured ones runs at the fitted model's step
#: time instead of failing
MODEL_FALLBACK = True


def placement_counts(indptr, nodes, counts, i: int) -> tuple[int, ...]:
    """GPUs per node of job ``i`` of a CSR placement, in node order (zeros dropped)."""
    s = slice(int(indptr[i]), int(indptr[i + 1]))
    order = np.argsort(nodes[s], kind="stable")
    return tuple(int(c) for c in counts[s][order] if c)


class JobModel:
    """Per-run state of Pollux-model jobs; see the module docstring.

    ``adaptive``: choose batch sizes by goodput (Pollux) instead of the workload's fixed batch.
    ``batch_override``: application -> fixed global batch for every job of it.
    ``observed``: predict with per-job models fitted on what each job has run (Sia's), not the
    application's profile-fitted model; ``observed_across_types``: one such model per job over
    all GPU types (:class:`~sim.goodput.observed.ObservedProfiles` ``across_types``).
    ``first_start_delay``: the engine charges the restart delay at a job's first start too
    (:class:`~sim.engine.EngineConfig`); the restart delays this model tracks follow it.
    ``sia_batch_limits``: the Sia simulator's limits on a job's own batch (its
    ``update_local_bsz``): a fixed batch is split, and an adaptive one searched, up to the
    placement's own largest per-GPU batch
    (:meth:`~sim.goodput.profiles.Application.max_local_bsz_at`) instead of the profile's, then
    the atomic batch is capped at the largest measured on that many GPUs.
    ``batch_at_segments``: a running job keeps its configuration until it moves, enters a new
    epoch or a round begins, as the Sia simulator's ``Job.step`` calls ``update_local_bsz`` only
    after each epoch crossing and at the end of each step (and ``reallocate`` on a move); other
    jobs' epoch ends between rounds do not make it re-pick (without this a job whose new
    observation refits its model re-picks at every decision).
    ``whole_second_epochs``: epochs that end within a step last whole seconds (module docstring).
    """

    def __init__(self, oracle: GoodputOracle, jobs: JobSpecs, adaptive: bool,
                 batch_override: dict[str, int] | None = None, observed: bool = False,
                 sia_batch_limits: bool = False, first_start_delay: bool = False,
                 whole_second_epochs: bool = False, observed_across_types: bool = False,
                 batch_at_segments: bool = False):
        self.oracle = oracle
        self.jobs = jobs
        self._model = np.asarray(jobs.model, np.int64)
        n_jobs = len(jobs)
        self.adaptive = adaptive
        self.sia_batch_limits = sia_batch_limits
        self.first_start_delay = first_start_delay     # the engine charges the delay at a first start
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
        self.whole_second_epochs = whole_second_epochs
        self.epoch_end = np.full(n_jobs, np.nan)        # rounded end of the epoch in this step (NaN: none)
        self.alloc_counts: dict[int, tuple] = {}         # job -> GPUs per node in allocation order
        self._taken: dict[int, tuple] = {}               # this decision's allocation orders
        self._memo: dict[int, tuple] = {}
        self.observed = ObservedProfiles(observed_across_types) if observed else None
        self._running: dict[int, list] = {}             # job -> [observation, since, recorded]
        self._held_types: dict[int, tuple] = {}          # job -> GPU types of the placement it holds
        self._begun = None                              # (state, its epochs) of the decision begun
        self.batch_at_segments = batch_at_segments
        self._segment: dict[int, tuple] = {}             # job -> its measured configuration (batch_at_segments)

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
        if self.observed is not None:
            self._record_runs(state.now)

    def _record_runs(self, now: float) -> None:
        """Record each configuration that has trained for some time (observed models)."""
        for j, run in self._running.items():
            (gpu_type, *conf), since, recorded = run
            if not recorded and since < now:
                self.observed.record(j, gpu_type, *conf)
                run[2] = True

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
    def config(self, job: int, n: int, r: int, gpu_type: str | None = None,
               counts: tuple[int, ...] | None = None) -> tuple[int, int]:
        """(atomic batch, accumulation steps) of ``job`` on ``r`` GPUs over ``n`` nodes (of
        ``gpu_type``, where the oracle has per-type profiles; ``counts``: the GPUs per node, for
        ``sia_batch_limits``)."""
        app = self.oracle.app(self.oracle_model(job), gpu_type)
        fixed = self.fixed_batch(job)
        theta = self.batch_model(job, gpu_type) if fixed <= 0 and self.adaptive else None
        limits = self.sia_batch_limits and counts is not None
        top = app.max_local_bsz_at(counts) if limits else app.max_local_bsz
        if theta is not None:
            sqr, var = app.grad_stats(self.stat_batch[job], self.stat_epoch[job])
            _, atomic, steps = optimize_memo(theta, sqr, var, app.init_batch_size, n, r, app.max_batch_size,
                                             (app.min_local_bsz, top))
            atomic, steps = int(atomic[0]), int(steps[0])
        else:
            batch = fixed if fixed > 0 else max(app.init_batch_size, app.min_local_bsz * r)
            a, s = split_batch(np.ceil(batch / r - EPS), r, app.init_batch_size, top)
            atomic, steps = int(a), int(s)
        cap = app.max_local_bsz_of_gpus(r) if limits else None
        atomic = atomic if cap is None else min(atomic, int(cap))
        return min(atomic, int(app.max_batch_size / (r * (steps + 1)))), steps

    def batch_model(self, job: int, gpu_type: str | None = None) -> np.ndarray | None:
        """The step-time model ``job`` predicts with on ``gpu_type``: the application's fitted model
        once the job has run, or (``observed``) its own model there; None before that."""
        if self.observed is not None:
            return self.observed.theta(job, gpu_type)
        return self.oracle.model_theta(self.oracle_model(job), gpu_type) if self.started[job] else None

    def measured_rate(self, job: int, counts: tuple[int, ...], epoch: int,
                      gpu_type: str | None = None) -> tuple[float, float]:
        """(progress per second, global batch) of ``job`` on placement ``counts`` (of ``gpu_type``)
        in ``epoch``, times the oracle's calibration factor."""
        return self._measure(job, counts, epoch, gpu_type)[:2]

    def _measure(self, job: int, counts: tuple[int, ...], epoch: int, gpu_type) -> tuple[float, float, tuple]:
        """(progress per second, global batch, what the job observes there: (GPU type, nodes, GPUs,
        atomic batch, step time, sync time))."""
        model = self.oracle_model(job)
        app = self.oracle.app(model, gpu_type)
        r, n = sum(counts), len(counts)
        atomic, steps = self.config(job, n, r, gpu_type, counts)
        batch = r * atomic * (steps + 1)
        sqr, var = app.grad_stats(batch, epoch)
        g = gain(batch, app.init_batch_size, sqr, var)
        step, sync = self.step_sync(model, gpu_type, counts, atomic)
        rate = float(g) * self.oracle.calibration(model) / (step + steps * (step - sync))
        return rate, float(batch), (gpu_type, n, r, atomic, step, sync)

    def step_sync(self, model: int, gpu_type, counts: tuple[int, ...], atomic: int) -> tuple[float, float]:
        """(step, sync) seconds of one atomic step: the profile's; where a placement lies outside
        the profile's measured placements (Sia's per-type profiles reach fewer nodes than their
        configurations), the fitted model of that type, sync = step - compute
        (:data:`MODEL_FALLBACK`)."""
        app = self.oracle.app(model, gpu_type)
        try:
            step, sync = app.step_times(counts, atomic)
        except TraceError:
            if not (MODEL_FALLBACK and self.oracle.typed):
                raise
            theta = self.oracle.model_theta(model, gpu_type)
            step = float(pollux_iter_time(theta, atomic, len(counts), sum(counts), 0))
            return step, step - float(theta[0] + theta[1] * atomic)
        return float(step), float(sync)

    def _rate_and_scale(self, job: int, counts: tuple[int, ...], epoch: int,
                        types: tuple = (None,)) -> tuple[float, float, float, tuple]:
        """(measured rate, global batch, rate / oracle rate, observation), memoized per job while
        its placement, GPU types, epoch, last statistics and model stay the same.  A placement over
        several GPU types runs at its slowest type's rate."""
        key = (counts, types, epoch, float(self.stat_batch[job]), int(self.stat_epoch[job]),
               bool(self.started[job]), self._model_version(job, types))
        hit = self._memo.get(job)
        if hit is not None and hit[0] == key:
            return hit[1]
        rate, batch, obs = min((self._measure(job, counts, epoch, t) for t in types), key=lambda m: m[0])
        base = self.oracle.rates(np.array([self._model[job]]), np.array([sum(counts)]), np.array([len(counts)]))[0]
        out = (rate, batch, rate / base, obs)
        self._memo[job] = (key, out)
        return out

    def _segment_rate(self, job: int, counts: tuple[int, ...], epoch: int, types: tuple,
                      segment_begins: bool) -> tuple[float, float, float, tuple]:
        """:meth:`_rate_and_scale`; with ``batch_at_segments``, the job's configuration and
        measurement of its current segment unless a new one begins (``segment_begins``: it moved,
        entered a new epoch or a round begins)."""
        if not self.batch_at_segments:
            return self._rate_and_scale(job, counts, epoch, types)
        held = self._segment.get(job)
        if segment_begins or held is None or held[0] != (counts, types):
            held = ((counts, types), self._rate_and_scale(job, counts, epoch, types))
            self._segment[job] = held
        return held[1]

    def _model_version(self, job: int, types: tuple) -> tuple:
        """What the job's observed models on ``types`` were fitted on (() without them)."""
        if self.observed is None:
            return ()
        return tuple(self.observed.count(job, t) for t in types)

    def _types(self, state: SchedState, plan: Plan, i: int) -> tuple:
        """GPU types of job ``i``'s planned nodes (``(None,)`` where the oracle is untyped)."""
        if not self.oracle.typed:
            return (None,)
        nodes = plan.nodes[int(plan.indptr[i]):int(plan.indptr[i + 1])]
        names = state.cluster.gpu_types
        return tuple(sorted({names[t] for t in state.cluster.node_type[nodes]}))

    def _note_running(self, running: dict[int, tuple], now: float) -> None:
        """The configurations placed jobs run from now on (from the end of a restart delay); a
        job keeping its configuration keeps its start, a job without GPUs drops out."""
        kept = {}
        for j, obs in running.items():
            old = self._running.get(j)
            kept[j] = old if old is not None and old[0] == obs else [obs, max(now, self.resume_at[j]), False]
        self._running = kept

    # -- the plan -----------------------------------------------------------
    def note_allocation_order(self, job: int, counts: tuple[int, ...]) -> None:
        """The GPUs per node of ``job``'s new placement in the order the policy took its nodes
        (the plan lists them by node); its step times read the profile row of that sequence, as
        the authors' allocation lists do.  Without a note, node order."""
        self._taken[job] = tuple(int(c) for c in counts if c)

    def begin(self, state: SchedState) -> np.ndarray:
        """Start a decision: record what running jobs measured since the last one (statistics,
        GPU counts); returns the active jobs' epochs."""
        self.observe(state)
        epochs = self.epochs(state)
        epochs.flags.writeable = False                  # finish reads them again
        self._begun = (state, epochs)
        return epochs

    def finish(self, state: SchedState, plan: Plan, step: tuple[float, float] | None = None) -> Plan:
        """``plan`` with the rate scales of measured goodput and a wakeup at the next epoch end;
        updates the per-job memory (restarts, restart delays, configurations).  ``step``: the
        (start, end) of the policy's current round, for ``whole_second_epochs``."""
        ids, k = state.active, state.active.shape[0]
        begun, self._begun = self._begun, None
        epoch = begun[1] if begun is not None and begun[0] is state else self.epochs(state)
        prog = state.jobs.work[ids] - state.remaining
        scale = np.ones(k)
        slow = (1.0 - self.oracle.interference * interfered_jobs(plan.indptr, plan.nodes, plan.counts)
                if self.oracle.interference else np.ones(k))
        rounding = self.whole_second_epochs and step is not None
        round_begins = step is not None and abs(state.now - step[0]) <= 1e-9 * max(1.0, abs(step[0]))
        wake = np.inf
        running: dict[int, tuple] = {}
        kept = _keeps_placement(state, plan)
        for i in range(k):
            j = int(ids[i])
            held = self._held(state, plan, i, j, kept)
            if held is None:
                continue
            new, types, moved = held
            begins = moved or epoch[i] != self.cur_epoch[j] or round_begins   # a new segment
            rate, batch, scale[i], obs = self._segment_rate(j, new, int(epoch[i]), types, begins)
            rate, scale[i] = rate * slow[i], scale[i] * slow[i]
            running[j] = obs
            self.cur_batch[j], self.cur_epoch[j] = batch, epoch[i]
            starts = self.oracle.app(state.jobs.model[j]).epoch_progress
            if epoch[i] + 1 >= starts.shape[0]:
                continue
            begin, left = max(state.now, self.resume_at[j]), starts[epoch[i] + 1] - prog[i]
            end = begin + left / rate
            if rounding:
                end, stretch = self._whole_second_end(j, begin, left, rate, step[1], begins)
                scale[i] *= stretch
            wake = min(wake, end)
        self._taken = {}
        if self.observed is not None:
            self._note_running(running, state.now)
        wakeup = plan.wakeup
        if np.isfinite(wake):
            wakeup = wake if wakeup is None else min(wakeup, wake)
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup, scale)

    def _held(self, state: SchedState, plan: Plan, i: int, j: int, kept: bool) -> tuple | None:
        """(GPUs per node in allocation order, GPU types, moved) of job ``i`` (id ``j``) under
        ``plan``, None without GPUs; a move starts a restart delay.  ``kept``: the plan is the
        state's own placement (a decision between rounds), so no job moves and each keeps what
        it was given when it last moved."""
        if kept and j in self._held_types:
            return (self.alloc_counts[j], self._held_types[j], False) if state.ngpu[i] > 0 else None
        new = placement_counts(plan.indptr, plan.nodes, plan.counts, i)
        if not new:
            return None
        moved = _moved(state, plan, i)
        if moved:
            charged = self.restarts[j] >= 0 or self.first_start_delay
            self.resume_at[j] = state.now + (state.jobs.restart_delay[j] if charged else 0.0)
            self.restarts[j] += 1
            self.alloc_counts[j] = self._taken.get(j, new)
        types = self._types(state, plan, i)
        if j in self.alloc_counts:
            self._held_types[j] = types
        return self.alloc_counts.get(j, new), types, moved

    def _whole_second_end(self, j: int, begin: float, left: float, rate: float, step_end: float,
                          re_round: bool) -> tuple[float, float]:
        """(end, rate factor) of job ``j``'s epoch with whole-second epochs: the end re-rounded
        (``rounded_epoch_end``) where ``re_round`` (a step begins, the job moved or entered a new
        epoch), else the end rounded before; unrounded (factor 1) while the step ends first.  The
        factor stretches the rate so that the epoch's ``left`` progress ends at the rounded end."""
        if re_round:
            self.epoch_end[j] = rounded_epoch_end(begin, left, rate, step_end)
        if not np.isfinite(self.epoch_end[j]):
            return begin + left / rate, 1.0
        end = max(self.epoch_end[j], begin + MIN_EPOCH_S)
        return end, (left / rate) / (end - begin)


def rounded_epoch_end(begin: float, left: float, rate: float, step_end: float) -> float:
    """When an epoch with ``left`` progress to go at ``rate`` from ``begin`` ends in the authors'
    simulators (``Job.step``): ``begin`` + the whole seconds it takes (``round``, half to even) if
    it ends within the step (``progress + goodput x seconds >= next_progress``), else NaN (the
    step ends first and the epoch's time is not rounded in it)."""
    seconds = step_end - begin
    if seconds <= 0 or left > rate * seconds:
        return np.nan
    return begin + float(round(float(left / rate)))


def interfered_jobs(indptr, nodes, counts) -> np.ndarray:
    """bool per job of a CSR placement: the job is distributed (GPUs on more than one node) and
    one of its nodes hosts two or more distributed jobs (the Pollux simulator's
    ``interfere_nodes``)."""
    indptr = np.asarray(indptr, np.int64)
    k = indptr.shape[0] - 1
    nodes, counts = np.asarray(nodes, np.int64), np.asarray(counts, np.int64)
    job = np.repeat(np.arange(k), np.diff(indptr))
    used = counts > 0
    job, nodes = job[used], nodes[used]
    pairs = np.unique(np.stack([job, nodes]), axis=1) if job.size else np.zeros((2, 0), np.int64)
    spread = np.bincount(pairs[0], minlength=k) > 1
    on_node = pairs[1][spread[pairs[0]]]
    crowded = np.bincount(on_node, minlength=int(nodes.max(initial=-1)) + 1) > 1
    hit = np.zeros(k, bool)
    np.logical_or.at(hit, pairs[0], crowded[pairs[1]] & spread[pairs[0]])
    return hit


def _keeps_placement(state: SchedState, plan: Plan) -> bool:
    """``plan`` is the state's own placement arrays (a policy that keeps every job where it is)."""
    return (plan.indptr is state.pl_indptr and plan.nodes is state.pl_nodes
            and plan.counts is state.pl_counts)


def _pairs(indptr, nodes, counts, i: int) -> list[tuple[int, int]]:
    s = slice(int(indptr[i]), int(indptr[i + 1]))
    return sorted((int(a), int(b)) for a, b in zip(nodes[s], counts[s]) if b)


def _moved(state: SchedState, plan: Plan, i: int) -> bool:
    """Does job ``i`` get a placement other than the one it holds (the engine then restarts it)?"""
    return _pairs(state.pl_indptr, state.pl_nodes, state.pl_counts, i) != \
        _pairs(plan.indptr, plan.nodes, plan.counts, i)
