"""``clustersim run``: policies side by side on one cluster and workload."""
from __future__ import annotations

import sys
from pathlib import Path

from ..scenario import DEFAULT_CLUSTER, DEFAULT_JOBS, DEFAULT_LOAD, DEFAULT_POLICIES, Scenario


def register(sub) -> None:
    run = sub.add_parser("run", help="run policies side by side (no arguments: the default scenario)")
    run.add_argument("--cluster", default=DEFAULT_CLUSTER,
                     help="preset name, uniform:nodes=N,gpus=G,type=T, or a TOML file")
    run.add_argument("--workload", default="generate", help="'generate' or a job table (Parquet/CSV)")
    run.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="jobs to generate")
    run.add_argument("--load", type=float, default=DEFAULT_LOAD, help="arrival rate, jobs per hour")
    run.add_argument("--sizes", choices=("gavel", "philly", "single"), default="gavel")
    run.add_argument("--durations", choices=("gavel", "philly"), default="gavel")
    run.add_argument("--policy", default=",".join(DEFAULT_POLICIES), help="NAME[,NAME...]")
    run.add_argument("--placement", choices=("consolidated", "spread"), default="consolidated")
    run.add_argument("--seed", type=int, default=0, help="generator seed, an integer in [0, 2**63)")
    run.add_argument("--round", type=float, default=None, dest="round_s",
                     help="scheduling round period in seconds: 0 (no periodic rounds) or >= 1 "
                          "(default: each policy's own)")
    run.add_argument("--restart-delay", type=float, default=None,
                     help="restart delay in seconds (default: per model)")
    run.add_argument("--throughputs", default=None,
                     help="'replay' (trace jobs run their recorded time), a Gavel-format "
                          "throughput JSON, or a calib.toml from clustersim calibrate")
    run.add_argument("--out", type=Path, default=None, help="write summary.json, jobs and plots here")
    run.add_argument("--no-progress", action="store_true")
    run.set_defaults(func=_run)


def _run(args) -> None:
    from ..metrics import compare_table, summary
    from ..limits import check_seed
    from ..scenario import OutputWriter

    sc = Scenario(cluster=args.cluster, workload=args.workload, jobs=args.jobs, load=args.load,
                  sizes=args.sizes, durations=args.durations,
                  policies=tuple(p.strip() for p in args.policy.split(",") if p.strip()),
                  placement=args.placement, seed=args.seed, round_s=args.round_s,
                  restart_delay_s=args.restart_delay, throughputs=args.throughputs,
                  progress=not args.no_progress and sys.stderr.isatty())
    check_seed(args.seed, "--seed")
    sc.engine_config()                     # bad --round / --restart-delay: fail before any work
    writer = OutputWriter(args.out, sc) if args.out is not None else None
    cluster, table, _ = sc.build()
    print(f"cluster: {cluster.describe()}")
    print(f"workload: {len(table)} jobs ({args.workload}), seed {args.seed}")
    results = sc.run(built=(cluster, table, _), on_result=writer.add if writer else None)
    if writer is not None:
        summaries = writer.finish(results)
        print(f"wrote {args.out}/summary.json, per-policy jobs.parquet and plots")
    else:
        summaries = {name: summary(res) for name, res in results.items()}
    print(compare_table(summaries))
