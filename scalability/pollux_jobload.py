"""The Pollux paper's job-load experiment (its Fig. 9 inputs) beside the authors' simulator's
committed results (docs/goodput.md, "The Pollux simulator").

    python scalability/pollux_jobload.py --adaptdl GITDIR [--loads 0.5,1.0,2.0] [--workloads 1-8]
        [--policies pollux-tiresias,optimus,pollux] [--search dp|nsga2] [--seed 0] [--workers 2]
        [--round-origin S] [--out PATH_STEM]

Runs each policy on ``pollux-64`` over the Pollux workloads at each job load (``workloads-0.5``,
``workloads`` for 1.0, ``workloads-1.5``, ``workloads-2.0``; the shared data has no
``workloads-1.5``, so that one is read from the artifact, the same CSVs), ``pollux`` with
``--search`` (default our DP; ``nsga2`` the authors' genetic search, seeded by ``--seed``), every
run with the engine's defaults (the first-start delay on for this family).  A run is identified
by (load, workload, policy, search, seed).
Theirs: ``simulator/results-jobload/{tiresias,optimus,pollux}-LOAD/summary.json`` ("avgs": avg
JCT per workload) of petuum/adaptdl, branch osdi21-artifact, read from a git directory (e.g. the
``fetch`` mirror ``/work/.mirror/petuum+adaptdl/repo``).  Writes ``OUT.json`` (every run; rows
of other cells already there are kept) and ``OUT.md`` (the table and its summary).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from adaptdl_artifact import artifact_summary, artifact_text
from sim.api import simulate
from sim.engine import EngineConfig
from sim.goodput.profiles import shared_workloads_dir
from sim.metrics import summary

CLUSTER = "pollux-64"
#: our policy name -> the artifact's results-folder prefix
THEIR_NAME = {"pollux-tiresias": "tiresias", "optimus": "optimus", "pollux": "pollux"}
FOLDER = {"0.5": "workloads-0.5", "1.0": "workloads", "1.5": "workloads-1.5", "2.0": "workloads-2.0"}


def _summary(gitdir: str, policy: str, load: str) -> dict:
    return artifact_summary(gitdir, f"results-jobload/{THEIR_NAME[policy]}-{load}")


def theirs(gitdir: str, loads: list[str], policies: list[str]) -> dict[str, dict[str, float]]:
    """'policy@load' -> workload -> their avg JCT (s)."""
    return {f"{pol}@{load}": {k: float(v) for k, v in _summary(gitdir, pol, load)["avgs"].items()}
            for pol in policies for load in loads}


def their_jcts(gitdir: str, load: str, policy: str, workload: str) -> dict[str, float]:
    """job name -> their JCT (s) in that run (summary.json's "jcts")."""
    return {k: float(v) for k, v in _summary(gitdir, policy, load)["jcts"][workload].items()}


def workload_path(gitdir: str, load: str, workload: str) -> Path:
    """The workload CSV: from the shared data, else (``workloads-1.5``, which it lacks) the
    artifact's own copy, written once under the temporary directory."""
    root = shared_workloads_dir("pollux")
    if root is not None and (root / FOLDER[load] / f"{workload}.csv").exists():
        return root / FOLDER[load] / f"{workload}.csv"
    path = Path(tempfile.gettempdir()) / "pollux_jobload" / FOLDER[load] / f"{workload}.csv"
    if not path.exists():
        text = artifact_text(gitdir, f"{FOLDER[load]}/{workload}.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def one(args) -> dict:
    gitdir, load, workload, policy, search, seed, origin = args
    path = workload_path(gitdir, load, workload)
    params = {}
    if policy == "pollux":
        params = {"search": search} if seed is None else {"search": search, "seed": seed}
    t0 = time.process_time()
    res = simulate(CLUSTER, str(path), policy, config=EngineConfig(round_origin=origin), **params)
    cpu = round(time.process_time() - t0, 1)
    s = summary(res)
    their = their_jcts(gitdir, load, policy, workload)
    table = pd.read_csv(path)
    ours = dict(zip(table["name"], np.asarray(res.finish) - np.asarray(table["time"], float)))
    exact = sum(abs(ours[n] - t) <= 0.01 for n, t in their.items() if n in ours)
    return {"load": load, "workload": workload, "policy": policy, "search": params.get("search"),
            "seed": params.get("seed"), "round_origin": origin,
            "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"],
            "jobs": int(len(res.finish)), "jobs_same_jct": int(exact), "cpu_s": cpu}


def _pct(ours: float, their: float) -> float:
    return 100.0 * (ours / their - 1.0)


def key(r: dict) -> tuple:
    """A run's identity: (load, workload, policy, search, seed)."""
    return r["load"], r["workload"], r["policy"], r.get("search"), r.get("seed")


def label(r: dict) -> str:
    """The policy as the table names it: pollux with its search (and NSGA-II's seed)."""
    if r["policy"] != "pollux":
        return r["policy"]
    return f"pollux ({r['search']}" + (f", seed {r['seed']})" if r["search"] == "nsga2" else ")")


def table(rows: list[dict], their: dict) -> str:
    lines = ["| load | workload | policy | theirs | ours | diff | jobs with their JCT (0.01 s) |",
             "|---|---|---|---|---|---|---|"]
    diffs = []
    order = {p: i for i, p in enumerate(THEIR_NAME)}
    for r in sorted(rows, key=lambda r: (r["load"], int(r["workload"].split("-")[-1]),
                                         order[r["policy"]], label(r))):
        t = their[f"{r['policy']}@{r['load']}"][r["workload"]]
        d = _pct(r["avg_jct_s"], t)
        diffs.append((r, d))
        flag = " (outside 5%)" if abs(d) > 5 else ""
        same = f"{r['jobs_same_jct']} of {r['jobs']}" if "jobs_same_jct" in r else "-"
        lines.append(f"| {r['load']} | {r['workload']} | {label(r)} | {t:,.0f} | "
                     f"{r['avg_jct_s']:,.0f} | {d:+.1f}%{flag} | {same} |")
    lines.append("")
    labels = sorted({label(r) for r in rows}, key=lambda x: (order[x.split(" ")[0]], x))
    for lab in labels:
        for load in sorted({r["load"] for r in rows}):
            ds = [d for r, d in diffs if label(r) == lab and r["load"] == load]
            if ds:
                lines.append(f"- {lab} at load {load}: {len(ds)} runs, mean |diff| "
                             f"{sum(map(abs, ds)) / len(ds):.1f}%, mean signed "
                             f"{sum(ds) / len(ds):+.1f}%, within 5%: "
                             f"{sum(abs(d) <= 5 for d in ds)} of {len(ds)}")
    allds = [d for r, d in diffs if r.get("search") in (None, "dp")]
    if allds:
        lines.append(f"- all but NSGA-II: {len(allds)} runs, mean |diff| "
                     f"{sum(map(abs, allds)) / len(allds):.1f}%, "
                     f"within 5%: {sum(abs(d) <= 5 for d in allds)} of {len(allds)}")
    lines.append(_order_check(rows))
    return "\n".join(lines) + "\n"


def _order_check(rows: list[dict]) -> str:
    """The paper's direction, per (load, workload): pollux (dp) < pollux-tiresias and < optimus."""
    by = {(r["load"], r["workload"], r["policy"]): r["avg_jct_s"] for r in rows
          if r.get("search") in (None, "dp")}
    cells = {(r["load"], r["workload"]) for r in rows}
    full = [c for c in cells if all((*c, p) in by for p in THEIR_NAME)]
    held = [c for c in full if by[(*c, "pollux")] < min(by[(*c, "pollux-tiresias")],
                                                        by[(*c, "optimus")])]
    if not full:
        return "- (no cell has all three policies with dp: the paper's direction is not checked)"
    return (f"- Pollux (dp) beats Tiresias and Optimus in {len(held)} of {len(full)} "
            f"(load, workload) cells")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adaptdl", required=True, help="git directory of petuum/adaptdl")
    ap.add_argument("--loads", default="0.5,1.0,2.0")
    ap.add_argument("--workloads", default="1-8", help="N-M: workload-N.csv .. M")
    ap.add_argument("--policies", default=",".join(THEIR_NAME))
    ap.add_argument("--search", default="dp", choices=("dp", "nsga2"), help="pollux's search")
    ap.add_argument("--seed", type=int, default=0, help="pollux's seed (NSGA-II's draws)")
    ap.add_argument("--round-origin", type=float, default=None,
                    help="EngineConfig.round_origin (0: rounds at multiples of 60 s from 0, as theirs)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="scalability/results/pollux_fidelity/jobload_all")
    a = ap.parse_args()
    loads, policies = a.loads.split(","), a.policies.split(",")
    lo, hi = (int(x) for x in a.workloads.split("-"))
    their = theirs(a.adaptdl, loads, policies)
    jobs = [(a.adaptdl, ld, f"workload-{n}", p, a.search if p == "pollux" else None,
             a.seed if p == "pollux" and a.search == "nsga2" else None, a.round_origin)
            for ld in loads for n in range(lo, hi + 1) for p in policies]
    # the slowest (pollux at 2.0) first, so the pool's tail is short
    jobs.sort(key=lambda j: (j[3] != "pollux", j[1] != "2.0"))
    out = Path(a.out).with_suffix(".json")
    saved = json.loads(out.read_text()) if out.exists() else {"theirs": {}, "rows": []}
    done = {j[1:6] for j in jobs}
    with ProcessPoolExecutor(a.workers) as ex:
        new = []
        for r in ex.map(one, jobs):
            print(f"{r['load']} {r['workload']} {label(r)}: {r['avg_jct_s']:.1f} s "
                  f"({r['cpu_s']} CPU-s), {r['jobs_same_jct']} of {r['jobs']} jobs with their JCT "
                  f"(0.01 s)", flush=True)
            new.append(r)
    rows = [r for r in saved["rows"] if key(r) not in done] + new
    allthem = {**saved["theirs"], **their}
    out.write_text(json.dumps(
        {"cluster": CLUSTER, "command": "python scalability/pollux_jobload.py --adaptdl GITDIR",
         "theirs": allthem, "rows": rows}, indent=1) + "\n")
    md = table(rows, allthem)
    out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
