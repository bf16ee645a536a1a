"""CPU time of our gavel-* policies against Gavel's own simulator on the same Gavel traces, in
one run (docs/gavel.md, "Speed").

    python scalability/gavel_speed.py --trace t500=PATH:36:36:36 [--trace NAME=PATH:V:P:K ...]
        [--policies a,b | --policies-for NAME=a,b] [--gavel-dir DIR --gavel-python PY]
        [--baseline-src DIR] [--solver NAME] [--lp-jobs 2000 --lp-nodes 1024] [--repeat N]
        [--out results.json]

Every measurement runs in a fresh process, one after the other (the machine is shared: compare
ratios measured in the same run, never absolute seconds across runs):

* ours: ``simulate`` alone (process time; imports and Numba compilation excluded by a warm-up
  run on the trace's first 20 jobs), and the whole child process (user + system CPU:
  interpreter, imports, reading, warm-up and run).
* baseline (``--baseline-src``): the same child with another checkout's ``sim`` first on the
  path (e.g. ``git archive`` of an older commit with the compiled ``sim/_sk_native*.so``
  copied in), to show what a change bought in the same run.
* Gavel (``--gavel-dir``, a checkout with the ``run_gavel.py`` wrapper of docs/gavel.md, and
  ``--gavel-python``): user + system CPU of its simulator process on the same trace and
  cluster (one-GPU servers, seed 0), interpreter start and imports included (1-2 s).
  ``--gavel-start``: also Gavel's simulator on the trace's first job alone, the same way: its
  fixed cost (start, imports, a one-job run), which a row subtracts from Gavel's CPU seconds
  for the ratio of the simulations alone (``ratio_net``, "Gavel less its start / ours").
* ``--lp-jobs``: one heterogeneity-aware max-min LP with that many active jobs on a cluster of
  ``--lp-nodes`` 8-GPU servers (three types), wall and CPU seconds, best of ``--lp-repeat``.

``--out`` writes the rows as JSON (scalability/results/gavel_speed/).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from gavel_fidelity import GAVEL_NAMES  # ours -> Gavel's policy name

HERE = os.path.dirname(os.path.abspath(__file__))

#: the child that runs one of our simulations and prints its measurements as JSON
CHILD = """
import json, sys, time
sys.path.insert(0, {here!r})
from gavel_fidelity import gavel_cluster, gavel_oracle
from sim.engine import EngineConfig, simulate
from sim.jobs import JobTable
from sim.metrics import summary
from sim.policies import get_policy
from sim.traces.gavel import read_gavel
oracle, jobs, cluster = gavel_oracle(), read_gavel({trace!r}).jobs, gavel_cluster({cluster!r})
config = EngineConfig(restart_delay_s=0.0)
warm = JobTable.from_table(jobs.table.slice(0, 20), "warm-up")
simulate(cluster, warm, get_policy({policy!r}, **{params!r}), oracle, config)
t0 = time.process_time()
res = simulate(cluster, jobs, get_policy({policy!r}, **{params!r}), oracle, config)
cpu = time.process_time() - t0
s = summary(res)
print(json.dumps({{"cpu_s": cpu, "avg_jct_h": s["avg_jct_s"] / 3600,
                  "makespan_h": s["makespan_s"] / 3600, "decisions": int(s["decisions"])}}))
