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
import os
import sys
import time
from pathlib import Path


from sim.engine import EngineConfig
from sim.policies import list_policies
from sim.presets import get_preset
from sim.traces import read_trace

from replay_report import replay_and_report  # noqa: E402  (beside this script)

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
DEFAULT_TRACE = SHARED / "traces" / "philly" / "philly_jobs_pollux.parquet"


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
    replay_and_report(load, cluster, policies, profile=args.profile, out=args.out,
                      doc={"trace": str(args.trace), "jobs": len(load.jobs), "arrival_scale": args.arrival_scale,
               "load_s": t_load, "cluster": cluster.describe()},
                      config=EngineConfig(progress=args.progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
