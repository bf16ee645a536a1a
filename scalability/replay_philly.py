"""Replay the full Philly job table (82,247 jobs; Jeon et al., ATC'19, via the Pollux authors'
flattened table) on the ``philly`` preset (the revised machine list, 3,205 GPUs).

Every job runs its recorded run time (sim.traces.replay_oracle: one "trace" model, linear in
GPUs, uniform GPU speed); only the scheduler changes.  Results and timings go to stdout and,
with --out, to a JSON file.  Usage::

    python scalability/replay_philly.py                       # fifo and tiresias, all jobs
    python scalability/replay_philly.py --policies fifo --limit 20000 --profile

The trace is read from $CLUSTERSIM_SHARED_DATA or ../shared/data (it is not part of the project).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

from sim.engine import EngineConfig
from sim.metrics import compare_table
from sim.policies import list_policies
from sim.presets import get_preset
from sim.traces import read_trace, replay

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
DEFAULT_TRACE = SHARED / "traces" / "philly" / "philly_jobs_pollux.parquet"
KEYS = ("n_jobs", "avg_jct_s", "median_jct_s", "p99_jct_s", "avg_wait_s", "p99_wait_s", "makespan_s", "utilization",
        "frag_idle_gpus", "frag_fgd_gpus", "decisions", "mean_decision_ms", "sim_wall_s", "sim_cpu_s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--cluster", default="philly")
    ap.add_argument("--policies", default="fifo,tiresias")
    ap.add_argument("--limit", type=int, default=None, help="only the first N jobs by arrival")
    ap.add_argument("--arrival-scale", type=float, default=1.0,
                    help="multiply every arrival time by this factor (< 1 compresses the trace: a what-if "
                         "at higher load; run times unchanged)")
    ap.add_argument("--profile", action="store_true", help="cProfile the simulation, print the top functions")
    ap.add_argument("--out", type=Path, default=None, help="write results as JSON")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    if not args.trace.exists():
        print(f"trace not found: {args.trace} (set CLUSTERSIM_SHARED_DATA)", file=sys.stderr)
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    known = list_policies()
    missing = [p for p in policies if p not in known]
    if missing:
        print(f"policies not registered: {', '.join(missing)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    load = read_trace(args.trace, "philly")
    t_load = time.perf_counter() - t0
    if args.limit or args.arrival_scale != 1.0:
        import pyarrow as pa
        from sim.jobs import JobTable
        t = load.jobs.table.slice(0, args.limit) if args.limit else load.jobs.table
        if args.arrival_scale != 1.0:
            i = t.schema.get_field_index("arrival_s")
            t = t.set_column(i, "arrival_s", pa.array(t.column("arrival_s").to_numpy() * args.arrival_scale))
        load.jobs = JobTable.from_table(t, load.jobs.source)
    cluster = get_preset(args.cluster) if not args.cluster.endswith(".csv") else \
        __import__("sim.traces", fromlist=["read_nodes"]).read_nodes(args.cluster).cluster
    print(f"trace: {args.trace}: {len(load.jobs)} jobs replayed, loaded in {t_load:.2f} s"
          + (f", arrivals x {args.arrival_scale:g}" if args.arrival_scale != 1.0 else ""))
    print("\n".join(load.report.lines()))
    print(f"cluster: {cluster.describe()}")
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    results = replay(load, cluster, policies, config=EngineConfig(progress=args.progress))
    if prof:
        prof.disable()
    summaries = {k: s for k, (_, s) in results.items()}
    print(compare_table(summaries))
    for k, s in summaries.items():
        print(f"{k}: " + ", ".join(f"{key} {s[key]:.4g}" if isinstance(s[key], float) else f"{key} {s[key]}"
                                   for key in KEYS))
    if prof:
        sio = io.StringIO()
        pstats.Stats(prof, stream=sio).sort_stats("cumulative").print_stats(25)
        print(sio.getvalue())
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"trace": str(args.trace), "jobs": len(load.jobs), "arrival_scale": args.arrival_scale,
               "load_s": t_load, "cluster": cluster.describe(),
               "policies": {k: {key: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                for key, v in s.items()} for k, s in summaries.items()}}
        args.out.write_text(json.dumps(doc, indent=2, default=float))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
