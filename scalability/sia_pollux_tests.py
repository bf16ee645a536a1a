"""Is our sia-pollux different from the Sia simulator's Pollux, workload by workload?
(docs/goodput.md, "`sia-pollux` against the Sia simulator's Pollux").

    python scalability/sia_pollux_tests.py [--search dp|nsga2pos] [--seeds 0,1,2,3,4] [--out results.json]

    python scalability/sia_pollux_tests.py --search nsga2pos --seeds 0,1,2,3 --by-application

Reads the recorded runs (scalability/results/sia_fidelity/sia_pollux_draws*.json: every run of
theirs, each session's file listing all runs up to it; ours at the given seeds, 0-4 by default,
gathered over the files) and, per workload,
compares our mean with theirs by Welch's t-test (our seeds against their runs; no test where
they have one run), then adjusts the p-values for the number of workloads tested
(:func:`sim.stats.holm`).  Prints one row per workload (the difference, the p-values, our mean
and each run of theirs) and the pooled ratio (ours / theirs, geometric mean over workloads with
a bootstrap interval, :func:`sim.stats.paired_ratio_ci`).

``--by-application`` splits instead each workload's gap (our mean avg JCT minus theirs) by
application: each application's share of it, in % of their avg JCT, over the runs whose per-job
JCTs were kept (every sia_pollux*.json of the folder; some early runs of theirs kept only the
average, so a workload's gap there can differ from the table's).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
from scipy import stats

from sim.stats import holm, paired_ratio_ci

RESULTS = Path(__file__).resolve().parent / "results" / "sia_fidelity"
#: oldest first: a later file's ``theirs_draws`` lists every run of theirs up to it
FILES = ["sia_pollux_draws.json", "sia_pollux_draws_s28.json", "sia_pollux_draws_s29.json",
         "sia_pollux_draws_s34.json", "sia_pollux_draws_s35.json", "sia_pollux_draws_s36.json"]


def runs(search: str, seeds: list[int]) -> dict[str, tuple[list[float], list[float]]]:
    """workload -> (our avg JCTs over ``seeds``, their avg JCTs), seconds; our runs of one
    workload may lie in several files."""
    theirs: dict[str, list[float]] = {}
    ours: dict[str, dict[str, dict]] = {}
    for name in FILES:
        for workload, rec in json.loads((RESULTS / name).read_text())["workloads"].items():
            if rec.get("theirs_draws"):
                theirs[workload] = [d["avg_jct_s"] for d in rec["theirs_draws"]]
            ours.setdefault(workload, {}).update(rec.get("ours", {}))
    table = {}
    for workload, mine in ours.items():
        picked = _at_seeds(mine, search, seeds)
        if picked and workload in theirs:
            table[workload] = ([r["avg_jct_s"] for r in picked], theirs[workload])
    return table


def _at_seeds(runs_by_name: dict, search: str, seeds: list[int]) -> list | None:
    """Our runs ``{search}_seed{s}`` for every seed, or None where one is missing."""
    picked = [runs_by_name.get(f"{search}_seed{s}") for s in seeds]
    return picked if all(picked) else None


def _per_job(run: dict, names: list[str] | None) -> list[float] | None:
    jct = run.get("per_job_jct_s")
    if isinstance(jct, dict):
        return [jct[n] for n in names] if names else None
    return jct


def job_runs(search: str, seeds: list[int]) -> dict[str, tuple[list[str], list[list[float]], list[list[float]]]]:
    """workload -> (job names, our per-job JCTs at ``seeds``, theirs), over every file that kept
    them; their runs are told apart by their avg JCT (files repeat runs)."""
    records = []                                   # (workload, its record), file by file
    for f in sorted(RESULTS.glob("sia_pollux*.json")):
        data = json.loads(f.read_text())
        records += [(w, rec) for w, rec in data.get("workloads", data).items() if isinstance(rec, dict)]
    order = {w: rec["job_names"] for w, rec in records if "job_names" in rec}
    ours: dict[str, dict[str, list[float]]] = {}
    theirs: dict[str, dict[float, list[float]]] = {}
    for workload, rec in records:
        names = order.get(workload)
        for key, val in rec.items():
            if key == "ours" and isinstance(val, dict):
                for run, res in val.items():
                    if isinstance(res, dict) and _per_job(res, names):
                        ours.setdefault(workload, {})[run] = _per_job(res, names)
            elif key.startswith("theirs"):
                for res in val if isinstance(val, list) else [val]:
                    if isinstance(res, dict) and _per_job(res, names):
                        theirs.setdefault(workload, {})[round(res["avg_jct_s"], 1)] = _per_job(res, names)
    out = {}
    for workload, mine in ours.items():
        picked = _at_seeds(mine, search, seeds)
        if picked and theirs.get(workload) and workload in order:
            out[workload] = (order[workload], picked, list(theirs[workload].values()))
    return out


def by_application(search: str, seeds: list[int]) -> None:
    """Print each workload's gap split by application, and the mean split over workloads."""
    shares: dict[str, list[float]] = {}
    for w, (names, mine, theirs) in sorted(job_runs(search, seeds).items(), key=lambda kv: _workload_key(kv[0])):
        ours_mean, their_mean = np.mean(mine, axis=0), np.mean(theirs, axis=0)
        apps = np.array([n.rsplit("-", 1)[0] for n in names])
        split = {a: 100 * (ours_mean[apps == a].sum() - their_mean[apps == a].sum()) / their_mean.sum()
                 for a in sorted(set(apps))}
        for a, v in split.items():
            shares.setdefault(a, []).append(v)
        print(f"{w:20s} runs of theirs with per-job JCTs {len(theirs)}  gap "
              f"{100 * (ours_mean.mean() / their_mean.mean() - 1):+5.1f}%  "
              + "  ".join(f"{a} {v:+5.1f}" for a, v in split.items()))
    print("mean over workloads, % of their avg JCT: "
          + ", ".join(f"{a} {statistics.fmean(v):+.2f} ({len(v)})" for a, v in shares.items()))