"""


def _child_cpu(cmd: list[str], **kw) -> tuple[subprocess.CompletedProcess, float]:
    """Run a child process; (its result, its user + system CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ours(trace: str, cluster: str, policy: str, src: str | None = None,
         params: dict | None = None) -> dict:
    """One of our runs in a fresh interpreter (``src``: a checkout whose ``sim`` comes first;
    ``params``: the policy's keyword arguments)."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    code = CHILD.format(here=HERE, trace=trace, cluster=cluster, policy=policy, params=params or {})
    # cwd: ``python -c`` puts the working directory first on the path, before PYTHONPATH
    out, cpu = _child_cpu([sys.executable, "-c", code], env=env, cwd=src or os.path.dirname(HERE))
    if out.returncode != 0:
        raise RuntimeError(f"our run failed ({policy} on {trace}):\n{out.stderr[-2000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_cpu_s": cpu}


def gavel(trace: str, cluster: str, policy: str, gavel_dir: str, python: str,
          timeout_s: float) -> dict:
    cmd = [python, "run_gavel.py", "-t", os.path.abspath(trace), "-p", GAVEL_NAMES[policy],
           "--throughputs_file", "scheduler/simulation_throughputs.json", "-c", cluster,
           "--seed", "0"]
    try:
        out, cpu = _child_cpu(cmd, cwd=gavel_dir, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"cpu_s": float("nan"), "timed_out": True}
    found = {}
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("Average job completion time:"):
            found.setdefault("avg_jct_h", float(line.split()[4]) / 3600)
        elif line.startswith("Total duration:"):
            found["makespan_h"] = float(line.split()[2]) / 3600
    return {"cpu_s": cpu, **found}


def repeated(runs: dict, n: int) -> dict:
    """Each measurement of ``runs`` (name -> callable) n times, interleaved: per name the run
    of least CPU time, with ``cpu_s_runs`` the CPU seconds of all n (a shared machine's load
    only ever adds time)."""
    samples: dict[str, list[dict]] = {k: [] for k in runs}
    for _ in range(max(n, 1)):
        for k, run in runs.items():
            samples[k].append(run())
    return {k: {**min(v, key=lambda r: r["cpu_s"]), "cpu_s_runs": [r["cpu_s"] for r in v]}
            for k, v in samples.items()}


def lp_solve_s(n_jobs: int, n_nodes: int, repeat: int = 3, seed: int = 0) -> dict:
    """Wall and CPU seconds (best of ``repeat``) of one heterogeneity-aware max-min LP (built
    and solved): n_jobs on n_nodes 8-GPU servers of three types."""
    from sim.policies.gavel_lp import AllocationLP, proportional_allocation
    rng = np.random.default_rng(seed)
    capacity = np.full(3, n_nodes * 8 // 3, float)
    scale = rng.choice([1, 2, 4, 8], size=n_jobs, p=[0.7, 0.1, 0.15, 0.05]).astype(float)
    thr = rng.uniform(0.5, 4.0, (n_jobs, 3)) * np.array([3.0, 2.0, 1.0])
    best = {"wall_s": np.inf, "cpu_s": np.inf}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        lp = AllocationLP(scale, capacity)
        prop = np.sum(thr * proportional_allocation(n_jobs, capacity), axis=1)
        lp.max_min(thr * (scale / prop)[:, None])
        best = {"wall_s": min(best["wall_s"], time.perf_counter() - t0),
                "cpu_s": min(best["cpu_s"], time.process_time() - c0)}
    return {"jobs": n_jobs, "nodes": n_nodes, **best}


def table(result: dict) -> str:
    """The rows as a markdown table: CPU seconds of Gavel, ours (``simulate``; whole process),
    the baseline, and the ratios."""
    nan = float("nan")
    lines = ["| trace | policy | Gavel CPU-s (its start) | ours CPU-s (whole process) | Gavel / ours "
             "(whole process) | Gavel less its start / ours | baseline CPU-s | baseline / ours | "
             "JCT h Gavel / ours |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        o, g, b = r["ours"], r.get("gavel", {}), r.get("baseline", {})
        start = r.get("gavel_start", {}).get("cpu_s", nan)
        lines.append(
            f"| {r['trace']} | {r['policy']} | {g.get('cpu_s', nan):.1f} ({start:.1f}) | "
            f"{o['cpu_s']:.2f} ({o['process_cpu_s']:.1f}) | {r.get('ratio', nan):.0f}x "
            f"({r.get('ratio_process', nan):.1f}x) | {r.get('ratio_net', nan):.0f}x | "
            f"{b.get('cpu_s', nan):.2f} | {b.get('cpu_s', nan) / o['cpu_s']:.1f}x | "
            f"{g.get('avg_jct_h', nan):.2f} / {o['avg_jct_h']:.2f} |")
    return "\n".join(lines)


def first_job_trace(path: str, out_dir: str) -> str:
    """A trace file holding the first job of the trace at ``path``."""
    with open(path) as f:
        first = next(line for line in f if line.strip())
    out = os.path.join(out_dir, "first_job_" + os.path.basename(path))
    with open(out, "w") as f:
        f.write(first)
    return out


def _traces(specs: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for spec in specs:
        name, rest = spec.split("=", 1)
        path, cluster = rest.split(":", 1)
        out.append((name, path, cluster))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="append", default=[], help="NAME=PATH:V:P:K (repeatable)")
    ap.add_argument("--policies", default="gavel-max-min-fairness-perf")
    ap.add_argument("--policies-for", action="append", default=[],
                    help="NAME=a,b: the policies for one trace (overrides --policies)")
    ap.add_argument("--gavel-dir")
    ap.add_argument("--gavel-python", default="python3")
    ap.add_argument("--gavel-timeout", type=float, default=1500.0)
    ap.add_argument("--gavel-start", action="store_true",
                    help="also Gavel on each trace's first job alone: its fixed cost")
    ap.add_argument("--baseline-src")
    ap.add_argument("--solver", help="our LP solver (the policies' solver=; the baseline keeps "
                    "its default)")
    ap.add_argument("--lp-jobs", type=int, default=0)
    ap.add_argument("--lp-nodes", type=int, default=1024)
    ap.add_argument("--lp-repeat", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each measurement, interleaved (ours, baseline, Gavel, ours, "
                         "...); a row keeps the run of least CPU time and every run's CPU seconds")
    ap.add_argument("--out")
    ap.add_argument("--report", help="print the markdown table of a JSON written by --out, and stop")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(table(json.load(f)))
        return
    per_trace = dict(s.split("=", 1) for s in args.policies_for)
    params = {"solver": args.solver} if args.solver else {}
    rows: list[dict] = []
    result = {"rows": rows, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cpus": os.cpu_count(), "load_average_start": os.getloadavg(), "params": params}
    if args.lp_jobs:
        result["lp"] = lp_solve_s(args.lp_jobs, args.lp_nodes, args.lp_repeat)
        print("one max-min LP:", result["lp"], flush=True)
    scratch = tempfile.TemporaryDirectory(prefix="gavel_speed_")
    for name, path, cluster in _traces(args.trace):
        one_job = first_job_trace(path, scratch.name) if args.gavel_start else None
        for policy in per_trace.get(name, args.policies).split(","):
            runs = {"ours": lambda: ours(path, cluster, policy, params=params)}
            if args.baseline_src:
                runs["baseline"] = lambda: ours(path, cluster, policy, args.baseline_src)
            if args.gavel_dir:
                runs["gavel"] = lambda: gavel(path, cluster, policy, args.gavel_dir,
                                              args.gavel_python, args.gavel_timeout)
                if args.gavel_start:
                    runs["gavel_start"] = lambda: gavel(one_job, cluster, policy, args.gavel_dir,
                                                        args.gavel_python, args.gavel_timeout)
            row = {"trace": name, "cluster": cluster, "policy": policy,
                   **repeated(runs, args.repeat)}
            if args.gavel_dir:
                row["ratio"] = row["gavel"]["cpu_s"] / row["ours"]["cpu_s"]
                row["ratio_process"] = row["gavel"]["cpu_s"] / row["ours"]["process_cpu_s"]
            if "gavel_start" in row:
                row["ratio_net"] = ((row["gavel"]["cpu_s"] - row["gavel_start"]["cpu_s"])
                                    / row["ours"]["cpu_s"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    scratch.cleanup()
    result["load_average_end"] = os.getloadavg()
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(table(result))


if __name__ == "__main__":
    main()
