"""Microsoft Philly (Jeon et al., ATC'19; msr-fiddle/philly-traces, CC BY 4.0).

Two formats:

``philly`` - the flattened job table of the Pollux authors (petuum/adaptdl
``simulator/traces/philly.csv``), as CSV or Parquet: ``timestamp`` (submission,
``YYYY-MM-DD HH:MM:SS``, Philly local time), ``duration`` (run time, s), ``num_gpus``,
``gpu_time`` (= duration x num_gpus), ``cluster`` (the VC hash).  One row per job.

``philly-log`` - the raw ``cluster_job_log`` JSON: a list of jobs ``{status, vc, jobid,
attempts: [{start_time, end_time, detail: [{ip, gpus: [...]}]}], submitted_time, user}``
(times ``YYYY-MM-DD HH:MM:SS`` or ``None``).  JSON Lines (one job per line) is accepted too.
Read incrementally: one job object at a time.

Mapping choices (keyword arguments):

* ``tz`` (default ``"America/Los_Angeles"``): the logs are US-Pacific local time; arrivals are
  computed in true elapsed seconds across the daylight-saving change of 2017-11-05.  ``None``
  reads the times as UTC (what a naive parser does; the 19,000-odd jobs submitted after the
  change then arrive one hour "late" relative to earlier ones).
* ``attempts`` (log only): ``"span"`` (default) - run time = last attempt's end - first
  attempt's start, the definition of the ATC'19 analysis notebook (retries and the gaps between
  them count as run time); ``"sum"`` - the sum of the attempts' run times (GPU time actually
  held); ``"last"`` - the last attempt only (the run that ended the job).
* ``gpus_from`` (log only): ``"first"`` (default, as the notebook) / ``"last"`` / ``"max"``
  attempt's GPU count (sum of ``len(gpus)`` over its ``detail`` entries).
* ``statuses``: keep only these final statuses (``Pass``, ``Killed``, ``Failed``; log only,
  case-insensitive); default all.  Others are filtered and counted.
* Jobs with no attempt, a last attempt without an end (still running when the log was taken)
  or attempts with missing times (logging errors the trace README documents) are filtered and
  counted by reason (``missing_times="error"`` makes the last kind invalid input instead).
* ``zero_duration``: ``"drop"`` (default, counted) or ``"error"``.
* ``vcs``: keep only these VCs (default all; others filtered, counted).
* ``gpu_type``: the GPU type the run times are taken to be measured on (default
  :data:`TRACE_GPU_TYPE`); it only matters to ``replay_oracle(speeds="relative")``.

The jobs carry the recorded run time as ``duration_s`` and model :data:`~sim.traces.TRACE_MODEL`;
Philly's GPU type is not in the trace: :data:`TRACE_GPU_TYPE` (``p100``, the ``philly`` preset's
type) is what :func:`sim.traces.replay_oracle` takes the durations to be measured on.
Extra columns: ``vc``; the log adds ``jobid``, ``status``, ``attempts``, ``queue_s`` (first start -
submission).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from .common import (TRACE_MODEL, RowCheck, TraceLoad, TraceReport, build_load, csv_batches,
                     gpu_count_checks, json_records, parquet_batches, positive_work, strings,
                     to_number, to_time)

__all__ = ["read_philly_table", "read_philly_log", "TRACE_GPU_TYPE", "PHILLY_TZ"]

#: GPU type the Philly run times are taken to be measured on (our choice, = sim.presets.PHILLY_GPU_TYPE).
TRACE_GPU_TYPE = "p100"
#: Philly's logs are in US-Pacific local time (PDT/PST, see the cluster_gpu_util example rows).
PHILLY_TZ = "America/Los_Angeles"

_TABLE_REQUIRED = ("timestamp", "duration", "num_gpus")
_TABLE_OPTIONAL = ("gpu_time", "cluster")


def _vc_filter(chk: RowCheck, vc: pa.Array, vcs: Iterable[str] | None) -> None:
    if vcs is None:
        return
    keep = {str(v) for v in vcs}
    vals = strings(vc).to_numpy(zero_copy_only=False)
    mask = np.array([v not in keep for v in vals], bool)
    chk.drop(mask, "vc not selected", lambda i: f"vc {vals[i]!r} not in vcs")


def read_philly_table(path, *, skip_invalid: bool = False, tz: str | None = PHILLY_TZ,
                      zero_duration: str = "drop", vcs: Iterable[str] | None = None,
                      origin="first", model: str = TRACE_MODEL, gpu_type: str = TRACE_GPU_TYPE) -> TraceLoad:
    """Read the flattened Philly job table (CSV or Parquet).  See the module docstring."""
    path = Path(path)
    report = TraceReport(str(path), "philly")
    parquet = path.suffix.lower() in (".parquet", ".pq")
    batches = (parquet_batches(path, fmt_name="Philly job table", report=report, required=_TABLE_REQUIRED,
                               optional=_TABLE_OPTIONAL) if parquet else
               csv_batches(path, fmt_name="Philly job table", report=report, required=_TABLE_REQUIRED,
                           optional=_TABLE_OPTIONAL, skip_invalid=skip_invalid))
    parts = []
    for cols, rows, off in batches:
        chk = RowCheck(report, rows, skip_invalid, off)
        submit = to_time(cols["timestamp"], chk, "timestamp", tz=tz)
        dur = to_number(cols["duration"], chk, "duration")
        gpus = to_number(cols["num_gpus"], chk, "num_gpus", integer=True, what="GPU count")
        gpu_count_checks(chk, gpus, "num_gpus", cpu_jobs="error")
        positive_work(chk, dur, "duration", zero=zero_duration)
        if "gpu_time" in cols:
            gt = to_number(cols["gpu_time"], chk, "gpu_time", required=False)
            off_ = np.isfinite(gt) & np.isfinite(dur) & np.isfinite(gpus) & \
                (np.abs(gt - dur * gpus) > 1e-6 * np.maximum(1.0, np.abs(gt)))
            chk.flag(off_, "inconsistent_gpu_time", "gpu_time",
                     lambda i: f"gpu_time {gt[i]:g} != duration x num_gpus = {dur[i] * gpus[i]:g}")
        vc = strings(cols.get("cluster")) if "cluster" in cols else pa.array([""] * len(rows), pa.string())
        _vc_filter(chk, vc, vcs)
        keep = chk.done()
        m = pa.array(keep)
        parts.append({"job_id": rows[keep], "submit": submit[keep], "gpus": gpus[keep],
                      "duration_s": dur[keep], "vc": pc.filter(vc, m)})
    if tz is None:
        report.note("times read as UTC (tz=None): no daylight-saving correction")
    return build_load(parts, report, skip_invalid=skip_invalid, origin=origin, calendar=True, model=model,
                      trace_gpu_type=gpu_type, line_offset=None if parquet else 2,
                      arrival_field="timestamp", work_field="duration")


# ------------------------------------------------------------------------------ raw job log
_ATTEMPT_CHOICES = ("span", "sum", "last")
_GPUS_FROM = ("first", "last", "max")
_BATCH = 20000


def read_philly_log(path, *, skip_invalid: bool = False, tz: str | None = PHILLY_TZ,
                    attempts: str = "span", gpus_from: str = "first",
                    statuses: Iterable[str] | None = None, missing_times: str = "drop",
                    zero_duration: str = "drop", vcs: Iterable[str] | None = None,
                    origin="first", model: str = TRACE_MODEL, gpu_type: str = TRACE_GPU_TYPE) -> TraceLoad:
    """Read Philly's raw ``cluster_job_log`` (JSON array or JSON Lines).  See the module docstring."""
    if attempts not in _ATTEMPT_CHOICES:
        raise ConfigError(f"attempts={attempts!r}: choose one of {', '.join(_ATTEMPT_CHOICES)}")
    if gpus_from not in _GPUS_FROM:
        raise ConfigError(f"gpus_from={gpus_from!r}: choose one of {', '.join(_GPUS_FROM)}")
    if missing_times not in ("drop", "error"):
        raise ConfigError(f"missing_times={missing_times!r}: use 'drop' or 'error'")
    path = Path(path)
    report = TraceReport(str(path), "philly-log")
    parts = []
    buf: list[tuple[int, object]] = []
    for idx, obj in json_records(path, report=report, skip_invalid=skip_invalid):
        buf.append((idx, obj))
        if len(buf) >= _BATCH:
            parts.append(_log_block(buf, report, skip_invalid, tz, attempts, gpus_from, statuses,
                                    missing_times, zero_duration, vcs))
            buf = []
    if buf:
        parts.append(_log_block(buf, report, skip_invalid, tz, attempts, gpus_from, statuses,
                                missing_times, zero_duration, vcs))
    return build_load(parts, report, skip_invalid=skip_invalid, origin=origin, calendar=True, model=model,
                      trace_gpu_type=gpu_type, arrival_field="submitted_time", work_field="attempts")


