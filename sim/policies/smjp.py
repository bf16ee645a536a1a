"""Sampling-based multi-job placement (paper 2; sim.smjp, docs/smjp.md): ``smjp``, ``smjp-exact``.

At each decision (arrivals and completions; rounds too with ``round_s``) the waiting jobs are
placed at once on the free GPUs; running jobs keep theirs (non-preemptive, ``view = "queued"``).
Jobs are admitted in ``admission`` order ("srpt": least remaining work on their fastest free
workers first; "fifo": by arrival) while their minimum worker counts fit, skipping those that
do not (backfill), at most ``max_jobs`` per decision.  The admitted jobs are then sized within
``[gpus_min, gpus_max]`` (``elastic``; otherwise their requested count) and placed by the
sampling solver (``smjp``) or the exact MILP (``smjp-exact``, small clusters only).

A placement mixes GPU types freely: the engine runs every job this policy places at the rate of
SMJP's latency model (``rate_model``: proportional workload assignment plus ring all-reduce),
not the oracle's slowest-worker rule.  A job whose throughput is 0 on every GPU type, or whose
minimum count exceeds the GPUs of the types it can run on, is a ConfigError; one that cannot be
placed now waits.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..smjp.exact import MAX_PATTERNS, pattern_count, solve_exact
from ..smjp.gradients import BYTES_PER_PARAM, DEFAULT_BATCH, DEFAULT_PARAMETERS
from ..smjp.instance import Instance
from ..smjp.latency import LatencyModel, ProportionalRates
from ..smjp.sampling import SamplingConfig, solve_sampling
from ..state import ARRIVAL, COMPLETION, Plan, SchedState
from . import register
from .base import Policy

ADMISSION = ("srpt", "fifo")


class _SMJPBase(Policy):
    """What both SMJP policies share: admission, the instance, the plan."""

    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    preemptive = False
    view = "queued"
    #: reads the true remaining work (SRPT admission, the JCT model): given it in learning runs too
    clairvoyant = True

    def __init__(self, placement: str = "consolidated", round_s: float | None = None,
                 admission: str = "srpt", elastic: bool = True, max_jobs: int = 128,
                 integer_samples: bool = True, default_params: float = DEFAULT_PARAMETERS,
                 bytes_per_param: float = BYTES_PER_PARAM, default_batch: int = DEFAULT_BATCH):
        super().__init__(placement)
        if admission not in ADMISSION:
            raise ConfigError(f"policy {self.name}: unknown admission {admission!r}; choose from "
                              f"{list(ADMISSION)}")
        if int(max_jobs) < 1:
            raise ConfigError(f"policy {self.name}: max_jobs must be >= 1, got {max_jobs!r}")
        if round_s is not None and not (float(round_s) >= 0 and np.isfinite(float(round_s))):
            raise ConfigError(f"policy {self.name}: round_s must be >= 0 or None, got {round_s!r}")
        self.round_s = None if round_s is None else float(round_s)
        self.admission, self.elastic, self.max_jobs = admission, bool(elastic), int(max_jobs)
        self.latency = LatencyModel(bool(integer_samples), float(default_params),
                                    float(bytes_per_param), int(default_batch))
        self.rate_model = ProportionalRates(self.latency)

    def params(self) -> dict:
        return {**super().params(), "round_s": self.round_s, "admission": self.admission,
                "elastic": self.elastic, "max_jobs": self.max_jobs, **self.latency.params()}

    def solve(self, inst: Instance):
        raise NotImplementedError

    # -- entry point -------------------------------------------------------------------
    def schedule(self, state: SchedState) -> Plan:
        k = state.active.shape[0]
        empty = Plan(np.zeros(k + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
        free_nodes = np.flatnonzero(state.node_free > 0)
        if k == 0 or free_nodes.size == 0:
            return empty
        terms = self._terms(state, free_nodes)
        admitted = self._admit(state, terms)
        while admitted.size:
            sol = self.solve(self._instance(state, terms, admitted, free_nodes))
            if sol is not None:
                return _plan(k, admitted, free_nodes, sol.x)
            admitted = admitted[:-1]              # cannot all be placed: the last one waits
        return empty

    # -- the pieces --------------------------------------------------------------------
    def _terms(self, state: SchedState, free_nodes: np.ndarray) -> dict:
        c, jobs, ids = state.cluster, state.jobs, state.active
        tab = self.latency.tables(state.oracle, c.gpu_types)
        m = jobs.model[ids]
        P, batch, grad = self.latency.job_terms(tab, m, jobs.demand[ids].astype(float))
        per_type = tab.one_gpu[m]                                   # [k, types]
        kmin = (jobs.gpus_min if self.elastic else jobs.demand)[ids].astype(np.int64)
        kmax = (jobs.gpus_max if self.elastic else jobs.demand)[ids].astype(np.int64)
        _check_runnable(self.name, state, per_type, kmin)
        rho = batch[:, None] * per_type[:, c.node_type[free_nodes]] * c.node_speed[free_nodes]
        return {"P": P, "grad": grad, "kmin": kmin, "kmax": kmax, "rho": rho}

    def _admit(self, state: SchedState, t: dict) -> np.ndarray:
        free = state.node_free[state.node_free > 0].astype(np.int64)
        usable = (free[None, :] * (t["rho"] > 0)).sum(axis=1)
        best = t["rho"].max(axis=1)
        with np.errstate(divide="ignore"):     # iterations x P / (kmin x fastest worker)
            demand = state.jobs.demand[state.active]
            key = (state.remaining / demand * t["P"] / (best * t["kmin"]) if self.admission == "srpt"
                   else state.jobs.arrival[state.active])
        order = np.lexsort((state.active, key))
        order = order[usable[order] >= t["kmin"][order]]
        # greedy backfill: take a job when its minimum still fits in what is left
        taken, left = [], int(free.sum())
        for i in order[:max(4 * self.max_jobs, 1)]:
            if t["kmin"][i] <= left and len(taken) < self.max_jobs:
                taken.append(i)
                left -= int(t["kmin"][i])
        return np.asarray(taken, np.int64)

    def _instance(self, state: SchedState, t: dict, adm: np.ndarray, free_nodes) -> Instance:
        c = state.cluster
        free = state.node_free[free_nodes].astype(np.int64)
        demand = state.jobs.demand[state.active[adm]]
        return Instance(remaining=state.remaining[adm] / demand, P=t["P"][adm],
                        grad=t["grad"][adm], kmin=t["kmin"][adm],
                        kmax=np.minimum(t["kmax"][adm], int(free.sum())),
                        wait=state.now - state.jobs.arrival[state.active[adm]],
                        rho=t["rho"][adm], cap=free, intra=c.intra_bw_gbps[free_nodes],
                        inter=c.inter_bw_gbps[free_nodes], model=self.latency)


@register
class SMJP(_SMJPBase):
    name = "smjp"
    description = ("Sampling-based multi-job placement (paper 2): sized, type-mixing placements "
                   "from sampled categories and a matching market; proportional workload "
                   "assignment sets the rates")

    def __init__(self, placement: str = "consolidated", samples: int = 64, theta: float = 0.5,
                 beta_f: float = 0.0, swap_passes: int = 2, refine_top: int = 4, seed: int = 0,
                 repair_passes: int = 1, **common):
        super().__init__(placement, **common)
        self.config = SamplingConfig(int(samples), float(theta), float(beta_f), int(swap_passes),
                                     int(refine_top), int(seed), int(repair_passes))
        self._rng = np.random.default_rng(self.config.seed)

    def solve(self, inst):
        return solve_sampling(inst, self.config, self._rng)

    def params(self) -> dict:
        c = self.config
        return {**super().params(), "samples": c.samples, "theta": c.theta, "beta_f": c.beta_f,
                "swap_passes": c.swap_passes, "refine_top": c.refine_top, "seed": c.seed,
                "repair_passes": c.repair_passes}


@register
class SMJPExact(_SMJPBase):
    name = "smjp-exact"
    description = ("SMJP's exact counterpart: the least-average-JCT placement of the waiting "
                   "jobs by a MILP on HiGHS (small clusters: max_patterns)")

    def __init__(self, placement: str = "consolidated", max_patterns: int = MAX_PATTERNS,
                 time_limit_s: float = 30.0, **common):
        common.setdefault("max_jobs", 6)
        super().__init__(placement, **common)
        if int(max_patterns) < 1 or not float(time_limit_s) > 0:
            raise ConfigError(f"policy {self.name}: max_patterns must be >= 1 and time_limit_s > 0")
        self.max_patterns, self.time_limit_s = int(max_patterns), float(time_limit_s)

    def solve(self, inst):
        if pattern_count(inst) > self.max_patterns:
            raise ConfigError(f"policy {self.name}: {pattern_count(inst):.0f} placements per job on "
                              f"the free GPUs exceed max_patterns={self.max_patterns}; use 'smjp' "
                              f"on clusters this large")
        return solve_exact(inst, self.max_patterns, self.time_limit_s)

    def params(self) -> dict:
        return {**super().params(), "max_patterns": self.max_patterns,
                "time_limit_s": self.time_limit_s}


def _check_runnable(name: str, state: SchedState, per_type: np.ndarray, kmin: np.ndarray) -> None:
    """A job no category can ever hold (throughput 0 everywhere, or too few GPUs of the types it
    runs on) is a configuration error, not a silent wait."""
    c = state.cluster
    gpus = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types))
    room = (per_type > 0) @ gpus
    bad = np.flatnonzero(room < kmin)
    if bad.size:
        i = int(bad[0])
        why = ("its throughput is 0 on every GPU type of the cluster" if room[i] == 0 else
               f"it needs at least {int(kmin[i])} GPUs but the types it can run on have {int(room[i])}")
        raise ConfigError(f"policy {name}: job {int(state.active[i])} cannot be placed: {why} "
                          f"({bad.size} such jobs)")


def _plan(k: int, admitted: np.ndarray, free_nodes: np.ndarray, x: np.ndarray) -> Plan:
    rows, cols = np.nonzero(x)
    owner = admitted[rows]
    order = np.lexsort((free_nodes[cols], owner))
    indptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=k), out=indptr[1:])
    return Plan(indptr, free_nodes[cols][order].astype(np.int32),
                x[rows, cols][order].astype(np.int32))
