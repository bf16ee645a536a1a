"""CPU time of our gavel-* policies against Gavel's own simulator on the same Gavel trace
(docs/gavel.md, "Speed").

    python scalability/gavel_speed.py TRACE --cluster 36:36:36 [--policies a,b]
        [--gavel-dir DIR --gavel-python PY] [--lp-jobs 2000 --lp-nodes 1024]

Ours: the CPU seconds of ``simulate`` alone (process time; imports and the first Numba
compilation excluded by a warm-up run on the trace's first 20 jobs) and of a fresh interpreter
doing everything (``--whole``).  Gavel: with ``--gavel-dir`` (a checkout with the
``run_gavel.py`` wrapper of docs/gavel.md) and ``--gavel-python``, the user + system CPU
seconds of its simulator process on the same trace and cluster.  ``--lp-jobs``: one
heterogeneity-aware max-min LP with that many active jobs on a cluster of ``--lp-nodes``
servers (8 GPUs each, three types).
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import numpy as np

from gavel_fidelity import GAVEL_NAMES, gavel_cluster, gavel_oracle
from sim.engine import EngineConfig, simulate
from sim.jobs import JobTable
from sim.metrics import summary
from sim.policies import get_policy
from sim.policies.gavel_lp import AllocationLP, proportional_allocation
from sim.traces.gavel import read_gavel


def ours(trace: str, cluster_spec: str, name: str) -> dict:
    oracle, jobs, cluster = gavel_oracle(), read_gavel(trace).jobs, gavel_cluster(cluster_spec)
    config = EngineConfig(restart_delay_s=0.0)
    warm = JobTable.from_table(jobs.table.slice(0, 20), "warm-up")
    simulate(cluster, warm, get_policy(name), oracle, config)
    t0 = time.process_time()
    res = simulate(cluster, jobs, get_policy(name), oracle, config)
    cpu = time.process_time() - t0
    s = summary(res)
    return {"cpu_s": cpu, "avg_jct_h": s["avg_jct_s"] / 3600, "makespan_h": s["makespan_s"] / 3600,
            "decisions": s["decisions"]}


def gavel(trace: str, cluster_spec: str, name: str, gavel_dir: str, python: str,
          timeout_s: float) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [python, "run_gavel.py", "-t", trace, "-p", GAVEL_NAMES[name], "--throughputs_file",
           "scheduler/simulation_throughputs.json", "-c", cluster_spec, "--seed", "0"]
    try:
        out = subprocess.run(cmd, cwd=gavel_dir, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"cpu_s": float("nan"), "timed_out": True}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out.stdout + out.stderr
    found = {}
    for line in text.splitlines():
        if line.startswith("Average job completion time:"):
            found.setdefault("avg_jct_h", float(line.split()[4]) / 3600)
        elif line.startswith("Total duration:"):
            found["makespan_h"] = float(line.split()[2]) / 3600
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, **found}


def whole(trace: str, cluster_spec: str, name: str) -> float:
    """CPU seconds of a fresh interpreter: imports, reading, one simulation."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = ("import sys; sys.path.insert(0, 'scalability'); from gavel_fidelity import *; "
            "from sim.engine import EngineConfig, simulate; from sim.policies import get_policy; "
            "from sim.traces.gavel import read_gavel; "
            f"simulate(gavel_cluster({cluster_spec!r}), read_gavel({trace!r}).jobs, "
            f"get_policy({name!r}), gavel_oracle(), EngineConfig(restart_delay_s=0.0))")
    subprocess.run([sys.executable, "-c", code], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def lp_solve_s(n_jobs: int, n_nodes: int, seed: int = 0) -> float:
    """Seconds of one heterogeneity-aware max-min LP: n_jobs on n_nodes 8-GPU servers."""
    rng = np.random.default_rng(seed)
    capacity = np.full(3, n_nodes * 8 // 3, float)
    scale = rng.choice([1, 2, 4, 8], size=n_jobs, p=[0.7, 0.1, 0.15, 0.05]).astype(float)
    thr = rng.uniform(0.5, 4.0, (n_jobs, 3)) * np.array([3.0, 2.0, 1.0])
    t0 = time.perf_counter()
    lp = AllocationLP(scale, capacity)
    prop = np.sum(thr * proportional_allocation(n_jobs, capacity), axis=1)
    lp.max_min(thr * (scale / prop)[:, None])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--cluster", default="36:36:36")
    ap.add_argument("--policies", default="gavel-max-min-fairness-perf")
    ap.add_argument("--gavel-dir")
    ap.add_argument("--gavel-python", default="python3")
    ap.add_argument("--gavel-timeout", type=float, default=600.0)
    ap.add_argument("--whole", action="store_true")
    ap.add_argument("--lp-jobs", type=int, default=0)
    ap.add_argument("--lp-nodes", type=int, default=1024)
    args = ap.parse_args()
    if args.lp_jobs:
        print(f"one max-min LP, {args.lp_jobs} jobs, {args.lp_nodes} servers: "
              f"{lp_solve_s(args.lp_jobs, args.lp_nodes):.3f} s", flush=True)
    for name in args.policies.split(","):
        row = {"policy": name, "ours": ours(args.trace, args.cluster, name)}
        if args.whole:
            row["ours_whole_cpu_s"] = whole(args.trace, args.cluster, name)
        if args.gavel_dir:
            row["gavel"] = gavel(args.trace, args.cluster, name, args.gavel_dir,
                                 args.gavel_python, args.gavel_timeout)
            row["ratio"] = row["gavel"]["cpu_s"] / row["ours"]["cpu_s"]
        print(row, flush=True)


if __name__ == "__main__":
    main()
