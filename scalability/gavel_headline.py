"""Gavel's headline in our simulator: heterogeneity-aware LAS and FTF against their agnostic
versions on Gavel's continuous traces, beside the numbers Gavel's own logs give (docs/gavel.md,
"Heterogeneity").

    python scalability/gavel_headline.py --out scalability/results/gavel_headline/run.json
        [--cells single:5.6,multi:2.6 ...] [--policies max_min_fairness,...] [--seeds 0]
    python scalability/gavel_headline.py --table scalability/results/gavel_headline/seed*.json

Gavel's setup (EXPERIMENTS.md, Figures 8-10; ``scripts/sweeps/run_sweep_continuous.py``): the
36:36:36 cluster of one-GPU servers, its measured table, 360 s rounds, Poisson arrivals from
t = 0 (no steady-state start), the "continuous-single" (every job 1 GPU) or
"continuous-multiple" (``--generate-multi-gpu-jobs``) job law, and the average JCT of jobs
4,000-4,999.  Ours: the same setting as ``gavel_fidelity.py`` (consolidated rates, no restart
delay), workloads from our generator with Gavel's laws (``sizes="single"`` or ``"gavel"``,
``runnable_only=False``, ``work="iterations"``), as many jobs as it takes for the window's last
job to finish before the last arrival (Gavel's simulator keeps generating jobs until the window
is done): the first 6,500 jobs of one 80,000-job trace per load and seed, 1.5 times more
until it holds (every policy runs the same jobs).

Gavel's numbers (:data:`GAVEL_SEED0`) are the averages its evaluation notebooks print from the
paper's logs (``scheduler/notebooks/figures/evaluation/continuous_jobs.ipynb`` and
``continuous_jobs_multigpu.ipynb`` at stanford-futuredata/gavel c4fa400, ``plot_jct_cdf``:
seed 0, jobs 4,000-4,999, hours).  Our traces are other draws of the same laws, so the
comparison is of the margins (agnostic / aware), not of single JCTs to the digit.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from gavel_fidelity import gavel_cluster, gavel_oracle
from sim.engine import EngineConfig, simulate
from sim.jobs import JobTable
from sim.policies import get_policy
from sim.workload import generate_workload

WINDOW = (4000, 5000)
SIZES = {"single": "single", "multi": "gavel"}
#: (trace, Gavel policy) -> {jobs/h: avg JCT h of jobs 4,000-4,999, seed 0} from Gavel's notebooks
GAVEL_SEED0 = {
    ("single", "max_min_fairness"): {2.0: 23.47, 4.0: 23.49, 4.8: 35.79, 5.2: 63.78, 5.6: 95.99},
    ("single", "max_min_fairness_perf"): {2.0: 16.95, 4.0: 16.82, 4.8: 18.97, 5.2: 22.02, 5.6: 28.96},
    ("multi", "max_min_fairness"): {1.0: 26.10, 2.0: 28.91, 2.4: 38.71, 2.6: 70.54, 2.8: 169.93},
    ("multi", "max_min_fairness_perf"): {1.0: 18.54, 2.0: 21.90, 2.4: 30.03, 2.6: 36.44, 2.8: 55.78},
    ("multi", "finish_time_fairness"): {1.0: 26.12, 2.0: 28.87, 2.4: 38.65, 2.6: 64.38},
    ("multi", "finish_time_fairness_perf"): {1.0: 18.51, 2.0: 21.80, 2.4: 27.93, 2.6: 33.90},
}
OURS = {"max_min_fairness": "gavel-max-min-fairness", "max_min_fairness_perf": "gavel-max-min-fairness-perf",
        "finish_time_fairness": "gavel-finish-time-fairness",
        "finish_time_fairness_perf": "gavel-finish-time-fairness-perf"}


def window_run(trace: str, load: float, policy: str, seed: int, n_jobs: int = 6500,
               n_max: int = 80_000) -> dict:
    """One policy on one generated trace of ``n_max`` jobs, run on its first ``n_jobs`` (1.5
    times more until the window ends before the last arrival, as Gavel's simulator generates
    jobs until the window is done): every policy and every attempt sees the same jobs.
    Returns the window's avg JCT (h), or None for it when even ``n_max`` jobs are too few."""
    oracle, cluster = gavel_oracle(), gavel_cluster("36:36:36")
    full = generate_workload(n_max, load_jobs_per_hour=load, seed=seed, sizes=SIZES[trace],
                             throughput=oracle, runnable_only=False, work="iterations")
    arrival = full.table.column("arrival_s").to_numpy()
    lo, hi = WINDOW
    row = {"trace": trace, "load": load, "policy": policy, "seed": seed, "avg_jct_h": None}
    while True:
        jobs = JobTable.from_table(full.table.slice(0, n_jobs), f"{trace}-{load}-{seed}")
        t0 = time.process_time()
        res = simulate(cluster, jobs, get_policy(OURS[policy]), oracle, EngineConfig(restart_delay_s=0.0))
        finish = np.asarray(res.finish)
        row.update(jobs=n_jobs, cpu_s=time.process_time() - t0,
                   window_last_finish_h=float(finish[lo:hi].max() / 3600),
                   last_arrival_h=float(arrival[n_jobs - 1] / 3600))
        if finish[lo:hi].max() <= arrival[n_jobs - 1]:
            row["avg_jct_h"] = float(np.mean(finish[lo:hi] - arrival[lo:hi]) / 3600.0)
            return row
        if n_jobs == n_max:
            return row
        n_jobs = min(int(n_jobs * 1.5), n_max)


