"""Is our sia-pollux different from the Sia simulator's Pollux, workload by workload?
(docs/goodput.md, "Several runs a workload").

    python scalability/sia_pollux_tests.py [--search dp] [--out results.json]

Reads the recorded runs (scalability/results/sia_fidelity/sia_pollux_draws*.json: every run of
theirs, each session's file listing all runs up to it; ours at seeds 0-4) and, per workload,
compares our mean with theirs by Welch's t-test (our seeds against their runs; no test where
they have one run), then adjusts the p-values for the number of workloads tested
(:func:`sim.stats.holm`).  Prints one row per workload and the pooled ratio (ours / theirs,
geometric mean over workloads with a bootstrap interval, :func:`sim.stats.paired_ratio_ci`).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from scipy import stats

from sim.stats import holm, paired_ratio_ci

RESULTS = Path(__file__).resolve().parent / "results" / "sia_fidelity"
#: oldest first: a later file's ``theirs_draws`` lists every run of theirs up to it
FILES = ["sia_pollux_draws.json", "sia_pollux_draws_s28.json", "sia_pollux_draws_s29.json"]


def runs(search: str) -> dict[str, tuple[list[float], list[float]]]:
    """workload -> (our avg JCTs over seeds 0-4, their avg JCTs), seconds."""
    theirs: dict[str, list[float]] = {}
    ours: dict[str, list[float]] = {}
    for name in FILES:
        for workload, rec in json.loads((RESULTS / name).read_text())["workloads"].items():
            if rec.get("theirs_draws"):
                theirs[workload] = [d["avg_jct_s"] for d in rec["theirs_draws"]]
            seeds = [rec.get("ours", {}).get(f"{search}_seed{s}") for s in range(5)]
            if all(seeds):
                ours[workload] = [r["avg_jct_s"] for r in seeds]
    return {w: (ours[w], theirs[w]) for w in ours if w in theirs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--search", default="dp", help="our search whose five seeds are compared")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    table = runs(args.search)
    if not table:
        raise SystemExit(f"no workload has our {args.search} seeds 0-4 and runs of theirs in "
                         f"{', '.join(FILES)}")
    names = sorted(table, key=lambda w: (w.split("/")[0], int(w.rsplit("-", 1)[1])))
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
              f"Welch p {p:.3f}  Holm {a:.3f}")
    pooled = paired_ratio_ci([statistics.fmean(table[w][0]) for w in names],
                             [statistics.fmean(table[w][1]) for w in names])
    print(f"pooled ours / theirs over {len(names)} workloads: {pooled.label(3)}; "
          f"{sum(abs(r['diff_pct']) <= 5 for r in rows)} within 5%; "
          f"{sum(p == p for p in pvals)} tested, {sum(a < 0.05 for a in adjusted if a == a)} "
          "different at 0.05 after Holm")
    if args.out:
        args.out.write_text(json.dumps({"search": args.search, "rows": rows,
                                        "pooled": [pooled.ratio, pooled.low, pooled.high]},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
