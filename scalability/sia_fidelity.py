"""Our goodput policies beside the Sia simulator on Sia's workloads (docs/goodput.md, "Sia").

    python scalability/sia_fidelity.py WORKLOAD.csv [...] [--policies sia,pollux]
        [--param POLICY.KEY=VALUE ...] [--theirs POLICY=LOGDIR ...] [--out results.json]

Runs each of our policies on each workload on ``sia-64`` (Sia's default cluster: 6 x 4 T4,
3 x 8 RTX 2080 Ti, 2 x 8 A100) and, for every ``--theirs POLICY=LOGDIR``, reads the Sia
simulator's logs for the same workloads (``LOGDIR/<workload stem>.log``: the JSON-lines file its
``multi_simulator.py --output`` writes, one record per scheduling interval; stems repeat across
workload folders, so give one LOGDIR per folder and run one folder at a time).  Prints avg JCT and
makespan (seconds) per workload and policy with ours vs theirs, and our CPU seconds.

How the Sia simulator was run (its run_experiment.sh flags; its README's stack, pandas < 2):

    python multi_simulator.py WORKLOAD.csv --policy=sia --policy_p_val=-0.5 --mip_lambda_a=0.01 \
        --mip_lambda_n=1.1 --interval=60 --project_throughputs --share_max_replicas --output=LOG
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from sim.api import simulate
from sim.commands._options import parse_policy_params
from sim.metrics import summary

CLUSTER = "sia-64"


def their_metrics(log: Path) -> dict:
    """avg JCT and makespan (s) from the last record of a Sia simulator log."""
    last = None
    with open(log) as f:
        for line in f:
            if line.strip():
                last = line
    if last is None:
        raise ValueError(f"{log}: empty Sia simulator log")
    jobs = json.loads(last)["submitted_jobs"]
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


def _diff(ours: float, theirs: float) -> str:
    return f"{100.0 * (ours / theirs - 1.0):+.1f}%" if theirs > 0 else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+", type=Path)
    ap.add_argument("--policies", default="sia,pollux")
    ap.add_argument("--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
                    help="a policy parameter, e.g. sia-pollux.search=dp (repeatable)")
    ap.add_argument("--theirs", action="append", default=[], metavar="POLICY=LOGDIR")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    theirs_dirs = dict(t.split("=", 1) for t in args.theirs)
    params = parse_policy_params(args.param)
    rows = []
    for wl in args.workloads:
        for pol in args.policies.split(","):
            row = {"workload": f"{wl.parent.name}/{wl.stem}", "policy": pol, "params": params.get(pol, {}),
                   "ours": our_metrics(wl, pol, **params.get(pol, {}))}
            log = Path(theirs_dirs[pol]) / f"{wl.stem}.log" if pol in theirs_dirs else None
            if log is not None and log.exists():
                row["theirs"] = their_metrics(log)
            rows.append(row)
            o, t = row["ours"], row.get("theirs")
            print(f"{row['workload']:<22} {pol:<8} ours JCT {o['avg_jct_s']:8.0f} s  makespan "
                  f"{o['makespan_s']:8.0f} s  cpu {o['cpu_s']:6.1f} s", end="")
            if t:
                print(f"  | theirs JCT {t['avg_jct_s']:8.0f} s ({_diff(o['avg_jct_s'], t['avg_jct_s'])})"
                      f"  makespan {t['makespan_s']:8.0f} s ({_diff(o['makespan_s'], t['makespan_s'])})")
            else:
                print()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1, default=lambda x: None if isinstance(x, float)
                                       and math.isnan(x) else x) + "\n")


if __name__ == "__main__":
    main()
