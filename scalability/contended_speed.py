"""Contended runs at C speed (issue 18): native policies against the Python decision path.

Each cell is one subprocess (so its peak RSS is its own): a generated workload on a uniform
cluster, one policy, decided inside the C kernel (``native``) or by the Python policy at every
decision (``python``, the path every policy took before the native kernels; cut off at
``--python-timeout`` seconds).  Also: the event-heap microbenchmark (C, same machine, same
run) for the kernel's event rate, and a load sweep whose per-job time is plotted against the
mean queue length.

    python scalability/contended_speed.py --out scalability/results/contended
    python scalability/contended_speed.py --cell 100000 1200 las native   # one cell, JSON out
    python scalability/contended_speed.py --compare /tmp/base --cells 300:las,1200:srtf --repeat 2
        # each cell by the code in /tmp/base (a checkout built in place, e.g. a worktree of the
        # branch's start) and by this checkout, alternately in one run: OUT/compare.json
        # (--cluster and --jobs apply to every cell: e.g. --cluster gavel-108 --jobs 300
        # --cells 6:themis)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

POLICIES = ("fifo", "sjf", "srtf", "las", "tiresias")
ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "uniform:nodes=1024,gpus=8"


def run_cell(jobs: int, load: float, policy: str, path: str, cluster: str = CLUSTER) -> dict:
    """One simulation; returns its figures (wall time of simulate only)."""
    import numpy as np

    from sim.engine import EngineConfig, simulate
    from sim.metrics import summary
    from sim.policies import get_policy
    from sim.presets import load_cluster
    from sim.throughput import default_oracle
    from sim.workload import generate_workload

    oracle = default_oracle()
    table = generate_workload(jobs, load_jobs_per_hour=load, seed=0, throughput=oracle)
    c = load_cluster(cluster)
    t0, cpu0 = time.perf_counter(), time.process_time()
    res = simulate(c, table, get_policy(policy), oracle, EngineConfig(native=path == "native"))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    s = summary(res)
    tl = res.timeline.arrays()
    return {"jobs": jobs, "load": load, "policy": policy, "path": path, "cluster": cluster,
            "sim_s": wall, "sim_cpu_s": cpu, "avg_wait_h": s["avg_wait_s"] / 3600, "avg_jct_h": s["avg_jct_s"] / 3600,
            "mean_queue": float(np.mean(tl["queued"])) if tl["queued"].size else 0.0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "finish_checksum": float(np.sum(res.finish)), "profile": res.profile}


def _subprocess_cell(jobs, load, policy, path, timeout, cluster=CLUSTER) -> dict:
    cmd = [sys.executable, __file__, "--cell", str(jobs), str(load), policy, path, "--cluster", cluster]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"jobs": jobs, "load": load, "policy": policy, "path": path, "cluster": cluster,
                "sim_s": None, "timed_out_after_s": timeout}
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(base: Path, cells: list[tuple[float, str]], repeat: int, jobs: int, out: Path,
            cluster: str = CLUSTER) -> None:
    """Native cells (a policy without a native kernel takes the Python path) run by the code
    at ``base`` and by this checkout, alternately (one process per cell, same machine, same
    run), so that their time ratio means something on a loaded VM.  Each row adds the cell
    process's CPU seconds (user + system, setup included: ``process_cpu_s``), less sensitive
    than wall time to other sessions on the machine."""
    rows = []
    for rep in range(repeat):
        for load, policy in cells:
            for code, root in (("base", base.resolve()), ("new", ROOT)):
                cmd = [sys.executable, str(root / "scalability" / "contended_speed.py"), "--cell", str(jobs),
                       str(load), policy, "native", "--cluster", cluster]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=root,
                                     env={**os.environ, "PYTHONPATH": str(root)})
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                row = {"rep": rep, "code": code, "process_cpu_s": cpu,
                       **json.loads(res.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps({"base": str(base), "cells": rows}, indent=1))


def heap_limit_events_per_s(n: int = 2_000_000) -> float:
    """A C binary heap of (time, kind, seq) events, pushed and popped n times: the machine's
    event-heap limit, compiled and run here (gcc -O3)."""
    import tempfile
    src = r'''
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
typedef struct { double t; int32_t kind; int64_t seq, job, version; } ev;
static int less(const ev *a, const ev *b) { if (a->t != b->t) return a->t < b->t;
  if (a->kind != b->kind) return a->kind < b->kind; return a->seq < b->seq; }
int main(int argc, char **argv) {
  long n = atol(argv[1]); ev *h = malloc(sizeof(ev) * (n + 1)); long len = 0, seq = 0;
  unsigned long x = 88172645463325252UL; struct timespec a, b; double now = 0, sink = 0;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long k = 0; k < n; k++) {           /* hold ~ 10^4 pending events, as a busy cluster */
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    ev e = {now + (double)(x % 100000) / 10.0, (int32_t)(x % 4), seq++, k, 0};
    long i = len++; while (i > 0) { long p = (i - 1) / 2; if (!less(&e, &h[p])) break; h[i] = h[p]; i = p; } h[i] = e;
    if (len > 10000) { ev top = h[0], last = h[--len]; long i2 = 0;
      for (;;) { long c = 2 * i2 + 1; if (c >= len) break; if (c + 1 < len && less(&h[c + 1], &h[c])) c++;
        if (!less(&h[c], &last)) break; h[i2] = h[c]; i2 = c; }
      if (len > 0) h[i2] = last; now = top.t; sink += top.t; } }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.6f %g\n", (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec), sink);
  return 0; }
'''
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "heap.c").write_text(src)
        subprocess.run(["gcc", "-O3", "-o", str(Path(d) / "heap"), str(Path(d) / "heap.c")], check=True)
        out = subprocess.run([str(Path(d) / "heap"), str(n)], capture_output=True, text=True, check=True)
    secs = float(out.stdout.split()[0])
    return 2 * n / secs          # a push and a pop per event


def plot(cells_json: Path, out_png: Path) -> None:
    """Simulator time per job against the mean queue length (log x), native cells by policy."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    doc = json.loads(cells_json.read_text())
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in POLICIES:
        rows = sorted((r for r in doc["cells"] if r.get("policy") == policy and r.get("path") == "native"
                       and r.get("sim_s") is not None and r.get("jobs") == 100_000),
                      key=lambda r: r["mean_queue"])
        if rows:
            ax.plot([max(r["mean_queue"], 1.0) for r in rows], [1e6 * r["sim_s"] / r["jobs"] for r in rows],
                    "o-", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("mean queue length (jobs waiting, over decision points)")
    ax.set_ylabel("simulator time per job (us)")
    ax.set_title("100,000 jobs on 1,024 x 8 GPUs, loads 150-1,200 jobs/h (native)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", nargs=4, metavar=("JOBS", "LOAD", "POLICY", "PATH"))
    ap.add_argument("--cluster", default=CLUSTER)
    ap.add_argument("--out", type=Path, default=Path("scalability/results/contended"))
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--loads", default="300,600,1200")
    ap.add_argument("--sweep-loads", default="150,300,450,600,900,1200")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 jobs with FIFO")
    ap.add_argument("--python-timeout", type=float, default=120.0)
    ap.add_argument("--python-policies", default="fifo,sjf,srtf,las,tiresias")
    ap.add_argument("--plot", action="store_true", help="only redraw the plot from OUT/cells.json")
    ap.add_argument("--compare", type=Path, metavar="BASE", help="time --cells by BASE's code and this one")
    ap.add_argument("--cells", default="300:las,600:las,1200:las,1200:srtf,1200:tiresias")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    if args.compare:
        cells = [(float(c.split(":")[0]), c.split(":")[1]) for c in args.cells.split(",")]
        compare(args.compare, cells, args.repeat, args.jobs, args.out, args.cluster)
        return
    if args.plot:
        plot(args.out / "cells.json", args.out / "load_sweep.png")
        return
    if args.cell:
        jobs, load, policy, path = args.cell
        print(json.dumps(run_cell(int(jobs), float(load), policy, path, args.cluster)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    loads = [float(x) for x in args.loads.split(",")]
    for load in loads:
        for policy in POLICIES:
            for path in ("native", "python"):
                if path == "python" and policy not in args.python_policies.split(","):
                    continue
                timeout = args.python_timeout if path == "python" else 900
                row = _subprocess_cell(args.jobs, load, policy, path, timeout, args.cluster)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    for load in [float(x) for x in args.sweep_loads.split(",")]:
        if load in loads:
            continue
        for policy in ("fifo", "srtf", "tiresias"):
            row = _subprocess_cell(args.jobs, load, policy, "native", 900, args.cluster)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    if args.million:
        row = _subprocess_cell(1_000_000, 150.0, "fifo", "native", 900, args.cluster)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
    heap = heap_limit_events_per_s()
    (args.out / "cells.json").write_text(json.dumps({"heap_limit_events_per_s": heap, "cells": rows},
                                                    indent=1))
    print(f"event-heap limit: {heap:.3g} events/s")
    plot(args.out / "cells.json", args.out / "load_sweep.png")


if __name__ == "__main__":
    main()
