"""``clustersim run``: policies side by side on one cluster and workload."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from . import help_line
from ..fsio import stdout_to_stderr
from ..goodput.workload import PROFILE_KINDS
from ..metrics import SUMMARY_KEYS, compare_table, summary
from ..placement import DEFAULT_TYPE_CHOICE, TYPE_CHOICES
from ..scenario import DEFAULT_CLUSTER, DEFAULT_JOBS, DEFAULT_LOAD, DEFAULT_POLICIES, Scenario, jsonable
from ..throughput import MULTI_SERVER_RULES
from ..workload import SIZES
from ._options import add_policy_file_option, load_policy_files, parse_policy_params

FORMATS = ("table", "json", "csv")


def register(sub) -> None:
    run = sub.add_parser("run", help=help_line("run"))
    run.add_argument("--cluster", default=DEFAULT_CLUSTER,
                     help="preset name, uniform:nodes=N,gpus=G,type=T, or a TOML file")
    run.add_argument("--workload", default="generate",
                     help="'generate', or a file in any trace format 'clustersim trace formats' lists "
                          "(a raw trace replays its recorded run times unless --throughputs is given)")
    run.add_argument("--trace-format", default=None,
                     help="format of the --workload file (default: detected from its name and header)")
    run.add_argument("--learning", action="store_true",
                     help="time-to-accuracy jobs, each policy run with the learning simulator "
                          "(docs/eghs.md): with --workload generate the EGHS experiment's workload, "
                          "elastic jobs with learning profiles and user budgets; with a canonical "
                          "job table (format 'jobs') its jobs, the budget_iterations column giving "
                          "the user budgets")
    run.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="jobs to generate")
    run.add_argument("--load", type=float, default=DEFAULT_LOAD, help="arrival rate, jobs per hour")
    run.add_argument("--sizes", choices=SIZES, default="gavel",
                     help="GPU-request distribution of generated jobs")
    run.add_argument("--durations", choices=("gavel", "philly", "hops"), default="gavel",
                     help="duration distribution of generated jobs")
    run.add_argument("--policy", default=",".join(DEFAULT_POLICIES), help="NAME[,NAME...]")
    run.add_argument("--placement", choices=("consolidated", "spread"), default="consolidated",
                     help="placement of every policy")
    run.add_argument("--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
                     help="a policy parameter, VALUE parsed as JSON when it can be "
                          "(repeatable; e.g. tiresias.thresholds=[100,200], fifo.backfill=true)")
    add_policy_file_option(run)
    run.add_argument("--seed", type=int, default=0,
                     help="seed of the generated workload, an integer in [0, 2**63)")
    run.add_argument("--round", type=float, default=None, dest="round_s",
                     help="scheduling round period in seconds: 0 (no periodic rounds) or >= 1 "
                          "(default: each policy's own)")
    run.add_argument("--restart-delay", type=float, default=None,
                     help="restart delay in seconds (default: per model)")
    run.add_argument("--first-start-delay", choices=("on", "off"), default=None,
                     help="on: a job's first start pays its restart delay too, as the Pollux and "
                          "Sia simulators' re-scale delay at every allocation (default: each "
                          "policy's own: on for pollux, optimus, pollux-tiresias, sia and "
                          "sia-gavel; off for the others, where only restarts pay it)")
    run.add_argument("--round-origin", type=float, default=None, metavar="SECONDS",
                     help="rounds fall at SECONDS + k x the round period, as the Pollux "
                          "simulator's at multiples of its interval from 0 (default: phased "
                          "from the first arrival)")
    run.add_argument("--interference", type=float, default=0.0,
                     help="Pollux/Sia workloads: goodput slowdown in [0, 1) of a distributed job "
                          "sharing a node with another distributed job (the Pollux simulator's "
                          "--interference; default 0)")
    run.add_argument("--goodput-profiles", choices=PROFILE_KINDS, default=None,
                     help="Pollux/Sia workloads: run on the Pollux profiles (one per application, "
                          "measured on T4s) or Sia's per-GPU-type profiles (default: sia for a file "
                          "under a folder named sia, as the shared workloads/sia/..., else pollux)")
    run.add_argument("--throughputs", default=None,
                     help="'replay' (trace jobs run their recorded time), a Gavel-format "
                          "throughput JSON, or a calib.toml from clustersim calibrate")
    run.add_argument("--type-choice", choices=tuple(TYPE_CHOICES), default=DEFAULT_TYPE_CHOICE,
                     help="which GPU type with room the placer gives a job: the first in the "
                          "cluster's node order (default), the fastest for the job (Gavel's _perf "
                          "rule) or a random one drawn from --seed (Gavel's agnostic rule); a job "
                          "never spans types or runs where its throughput is 0")
    run.add_argument("--multi-server-rate", choices=MULTI_SERVER_RULES, default="measured",
                     dest="multi_server",
                     help="rate of a job over several servers: Gavel's _unconsolidated "
                          "measurement, else x0.8 (measured, default), or the consolidated rate "
                          "whatever the servers (gavel: Gavel's simulator)")
    run.add_argument("--skip-invalid", action="store_true",
                     help="drop (and count) jobs that cannot run on the cluster (throughput 0 on "
                          "every type, too many GPUs) instead of stopping with an error")
    run.add_argument("--out", type=Path, default=None, help="write summary.json, jobs and plots here")
    run.add_argument("--format", choices=FORMATS, default="table",
                     help="summary on stdout: an aligned table, or JSON / CSV for other programs "
                          "(the other lines then go to stderr)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--profile", action="store_true",
                     help="say where each policy's time went (kernel, policy, oracle, glue) on stderr")
    run.set_defaults(func=_run)


def _run(args) -> None:
    from ..limits import check_seed
    from ..scenario import OutputWriter

    load_policy_files(args.policy_file)
    sc = Scenario(cluster=args.cluster, workload=args.workload, trace_format=args.trace_format,
                  jobs=args.jobs, load=args.load, sizes=args.sizes, durations=args.durations,
                  policies=tuple(p.strip() for p in args.policy.split(",") if p.strip()),
                  placement=args.placement, seed=args.seed, round_s=args.round_s,
                  restart_delay_s=args.restart_delay, throughputs=args.throughputs,
                  type_choice=args.type_choice, multi_server=args.multi_server,
                  skip_invalid=args.skip_invalid,
                  progress=not args.no_progress and sys.stderr.isatty(),
                  policy_params=parse_policy_params(args.param), learning=args.learning,
                  interference=args.interference, goodput_profiles=args.goodput_profiles,
                  first_start_delay=None if args.first_start_delay is None
                  else args.first_start_delay == "on", round_origin=args.round_origin)
    check_seed(args.seed, "--seed")
    sc.engine_config()                     # bad --round / --restart-delay: fail before any work
    policies = sc.make_policies()          # bad --policy / --param: likewise
    writer = OutputWriter(args.out, sc) if args.out is not None else None
    info = sys.stdout if args.format == "table" else sys.stderr
    cluster, table, _ = sc.build()
    print(f"cluster: {cluster.describe()}", file=info)
    kind = f"{args.workload}, learning: {_learning_kind(args.workload, table)}" if args.learning \
        else args.workload
    if sc.goodput_workload():
        profiles, why = sc.goodput_profiles_chosen()
        kind += f", {profiles} profiles: {why}"
    print(f"workload: {len(table)} jobs ({kind}), seed {args.seed}", file=info)
    if args.learning:
        oracles = [n for n, p in policies.items() if getattr(p, "clairvoyant", False)]
        if oracles:
            print(f"note: {', '.join(oracles)} read the true remaining work of the time-to-accuracy "
                  "jobs (oracle baselines); the other policies see observations only", file=info)
    skipped = getattr(table, "skipped", None) or []
    if skipped:
        print(f"skipped {len(skipped)} invalid jobs (--skip-invalid); first: {skipped[0]}", file=info)
    with stdout_to_stderr():               # solvers' C-level prints must not mix with the results
        results = sc.run(built=(cluster, table, _), on_result=writer.add if writer else None)
    if writer is not None:
        summaries = writer.finish(results)
        print(f"wrote {args.out}/summary.json, per-policy jobs.parquet and plots", file=info)
    else:
        summaries = {name: summary(res) for name, res in results.items()}
    sys.stdout.write(render(summaries, args.format))
    if args.profile:
        for name, res in results.items():
            print(profile_line(name, res.profile), file=sys.stderr)


def _learning_kind(workload: str, table) -> str:
    """What a --learning run's jobs are: generated, or a job table's with its budgets counted."""
    if workload == "generate":
        return "elastic time-to-accuracy"
    import numpy as np
    given = int(np.count_nonzero(~np.isnan(table.budget_iterations)))
    return (f"time-to-accuracy, user budgets from the table for {given} of {len(table)} jobs"
            + (" (the others drawn)" if given < len(table) else ""))


def profile_line(name: str, prof: dict) -> str:
    """One line: where a run's time went and what was counted (SimResult.profile)."""
    where = "native (decided in C)" if prof.get("native") else "python"
    times = ", ".join(f"{k[:-2]} {prof[k]:.3f} s" for k in
                      ("wall_s", "kernel_s", "policy_s", "oracle_s", "snapshot_s", "learning_s", "glue_s")
                      if k in prof)
    counts = ", ".join(f"{k} {prof[k]:,}" for k in
                       ("decision_points", "decisions", "skipped_decisions", "engine_placed",
                        "placements", "preemptions", "rate_misses") if k in prof)
    return f"profile {name}: {where}; {times}; {counts}"


def render(summaries: dict, fmt: str) -> str:
    """Policy -> summary as text: "table" (aligned), "json" (an object per policy) or "csv"."""
    if fmt == "table":
        return compare_table(summaries) + "\n"
    if fmt == "json":
        return json.dumps(jsonable(summaries), indent=2) + "\n"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["policy", *SUMMARY_KEYS])
    for name, s in summaries.items():
        writer.writerow([name, *(s[k] for k in SUMMARY_KEYS)])
    return out.getvalue()
