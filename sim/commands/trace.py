"""``clustersim trace``: look at and convert public cluster traces.

``clustersim trace stats FILE [--format F]`` prints what a user checks first: job count, time
span, GPU-count and run-time quantiles, and every row skipped, filtered or adjusted by reason.
Node lists print their nodes and GPUs per type.  ``clustersim trace convert FILE -o OUT``
writes the canonical job table (``.parquet`` or ``.csv``).  ``clustersim trace formats`` lists
the formats.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from . import help_line

_QS = (("min", 0.0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))


def register(sub) -> None:
    p = sub.add_parser("trace", help=help_line("trace"),
                       description="Read a public GPU-cluster trace or node list and print statistics, "
                                   "or convert it to the canonical job table.")
    tsub = p.add_subparsers(dest="trace_command", required=True)
    s = tsub.add_parser("stats", help="job count, time span, GPU and run-time quantiles, skip counts")
    _common(s)
    s.add_argument("--json", action="store_true", help="print the statistics as JSON")
    s.set_defaults(func=_stats)
    c = tsub.add_parser("convert", help="write the canonical job table (.parquet or .csv)")
    _common(c)
    c.add_argument("-o", "--out", type=Path, required=True, help="output job table (.parquet or .csv)")
    c.add_argument("--extra", type=Path, default=None,
                   help="also write the format-specific extra columns (Parquet), aligned by job_id")
    c.set_defaults(func=_convert)
    f = tsub.add_parser("formats", help="list the supported formats")
    f.set_defaults(func=_formats)


def _common(p) -> None:
    p.add_argument("file", type=Path, help="trace file or node list")
    p.add_argument("--format", default=None, help="format (default: detected); see 'clustersim trace formats'")
    p.add_argument("--skip-invalid", action="store_true",
                   help="skip invalid rows and count them by reason instead of stopping at the first")
    p.add_argument("--tz", default=None, help="time zone of naive timestamps (philly, helios, acme); 'none' = UTC")
    p.add_argument("--fractional", choices=("ceil", "instance_ceil", "drop", "error"), default=None,
                   help="fractional GPU requests (openb, pai): round up, drop or error")
    p.add_argument("--cpu-jobs", choices=("drop", "error"), default=None, help="jobs with 0 GPUs")
    p.add_argument("--statuses", default=None, help="keep only these final statuses (comma-separated)")
    p.add_argument("--attempts", choices=("span", "sum", "last"), default=None, help="philly-log: run time of retried jobs")
    p.add_argument("--job-table", type=Path, default=None, help="pai: the pai_job_table.csv to go with a task table")
    p.add_argument("-O", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other reader option (VALUE parsed as JSON when it can be)")


def _options(args) -> dict:
    from ._options import split_assignment
    opts: dict = {}
    if args.skip_invalid:
        opts["skip_invalid"] = True
    if args.tz is not None:
        opts["tz"] = None if args.tz.lower() in ("none", "utc-naive", "") else args.tz
    if args.fractional is not None:
        opts["fractional"] = args.fractional
    if args.cpu_jobs is not None:
        opts["cpu_jobs"] = args.cpu_jobs
    if args.statuses is not None:
        opts["statuses"] = [s.strip() for s in args.statuses.split(",") if s.strip()]
    if args.attempts is not None:
        opts["attempts"] = args.attempts
    if args.job_table is not None:
        opts["job_table"] = args.job_table
    for kv in args.option:
        key, value = split_assignment(kv, "--option")
        opts[key] = value
    return opts


def _load(args, *, for_stats: bool):
    from ..traces import NODE_FORMATS, detect_format, read_nodes, read_trace
    fmt = args.format or detect_format(args.file)
    opts = _options(args)
    if fmt in NODE_FORMATS:
        return fmt, read_nodes(args.file, fmt, **opts)
    if fmt == "pollux" and for_stats and not {"iterations", "durations", "profiles"} & set(opts):
        opts["allow_missing_work"] = True
    return fmt, read_trace(args.file, fmt, **opts)


def _fmt_s(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if x < 120:
        return f"{x:.0f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    if x < 172800:
        return f"{x / 3600:.1f} h"
    return f"{x / 86400:.1f} d"


def job_stats(load) -> dict:
    """Summary statistics of a :class:`~sim.traces.TraceLoad` (used by ``trace stats``)."""
    import datetime as dt
    jobs = load.jobs
    n = len(jobs)
    out: dict = {"format": load.report.format, "file": load.report.source, "rows_read": load.report.rows,
                 "jobs": n, "skipped": dict(load.report.skipped), "filtered": dict(load.report.filtered),
                 "adjusted": dict(load.report.adjusted)}
    if n == 0:
        return out
    arr = jobs.arrival_s
    span = float(arr.max() - arr.min())
    out["first_arrival_s"] = float(arr.min())
    out["last_arrival_s"] = float(arr.max())
    out["span_s"] = span
    if load.calendar:
        def iso(t):
            return dt.datetime.fromtimestamp(load.origin_s + t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        out["first_arrival"] = iso(float(arr.min()))
        out["last_arrival"] = iso(float(arr.max()))
    out["arrivals_per_hour"] = n / (span / 3600) if span > 0 else None    # one instant: no rate
    g = jobs.gpus.astype(float)
    out["gpus_quantiles"] = {k: float(np.quantile(g, q)) for k, q in _QS}
    out["gpus_mean"] = float(g.mean())
    vals, cnt = np.unique(jobs.gpus, return_counts=True)
    out["gpus_share"] = {int(v): float(c / n) for v, c in zip(vals, cnt)}
    dur = jobs.duration_s
    it = jobs.iterations
    if load.work_known and np.isfinite(dur).any():
        d = dur[np.isfinite(dur)]
        out["duration_quantiles_s"] = {k: float(np.quantile(d, q)) for k, q in _QS}
        out["duration_mean_s"] = float(d.mean())
        out["gpu_hours"] = float(np.nansum(dur * g) / 3600)
    if load.work_known and np.isfinite(it).any():
        w = it[np.isfinite(it)]
        out["iterations_quantiles"] = {k: float(np.quantile(w, q)) for k, q in _QS}
    out["work_known"] = bool(load.work_known)
    out["users"] = int(len(set(jobs.table.column("user").to_pylist())))
    out["vcs"] = int(len(set(jobs.table.column("vc").to_pylist())))
    out["models"] = int(len(set(jobs.table.column("model").to_pylist())))
    return out


def _print_job_stats(load, st: dict) -> None:
    print(f"format: {st['format']}")
    for line in load.report.lines():
        print(line)
    if st["jobs"] == 0:
        return
    if "first_arrival" in st:
        span = f"{st['first_arrival']} .. {st['last_arrival']}"
    else:
        span = f"t = {st['first_arrival_s']:g} .. {st['last_arrival_s']:g} s"
    rate = st["arrivals_per_hour"]
    print(f"arrivals: {span} ({_fmt_s(st['span_s'])})" + (f", {rate:.1f} jobs/h" if rate is not None else ""))
    q = st["gpus_quantiles"]
    print("GPUs per job: " + ", ".join(f"{k} {v:g}" for k, v in q.items()) + f"; mean {st['gpus_mean']:.2f}")
    share = sorted(st["gpus_share"].items())
    print("  share: " + ", ".join(f"{k}: {v * 100:.1f}%" for k, v in share[:12]) + (" ..." if len(share) > 12 else ""))
    if "duration_quantiles_s" in st:
        d = st["duration_quantiles_s"]
        print("run time: " + ", ".join(f"{k} {_fmt_s(v)}" for k, v in d.items()) +
              f"; mean {_fmt_s(st['duration_mean_s'])}")
        print(f"GPU time: {st['gpu_hours']:.0f} GPU-hours")
    if "iterations_quantiles" in st:
        print("work (iterations): " + ", ".join(f"{k} {v:g}" for k, v in st["iterations_quantiles"].items()))
    if not st.get("work_known", True):
        print("run time: not in this format (pass iterations=/durations=/profiles= with -O)")
    print(f"users: {st['users']}, VCs: {st['vcs']}, models: {st['models']}")


def _stats(args) -> None:
    from ..traces import ClusterLoad
    fmt, load = _load(args, for_stats=True)
    if isinstance(load, ClusterLoad):
        c = load.cluster
        doc = {"format": fmt, "file": str(args.file), "nodes": c.n_nodes, "gpus": c.total_gpus,
               "gpus_by_type": c.gpus_by_type(),
               "gpus_per_node": {int(k): int(v) for k, v in zip(*np.unique(c.node_gpus, return_counts=True))},
               "report": load.report.to_dict()}
        if args.json:
            print(json.dumps(doc, indent=2))
            return
        print(f"format: {fmt}")
        for line in load.report.lines():
            print(line)
        print(f"cluster: {c.describe()}")
        print("nodes by GPUs per node: " + ", ".join(f"{k} GPUs: {v}" for k, v in doc["gpus_per_node"].items()))
        return
    st = job_stats(load)
    if args.json:
        st["report"] = load.report.to_dict()
        print(json.dumps(st, indent=2, default=float))
        return
    _print_job_stats(load, st)


def _convert(args) -> None:
    from ..errors import ConfigError
    from ..fsio import atomic_path, atomic_write_text
    from ..traces import ClusterLoad
    for out in (args.out, args.extra):
        if out is not None and not out.parent.is_dir():
            raise ConfigError(f"-o/--extra {out}: the folder {out.parent} does not exist")
        if out is not None and out.is_dir():
            raise ConfigError(f"-o/--extra {out} is a directory, expected a file name")
    fmt, load = _load(args, for_stats=False)
    if isinstance(load, ClusterLoad):
        from ..cluster import cluster_to_toml
        if args.out.suffix.lower() != ".toml":
            raise ConfigError(f"{args.file} is a node list: convert it to a cluster TOML file (-o NAME.toml)")
        atomic_write_text(args.out, cluster_to_toml(load.cluster))
        print(f"wrote {args.out}: {load.cluster.describe()}")
        for line in load.report.lines():
            print(line)
        return
    load.jobs.write(args.out)
    if args.extra is not None:
        import pyarrow.parquet as pq
        with atomic_path(args.extra) as tmp:
            pq.write_table(load.extra, tmp)
    for line in load.report.lines():
        print(line)
    print(f"wrote {args.out}: {len(load.jobs)} jobs (arrival 0 = {load.origin_label()})"
          + (f", extra columns to {args.extra}" if args.extra is not None else ""))


def _formats(args) -> None:
    from ..traces import JOB_FORMATS, NODE_FORMATS
    print("job traces:")
    for k, (d, _) in JOB_FORMATS.items():
        print(f"  {k:16s} {d}")
    print("node lists:")
    for k, (d, _) in NODE_FORMATS.items():
        print(f"  {k:16s} {d}")
