"""Replaying a trace: the throughput model that keeps recorded run times, and fitting jobs to a cluster.

**Why a replay oracle.**  The canonical job table defines ``duration_s`` as run time on the
reference GPU type at the requested count, and the engine turns it into iterations with the
oracle's reference rate (:func:`sim.engine.job_specs`).  With the built-in Gavel table that
means: a Philly job's recorded 1 h becomes the iterations a V100 does in 1 h for some Gavel
model, and on the ``philly`` preset (P100s) it then runs about 1.7 h, and longer again when the
placement spans servers.  To replay a trace *as recorded*, :func:`replay_oracle` builds a
:class:`~sim.throughput.TableThroughput` with a single model :data:`~sim.traces.TRACE_MODEL`
whose rate is exactly ``k`` iterations/s on ``k`` GPUs of the reference type (linear scaling,
no penalty for spanning servers), so a job's simulated run time equals its recorded run time
and only queueing differs between policies.

``speeds`` chooses what other GPU types do:

* ``"uniform"`` (default): every type of the cluster runs at the reference speed - right when
  the trace does not say which type a job ran on (Philly, Helios, openb pods on their own
  heterogeneous node list);
* ``"relative"``: types run at their relative speed to ``reference_type``, the type the trace's
  run times were measured on (:data:`sim.throughput.RELATIVE_SPEED`, peak FP32; pass
  ``relative_speed=`` for others) - a what-if for moving a trace to other hardware.

``restart_delay_s`` (default 30 s, Sia's default) is paid when a preemptive policy moves a job.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from ..cluster import Cluster, canonical_gpu_type
from ..errors import ConfigError, TraceError
from ..jobs import JobTable
from ..throughput import DEFAULT_RESTART_DELAY_S, RELATIVE_SPEED, TableThroughput, default_oracle
from .common import TRACE_MODEL, TraceLoad

__all__ = ["replay_oracle", "fit_to_cluster", "replay", "trace_oracle", "TABLE_FORMATS", "read_workload"]

#: Formats whose jobs name models of a throughput table, their work in that table's iterations
#: (Gavel's ``total_steps``): they run with the table, not with the replay oracle.
TABLE_FORMATS = ("jobs", "gavel")


def replay_oracle(cluster: Cluster | Iterable[str], *, reference_type: str | None = None, speeds: str = "uniform",
                  relative_speed: Mapping[str, float] | None = None,
                  restart_delay_s: float = DEFAULT_RESTART_DELAY_S, model: str = TRACE_MODEL) -> TableThroughput:
    """A throughput oracle under which every trace job runs exactly its recorded run time
    (``speeds="uniform"``), or that time scaled by GPU speed (``"relative"``).  See the module
    docstring."""
    types = list(cluster.gpu_types) if isinstance(cluster, Cluster) else [canonical_gpu_type(t) for t in cluster]
    if not types:
        raise ConfigError("replay_oracle: no GPU types")
    ref = canonical_gpu_type(reference_type) if reference_type else types[0]
    if speeds == "uniform":
        rel = {t: 1.0 for t in set(types) | {ref}}
    elif speeds == "relative":
        rel = {canonical_gpu_type(k): float(v) for k, v in dict(RELATIVE_SPEED, **(relative_speed or {})).items()}
        missing = [t for t in set(types) | {ref} if t not in rel]
        if missing:
            raise ConfigError(f"replay_oracle(speeds='relative'): no relative speed for GPU type(s) "
                              f"{', '.join(sorted(missing))}; pass relative_speed={{type: speed}}")
    else:
        raise ConfigError(f"speeds={speeds!r}: use 'uniform' or 'relative'")
    return TableThroughput({ref: {model: {1: 1.0}}}, reference_type=ref, spread_penalty=1.0,
                           scaling_efficiency=1.0, relative_speed=rel, restart_delays={},
                           default_restart_delay_s=restart_delay_s, reference_bandwidth_gbps=None,
                           source=f"<replay oracle, {speeds}, ref {ref}>")


def trace_oracle(load: TraceLoad, fmt: str, cluster: Cluster, oracle=None):
    """The oracle to run a trace's jobs with: ``oracle`` if given; for :data:`TABLE_FORMATS`
    the default table (:func:`sim.throughput.default_oracle`, Gavel's); otherwise the replay
    oracle, which keeps each job's recorded run time on the trace's GPU type."""
    if oracle is not None:
        return oracle
    if fmt in TABLE_FORMATS:
        return default_oracle()
    return replay_oracle(cluster, reference_type=load.trace_gpu_type)


def read_workload(path, cluster: Cluster, *, format: str | None = None, oracle=None):
    """``(JobTable, oracle)``: the jobs of a file in any job-trace format (detected unless
    ``format`` is given) and the oracle to run them with (:func:`trace_oracle`)."""
    from pathlib import Path

    from . import detect_format, read_trace

    if not Path(path).exists():
        raise ConfigError(f"workload file {path} does not exist")
    fmt = format or detect_format(path)
    load = read_trace(path, fmt)
    return load.jobs, trace_oracle(load, fmt, cluster, oracle)


def fit_to_cluster(load: TraceLoad | JobTable, cluster: Cluster, *, too_big: str = "error",
                   per_node: bool = False) -> JobTable:
    """The jobs that fit ``cluster``; jobs asking for more GPUs than it has are an error
    (``too_big="error"``, naming the job's input row) or filtered and counted in the load's
    report (``too_big="skip"``).  With ``per_node`` a job must also fit on one node (a pod)."""
    if too_big not in ("error", "skip"):
        raise ConfigError(f"too_big={too_big!r}: use 'error' or 'skip'")
    jobs = load.jobs if isinstance(load, TraceLoad) else load
    cap = int(cluster.node_gpus.max()) if per_node else cluster.total_gpus
    what = "its largest node" if per_node else "it"
    bad = jobs.gpus_min > cap
    if not bad.any():
        return jobs
    idx = np.flatnonzero(bad)
    r = int(idx[0])
    msg = (f"job {int(jobs.job_id[r])} requests {int(jobs.gpus_min[r])} GPUs, more than cluster {cluster.name} "
           f"has on {what} ({cap}); {idx.size} such job(s)")
    if too_big == "error":
        raise TraceError(msg, file=jobs.source, row=int(jobs.job_id[r]), field="gpus")
    if isinstance(load, TraceLoad):
        load.report.filter(f"more GPUs than the cluster has ({cap})", jobs.job_id[idx], msg)
        load.report.jobs -= idx.size
    import pyarrow as pa
    return JobTable(jobs.table.filter(pa.array(~bad)), jobs.source, jobs.skipped)


def replay(load: TraceLoad, cluster: Cluster, policies: Iterable[str], *, oracle=None, too_big: str = "error",
           per_node: bool = False, config=None, policy_params: Mapping[str, dict] | None = None) -> dict:
    """Run ``policies`` on a loaded trace and return ``{policy: (SimResult, summary dict)}``.

    The oracle defaults to :func:`replay_oracle` (uniform speeds, reference type = the trace's
    GPU type), so jobs run their recorded run times.  Each summary gets ``sim_wall_s`` (wall
    time of :func:`sim.engine.simulate`) and ``sim_cpu_s`` (its CPU time)."""
    import time

    from ..engine import EngineConfig, simulate
    from ..metrics import summary
    from ..policies import get_policy

    jobs = fit_to_cluster(load, cluster, too_big=too_big, per_node=per_node)
    oracle = oracle or replay_oracle(cluster, reference_type=load.trace_gpu_type)
    config = config or EngineConfig()
    out = {}
    for name in policies:
        policy = get_policy(name, **dict((policy_params or {}).get(name, {})))
        t0, c0 = time.perf_counter(), time.process_time()
        res = simulate(cluster, jobs, policy, oracle, config)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        s = summary(res)
        s["sim_wall_s"] = wall
        s["sim_cpu_s"] = cpu
        out[name] = (res, s)
    return out
