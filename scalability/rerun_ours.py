"""Re-run our side of a committed fidelity table (scalability/results/sia_fidelity/*.json)
against the authors' numbers it already holds; the previous ours is kept under ``previous_key``.

    python scalability/rerun_ours.py RESULTS.json --previous-key ours_before_first_start_delay [--workers 2]
        [--policies sia,sia-gavel] [--jobs-out DIR]

With ``--jobs-out``, each run's per-job table is written to DIR/<folder>-<workload>-<policy>.csv.
"""
from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sia_fidelity import _diff, our_metrics
from sim.goodput.profiles import shared_workloads_dir


def _one(args):
    workload, policy, params, jobs_dir = args
    out = None if jobs_dir is None else jobs_dir / f"{workload.replace('/', '-')}-{policy}.csv"
    return our_metrics(shared_workloads_dir("sia") / f"{workload}.csv", policy, out, **params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--previous-key", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policies", default=None, help="comma-separated: re-run only these rows")
    ap.add_argument("--jobs-out", type=Path, default=None, help="folder for per-job CSVs")
    a = ap.parse_args()
    rows = json.loads(a.results.read_text())
    keep = None if a.policies is None else set(a.policies.split(","))
    todo = [r for r in rows if keep is None or r["policy"] in keep]
    with ProcessPoolExecutor(a.workers) as ex:
        for r, o in zip(todo, ex.map(_one, [(r["workload"], r["policy"], r.get("params", {}), a.jobs_out)
                                           for r in todo])):
            _report(r, o, a.previous_key)
    _merge(a.results, todo)


def _merge(path: Path, done: list[dict]) -> None:
    """Write ``done`` into the results file as it is now (another re-run may have written other
    rows of it meanwhile)."""
    new = {(r["workload"], r["policy"]): r for r in done}
    rows = [new.get((r["workload"], r["policy"]), r) for r in json.loads(path.read_text())]
    path.write_text(json.dumps(rows, indent=1) + "\n")


def _report(r: dict, o: dict, previous_key: str) -> None:
    """Keep the previous ours under ``previous_key``, set the new one, print the row."""
    before, t = r["ours"], r["theirs"]
    r[previous_key], r["ours"] = before, o
    print(f"{r['workload']:<18} {r['policy']:<10} theirs {t['avg_jct_s']:9.1f}  before "
          f"{before['avg_jct_s']:9.1f} ({_diff(before['avg_jct_s'], t['avg_jct_s'])})  now "
          f"{o['avg_jct_s']:9.1f} ({_diff(o['avg_jct_s'], t['avg_jct_s'])})  makespan "
          f"{_diff(o['makespan_s'], t['makespan_s'])} (before "
          f"{_diff(before['makespan_s'], t['makespan_s'])})", flush=True)


if __name__ == "__main__":
    main()
