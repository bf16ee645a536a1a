"""Pollux's interference-avoidance experiment (the Pollux paper's Fig. 8c) beside the authors'
simulator's committed results (docs/goodput.md, "Interference"; docs/goodput-history.md,
"Interference avoidance").

    python scalability/pollux_interference.py --adaptdl GITDIR [--workloads 1-8] [--search dp]
        [--variants avoid,...] [--workers 2] [--out PATH_STEM]

Runs ``pollux`` on ``pollux-64`` over the Pollux workloads (``workloads/workload-N.csv``, load
1.0) in the artifact's variants: avoidance on (at most one distributed job per node) with 0%
interference, avoidance off (the artifact's ``pollux.py`` lines 387-390 commented out, ours
``avoid_interference=False``) with 0%, 25% and 50% interference (``--interference``: a distributed
job sharing a node with another distributed job runs at 1 - x of its goodput), plus avoidance on
with 50% as the check that avoidance leaves nothing to slow down.  Theirs: the artifact's
``simulator/results-inter/{avoid,noavoid,inter25,inter50}/summary.json`` ("avgs": avg JCT per
workload), read from a git directory of petuum/adaptdl (branch osdi21-artifact), e.g. the
``fetch`` mirror ``/work/.mirror/petuum+adaptdl/repo``.  Writes ``OUT.json`` (every run) and
``OUT.md`` (the table).
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from adaptdl_artifact import artifact_summary
from sim.engine import EngineConfig, simulate
from sim.goodput.profiles import shared_workloads_dir
from sim.goodput.workload import read_goodput_workload
from sim.metrics import summary
from sim.policies import get_policy
from sim.presets import get_preset

CLUSTER = "pollux-64"
#: label -> (avoid_interference, interference, the artifact's results folder or None)
VARIANTS = {
    "avoid": (True, 0.0, "avoid"),
    "avoid-50": (True, 0.5, None),
    "noavoid": (False, 0.0, "noavoid"),
    "noavoid-25": (False, 0.25, "inter25"),
    "noavoid-50": (False, 0.5, "inter50"),
}


def theirs(gitdir: str) -> dict[str, dict[str, float]]:
    """results folder -> workload -> their avg JCT (s)."""
    return {folder: {k: float(v) for k, v in
                     artifact_summary(gitdir, f"results-inter/{folder}")["avgs"].items()}
            for folder in sorted({v[2] for v in VARIANTS.values() if v[2]})}


def one(args) -> dict:
    label, workload, search = args
    avoid, inter, _ = VARIANTS[label]
    root = shared_workloads_dir("pollux")
    if root is None:
        raise SystemExit("the Pollux workloads are not found (set CLUSTERSIM_SHARED_DATA)")
    path = root / "workloads" / f"{workload}.csv"
    table, oracle = read_goodput_workload(path, interference=inter)
    pol = get_policy("pollux", search=search, avoid_interference=avoid)
    t0 = time.process_time()
    res = simulate(get_preset(CLUSTER), table, pol, oracle, EngineConfig())
    s = summary(res)
    return {"label": label, "workload": workload, "search": search, "avoid_interference": avoid,
            "interference": inter, "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"],
            "cpu_s": time.process_time() - t0}


def table(rows: list[dict], their: dict) -> str:
    by = {(r["label"], r["workload"]): r for r in rows}
    loads = sorted({r["workload"] for r in rows}, key=lambda w: int(w.split("-")[-1]))
    head = "| variant | " + " | ".join(loads) + " | mean | theirs mean | ours / avoid | theirs / avoid |"
    lines = [head, "|" + "---|" * (len(loads) + 5)]
    mean = lambda xs: sum(xs) / len(xs)   # noqa: E731
    have = [by["avoid", w]["avg_jct_s"] for w in loads if ("avoid", w) in by]
    ours_avoid = mean(have) if len(have) == len(loads) else None
    their_avoid = mean([their["avoid"][w] for w in loads])
    for label, (_, _, folder) in VARIANTS.items():
        got = [by[label, w] for w in loads if (label, w) in by]
        if len(got) != len(loads):
            continue
        cells = []
        for r in got:
            t = their.get(folder, {}).get(r["workload"]) if folder else None
            cells.append(f"{r['avg_jct_s']:,.0f}" + (f" ({t:,.0f})" if t else ""))
        ours = mean([r["avg_jct_s"] for r in got])
        tm = mean([their[folder][w] for w in loads]) if folder else None
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ours:,.0f} | "
                     + (f"{tm:,.0f}" if tm else "-") + " | "
                     + (f"{ours / ours_avoid:.3f}" if ours_avoid else "-") + " | "
                     + (f"{tm / their_avoid:.3f}" if tm else "-") + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adaptdl", required=True, help="git directory of petuum/adaptdl")
    ap.add_argument("--workloads", default="1-8", help="N-M: workloads/workload-N.csv .. M")
    ap.add_argument("--search", default="dp", choices=("dp", "nsga2"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="default scalability/results/pollux_fidelity/"
                    "interference (dp) or interference_nsga2; rows of other (variant, workload)s "
                    "already there are kept")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.workloads.split("-"))
    their = theirs(a.adaptdl)
    jobs = [(v, f"workload-{n}", a.search) for v in a.variants.split(",") for n in range(lo, hi + 1)]
    out = Path(a.out or "scalability/results/pollux_fidelity/interference"
               + ("" if a.search == "dp" else f"_{a.search}"))
    done = {(v, w) for v, w, _ in jobs}
    old = json.loads(out.with_suffix(".json").read_text())["rows"] if out.with_suffix(".json").exists() else []
    with ProcessPoolExecutor(a.workers) as ex:
        rows = [r for r in old if (r["label"], r["workload"]) not in done] + list(ex.map(one, jobs))
    out.with_suffix(".json").write_text(json.dumps({"cluster": CLUSTER, "theirs": their, "rows": rows},
                                                   indent=1) + "\n")
    md = table(rows, their)
    out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
