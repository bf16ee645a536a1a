"""Entropy-guided hierarchical scheduling (EGHS; paper 1, algorithms.md §2.2; every formula [I]).

One entropy signal drives two levels.

**Micro** (per job, at its epoch boundaries; :mod:`sim.learning.dynamics`): per-worker
normalized entropy -> EMA -> bounded, rate-limited weights -> uncertainty-aware shards,
fixed-budget batch reallocation and LR modulation.  Their cost (stragglers: step time =
slowest worker + sync) and gain (samples spent on harder shards) reach the engine through
``Plan.rate_scale``, with the statistical efficiency of the job's batch for
time-to-accuracy jobs.  The policy asks to be woken at the next estimated epoch boundary
(``Plan.wakeup``, at least ``micro_min_interval_s`` ahead).

**Macro** (every decision):

* job uncertainty ``Ubar_j`` = the micro level's ``sum_k w_k ubar_k`` (``H0`` before the
  job's first epoch); the learning-unaware baseline uses ``Ubar_j := 1``;
* utility ``U_j = Ubar_j^alpha_U * SPEEDUP_j(n_j + 1 vs n_j) * (1 + wait_j / T_age)`` with
  ``SPEEDUP(n+1 vs n) = thr(n+1) / thr(n)``, ``n_j`` the GPUs held (its minimum if none),
  ``wait_j`` the time it spent without GPUs;
* ordering (``ordering="usrpt"``): descending ``Ubar_j * thr_j(1) / remaining_j`` (an
  uncertainty-weighted SRPT; ``remaining_j`` is the engine's remaining work, so the
  baseline is a strong, oracle-informed SRPT); ``"utility"``: descending ``U_j``;
* admission, in that order: a running job stays if its minimum still fits; a waiting job is
  admitted if its minimum fits in the GPUs not reserved by the minimums of the admitted
  jobs and of the running jobs not yet visited, or if ``U_j >= theta_adm *
  median(U of running jobs)`` and its minimum fits next to the admitted ones (it may then
  displace lower-ranked running jobs);
* quotas: greedy water-filling from each admitted job's minimum ``R_min``: GPUs go to the
  largest ``Ubar_j^alpha_U * (thr_j(n') - thr_j(n)) / (n' - n) / thr_j(1)``, times the
  restart factor below, until GPUs run out or no gain is positive; capped at ``R_max``.
  ``n'`` is the next vertex of the upper concave envelope of ``thr_j`` above ``n`` (one GPU
  at a time where thr is concave; a jump over a dip, e.g. the LM table's 2 -> 8 GPUs; a
  jump that does not fit leaves the job where it is);
* restart cost (Pollux's factor, algorithms.md §5.5): ``r_j = max(r_min, (age_j -
  restarts_j * delta_j) / (age_j + delta_j))`` with ``delta_j`` the job's restart delay;
  for a running job at ``c`` GPUs, steps beyond ``c`` are multiplied by ``r_j`` and steps
  back up to ``c`` divided by it (moving away from the current size is a restart);
* placement: consolidated first fit on the fewest nodes (the greedy placer), preemptive.

Timers: the engine keeps every timer a plan asks for, so the policy asks for an epoch
wakeup only when none of its earlier requests is still ahead of it.

``thr_j(n)`` is the throughput oracle's rate at n GPUs of the cluster's first GPU type on
the fewest nodes (its spread rate beyond one node) when an ``oracle`` is given, else the
fitted step-time model of the job's profile (``n b / (alpha_c + beta_c b + T_sync(n))``).

Ablation switches: ``micro`` (the micro controls) and ``macro`` (the entropy term of the
macro level).  ``eghs-unaware`` is the learning-unaware baseline: the same machinery with
both off.  The learning facts come from ``learning`` (a
:class:`sim.learning.dynamics.LearningSpec`); without one every job is a time-to-accuracy
job of the default profile with quality 0.95.
"""
from __future__ import annotations

import heapq
from typing import ClassVar

import numpy as np
from numba import njit

from ..errors import ConfigError
from ..learning.dynamics import DynamicsConfig, LearningSpec, LearningState
from ..placement import PLACEMENT_MODES, changed_jobs, greedy_place
from ..state import ARRIVAL, COMPLETION, Plan, SchedState
from .base import Policy, stable_order
from .registry import register

_ORDERINGS = ("usrpt", "utility")


