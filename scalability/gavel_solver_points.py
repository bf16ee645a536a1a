"""Which optimal point each LP solver returns, against Gavel's own (cvxpy + ECOS), on the
heterogeneity-aware max-min LP (docs/gavel.md, "Solver").

    python scalability/gavel_solver_points.py --gavel-dir DIR --gavel-python PY [--seed 7]
        [--out results.json]

Max-min LPs have many optima and the round mechanism turns whichever one the solver returns
into priorities, so the point matters for fidelity, not only the optimum.  This draws
``len(SIZES)`` LPs (jobs with Gavel's scale factors 1/2/4/8, three types at 36 GPUs per 30
jobs, random throughputs), has Gavel's ``MaxMinFairnessPolicyWithPerf.get_allocation`` solve
them (``DIR/scheduler/policies``, run by ``PY``, a Python with cvxpy and ECOS), solves the
same LPs with each of our solvers, and prints the mean and largest ``|X - X_gavel|`` per LP.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

#: jobs per drawn LP
SIZES = (5, 8, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 10, 30, 60, 100, 200)
TYPES = ("k80", "p100", "v100")

#: the child that runs Gavel's policy on the LPs of an .npz and writes its X per LP
GAVEL_CHILD = """
import sys, numpy as np
sys.path.insert(0, {policies!r}); sys.path.insert(0, {scheduler!r})
from max_min_fairness import MaxMinFairnessPolicyWithPerf
d = np.load({inp!r}); out = {{}}
types = {types!r}
for k in range(len(d.files) // 3):
    scale, thr, cap = d[f"scale{{k}}"], d[f"thr{{k}}"], d[f"cap{{k}}"]
    n = len(scale)
    alloc = MaxMinFairnessPolicyWithPerf("ECOS").get_allocation(
        {{i: {{t: thr[i, j] for j, t in enumerate(types)}} for i in range(n)}},
        {{i: int(scale[i]) for i in range(n)}}, {{i: 1.0 for i in range(n)}},
        {{t: int(cap[j]) for j, t in enumerate(types)}})
    out[f"X{{k}}"] = np.array([[alloc[i][t] for t in types] for i in range(n)])
np.savez({outp!r}, **out)
"""


def draw_lps(seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(scale, throughputs, capacity) per LP."""
    rng = np.random.default_rng(seed)
    lps = []
    for n in SIZES:
        scale = rng.choice([1, 2, 4, 8], n, p=[0.7, 0.1, 0.15, 0.05]).astype(float)
        thr = rng.uniform(0.2, 3, (n, 3)) * np.array([3.0, 2.0, 1.0]) ** rng.uniform(0, 1)
        lps.append((scale, thr, np.full(3, 36.0 * max(1, n // 30))))
    return lps


def gavel_points(lps, gavel_dir: str, python: str) -> list[np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = os.path.join(tmp, "lps.npz"), os.path.join(tmp, "x.npz")
        np.savez(inp, **{f"{key}{k}": v for k, lp in enumerate(lps)
                         for key, v in zip(("scale", "thr", "cap"), lp)})
        sched = os.path.join(gavel_dir, "scheduler")
        code = GAVEL_CHILD.format(policies=os.path.join(sched, "policies"), scheduler=sched,
                                  inp=inp, outp=outp, types=TYPES)
        subprocess.run([python, "-c", code], check=True)
        got = np.load(outp)
        return [got[f"X{k}"] for k in range(len(lps))]


def our_point(solver: str, scale, thr, cap) -> np.ndarray:
    """Our gavel-max-min-fairness-perf allocation for the same LP (equal priorities)."""
    from sim.policies.gavel_lp import AllocationLP, proportional_allocation
    lp = AllocationLP(scale, cap, solver)
    prop = np.sum(thr * proportional_allocation(lp.n, lp.capacity), axis=1)
    return lp.max_min(thr * (scale / prop)[:, None])[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gavel-dir", required=True)
    ap.add_argument("--gavel-python", default=sys.executable)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--solvers", default="structured,ipm,simplex")
    ap.add_argument("--out")
    args = ap.parse_args()
    lps = draw_lps(args.seed)
    theirs = gavel_points(lps, args.gavel_dir, args.gavel_python)
    solvers = args.solvers.split(",")
    rows = []
    for (scale, thr, cap), x_gavel in zip(lps, theirs):
        row = {"jobs": int(scale.size)}
        for solver in solvers:
            diff = np.abs(our_point(solver, scale, thr, cap) - x_gavel)
            row[solver] = {"mean_abs": float(diff.mean()), "max_abs": float(diff.max())}
        rows.append(row)
        print(row["jobs"], "  ".join(f"{s}: mean {row[s]['mean_abs']:.4f} max {row[s]['max_abs']:.3f}"
                                     for s in solvers))
    summary = {s: {"mean_of_mean_abs": float(np.mean([r[s]["mean_abs"] for r in rows])),
                   "median_of_max_abs": float(np.median([r[s]["max_abs"] for r in rows]))}
               for s in solvers}
    for s, v in summary.items():
        print(f"{s}: mean |X - X_gavel| {v['mean_of_mean_abs']:.4f}, median of the largest "
              f"{v['median_of_max_abs']:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"seed": args.seed, "rows": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
