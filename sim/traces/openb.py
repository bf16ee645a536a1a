"""Alibaba ``cluster-trace-gpu-v2023`` "openb" pod lists (Weng et al., FGD, ATC'23; alibaba/clusterdata).

Format ``openb``: ``openb_pod_list_*.csv``, one row per pod (task): ``name, cpu_milli,
memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
scheduled_time`` (seconds on the trace clock, which starts at 0).

* Arrival = ``creation_time``; run time = ``deletion_time - scheduled_time`` (pods with
  ``pod_phase == Running`` were still running at the end of the trace: their run time is cut
  there).  Pods never scheduled (empty ``scheduled_time``; ``Pending``) are filtered and counted.
* GPUs: ``num_gpu`` whole GPUs, except that a pod with ``num_gpu == 1`` and ``gpu_milli < 1000``
  asks for a *share* of one GPU (``gpu_milli / 1000``).  The engine allocates whole GPUs, so
  ``fractional`` decides: ``"ceil"`` (default: the pod holds one whole GPU), ``"drop"``
  (filtered, counted) or ``"error"``.  The exact share is kept in ``extra`` (``gpu_share``).
* Pods with ``num_gpu == 0`` are CPU pods: ``cpu_jobs="drop"`` (default, counted) or ``"error"``.
* ``gpu_spec`` (allowed GPU types, ``|``-separated) has no place in the canonical job table yet:
  it is kept in ``extra`` and every pod that has one is counted as adjusted
  (``gpu_spec ignored``).
* ``statuses`` filters on ``pod_phase`` (default all scheduled pods).
* ``openb_pod_list_multigpu50.csv`` has no time columns (it is for packing experiments):
  reading it raises unless ``packing_duration_s`` is given, which makes every pod arrive at 0
  and run that long.

``qos`` and the CPU/memory requests are kept in ``extra``.  The recorded run times are not tied
to one GPU type (pods ran on the node types of :func:`sim.traces.nodes.read_openb_nodes`);
replay them with ``replay_oracle(..., speeds="uniform")``.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, TraceError
from .common import (TRACE_MODEL, RowCheck, TraceLoad, TraceReport, build_load, csv_batches,
                     gpu_count_checks, positive_work, read_header, status_filter, strings, to_number,
                     _check_file)

__all__ = ["read_openb_pods", "OPENB_POD_COLUMNS"]

OPENB_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                     "creation_time", "deletion_time", "scheduled_time")


def read_openb_pods(path, *, skip_invalid: bool = False, fractional: str = "ceil", cpu_jobs: str = "drop",
                    statuses: Iterable[str] | None = None, zero_duration: str = "drop",
                    packing_duration_s: float | None = None, origin="first",
                    model: str = TRACE_MODEL) -> TraceLoad:
    """Read an openb pod list.  See the module docstring."""
    path = _check_file(path)
    names = read_header(path)
    timed = "creation_time" in names
    if not timed and packing_duration_s is None:
        if "num_gpu" in names:
            raise TraceError("this openb pod list has no time columns (creation_time, deletion_time, "
                             "scheduled_time); it is meant for packing experiments - pass "
                             "packing_duration_s= to replay every pod from t=0", file=str(path),
                             field="creation_time")
    if packing_duration_s is not None and not (packing_duration_s > 0 and np.isfinite(packing_duration_s)):
        raise ConfigError(f"packing_duration_s must be > 0, got {packing_duration_s!r}")
    report = TraceReport(str(path), "openb")
    required = ("name", "num_gpu", "gpu_milli") + (("creation_time", "deletion_time") if timed and packing_duration_s is None else ())
    optional = ("cpu_milli", "memory_mib", "gpu_spec", "qos", "pod_phase", "scheduled_time", "creation_time",
                "deletion_time")
    parts = []
    for cols, rows, off in csv_batches(path, fmt_name="openb pod list", report=report, required=required,
                                       optional=optional, skip_invalid=skip_invalid):
        chk = RowCheck(report, rows, skip_invalid, off)
        n = len(rows)
        ng = to_number(cols["num_gpu"], chk, "num_gpu", integer=True, what="GPU count")
        milli = to_number(cols["gpu_milli"], chk, "gpu_milli", required=False, what="GPU milli-share")
        milli = np.where(np.isnan(milli), np.where(ng > 0, 1000.0, 0.0), milli)
        chk.flag(np.isfinite(milli) & ((milli < 0) | (milli > 1000)), "bad_gpu_milli", "gpu_milli",
                 lambda i: f"gpu_milli {milli[i]:g} outside 0..1000")
        chk.flag((ng > 1) & (milli < 1000), "bad_gpu_milli", "gpu_milli",
                 lambda i: f"a {int(ng[i])}-GPU pod with gpu_milli {milli[i]:g} (shares apply to 1-GPU pods)")
        share = np.where((ng == 1) & (milli < 1000), milli / 1000.0, ng)
        chk.flag((ng == 1) & (milli == 0), "zero_gpus", "gpu_milli", lambda i: "a 1-GPU pod with gpu_milli 0")
        gpu_count_checks(chk, ng, "num_gpu", cpu_jobs=cpu_jobs)
        if packing_duration_s is not None:
            submit = np.zeros(n)
            dur = np.full(n, float(packing_duration_s))
        else:
            submit = to_number(cols["creation_time"], chk, "creation_time", what="time in seconds")
            delete = to_number(cols["deletion_time"], chk, "deletion_time", what="time in seconds")
            sched = to_number(cols["scheduled_time"], chk, "scheduled_time", required=False,
                              what="time in seconds") if "scheduled_time" in cols else np.full(n, np.nan)
            chk.drop(np.isnan(sched) & np.isfinite(submit), "never scheduled (no scheduled_time)",
                     lambda i: "the pod was never scheduled")
            chk.flag(np.isfinite(sched) & np.isfinite(submit) & (sched < submit), "scheduled_before_creation",
                     "scheduled_time", lambda i: f"scheduled at {sched[i]:g} before its creation at {submit[i]:g}")
            dur = delete - sched
            positive_work(chk, np.where(chk.ok, dur, 1.0), "deletion_time", zero=zero_duration)
        if "pod_phase" in cols:
            status_filter(chk, cols["pod_phase"], statuses, field="pod_phase")
        spec = strings(cols["gpu_spec"]) if "gpu_spec" in cols else pa.array([""] * n, pa.string())
        has_spec = pc.not_equal(pc.utf8_trim_whitespace(spec), "").to_numpy(zero_copy_only=False)
        chk.adjust(has_spec, "gpu_spec ignored (no GPU-type constraint in the job table)",
                   lambda i: f"gpu_spec {spec[i].as_py()!r} not enforced")
        keep = chk.done()
        mk = pa.array(keep)
        part = {"job_id": rows[keep], "submit": submit[keep], "gpus": share[keep], "duration_s": dur[keep],
                "x_name": pc.filter(strings(cols["name"]), mk), "x_gpu_share": share[keep],
                "x_gpu_spec": pc.filter(spec, mk)}
        for c in ("qos", "pod_phase"):
            if c in cols:
                part["x_" + c] = pc.filter(strings(cols[c]), mk)
        for c in ("cpu_milli", "memory_mib"):
            if c in cols:
                part["x_" + c] = to_number(pc.filter(cols[c], mk), RowCheck(TraceReport(str(path), "openb"),
                                                                            rows[keep], True), c, required=False)
        if packing_duration_s is None and "scheduled_time" in cols:
            part["x_queue_s"] = (sched - submit)[keep]
        parts.append(part)
    if packing_duration_s is not None:
        report.note(f"packing mode: every pod arrives at 0 and runs {packing_duration_s:g} s")
    return build_load(parts, report, skip_invalid=skip_invalid, fractional=fractional,
                      origin="trace" if packing_duration_s is not None else origin, calendar=False, model=model,
                      trace_gpu_type=None, line_offset=2)
