"""The outcome of one run: :class:`SimResult` (per-job arrays and run facts), its
:class:`Timeline`, and the per-job results table.

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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .cluster import Cluster
from ._optional import require
from .errors import ConfigError
from .fsio import atomic_path
from .state import JobSpecs

__all__ = ["SimResult", "Timeline", "RESULT_SCHEMA", "jobs_table", "write_jobs", "wait_times",
           "require_jobs"]

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


@dataclass(eq=False)
class Timeline:
    """Cluster state after each decision point."""

    time: list = field(default_factory=list)
    used_gpus: list = field(default_factory=list)
    queued: list = field(default_factory=list)
    running: list = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"time": np.asarray(self.time, float), "used_gpus": np.asarray(self.used_gpus, np.int64),
                "queued": np.asarray(self.queued, np.int64), "running": np.asarray(self.running, np.int64)}


@dataclass(eq=False, repr=False)
class SimResult:
    """Per-job outcomes of one run (arrays indexed by job id) plus run facts."""

    policy: str
    cluster: Cluster
    jobs: JobSpecs
    job_ids: np.ndarray           # the workload's job_id column
    first_start: np.ndarray
    finish: np.ndarray
    gpu_seconds: np.ndarray
    run_seconds: np.ndarray
    restarts: np.ndarray
    gpu_types_used: np.ndarray    # int64 bit mask over cluster.gpu_types
    timeline: Timeline
    decisions: int
    decision_seconds: np.ndarray  # wall time of each policy call
    wall_seconds: float
    fragmentation: dict = field(default_factory=dict)
    model_names: tuple[str, ...] = ()
    skipped_decisions: int = 0    # decision points with provably nothing to do
    engine_placed: int = 0        # lone arrivals the engine placed itself (place_lone_arrivals)
    #: where the time went (seconds) and what was counted (sim.engine._Run.profile)
    profile: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        n = len(self.jobs)
        facts = f"{n} jobs"
        if n:
            jct = float(np.mean(self.finish - self.jobs.arrival))
            makespan = float(np.max(self.finish) - np.min(self.jobs.arrival))
            facts += f", avg JCT {jct:,.0f} s, makespan {makespan:,.0f} s"
        return (f"<SimResult {self.policy!r} on {self.cluster.name!r} "
                f"({self.cluster.total_gpus} GPUs): {facts}>")

    def to_pandas(self):
        """The per-job results table (:data:`RESULT_SCHEMA`) as a pandas DataFrame (needs pandas)."""
        require("pandas", "pandas")
        return jobs_table(self).to_pandas()


def require_jobs(result: "SimResult", what: str) -> int:
    """The number of jobs; ConfigError when there are none to measure."""
    n = len(result.jobs)
    if n == 0:
        raise ConfigError(f"{what}: policy {result.policy!r} ran an empty workload (0 jobs); "
                          f"there is nothing to measure")
    return n


def wait_times(result: "SimResult") -> np.ndarray:
    """Per-job queueing delay: JCT minus the seconds with GPUs, clipped at 0."""
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
    require_jobs(result, "jobs_table")
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
        "queueing_delay_s": pa.array(wait_times(result)),
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
