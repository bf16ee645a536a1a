"""Gavel's trace format (Narayanan et al., OSDI'20; stanford-futuredata/gavel ``scheduler/traces``).

Format ``gavel``: one job a line, 10 tab-separated fields, no header: ``job_type``
(``"<Model> (batch size B)"``, a key of Gavel's throughput table), ``command``,
``working_directory``, ``num_steps_arg``, ``needs_data_dir``, ``total_steps``, ``scale_factor``
(GPUs), ``priority_weight``, ``SLO`` (multiple of the isolated duration, -1 = none),
``arrival_time`` (s).

Mapped to: ``model = job_type``, ``iterations = total_steps`` (work is in steps, so no GPU-type
mapping is involved), ``gpus = scale_factor``, ``priority = priority_weight``,
``batch_size`` from the ``(batch size B)`` suffix, ``arrival_s = arrival_time`` on the trace's
own clock (``origin="trace"`` by default).  SLOs have no place in the canonical job table: they
are kept in ``extra`` and counted as adjusted (``SLO ignored``).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .common import RowCheck, TraceLoad, TraceReport, build_load, csv_batches, gpu_count_checks, strings, to_number

__all__ = ["read_gavel", "GAVEL_COLUMNS"]

GAVEL_COLUMNS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
                 "scale_factor", "priority_weight", "SLO", "arrival_time")
_BS = re.compile(r"\(batch size (\d+)\)")


def read_gavel(path, *, skip_invalid: bool = False, origin="trace") -> TraceLoad:
    """Read a Gavel ``.trace`` file.  See the module docstring."""
    path = Path(path)
    report = TraceReport(str(path), "gavel")
    parts = []
    for cols, rows, off in csv_batches(path, fmt_name="Gavel trace", report=report,
                                       required=("job_type", "total_steps", "scale_factor", "arrival_time"),
                                       optional=("priority_weight", "SLO"), column_names=GAVEL_COLUMNS,
                                       delimiter="\t", quoting=False, skip_invalid=skip_invalid):
        chk = RowCheck(report, rows, skip_invalid, off)
        jt = cols["job_type"]
        chk.flag(jt.is_null().to_numpy(zero_copy_only=False), "missing_value", "job_type", lambda i: "missing job type")
        steps = to_number(cols["total_steps"], chk, "total_steps", what="step count")
        chk.flag(np.isfinite(steps) & (steps <= 0), "nonpositive_work", "total_steps",
                 lambda i: f"total_steps {steps[i]:g} must be > 0")
        g = to_number(cols["scale_factor"], chk, "scale_factor", integer=True, what="GPU count")
        gpu_count_checks(chk, g, "scale_factor", cpu_jobs="error")
        arr = to_number(cols["arrival_time"], chk, "arrival_time", what="time in seconds")
        chk.flag(np.isinf(arr), "bad_number", "arrival_time", lambda i: "arrival time is not finite")
        prio = to_number(cols["priority_weight"], chk, "priority_weight", required=False) \
            if "priority_weight" in cols else np.ones(len(rows))
        prio = np.where(np.isnan(prio), 1.0, prio)
        chk.flag(prio < 0, "negative_priority", "priority_weight", lambda i: f"priority {prio[i]:g} < 0")
        slo = to_number(cols["SLO"], chk, "SLO", required=False) if "SLO" in cols else np.full(len(rows), -1.0)
        chk.adjust(np.isfinite(slo) & (slo > 0), "SLO ignored (no SLO column in the job table)",
                   lambda i: f"SLO {slo[i]:g} not enforced")
        keep = chk.done()
        mk = pa.array(keep)
        names = pc.filter(strings(jt), mk)
        bs = np.array([int(m.group(1)) if (m := _BS.search(s)) else 0 for s in names.to_pylist()], np.int32)
        parts.append({"job_id": rows[keep], "submit": arr[keep], "gpus": g[keep], "iterations": steps[keep],
                      "model": names, "batch_size": bs, "priority": prio[keep], "x_slo": slo[keep]})
    return build_load(parts, report, skip_invalid=skip_invalid, origin=origin, calendar=False,
                      arrival_field='arrival_time', work_field='total_steps', line_offset=1)
