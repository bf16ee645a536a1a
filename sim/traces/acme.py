"""Shanghai AI Lab Acme (Hu et al., NSDI'24; InternLM/AcmeTrace, CC BY 4.0).

Format ``acme``: ``trace_seren.csv`` / ``trace_kalos.csv``, one row per job, columns ``job_id,
user, node_num, gpu_num, cpu_num, type, state, submit_time, start_time, end_time, duration,
queue, gpu_time``; Kalos adds ``mem_per_pod_GB, shared_mem_per_pod, fail_time, stop_time``
(AcmeTrace README).  Times carry a UTC offset (``2023-03-01 00:18:22+08:00``; Kalos ``+00:00``),
so arrivals are exact; naive times, if any, are read in ``tz``.

Mapping choices: as :mod:`sim.traces.helios` (``cpu_jobs``, ``statuses``, ``zero_duration``).
Acme has no VCs (``vc`` is empty); the workload ``type`` (Pretrain, SFT, Evaluation, Debug,
Other) is kept as an extra column, and ``vc_from_type=True`` puts it in ``vc`` instead.
GPU type: the Acme clusters are A100 clusters, :data:`TRACE_GPU_TYPE` = ``a100``.
"""
from __future__ import annotations

from typing import Iterable

import pyarrow as pa

from .common import TRACE_MODEL, TraceLoad
from .helios import read_slurm_like

__all__ = ["read_acme", "TRACE_GPU_TYPE", "ACME_TZ"]

#: The Acme clusters (Seren, Kalos) are A100 clusters (AcmeTrace README).
TRACE_GPU_TYPE = "a100"
#: Time zone for naive timestamps (Shanghai AI Lab).
ACME_TZ = "Asia/Shanghai"

ACME_COLUMNS = ("job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state", "submit_time",
                "start_time", "end_time", "duration", "queue", "gpu_time")


def read_acme(path, *, skip_invalid: bool = False, tz: str | None = ACME_TZ, cpu_jobs: str = "drop",
              statuses: Iterable[str] | None = None, zero_duration: str = "drop", vc_from_type: bool = False,
              origin="first", model: str = TRACE_MODEL, gpu_type: str = TRACE_GPU_TYPE) -> TraceLoad:
    """Read an Acme ``trace_seren.csv`` / ``trace_kalos.csv``.  See the module docstring."""
    load = read_slurm_like(path, fmt="acme", fmt_name="Acme trace", optional=ACME_COLUMNS, tz=tz,
                           skip_invalid=skip_invalid, cpu_jobs=cpu_jobs, statuses=statuses,
                           zero_duration=zero_duration, vcs=None, origin=origin, model=model,
                           trace_gpu_type=gpu_type, extra_strings=("type",))
    if vc_from_type and "type" in load.extra.column_names:
        from ..jobs import JobTable
        t = load.jobs.table
        t = t.set_column(t.schema.get_field_index("vc"), "vc", load.extra.column("type").cast(pa.string()))
        load.jobs = JobTable.from_table(t, load.jobs.source)
    return load