def _text(v):
    if v is None:
        return None
    return str(v)


def _log_block(buf, report, skip_invalid, tz, attempts, gpus_from, statuses, missing_times,
               zero_duration, vcs) -> dict:
    n = len(buf)
    rows = np.array([i for i, _ in buf], np.int64)
    chk = RowCheck(report, rows, skip_invalid)
    status, vc, jobid, user, submitted = [], [], [], [], []
    a_job, a_start, a_end, a_gpus = [], [], [], []
    n_att = np.zeros(n, np.int64)
    shape_err = np.zeros(n, bool)
    shape_msg: dict[int, tuple[str, str]] = {}
    for k, (_, obj) in enumerate(buf):
        if not isinstance(obj, dict):
            shape_err[k] = True
            shape_msg[k] = ("job", f"expected a JSON object per job, got {type(obj).__name__}")
            status.append(None), vc.append(None), jobid.append(None), user.append(None), submitted.append(None)
            continue
        status.append(_text(obj.get("status")))
        vc.append(_text(obj.get("vc")))
        jobid.append(_text(obj.get("jobid")))
        user.append(_text(obj.get("user")))
        submitted.append(_text(obj.get("submitted_time")))
        att = obj.get("attempts")
        if att is None and "attempts" not in obj:
            shape_err[k] = True
            shape_msg[k] = ("attempts", "missing key 'attempts'")
            continue
        if not isinstance(att, list):
            shape_err[k] = True
            shape_msg[k] = ("attempts", f"'attempts' must be a list, got {type(att).__name__}")
            continue
        for j, a in enumerate(att):
            if not isinstance(a, dict):
                shape_err[k] = True
                shape_msg[k] = (f"attempts[{j}]", "an attempt must be an object")
                break
            g = 0
            det = a.get("detail") or []
            if not isinstance(det, list):
                shape_err[k] = True
                shape_msg[k] = (f"attempts[{j}].detail", "'detail' must be a list")
                break
            for d in det:
                gl = d.get("gpus") if isinstance(d, dict) else None
                if not isinstance(gl, list):
                    shape_err[k] = True
                    shape_msg[k] = (f"attempts[{j}].detail", "each detail entry needs a list 'gpus'")
                    break
                g += len(gl)
            a_job.append(k)
            a_start.append(_text(a.get("start_time")))
            a_end.append(_text(a.get("end_time")))
            a_gpus.append(g)
        n_att[k] = len(att)
    if shape_err.any():
        fld = shape_msg[int(np.flatnonzero(shape_err)[0])][0]
        chk.flag(shape_err, "malformed_job", fld, lambda i: shape_msg[i][1])
    # times
    sub = to_time(pa.array(submitted, pa.string()), chk, "submitted_time", tz=tz, allow_none_text=True)
    a_job = np.asarray(a_job, np.int64)
    a_gpus = np.asarray(a_gpus, np.int64)
    m = a_job.size
    # attempt times: parse with a check whose rows are the attempt's job rows
    # (a private report: bad attempts are counted once per job below)
    achk = RowCheck(TraceReport(report.source, report.format), rows[a_job] if m else np.zeros(0, np.int64), True)
    a_s = to_time(pa.array(a_start, pa.string()), achk, "start_time", tz=tz, required=False, allow_none_text=True)
    a_e = to_time(pa.array(a_end, pa.string()), achk, "end_time", tz=tz, required=False, allow_none_text=True)
    for key, cnt in achk.report.adjusted.items():
        report.adjusted[key] += cnt
    bad_att = achk.bad
    if bad_att.any():
        badjob = np.zeros(n, bool)
        badjob[a_job[bad_att]] = True
        ex = next(iter(achk.report.examples.values()), "")
        chk.flag(badjob, "unparseable_time", "attempts.start_time/end_time",
                 lambda i: f"an attempt has an unparseable time ({ex.split(': ', 1)[-1]})")
    # no attempts
    chk.drop(n_att == 0, "no attempts (never scheduled)", lambda i: "the job has no recorded attempt")
    # per-job aggregates over attempts (attempts of a job are contiguous)
    first_idx = np.full(n, -1, np.int64)
    last_idx = np.full(n, -1, np.int64)
    if m:
        starts = np.r_[0, np.flatnonzero(np.diff(a_job)) + 1]
        ends = np.r_[starts[1:], m] - 1
        first_idx[a_job[starts]] = starts
        last_idx[a_job[ends]] = ends
    has = first_idx >= 0
    fs = np.where(has, a_s[np.maximum(first_idx, 0)] if m else np.nan, np.nan)
    le = np.where(has, a_e[np.maximum(last_idx, 0)] if m else np.nan, np.nan)
    ls = np.where(has, a_s[np.maximum(last_idx, 0)] if m else np.nan, np.nan)
    # still running: last attempt's end missing
    end_text_none = np.zeros(n, bool)
    if m:
        end_missing = np.array([e is None or e == "None" for e in a_end], bool)
        end_text_none[has] = end_missing[last_idx[has]]
    chk.drop(has & end_text_none, "still running (last attempt has no end_time)",
             lambda i: "the last attempt has no end_time: the job was running when the log was taken")
    # attempt-level missing times elsewhere
    if m:
        miss = np.isnan(a_s) | np.isnan(a_e)
        miss_job = np.zeros(n, bool)
        np.logical_or.at(miss_job, a_job, miss)
    else:
        miss_job = np.zeros(n, bool)
    if attempts == "span":
        need = np.isnan(fs) | np.isnan(le)
    elif attempts == "last":
        need = np.isnan(ls) | np.isnan(le)
    else:
        need = miss_job
    if missing_times == "drop":
        chk.drop(has & need, "attempt without start/end time (logging error)",
                 lambda i: "an attempt the run time needs has no start_time or end_time")
    else:
        chk.flag(has & need, "missing_value", "attempts.start_time/end_time",
                 lambda i: "an attempt the run time needs has no start_time or end_time")
    if attempts == "span":
        dur = le - fs
    elif attempts == "last":
        dur = le - ls
    else:
        dur = np.zeros(n)
        if m:
            ad = np.where(np.isnan(a_s) | np.isnan(a_e), 0.0, a_e - a_s)
            np.add.at(dur, a_job, ad)
    # GPUs
    gp = np.zeros(n)
    if m:
        if gpus_from == "first":
            gp[has] = a_gpus[first_idx[has]]
        elif gpus_from == "last":
            gp[has] = a_gpus[last_idx[has]]
        else:
            mx = np.zeros(n, np.int64)
            np.maximum.at(mx, a_job, a_gpus)
            gp = mx.astype(float)
    gpu_count_checks(chk, np.where(has, gp, 1.0), "attempts.detail.gpus", cpu_jobs="error")
    ok_now = chk.ok
    d_chk = np.where(ok_now, dur, 1.0)
    positive_work(chk, d_chk, "attempts", zero=zero_duration)
    st = pa.array(status, pa.string())
    if statuses is not None:
        from .common import status_filter
        status_filter(chk, st, statuses)
    vca = pa.array(vc, pa.string())
    _vc_filter(chk, vca, vcs)
    keep = chk.done()
    mk = pa.array(keep)
    queue = fs - sub
    return {"job_id": rows[keep], "submit": sub[keep], "gpus": gp[keep], "duration_s": dur[keep],
            "user": pc.filter(pa.array(user, pa.string()), mk), "vc": pc.filter(vca, mk),
            "x_jobid": pc.filter(pa.array(jobid, pa.string()), mk), "x_status": pc.filter(st, mk),
            "x_attempts": n_att[keep], "x_queue_s": queue[keep]}
