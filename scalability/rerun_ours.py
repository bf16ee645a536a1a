"""Re-run our side of a committed fidelity table (scalability/results/sia_fidelity/*.json)
against the authors' numbers it already holds; the previous ours is kept under ``previous_key``.

    python scalability/rerun_ours.py RESULTS.json --previous-key ours_before_first_start_delay [--workers 2]
        [--policies sia,sia-gavel]
"""
from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sia_fidelity import _diff, our_metrics
from sim.goodput.profiles import shared_workloads_dir


def _one(args):
    workload, policy = args
    return our_metrics(shared_workloads_dir("sia") / f"{workload}.csv", policy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--previous-key", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policies", default=None, help="comma-separated: re-run only these rows")
    a = ap.parse_args()
    rows = json.loads(a.results.read_text())
    keep = None if a.policies is None else set(a.policies.split(","))
    todo = [r for r in rows if keep is None or r["policy"] in keep]
    with ProcessPoolExecutor(a.workers) as ex:
        for r, o in zip(todo, ex.map(_one, [(r["workload"], r["policy"]) for r in todo])):
            _report(r, o, a.previous_key)
    a.results.write_text(json.dumps(rows, indent=1) + "\n")


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