def _workload_key(w: str):
    return w.split("/")[0], int(w.rsplit("-", 1)[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--search", default="dp", help="our search whose seeds are compared (dp, nsga2pos)")
    ap.add_argument("--seeds", default="0,1,2,3,4", help="our seeds (comma list) every workload must have")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--by-application", action="store_true",
                    help="split each workload's gap by application instead (per-job JCTs)")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.by_application:
        by_application(args.search, seeds)
        return
    table = runs(args.search, seeds)
    if not table:
        raise SystemExit(f"no workload has our {args.search} seeds {args.seeds} and runs of theirs in "
                         f"{', '.join(FILES)}")
    names = sorted(table, key=_workload_key)
    pvals = [stats.ttest_ind(*table[w], equal_var=False).pvalue if len(table[w][1]) > 1
             else float("nan") for w in names]
    adjusted = holm(pvals)
    rows = []
    for w, p, a in zip(names, pvals, adjusted):
        ours, theirs = table[w]
        diff = statistics.fmean(ours) / statistics.fmean(theirs) - 1.0
        rows.append({"workload": w, "ours_runs": len(ours), "their_runs": len(theirs),
                     "diff_pct": 100 * diff, "welch_p": p, "holm_p": a})
        print(f"{w:20s} ours {len(ours)} theirs {len(theirs)}  {100 * diff:+5.1f}%  "
              f"Welch p {p:.3f}  Holm {a:.3f}  ours mean {statistics.fmean(ours):,.0f} s  theirs "
              + ", ".join(f"{t:,.0f}" for t in theirs) + f" (mean {statistics.fmean(theirs):,.0f}) s")
    pooled = paired_ratio_ci([statistics.fmean(table[w][0]) for w in names],
                             [statistics.fmean(table[w][1]) for w in names])
    print(f"pooled ours / theirs over {len(names)} workloads: {pooled.label(3)}; "
          f"{sum(abs(r['diff_pct']) <= 5 for r in rows)} within 5%; "
          f"{sum(p == p for p in pvals)} tested, {sum(a < 0.05 for a in adjusted if a == a)} "
          "different at 0.05 after Holm")
    if args.out:
        args.out.write_text(json.dumps({"search": args.search, "seeds": seeds, "rows": rows,
                                        "pooled": [pooled.ratio, pooled.low, pooled.high]},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