@njit(cache=True)
def _next_size(thr, i, n, rmax):
    """The next vertex of the upper concave envelope of thr[i, n..rmax] after n (the size
    a job grows to next: water-filling walks through throughput dips, e.g. a table whose
    rate at 3-4 GPUs is below that at 2 but far above at 8).  Returns (size, gain per GPU)."""
    best = -np.inf
    nxt = n
    for m in range(n + 1, rmax + 1):
        s = (thr[i, m] - thr[i, n]) / (m - n)
        if s > best:           # ties: the smaller size (one GPU at a time where thr is linear)
            best = s
            nxt = m
    return nxt, best


@njit(cache=True)
def _admit_fill(order, running, rmin, rmax, cur, U, theta_med, gainw, thr, total, rfac):
    """Admission and water-filling (module docstring).  Returns GPUs per active job."""
    n = rmin.shape[0]
    alloc = np.zeros(n, np.int64)
    admitted = np.zeros(n, np.bool_)
    reserved = 0
    for i in range(n):
        if running[i]:
            reserved += rmin[i]
    used = 0
    for p in range(order.shape[0]):
        i = order[p]
        if running[i]:
            reserved -= rmin[i]
            if used + rmin[i] <= total:
                admitted[i] = True
        else:
            free = total - used - reserved
            if rmin[i] <= free or (U[i] >= theta_med and used + rmin[i] <= total):
                admitted[i] = True
        if admitted[i]:
            alloc[i] = rmin[i]
            used += rmin[i]
    left = total - used
    heap = [(0.0, np.int64(0), np.int64(0))]
    heap.pop()
    for p in range(order.shape[0]):
        i = order[p]
        if admitted[i] and alloc[i] < rmax[i]:
            m, g = _step_gain(i, alloc[i], rmax[i], running, cur, gainw, thr, rfac)
            if g > 0:
                heapq.heappush(heap, (-g, p, m))
    while left > 0 and len(heap) > 0:
        negg, p, m = heapq.heappop(heap)
        i = order[p]
        need = m - alloc[i]
        if need > left:
            continue           # the next size does not fit: the job stays where it is
        alloc[i] = m
        left -= need
        if alloc[i] < rmax[i]:
            m2, g = _step_gain(i, alloc[i], rmax[i], running, cur, gainw, thr, rfac)
            if g > 0:
                heapq.heappush(heap, (-g, p, m2))
    return alloc


@njit(cache=True)
def _step_gain(i, n, rmax, running, cur, gainw, thr, rfac):
    """(next size, weighted gain per GPU) of growing job i from n GPUs."""
    t1 = thr[i, 1]
    if t1 <= 0:
        return n, 0.0
    m, s = _next_size(thr, i, n, rmax)
    g = gainw[i] * s / t1
    if running[i]:
        if m > cur[i]:
            g *= rfac[i]
        else:
            g /= rfac[i]
    return m, g


