"""Entropy-guided hierarchical scheduling (EGHS; paper 1), second design (issue 16; every
formula ours [I], docs/eghs.md).

Decisions read observations only (:class:`sim.learning.observation.LearningObservation` in
``SchedState.learning``); the learning truth lives in the simulator (:mod:`sim.learning.world`).

**Macro level** (shared by ``eghs`` and its fair twin ``eghs-unaware``), every decision:

* predicted remaining work ``R_j`` (reference steps): EGHS fits the observed entropy decay
  (:class:`sim.learning.progress_estimate.ProgressEstimator`, predictor ``"entropy"``); the
  twin uses the user's budget (``"budget"``).  In runs without learning observations every
  job's work is visible and ``R_j`` is the engine's remaining work;
* order: ascending predicted remaining GPU-seconds at the requested size, ``R_j demand_j /
  thr_j(demand_j)`` (SRPT on GPU time);
* admission and water-filling (:mod:`sim.policies.elastic`): GPUs go to the largest marginal
  goodput per remaining work, ``(good_j(n') - good_j(n)) / (n' - n) / R_j`` with ``good_j(n)
  = thr_j(n) EFF_j(n b_j)`` (throughput x statistical efficiency at the measured noise
  scale; 1 without observations), times Pollux's restart factor; no utility displacement;
* placement: consolidated first fit, preemptive; defragmentation on (``sim.defrag``).

**Micro level** (``eghs`` only), at every decision at which a job produced entropy samples:
the batched micro controller (:func:`sim.learning._kernels.micro_update_batch`: EMA, power
weights, projection onto ``[w_min, w_max]`` with the rate limit) turns the per-worker
entropies into sampling shares over the workers' data partitions, returned as
``Plan.sampling``.  Shards and batches stay equal, so a step is never slower; no extra
wakeups.  A resize restarts the controller at uniform shares.

``eghs-unaware-oracle`` is the first design's clairvoyant baseline, kept for reference: it
orders by ``thr_j(1) / remaining_j`` with the engine's true remaining work (it is
``clairvoyant``: the only policy allowed the truth), admits by the utility ``thr(n+1)/thr(n)
(1 + wait / T_age)`` against ``theta_adm`` x the running jobs' median, and water-fills by
throughput gain.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..learning._kernels import micro_update_batch
from ..learning.progress_estimate import EstimatorConfig, ProgressEstimator
from ..learning.spec import DynamicsConfig
from ..learning.stats_efficiency import efficiency
from ..placement import PLACEMENT_MODES, greedy_place, restarted_jobs, type_inputs, type_room
from ..state import ARRIVAL, COMPLETION, Plan, SchedState
from .base import Policy, stable_order
from .elastic import admit_fill, restart_factor, throughput_table
from .registry import register


class _ElasticPolicy(Policy):
    """What the EGHS family shares: per-run throughput table, restart counts, quotas and the
    preemptive consolidated placement."""

    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    round_s = 60.0
    preemptive = True
    blocking = False
    defragment = True

    def __init__(self, placement: str = "consolidated", restart_floor: float = 0.05,
                 defragment: bool = True):
        super().__init__(placement)
        if not 0 < restart_floor <= 1:
            raise ConfigError(f"policy {self.name}: restart_floor must be in (0, 1]")
        self.restart_floor = float(restart_floor)
        self.defragment = bool(defragment)
        self._jobs = None
        self._now = -np.inf

    def _ensure(self, state: SchedState) -> bool:
        """Set up per-run arrays on a new run; True if it was one."""
        if self._jobs is state.jobs and state.now >= self._now:
            return False
        if state.oracle is None:
            raise ConfigError(f"policy {self.name} needs the throughput oracle in its state")
        jobs = state.jobs
        self._jobs = jobs
        self.restarts = np.zeros(len(jobs), np.int64)
        self._thr = throughput_table(state.oracle, jobs.model, jobs.gpus_max, state.cluster)
        return True

    def _quotas(self, state, order, table, gainw, util=None, theta_med=np.inf) -> np.ndarray:
        ids, jobs = state.active, state.jobs
        age = np.maximum(state.now - jobs.arrival[ids], 0.0)
        rfac = restart_factor(age, self.restarts[ids], jobs.restart_delay[ids], self.restart_floor)
        util = np.zeros(ids.size) if util is None else util
        # a job's GPUs come from one type (sim.placement): never more than its largest type has
        rmax = np.minimum(jobs.gpus_max[ids].astype(np.int64), type_room(state))
        return admit_fill(order, state.ngpu > 0,
                          np.minimum(jobs.gpus_min[ids].astype(np.int64), rmax),
                          rmax, state.ngpu.astype(np.int64),
                          util, theta_med, gainw, table, int(state.cluster.total_gpus), rfac)

    def _place(self, state, order, alloc):
        """Greedy preemptive placement of the quotas; counts the restarts it causes."""
        c = state.cluster
        placed = order[alloc[order] > 0]
        allowed, keys = type_inputs(state)
        indptr, nodes, counts = greedy_place(
            np.ascontiguousarray(placed, np.int64), alloc.astype(np.int32), state.pl_indptr,
            state.pl_nodes, state.pl_counts, c.node_gpus, c.node_type, len(c.gpu_types),
            PLACEMENT_MODES[self.placement], True, False, allowed, keys)
        lens = np.diff(indptr)
        after = np.bincount(np.repeat(np.arange(lens.size), lens), weights=counts,
                            minlength=lens.size).astype(np.int64)
        self.restarts[state.active[restarted_jobs(state, indptr, nodes, counts, after)]] += 1
        return indptr, nodes, counts, after

    def params(self) -> dict:
        return {**super().params(), "restart_floor": self.restart_floor,
                "defragment": self.defragment}


@register
class EGHS(_ElasticPolicy):
    name = "eghs"
    description = ("entropy-guided hierarchical scheduling (second design): SRPT on GPU time with "
                   "remaining work predicted from the observed entropy decay, water-filling by "
                   "goodput per remaining work, restart cost, defragmentation; micro level tilts "
                   "data sampling by per-worker entropy (never slows a step)")
    MICRO: ClassVar[bool] = True
    MACRO: ClassVar[bool] = True

    def __init__(self, placement: str = "consolidated", micro: bool | None = None,
                 macro: bool | None = None, dynamics: dict | None = None,
                 estimator: dict | None = None, restart_floor: float = 0.05,
                 defragment: bool = True):
        super().__init__(placement, restart_floor, defragment)
        self.micro = self.MICRO if micro is None else bool(micro)
        self.macro = self.MACRO if macro is None else bool(macro)
        self.dyn = DynamicsConfig.from_params(dynamics)
        self.dynamics_params = dict(dynamics or {})
        self.estimator_params = dict(estimator or {})
        self.estimator = ProgressEstimator("entropy" if self.macro else "budget",
                                           EstimatorConfig.from_params(estimator))
        self.micro_updates = 0

    def _ensure(self, state: SchedState) -> bool:
        if not super()._ensure(state):
            return False
        n = len(state.jobs)
        kc = int(max(state.jobs.gpus_max.max() if n else 1, 1))
        self.estimator.reset(n)
        self._k = np.zeros(n, np.int64)
        self._ubar = np.zeros((n, kc))
        self._has_ubar = np.zeros(n, bool)
        self._w = np.zeros((n, kc))
        self._b = np.zeros((n, kc), np.int64)
        self._U = np.full(n, np.nan)
        self.micro_updates = 0
        return True

    def schedule(self, state: SchedState) -> Plan:
        self._ensure(state)
        self._now = state.now
        ids, jobs, obs = state.active, state.jobs, state.learning
        thr = self._thr[ids]
        rows = np.arange(ids.size)
        demand = jobs.demand[ids].astype(np.int64)
        if obs is None:
            rem, good = np.maximum(state.remaining, 1e-12), thr
        else:
            self.estimator.update(ids, obs)
            rem = self.estimator.remaining(ids, obs)
            good = thr * _efficiency_table(obs, demand, thr.shape[1])
        with np.errstate(divide="ignore"):
            gpu_s = np.where(thr[rows, demand] > 0, rem * demand / thr[rows, demand], np.inf)
        order = stable_order(jobs.arrival[ids], gpu_s)
        alloc = self._quotas(state, order, good, good[:, 1] / rem)
        indptr, nodes, counts, after = self._place(state, order, alloc)
        sampling = self._micro(ids, obs, after) if self.micro and obs is not None else None
        return Plan(indptr, nodes, counts, sampling=sampling)

    def _micro(self, ids, obs, after) -> np.ndarray:
        """Fold fresh entropy samples into the controller; re-shard resized jobs; returns the
        sampling shares ``[n_active, K_cap]``."""
        kc = self._w.shape[1]
        upd = obs.fresh & (obs.n_workers == self._k[ids]) & (self._k[ids] > 0)
        if upd.any():
            j = ids[upd]
            K = self._k[j]
            B = np.rint(K * obs.local_batch[upd]).astype(np.int64)
            U, _, _ = micro_update_batch(j, obs.u[upd][:, :kc], self._ubar, self._has_ubar, self._w,
                                         self._b, K, B, self.dyn, True, self._U[j])
            self._U[j] = U
            self.micro_updates += int(j.size)
        resized = (after > 0) & (after != self._k[ids])
        if resized.any():
            j, kk = ids[resized], after[resized]
            cols = np.arange(kc)[None, :] < kk[:, None]
            known = ~np.isnan(self._U[j])
            self._ubar[j] = np.where(cols & known[:, None], np.nan_to_num(self._U[j])[:, None], 0.0)
            self._has_ubar[j] = known
            self._w[j] = np.where(cols, 1.0 / kk[:, None], 0.0)
        self._k[ids] = after
        return self._w[ids]

    def params(self) -> dict:
        return {**super().params(), "micro": self.micro, "macro": self.macro,
                "dynamics": dict(self.dynamics_params), "estimator": dict(self.estimator_params)}


def _efficiency_table(obs, demand, width) -> np.ndarray:
    """EFF(n b) relative to the requested batch at the measured noise scale, n = 0..width-1."""
    n = np.arange(width)[None, :]
    M0 = demand * obs.local_batch
    return efficiency(np.maximum(n, 1) * obs.local_batch[:, None], M0[:, None], obs.noise_scale[:, None])


@register
class EGHSUnaware(EGHS):
    name = "eghs-unaware"
    description = ("fair learning-unaware twin of EGHS: the same macro level with the remaining "
                   "work predicted from the user's budget, no micro level")
    MICRO = False
    MACRO = False

    def __init__(self, placement: str = "consolidated", **kwargs):
        for k in ("micro", "macro"):
            if kwargs.get(k):
                raise ConfigError(f"policy {self.name}: {k} cannot be switched on (use 'eghs')")
            kwargs.pop(k, None)
        super().__init__(placement, micro=False, macro=False, **kwargs)


@register
class EGHSUnawareOracle(_ElasticPolicy):
    name = "eghs-unaware-oracle"
    description = ("the first design's clairvoyant EGHS baseline (reference only): SRPT on the "
                   "true remaining work, utility admission, water-filling by throughput gain")
    #: reads the simulator's truth (remaining work of time-to-accuracy jobs)
    clairvoyant = True

    def __init__(self, placement: str = "consolidated", T_age: float = 3600.0,
                 theta_adm: float = 1.0, restart_floor: float = 0.05, defragment: bool = True):
        super().__init__(placement, restart_floor, defragment)
        if not (np.isfinite(T_age) and T_age > 0 and np.isfinite(theta_adm)):
            raise ConfigError(f"policy {self.name}: T_age must be > 0 and theta_adm finite")
        self.T_age, self.theta_adm = float(T_age), float(theta_adm)

    def schedule(self, state: SchedState) -> Plan:
        self._ensure(state)
        self._now = state.now
        ids, jobs = state.active, state.jobs
        thr = self._thr[ids]
        order = stable_order(jobs.arrival[ids], -thr[:, 1] / np.maximum(state.remaining, 1e-12))
        running = state.ngpu > 0
        util = self._utility(state, thr)
        theta = self.theta_adm * float(np.median(util[running])) if running.any() else np.inf
        alloc = self._quotas(state, order, thr, np.ones(ids.size), util, theta)
        indptr, nodes, counts, _ = self._place(state, order, alloc)
        return Plan(indptr, nodes, counts)

    def _utility(self, state, thr) -> np.ndarray:
        """``thr(n+1) / thr(n) * (1 + wait / T_age)`` at the GPUs held (the minimum if none)."""
        ids = state.active
        n = np.maximum(state.ngpu.astype(np.int64), state.jobs.gpus_min[ids].astype(np.int64))
        n = np.minimum(n, thr.shape[1] - 2)
        rows = np.arange(ids.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.where(thr[rows, n] > 0, thr[rows, n + 1] / thr[rows, n], 1.0)
        wait = np.maximum(state.now - state.jobs.arrival[ids] - state.run_s, 0.0)
        return speed * (1.0 + wait / self.T_age)

    def params(self) -> dict:
        return {**super().params(), "T_age": self.T_age, "theta_adm": self.theta_adm}
