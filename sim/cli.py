"""The ``clustersim`` command."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import SimError
from .scenario import DEFAULT_CLUSTER, DEFAULT_JOBS, DEFAULT_LOAD, DEFAULT_POLICIES, Scenario


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clustersim", description="Simulate GPU cluster schedulers.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run policies side by side (no arguments: the default scenario)")
    run.add_argument("--cluster", default=DEFAULT_CLUSTER,
                     help="preset name, uniform:nodes=N,gpus=G,type=T, or a TOML file")
    run.add_argument("--workload", default="generate", help="'generate' or a job table (Parquet/CSV)")
    run.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="jobs to generate")
    run.add_argument("--load", type=float, default=DEFAULT_LOAD, help="arrival rate, jobs per hour")
    run.add_argument("--sizes", choices=("gavel", "philly"), default="gavel")
    run.add_argument("--durations", choices=("gavel", "philly"), default="gavel")
    run.add_argument("--policy", default=",".join(DEFAULT_POLICIES), help="NAME[,NAME...]")
    run.add_argument("--placement", choices=("consolidated", "spread"), default="consolidated")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--round", type=float, default=None, dest="round_s",
                     help="scheduling round period in seconds (default: each policy's own)")
    run.add_argument("--restart-delay", type=float, default=None,
                     help="restart delay in seconds (default: per model)")
    run.add_argument("--throughputs", default=None, help="Gavel-format throughput JSON")
    run.add_argument("--out", type=Path, default=None, help="write summary.json, jobs and plots here")
    run.add_argument("--no-progress", action="store_true")
    sub.add_parser("presets", help="list cluster presets")
    sub.add_parser("policies", help="list scheduling policies")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "presets":
            from .presets import list_presets
            for name, desc in list_presets().items():
                print(f"{name:12s} {desc}")
        elif args.command == "policies":
            from .policies import list_policies
            for name, desc in list_policies().items():
                print(f"{name:12s} {desc}")
        else:
            _run(args)
    except SimError as exc:
        print(f"clustersim: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _run(args) -> None:
    from .metrics import compare_table, summary
    from .scenario import write_outputs

    sc = Scenario(cluster=args.cluster, workload=args.workload, jobs=args.jobs, load=args.load,
                  sizes=args.sizes, durations=args.durations,
                  policies=tuple(p.strip() for p in args.policy.split(",") if p.strip()),
                  placement=args.placement, seed=args.seed, round_s=args.round_s,
                  restart_delay_s=args.restart_delay, throughputs=args.throughputs,
                  progress=not args.no_progress and sys.stderr.isatty())
    cluster, table, _ = sc.build()
    print(f"cluster: {cluster.describe()}")
    print(f"workload: {len(table)} jobs ({args.workload}), seed {args.seed}")
    results = sc.run()
    if args.out is not None:
        summaries = write_outputs(results, args.out, sc)
        print(f"wrote {args.out}/summary.json, per-policy jobs.parquet and plots")
    else:
        summaries = {name: summary(res) for name, res in results.items()}
    print(compare_table(summaries))


if __name__ == "__main__":
    sys.exit(main())
