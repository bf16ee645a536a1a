"""The EGHS experiment (paper 1; issue 4): a workload-driven comparison at 64, 256 and 1024
nodes against the learning-unaware baseline, with the ablation and a sensitivity analysis
over the learning surrogate's parameters.

Setup (every choice ours [I]; docs/eghs.md explains them):

* cluster: ``nodes`` servers of 8 V100s; a third at speed 0.8, a third 1.0, a third 1.2
  (server-entity heterogeneity, so uneven batches meet unequal GPUs);
* workload: Gavel's generator (Poisson arrivals, Gavel size mix and durations) restricted to
  the distributed-capable models whose tasks have learning profiles (ResNet-18 -> CIFAR-10,
  ResNet-50 -> ImageNet, Transformer -> BERT, LM -> DeepSpeech2); durations multiplied by
  ``--duration-scale``; ``--jobs-per-node`` jobs per node arriving at ``--load`` x the
  cluster's GPU capacity (GPU-hours offered per hour); elastic jobs with
  ``gpus_min = max(1, gpus // 2)`` and ``gpus_max = 2 * gpus``;
* learning: every job is a time-to-accuracy job (quality q ~ U(0.90, 0.97) of its
  profile's fitted curve); its work is the reference-batch progress it needs, equal to the
  generated duration's iterations at its requested size;
* policies: ``eghs`` (both levels), micro only, macro only, ``eghs-unaware`` (the
  learning-unaware baseline), and the core's ``srtf``, ``tiresias``, ``fifo`` (rigid, on the
  same jobs);
* metrics: average JCT and makespan per run; per seed the ratio to the baseline on the
  same workload; geometric-mean ratio with a 95% paired bootstrap CI over seeds (sim.stats).

Outputs (``--out``, default ``scalability/results/eghs``): ``runs.parquet`` (one row per
run), ``summary.parquet`` (ratios with CIs), ``sensitivity.parquet``, ``timing.json`` and
plots.  Usage::

    python scalability/eghs_experiment.py --quick          # a minute: 64 nodes, 2 seeds
    python scalability/eghs_experiment.py                  # the documented sizes
    python scalability/eghs_experiment.py --summarize      # CIs and plots again from runs.parquet
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, run_jobs, job_specs
from sim.jobs import JobTable
from sim.learning.dynamics import LearningSpec
from sim.metrics import summary
from sim.stats import paired_ratios
from sim.policies import get_policy
from sim.throughput import TableThroughput
from sim.workload import generate_workload

MODELS = ("ResNet-18 (batch size 64)", "ResNet-50 (batch size 64)", "Transformer (batch size 64)",
          "LM (batch size 20)")
#: mean GPU-hours per job of the Gavel generator at duration scale 1 (analytic: sizes
#: 0.7/0.1/0.15/0.05 at 1/2/4/8 GPUs -> 1.9 GPUs; mean duration 0.8 * 280 + 0.2 * 3909 min)
GAVEL_GPU_HOURS = 1.9 * (0.8 * (1000 - 10 ** 1.5) / (1.5 * math.log(10)) +
                         0.2 * 9000 / math.log(10)) / 60.0
VARIANTS = {
    "eghs": ("eghs", {}),
    "micro-only": ("eghs", {"micro": True, "macro": False}),
    "macro-only": ("eghs", {"micro": False, "macro": True}),
    "baseline": ("eghs-unaware", {}),
    "srtf": ("srtf", {}),
    "tiresias": ("tiresias", {}),
    "fifo": ("fifo", {"backfill": True}),
}
LEARNING = {"eghs", "eghs-unaware"}
#: sensitivity: (parameter, values); surrogate fields scale the fitted values
SENSITIVITY = [
    ("sigma_d", (0.0, 0.2, 0.4)),
    ("kappa_scale", (0.5, 1.0, 2.0)),
    ("phi_scale", (0.1, 1.0, 10.0)),
    ("gain_cap", (1.0, 1.3, 1.6)),
    ("alpha_U", (0.0, 1.0, 2.0)),
]
#: the defaults of the parameters above (their runs are shared: the plain "eghs" run)
SENS_DEFAULT = {"sigma_d": 0.2, "kappa_scale": 1.0, "phi_scale": 1.0, "gain_cap": 1.3, "alpha_U": 1.0}


def make_cluster(nodes: int):
    third = nodes // 3
    groups = [{"count": third, "gpus": 8, "type": "v100", "speed": 0.8},
              {"count": nodes - 2 * third, "gpus": 8, "type": "v100", "speed": 1.0},
              {"count": third, "gpus": 8, "type": "v100", "speed": 1.2}]
    return cluster_from_groups(f"eghs-{nodes}x8", [g for g in groups if g["count"] > 0])


def make_workload(nodes: int, seed: int, jobs_per_node: float, load: float, duration_scale: float,
                  oracle):
    n_jobs = int(round(jobs_per_node * nodes))
    gpus = nodes * 8
    rate = load * gpus                                               # jobs per hour
    wl = generate_workload(n_jobs, rate, seed, models=list(MODELS), throughput=oracle)
    t = wl.table
    g = t.column("gpus").to_numpy()
    t = t.set_column(t.schema.get_field_index("gpus_min"), "gpus_min",
                     pa.array(np.maximum(1, g // 2).astype(np.int32)))
    t = t.set_column(t.schema.get_field_index("gpus_max"), "gpus_max", pa.array((2 * g).astype(np.int32)))
    t = t.set_column(t.schema.get_field_index("duration_s"), "duration_s",
                     pa.array(t.column("duration_s").to_numpy() * duration_scale))
    return JobTable.from_table(t, f"eghs workload nodes={nodes} seed={seed}")


def run_one(task: dict) -> dict:
    oracle = TableThroughput.builtin()
    nodes, seed = task["nodes"], task["seed"]
    cluster = make_cluster(nodes)
    wl = make_workload(nodes, seed, task["jobs_per_node"], task["load"], task["duration_scale"], oracle)
    jobs = job_specs(wl, oracle)
    name, params = VARIANTS[task["variant"]]
    params = dict(params)
    dyn = dict(task.get("dynamics") or {})
    if name in LEARNING:
        spec = LearningSpec.for_workload(wl, oracle, mode="tta", quality=(0.90, 0.97), seed=seed,
                                         sigma_d=dyn.get("sigma_d", 0.2))
        params.update(learning=spec, oracle=oracle, dynamics=dyn)
        params.update(task.get("policy_params") or {})
    policy = get_policy(name, **params)
    t0 = time.perf_counter()
    res = run_jobs(cluster, jobs, policy, oracle, EngineConfig(round_s=task["round_s"]),
                   job_ids=wl.job_id)
    wall = time.perf_counter() - t0
    s = summary(res)
    dec = np.asarray(res.decision_seconds) * 1e3
    row = {k: task.get(k) for k in ("nodes", "seed", "variant", "sens_param", "sens_value")}
    row.update(n_jobs=len(jobs), avg_jct_s=s["avg_jct_s"], makespan_s=s["makespan_s"],
               p99_jct_s=s["p99_jct_s"], avg_wait_s=s["avg_wait_s"], utilization=s["utilization"],
               restarts=float(np.mean(res.restarts)), decisions=res.decisions,
               mean_decision_ms=float(dec.mean()) if dec.size else math.nan,
               p99_decision_ms=float(np.percentile(dec, 99)) if dec.size else math.nan,
               max_decision_ms=float(dec.max()) if dec.size else math.nan, wall_s=wall)
    if name in LEARNING:
        L = policy.learning
        row["micro_updates"] = int(L.updates)
        row["mean_scale_running"] = float(np.mean(L.scale))
    return row


def ratios(rows: list[dict], ref: str = "baseline", key_cols=("nodes",)) -> list[dict]:
    """Per (group, variant): ratio to the reference variant over paired seeds (geometric mean)
    with its 95% paired bootstrap CI (sim.stats)."""
    out = []
    for metric in ("avg_jct_s", "makespan_s"):
        for r in paired_ratios(rows, group=key_cols, treatment="variant", baseline=ref, metric=metric):
            out.append({**{c: r[c] for c in key_cols}, "variant": r["variant"], "metric": metric,
                        "n_seeds": r["n"], "ratio_mean": r["ratio"], "ci95_lo": r["low"],
                        "ci95_hi": r["high"], "change_pct": r["change_pct"]})
    return out


def _write(rows: list[dict], path: Path) -> None:
    if rows:
        cols = sorted({k for r in rows for k in r})
        pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in cols}), path)


def _plots(summ: list[dict], sens: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    variants = [v for v in ("eghs", "micro-only", "macro-only", "srtf", "tiresias", "fifo")
                if any(r["variant"] == v for r in summ)]
    nodes = sorted({r["nodes"] for r in summ})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, ("avg_jct_s", "makespan_s")):
        width = 0.8 / max(len(variants), 1)
        for i, v in enumerate(variants):
            ys, lo, hi = [], [], []
            for nn in nodes:
                r = [x for x in summ if x["variant"] == v and x["nodes"] == nn and x["metric"] == metric]
                ys.append(r[0]["ratio_mean"] if r else np.nan)
                lo.append(r[0]["ratio_mean"] - r[0]["ci95_lo"] if r else 0)
                hi.append(r[0]["ci95_hi"] - r[0]["ratio_mean"] if r else 0)
            xs = np.arange(len(nodes)) + (i - len(variants) / 2 + 0.5) * width
            ax.bar(xs, ys, width, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)], label=v, capsize=2)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.763 if metric == "avg_jct_s" else 0.843, color="r", ls="--", lw=0.8,
                   label="paper (EGHS)")
        ax.set_xticks(np.arange(len(nodes)), [f"{n} nodes" for n in nodes])
        ax.set_ylabel(f"{metric.replace('_s', '')} / learning-unaware baseline")
        ax.set_title(metric.replace("_s", ""))
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "relative_to_baseline.png", dpi=120)
    plt.close(fig)
    if sens:
        params = sorted({r["sens_param"] for r in sens})
        fig, axes = plt.subplots(1, len(params), figsize=(3.2 * len(params), 3.2), squeeze=False)
        for ax, p in zip(axes[0], params):
            for metric, mk in (("avg_jct_s", "o-"), ("makespan_s", "s--")):
                r = sorted([x for x in sens if x["sens_param"] == p and x["metric"] == metric
                            and x["variant"] == "eghs"], key=lambda x: x["sens_value"])
                ax.errorbar([x["sens_value"] for x in r], [x["ratio_mean"] for x in r],
                            yerr=[[x["ratio_mean"] - x["ci95_lo"] for x in r],
                                  [x["ci95_hi"] - x["ratio_mean"] for x in r]], fmt=mk,
                            label=metric.replace("_s", ""), capsize=2)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_title(p)
        axes[0][0].set_ylabel("EGHS / baseline")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "sensitivity.png", dpi=120)
        plt.close(fig)


def markdown(out: Path) -> str:
    """The results as markdown tables (docs/eghs.md), from the Parquet files in ``out``."""
    summ = pq.read_table(out / "summary.parquet").to_pylist()
    runs = pq.read_table(out / "runs.parquet").to_pylist()
    lines = ["| nodes | variant | avg JCT vs baseline [95% CI] | makespan vs baseline [95% CI] | "
             "seeds | mean decision ms |", "|---|---|---|---|---|---|"]
    order = ["eghs", "micro-only", "macro-only", "baseline", "srtf", "tiresias", "fifo"]
    for nodes in sorted({r["nodes"] for r in summ}):
        for v in order:
            rs = {r["metric"]: r for r in summ if r["nodes"] == nodes and r["variant"] == v}
            if not rs:
                continue
            dec = [r["mean_decision_ms"] for r in runs if r["nodes"] == nodes and r["variant"] == v]

            def cell(r):
                return (f"{r['change_pct']:+.1f}% [{100 * (r['ci95_lo'] - 1):+.1f}, "
                        f"{100 * (r['ci95_hi'] - 1):+.1f}]")
            lines.append(f"| {nodes} | {v} | {cell(rs['avg_jct_s'])} | {cell(rs['makespan_s'])} | "
                         f"{rs['avg_jct_s']['n_seeds']} | {np.mean(dec):.2f} |")
    if (out / "sensitivity.parquet").exists():
        sens = pq.read_table(out / "sensitivity.parquet").to_pylist()
        lines += ["", "| parameter | value | EGHS avg JCT vs baseline [95% CI] | makespan [95% CI] |",
                  "|---|---|---|---|"]
        for p, vals in SENSITIVITY:
            for val in vals:
                rs = {r["metric"]: r for r in sens if r["sens_param"] == p and r["sens_value"] == val}
                if len(rs) < 2:
                    continue
                c = [f"{rs[m]['change_pct']:+.1f}% [{100 * (rs[m]['ci95_lo'] - 1):+.1f}, "
                     f"{100 * (rs[m]['ci95_hi'] - 1):+.1f}]" for m in ("avg_jct_s", "makespan_s")]
                lines.append(f"| {p} | {val:g}{' (default)' if val == SENS_DEFAULT[p] else ''} | "
                             f"{c[0]} | {c[1]} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs-per-node", default="6,3,1",
                    help="jobs per node for each size (comma list aligned with --sizes)")
    ap.add_argument("--load", type=float, default=0.6, help="arrivals per GPU per hour")
    ap.add_argument("--duration-scale", type=float, default=0.25)
    ap.add_argument("--round-s", type=float, default=60.0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--big-variants", default="eghs,baseline",
                    help="variants run at the largest size (the rigid core policies are cheap "
                         "but slow at 1024 nodes)")
    ap.add_argument("--sensitivity-nodes", type=int, default=64)
    ap.add_argument("--sensitivity-jobs-per-node", type=float, default=4.0)
    ap.add_argument("--sensitivity-seeds", type=int, default=3)
    ap.add_argument("--no-sensitivity", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="64 nodes, 2 seeds, no sensitivity")
    ap.add_argument("--report", action="store_true", help="print the results in --out as markdown")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: ratios, CIs and plots again from the runs in --out")
    ap.add_argument("--ablation-sizes", default="64,256",
                    help="sizes at which the micro-only / macro-only ablation and the core "
                         "policies run (the largest size runs --big-variants only)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "eghs")
    args = ap.parse_args(argv)
    if args.report:
        print(markdown(args.out))
        return 0
    if args.summarize:
        _resummarize(args.out)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    jpn = [float(s) for s in args.jobs_per_node.split(",")]
    if len(jpn) == 1:
        jpn = jpn * len(sizes)
    seeds = args.seeds
    sens_on = not args.no_sensitivity
    if args.quick:
        sizes, jpn, seeds, sens_on = [64], [4.0], 2, False
    variants = args.variants.split(",")
    big = set(args.big_variants.split(","))
    ablation_sizes = {int(x) for x in args.ablation_sizes.split(",") if x}
    base = {"load": args.load, "duration_scale": args.duration_scale, "round_s": args.round_s}
    tasks = []
    for nodes, j in zip(sizes, jpn):
        for seed in range(seeds):
            for v in variants:
                if nodes not in ablation_sizes and v not in big:
                    continue
                tasks.append({**base, "nodes": nodes, "seed": seed, "variant": v,
                              "jobs_per_node": j})
    sens_tasks = []
    if sens_on:
        sn = args.sensitivity_nodes
        sj = args.sensitivity_jobs_per_node
        for seed in range(args.sensitivity_seeds):
            for v in ("baseline", "eghs"):
                sens_tasks.append({**base, "nodes": sn, "seed": seed, "variant": v,
                                   "jobs_per_node": sj, "sens_param": "-", "sens_value": 0.0})
            for p, vals in SENSITIVITY:
                for val in vals:
                    if val == SENS_DEFAULT[p]:
                        continue
                    t = {**base, "nodes": sn, "seed": seed, "variant": "eghs", "jobs_per_node": sj,
                         "sens_param": p, "sens_value": float(val)}
                    if p == "alpha_U":
                        t["policy_params"] = {"alpha_U": float(val)}
                    else:
                        t["dynamics"] = {p: float(val)}
                    sens_tasks.append(t)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    all_tasks = tasks + sens_tasks
    # longest first (1024-node runs), so the pool stays busy
    order = sorted(range(len(all_tasks)), key=lambda i: -all_tasks[i]["nodes"] * all_tasks[i]["jobs_per_node"])
    results: list[dict | None] = [None] * len(all_tasks)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futs = {pool.submit(run_one, all_tasks[i]): i for i in order}
        for k, f in enumerate(futs):
            pass
        done = 0
        from concurrent.futures import as_completed
        for f in as_completed(futs):
            i = futs[f]
            results[i] = f.result()
            done += 1
            r = results[i]
            print(f"[{time.time() - t0:7.1f}s] {done}/{len(all_tasks)} nodes={r['nodes']} seed={r['seed']} "
                  f"{r['variant']} {r.get('sens_param') or ''}={r.get('sens_value') or ''} "
                  f"jct={r['avg_jct_s']:.0f} makespan={r['makespan_s']:.0f} "
                  f"dec={r['decisions']} {r['mean_decision_ms']:.2f}ms wall={r['wall_s']:.0f}s",
                  flush=True)
    runs = results[:len(tasks)]
    sens_runs = results[len(tasks):]
    _write(runs, args.out / "runs.parquet")
    if sens_runs:
        _write(sens_runs, args.out / "sensitivity_runs.parquet")
    summ, sens = summarize(runs, sens_runs, args.out)
    timing = {"total_wall_s": time.time() - t0, "workers": args.workers, "sizes": sizes,
              "jobs_per_node": jpn, "seeds": seeds, **base}
    (args.out / "timing.json").write_text(json.dumps(timing, indent=1))
    _print_ratios(summ, sens)
    return 0


def summarize(runs: list[dict], sens_runs: list[dict], out: Path) -> tuple[list, list]:
    """Ratios with CIs of the runs (summary.parquet, sensitivity.parquet) and the plots."""
    summ = ratios(runs)
    _write(summ, out / "summary.parquet")
    sens = []
    if sens_runs:
        rows = []
        for r in sens_runs:
            if r.get("sens_param") == "-":          # baseline and default EGHS: shared by every value
                for p, vals in SENSITIVITY:
                    for val in vals:
                        if r["variant"] == "baseline" or val == SENS_DEFAULT[p]:
                            rows.append({**r, "sens_param": p, "sens_value": float(val)})
            else:
                rows.append(r)
        sens = [x for x in ratios(rows, key_cols=("sens_param", "sens_value")) if x["variant"] == "eghs"]
        _write(sens, out / "sensitivity.parquet")
    _plots(summ, sens, out)
    return summ, sens


def _resummarize(out: Path) -> None:
    """--summarize: ratios, CIs and plots again from the runs stored in ``out``."""
    sens_path = out / "sensitivity_runs.parquet"
    runs = pq.read_table(out / "runs.parquet").to_pylist()
    sens_runs = pq.read_table(sens_path).to_pylist() if sens_path.exists() else []
    _print_ratios(*summarize(runs, sens_runs, out))


def _print_ratios(summ: list[dict], sens: list[dict]) -> None:
    print("\nrelative to the learning-unaware baseline (geometric mean over seeds, 95% bootstrap CI):")
    for r in summ:
        print(f"  nodes={r['nodes']:5d} {r['variant']:11s} {r['metric']:10s} {r['change_pct']:+6.1f}% "
              f"[{100 * (r['ci95_lo'] - 1):+.1f}, {100 * (r['ci95_hi'] - 1):+.1f}] (n={r['n_seeds']})")
    for r in sens:
        print(f"  sens {r['sens_param']}={r['sens_value']:g} {r['metric']:10s} {r['change_pct']:+6.1f}% "
              f"[{100 * (r['ci95_lo'] - 1):+.1f}, {100 * (r['ci95_hi'] - 1):+.1f}]")


if __name__ == "__main__":
    sys.exit(main())
