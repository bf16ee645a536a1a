"""Hops (paper 3) Table 4 in simulation: hops-512, 500 jobs, Poisson 100 jobs/h (about 5 h).

    .venv/bin/python scalability/hops_experiment.py [--seeds 5] [--jobs 500] [--load 100]

Every policy runs on the same workload and the same hidden server truth
(sim.hops.servers.ServerTruth, seeded per seed); results go to
scalability/results/hops/<cluster>_<jobs>jobs_<load>ph.json (one row per policy and seed) and .md (mean, 95% CI).
Workload [I]: Gavel's GPU counts (1, 2, 4, 8), Philly run times (sim.workload); each job's
requirement set is {d/2, d, 2d} within [1, 16] (REQUIREMENT_SET), and the rigid baselines get the
median d, as the paper gives Gavel.  Sia: not on this branch yet -- add its policy name to
POLICIES when the Sia port lands (the paper compares Hops, Sia and Gavel with the same LR queue
priority; our Gavel is its own max-min fairness, see docs/hops.md).
"""
from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim.engine import EngineConfig, simulate
from sim.hops.metrics import fragments_per_round, max_latency_ratio
from sim.jobs import JobTable
from sim.metrics import summary
from sim.policies import get_policy
from sim.presets import get_preset
from sim.throughput import TableThroughput
from sim.workload import generate_workload
from sim.hops.servers import ServerTruth

OUT = Path(__file__).resolve().parent / "results" / "hops"
#: policy name -> constructor arguments.  SIA: add "sia": {} here when the port lands.
POLICIES = {"hops": {}, "gavel-max-min-fairness-perf": {}}
#: requirement set of a job drawn at d GPUs
REQUIREMENT_SET = (0.5, 1.0, 2.0)
MAX_REQUEST = 16
#: the round length used to count Hops' fragments per round for every policy
FRAG_ROUND_S = 60.0


def workload(n_jobs: int, load: float, seed: int, oracle) -> JobTable:
    w = generate_workload(n_jobs, load, seed, throughput=oracle, durations="philly")
    d = np.asarray(w.gpus, np.int64)
    sets = [sorted({int(min(MAX_REQUEST, max(1, round(x * f)))) for f in REQUIREMENT_SET}) for x in d]
    t = w.table
    col = pa.array(sets, pa.list_(pa.int32()))
    return JobTable(t.set_column(t.schema.get_field_index("gpus_allowed"), "gpus_allowed", col))


def one(args) -> dict:
    name, seed, n_jobs, load, cluster_name = args
    cluster, oracle = get_preset(cluster_name), TableThroughput.builtin()
    w = workload(n_jobs, load, seed, oracle)
    truth = ServerTruth(cluster, n_jobs, seed=seed)
    res = simulate(cluster, w, get_policy(name, **POLICIES[name]), oracle, EngineConfig(), truth=truth)
    s = summary(res)
    return {"policy": name, "seed": seed, "makespan_h": s["makespan_s"] / 3600,
            "avg_jct_h": s["avg_jct_s"] / 3600, "avg_wait_h": s["avg_wait_s"] / 3600,
            "max_lr": max_latency_ratio(res), "avg_frag": float(fragments_per_round(res, FRAG_ROUND_S).mean()),
            "wall_s": s["wall_seconds"]}


def table(rows: list[dict]) -> str:
    keys = ("makespan_h", "avg_jct_h", "avg_wait_h", "max_lr", "avg_frag")
    out = ["| policy | seeds | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
    for name in POLICIES:
        sel = [r for r in rows if r["policy"] == name]
        cells = []
        for k in keys:
            x = np.array([r[k] for r in sel], float)
            ci = 1.96 * x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else float("nan")
            cells.append(f"{x.mean():.2f} ± {ci:.2f}")
        out.append(f"| {name} | {len(sel)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--load", type=float, default=100.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cluster", default="hops-512")
    a = ap.parse_args()
    tasks = [(p, s, a.jobs, a.load, a.cluster) for s in range(a.seeds) for p in POLICIES]
    with ProcessPoolExecutor(a.workers) as ex:
        rows = list(ex.map(one, tasks))
    OUT.mkdir(parents=True, exist_ok=True)
    stem = f"{a.cluster}_{a.jobs}jobs_{a.load:g}ph"
    (OUT / f"{stem}.json").write_text(json.dumps(rows, indent=1))
    (OUT / f"{stem}.md").write_text(table(rows) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