@register
class EGHS(Policy):
    name = "eghs"
    description = ("entropy-guided hierarchical scheduling: entropy-weighted SRPT order, "
                   "admission and elastic water-filled GPU quotas with restart cost; micro level "
                   "(sharding, batch reallocation, LR) at epoch boundaries via rate_scale")
    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    round_s = 60.0
    preemptive = True
    blocking = False
    #: defaults of the ablation switches (subclasses fix them)
    MICRO: ClassVar[bool] = True
    MACRO: ClassVar[bool] = True

    def __init__(self, placement: str = "consolidated", micro: bool | None = None,
                 macro: bool | None = None, learning: LearningSpec | None = None, oracle=None,
                 dynamics: dict | None = None, alpha_U: float = 1.0, T_age: float = 3600.0,
                 theta_adm: float = 1.0, ordering: str = "usrpt", restart_floor: float = 0.05,
                 micro_min_interval_s: float = 60.0, epoch_wakeups: bool = True):
        super().__init__(placement)
        self.micro = self.MICRO if micro is None else bool(micro)
        self.macro = self.MACRO if macro is None else bool(macro)
        if learning is not None and not isinstance(learning, LearningSpec):
            raise ConfigError(f"policy {self.name}: learning must be a LearningSpec")
        self.learning_spec = learning
        self.oracle = oracle
        self.dyn = DynamicsConfig.from_params(dynamics)
        self.dynamics_params = dict(dynamics or {})
        for key, val, lo in (("alpha_U", alpha_U, None), ("T_age", T_age, 0.0),
                             ("theta_adm", theta_adm, None), ("micro_min_interval_s",
                                                              micro_min_interval_s, -1.0)):
            try:
                v = float(val)
            except (TypeError, ValueError):
                raise ConfigError(f"policy {self.name}: {key} must be a number, got {val!r}") from None
            if not np.isfinite(v) or (lo is not None and v <= lo):
                raise ConfigError(f"policy {self.name}: {key}={val!r} is out of range")
        self.alpha_U, self.T_age, self.theta_adm = float(alpha_U), float(T_age), float(theta_adm)
        if ordering not in _ORDERINGS:
            raise ConfigError(f"policy {self.name}: ordering must be one of {_ORDERINGS}, got {ordering!r}")
        self.ordering = ordering
        if not 0 < restart_floor <= 1:
            raise ConfigError(f"policy {self.name}: restart_floor must be in (0, 1]")
        self.restart_floor = float(restart_floor)
        self.micro_min_interval_s = float(micro_min_interval_s)
        self.epoch_wakeups = bool(epoch_wakeups)
        self._jobs = None
        self._now = -np.inf
        self.learning: LearningState | None = None

    # ---------------------------------------------------------------- per run
    def _ensure(self, state: SchedState) -> None:
        if self._jobs is state.jobs and state.now >= self._now:
            return
        jobs = state.jobs
        n = len(jobs)
        spec = self.learning_spec
        n_models = int(jobs.model.max()) + 1 if n else 1
        if spec is None:
            spec = LearningSpec.build(n, [f"m{i}" for i in range(n_models)], jobs.gpus_max,
                                      mode="tta", quality=0.95, sigma_d=self.dyn.sigma_d)
        self.learning = LearningState(spec, jobs, self.dyn, self.micro)
        if spec.trace is not None:
            spec.trace.bind(spec.model_names, jobs.model, np.arange(n))
        self._jobs = jobs
        self.restarts = np.zeros(n, np.int64)
        self._thr = self._throughput_table(jobs, spec, state.cluster)
        self._t_last = np.full(n, np.nan)
        self._s_last = np.zeros(n)
        self._pending_wake = -np.inf      # the earliest timer we asked for that is still ahead

    def _throughput_table(self, jobs, spec, cluster) -> np.ndarray:
        """thr[job, n] for n = 0..K_cap+1: iterations/s at n GPUs of the cluster's first GPU
        type on the fewest nodes (``ceil(n / largest node)``; the oracle's spread rate beyond
        one node), speed 1."""
        kc = int(max(jobs.gpus_max.max() if len(jobs) else 1, 1)) + 1
        models = np.arange(int(jobs.model.max()) + 1 if len(jobs) else 1)
        ns = np.arange(kc + 1)
        if self.oracle is not None:
            m, k = np.meshgrid(models, ns, indexing="ij")
            per_node = int(np.max(cluster.node_gpus))
            nn = np.maximum(1, -(-k // per_node))
            tab = np.asarray(self.oracle.rates(m.ravel(), k.ravel(), nn.ravel(),
                                               np.ones(m.size, np.int64), np.ones(m.size),
                                               tuple(cluster.gpu_types)), float).reshape(m.shape)
        else:
            a = spec.surrogate.arrays()
            prof = spec.profile[models] if len(spec.profile) else np.zeros(models.size, np.int64)
            b = 32.0
            sync = np.where(ns[None, :] <= 1, 0.0,
                            np.where(ns[None, :] <= 8, a["sync_intra"][prof][:, None],
                                     a["sync_inter"][prof][:, None]))
            tab = ns[None, :] * b / (a["alpha_c"][prof][:, None] + a["beta_c"][prof][:, None] * b + sync)
        tab[:, 0] = 0.0
        return np.ascontiguousarray(tab[jobs.model])

    # ---------------------------------------------------------------- protocol
    def order(self, state: SchedState) -> np.ndarray:
        self._ensure(state)
        ids = state.active
        ubar = self._ubar(ids)
        key = self._order_key(state, ubar)
        return stable_order(state.jobs.arrival[ids], -key)

    def _ubar(self, ids) -> np.ndarray:
        if not self.macro:
            return np.ones(ids.size)
        return self.learning.job_uncertainty(ids)

    def _order_key(self, state, ubar) -> np.ndarray:
        ids = state.active
        thr = self._thr[ids]
        if self.ordering == "usrpt":
            return ubar * thr[:, 1] / np.maximum(state.remaining, 1e-12)
        return self._utility(state, ubar)

    def _utility(self, state, ubar) -> np.ndarray:
        ids = state.active
        thr = self._thr[ids]
        n = np.maximum(state.ngpu.astype(np.int64), state.jobs.gpus_min[ids].astype(np.int64))
        n = np.minimum(n, thr.shape[1] - 2)
        rows = np.arange(ids.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.where(thr[rows, n] > 0, thr[rows, n + 1] / thr[rows, n], 1.0)
        wait = np.maximum(state.now - state.jobs.arrival[ids] - state.run_s, 0.0)
        return ubar ** self.alpha_U * speed * (1.0 + wait / self.T_age)

    def schedule(self, state: SchedState) -> Plan:
        self._ensure(state)
        self._now = state.now
        L = self.learning
        ids = state.active
        jobs = state.jobs
        track = self.micro or self.macro
        if track:
            x = L.observe(state)
        else:
            x = self._observe_light(state)
        ubar = self._ubar(ids)
        key = self._order_key(state, ubar)
        order = stable_order(jobs.arrival[ids], -key)
        running = state.ngpu > 0
        util = self._utility(state, ubar)
        theta_med = self.theta_adm * float(np.median(util[running])) if running.any() else np.inf
        age = np.maximum(state.now - jobs.arrival[ids], 0.0)
        delay = jobs.restart_delay[ids]
        rfac = np.maximum((age - self.restarts[ids] * delay) / (age + delay + 1e-12),
                          self.restart_floor)
        gainw = ubar ** self.alpha_U
        alloc = _admit_fill(order, running, jobs.gpus_min[ids].astype(np.int64),
                            jobs.gpus_max[ids].astype(np.int64), state.ngpu.astype(np.int64),
                            util, theta_med, gainw, self._thr[ids], int(state.cluster.total_gpus),
                            rfac)
        placed_order = order[alloc[order] > 0]
        c = state.cluster
        indptr, nodes, counts = greedy_place(
            np.ascontiguousarray(placed_order, np.int64), alloc.astype(np.int32),
            state.pl_indptr, state.pl_nodes, state.pl_counts, c.node_gpus, c.node_type,
            len(c.gpu_types), PLACEMENT_MODES[self.placement], True, False)
        lens = np.diff(indptr)
        after = np.bincount(np.repeat(np.arange(lens.size), lens), weights=counts,
                            minlength=lens.size).astype(np.int64)
        moved = changed_jobs(state.pl_indptr, state.pl_nodes, state.pl_counts, indptr, nodes, counts)
        self.restarts[ids[moved & running & (after > 0)]] += 1
        scale = L.settle(state, indptr, nodes, counts, after, x)
        wake = self._wakeup(state, after) if self.epoch_wakeups and track else None
        return Plan(indptr, nodes, counts, wake, scale)

    def _observe_light(self, state) -> np.ndarray:
        """Progress only (no epochs, no entropy): the learning-unaware baseline."""
        L = self.learning
        ids = state.active
        x = L.progress(ids, state.remaining)
        L.x_last[ids] = x
        return x

    def _wakeup(self, state, after) -> float | None:
        """Estimated time of the next epoch boundary among running jobs (from the sample rate
        seen since the last decision), at least micro_min_interval_s ahead."""
        L = self.learning
        ids = state.active
        now = state.now
        s = L.samples[ids]
        t_last = self._t_last[ids]
        dt = now - t_last
        rate = np.where((dt > 0) & (state.ngpu > 0), (s - self._s_last[ids]) / np.where(dt > 0, dt, 1.0), 0.0)
        self._t_last[ids] = now
        self._s_last[ids] = s
        run = (after > 0) & (rate > 0)
        if not run.any():
            return None
        left = (L.epoch[ids[run]] + 1) * L.epoch_samples[ids[run]] - s[run]
        t = now + float(np.min(np.maximum(left, 0.0) / rate[run]))
        t = max(t, now + self.micro_min_interval_s) if self.micro_min_interval_s > 0 else \
            max(t, float(np.nextafter(now, np.inf)))
        # the engine keeps every timer: ask only when no earlier one of ours is pending
        if now < self._pending_wake <= t:
            return None
        self._pending_wake = t
        return t

    def params(self) -> dict:
        return {**super().params(), "micro": self.micro, "macro": self.macro,
                "alpha_U": self.alpha_U, "T_age": self.T_age, "theta_adm": self.theta_adm,
                "ordering": self.ordering, "restart_floor": self.restart_floor,
                "micro_min_interval_s": self.micro_min_interval_s,
                "epoch_wakeups": self.epoch_wakeups, "dynamics": dict(self.dynamics_params)}


@register
class EGHSUnaware(EGHS):
    name = "eghs-unaware"
    description = ("learning-unaware baseline of EGHS: the same admission, ordering (SRPT), "
                   "elastic water-filled quotas and restart cost with the entropy term removed "
                   "(Ubar := 1) and micro controls off")
    MICRO = False
    MACRO = False

    def __init__(self, placement: str = "consolidated", **kwargs):
        for k in ("micro", "macro"):
            if kwargs.get(k):
                raise ConfigError(f"policy {self.name}: {k} cannot be switched on (use 'eghs')")
            kwargs.pop(k, None)
        super().__init__(placement, micro=False, macro=False, **kwargs)
