"""The workload CSV of the Pollux (OSDI'21) and Sia (SOSP'23) simulators
(petuum/adaptdl ``simulator/workloads*/``, siasosp23/artifacts ``sia-simulator/workloads/``).

Format ``pollux``: ``name, time, application, num_replicas, batch_size``: arrival time (s),
the application (a model of the Pollux profiles: bert, cifar10, deepspeech2, imagenet, ncf,
yolov3), GPUs requested and the initial global batch size.

The file has no run time: in Pollux a job runs until its application reaches its target
metric.  The work must come from one of (checked in this order):

* ``iterations={application: n}`` - iterations per application;
* ``durations={application: seconds}`` - run time at the requested GPUs on the reference type;
* ``profiles=DIR`` - a Pollux profile folder (``DIR/<application>/validation-<batch>.csv``):
  the job's iterations are the ``iteration`` of the last row of the validation run at its batch
  size (the run that reached the target).

Without any, reading raises (``allow_missing_work=True`` - used by ``clustersim trace stats`` -
puts a placeholder of 1 iteration and marks the load ``work_known=False``).
Mapped to: ``model = application``, ``gpus = num_replicas``, ``batch_size``, ``arrival_s =
time`` on the trace clock (``origin="trace"``).  ``name`` is kept in ``extra``.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, TraceError
from .common import RowCheck, TraceLoad, TraceReport, build_load, csv_batches, gpu_count_checks, strings, to_number

__all__ = ["read_pollux", "POLLUX_COLUMNS", "profile_iterations"]

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def profile_iterations(profiles, application: str, batch_size: int) -> float | None:
    """Iterations of the Pollux validation run of ``application`` at ``batch_size`` (None if the
    profile folder has no such run)."""
    p = Path(profiles) / application / f"validation-{int(batch_size)}.csv"
    if not p.exists():
        return None
    last = None
    with open(p, newline="") as f:
        for row in csv.DictReader(f):
            last = row
    if last is None or "iteration" not in last:
        raise TraceError("validation profile has no rows or no 'iteration' column", file=str(p))
    try:
        return float(last["iteration"])
    except ValueError:
        raise TraceError(f"iteration {last['iteration']!r} is not a number", file=str(p), field="iteration") from None


def read_pollux(path, *, skip_invalid: bool = False, iterations: Mapping[str, float] | None = None,
                durations: Mapping[str, float] | None = None, profiles=None, allow_missing_work: bool = False,
                origin="trace") -> TraceLoad:
    """Read a Pollux/Sia workload CSV.  See the module docstring."""
    if profiles is not None and not Path(profiles).is_dir():
        raise ConfigError(f"profiles={profiles}: not a folder")
    path = Path(path)
    report = TraceReport(str(path), "pollux")
    have_work = iterations is not None or durations is not None or profiles is not None
    cache: dict[tuple[str, int], float | None] = {}
    parts = []
    for cols, rows, off in csv_batches(path, fmt_name="Pollux workload", report=report,
                                       required=("time", "application", "num_replicas"),
                                       optional=("name", "batch_size"), skip_invalid=skip_invalid):
        chk = RowCheck(report, rows, skip_invalid, off)
        n = len(rows)
        t = to_number(cols["time"], chk, "time", what="time in seconds")
        g = to_number(cols["num_replicas"], chk, "num_replicas", integer=True, what="GPU count")
        gpu_count_checks(chk, g, "num_replicas", cpu_jobs="error")
        bs = to_number(cols["batch_size"], chk, "batch_size", required=False, integer=True) \
            if "batch_size" in cols else np.zeros(n)
        bs = np.where(np.isnan(bs), 0, bs)
        chk.flag(bs < 0, "negative_batch_size", "batch_size", lambda i: f"batch size {bs[i]:g} < 0")
        app = strings(cols["application"])
        apps = app.to_numpy(zero_copy_only=False)
        chk.flag(apps == "", "missing_value", "application", lambda i: "missing application")
        it = np.full(n, np.nan)
        du = np.full(n, np.nan)
        if have_work:
            for i in np.flatnonzero(chk.ok):
                a = apps[i]
                if iterations is not None and a in iterations:
                    it[i] = float(iterations[a])
                elif durations is not None and a in durations:
                    du[i] = float(durations[a])
                elif profiles is not None:
                    key = (a, int(bs[i]))
                    if key not in cache:
                        cache[key] = profile_iterations(profiles, a, int(bs[i]))
                    if cache[key] is not None:
                        it[i] = cache[key]
            chk.flag(np.isnan(it) & np.isnan(du), "no_work", "application",
                     lambda i: f"no iterations/duration known for application {apps[i]!r} at batch size "
                               f"{int(bs[i])}")
        elif allow_missing_work:
            it[:] = 1.0
        else:
            raise TraceError("a Pollux workload has no run time: pass iterations={app: n}, "
                             "durations={app: s} or profiles=DIR", file=str(path), field="application")
        chk.flag(np.isfinite(it) & ~(it > 0), "nonpositive_work", "application", lambda i: f"iterations {it[i]:g}")
        chk.flag(np.isfinite(du) & ~(du > 0), "nonpositive_work", "application", lambda i: f"duration {du[i]:g}")
        keep = chk.done()
        mk = pa.array(keep)
        part = {"job_id": rows[keep], "submit": t[keep], "gpus": g[keep], "model": pc.filter(app, mk),
                "batch_size": bs[keep].astype(np.int32)}
        if not np.isnan(it[keep]).all() or np.isnan(du[keep]).all():
            part["iterations"] = it[keep]
        if not np.isnan(du[keep]).all():
            part["duration_s"] = du[keep]
        if "name" in cols:
            part["x_name"] = pc.filter(strings(cols["name"]), mk)
        parts.append(part)
    if not have_work and allow_missing_work:
        report.note("no run time in this format: iterations set to a placeholder of 1 (work unknown)")
    return build_load(parts, report, skip_invalid=skip_invalid, origin=origin, calendar=False,
                      arrival_field='time', work_field='application',
                      line_offset=2,
                      work_known=have_work)