PAIRS = (("max_min_fairness", "max_min_fairness_perf", "LAS"),
         ("finish_time_fairness", "finish_time_fairness_perf", "FTF"))


def table(paths: list[Path]) -> str:
    """The markdown table of agnostic / aware avg JCT (h), Gavel's and ours per seed."""
    rows = [r for p in paths for r in json.loads(p.read_text())]
    got = {(r["trace"], r["load"], r["policy"], r["seed"]): r["avg_jct_h"] for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    out = ["| trace | jobs/h | policy | Gavel (seed 0): agnostic / aware | ratio | "
           + " | ".join(f"ours seed {s}: agnostic / aware | ratio" for s in seeds) + " |",
           "|---|---|---|---|---|" + "---|---|" * len(seeds)]
    cells = sorted({(r["trace"], r["load"]) for r in rows})
    for trace, load in cells:
        for agn, aware, name in PAIRS:
            if (trace, agn) not in GAVEL_SEED0 or load not in GAVEL_SEED0[(trace, agn)]:
                continue
            g0, g1 = GAVEL_SEED0[(trace, agn)][load], GAVEL_SEED0[(trace, aware)][load]
            line = f"| {trace} | {load:g} | {name} | {g0:.2f} / {g1:.2f} | {g0 / g1:.2f}x |"
            for s in seeds:
                a, b = got.get((trace, load, agn, s)), got.get((trace, load, aware, s))
                line += (f" {a:.2f} / {b:.2f} | {a / b:.2f}x |" if a and b else " - | - |")
            out.append(line)
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="single:5.6,multi:2.6,single:4.8,multi:2.4,single:2.0,"
                    "multi:2.0,single:5.2,multi:1.0")
    ap.add_argument("--policies", default="max_min_fairness,max_min_fairness_perf,"
                    "finish_time_fairness,finish_time_fairness_perf")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, nargs="+", metavar="JSON",
                    help="only print the markdown table of these result files")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.out is None:
        ap.error("--out is required unless --table is given")
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    done = {(r["trace"], r["load"], r["policy"], r["seed"]) for r in rows}
    for cell in args.cells.split(","):
        trace, load = cell.split(":")[0], float(cell.split(":")[1])
        for policy in args.policies.split(","):
            if (trace, policy) not in GAVEL_SEED0 or load not in GAVEL_SEED0[(trace, policy)]:
                continue                                  # no published number to set it beside
            for seed in (int(s) for s in args.seeds.split(",")):
                if (trace, load, policy, seed) in done:
                    continue
                row = window_run(trace, load, policy, seed)
                row["gavel_seed0_avg_jct_h"] = GAVEL_SEED0[(trace, policy)][load]
                rows.append(row)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(rows, indent=1) + "\n")
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
