"""What a policy sees at a decision point, and what it returns."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from ._native import lib
from .cluster import Cluster
from .errors import ConfigError

# decision reasons (bits): SK_WHY_* of csrc/sk_engine.h, read from the compiled module
ARRIVAL = lib.SK_WHY_ARRIVAL
COMPLETION = lib.SK_WHY_COMPLETION
ROUND = lib.SK_WHY_ROUND
TIMER = lib.SK_WHY_TIMER


@dataclass(frozen=True, eq=False)
class JobSpecs:
    """Static per-job arrays for every job of the run, indexed by job id (0..n-1)."""

    arrival: np.ndarray        # float64, s
    demand: np.ndarray         # int32, requested GPUs (elastic: preferred count)
    gpus_min: np.ndarray       # int32
    gpus_max: np.ndarray       # int32
    model: np.ndarray          # int32, index into the oracle's models
    work: np.ndarray           # float64, iterations
    est_duration: np.ndarray   # float64, s, at the requested count on the reference GPU
    priority: np.ndarray       # float64, weight
    restart_delay: np.ndarray  # float64, s
    #: per job, its finite set of allowed GPU counts (Hops' requirement set, the job table's
    #: ``gpus_allowed``) as a tuple, or None; None for the whole run when no job has one
    gpus_allowed: tuple | None = None
    #: float64 [n_jobs, n_cluster_types]: each job's throughput on each GPU type of the run's
    #: cluster at its request, consolidated (the engine fills it in; 0: cannot run there, and
    #: no placer puts it there); None outside a run
    type_rates: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival.shape[0])


@dataclass(frozen=True, eq=False)
class SchedState:
    """Live state at a decision point.  Arrays are aligned with ``active``.

    A policy whose ``view`` is "queued" (non-preemptive policies that never touch
    running jobs) sees only the queued jobs in ``active``; running jobs then keep
    their GPUs, which ``node_free`` already accounts for.
    """

    now: float
    reasons: int
    cluster: Cluster
    jobs: JobSpecs
    active: np.ndarray          # int64 job ids of arrived, unfinished jobs (increasing)
    ngpu: np.ndarray            # int32 GPUs held now
    remaining: np.ndarray       # float64 iterations left
    attained_gpu_s: np.ndarray  # float64 GPU-seconds received so far
    run_s: np.ndarray           # float64 seconds with GPUs so far
    queued_since: np.ndarray    # float64 time the job last lost (or never had) GPUs; NaN if running
    pl_indptr: np.ndarray       # int64 current placement CSR
    pl_nodes: np.ndarray        # int32
    pl_counts: np.ndarray       # int32
    node_free: np.ndarray | None = None  # int32 free GPUs per node now
    #: the run's throughput oracle (sim.throughput.ThroughputOracle), None if not given
    oracle: object | None = None
    #: what the policy may observe of the jobs' learning
    #: (sim.learning.observation.LearningObservation), None in runs without learning.  In such
    #: runs ``remaining`` and ``jobs.work`` are NaN for time-to-accuracy jobs (the simulator's
    #: truth, which no real scheduler knows), unless the policy is ``clairvoyant``.
    learning: object | None = None
    #: measurements of the jobs' iterations on the servers they ran on (sim.hops.servers.Monitor:
    #: the running-mode profiler of a run with hidden server truth), None in runs without one
    monitor: object | None = None
    #: the run's type choice rule for type-blind placement (sim.placement.TYPE_CHOICES;
    #: ``EngineConfig.type_choice``) and its seed
    type_choice: str = "first-fit"
    type_seed: int = 0
    #: a job's first start pays its restart delay in this run (``EngineConfig.first_start_delay``,
    #: else the policy's attribute): policies that track restart delays (the goodput job model)
    #: follow the engine's rule
    first_start_delay: bool = False

    @property
    def demand(self) -> np.ndarray:
        return self.jobs.demand[self.active]

    @cached_property
    def type_throughputs(self) -> np.ndarray:
        """float64 [n_active, n_types]: each active job's rate (iterations/s) on each GPU type
        of the cluster alone, at its requested GPU count, consolidated on one server of speed 1
        (Gavel's throughput matrix; 0 where the model cannot run).  Computed once per state
        with one vectorized ``oracle.rates`` call."""
        if self.oracle is None:
            raise ConfigError("this policy needs the throughput oracle in its SchedState "
                              "(SchedState.oracle is None)")
        return type_throughput_rows(self.oracle, self.jobs, self.active, self.cluster.gpu_types)

    @property
    def running(self) -> np.ndarray:
        return self.ngpu > 0


def type_throughput_rows(oracle, jobs: JobSpecs, ids: np.ndarray, gpu_types) -> np.ndarray:
    """float64 [len(ids), n_types]: :attr:`SchedState.type_throughputs` of the jobs ``ids``
    (each row depends on its job alone), in one vectorized ``oracle.rates`` call."""
    n, t = ids.shape[0], len(gpu_types)
    model = np.repeat(jobs.model[ids].astype(np.int64), t)
    ngpu = np.repeat(jobs.demand[ids].astype(np.int64), t)
    mask = np.tile(np.left_shift(np.int64(1), np.arange(t, dtype=np.int64)), n)
    rates = oracle.rates(model, ngpu, np.ones(n * t, np.int64), mask, np.ones(n * t), gpu_types)
    return np.asarray(rates, float).reshape(n, t)


@dataclass(frozen=True, eq=False)
class Plan:
    """A policy's answer: the full target placement of the active jobs (CSR aligned
    with ``SchedState.active``; an empty range means no GPUs), plus an optional
    time at which the policy wants to be asked again.

    ``rate_scale`` (optional, float64 aligned with ``active``, > 0) multiplies each
    job's oracle rate: statistical efficiency of a batch size, stragglers, and the
    like.  A job whose scale changes while its placement stays keeps running at the
    new rate without a restart.  None means 1 for every job.

    ``sampling`` (optional, float64 ``[n_active, K]``): per job, the share of its samples
    drawn from each worker's data partition (rows sum to 1 over the job's GPUs); the
    learning simulator turns it into progress (sim.learning.world).  None: uniform.

    ``shared`` (optional, bool aligned with ``active``): space sharing (Gavel's packing,
    Gandiva).  A shared job's GPUs hold two shared placements each: a server then has its
    exclusive GPUs plus ceil(shared GPU slots / 2) taken, and a shared job is charged half of
    each GPU it sits on (its GPU-seconds).  Who shares with whom, and at what rate, is the
    policy's: the engine rates a shared job as any other (the oracle's rate of its
    placement) times ``rate_scale``, where the policy puts the co-located slowdown.  Turning
    a running job's sharing on or off is a placement change (a restart).  None: no sharing.
    """

    indptr: np.ndarray
    nodes: np.ndarray
    counts: np.ndarray
    wakeup: float | None = None
    rate_scale: np.ndarray | None = None
    sampling: np.ndarray | None = None
    shared: np.ndarray | None = None


@runtime_checkable
class RateModel(Protocol):
    """A placement-level rate model that a policy opts into (``policy.rate_model``).

    The engine's Python path then asks it, instead of the oracle's slowest-worker rule, for
    the rate of every job whose placement changed (e.g. sim.smjp.ProportionalRates:
    proportional workload assignment plus ring all-reduce).  ``Plan.rate_scale`` still
    multiplies the result.  A policy with a rate model never takes the native path.
    """

    def rates(self, jobs: JobSpecs, ids: np.ndarray, indptr: np.ndarray, nodes: np.ndarray,
              counts: np.ndarray, cluster: Cluster, oracle) -> np.ndarray:
        """float64 iterations/s of jobs ``ids`` on their placements (CSR ``indptr``,
        ``nodes``, ``counts`` aligned with ``ids``, none empty); 0 where a job cannot run."""
        ...
