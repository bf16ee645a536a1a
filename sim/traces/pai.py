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
        # the arithmetic on kept rows only: invalid ones may hold NaN or inf (inf x 0 warns)
        inst, pg, st, en = inst[keep], pg[keep], st[keep], en[keep]
        g = inst * pg / 100.0
        gi = inst * np.ceil(pg / 100.0 - 1e-9)
        gpu_task = g > 0
        gpu_type = strings(cols["gpu_type"]) if "gpu_type" in cols else pa.array([""] * len(rows))
        t_parts.append(pa.table({
            "job_name": pc.filter(strings(name), mk),
            "row": rows[keep], "gpus": g, "gpus_inst": gi,
            "start": np.where(gpu_task, st, np.nan), "end": np.where(gpu_task, en, np.nan),
            "first_start": st,
            "gpu_type": pc.if_else(pa.array(gpu_task), pc.filter(gpu_type, mk), pa.scalar(None, pa.string())),
        }))
    if not t_parts:
        raise TraceError("no task rows", file=str(task_path))
    tasks = pa.concat_tables(t_parts).combine_chunks()
    t_names = tasks.column("job_name").chunk(0) if tasks.num_rows else pa.array([], pa.string())
    bad_names = pa.concat_arrays([pc.cast(b, pa.string()) for b in bad_jobs]) if bad_jobs else pa.array([], pa.string())

    # ---- jobs: pos[t] = index of task t's job (hash lookups in Arrow, aggregation in numpy)
    status = user = None
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
        if not j_parts:
            raise TraceError("no job rows", file=str(job_path))
        jobs = pa.concat_tables(j_parts).combine_chunks()
        line_offset = 2 if _has_header(job_path, PAI_JOB_COLUMNS) else 1
        codes = pc.dictionary_encode(jobs.column("job_name")).chunk(0).indices.to_numpy()
        _, first = np.unique(codes, return_index=True)
        dup = np.ones(codes.size, bool)
        dup[first] = False
        if dup.any():
            jrows = jobs.column("job_row").to_numpy()
            k = int(np.flatnonzero(dup)[0])
            err = TraceError(f"job_name {jobs.column('job_name')[k].as_py()!r} appears more than once in the job "
                             f"table (line {int(jrows[k]) + line_offset})", file=str(job_path), row=int(jrows[k]),
                             field="job_name")
            if not skip_invalid:
                raise err
            report.skip("duplicate job_name", jrows[dup], str(err))
            jobs = jobs.filter(pa.array(~dup))
        j_names = jobs.column("job_name").chunk(0) if jobs.num_rows else pa.array([], pa.string())
        n = jobs.num_rows
        rows = jobs.column("job_row").to_numpy()
        pos = pc.fill_null(pc.index_in(t_names, value_set=j_names), -1).to_numpy(zero_copy_only=False)
        orphan = pos < 0
        if orphan.any():
            report.note(f"{int(orphan.sum())} task row(s) name a job that is not in the job table: ignored "
                        f"(first: task row {int(tasks.column('row')[int(np.flatnonzero(orphan)[0])].as_py())})")
        submit = jobs.column("submit").to_numpy()
        status, user = jobs.column("status").chunk(0), jobs.column("user").chunk(0)
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
        enc = pc.dictionary_encode(t_names)
        pos0 = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        trow = tasks.column("row").to_numpy()
        first_row = np.full(len(enc.dictionary), np.iinfo(np.int64).max)
        np.minimum.at(first_row, pos0, trow)
        order = np.argsort(first_row, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        pos = rank[pos0]
        j_names = pc.take(enc.dictionary, pa.array(order))
        rows = first_row[order]
        n = rows.size
        line_offset = None
        report.note("no job table: arrival = the job's first task start (the recorded queueing delay is lost)")
    valid = pos >= 0
    p = pos[valid]

    def tcol(name):
        return tasks.column(name).to_numpy()[valid]

    g = np.bincount(p, weights=tcol("gpus"), minlength=n)
    gi = np.bincount(p, weights=tcol("gpus_inst"), minlength=n)
    has_task = np.bincount(p, minlength=n) > 0
    s0 = np.full(n, np.inf)
    np.fmin.at(s0, p, tcol("start"))
    e1 = np.full(n, -np.inf)
    np.fmax.at(e1, p, tcol("end"))
    first_start = np.full(n, np.inf)
    np.fmin.at(first_start, p, tcol("first_start"))
    s0[~np.isfinite(s0)] = np.nan
    e1[~np.isfinite(e1)] = np.nan
    first_start[~np.isfinite(first_start)] = np.nan
    # GPU type of the first GPU task; several types = mixed
    tenc = pc.dictionary_encode(tasks.column("gpu_type").combine_chunks())   # 0 rows: no chunks
    tcode = pc.fill_null(tenc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)[valid]
    gp = tcode >= 0
    job_type = np.full(n, -1, np.int64)
    if gp.any():
        uj, fi = np.unique(p[gp], return_index=True)
        job_type[uj] = tcode[gp][fi]
        tmin = np.full(n, np.iinfo(np.int64).max)
        tmax = np.full(n, -1, np.int64)
        np.minimum.at(tmin, p[gp], tcode[gp])
        np.maximum.at(tmax, p[gp], tcode[gp])
        mixed = (tmax >= 0) & (tmin != tmax)
    else:
        mixed = np.zeros(n, bool)
    tdict = tenc.dictionary.to_pylist()
    type_idx = pa.array(job_type + 1)
    raw_names = pc.take(pa.array([""] + tdict, pa.string()), type_idx)
    mapped_names = pc.take(pa.array([""] + [map_gpu_type(t, tmap) if t else "" for t in tdict], pa.string()), type_idx)

    chk = RowCheck(report, rows, skip_invalid, line_offset)
    if len(bad_names):
        badm = pc.is_in(j_names, value_set=bad_names).to_numpy(zero_copy_only=False)
        chk.flag(badm, "invalid task row", "job_name", lambda i: "one of the job's task rows is invalid")
    if job_table is not None:
        chk.drop(~has_task, "no task rows", lambda i: "the job has no row in the task table")
    else:
        submit = first_start
        chk.drop(np.isnan(submit), "never started (no task start_time)", lambda i: "no task has a start_time")

    gpus = gi if fractional == "instance_ceil" else g
    gpu_count_checks(chk, gpus, "plan_gpu", cpu_jobs=cpu_jobs, allow_fraction=True)
    if status is not None:
        status_filter(chk, status, statuses)
    chk.drop(np.isnan(s0) | np.isnan(e1), "never ran (GPU task without start_time/end_time)",
             lambda i: "a GPU task has no start_time or end_time (waiting or running when the trace ended)")
    dur = e1 - s0
    positive_work(chk, np.where(chk.ok, dur, 1.0), "end_time", zero=zero_duration)
    chk.adjust(mixed, "mixed_gpu_types", lambda i: "GPU tasks ran on several GPU types; the first is used")
    if fractional == "instance_ceil":
        chk.adjust(g != gi, "fractional_gpus_rounded_up_per_instance",
                   lambda i: f"{g[i]:g} GPUs -> {gi[i]:g} (every instance rounded up)")
    keep = chk.done()
    mk = pa.array(keep)
    part = {"job_id": rows[keep], "submit": submit[keep], "gpus": gpus[keep], "duration_s": dur[keep],
            "x_job_name": pc.filter(j_names, mk), "x_gpus_requested": g[keep],
            "x_trace_gpu_type": pc.filter(raw_names, mk), "x_gpu_type": pc.filter(mapped_names, mk),
            "x_queue_s": (s0 - submit)[keep]}
    if status is not None:
        part["x_status"] = pc.filter(status, mk)
        part["user"] = pc.filter(user, mk)
    return build_load([part], report, skip_invalid=skip_invalid,
                      fractional="ceil" if fractional == "instance_ceil" else fractional,
                      origin=origin, calendar=False, model=model, trace_gpu_type=None,
                      line_offset=line_offset)
