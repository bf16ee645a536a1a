"""Metrics of one run: the per-job results table, a summary dict, and a comparison table.

Definitions follow algorithms.md §1.2; everything is vectorized numpy (no Python loop per job).

Per-job results table (:data:`RESULT_SCHEMA`, written as Parquet by :func:`write_jobs`; seconds):

================= ======== ========= =====================================================
column            type     nullable  meaning
================= ======== ========= =====================================================
job_id            int64    no        the workload's job_id
arrival_s         float64  no        submission time
first_start_s     float64  no        first time the job held GPUs
finish_s          float64  no        completion time
jct_s             float64  no        finish_s - arrival_s
queueing_delay_s  float64  no        cumulative time with 0 GPUs after arrival
                                     (= jct_s - run_seconds, clipped at 0)
gpu_seconds       float64  no        GPU-seconds held (restart delays included)
run_seconds       float64  no        seconds with GPUs
restarts          int64    no        placement changes after the first start
gpus_requested    int32    no        requested GPUs (elastic jobs: preferred count)
gpu_types_used    string   no        GPU types ever held, in cluster order, "|"-joined
                                     (e.g. "v100|k80")
model             int32    no        model index into the throughput oracle's models
model_name        string   yes       model name (null when the names are unknown)
est_duration_s    float64  no        run time at the request on the reference GPU type
================= ======== ========= =====================================================

Summary keys (:func:`summary`; all numbers, NaN where undefined):

* ``n_jobs``, ``total_gpus``
* ``avg_jct_s``, ``median_jct_s``, ``p95_jct_s``, ``p99_jct_s`` (numpy linear percentiles)
* ``makespan_s``: last finish - first arrival
* ``avg_wait_s``, ``p99_wait_s``: queueing delay as above
* ``utilization``: sum GPU-seconds / (total GPUs x makespan), in [0, 1]
* ``max_rho``, ``mean_rho``, ``frac_rho_gt_1``: finish-time fairness, see :func:`finish_time_fairness`
* ``max_latency_ratio``, ``mean_latency_ratio``: LR = wait / age with age = run_seconds (Hops eq.6)
* ``avg_slowdown``, ``jain_slowdown``: slowdown = JCT / est_duration and Jain's index of it
* ``frag_idle_gpus``: Hops' fragmentation, mean idle GPUs over the decision points at which at
  least one job waits (0 when no job ever waited)
* ``frag_fgd_gpus``: FGD's expected unusable GPUs (see :func:`fgd_fragmentation`), mean over
  decision points; NaN when the engine did not record it
* ``decisions``, ``mean_decision_ms``, ``p99_decision_ms``, ``wall_seconds``: decision points
  at which the policy was asked, its time per call, and the run's wall time
* ``skipped_decisions``, ``engine_placed``: decision points the engine skipped as provably idle,
  and lone arrivals it placed without asking the policy (see ``Policy.place_lone_arrivals``)
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ConfigError
from .fsio import atomic_path

if TYPE_CHECKING:  # the engine may import this module; avoid a cycle at run time
    from .cluster import Cluster
    from .engine import SimResult

__all__ = [
    "RESULT_SCHEMA",
    "SUMMARY_KEYS",
    "jobs_table",
    "write_jobs",
    "summary",
    "compare_table",
    "finish_time_fairness",
    "mean_active_jobs",
    "jain_index",
    "request_histogram",
    "fgd_weights",
    "fgd_fragmentation",
    "FGDTracker",
]

RESULT_SCHEMA = pa.schema([
    pa.field("job_id", pa.int64(), nullable=False),
    pa.field("arrival_s", pa.float64(), nullable=False),
    pa.field("first_start_s", pa.float64(), nullable=False),
    pa.field("finish_s", pa.float64(), nullable=False),
    pa.field("jct_s", pa.float64(), nullable=False),
    pa.field("queueing_delay_s", pa.float64(), nullable=False),
    pa.field("gpu_seconds", pa.float64(), nullable=False),
    pa.field("run_seconds", pa.float64(), nullable=False),
    pa.field("restarts", pa.int64(), nullable=False),
    pa.field("gpus_requested", pa.int32(), nullable=False),
    pa.field("gpu_types_used", pa.string(), nullable=False),
    pa.field("model", pa.int32(), nullable=False),
    pa.field("model_name", pa.string(), nullable=True),
    pa.field("est_duration_s", pa.float64(), nullable=False),
], metadata={"clustersim.schema": "results/1"})

SUMMARY_KEYS = (
    "n_jobs", "total_gpus",
    "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s",
    "makespan_s", "avg_wait_s", "p99_wait_s", "utilization",
    "max_rho", "mean_rho", "frac_rho_gt_1",
    "max_latency_ratio", "mean_latency_ratio",
    "avg_slowdown", "jain_slowdown",
    "frag_idle_gpus", "frag_fgd_gpus",
    "decisions", "mean_decision_ms", "p99_decision_ms", "wall_seconds",
    "skipped_decisions", "engine_placed",
)


# -- per-job table -------------------------------------------------------------------------

def _require_jobs(result: "SimResult", what: str) -> int:
    n = len(result.jobs)
    if n == 0:
        raise ConfigError(f"{what}: policy {result.policy!r} ran an empty workload (0 jobs); "
                          f"there is nothing to measure")
    return n


def _wait(result: "SimResult") -> np.ndarray:
    jct = result.finish - result.jobs.arrival
    return np.maximum(jct - result.run_seconds, 0.0)


def _decode_type_masks(mask: np.ndarray, gpu_types: Sequence[str]) -> np.ndarray:
    """Bit masks over ``gpu_types`` -> "a|b" strings; one Python step per distinct mask."""
    uniq, inv = np.unique(np.asarray(mask, np.int64), return_inverse=True)
    names = np.array(["|".join(t for i, t in enumerate(gpu_types) if (int(m) >> i) & 1)
                      for m in uniq], dtype=object)
    return names[inv.reshape(-1)] if uniq.size else np.empty(0, object)


def jobs_table(result: "SimResult", model_names: Sequence[str] | None = None) -> pa.Table:
    """The per-job results table (:data:`RESULT_SCHEMA`), one row per job in job-id order.

    ``model_names`` (the oracle's ``models``) fills ``model_name``; by default it is taken from
    ``result.model_names`` when the result carries it, else the column is null.
    """
    _require_jobs(result, "jobs_table")
    jobs = result.jobs
    if model_names is None:
        model_names = getattr(result, "model_names", None)
    model = np.asarray(jobs.model, np.int32)
    if model_names is not None:
        names = np.asarray(list(model_names), dtype=object)
        if model.size and (model.min() < 0 or model.max() >= len(names)):
            raise ConfigError(f"jobs_table: model index out of range 0..{len(names) - 1}")
        model_name = pa.array(names[model], pa.string())
    else:
        model_name = pa.nulls(len(model), pa.string())
    jct = result.finish - jobs.arrival
    cols = {
        "job_id": pa.array(np.asarray(result.job_ids, np.int64)),
        "arrival_s": pa.array(np.asarray(jobs.arrival, float)),
        "first_start_s": pa.array(np.asarray(result.first_start, float)),
        "finish_s": pa.array(np.asarray(result.finish, float)),
        "jct_s": pa.array(jct),
        "queueing_delay_s": pa.array(_wait(result)),
        "gpu_seconds": pa.array(np.asarray(result.gpu_seconds, float)),
        "run_seconds": pa.array(np.asarray(result.run_seconds, float)),
        "restarts": pa.array(np.asarray(result.restarts, np.int64)),
        "gpus_requested": pa.array(np.asarray(jobs.demand, np.int32)),
        "gpu_types_used": pa.array(_decode_type_masks(result.gpu_types_used,
                                                      result.cluster.gpu_types), pa.string()),
        "model": pa.array(model),
        "model_name": model_name,
        "est_duration_s": pa.array(np.asarray(jobs.est_duration, float)),
    }
    return pa.Table.from_pydict(cols, schema=RESULT_SCHEMA)


def write_jobs(result: "SimResult", path, model_names: Sequence[str] | None = None) -> Path:
    """Write :func:`jobs_table` as Parquet (parent folders are created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(jobs_table(result, model_names), tmp)
    return path


# -- fairness ------------------------------------------------------------------------------

def mean_active_jobs(arrival: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Time-average number of active jobs (arrived, unfinished) over each job's [arrival, finish].

    Sweep line: the active count A(t) is a step function with knots at the arrivals and
    finishes, so its integral I(t) is piecewise linear with the same knots and np.interp is
    exact.  The job itself counts, so the result is >= 1.  Zero-length lifetimes give A at
    that instant.
    """
    a = np.asarray(arrival, float)
    f = np.asarray(finish, float)
    n = a.size
    if n == 0:
        return np.empty(0)
    t = np.concatenate([a, f])
    d = np.concatenate([np.ones(n), -np.ones(n)])
    # at equal times, finishes (-1) before arrivals (+1): a job finishing at t is not active after t
    order = np.lexsort((d, t))
    ts, ds = t[order], d[order]
    count = np.cumsum(ds)                     # active count right after each event
    integral = np.zeros(2 * n)
    integral[1:] = np.cumsum(count[:-1] * np.diff(ts))
    span = f - a
    ia, if_ = np.interp(a, ts, integral), np.interp(f, ts, integral)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (if_ - ia) / span
    # degenerate spans: the active count just after the arrival
    at = np.searchsorted(ts, a, side="right") - 1
    return np.where(span > 0, mean, count[np.clip(at, 0, None)])


def finish_time_fairness(result: "SimResult") -> np.ndarray:
    """rho_j = T_sh / T_id per job (Themis, Gavel; algorithms.md §1.2).

    T_sh is the JCT.  T_id, the JCT on an isolated 1/N share of the cluster, is approximated as
    ``est_duration * max(1, N * demand / total_gpus)``: the job gets ``total_gpus / N`` GPUs; if
    that covers its request it runs at its reference duration, otherwise proportionally slower
    (linear scaling).  N is the time-average number of active jobs over the job's own lifetime
    (:func:`mean_active_jobs`).  Heterogeneity is folded into ``est_duration`` (run time on the
    reference GPU type), not into a per-type 1/N share.
    """
    jobs = result.jobs
    jct = result.finish - jobs.arrival
    n_act = mean_active_jobs(jobs.arrival, result.finish)
    total = max(int(result.cluster.total_gpus), 1)
    t_id = jobs.est_duration * np.maximum(1.0, n_act * jobs.demand / total)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t_id > 0, jct / t_id, np.nan)


def jain_index(x: np.ndarray) -> float:
    """Jain's index (sum x)^2 / (n sum x^2) over the finite entries; NaN if none or all zero."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan
    sq = float(np.dot(x, x))
    return float(x.sum() ** 2 / (x.size * sq)) if sq > 0 else math.nan


# -- FGD fragmentation (algorithms.md §5.9, whole GPUs only) ---------------------------------

def request_histogram(demand: np.ndarray, max_node_gpus: int) -> np.ndarray:
    """Task-shape popularity p_m (float64 [max_node_gpus + 1], sums to 1) from job GPU requests.

    A task is what one node must host.  A job asking for ``d`` GPUs on a cluster whose largest
    node has ``G`` GPUs is ``d // G`` tasks of ``G`` GPUs plus one task of ``d % G`` when that is
    non-zero (as a multi-worker job is several pods in FGD's Kubernetes setting).  Index m of the
    result is the popularity of an m-GPU task; index 0 is always 0.
    """
    d = np.asarray(demand, np.int64)
    g = int(max_node_gpus)
    if g <= 0:
        raise ConfigError(f"request_histogram: max_node_gpus must be > 0, got {g}")
    if d.size and d.min() <= 0:
        raise ConfigError("request_histogram: GPU requests must be >= 1")
    full, rest = d // g, d % g
    hist = np.bincount(rest[rest > 0], minlength=g + 1).astype(float)[: g + 1]
    hist[g] += float(full.sum())
    tot = hist.sum()
    if tot <= 0:
        raise ConfigError("request_histogram: empty workload")
    return hist / tot


def _normalize_hist(request_hist: np.ndarray) -> np.ndarray:
    p = np.asarray(request_hist, float)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ConfigError(f"fgd: request_hist must be 1-D [K+1] or 2-D [n_types, K+1], got shape {p.shape}")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        raise ConfigError("fgd: request_hist must be finite and >= 0")
    tot = p.sum()
    if tot <= 0:
        raise ConfigError("fgd: request_hist is all zero")
    return p / tot


def fgd_weights(request_hist: np.ndarray, n_types: int, max_free: int) -> np.ndarray:
    """Lookup table W[type, free] = free * P(a task of the workload cannot use this node).

    ``request_hist``: task-shape popularity, either 1-D (``[m]`` = m-GPU tasks that run on any
    GPU type) or 2-D (``[t, m]`` = m-GPU tasks that need GPU type t).  Unnormalized counts are
    fine.  With whole GPUs a node with ``c`` free GPUs can host an m-GPU task iff ``m <= c``
    (and the type matches); then none of its free GPUs are fragment for that task (FGD's Q3),
    otherwise all ``c`` are (Q1/Q2, or no GPU access).  So F_n = c * (1 - P(host)).
    """
    p = _normalize_hist(request_hist)
    k = p.shape[-1] - 1
    free = np.arange(max_free + 1)
    idx = np.minimum(free, k)
    if p.ndim == 1:
        host = np.cumsum(p)[idx]                       # [free]
        host = np.broadcast_to(host, (n_types, free.size))
    else:
        if p.shape[0] != n_types:
            raise ConfigError(f"fgd: request_hist has {p.shape[0]} type rows, cluster has {n_types} types")
        host = np.cumsum(p, axis=1)[:, idx]            # [type, free]: own-type shapes only
    return free[None, :] * (1.0 - np.clip(host, 0.0, 1.0))


def fgd_fragmentation(node_free: np.ndarray, node_type: np.ndarray, request_hist: np.ndarray) -> float:
    """FGD's cluster fragmentation F = sum_n sum_m p_m frag(n, m), in GPUs (whole GPUs only).

    ``node_free``: int [n_nodes] free GPUs per node; ``node_type``: int [n_nodes] GPU type id;
    ``request_hist``: as in :func:`fgd_weights`.  F is the expected number of free GPUs that a
    task drawn from the workload's shape distribution could not use, summed over nodes.
    """
    free = np.asarray(node_free, np.int64)
    ntype = np.asarray(node_type, np.int64)
    if free.shape != ntype.shape or free.ndim != 1:
        raise ConfigError(f"fgd: node_free {free.shape} and node_type {ntype.shape} must be equal 1-D shapes")
    if free.size == 0:
        return 0.0
    if free.min() < 0:
        raise ConfigError(f"fgd: node {int(np.argmin(free))} has {int(free.min())} free GPUs")
    p = np.asarray(request_hist)
    n_types = int(ntype.max()) + 1 if p.ndim == 1 else p.shape[0]
    w = fgd_weights(p, n_types, int(free.max()))
    return float(w[ntype, free].sum())


class FGDTracker:
    """Records FGD's F after each decision point, for the engine (one table lookup + sum each).

    Cost: about 20 us per call at 1024 nodes and a few thousand placement entries, so at
    10^5 decision points a C-side incremental F (see ``weights``) is the better hook.

    ``tracker = FGDTracker(cluster, jobs.demand)``; after a plan is applied,
    ``tracker.record(plan.nodes, plan.counts)`` (the full target placement of the active jobs);
    ``tracker.values()`` gives float64 [decisions] for ``SimResult.fragmentation["fgd"]``.
    """

    def __init__(self, cluster: "Cluster", demand: np.ndarray):
        self.node_gpus = np.asarray(cluster.node_gpus, np.int64)
        self.node_type = np.asarray(cluster.node_type, np.int64)
        hist = request_histogram(demand, int(self.node_gpus.max())) if len(demand) else np.array([1.0])
        g = int(self.node_gpus.max())
        #: the table of :func:`fgd_weights`, float64 [n_types, max_node_gpus + 1]; a C kernel can
        #: keep F incrementally: on node n, F += W[t_n, free_new] - W[t_n, free_old]
        self.weights = fgd_weights(hist, len(cluster.gpu_types), g)
        self._flat = self.weights.ravel()
        self._base = self.node_type * (g + 1) + self.node_gpus   # flat index of "node empty"
        self._vals: list[float] = []

    def value(self, nodes: np.ndarray, counts: np.ndarray) -> float:
        """F for the placement CSR payload ``nodes``/``counts`` (GPUs used per entry)."""
        used = np.bincount(np.asarray(nodes, np.int64), np.asarray(counts, float),
                           self.node_gpus.size).astype(np.int64)
        return float(self._flat.take(self._base - used).sum())

    def record(self, nodes: np.ndarray, counts: np.ndarray) -> None:
        self._vals.append(self.value(nodes, counts))

    def values(self) -> np.ndarray:
        return np.asarray(self._vals, float)


def _fgd_mean(result: "SimResult") -> float:
    frag = result.fragmentation or {}
    if "fgd" in frag:
        v = np.asarray(frag["fgd"], float)
    elif "node_free" in frag:           # [decisions, n_nodes]
        free = np.asarray(frag["node_free"], np.int64)
        if free.size == 0:
            return math.nan
        c = result.cluster
        hist = request_histogram(result.jobs.demand, int(c.node_gpus.max()))
        w = fgd_weights(hist, len(c.gpu_types), int(free.max()))
        v = w[np.asarray(c.node_type, np.int64)[None, :], free].sum(axis=1)
    else:
        return math.nan
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


# -- summary -------------------------------------------------------------------------------

def _nanstat(fn, x: np.ndarray, *args) -> float:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return float(fn(x, *args)) if x.size else math.nan


def summary(result: "SimResult") -> dict:
    """The run's summary metrics (keys :data:`SUMMARY_KEYS`, documented in the module docstring)."""
    n = _require_jobs(result, "summary")
    jobs = result.jobs
    jct = result.finish - jobs.arrival
    wait = _wait(result)
    total = int(result.cluster.total_gpus)
    makespan = float(np.nanmax(result.finish) - np.nanmin(jobs.arrival))
    gpu_s = float(np.nansum(result.gpu_seconds))
    util = gpu_s / (total * makespan) if total > 0 and makespan > 0 else math.nan
    rho = finish_time_fairness(result)
    with np.errstate(invalid="ignore", divide="ignore"):
        lr = np.where(result.run_seconds > 0, wait / result.run_seconds, np.nan)
        slowdown = np.where(jobs.est_duration > 0, jct / jobs.est_duration, np.nan)
    rho_f = rho[np.isfinite(rho)]
    idle = np.asarray((result.fragmentation or {}).get("idle_gpus_while_waiting", []), float)
    dec_ms = np.asarray(result.decision_seconds, float) * 1e3
    out = {
        "n_jobs": n,
        "total_gpus": total,
        "avg_jct_s": _nanstat(np.mean, jct),
        "median_jct_s": _nanstat(np.median, jct),
        "p95_jct_s": _nanstat(np.percentile, jct, 95),
        "p99_jct_s": _nanstat(np.percentile, jct, 99),
        "makespan_s": makespan,
        "avg_wait_s": _nanstat(np.mean, wait),
        "p99_wait_s": _nanstat(np.percentile, wait, 99),
        "utilization": util,
        "max_rho": _nanstat(np.max, rho),
        "mean_rho": _nanstat(np.mean, rho),
        "frac_rho_gt_1": float(np.mean(rho_f > 1.0)) if rho_f.size else math.nan,
        "max_latency_ratio": _nanstat(np.max, lr),
        "mean_latency_ratio": _nanstat(np.mean, lr),
        "avg_slowdown": _nanstat(np.mean, slowdown),
        "jain_slowdown": jain_index(slowdown),
        "frag_idle_gpus": float(idle.mean()) if idle.size else 0.0,
        "frag_fgd_gpus": _fgd_mean(result),
        "decisions": int(result.decisions),
        "mean_decision_ms": _nanstat(np.mean, dec_ms),
        "p99_decision_ms": _nanstat(np.percentile, dec_ms, 99),
        "wall_seconds": float(result.wall_seconds),
        "skipped_decisions": int(result.skipped_decisions),
        "engine_placed": int(result.engine_placed),
    }
    return out


# -- comparison table ----------------------------------------------------------------------

#: (header, summary key, scale, format) of the columns of :func:`compare_table`
_COLUMNS = (
    ("avg JCT h", "avg_jct_s", 1 / 3600, "{:.2f}"),
    ("p99 JCT h", "p99_jct_s", 1 / 3600, "{:.2f}"),
    ("makespan h", "makespan_s", 1 / 3600, "{:.2f}"),
    ("avg wait h", "avg_wait_s", 1 / 3600, "{:.2f}"),
    ("util %", "utilization", 100.0, "{:.1f}"),
    ("max rho", "max_rho", 1.0, "{:.2f}"),
    ("max LR", "max_latency_ratio", 1.0, "{:.2f}"),
    ("idle GPUs", "frag_idle_gpus", 1.0, "{:.1f}"),
    ("FGD GPUs", "frag_fgd_gpus", 1.0, "{:.1f}"),
)


def compare_table(summaries: Mapping[str, Mapping]) -> str:
    """Policies side by side as a fixed-width text table (one row per policy, in the given order).

    Missing or NaN values print as ``-``.  Columns: avg/p99 JCT, makespan and avg wait in hours,
    utilization in %, max rho, max latency ratio, Hops' idle GPUs while jobs wait, FGD's F.
    """
    if not summaries:
        raise ConfigError("compare_table: no policies to compare")
    names = [str(k) for k in summaries]
    w0 = max(len("policy"), *(len(s) for s in names))
    widths = [max(len(h), 10) for h, *_ in _COLUMNS]
    head = "policy".ljust(w0) + "".join(" " + h.rjust(w) for (h, *_), w in zip(_COLUMNS, widths))
    lines = [head, "-" * len(head)]
    for name, s in zip(names, summaries.values()):
        cells = []
        for (_, key, scale, fmt), w in zip(_COLUMNS, widths):
            v = s.get(key)
            ok = isinstance(v, (int, float, np.number)) and math.isfinite(float(v))
            cells.append((fmt.format(float(v) * scale) if ok else "-").rjust(w))
        lines.append(name.ljust(w0) + "".join(" " + c for c in cells))
    return "\n".join(lines)
