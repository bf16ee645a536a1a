"""The simulation driver: wraps the C event kernel (csrc/sk_engine.c).

The kernel keeps time exactly and runs until a decision point; this module then
asks the policy for a plan, turns the plan's changed placements into progress
rates with the throughput oracle, and hands them back to the kernel.  Nothing
here loops over jobs in Python.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ._native import as_cdata, check, ffi, lib
from .cluster import Cluster
from .defrag import defragment_plan
from .errors import ConfigError, SimError
from .limits import MAX_TIME_S, check_round, check_seconds, fmt_num
from .metrics import FGDTracker
from . import native_rounds
from .native import NativeRun, native_params
from .network import rate_oracle
from .plan_diff import plan_changes
from .placement import (DEFAULT_TYPE_CHOICE, PLACEMENT_MODES, TYPE_CHOICES, allowed_masks, place_one,
                        type_keys)
from .result import SimResult, Timeline
from .state import ARRIVAL, COMPLETION, ROUND, TIMER, JobSpecs, Plan, SchedState

DONE_STATES = {lib.SK_JOB_FUTURE: "future", lib.SK_JOB_QUEUED: "queued", lib.SK_JOB_RUNNING: "running",
               lib.SK_JOB_DONE: "done"}
_CTYPE = {"<i8": "int64_t[]", "<i4": "int32_t[]", "<f8": "double[]"}
#: consecutive decisions with jobs queued, none running and no arrival to come after which a run
#: is stalled (its rounds or wakeups keep coming but the policy places nothing)
STALL_DECISIONS = 10_000


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of one run.

    round_s: scheduling round period (s); None takes the policy's default, 0 means
        event-driven only, else at least 1 s (:mod:`sim.limits`).
    restart_delay_s: checkpoint/restart delay paid when a started job's placement
        changes; None takes the oracle's per-model value, else in [0, 1e10] s.
    progress: show a progress bar.
    native: decide inside the C kernel when the policy has a native form (sim.native;
        FIFO, SJF, SRTF, LAS, Tiresias); False asks the Python policy at every decision.
        Both give the same results job by job.
    type_choice: which GPU type the greedy placer gives a job (every policy that places
        through it: FIFO, SJF, SRTF, LAS, Tiresias, EGHS, ...; sim.placement): "first-fit"
        (default: the first type in the cluster's node order with room, the old first fit
        without type mixing), "fastest" (the type where the job's throughput is highest,
        Gavel's ``_perf`` rule) or "random" (uniform among the types with room, drawn from
        ``type_seed``: Gavel's agnostic rule).  A job never gets a type where its throughput
        is 0 and never spans types (docs/placement.md).
    type_seed: seed of the "random" rule (the same seed gives the same run).
    first_start_delay: a job's first start pays its restart delay too, as the Pollux and Sia
        simulators charge their re-scale delay at every allocation (docs/goodput.md); None
        (default) takes the policy's ``first_start_delay`` attribute (on for the goodput family,
        sim.policies.goodput_base; off elsewhere: only a placement change of a started job
        pays it).
    round_origin: rounds fall at ``round_origin + k round_s`` (the first at or after the first
        arrival), as the Pollux simulator's at multiples of its interval from time 0; None
        (default) takes the policy's ``round_origin`` attribute, and where it has none the
        first arrival (rounds phased from it).  In [0, MAX_TIME_S] s.
    """

    round_s: float | None = None
    restart_delay_s: float | None = None
    progress: bool = False
    native: bool = True
    type_choice: str = DEFAULT_TYPE_CHOICE
    type_seed: int = 0
    first_start_delay: bool | None = None
    round_origin: float | None = None

    def __post_init__(self) -> None:
        if self.round_origin is not None:
            object.__setattr__(self, "round_origin",
                               check_seconds(self.round_origin, "round_origin (--round-origin)"))
        object.__setattr__(self, "round_s", check_round(self.round_s, "round_s (--round)"))
        if self.restart_delay_s is not None:
            object.__setattr__(self, "restart_delay_s",
                               check_seconds(self.restart_delay_s, "restart_delay_s (--restart-delay)"))
        if self.type_choice not in TYPE_CHOICES:
            raise ConfigError(f"type_choice (--type-choice) must be one of "
                              f"{', '.join(TYPE_CHOICES)}, got {self.type_choice!r}")
        if isinstance(self.type_seed, bool) or not isinstance(self.type_seed, (int, np.integer)) \
                or not 0 <= int(self.type_seed) < 2 ** 63:
            raise ConfigError(f"type_seed must be an integer in [0, 2**63), got {self.type_seed!r}")


def job_specs(workload, oracle, restart_delay_s: float | None = None) -> JobSpecs:
    """Resolve a workload (sim.jobs.JobTable) against a throughput oracle."""
    model = workload.model_codes(oracle.models)
    demand = workload.gpus.astype(np.int32)
    ref_rate = np.asarray(oracle.reference_rate(model, demand), float)
    iters = workload.iterations
    dur = workload.duration_s
    work = np.where(np.isnan(iters), dur * ref_rate, iters)
    est = work / ref_rate
    if restart_delay_s is None:
        delay = np.asarray([oracle.restart_delay_s(m) for m in oracle.models], float)[model]
    else:
        delay = np.full(len(model), float(restart_delay_s))
    return JobSpecs(arrival=workload.arrival_s.astype(float), demand=demand,
                    gpus_min=workload.gpus_min.astype(np.int32),
                    gpus_max=workload.gpus_max.astype(np.int32), model=model.astype(np.int32),
                    work=work.astype(float), est_duration=est.astype(float),
                    priority=workload.priority.astype(float), restart_delay=delay,
                    gpus_allowed=_allowed(workload))


