"""The EGHS experiment, second design (paper 1; issues 4 and 16): EGHS against its fair
learning-unaware twin at 64, 256 and 1024 nodes, on a main and a contended workload, with
the ablation and the first design's clairvoyant baseline for reference.

Setup (every choice ours [I]; docs/eghs.md explains them):

* cluster: ``nodes`` servers of 8 V100s; a third at speed 0.8, a third 1.0, a third 1.2;
* workload: Gavel's generator (Poisson arrivals, Gavel size mix and durations) restricted to
  the distributed-capable models with learning profiles (ResNet-18 -> CIFAR-10, ResNet-50 ->
  ImageNet, Transformer -> BERT, LM -> DeepSpeech2); durations x ``--duration-scale``;
  elastic jobs ``gpus_min = max(1, gpus // 2)``, ``gpus_max = 2 gpus``; every job is a
  time-to-accuracy job (q ~ U(0.90, 0.97)) whose work is the generated duration's
  iterations at its requested size, with a user budget ``1 + Exp(0.5)`` times that
  (``LearningSpec``); the learning truth lives in a :class:`sim.learning.world.LearningWorld`;
* workloads (``WORKLOADS``): "main" (jobs per node 6 / 3 / 1 at 64 / 256 / 1024 nodes,
  0.6 arrivals per GPU-hour) and "contended" (8 / 4 / 2 jobs per node, 2.0 per GPU-hour);
* variants (``VARIANTS``): ``eghs``, macro only, micro only, the fair twin ``eghs-unaware``
  (the reference of every ratio), the twin without defragmentation, the clairvoyant ``eghs-unaware-oracle`` and Gavel's
  heterogeneity-aware LAS (``gavel-max-min-fairness-perf``, rigid), Pollux's scheduler over
  the observed goodput (``pollux-learning``: ``pollux`` with the authors' NSGA-II search,
  ``pollux-dp`` with ours, ``pollux-dp-nopolish`` ours without the NSGA-II polish); ``eghs-logits``: EGHS
  with entropy from a synthetic logits trace instead of the surrogate;
* metrics: average JCT and makespan per run; per seed the ratio to the twin on the same
  workload; geometric-mean ratio with a 95% paired bootstrap interval over seeds (sim.stats).

Outputs (``--out``, default ``scalability/results/eghs2``): ``runs.csv`` (one row per run),
``summary.csv`` (ratios with CIs), ``timing.json`` and ``relative_to_twin.png``.  Usage::

    python scalability/eghs_experiment.py --quick          # a minute: 64 nodes, 2 seeds
    python scalability/eghs_experiment.py                  # the documented sizes
    python scalability/eghs_experiment.py --report         # markdown tables of --out
    python scalability/eghs_experiment.py --summarize      # summary.csv and plot again from runs.csv
    python scalability/eghs_experiment.py --merge A,B --sizes 1024 --out C   # seeds of several runs
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.learning.logits_trace import LogitsTrace, synthetic_logits_trace
from sim.learning.surrogate import load_surrogate
from sim.learning.workload import DURATION_SCALE, learning_workload, learning_world
from sim.metrics import summary
from sim.stats import paired_ratios
from sim.policies import get_policy
from sim.throughput import TableThroughput

#: variant -> (policy, parameters, entropy source)
VARIANTS = {
    "eghs": ("eghs", {}, "surrogate"),
    "macro-only": ("eghs", {"micro": False}, "surrogate"),
    "micro-only": ("eghs", {"macro": False}, "surrogate"),
    "twin": ("eghs-unaware", {}, "surrogate"),
    "twin-no-defrag": ("eghs-unaware", {"defragment": False}, "surrogate"),
    "oracle-twin": ("eghs-unaware-oracle", {}, "surrogate"),
    "gavel-las": ("gavel-max-min-fairness-perf", {}, "surrogate"),
    "pollux": ("pollux-learning", {}, "surrogate"),
    "pollux-dp": ("pollux-learning", {"search": "dp"}, "surrogate"),
    "pollux-dp-nopolish": ("pollux-learning", {"search": "dp", "polish": False}, "surrogate"),
    "eghs-logits": ("eghs", {}, "logits"),
}
REFERENCE = "twin"
#: workload -> {nodes: (jobs per node, arrivals per GPU-hour)}
WORKLOADS = {"main": {64: (6, 0.6), 256: (3, 0.6), 1024: (1, 0.6)},
             "contended": {64: (8, 2.0), 256: (4, 2.0), 1024: (2, 2.0)}}
#: the paper's claims (abstract): EGHS vs a learning-unaware baseline
PAPER = {"avg_jct_s": -23.7, "makespan_s": -15.7}
#: synthetic logits trace: epochs, workers, classes, rows per worker
TRACE_SHAPE = (400, 16, 10, 16)


def make_cluster(nodes: int):
    third = nodes // 3
    groups = [{"count": third, "gpus": 8, "type": "v100", "speed": 0.8},
              {"count": nodes - 2 * third, "gpus": 8, "type": "v100", "speed": 1.0},
              {"count": third, "gpus": 8, "type": "v100", "speed": 1.2}]
    return cluster_from_groups(f"eghs-{nodes}x8", [g for g in groups if g["count"] > 0])


def make_workload(nodes: int, seed: int, jobs_per_node: float, load: float, duration_scale: float,
                  oracle):
    """``jobs_per_node`` jobs per node arriving at ``load`` per GPU-hour (sim.learning.workload)."""
    return learning_workload(int(round(jobs_per_node * nodes)), load * nodes * 8, seed, oracle,
                             duration_scale=duration_scale, source=f"eghs workload nodes={nodes} seed={seed}")


def logits_trace(names, seed: int, directory: Path) -> LogitsTrace:
    """A synthetic logits trace per model: the family curve in epochs (the profile's tau
    in samples over its epoch), shard difficulty LogNormal(0, 0.2) per worker."""
    sur = load_surrogate()
    a = sur.arrays()
    prof = sur.profile_indices(tuple(names))
    n_ep, n_w, n_c, rows = TRACE_SHAPE
    path = directory / f"logits-{seed}.arrow"
    ep = np.arange(n_ep, dtype=float)
    for i, name in enumerate(names):
        p = prof[i]
        tau_ep = a["tau"][p] * a["ref_batch"][p] / a["epoch_samples"][p]
        curve = 0.10 + 0.85 * np.exp(-(ep / max(tau_ep, 1.0)) ** a["kappa"][p])
        synthetic_logits_trace(directory / f"m{i}-{seed}.arrow", [name], n_ep, n_w, n_c, curve,
                               rows_per_worker=rows, seed=seed + i)
    import pyarrow.ipc as ipc
    tables = [ipc.open_file(str(directory / f"m{i}-{seed}.arrow")).read_all() for i in range(len(names))]
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, tables[0].schema) as w:
        for t in tables:
            w.write_table(t)
    return LogitsTrace(path)


def run_one(task: dict) -> dict:
    oracle = TableThroughput.builtin()
    nodes, seed = task["nodes"], task["seed"]
    wl = make_workload(nodes, seed, task["jobs_per_node"], task["load"], task["duration_scale"], oracle)
    jobs = job_specs(wl, oracle)
    name, params, source = VARIANTS[task["variant"]]
    with tempfile.TemporaryDirectory() as tmp:
        trace = logits_trace(oracle.models, seed, Path(tmp)) if source == "logits" else None
        world = learning_world(wl, oracle, seed, trace)
        policy = get_policy(name, **params)
        t0 = time.perf_counter()
        res = run_jobs(make_cluster(nodes), jobs, policy, oracle, EngineConfig(round_s=task["round_s"]),
                       job_ids=wl.job_id, learning=world)
        wall = time.perf_counter() - t0
    s = summary(res)
    dec = np.asarray(res.decision_seconds) * 1e3
    row = {k: task[k] for k in ("workload", "nodes", "seed", "variant")}
    row.update(n_jobs=len(jobs), avg_jct_s=s["avg_jct_s"], makespan_s=s["makespan_s"],
               p99_jct_s=s["p99_jct_s"], avg_wait_s=s["avg_wait_s"], utilization=s["utilization"],
               restarts=float(np.mean(res.restarts)), decisions=res.decisions,
               mean_decision_ms=float(dec.mean()) if dec.size else math.nan,
               p99_decision_ms=float(np.percentile(dec, 99)) if dec.size else math.nan,
               micro_updates=int(getattr(policy, "micro_updates", 0)), wall_s=wall)
    return row


def ratios(rows: list[dict], ref: str = REFERENCE) -> list[dict]:
    """Per (workload, nodes, variant, metric): ratio to ``ref`` over paired seeds (geometric
    mean) with its 95% paired bootstrap interval (sim.stats)."""
    out = []
    for metric in ("avg_jct_s", "makespan_s"):
        for r in paired_ratios(rows, group=("workload", "nodes"), treatment="variant", baseline=ref,
                               metric=metric):
            out.append({"workload": r["workload"], "nodes": r["nodes"], "variant": r["variant"],
                        "metric": metric, "n_seeds": r["n"], "ratio_mean": r["ratio"],
                        "ci95_lo": r["low"], "ci95_hi": r["high"], "change_pct": r["change_pct"]})
    rank = {v: i for i, v in enumerate(VARIANTS)}
    return sorted(out, key=lambda r: (r["workload"], r["nodes"], rank.get(r["variant"], len(rank)),
                                      r["metric"]))


def _write_csv(rows: list[dict], path: Path) -> None:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)


def _read_csv(path: Path) -> list[dict]:
    def conv(v):
        for typ in (int, float):
            try:
                return typ(v)
            except ValueError:
                pass
        return v
    with open(path) as f:
        return [{k: conv(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _plots(summ: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    variants = [v for v in VARIANTS if v != REFERENCE and any(r["variant"] == v for r in summ)]
    groups = sorted({(r["workload"], int(r["nodes"])) for r in summ})
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for ax, metric in zip(axes, ("avg_jct_s", "makespan_s")):
        width = 0.8 / max(len(variants), 1)
        for i, v in enumerate(variants):
            ys, err = [], [[], []]
            for g in groups:
                r = [x for x in summ if x["variant"] == v and (x["workload"], int(x["nodes"])) == g
                     and x["metric"] == metric]
                m = r[0]["ratio_mean"] if r else np.nan
                ys.append(m)
                err[0].append(m - r[0]["ci95_lo"] if r else 0)
                err[1].append(r[0]["ci95_hi"] - m if r else 0)
            xs = np.arange(len(groups)) + (i - len(variants) / 2 + 0.5) * width
            ax.bar(xs, ys, width, yerr=np.nan_to_num(np.array(err)), label=v, capsize=2)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1 + PAPER[metric] / 100, color="r", ls="--", lw=0.8, label="paper (EGHS)")
        ax.set_xticks(np.arange(len(groups)), [f"{w}\n{n} nodes" for w, n in groups], fontsize=7)
        ax.set_ylabel(f"{metric[:-2]} / fair twin")
        ax.set_yscale("log")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "relative_to_twin.png", dpi=110)
    plt.close(fig)


def markdown(out: Path) -> str:
    """The results as a markdown table (docs/eghs.md), from the CSV files in ``out``."""
    summ = _read_csv(out / "summary.csv")
    runs = _read_csv(out / "runs.csv")
    lines = ["| workload | nodes | variant | avg JCT vs twin [95% CI] | makespan vs twin [95% CI] | "
             "seeds | restarts/job | mean decision ms |", "|---|---|---|---|---|---|---|---|"]
    for wk, nodes in sorted({(r["workload"], int(r["nodes"])) for r in summ}):
        for v in VARIANTS:
            rs = {r["metric"]: r for r in summ if r["workload"] == wk and int(r["nodes"]) == nodes
                  and r["variant"] == v}
            if not rs:
                continue
            sub = [r for r in runs if r["workload"] == wk and int(r["nodes"]) == nodes and r["variant"] == v]

            def cell(r):
                return (f"{r['change_pct']:+.1f}% [{100 * (r['ci95_lo'] - 1):+.1f}, "
                        f"{100 * (r['ci95_hi'] - 1):+.1f}]")
            lines.append(f"| {wk} | {nodes} | {v} | {cell(rs['avg_jct_s'])} | {cell(rs['makespan_s'])} | "
                         f"{int(rs['avg_jct_s']['n_seeds'])} | {np.mean([r['restarts'] for r in sub]):.2f} | "
                         f"{np.mean([r['mean_decision_ms'] for r in sub]):.2f} |")
    return "\n".join(lines)


def summarize(rows: list[dict], out: Path) -> None:
    """summary.csv (ratios with CIs) and relative_to_twin.png from the runs."""
    summ = ratios(rows)
    _write_csv(summ, out / "summary.csv")
    _plots(summ, out)


def merge(sources: list[Path], sizes: set[int], out: Path, rel_tol: float = 1e-9) -> str:
    """``out/runs.csv`` from the ``sizes`` rows of several runs.csv (first one of each run
    wins); a run two sources both hold must agree to ``rel_tol`` (re-runs on another machine
    may differ in the last bits).  Returns a line saying how many agreed and how closely."""
    seen, worst, exact, again = {}, 0.0, 0, 0
    for src in sources:
        for r in _read_csv(src / "runs.csv"):
            if int(r["nodes"]) not in sizes:
                continue
            key = (r["workload"], r["nodes"], r["seed"], r["variant"])
            if key not in seen:
                seen[key] = r
                continue
            again += 1
            diff = max(abs(seen[key][m] - r[m]) / abs(seen[key][m]) for m in ("avg_jct_s", "makespan_s"))
            if diff > rel_tol:
                raise SystemExit(f"{src / 'runs.csv'}: run {key} differs from an earlier source by {diff:.2e}")
            worst, exact = max(worst, diff), exact + (diff == 0)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(sorted(seen.values(), key=lambda r: (r["workload"], r["nodes"], r["seed"], r["variant"])),
               out / "runs.csv")
    return (f"{len(seen)} runs; {again} held twice: {exact} identical, largest relative difference "
            f"{worst:.1e}")


def tasks_for(args) -> list[dict]:
    base = {"duration_scale": args.duration_scale, "round_s": args.round_s}
    tasks = []
    for wk in args.workloads.split(","):
        for nodes in [int(x) for x in args.sizes.split(",")]:
            jpn, load = WORKLOADS[wk][nodes]
            vs = args.variants.split(",") if nodes not in args.big else args.big_variants.split(",")
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                for v in vs:
                    tasks.append({**base, "workload": wk, "nodes": nodes, "seed": seed, "variant": v,
                                  "jobs_per_node": jpn, "load": load})
    return tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--workloads", default="main,contended")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed + seeds - 1 (to add seeds to a runs.csv)")
    ap.add_argument("--duration-scale", type=float, default=DURATION_SCALE)
    ap.add_argument("--round-s", type=float, default=60.0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--big", type=lambda s: {int(x) for x in s.split(",") if x}, default={1024},
                    help="sizes that run --big-variants only")
    ap.add_argument("--big-variants", default="eghs,twin,oracle-twin")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="64 nodes, main workload, 2 seeds")
    ap.add_argument("--report", action="store_true", help="print the results in --out as markdown")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: ratios, CIs and the plot again from --out/runs.csv")
    ap.add_argument("--merge", default=None,
                    help="run nothing: DIR,DIR,...: their --sizes rows into --out/runs.csv, then summarize")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "eghs2")
    args = ap.parse_args(argv)
    if args.merge:
        print(merge([Path(d) for d in args.merge.split(",")], {int(x) for x in args.sizes.split(",")},
                    args.out))
        args.summarize = True
    if args.report:
        print(markdown(args.out))
        return 0
    if args.summarize:
        summarize(_read_csv(args.out / "runs.csv"), args.out)
        print(markdown(args.out))
        return 0
    if args.quick:
        args.sizes, args.workloads, args.seeds = "64", "main", 2
    tasks = tasks_for(args)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i]["nodes"] * tasks[i]["jobs_per_node"])
    rows = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futs = {pool.submit(run_one, tasks[i]): i for i in order}
        for f in as_completed(futs):
            r = f.result()
            rows.append(r)
            print(f"[{time.time() - t0:7.1f}s] {len(rows)}/{len(tasks)} {r['workload']} nodes={r['nodes']} "
                  f"seed={r['seed']} {r['variant']} jct={r['avg_jct_s']:.0f} makespan={r['makespan_s']:.0f} "
                  f"dec={r['decisions']} {r['mean_decision_ms']:.2f}ms wall={r['wall_s']:.0f}s", flush=True)
            _write_csv(rows, args.out / "runs.csv")
    rows.sort(key=lambda r: (r["workload"], r["nodes"], r["seed"], r["variant"]))
    _write_csv(rows, args.out / "runs.csv")
    summarize(rows, args.out)
    (args.out / "timing.json").write_text(json.dumps(
        {"total_wall_s": time.time() - t0, "workers": args.workers, "sizes": args.sizes,
         "workloads": args.workloads, "seeds": args.seeds, "duration_scale": args.duration_scale,
         "round_s": args.round_s}, indent=1))
    print(markdown(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
