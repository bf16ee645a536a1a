"""Alibaba PAI ``cluster-trace-gpu-v2020`` (Weng et al., NSDI'22; alibaba/clusterdata, CC BY 4.0).

Format ``pai``: the task table ``pai_task_table.csv`` (``job_name, task_name, inst_num, status,
start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``), optionally with the job table
``pai_job_table.csv`` (``job_name, inst_id, user, status, start_time, end_time``).  The official
CSVs have **no header line** (the column lists ship as ``.header`` files); a header line, if
present, is recognized.  Times are seconds on a shifted clock (the trace README: same time of
day and weekday as the original in UTC+8, fake dates).

A job is the group of its task rows (same ``job_name``):

* GPUs = sum over its tasks of ``inst_num x plan_gpu / 100`` (``plan_gpu`` is in percent of a
  GPU; a missing ``plan_gpu`` is 0, a CPU task).  Fractional totals follow ``fractional``:
  ``"ceil"`` (default: round the job's total up), ``"instance_ceil"`` (round every instance up
  to whole GPUs, then sum: what a scheduler that gives each instance its own GPUs needs),
  ``"drop"`` (filtered, counted) or ``"error"``.
* Run time = latest ``end_time`` - earliest ``start_time`` over its GPU tasks.
* Arrival = the job table's ``start_time`` (the submission time); without a job table, the
  earliest task start (then the recorded queueing delay is lost - noted in the report).
* ``gpu_type`` of the job = that of its first GPU task (jobs whose GPU tasks ran on several
  types are counted as adjusted ``mixed_gpu_types``); kept in ``extra`` as given and mapped
  through ``gpu_type_map`` (default :data:`sim.traces.nodes.PAI_GPU_TYPES`).  The job table has
  no VCs; ``user`` is kept.
* ``statuses`` filters on the job status (``Terminated``, ``Failed``, ``Running``,
  ``Waiting``; default all that have a run time).  ``cpu_jobs``: ``"drop"`` (default) or
  ``"error"``.  Jobs with no task row, or whose GPU tasks never started or ended, are filtered
  and counted.  An invalid task row makes its whole job invalid (counted once per task row and
  once per job).

``job_id`` is the job's row in the job table (without one: its first task row).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, TraceError
from .common import (TRACE_MODEL, RowCheck, TraceLoad, TraceReport, build_load, csv_batches,
                     gpu_count_checks, positive_work, read_header, status_filter, strings, to_number,
                     _check_file)

__all__ = ["read_pai", "PAI_TASK_COLUMNS", "PAI_JOB_COLUMNS"]

PAI_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu",
                    "plan_mem", "plan_gpu", "gpu_type")
PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
_FRACTIONAL = ("ceil", "instance_ceil", "drop", "error")


def _has_header(path: Path, names) -> bool:
    first = read_header(path)
    return bool(first) and first[0].strip() == names[0]


def _batches(path: Path, names, fmt_name, report, required, optional, skip_invalid):
    header = _has_header(_check_file(path), names)
    return csv_batches(path, fmt_name=fmt_name, report=report, required=required, optional=optional,
                       column_names=None if header else names, skip_invalid=skip_invalid)


def read_pai(task_table, job_table=None, *, skip_invalid: bool = False, fractional: str = "ceil",
             statuses: Iterable[str] | None = None, cpu_jobs: str = "drop", zero_duration: str = "drop",
             gpu_type_map: Mapping[str, str] | None = None, origin="first",
             model: str = TRACE_MODEL) -> TraceLoad:
    """Read the PAI task table (and the job table).  See the module docstring."""
    if fractional not in _FRACTIONAL:
        raise ConfigError(f"fractional={fractional!r}: choose one of {', '.join(_FRACTIONAL)}")
    from .nodes import PAI_GPU_TYPES, map_gpu_type
    tmap = dict(PAI_GPU_TYPES if gpu_type_map is None else gpu_type_map)
    task_path = Path(task_table)
    treport = TraceReport(str(task_path), "pai-task")
    # ---- tasks
    t_parts = []
    bad_jobs: list[pa.Array] = []
    for cols, rows, off in _batches(task_path, PAI_TASK_COLUMNS, "PAI task table", treport,
                                    ("job_name", "inst_num", "start_time", "end_time", "plan_gpu"),
                                    ("gpu_type", "status", "task_name"), skip_invalid):
        chk = RowCheck(treport, rows, skip_invalid, off)
        name = cols["job_name"]
        chk.flag(name.is_null().to_numpy(zero_copy_only=False), "missing_value", "job_name", lambda i: "missing job_name")
        inst = to_number(cols["inst_num"], chk, "inst_num", integer=True, what="instance count")
        chk.flag(np.isfinite(inst) & (inst < 0), "negative_instances", "inst_num",
                 lambda i: f"negative instance count {inst[i]:g}")
        pg = to_number(cols["plan_gpu"], chk, "plan_gpu", required=False, what="GPU percentage")
        pg = np.where(np.isnan(pg), 0.0, pg)
        chk.flag(pg < 0, "negative_gpus", "plan_gpu", lambda i: f"negative plan_gpu {pg[i]:g}")
        st = to_number(cols["start_time"], chk, "start_time", required=False, what="time in seconds")
        en = to_number(cols["end_time"], chk, "end_time", required=False, what="time in seconds")
        chk.flag(np.isfinite(st) & np.isfinite(en) & (en < st), "negative_duration", "end_time",
                 lambda i: f"task ends ({en[i]:g}) before it starts ({st[i]:g})")
        keep = chk.done()
        if (~keep).any():
            bad_jobs.append(pc.filter(name, pa.array(~keep)))
        mk = pa.array(keep)
        g = inst * pg / 100.0
        gi = inst * np.ceil(pg / 100.0 - 1e-9)
        gpu_task = g > 0
        t_parts.append(pa.table({
            "job_name": pc.filter(strings(name), mk),
            "row": rows[keep], "gpus": g[keep], "gpus_inst": gi[keep],
            "start": np.where(gpu_task, st, np.nan)[keep], "end": np.where(gpu_task, en, np.nan)[keep],
            "first_start": st[keep],
            "gpu_type": pc.filter(pc.if_else(pa.array(gpu_task), strings(cols["gpu_type"]) if "gpu_type" in cols
                                             else pa.array([""] * len(rows)), pa.scalar(None, pa.string())), mk),
        }))
    if not t_parts:
        raise TraceError("no task rows", file=str(task_path))
    tasks = pa.concat_tables(t_parts)
    # NaN -> null so min/max skip them
    for c in ("start", "end", "first_start"):
        a = tasks.column(c)
        tasks = tasks.set_column(tasks.schema.get_field_index(c), c, pc.if_else(pc.is_nan(a), pa.scalar(None, pa.float64()), a))
    agg = tasks.group_by("job_name", use_threads=False).aggregate([
        ("gpus", "sum"), ("gpus_inst", "sum"), ("start", "min"), ("end", "max"), ("first_start", "min"),
        ("row", "min"), ("gpu_type", "first"), ("gpu_type", "count_distinct")])
    bad_names = pa.concat_arrays([pc.cast(b, pa.string()) for b in bad_jobs]) if bad_jobs else pa.array([], pa.string())

    # ---- jobs
    if job_table is not None:
        job_path = Path(job_table)
        report = TraceReport(str(job_path), "pai")
        j_parts = []
        for cols, rows, off in _batches(job_path, PAI_JOB_COLUMNS, "PAI job table", report,
                                        ("job_name", "status", "start_time"), ("user", "end_time", "inst_id"),
                                        skip_invalid):
            chk = RowCheck(report, rows, skip_invalid, off)
            name = cols["job_name"]
            chk.flag(name.is_null().to_numpy(zero_copy_only=False), "missing_value", "job_name", lambda i: "missing job_name")
            sub = to_number(cols["start_time"], chk, "start_time", what="time in seconds")
            keep = chk.done()
            mk = pa.array(keep)
            j_parts.append(pa.table({"job_name": pc.filter(strings(name), mk), "job_row": rows[keep],
                                     "submit": sub[keep],
                                     "user": pc.filter(strings(cols.get("user")) if "user" in cols
                                                       else pa.array([""] * len(rows)), mk),
                                     "status": pc.filter(strings(cols["status"]), mk)}))
        jobs = pa.concat_tables(j_parts) if j_parts else None
        if jobs is None:
            raise TraceError("no job rows", file=str(job_path))
        names_np = jobs.column("job_name").to_numpy()
        _, first = np.unique(names_np, return_index=True)
        dup = np.ones(len(names_np), bool)
        dup[first] = False
        if dup.any():
            jrows = jobs.column("job_row").to_numpy()
            k = int(np.flatnonzero(dup)[0])
            err = TraceError(f"job_name {names_np[k]!r} appears more than once in the job table (line "
                             f"{int(jrows[k]) + (2 if _has_header(job_path, PAI_JOB_COLUMNS) else 1)})",
                             file=str(job_path), row=int(jrows[k]), field="job_name")
            if not skip_invalid:
                raise err
            report.skip("duplicate job_name", jrows[dup], str(err))
            jobs = jobs.filter(pa.array(~dup))
        merged = jobs.join(agg, keys="job_name", join_type="left outer", use_threads=False)
        merged = merged.sort_by("job_row")
        rows = merged.column("job_row").to_numpy()
        line_offset = 1 if not _has_header(job_path, PAI_JOB_COLUMNS) else 2
        report.note(f"task table {task_path}: {treport.rows} task rows read"
                    + (f", {treport.n_skipped} skipped as invalid" if treport.n_skipped else ""))
        for k, v in treport.skipped.items():
            report.skipped[f"task row: {k}"] += v
            key = f"skipped:{k}"
            if key in treport.examples:
                report.examples.setdefault(f"skipped:task row: {k}", treport.examples[key])
    else:
        report = treport
        report.format = "pai"
        merged = agg.sort_by("row_min")
        rows = merged.column("row_min").to_numpy()
        line_offset = None
        report.note("no job table: arrival = the job's first task start (the recorded queueing delay is lost)")
    n = merged.num_rows
    chk = RowCheck(report, rows, skip_invalid, line_offset)
    # jobs with an invalid task row
    if len(bad_names):
        badm = pc.is_in(merged.column("job_name"), value_set=bad_names).to_numpy(zero_copy_only=False)
        chk.flag(badm, "invalid task row", "job_name", lambda i: "one of the job's task rows is invalid")
    if job_table is not None:
        no_task = merged.column("gpus_sum").is_null().to_numpy(zero_copy_only=False)
        chk.drop(no_task, "no task rows", lambda i: "the job has no row in the task table")
        submit = merged.column("submit").to_numpy(zero_copy_only=False).astype(float)
        status = merged.column("status")
        user = merged.column("user")
    else:
        submit = pc.fill_null(merged.column("first_start_min"), np.nan).to_numpy(zero_copy_only=False).astype(float)
        chk.drop(np.isnan(submit), "never started (no task start_time)", lambda i: "no task has a start_time")
        status = None
        user = None

    def col(name, fill=np.nan):
        return pc.fill_null(merged.column(name), fill).to_numpy(zero_copy_only=False).astype(float)

    g = col("gpus_sum", 0.0)
    gi = col("gpus_inst_sum", 0.0)
    gpus = gi if fractional == "instance_ceil" else g
    gpu_count_checks(chk, gpus, "plan_gpu", cpu_jobs=cpu_jobs, allow_fraction=True)
    if status is not None:
        status_filter(chk, status, statuses)
    s0, e1 = col("start_min"), col("end_max")
    chk.drop(np.isnan(s0) | np.isnan(e1), "never ran (GPU task without start_time/end_time)",
             lambda i: "a GPU task has no start_time or end_time (waiting or running when the trace ended)")
    dur = e1 - s0
    positive_work(chk, np.where(chk.ok, dur, 1.0), "end_time", zero=zero_duration)
    mixed = col("gpu_type_count_distinct", 0.0) > 1
    chk.adjust(mixed, "mixed_gpu_types", lambda i: "GPU tasks ran on several GPU types; the first is used")
    if fractional == "instance_ceil":
        chk.adjust(g != gi, "fractional_gpus_rounded_up_per_instance",
                   lambda i: f"{g[i]:g} GPUs -> {gi[i]:g} (every instance rounded up)")
    keep = chk.done()
    mk = pa.array(keep)
    raw_type = pc.fill_null(merged.column("gpu_type_first"), "").combine_chunks()
    mapped = pa.array([map_gpu_type(t, tmap) if t else "" for t in pc.unique(raw_type).to_pylist()], pa.string())
    idx = pc.index_in(raw_type, value_set=pc.unique(raw_type))
    mapped_col = pc.take(mapped, idx)
    part = {"job_id": rows[keep], "submit": submit[keep], "gpus": gpus[keep], "duration_s": dur[keep],
            "x_job_name": pc.filter(merged.column("job_name"), mk).combine_chunks(),
            "x_gpus_requested": g[keep], "x_trace_gpu_type": pc.filter(raw_type, mk),
            "x_gpu_type": pc.filter(mapped_col, mk), "x_queue_s": (s0 - submit)[keep]}
    if status is not None:
        part["x_status"] = pc.filter(status, mk).combine_chunks()
        part["user"] = pc.filter(user, mk).combine_chunks()
    return build_load([part], report, skip_invalid=skip_invalid,
                      fractional="ceil" if fractional == "instance_ceil" else fractional,
                      origin=origin, calendar=False, model=model, trace_gpu_type=None,
                      line_offset=line_offset)