def _allowed(workload) -> tuple | None:
    """The workload's requirement sets (``gpus_allowed``), or None when no job has one."""
    allowed = getattr(workload, "gpus_allowed", None)
    allowed = allowed() if callable(allowed) else allowed
    if allowed is None or all(a is None for a in allowed):
        return None
    return tuple(allowed)


class QuietRows:
    """The rows of the decision points ``sk_engine_step_quiet`` passes over (its buffers)."""

    #: decision points recorded per call at most (a full buffer returns the point to Python)
    CAP = 4096

    def __init__(self, n_jobs: int):
        cap, job_cap = self.CAP, max(n_jobs, 1)
        self.arrays = {"time": np.empty(cap), "used_gpus": np.empty(cap, np.int64),
                       "queued": np.empty(cap, np.int64), "running": np.empty(cap, np.int64),
                       "fgd": np.empty(cap), "completed": np.empty(job_cap, np.int64),
                       "completed_at": np.empty(job_cap)}
        self.c = ffi.new("sk_quiet_rows *")
        self.c.cap, self.c.job_cap = cap, job_cap
        for key, arr in self.arrays.items():
            setattr(self.c, key, ffi.from_buffer(_CTYPE[arr.dtype.str], arr))

    def rows(self) -> dict[str, np.ndarray]:
        n = self.c.n
        return {k: v[:n] for k, v in self.arrays.items() if k not in ("completed", "completed_at")}

    def completions(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.c.n_completed
        return self.arrays["completed"][:n], self.arrays["completed_at"][:n]


class _Kernel:
    """Owns one sk_engine and the buffers Python hands it."""

    def __init__(self, cluster: Cluster, jobs: JobSpecs, round_s: float, triggers: int,
                 round_origin: float | None = None):
        n = len(jobs)
        self.n = n
        self._keep = [np.ascontiguousarray(cluster.node_gpus, np.int32),
                      np.ascontiguousarray(jobs.arrival, float),
                      np.ascontiguousarray(jobs.work, float),
                      np.ascontiguousarray(jobs.restart_delay, float),
                      np.ascontiguousarray(jobs.demand, np.int32)]
        start = round_start(jobs, round_origin, float(round_s))
        out = ffi.new("sk_engine **")
        rc = lib.sk_engine_new(out, cluster.n_nodes, as_cdata("int32_t *", self._keep[0]), n,
                               as_cdata("double *", self._keep[1]), as_cdata("double *", self._keep[2]),
                               as_cdata("double *", self._keep[3]),
                               as_cdata("int32_t *", self._keep[4]), float(round_s), start,
                               int(triggers))
        self.ptr = ffi.gc(out[0], lib.sk_engine_free) if out[0] != ffi.NULL else None
        self._check(rc, "sk_engine_new")
        self.arrived = np.empty(max(n, 1), np.int64)
        self.completed = np.empty(max(n, 1), np.int64)
        self.batch = ffi.new("sk_batch *")
        self.batch.arrived = as_cdata("int64_t *", self.arrived)
        self.batch.completed = as_cdata("int64_t *", self.completed)
        self._counters = [ffi.new("int64_t *") for _ in range(4)] + [ffi.new("double *") for _ in range(2)]
        # persistent buffers with their C pointers made once (no per-decision casts)
        size = max(n, 1)
        self._buf = {"active": np.empty(size, np.int64), "ngpu": np.empty(size, np.int32),
                     "remaining": np.empty(size), "attained": np.empty(size),
                     "run": np.empty(size), "queued_since": np.empty(size),
                     "indptr": np.zeros(size + 1, np.int64)}
        self._ptr = {k: ffi.from_buffer(_CTYPE[v.dtype.str], v) for k, v in self._buf.items()}
        self._grow_placement(1024)
        self._sizes = (ffi.new("int64_t *"), ffi.new("int64_t *"))
        self._free = np.empty(cluster.n_nodes, np.int32)
        self._ptr_free = ffi.from_buffer("int32_t[]", self._free)
        self._quiet: QuietRows | None = None

    def _grow_placement(self, size: int) -> None:
        self._pl_nodes = np.empty(size, np.int32)
        self._pl_counts = np.empty(size, np.int32)
        self._pl_ptr = (ffi.from_buffer("int32_t[]", self._pl_nodes),
                        ffi.from_buffer("int32_t[]", self._pl_counts))

    def _check(self, rc: int, what: str) -> int:
        return check(rc, what, self._message)

    def _message(self) -> str:
        return ffi.string(lib.sk_engine_message(self.ptr)).decode() if self.ptr else ""

    def step(self) -> int:
        return self._check(lib.sk_engine_step(self.ptr, self.batch), "sk_engine_step")

    def step_quiet(self, until: float, fgd_flat: np.ndarray, fgd_base: np.ndarray):
        """``step``, passing over the decision points a round policy holds through
        (sk_engine_step_quiet): returns the status and the rows of the points passed over
        (``QuietRows``: views valid until the next call)."""
        q = self._quiet
        if q is None:
            q = self._quiet = QuietRows(self.n)
        rc = lib.sk_engine_step_quiet(self.ptr, self.batch, float(until),
                                      as_cdata("double *", fgd_flat), as_cdata("int64_t *", fgd_base),
                                      q.c)
        return self._check(rc, "sk_engine_step_quiet"), q

    def snapshot(self, cluster: Cluster, jobs: JobSpecs, queued_only: bool = False,
                 oracle=None, type_choice: str = DEFAULT_TYPE_CHOICE, type_seed: int = 0,
                 first_start_delay: bool = False) -> SchedState:
        """The SchedState of the current decision point, in one kernel call."""
        b, p = self._buf, self._ptr
        na, ne = self._sizes
        while True:
            rc = lib.sk_engine_snapshot(self.ptr, int(queued_only), b["active"].shape[0],
                                        self._pl_nodes.shape[0],
                                        p["active"], p["ngpu"], p["remaining"], p["attained"],
                                        p["run"], p["queued_since"], p["indptr"], *self._pl_ptr,
                                        na, ne)
            if rc == lib.SK_EINVAL and ne[0] > self._pl_nodes.shape[0]:
                self._grow_placement(2 * ne[0])
                continue
            self._check(rc, "sk_engine_snapshot")
            break
        k, m = na[0], ne[0]
        return SchedState(now=self.batch.now, reasons=self.batch.reasons, cluster=cluster,
                          jobs=jobs, active=b["active"][:k].copy(), ngpu=b["ngpu"][:k].copy(),
                          remaining=b["remaining"][:k].copy(), attained_gpu_s=b["attained"][:k].copy(),
                          run_s=b["run"][:k].copy(), queued_since=b["queued_since"][:k].copy(),
                          pl_indptr=b["indptr"][:k + 1].copy(), pl_nodes=self._pl_nodes[:m].copy(),
                          pl_counts=self._pl_counts[:m].copy(), node_free=self.node_free().copy(),
                          oracle=oracle, type_choice=type_choice, type_seed=type_seed,
                          first_start_delay=first_start_delay)

    def apply(self, ids, indptr, nodes, counts, rates, shared=None) -> None:
        """``shared``: bool per listed job, space-shared GPUs (Plan.shared); None: none."""
        ids, indptr = np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(indptr, np.int64)
        nodes, counts = np.ascontiguousarray(nodes, np.int32), np.ascontiguousarray(counts, np.int32)
        rates = np.ascontiguousarray(rates, float)
        flags = ffi.NULL if shared is None else ffi.from_buffer(
            "int8_t[]", np.ascontiguousarray(shared, np.int8))
        self._check(lib.sk_engine_apply_shared(self.ptr, len(ids), ffi.from_buffer("int64_t[]", ids),
                                               ffi.from_buffer("int64_t[]", indptr),
                                               ffi.from_buffer("int32_t[]", nodes),
                                               ffi.from_buffer("int32_t[]", counts),
                                               ffi.from_buffer("double[]", rates), flags),
                    "sk_engine_apply")

    def used_gpus(self) -> int:
        v = self._counters
        self._check(lib.sk_engine_counters(self.ptr, *v), "sk_engine_counters")
        return v[0][0]

    def min_queued_demand(self) -> int:
        return lib.sk_engine_min_queued_demand(self.ptr)

    def node_free(self) -> np.ndarray:
        self._check(lib.sk_engine_node_free(self.ptr, self._ptr_free), "sk_engine_node_free")
        return self._free

    def set_timer(self, t: float) -> None:
        self._check(lib.sk_engine_set_timer(self.ptr, float(t)), "sk_engine_set_timer")

    def set_first_start_delay(self, on: bool) -> None:
        self._check(lib.sk_engine_set_first_start_delay(self.ptr, int(bool(on))),
                    "sk_engine_set_first_start_delay")

    def counters(self):
        """(used GPUs, queued, running, done, next arrival, busy GPU-seconds)."""
        v = self._counters
        self._check(lib.sk_engine_counters(self.ptr, *v), "sk_engine_counters")
        return v[0][0], v[1][0], v[2][0], v[3][0], v[4][0], v[5][0]

    def results(self):
        n = max(self.n, 1)
        arrs = {"first_start": np.empty(n), "finish": np.empty(n), "gpu_seconds": np.empty(n),
                "run_seconds": np.empty(n), "restarts": np.empty(n, np.int64),
                "state": np.empty(n, np.int32)}
        r = ffi.new("sk_results *")
        r.first_start = as_cdata("double *", arrs["first_start"])
        r.finish = as_cdata("double *", arrs["finish"])
        r.gpu_seconds = as_cdata("double *", arrs["gpu_seconds"])
        r.run_seconds = as_cdata("double *", arrs["run_seconds"])
        r.restarts = as_cdata("int64_t *", arrs["restarts"])
        r.state = as_cdata("int32_t *", arrs["state"])
        self._check(lib.sk_engine_results(self.ptr, r), "sk_engine_results")
        return {k: v[: self.n] for k, v in arrs.items()}


def simulate(cluster: Cluster, workload, policy, oracle, config: EngineConfig | None = None,
             learning=None, truth=None) -> SimResult:
    """Run one policy on one cluster and workload; returns per-job results.  ``learning``: a
    :class:`sim.learning.world.LearningWorld` (the jobs' learning truth), or None; ``truth``: see
    :func:`run_jobs`."""
    config = config or EngineConfig()
    jobs = job_specs(workload, oracle, config.restart_delay_s)
    return run_jobs(cluster, jobs, policy, oracle, config, job_ids=workload.job_id,
                    learning=learning, truth=truth)


def type_rate_table(cluster: Cluster, jobs: JobSpecs, oracle, n_nodes: int = 1) -> np.ndarray:
    """float64 [n_jobs, n_types]: each job's throughput on each GPU type of ``cluster`` at its
    request, consolidated on one server of speed 1 (``n_nodes`` 2: spread over several), one
    vectorized ``oracle.rates`` call; 0 where it is not finite and positive."""
    n, t = len(jobs), len(cluster.gpu_types)
    if n == 0:
        return np.zeros((0, t))
    model = np.repeat(jobs.model.astype(np.int64), t)
    ngpu = np.repeat(jobs.demand.astype(np.int64), t)
    mask = np.tile(np.left_shift(np.int64(1), np.arange(t, dtype=np.int64)), n)
    rates = oracle.rates(model, ngpu, np.full(n * t, n_nodes, np.int64), mask, np.ones(n * t),
                         cluster.gpu_types)
    rates = np.asarray(rates, float).reshape(n, t)
    return np.where(np.isfinite(rates) & (rates > 0), rates, 0.0)


def unrunnable(cluster: Cluster, demand: np.ndarray, rates: np.ndarray,
               mixing: bool = False) -> tuple[np.ndarray, list[str]]:
    """Rows that no placement can ever run, and why: throughput 0 on every GPU type of the
    cluster, or (unless the policy mixes types) a request larger than every type it can run
    on has."""
    cap = cluster.gpus_per_type()
    ok = rates > 0
    room = (ok * cap[None, :]).sum(axis=1) if mixing else (ok * cap[None, :]).max(axis=1, initial=0)
    bad = np.flatnonzero(room < demand)
    why = []
    for i in bad[:1]:
        if not ok[i].any():
            why.append("its throughput is 0 on every GPU type of the cluster")
        elif mixing:
            why.append(f"it asks for {int(demand[i])} GPUs but the types it can run on have "
                       f"{int(room[i])}")
        else:
            why.append(f"it asks for {int(demand[i])} GPUs, more than any GPU type it can run on "
                       f"has ({', '.join(f'{t}: {int(n)}' for t, n in zip(cluster.gpu_types, cap))})")
    return bad, why


def _validate(cluster: Cluster, jobs: JobSpecs, oracle, mixing: bool = False) -> None:
    too_big = np.flatnonzero(jobs.demand > cluster.total_gpus)
    if too_big.size:
        j = int(too_big[0])
        raise ConfigError(f"job at row {j} requests {int(jobs.demand[j])} GPUs but cluster "
                          f"{cluster.name} has {cluster.total_gpus} ({too_big.size} such jobs)")
    bad = np.flatnonzero(~(jobs.work > 0) | ~np.isfinite(jobs.work))
    if bad.size:
        raise ConfigError(f"job at row {int(bad[0])} has no positive, finite work")
    for name, values in (("arrival", jobs.arrival), ("run time at the reference rate", jobs.est_duration)):
        bad = np.flatnonzero(~(np.asarray(values) <= MAX_TIME_S) | ~(np.asarray(values) >= 0))
        if bad.size:
            j = int(bad[0])
            raise ConfigError(f"job at row {j}: {name} {fmt_num(values[j])} s is not in [0, "
                              f"{fmt_num(MAX_TIME_S)}] s (the horizon; {bad.size} such jobs)")
    if jobs.type_rates is not None:
        bad, why = unrunnable(cluster, jobs.demand, jobs.type_rates, mixing)
        if bad.size:
            raise ConfigError(f"job at row {int(bad[0])} cannot run on cluster {cluster.name}: "
                              f"{why[0]} ({bad.size} such jobs; drop them with --skip-invalid)")


def run_jobs(cluster: Cluster, jobs: JobSpecs, policy, oracle, config: EngineConfig,
             job_ids: np.ndarray | None = None, learning=None, truth=None) -> SimResult:
    """Run ``policy`` over resolved job specs (see :func:`job_specs`).  ``learning``: the
    learning simulator (``sim.learning.world.LearningWorld``; it observes every decision,
    masks the truth of time-to-accuracy jobs and sets their rates), or None.  ``truth``: hidden
    per-(job, server) speed factors (``sim.hops.servers.ServerTruth``): every rate is multiplied
    by ``truth.factors(ids, indptr, nodes)``, and policies see only ``truth.monitor()`` as
    ``SchedState.monitor``; such runs decide in Python.  None: no hidden truth."""
    if jobs.type_rates is None and len(jobs):
        jobs = replace(jobs, type_rates=type_rate_table(cluster, jobs, oracle))
    _validate(cluster, jobs, oracle, getattr(policy, "rate_model", None) is not None)
    return _Run(cluster, jobs, policy, oracle, config, learning, truth).run(job_ids)


def round_origin(config: EngineConfig, policy) -> float | None:
    """Where this run's rounds are phased from (EngineConfig's, else the policy's; None: the
    first arrival)."""
    if config.round_origin is not None:
        return config.round_origin
    origin = getattr(policy, "round_origin", None)
    return None if origin is None else float(origin)


def round_start(jobs: JobSpecs, origin: float | None, round_s: float) -> float:
    """The time rounds count from (the kernel's start, at or before the first arrival): the
    first arrival, or with ``origin`` the latest ``origin + k round_s`` (k an integer) at or
    before it."""
    first = float(jobs.arrival.min()) if len(jobs) else 0.0
    if origin is None or round_s <= 0.0:
        return first
    k = math.ceil((origin - first) / round_s)
    start = origin - k * round_s
    return start if start <= first else start - round_s


def first_start_delay(config: EngineConfig, policy) -> bool:
    """Does a first start pay the restart delay in this run (EngineConfig's, else the policy's)?"""
    if config.first_start_delay is not None:
        return bool(config.first_start_delay)
    return bool(getattr(policy, "first_start_delay", False))


class _Run:
    """One simulation: the decision loop around a kernel, and what it records."""

    def __init__(self, cluster: Cluster, jobs: JobSpecs, policy, oracle, config: EngineConfig,
                 learning=None, truth=None):
        self.cluster, self.jobs, self.policy, self.oracle = cluster, jobs, policy, oracle
        self.world = learning
        self.truth = truth
        self.monitor = None if truth is None else truth.monitor()
        self.clairvoyant = bool(getattr(policy, "clairvoyant", False))
        if learning is not None:
            learning.start(jobs)
        self.config = config
        self.round_s = config.round_s if config.round_s is not None else (policy.round_s or 0.0)
        self.kernel = _Kernel(cluster, jobs, self.round_s, policy.triggers, round_origin(config, policy))
        self.first_start_delay = first_start_delay(config, policy)
        if self.first_start_delay:
            self.kernel.set_first_start_delay(True)
        n = len(jobs)
        self.used_types = np.zeros(n, np.int64)
        self.scale_applied = np.ones(n)
        self.shared_applied = np.zeros(n, np.bool_)    # Plan.shared of each job's placement
        self.timeline = Timeline()
        self.latencies: list[float] = []
        self.idle_while_waiting: list[int] = []
        self.idle_decisions = 0                 # consecutive decisions of a stall (record)
        self.stall_since = 0.0                  # when the current stall began
        self.fgd_values: list[float] = []
        weights = FGDTracker(cluster, jobs.demand).weights
        self.fgd_weights = weights
        self.fgd_flat = weights.ravel()
        self.fgd_base = np.asarray(cluster.node_type, np.int64) * weights.shape[1]
        # defragmenting needs every decision: the shortcuts assume placements never move
        self.defragment = bool(getattr(policy, "defragment", False))
        shortcuts = not self.defragment
        self.skippable = shortcuts and bool(getattr(policy, "skip_if_nothing_fits", False))
        self.skip_idle_completions = shortcuts and bool(getattr(policy, "skip_idle_completions", False))
        self.skip_mid_round = shortcuts and bool(getattr(policy, "skips_mid_round", False))
        self.lone_mode = (PLACEMENT_MODES[policy.placement]
                          if shortcuts and getattr(policy, "place_lone_arrivals", False) else None)
        # the kernel passes over the mid-round points itself when no other shortcut comes first
        self.quiet = (self.skip_mid_round and not self.skippable and not self.skip_idle_completions
                      and self.lone_mode is None and hasattr(policy, "hold_until"))
        self.engine_placed = 0
        self.skipped = 0
        self.queued_view = _policy_view(policy) == "queued"
        self.rate_model = getattr(policy, "rate_model", None)
        # placement rates: the oracle's with the network term at the cluster's bandwidths
        # (sim.network); a policy's own rate model has its own
        self.rates_from = oracle if self.rate_model is not None else rate_oracle(oracle, cluster)
        # Python decides when the learning world observes every decision and sets true rates,
        # or when the policy has its own rate model or the run hidden server truth (the kernel
        # knows only the oracle)
        self.native = (native_params(policy)
                       if config.native and shortcuts and learning is None and self.rate_model is None
                       and truth is None else None)
        self.times = {"kernel_s": 0.0, "snapshot_s": 0.0, "policy_s": 0.0, "oracle_s": 0.0,
                      "learning_s": 0.0}
        # a Gavel round policy's rounds decided in C between its resets (sim.native_rounds)
        self.native_rounds = self.native is None and native_rounds.eligible(self)

    def run(self, job_ids) -> SimResult:
        if self.native is not None and len(self.jobs):
            return self.run_native(job_ids)
        if self.native_rounds:
            return self.run_native_rounds(job_ids)
        n = len(self.jobs)
        bar = _progress(n, self.config.progress, self.policy.name)
        t0 = time.perf_counter()
        done_before = 0
        status = self.step() if n else lib.SK_DONE
        while status == lib.SK_DECISION:
            wakeup = self.decide()
            n_done = self.record(wakeup)
            if bar is not None:
                bar.update(n_done - done_before)
                done_before = n_done
            status = self.next_point()
        if bar is not None:
            bar.update(n - done_before)
            bar.close()
        return self.result(job_ids, time.perf_counter() - t0)

    def step(self) -> int:
        t0 = time.perf_counter()
        status = self.kernel.step()
        self.times["kernel_s"] += time.perf_counter() - t0
        return status

    def next_point(self) -> int:
        """The next decision point for Python: the kernel passes over (and records) those a
        round policy holds through (``_mid_round``'s, found in C: sk_engine_step_quiet)."""
        until = self.policy.hold_until(self.kernel.batch.now, self.jobs) if self.quiet else None
        if until is None:
            return self.step()
        t0 = time.perf_counter()
        status, quiet = self.kernel.step_quiet(until, self.fgd_flat, self.fgd_base)
        self.times["kernel_s"] += time.perf_counter() - t0
        if quiet.c.n:
            self.record_quiet(quiet)
        return status

    def record_quiet(self, quiet) -> None:
        """What ``decide`` (``_mid_round``) and ``record`` do at each point the kernel passed
        over: the policy is told of the completions, the timeline gets a row."""
        rows = quiet.rows()
        ids, at = quiet.completions()
        self.policy.note_completed(float(rows["time"][-1]), ids, at)
        tl = self.timeline
        tl.time.extend(rows["time"].tolist())
        tl.used_gpus.extend(rows["used_gpus"].tolist())
        tl.queued.extend(rows["queued"].tolist())
        tl.running.extend(rows["running"].tolist())
        self.fgd_values.extend(rows["fgd"].tolist())
        waiting = rows["queued"] > 0
        self.idle_while_waiting.extend((self.cluster.total_gpus - rows["used_gpus"][waiting]).tolist())
        self.idle_decisions = 0             # jobs ran at every one of them: no stall
        self.skipped += len(rows["time"])

    def run_native(self, job_ids) -> SimResult:
        """The whole run inside the kernel (sim.native): decisions, records and all."""
        t0 = time.perf_counter()
        nr = NativeRun(self.kernel, self.cluster, self.jobs, self.rates_from,
                       {**self.native, "type_choice": TYPE_CHOICES[self.config.type_choice],
                        "type_seed": int(self.config.type_seed)},
                       self.fgd_weights, self.policy.name)
        nr.run()
        wall = time.perf_counter() - t0
        rec, ctr = nr.records(), nr.counters()
        self._take_records(rec)
        self.used_types = nr.used_types()
        self.skipped, self.engine_placed = ctr["skipped"], ctr["lone_placed"]
        self.latencies = rec["seconds"][rec["kind"] == lib.SK_POINT_DECIDED]
        self.times = {"kernel_s": wall - ctr["decide_seconds"] - nr.oracle_s,
                      "snapshot_s": 0.0, "policy_s": ctr["decide_seconds"], "oracle_s": nr.oracle_s}
        self.counts = {"placements": ctr["placements"], "preemptions": ctr["preemptions"],
                       "rate_misses": ctr["rate_misses"], "kernel_calls": nr.kernel_calls}
        return self.result(job_ids, wall)

    def run_native_rounds(self, job_ids) -> SimResult:
        """The rounds inside the kernel (sim.native_rounds), resets in the policy's Python."""
        t0 = time.perf_counter()
        status = self.step()
        if status == lib.SK_DECISION:
            state = self.kernel.snapshot(self.cluster, self.jobs, self.queued_view, self.oracle,
                                         self.config.type_choice, int(self.config.type_seed),
                                         self.first_start_delay)
            rates = np.stack([type_rate_table(self.cluster, self.jobs, self.rates_from, n_nodes)
                              for n_nodes in (1, 2)], axis=-1)
            rounds = native_rounds.NativeRounds(self, state, rates, STALL_DECISIONS)
            rounds.run()
            rec = rounds.records()
            self._take_records(rec)
            self.latencies = rec["seconds"][rec["kind"] == lib.SK_POINT_DECIDED].tolist()
            self.skipped = int(rounds.g.skipped)
            self.times["policy_s"] = float(np.sum(self.latencies))
        wall = time.perf_counter() - t0
        self.times["kernel_s"] = wall - self.times["policy_s"]
        return self.result(job_ids, wall)

    def _take_records(self, rec: dict) -> None:
        """The timeline, fragmentation and idle-while-waiting figures from a kernel's decision
        records (sim._native.DecisionRecords)."""
        self.timeline = Timeline(time=rec["time"].tolist(), used_gpus=rec["used_gpus"].tolist(),
                                 queued=rec["queued"].tolist(), running=rec["running"].tolist())
        self.fgd_values = rec["fgd"]
        self.idle_while_waiting = (self.cluster.total_gpus - rec["used_gpus"])[rec["queued"] > 0]

    def decide(self) -> float | None:
        """Ask the policy (unless provably nothing can change) and apply its plan."""
        k = self.kernel
        if self.skippable and not k.batch.reasons & (ROUND | TIMER) and \
                k.min_queued_demand() > self.cluster.total_gpus - k.used_gpus():
            self.skipped += 1
            return None
        if self.skip_idle_completions and k.batch.reasons == COMPLETION and k.counters()[1] == 0:
            self.skipped += 1
            return None
        if self.skip_mid_round and self._mid_round():
            self.skipped += 1
            return None
        if self.lone_mode is not None and k.batch.reasons == ARRIVAL and k.counters()[1] == 1 \
                and self._place_lone_arrival():
            return None
        t_snap = time.perf_counter()
        state = k.snapshot(self.cluster, self.jobs, self.queued_view, self.oracle,
                           self.config.type_choice, int(self.config.type_seed), self.first_start_delay)
        t_world = time.perf_counter()
        if self.world is not None:
            state = self.world.observe(state, self.clairvoyant)
        if self.monitor is not None:
            state = replace(state, monitor=self.monitor)
        t_call = time.perf_counter()
        plan = self.policy.schedule(state)
        if self.defragment:
            plan = defragment_plan(state, plan)
        t_done = time.perf_counter()
        if self.world is not None:
            plan = self.world.settle(state, plan)
        self.latencies.append(t_done - t_call)
        self.times["snapshot_s"] += t_world - t_snap
        self.times["learning_s"] += t_call - t_world + time.perf_counter() - t_done
        self.times["policy_s"] += t_done - t_call
        self.times["oracle_s"] += _apply_plan(k, state, plan, self.rates_from, self.cluster,
                                              self.used_types, self.scale_applied, self.policy.name,
                                              self.rate_model, self.truth, self.shared_applied)
        return plan.wakeup

    def _mid_round(self) -> bool:
        """Arrivals and completions inside a round, with jobs still running, that the round
        policy says keep every placement (``Policy.skips_mid_round``): the policy is told of
        the completions (``note_completed``) instead of asked, and nothing else changes."""
        k = self.kernel
        if k.batch.reasons & ~(ARRIVAL | COMPLETION) or k.counters()[2] == 0 or \
                not self.policy.between_rounds(k.batch.now, self.jobs):
            return False
        self.policy.note_completed(k.batch.now, k.completed[:k.batch.n_completed])
        return True

    def _place_lone_arrival(self) -> bool:
        """Place the only queued job on the free GPUs if it fits (Policy.place_lone_arrivals)."""
        k, c = self.kernel, self.cluster
        state = k.snapshot(c, self.jobs, queued_only=True)
        j = state.active[:1]
        want = int(self.jobs.demand[j[0]])
        if want > int(state.node_free.sum()):
            return False
        rates = self.jobs.type_rates[j]
        keys = type_keys(self.config.type_choice, c.node_type, len(c.gpu_types), j, rates,
                         state.now, int(self.config.type_seed))
        nodes, counts = place_one(state.node_free.astype(np.int32), c.node_type, len(c.gpu_types),
                                  want, self.lone_mode, allowed_masks(rates)[0], keys[0])
        if nodes.shape[0] == 0:               # no type it can use has room: the policy decides
            return False
        plan = Plan(np.array([0, nodes.shape[0]], np.int64), nodes, counts)
        self.times["oracle_s"] += _apply_plan(k, state, plan, self.rates_from, c, self.used_types,
                                              self.scale_applied, self.policy.name, self.rate_model,
                                              self.truth, self.shared_applied)
        self.engine_placed += 1
        return True

    def record(self, wakeup) -> int:
        """Timeline and fragmentation after a decision; stops a stalled run."""
        now = self.kernel.batch.now
        used, n_q, n_r, n_done, next_arrival, _ = self.kernel.counters()
        tl = self.timeline
        tl.time.append(now)
        tl.used_gpus.append(used)
        tl.queued.append(n_q)
        tl.running.append(n_r)
        self.fgd_values.append(float(self.fgd_flat.take(self.fgd_base + self.kernel.node_free()).sum()))
        if n_q > 0:
            self.idle_while_waiting.append(self.cluster.total_gpus - used)
            if n_r == 0 and not np.isfinite(next_arrival) and wakeup is None and self.round_s <= 0:
                raise SimError(f"policy {self.policy.name} left {n_q} jobs queued on an idle "
                               f"cluster at t={now} with nothing left to happen")
        self._check_stall(now, n_q, n_r, next_arrival)
        return n_done

    def _check_stall(self, now: float, n_q: int, n_r: int, next_arrival: float) -> None:
        """Stops a run whose policy places nothing on an idle cluster, decision after decision,
        with every job arrived: it would run its rounds to the horizon."""
        stalled = n_q > 0 and n_r == 0 and not np.isfinite(next_arrival)
        self.idle_decisions = self.idle_decisions + 1 if stalled else 0
        if self.idle_decisions == 1:
            self.stall_since = now
        if self.idle_decisions >= STALL_DECISIONS:
            raise SimError(f"policy {self.policy.name} left {n_q} jobs queued on an idle cluster for "
                           f"{STALL_DECISIONS:,} decisions (t={self.stall_since:g} to {now:g} s) with "
                           f"every job arrived: its rounds or wakeups come, but it places nothing")

    def result(self, job_ids, wall: float) -> SimResult:
        n = len(self.jobs)
        res = self.kernel.results()
        unfinished = np.flatnonzero(res["state"] != lib.SK_JOB_DONE)
        if unfinished.size:
            raise SimError(f"{unfinished.size} jobs did not finish (first: row {int(unfinished[0])})")
        return SimResult(policy=self.policy.name, cluster=self.cluster, jobs=self.jobs,
                         job_ids=np.arange(n) if job_ids is None else np.asarray(job_ids),
                         first_start=res["first_start"], finish=res["finish"],
                         gpu_seconds=res["gpu_seconds"], run_seconds=res["run_seconds"],
                         restarts=res["restarts"], gpu_types_used=self.used_types,
                         timeline=self.timeline,
                         decisions=len(self.latencies),
                         decision_seconds=np.asarray(self.latencies),
                         skipped_decisions=self.skipped, engine_placed=self.engine_placed,
                         wall_seconds=wall,
                         fragmentation={"idle_gpus_while_waiting": np.asarray(self.idle_while_waiting),
                                        "fgd": np.asarray(self.fgd_values)},
                         model_names=tuple(getattr(self.oracle, "models", ())),
                         profile=self.profile(wall))

    def profile(self, wall: float) -> dict:
        """Where the time went: kernel (event loop and apply), snapshot (building the
        SchedState), policy (its decisions; native: inside C, placement included), oracle
        (throughput lookups), glue (the rest of the Python loop); and what was counted."""
        t = {k: float(v) for k, v in self.times.items()}
        t["glue_s"] = max(wall - sum(t.values()), 0.0)
        native = (self.native is not None or self.native_rounds) and len(self.jobs) > 0
        decisions = len(self.latencies)
        return {"native": native, "wall_s": float(wall), **t, "decisions": int(decisions),
                "skipped_decisions": int(self.skipped), "engine_placed": int(self.engine_placed),
                "decision_points": int(len(self.timeline.time)), **getattr(self, "counts", {})}


def _apply_plan(kernel: _Kernel, state: SchedState, plan: Plan, oracle, cluster: Cluster,
                used_types: np.ndarray, scale_applied: np.ndarray, policy_name: str,
                rate_model=None, truth=None, shared_applied: np.ndarray | None = None) -> float:
    """Apply a plan's changes; returns the seconds spent in the throughput oracle (or in the
    policy's rate model, sim.state.RateModel, when it has one).  ``truth``: hidden per-server
    factors that multiply the rates (see :func:`run_jobs`).  ``shared_applied``: per job, the
    Plan.shared flag its placement holds (updated here; required when the plan shares)."""
    oracle_s = 0.0
    k = len(state.active)
    if plan.indptr.shape != (k + 1,):
        raise SimError(f"policy {policy_name} returned a plan for {plan.indptr.shape[0] - 1} jobs, "
                       f"expected {k}")
    scale = _rate_scale(plan, k, policy_name)
    force = np.zeros(k, np.bool_) if scale is None else scale != scale_applied[state.active]
    shared = _shared(plan, state.active, policy_name, shared_applied)
    if shared is not None:
        force |= shared != shared_applied[state.active]
    idx, sub_indptr, sub_nodes, sub_counts, ngpu, n_nodes, mask, min_speed = plan_changes(
        state.pl_indptr, state.pl_nodes, state.pl_counts,
        np.ascontiguousarray(plan.indptr, np.int64), np.ascontiguousarray(plan.nodes, np.int32),
        np.ascontiguousarray(plan.counts, np.int32), force, cluster.node_type, cluster.node_speed)
    if idx.size:
        ids = state.active[idx]
        t0 = time.perf_counter()
        rates = _rates(rate_model, oracle, state.jobs, ids, sub_indptr, sub_nodes, sub_counts,
                       ngpu, n_nodes, mask, min_speed, cluster)
        oracle_s = time.perf_counter() - t0
        on = ngpu > 0
        if truth is not None:
            rates = rates * truth.factors(ids, sub_indptr, sub_nodes)
        rates = np.where(on, rates, 0.0)           # an empty placement: a preemption
        if (on & ~(rates > 0)).any():
            _zero_rate_error(rates, on, ids, mask, cluster, policy_name, state.now)
        applied = 1.0 if scale is None else np.where(on, scale[idx], 1.0)
        rates = rates * applied
        scale_applied[ids] = applied
        used_types[ids] |= mask
        flags = None
        if shared is not None:
            flags = shared[idx] & on
            shared_applied[ids] = flags
        kernel.apply(ids, sub_indptr, sub_nodes, sub_counts, rates, flags)
    if plan.wakeup is not None and plan.wakeup > state.now:
        kernel.set_timer(plan.wakeup)
    return oracle_s


def _rates(rate_model, oracle, jobs: JobSpecs, ids, indptr, nodes, counts, ngpu, n_nodes, mask,
           min_speed, cluster: Cluster) -> np.ndarray:
    """Rates of the changed jobs: the oracle's slowest-worker rule, or the policy's rate model
    (sim.state.RateModel) on the jobs that hold GPUs."""
    if rate_model is None:
        return oracle.rates(jobs.model[ids], ngpu, n_nodes, mask, min_speed, cluster.gpu_types)
    rates = np.zeros(ids.shape[0])
    on = np.flatnonzero(ngpu > 0)
    if on.size:
        lens = np.diff(indptr)[on]
        sub = np.zeros(on.size + 1, np.int64)
        np.cumsum(lens, out=sub[1:])
        keep = np.repeat(indptr[on], lens) + (np.arange(int(sub[-1])) - np.repeat(sub[:-1], lens))
        rates[on] = rate_model.rates(jobs, ids[on], sub, nodes[keep], counts[keep], cluster, oracle)
    return rates


def _policy_view(policy) -> str:
    view = getattr(policy, "view", "all")
    if view not in ("all", "queued"):
        raise ConfigError(f"policy {policy.name}: view must be 'all' or 'queued', got {view!r}")
    if view == "queued" and getattr(policy, "preemptive", False):
        raise ConfigError(f"policy {policy.name}: a preemptive policy needs view 'all'")
    return view


def _rate_scale(plan: Plan, k: int, policy_name: str) -> np.ndarray | None:
    if plan.rate_scale is None:
        return None
    scale = np.asarray(plan.rate_scale, float)
    if scale.shape != (k,):
        raise SimError(f"policy {policy_name}: rate_scale has shape {scale.shape}, expected ({k},)")
    if scale.size and not (scale.min() > 0 and scale.max() < np.inf):     # NaN fails too
        raise SimError(f"policy {policy_name}: rate_scale must be finite and > 0")
    return scale


def _shared(plan: Plan, active: np.ndarray, policy_name: str, shared_applied) -> np.ndarray | None:
    """The plan's sharing flags, or None when neither the plan nor any active job shares."""
    k = active.shape[0]
    if plan.shared is None:
        if shared_applied is None or not shared_applied[active].any():
            return None
        return np.zeros(k, np.bool_)            # no sharing: those that shared stop
    shared = np.asarray(plan.shared)
    if shared.shape != (k,) or shared.dtype != np.bool_:
        raise SimError(f"policy {policy_name}: shared must be a bool array of shape ({k},), "
                       f"got {shared.dtype} {shared.shape}")
    if shared_applied is None:
        raise SimError(f"policy {policy_name}: this engine path does not take shared placements")
    return shared


def _zero_rate_error(rates, on, ids, mask, cluster: Cluster, policy_name: str, now: float):
    i = int(np.flatnonzero(on & ~(rates > 0))[0])
    types = [t for b, t in enumerate(cluster.gpu_types) if (int(mask[i]) >> b) & 1]
    raise SimError(f"policy {policy_name} placed job {int(ids[i])} at t={now} on GPU types "
                   f"{'|'.join(types)} where its throughput is 0 (the model cannot run there)")


def _progress(total: int, enabled: bool, name: str):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=name, unit="job", leave=False)
