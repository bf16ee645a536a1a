"""Our goodput policies beside the Sia simulator on Sia's workloads (docs/goodput.md, "Sia").

    python scalability/sia_fidelity.py WORKLOAD.csv [...] [--policies sia,pollux]
        [--param POLICY.KEY=VALUE ...] [--theirs POLICY=LOGDIR ...] [--out results.json]

Runs each of our policies on each workload on ``sia-64`` (Sia's default cluster: 6 x 4 T4,
3 x 8 RTX 2080 Ti, 2 x 8 A100) and, for every ``--theirs POLICY=LOGDIR``, reads the Sia
simulator's logs for the same workloads (``LOGDIR/<workload stem>.log``: the JSON-lines file its
``multi_simulator.py --output`` writes, one record per scheduling interval; stems repeat across
workload folders, so give one LOGDIR per folder and run one folder at a time).  Prints avg JCT and
makespan (seconds) per workload and policy with ours vs theirs, and our CPU seconds.

Where a policy draws at random (``sia-pollux``'s and ``pollux``'s search: the Sia simulator's
pymoo NSGA-II is not seeded, so each run of theirs is one draw), ``--seeds 0,1,2`` runs ours
once per seed and ``--theirs POLICY=LOGDIR`` may be given once per draw of theirs: a row then
compares the mean over our seeds with the mean over their draws, each with its range, and the
last line gives ours / theirs over all workloads (the geometric mean of the per-workload
ratios with a bootstrap interval over workloads, ``sim.stats.paired_ratio_ci``).

How the Sia simulator was run (its run_experiment.sh flags; its README's stack, pandas < 2):

    python multi_simulator.py WORKLOAD.csv --policy=sia --policy_p_val=-0.5 --mip_lambda_a=0.01 \
        --mip_lambda_n=1.1 --interval=60 --project_throughputs --share_max_replicas --output=LOG
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from sim.api import simulate
from sim.commands._options import parse_policy_params
from sim.metrics import summary
from sim.stats import paired_ratio_ci

CLUSTER = "sia-64"


def last_record(log: Path) -> dict:
    """The last record of a Sia simulator log (JSON lines, one per scheduling interval)."""
    last = None
    with open(log) as f:
        for line in f:
            if line.strip():
                last = line
    if last is None:
        raise ValueError(f"{log}: empty Sia simulator log")
    return json.loads(last)


def their_metrics(log: Path, record: dict | None = None) -> dict:
    """avg JCT and makespan (s) from the last record of a Sia simulator log (``record``: that
    record, already read)."""
    jobs = (record if record is not None else last_record(log))["submitted_jobs"]
    done = [j for j in jobs if j["completion_time"] is not None]
    if len(done) < len(jobs):
        raise ValueError(f"{log}: {len(jobs) - len(done)} of {len(jobs)} jobs unfinished in the "
                         "last record (run not complete)")
    jct = [j["completion_time"] - j["submission_time"] for j in done]
    start = min(j["submission_time"] for j in jobs)
    return {"avg_jct_s": sum(jct) / len(jct), "makespan_s": max(j["completion_time"] for j in done) - start,
            "jobs": len(jobs)}


def our_metrics(workload: Path, policy: str, jobs_out: Path | None = None, **params) -> dict:
    """Our avg JCT, makespan and CPU seconds (``params``: the policy's, e.g. ``search="dp"``); with
    ``jobs_out``, the per-job table is written there as CSV (to compare job by job with the Sia
    simulator's log)."""
    t0 = time.process_time()
    res = simulate(CLUSTER, str(workload), policy, **params)
    cpu = time.process_time() - t0
    if jobs_out is not None:
        jobs_out.parent.mkdir(parents=True, exist_ok=True)
        res.to_pandas().to_csv(jobs_out, index=False)
    s = summary(res)
    return {"avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"],
            "jobs": int(len(res.finish)), "cpu_s": cpu}


def mean_metrics(runs: list[dict]) -> dict:
    """The mean of several runs' avg JCT, makespan and CPU seconds (runs: ``our_metrics`` or
    ``their_metrics`` dicts), with the range of avg JCT and the number of runs."""
    out = {k: statistics.fmean(r[k] for r in runs) for k in ("avg_jct_s", "makespan_s")}
    if all("cpu_s" in r for r in runs):
        out["cpu_s"] = statistics.fmean(r["cpu_s"] for r in runs)
    jct = [r["avg_jct_s"] for r in runs]
    out.update(jobs=runs[0]["jobs"], runs=len(runs), avg_jct_min_s=min(jct), avg_jct_max_s=max(jct))
    return out


def ours_over_seeds(workload: Path, policy: str, params: dict, seeds: list[int]) -> tuple[dict, list[dict]]:
    """Our metrics (the mean over ``seeds`` when given, each run with the policy's ``seed``) and
    the runs themselves."""
    if not seeds:
        return our_metrics(workload, policy, **params), []
    runs = [dict(our_metrics(workload, policy, **{**params, "seed": s}), seed=s) for s in seeds]
    return mean_metrics(runs), runs


def theirs_over_draws(workload: Path, log_dirs: list[str]) -> tuple[dict | None, list[dict]]:
    """Their metrics from every ``LOGDIR/<stem>.log`` that exists (one draw each): the mean, and
    the draws."""
    draws = [dict(their_metrics(log), log=str(log)) for d in log_dirs
             if (log := Path(d) / f"{workload.stem}.log").exists()]
    if not draws:
        return None, []
    return (draws[0] if len(draws) == 1 else mean_metrics(draws)), draws


def ratio_over_workloads(rows: list[dict], policy: str, metric: str = "avg_jct_s"):
    """Ours / theirs on ``metric`` over the workloads where ``policy`` has both (a
    :class:`sim.stats.RatioCI`: geometric mean of the per-workload ratios, bootstrap interval)."""
    pairs = [(r["ours"][metric], r["theirs"][metric]) for r in rows
             if r["policy"] == policy and r.get("theirs")]
    return paired_ratio_ci([o for o, _ in pairs], [t for _, t in pairs])


def _span(m: dict) -> str:
    return f" [{m['avg_jct_min_s']:.0f}-{m['avg_jct_max_s']:.0f}, {m['runs']} runs]" if m.get("runs", 1) > 1 else ""


def _diff(ours: float, theirs: float) -> str:
    return f"{100.0 * (ours / theirs - 1.0):+.1f}%" if theirs > 0 else "-"


def _compare(wl: Path, pol: str, params: dict, seeds: list[int], log_dirs: list[str]) -> dict:
    ours, runs = ours_over_seeds(wl, pol, params, seeds)
    theirs, draws = theirs_over_draws(wl, log_dirs)
    row = {"workload": f"{wl.parent.name}/{wl.stem}", "policy": pol, "params": params, "ours": ours}
    if runs:
        row["ours_seeds"] = runs
    if theirs:
        row["theirs"] = theirs
        if len(draws) > 1:
            row["theirs_draws"] = draws
    print(f"{row['workload']:<22} {pol:<8} ours JCT {ours['avg_jct_s']:8.0f} s{_span(ours)}  makespan "
          f"{ours['makespan_s']:8.0f} s  cpu {ours['cpu_s']:6.1f} s", end="")
    if theirs:
        print(f"  | theirs JCT {theirs['avg_jct_s']:8.0f} s{_span(theirs)} "
              f"({_diff(ours['avg_jct_s'], theirs['avg_jct_s'])})  makespan {theirs['makespan_s']:8.0f} s "
              f"({_diff(ours['makespan_s'], theirs['makespan_s'])})")
    else:
        print()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+", type=Path)
    ap.add_argument("--policies", default="sia,pollux")
    ap.add_argument("--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
                    help="a policy parameter, e.g. sia-pollux.search=dp (repeatable)")
    ap.add_argument("--theirs", action="append", default=[], metavar="POLICY=LOGDIR",
                    help="the Sia simulator's logs for POLICY (repeat for several draws)")
    ap.add_argument("--seeds", default="", help="run ours once per seed (comma list) and average")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    theirs_dirs: dict[str, list[str]] = {}
    for t in args.theirs:
        pol, d = t.split("=", 1)
        theirs_dirs.setdefault(pol, []).append(d)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    params = parse_policy_params(args.param)
    rows = []
    for wl in args.workloads:
        for pol in args.policies.split(","):
            rows.append(_compare(wl, pol, params.get(pol, {}), seeds, theirs_dirs.get(pol, [])))
    for pol in args.policies.split(","):
        ci = ratio_over_workloads(rows, pol)
        if ci.n >= 2:
            print(f"{pol}: ours / theirs avg JCT over {ci.n} workloads {ci.label(3)}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1, default=lambda x: None if isinstance(x, float)
                                       and math.isnan(x) else x) + "\n")


if __name__ == "__main__":
    main()
