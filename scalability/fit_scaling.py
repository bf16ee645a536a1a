"""Fit how simulator wall time grows with nodes and with jobs, from sweep folders.

    python scalability/fit_scaling.py DIR [DIR ...] [--metric wall_seconds] [--json FILE]

For each policy, and for all policies together (with a separate intercept per policy), it fits
by least squares

    log(wall) = a + b log(nodes) + c log(jobs) + (one offset per load)

over the finished cells of the folders and reports the exponents b and c with standard errors
and R^2.  ``wall`` is the engine's wall time (summary column ``wall_seconds``: simulation only,
no workload generation or metrics).  When jobs are proportional to nodes in every cell (a spec
with ``jobs_per_node``) the two cannot be told apart, and a single exponent of wall time versus
nodes (with jobs growing alike) is reported instead.  Without a spread in nodes or in jobs the
matching exponent is left out.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def _rows(dirs, metric: str) -> list[dict]:
    from sim.sweep import SweepStore

    rows = []
    for d in dirs:
        t = SweepStore(d).summaries()
        if t is None:
            continue
        for r in t.to_pylist():
            w = r.get(metric)
            if w is not None and np.isfinite(w) and w > 0:
                rows.append(r)
    return rows


def fit(rows: list[dict], metric: str = "wall_seconds", by_policy_intercept: bool = False) -> dict:
    """Least-squares exponents of ``metric`` versus nodes and jobs (see the module docstring)."""
    y = np.log([r[metric] for r in rows])
    ln = np.log([float(r["nodes"]) for r in rows])
    lj = np.log([float(r["n_jobs"]) for r in rows])
    cols, names = [], []
    groups = sorted({r["policy_label"] for r in rows}) if by_policy_intercept else [None]
    for g in groups:
        cols.append(np.array([1.0 if g is None or r["policy_label"] == g else 0.0 for r in rows]))
        names.append(f"intercept[{g}]" if g else "intercept")
    loads = sorted({r["load"] for r in rows if r["load"] is not None})
    for ld in loads[1:]:
        cols.append(np.array([1.0 if r["load"] == ld else 0.0 for r in rows]))
        names.append(f"load={ld:g}")
    out = {"cells": len(rows)}

    def has_spread(v):
        return np.ptp(v) > 1e-9

    joint = has_spread(ln) and has_spread(lj) and abs(np.corrcoef(ln, lj)[0, 1]) < 0.999
    if joint:
        cols += [ln, lj]
        names += ["nodes", "jobs"]
    elif has_spread(ln):
        cols.append(ln)
        names.append("nodes" if not has_spread(lj) else "nodes (jobs proportional)")
    elif has_spread(lj):
        cols.append(lj)
        names.append("jobs")
    else:
        return out
    X = np.column_stack(cols)
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    dof = max(len(y) - X.shape[1], 1)
    sigma2 = float(resid @ resid) / dof
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    ss_tot = float(((y - y.mean()) ** 2).sum())
    out["r2"] = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else math.nan
    for i, n in enumerate(names):
        if not n.startswith(("intercept", "load=")):
            out[n] = (float(beta[i]), float(se[i]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path, help="sweep output folders")
    ap.add_argument("--metric", default="wall_seconds")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = _rows(args.dirs, args.metric)
    if not rows:
        print("no finished cells", file=sys.stderr)
        return 1
    by = defaultdict(list)
    for r in rows:
        by[r["policy_label"]].append(r)
    results = {p: fit(rs, args.metric) for p, rs in sorted(by.items())}
    results["all policies"] = fit(rows, args.metric, by_policy_intercept=True)
    keys = ["nodes", "jobs", "nodes (jobs proportional)"]
    shown = [k for k in keys if any(k in v for v in results.values())]
    print(f"exponent of {args.metric} (log-log least squares, +- one standard error)")
    print(f"{'policy':24s}{'cells':>6s}" + "".join(f"{k:>28s}" for k in shown) + f"{'R^2':>7s}")
    for p, v in results.items():
        vals = "".join(f"{v[k][0]:>20.2f} +- {v[k][1]:4.2f}" if k in v else f"{'-':>28s}" for k in shown)
        print(f"{p:24s}{v['cells']:>6d}{vals}{v.get('r2', math.nan):>7.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
