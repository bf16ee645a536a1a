"""Readers of public GPU-cluster traces and node lists, normalized to the canonical job table.

``read_trace(path, format=None, **options)`` -> :class:`TraceLoad` (``.jobs`` is a
:class:`~sim.jobs.JobTable`, ``.report`` counts every row skipped, filtered or adjusted, by
reason); ``read_nodes(path, format=None, **options)`` -> :class:`ClusterLoad`.  ``format=None``
detects the format from the file name and header (:func:`detect_format`).

=============== ============================================ ======================================
format          files                                        reader
=============== ============================================ ======================================
philly          Pollux's flattened Philly table (CSV/Parquet) :func:`~sim.traces.philly.read_philly_table`
philly-log      Philly ``cluster_job_log`` (JSON)            :func:`~sim.traces.philly.read_philly_log`
helios          Helios ``cluster_log.csv``                   :func:`~sim.traces.helios.read_helios`
pai             PAI 2020 task table (+ job table)            :func:`~sim.traces.pai.read_pai`
openb           openb ``openb_pod_list_*.csv``               :func:`~sim.traces.openb.read_openb_pods`
acme            Acme ``trace_seren.csv`` / ``trace_kalos.csv`` :func:`~sim.traces.acme.read_acme`
gavel           Gavel ``.trace`` (TSV)                       :func:`~sim.traces.gavel.read_gavel`
pollux          Pollux/Sia workload CSV                      :func:`~sim.traces.pollux.read_pollux`
jobs            the canonical job table (Parquet/CSV)        :meth:`sim.jobs.JobTable.read`
--------------- -------------------------------------------- --------------------------------------
openb-nodes     openb node list                              :func:`~sim.traces.nodes.read_openb_nodes`
pai-machines    PAI ``pai_machine_spec``                     :func:`~sim.traces.nodes.read_pai_machines`
spot-nodes      Alibaba 2026 spot ``node_info_df.csv``       :func:`~sim.traces.nodes.read_spot_nodes`
philly-machines revised Philly machine list                  :func:`~sim.traces.nodes.read_philly_machines`
=============== ============================================ ======================================

GPU types.  Job tables carry no GPU type, and traces record run times measured on whatever
hardware ran them.  :data:`TRACE_GPU_TYPES` says which type each format's run times are taken
to be measured on (our choices where the trace does not say; every reader takes
``gpu_type=`` to change it); PAI jobs carry their own type in ``extra["gpu_type"]``; node
lists map their type names through the tables in :mod:`sim.traces.nodes`.

Replaying: :func:`replay_oracle` (recorded run times kept) and :func:`fit_to_cluster` (jobs
larger than the cluster: error or counted skip).  See docs/traces.md.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Callable

from ..errors import ConfigError, TraceError
from .common import FRACTIONAL_POLICIES, TRACE_MODEL, TraceLoad, TraceReport
from .nodes import ClusterLoad, read_openb_nodes, read_pai_machines, read_philly_machines, read_spot_nodes

__all__ = ["read_trace", "read_nodes", "detect_format", "TraceLoad", "TraceReport", "ClusterLoad",
           "TRACE_MODEL", "TRACE_GPU_TYPES", "FRACTIONAL_POLICIES", "JOB_FORMATS", "NODE_FORMATS", "replay_oracle",
           "fit_to_cluster", "replay", "trace_oracle", "read_workload"]


def __getattr__(name):          # the replay helpers import the throughput model (numba): load lazily
    if name in ("replay_oracle", "fit_to_cluster", "replay", "trace_oracle", "read_workload"):
        import importlib
        return getattr(importlib.import_module(".replaying", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _philly_table(path, **kw):
    from .philly import read_philly_table
    return read_philly_table(path, **kw)


def _philly_log(path, **kw):
    from .philly import read_philly_log
    return read_philly_log(path, **kw)


def _helios(path, **kw):
    from .helios import read_helios
    return read_helios(path, **kw)


def _pai(path, **kw):
    from .pai import read_pai
    return read_pai(path, **kw)


def _openb(path, **kw):
    from .openb import read_openb_pods
    return read_openb_pods(path, **kw)


def _acme(path, **kw):
    from .acme import read_acme
    return read_acme(path, **kw)


def _gavel(path, **kw):
    from .gavel import read_gavel
    return read_gavel(path, **kw)


def _pollux(path, **kw):
    from .pollux import read_pollux
    return read_pollux(path, **kw)


def _jobs(path, skip_invalid: bool = False, **kw):
    import pyarrow as pa
    from ..jobs import JobTable
    if kw:
        raise ConfigError(f"format 'jobs' takes no options (got {', '.join(kw)})")
    jt = JobTable.read(path, skip_invalid=skip_invalid)
    rep = TraceReport(str(path), "jobs")
    rep.rows = len(jt) + len(jt.skipped)
    rep.jobs = len(jt)
    for e in jt.skipped:
        reason = "not_utf8" if e.message.startswith("not UTF-8") else f"invalid {e.field}"
        rep.skip(reason, [e.row], str(e))
    return TraceLoad(jobs=jt, report=rep, extra=pa.table({"job_id": jt.table.column("job_id")}))


#: format -> GPU type its recorded run times are taken to be measured on (None: not one type -
#: per job for PAI (extra column gpu_type), per node for openb; work in iterations for Gavel and
#: Pollux).  Philly: the ``philly`` preset's type (our choice, the trace has none); Helios: our
#: choice; Acme: the clusters are A100 clusters.
TRACE_GPU_TYPES: dict[str, str | None] = {"philly": "p100", "philly-log": "p100", "helios": "v100", "acme": "a100",
                                          "pai": None, "openb": None, "gavel": None, "pollux": None, "jobs": None}

#: format -> (description, reader(path, **options) -> TraceLoad)
JOB_FORMATS: dict[str, tuple[str, Callable]] = {
    "philly": ("Philly job table flattened by Pollux: timestamp,duration,num_gpus,gpu_time,cluster", _philly_table),
    "philly-log": ("Philly raw cluster_job_log JSON (jobs with attempts)", _philly_log),
    "helios": ("Helios cluster_log.csv (SenseTime, SC'21)", _helios),
    "pai": ("Alibaba PAI 2020 pai_task_table (+ job_table=pai_job_table)", _pai),
    "openb": ("Alibaba openb 2023 pod list (FGD, ATC'23)", _openb),
    "acme": ("Acme trace_seren.csv / trace_kalos.csv (NSDI'24)", _acme),
    "gavel": ("Gavel .trace (10 tab-separated fields)", _gavel),
    "pollux": ("Pollux/Sia workload CSV: name,time,application,num_replicas,batch_size", _pollux),
    "jobs": ("the canonical clustersim job table (Parquet/CSV)", _jobs),
}
#: format -> (description, reader(path, **options) -> ClusterLoad)
NODE_FORMATS: dict[str, tuple[str, Callable]] = {
    "openb-nodes": ("Alibaba openb node list: sn,cpu_milli,memory_mib,gpu,model", read_openb_nodes),
    "pai-machines": ("Alibaba PAI 2020 pai_machine_spec: machine,gpu_type,cap_cpu,cap_mem,cap_gpu", read_pai_machines),
    "spot-nodes": ("Alibaba 2026 spot-GPU node_info_df: gpu_model,gpu_capacity_num,cpu_num,node_name", read_spot_nodes),
    "philly-machines": ("revised Philly machine list: ,machineId,number of GPUs", read_philly_machines),
}

_HEADER_SIGNATURES = (   # (format, columns that must all be present), checked in order
    ("jobs", {"arrival_s", "gpus", "model"}),
    ("philly", {"timestamp", "duration", "num_gpus"}),
    ("acme", {"job_id", "gpu_num", "type", "state", "submit_time"}),
    ("helios", {"job_id", "vc", "gpu_num", "state", "submit_time"}),
    ("openb", {"name", "num_gpu", "gpu_milli"}),
    ("pollux", {"time", "application", "num_replicas"}),
    ("openb-nodes", {"sn", "gpu", "model"}),
    ("pai-machines", {"machine", "gpu_type", "cap_gpu"}),
    ("spot-nodes", {"gpu_model", "gpu_capacity_num"}),
    ("philly-machines", {"machineId", "number of GPUs"}),
    ("pai", {"job_name", "task_name", "inst_num", "plan_gpu"}),
)


def detect_format(path) -> str:
    """Guess the format from the file name and its header; TraceError if unknown."""
    p = Path(path)
    if not p.exists():
        raise TraceError("file not found", file=str(p))
    name = p.name.lower()
    ext = p.suffix.lower()
    if ext in (".json", ".jsonl") or name.startswith("cluster_job_log"):
        return "philly-log"
    if ext == ".trace":
        return "gavel"
    if ext in (".parquet", ".pq"):
        import pyarrow.parquet as pq
        try:
            cols = set(pq.ParquetFile(p).schema_arrow.names)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a TraceError
            raise TraceError(f"not a readable Parquet file: {exc}", file=str(p)) from None
    else:
        with open(p, "r", encoding="utf-8", errors="replace", newline="") as f:
            first = f.readline()
        if first.lstrip()[:1] in ("[", "{"):
            return "philly-log"          # JSON: the only JSON format
        if name.startswith("pai_task_table"):
            return "pai"
        if name.startswith("pai_machine_spec"):
            return "pai-machines"
        if first.count("\t") >= 9:
            return "gavel"
        cols = {c.strip() for c in next(csv.reader(io.StringIO(first)), [])}
    for fmt, sig in _HEADER_SIGNATURES:
        if sig <= cols:
            return fmt
    raise TraceError(f"cannot tell the trace format from the header ({', '.join(sorted(cols)[:10])}); "
                     f"pass a format: {', '.join(list(JOB_FORMATS) + list(NODE_FORMATS))}", file=str(p))


def read_trace(path, format: str | None = None, **options) -> TraceLoad:
    """Read a job trace in any supported format (see the table above)."""
    fmt = format or detect_format(path)
    if fmt in NODE_FORMATS:
        raise ConfigError(f"{path} is a node list ({fmt}); use read_nodes")
    if fmt not in JOB_FORMATS:
        raise ConfigError(f"unknown trace format {fmt!r}; known: {', '.join(list(JOB_FORMATS) + list(NODE_FORMATS))}")
    try:
        return JOB_FORMATS[fmt][1](path, **options)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            raise ConfigError(f"format {fmt!r}: {exc}") from None
        raise


def read_nodes(path, format: str | None = None, **options) -> ClusterLoad:
    """Read a node list in any supported format -> :class:`ClusterLoad`."""
    fmt = format or detect_format(path)
    if fmt not in NODE_FORMATS:
        raise ConfigError(f"{path}: format {fmt!r} is not a node list (node lists: {', '.join(NODE_FORMATS)})")
    try:
        return NODE_FORMATS[fmt][1](path, **options)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            raise ConfigError(f"format {fmt!r}: {exc}") from None
        raise
