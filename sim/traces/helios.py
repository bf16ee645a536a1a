"""SenseTime Helios (Hu et al., SC'21; S-Lab-System-Group/HeliosData, CC BY 4.0).

Format ``helios``: ``cluster_log.csv`` of each cluster (Venus, Earth, Saturn, Uranus), one row
per Slurm job, columns ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time,
start_time, end_time, duration, queue`` (HeliosData README; later releases add ``jobname``,
extra columns are ignored).  Times ``YYYY-MM-DD HH:MM:SS``, no time zone; ``duration`` = end -
start and ``queue`` = start - submit, in seconds.

Mapping choices (keyword arguments):

* ``tz`` (default ``"Asia/Shanghai"``, our assumption: SenseTime's clusters; China has no
  daylight saving, so only the calendar origin depends on it).
* ``cpu_jobs``: jobs with ``gpu_num == 0`` (about half of Helios) are ``"drop"``-ped (default,
  counted) or ``"error"``.
* ``statuses``: keep only these ``state`` values (``COMPLETED``, ``CANCELLED``, ``FAILED``,
  ``TIMEOUT``, ``NODE_FAIL``; case-insensitive); default all (killed and failed jobs held
  their GPUs for their recorded run time, so a replay of the cluster's load keeps them).
* ``zero_duration``: ``"drop"`` (default, counted) or ``"error"``.
* ``vcs``: keep only these VCs.
* ``gpu_type``: the GPU type the run times are taken to be measured on (default
  :data:`TRACE_GPU_TYPE`).

Run time: ``duration`` where given, else ``end_time - start_time``.  GPU type: not in the trace;
:data:`TRACE_GPU_TYPE` (``v100``, our choice) is what :func:`sim.traces.replay_oracle` takes the
run times to be measured on.  Extra columns: ``trace_job_id``, ``state``, ``queue_s``,
``node_num``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .common import (TRACE_MODEL, RowCheck, TraceLoad, TraceReport, build_load, csv_batches,
                     gpu_count_checks, positive_work, status_filter, strings, to_number, to_time)

__all__ = ["read_helios", "TRACE_GPU_TYPE", "HELIOS_TZ", "read_slurm_like"]

#: GPU type Helios run times are taken to be measured on (our choice [I]; the trace has none).
TRACE_GPU_TYPE = "v100"
#: Time zone of Helios' naive timestamps (our assumption).
HELIOS_TZ = "Asia/Shanghai"

HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time",
                  "start_time", "end_time", "duration", "queue")


def read_slurm_like(path, *, fmt: str, fmt_name: str, optional: tuple, tz: str | None, skip_invalid: bool,
                    cpu_jobs: str, statuses, zero_duration: str, vcs, origin, model: str,
                    trace_gpu_type: str | None, extra_strings: tuple = ()) -> TraceLoad:
    """Shared reader of Slurm-style job logs (Helios, Acme)."""
    path = Path(path)
    report = TraceReport(str(path), fmt)
    required = ("gpu_num", "state", "submit_time")
    parts = []
    for cols, rows, off in csv_batches(path, fmt_name=fmt_name, report=report, required=required,
                                       optional=optional, skip_invalid=skip_invalid):
        chk = RowCheck(report, rows, skip_invalid, off)
        n = len(rows)
        submit = to_time(cols["submit_time"], chk, "submit_time", tz=tz)
        gpus = to_number(cols["gpu_num"], chk, "gpu_num", integer=True, what="GPU count")
        gpu_count_checks(chk, gpus, "gpu_num", cpu_jobs=cpu_jobs)
        start = to_time(cols["start_time"], chk, "start_time", tz=tz, required=False) \
            if "start_time" in cols else np.full(n, np.nan)
        end = to_time(cols["end_time"], chk, "end_time", tz=tz, required=False) \
            if "end_time" in cols else np.full(n, np.nan)
        dur = to_number(cols["duration"], chk, "duration", required=False) if "duration" in cols \
            else np.full(n, np.nan)
        dur = np.where(np.isnan(dur), end - start, dur)
        chk.flag(np.isnan(dur), "missing_value", "duration",
                 lambda i: "no run time: duration and start_time/end_time are missing")
        positive_work(chk, dur, "duration", zero=zero_duration)
        state = strings(cols["state"])
        status_filter(chk, state, statuses, field="state")
        vc = strings(cols["vc"]) if "vc" in cols else pa.array([""] * n, pa.string())
        if vcs is not None:
            keep_vc = {str(v) for v in vcs}
            vv = vc.to_numpy(zero_copy_only=False)
            chk.drop(np.array([v not in keep_vc for v in vv], bool), "vc not selected",
                     lambda i: f"vc {vv[i]!r} not in vcs")
        queue = to_number(cols["queue"], chk, "queue", required=False) if "queue" in cols else start - submit
        keep = chk.done()
        mk = pa.array(keep)
        part = {"job_id": rows[keep], "submit": submit[keep], "gpus": gpus[keep], "duration_s": dur[keep],
                "vc": pc.filter(vc, mk), "x_state": pc.filter(state, mk), "x_queue_s": queue[keep]}
        if "user" in cols:
            part["user"] = pc.filter(strings(cols["user"]), mk)
        if "job_id" in cols:
            part["x_trace_job_id"] = pc.filter(strings(cols["job_id"]), mk)
        if "node_num" in cols:
            part["x_node_num"] = to_number(pc.filter(cols["node_num"], mk),
                                           RowCheck(TraceReport(report.source, fmt), rows[keep], True),
                                           "node_num", required=False)
        for c in extra_strings:
            if c in cols:
                part["x_" + c] = pc.filter(strings(cols[c]), mk)
        parts.append(part)
    return build_load(parts, report, skip_invalid=skip_invalid, origin=origin, calendar=True, model=model,
                      trace_gpu_type=trace_gpu_type, line_offset=2)


def read_helios(path, *, skip_invalid: bool = False, tz: str | None = HELIOS_TZ, cpu_jobs: str = "drop",
                statuses: Iterable[str] | None = None, zero_duration: str = "drop",
                vcs: Iterable[str] | None = None, origin="first", model: str = TRACE_MODEL,
                gpu_type: str = TRACE_GPU_TYPE) -> TraceLoad:
    """Read a Helios ``cluster_log.csv``.  See the module docstring."""
    return read_slurm_like(path, fmt="helios", fmt_name="Helios cluster_log", optional=HELIOS_COLUMNS + ("jobname",),
                           tz=tz, skip_invalid=skip_invalid, cpu_jobs=cpu_jobs, statuses=statuses,
                           zero_duration=zero_duration, vcs=vcs, origin=origin, model=model,
                           trace_gpu_type=gpu_type)
