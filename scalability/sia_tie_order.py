"""How much of a Sia run is the ILP's tie-breaking (docs/goodput-history.md, "Three porting
differences, found on philly 7", where saturn 2 is traced).

    python scalability/sia_tie_order.py WORKLOAD.csv [--rotations 0,1,2] [--out rows.jsonl]

Runs ``sia`` on ``sia-64`` once per rotation of the GPU-type order of the ILP's configuration
columns: the same costs, capacities and constraints, the columns grouped by type starting at type
``rotation`` instead of 0, so HiGHS may pick another among equal-cost choices (a job that has not
run yet costs the same on every type's one-GPU configuration, and the Sia simulator's CBC breaks
that tie its own way).  Rotation 0 is the policy as it is.  Prints one JSON row per run (avg JCT,
makespan, CPU seconds).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

import sim.policies.sia as sia_module
from sim.api import simulate
from sim.metrics import summary


def rotated(solve, rotation: int):
    """``solve_sia_ilp`` with its columns grouped by type from ``rotation`` on, answers mapped back."""
    def solve_rotated(cost, valid, col_type, col_gpus, capacity, lambda_n, fixed=None, *args, **kw):
        key = (col_type + rotation) % (int(col_type.max()) + 1)
        perm = np.lexsort((np.arange(col_type.size), key))
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        if fixed is not None:
            fixed = np.where(fixed >= 0, inv[np.maximum(fixed, 0)], -1)
        res = solve(cost[:, perm], valid[:, perm], col_type[perm], col_gpus[perm], capacity, lambda_n,
                    fixed, *args, **kw)
        return dataclasses.replace(res, choice=np.where(res.choice >= 0, perm[np.maximum(res.choice, 0)], -1))
    return solve_rotated


def run(workload: str, rotation: int) -> dict:
    solve = sia_module.solve_sia_ilp
    sia_module.solve_sia_ilp = rotated(solve, rotation) if rotation else solve
    try:
        t0 = time.process_time()
        s = summary(simulate("sia-64", workload, "sia"))
    finally:
        sia_module.solve_sia_ilp = solve
    return {"workload": workload, "rotation": rotation, "avg_jct_s": s["avg_jct_s"],
            "makespan_s": s["makespan_s"], "cpu_s": round(time.process_time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--rotations", default="0,1,2")
    ap.add_argument("--out", default=None, help="append the rows to this JSON-lines file")
    a = ap.parse_args()
    for r in (int(x) for x in a.rotations.split(",")):
        row = json.dumps(run(a.workload, r))
        print(row, flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(row + "\n")


if __name__ == "__main__":
    main()
