"""Hops (paper 3) experiments in simulation (docs/hops.md has the tables beside the paper's).

    .venv/bin/python scalability/hops_experiment.py table4 [--seeds 5] [--jobs 500] [--load 100]
    .venv/bin/python scalability/hops_experiment.py table3        (hops-64, 25 jobs over 2.5 h)
    .venv/bin/python scalability/hops_experiment.py ablation | ftf | load [--loads 30,100,300]
    .venv/bin/python scalability/hops_experiment.py ilp-time [--scales 0.25,0.5,1,2,4,8,16]
    .venv/bin/python scalability/hops_experiment.py estimator [--jobs 200]
    .venv/bin/python scalability/hops_experiment.py plots

Every policy of one seed runs on the same workload and the same hidden server truth
(sim.hops.servers.ServerTruth, seeded per seed); results go to scalability/results/hops/<stem>.json
(one row per policy and seed) and .md (mean ± 95% CI half-width, t-free normal 1.96 s/sqrt(n), and
Hops' paired ratio to each baseline with a bootstrap CI, sim.stats).
Workload [I]: Gavel's GPU counts (1, 2, 4, 8; ``--sizes hops``: 1-16 GPUs, powers of two,
uniform, the contended regime) and run times from the paper's size classes
(``--durations hops``, the default: sim.workload HOPS_SIZE_CLASSES) or Philly's (``--durations
philly``, the first port's workload; result files without a suffix); each job's
requirement set is {d/2, d, 2d} within [1, 16] (REQUIREMENT_SET), and the rigid baselines get the
median d, as the paper gives Gavel.
Baselines: ``gavel-max-min-fairness-perf`` (Gavel's own LP and fairness objective) and ``sia-rigid``
(Sia's path for rigid jobs), each alone and behind Hops' LR service window (``queue-window``:
the paper's "same LR queue priority"), labels ``gavel``, ``sia``, ``gavel-lr``, ``sia-lr``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, simulate
from sim.hops.configs import generate_configs
from sim.hops.estimator import ThroughputEstimator
from sim.hops.ilp import gain, prior_weights, solve
from sim.hops.metrics import fragments_per_round, max_ftf_rho, max_ftf_rho_by_duration, max_latency_ratio
from sim.hops.servers import ServerTruth
from sim.hops.window import service_window
from sim.jobs import JobTable
from sim.metrics import summary
from sim.policies import get_policy
from sim.presets import get_preset
from sim.state import ROUND, SchedState
from sim.stats import paired_ratio_ci
from sim.throughput import TableThroughput
from sim.workload import generate_workload

OUT = Path(__file__).resolve().parent / "results" / "hops"
#: requirement set of a job drawn at d GPUs
REQUIREMENT_SET = (0.5, 1.0, 2.0)
MAX_REQUEST = 16
#: the round length used to count Hops' fragments per round for every policy
FRAG_ROUND_S = 60.0
#: relative MIP gap of the 512-GPU runs: the paper sets a gap for large clusters and its
#: scalability figure uses 0.01-0.05; 0.05 is its Gurobi setting quoted for ~1,000 GPUs.  The
#: policy's own default stays 0.01 (algorithms.md §4.8); see docs/hops.md "ILP time".
LARGE_GAP = 0.05
HOPS = ("hops", {"mip_rel_gap": LARGE_GAP})
GAVEL = ("gavel-max-min-fairness-perf", {})
#: Sia's rigid-job path (docs/goodput.md): the workload's jobs are rigid throughput-table jobs
SIA = ("sia-rigid", {})
#: the paper's baselines "with the same LR queue priority as Hops": each behind Hops' LR
#: service window (sim.policies.queue_window; our reading of the paper, docs/hops.md)
SIA_LR = ("queue-window", {"inner": "sia-rigid"})
GAVEL_LR = ("queue-window", {"inner": "gavel-max-min-fairness-perf"})
BASELINES = {"gavel": GAVEL, "sia": SIA, "gavel-lr": GAVEL_LR, "sia-lr": SIA_LR}
#: label -> (policy, kwargs) per experiment
SETUPS = {
    "table4": {"hops": HOPS, **BASELINES},
    "table3": {"hops": HOPS, **BASELINES},
    "ablation": {f"hops-{p}": ("hops", {"mip_rel_gap": LARGE_GAP, "priority": p})
                 for p in ("lr", "las", "sjf", "srtf")},
    "ftf": {"hops-ftf-lam2": ("hops", {"mip_rel_gap": LARGE_GAP, "priority": "ftf", "lam": 2.0}),
            "hops-lr": HOPS, "gavel-ftf": ("gavel-finish-time-fairness-perf", {}), "sia": SIA},
    "load": {"hops": HOPS, **BASELINES},
}
#: per-experiment defaults of (cluster, jobs, load): Table 3 is the physical run, 25 jobs over a
#: 2.5 h submission window on the 64-GPU cluster (algorithms.md §4.11), so 10 jobs/h
DEFAULTS = {"table3": ("hops-64", 25, 10.0)}
KEYS = ("makespan_h", "avg_jct_h", "avg_wait_h", "max_lr", "avg_frag", "max_rho")


def workload(n_jobs: int, load: float, seed: int, oracle, durations: str = "hops",
             sizes: str = "gavel") -> JobTable:
    w = generate_workload(n_jobs, load, seed, throughput=oracle, durations=durations, sizes=sizes)
    d = np.asarray(w.gpus, np.int64)
    sets = [sorted({int(min(MAX_REQUEST, max(1, round(x * f)))) for f in REQUIREMENT_SET}) for x in d]
    t = w.table
    col = pa.array(sets, pa.list_(pa.int32()))
    return JobTable(t.set_column(t.schema.get_field_index("gpus_allowed"), "gpus_allowed", col))


def one(args) -> dict:
    label, name, kw, seed, n_jobs, load, cluster_name, durations, sizes = args
    cluster, oracle = get_preset(cluster_name), TableThroughput.builtin()
    w = workload(n_jobs, load, seed, oracle, durations, sizes)
    truth = ServerTruth(cluster, n_jobs, seed=seed)
    pol = get_policy(name, **kw)
    t0 = time.perf_counter()
    res = simulate(cluster, w, pol, oracle, EngineConfig(), truth=truth)
    s = summary(res)
    return {"label": label, "policy": name, "params": kw, "seed": seed, "jobs": n_jobs, "load": load,
            "durations": durations, "sizes": sizes, "cluster": cluster_name,
            "makespan_h": s["makespan_s"] / 3600, "avg_jct_h": s["avg_jct_s"] / 3600,
            "avg_wait_h": s["avg_wait_s"] / 3600, "max_lr": max_latency_ratio(res),
            "avg_frag": float(fragments_per_round(res, FRAG_ROUND_S, getattr(pol, "profile_log", None),
                                                  pol.round_s).mean()),
            "avg_frag_end_engine": float(fragments_per_round(res, FRAG_ROUND_S, at="end").mean()),
            "max_rho": max_ftf_rho(res), "max_rho_by_duration": max_ftf_rho_by_duration(res),
            "ilp_counts": getattr(pol, "ilp_counts", None), "wall_s": time.perf_counter() - t0,
            "commit": _commit()}


def _commit() -> str:
    """The checkout's commit (with ``+`` when it has uncommitted changes), or ``unknown``."""
    try:
        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(rows: list[dict], labels) -> str:
    out = ["| policy | seeds | " + " | ".join(KEYS) + " |", "|---" * (len(KEYS) + 2) + "|"]
    labels = [lab for lab in labels if any(r["label"] == lab for r in rows)]
    for name in labels:
        sel = sorted((r for r in rows if r["label"] == name), key=lambda r: r["seed"])
        cells = []
        for k in KEYS:
            x = np.array([r[k] for r in sel], float)
            ci = 1.96 * x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else float("nan")
            cells.append(f"{x.mean():.2f} ± {ci:.2f}")
        out.append(f"| {name} | {len(sel)} | " + " | ".join(cells) + " |")
    base = list(labels)[0]
    for other in list(labels)[1:]:
        a = {r["seed"]: r for r in rows if r["label"] == base}
        b = {r["seed"]: r for r in rows if r["label"] == other}
        seeds = sorted(set(a) & set(b))
        cells = [paired_ratio_ci([a[s][k] for s in seeds], [b[s][k] for s in seeds]).label()
                 for k in KEYS]
        out.append(f"| {base} / {other} (paired ratio, 95% CI) | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + rho_class_table(rows, labels)


def rho_class_table(rows: list[dict], labels) -> str:
    """Mean over seeds of the max rho per reference-duration class (rows that have it), or ''."""
    sel = {lab: sorted((r for r in rows if r["label"] == lab and "max_rho_by_duration" in r),
                       key=lambda r: r["seed"]) for lab in labels}
    sel = {lab: rs for lab, rs in sel.items() if rs}
    if not sel:
        return ""
    classes = list(next(iter(sel.values()))[0]["max_rho_by_duration"])
    out = ["", "", "Max FTF rho by reference duration (s): mean over seeds [min, max]", "",
           "| policy | seeds | " + " | ".join(classes) + " |", "|---" * (len(classes) + 2) + "|"]
    for lab, rs in sel.items():
        cells = []
        for c in classes:
            x = np.array([r["max_rho_by_duration"][c] for r in rs], float)
            cells.append(f"{np.nanmean(x):.2f} [{np.nanmin(x):.2f}, {np.nanmax(x):.2f}]")
        out.append(f"| {lab} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def run_setup(kind: str, seeds: int, n_jobs: int, loads, cluster: str, workers: int, labels=None,
              durations: str = "hops", sizes: str = "gavel") -> None:
    """Run every (label, seed) of ``kind``; with ``labels``, only those, keeping the other labels'
    rows of an earlier run from its JSON file (each row records the commit that made it)."""
    setup = SETUPS[kind]
    run = [lab for lab in setup if labels is None or lab in labels]
    for load in loads:
        tasks = [(lab, *setup[lab], s, n_jobs, load, cluster, durations, sizes) for s in range(seeds)
                 for lab in run]
        stem = result_stem(kind, cluster, n_jobs, load, durations, sizes)
        old = OUT / f"{stem}.json"
        rows = [r for r in json.loads(old.read_text()) if r["label"] not in run] if labels and old.exists() else []
        with ProcessPoolExecutor(workers) as ex:          # rewrite the files as each run ends
            for fut in as_completed([ex.submit(one, t) for t in tasks]):
                rows.append(fut.result())
                _write(stem, rows, table(rows, setup))


def result_stem(kind: str, cluster: str, n_jobs: int, load: float, durations: str, sizes: str) -> str:
    """Result file name: ``_hops`` for the size-class run times, ``_sizes-hops`` for the 1-16 GPU law."""
    return (f"{kind}_{cluster}_{n_jobs}jobs_{load:g}ph" + ("" if durations == "philly" else f"_{durations}")
            + ("" if sizes == "gavel" else f"_sizes-{sizes}"))


def _write(stem: str, rows, md: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{stem}.json").write_text(json.dumps(rows, indent=1, default=str))
    (OUT / f"{stem}.md").write_text(md + "\n")
    print(stem, md, sep="\n", flush=True)


# -- ILP time versus cluster size ----------------------------------------------------------------
def scaled_hops_cluster(scale: float):
    """hops-512's five server kinds, each count times ``scale`` (at least 1 server)."""
    base = get_preset("hops-512")
    kinds = {}
    for n in range(base.n_nodes):
        key = (base.node_names[n].rsplit("-", 1)[0], int(base.node_type[n]))
        kinds[key] = kinds.get(key, 0) + 1
    groups = [{"count": max(1, int(round(c * scale))), "gpus": 8, "type": base.gpu_types[t],
               "speed": 1.0, "name_prefix": f"{name}-"} for (name, t), c in kinds.items()]
    return cluster_from_groups(f"hops-x{scale:g}", groups, source="hops_experiment")


def round_ilp(cluster, seed: int, gap: float, time_limit_s: float | None):
    """One first-plan ILP of a round on an idle cluster: a queue that fills the service window,
    LR priorities drawn uniformly, and per-(job, server) estimates equal to the hidden factors
    (every server distinct: no symmetry left to exploit).  Returns (wall s, CPU s, outcome,
    columns, window jobs); CPU seconds are the figure to read on a shared machine."""
    oracle = TableThroughput.builtin()
    n_jobs = int(cluster.total_gpus) // 2 + 50
    w = workload(n_jobs, 100.0, seed, oracle, "philly")  # as committed in ilp_time.json
    jobs = job_specs(w, oracle, 0.0)
    truth = ServerTruth(cluster, n_jobs, seed=seed)
    pol = get_policy("hops", mip_rel_gap=gap, time_limit_s=time_limit_s)
    z = np.zeros(n_jobs)
    st = SchedState(now=0.0, reasons=ROUND, cluster=cluster, jobs=jobs, active=np.arange(n_jobs),
                    ngpu=np.zeros(n_jobs, np.int32), remaining=jobs.work.copy(), attained_gpu_s=z,
                    run_s=z, queued_since=z, pl_indptr=np.zeros(n_jobs + 1, np.int64),
                    pl_nodes=np.zeros(0, np.int32), pl_counts=np.zeros(0, np.int32),
                    node_free=cluster.node_gpus.copy(), oracle=oracle)
    pol._start(st)
    prio = np.random.default_rng(seed).random(n_jobs)
    order = np.argsort(-prio, kind="stable")
    order = order[pol.r_min[order] > 0]
    cand = order[:service_window(pol.r_min[order], cluster.total_gpus)]
    fac = truth.factor[cand]
    cap = cluster.node_gpus.astype(np.int64)
    cfg = generate_configs([pol.reqs[j] for j in cand.tolist()], fac, pol.rho[cand] > pol.sigma, cap,
                           cluster.node_type, cluster.node_gpus, cluster.n_types, pol.top_servers,
                           pol.dist_limit)
    thr = pol._throughput(st, cand, cfg, fac)
    wg = prior_weights(prio[cand], pol.lam)[cfg.job] * gain(cfg.job, thr, cand.size)
    t0, c0 = time.perf_counter(), time.process_time()
    out = solve(cfg, wg, cand.size, cap, gap, time_limit_s)
    return time.perf_counter() - t0, time.process_time() - c0, out, cfg.job.size, cand.size


def ilp_time(scales, gaps, seeds: int, time_limit_s: float | None) -> None:
    rows = []
    for scale in scales:
        c = scaled_hops_cluster(scale)
        for gap in gaps:
            for s in range(seeds):
                dt, cpu, out, cols, jobs = round_ilp(c, s, gap, time_limit_s)
                rows.append({"nodes": int(c.n_nodes), "gpus": int(c.total_gpus), "gap": gap, "seed": s,
                             "wall_s": dt, "seconds": cpu, "how": out.how, "columns": cols, "window_jobs": jobs,
                             "lp_gap": 1 - out.value / out.bound if out.bound > 0 else 0.0})
                print(rows[-1], flush=True)
    old = OUT / "ilp_time.json"                       # keep rows of other gaps / sizes
    keep = [r for r in (json.loads(old.read_text()) if old.exists() else [])
            if (r["nodes"], r["gap"]) not in {(x["nodes"], x["gap"]) for x in rows}]
    _write("ilp_time", keep + rows, ilp_table(keep + rows))


def ilp_table(rows) -> str:
    md = ["| nodes | GPUs | gap | window jobs | columns | CPU s (mean, max) | ended | gap to LP bound |",
          "|---|---|---|---|---|---|---|---|"]
    for key in sorted({(r["nodes"], r["gap"]) for r in rows}):
        sel = [r for r in rows if (r["nodes"], r["gap"]) == key]
        sec = np.array([r["seconds"] for r in sel])
        md.append(f"| {key[0]} | {sel[0]['gpus']} | {key[1]} | {np.mean([r['window_jobs'] for r in sel]):.0f} | "
                  f"{np.mean([r['columns'] for r in sel]):.0f} | {sec.mean():.2f}, {sec.max():.2f} | "
                  f"{','.join(sorted({r['how'] for r in sel}))} | {max(r['lp_gap'] for r in sel):.4f} |")
    return "\n".join(md)


# -- estimator error as observations accumulate --------------------------------------------------
def estimator_error(n_jobs: int, seed: int, steps=(0, 1, 2, 5, 10, 20, 50)) -> None:
    """Relative error of the estimated factor against the hidden one on the servers a job has
    run on, after 0 (profile only: layer 3) .. k running observations per server (layer 1);
    stable versus unstable loading jobs (the shape of the paper's Fig.7)."""
    c = get_preset("hops-512")
    truth = ServerTruth(c, n_jobs, seed=seed)
    mon = truth.monitor()
    est = ThroughputEstimator(n_jobs, c.node_type, c.n_types)
    rng = np.random.default_rng(seed)
    servers = rng.integers(0, c.n_nodes, size=(n_jobs, 2))
    for j in range(n_jobs):
        for t in range(c.n_types):
            first = int(np.flatnonzero(c.node_type == t)[0])
            est.record_profile(j, first, mon.profile(j, first, 30))
    rows, done = [], 0
    for k in steps:
        for _ in range(k - done):
            for j in range(n_jobs):
                for s in servers[j].tolist():
                    est.record(j, np.array([s]), mon.observe(j, [s], 20))
        done = k
        f = est.factors(np.arange(n_jobs))
        err = np.abs(f[np.arange(n_jobs)[:, None], servers] / truth.factor[np.arange(n_jobs)[:, None], servers] - 1)
        for kind, sel in (("stable", ~truth.unstable), ("unstable", truth.unstable)):
            rows.append({"observations": k, "jobs": kind, "mean_rel_error": float(err[sel].mean()),
                         "p90_rel_error": float(np.percentile(err[sel], 90))})
    md = ["| observations per server | jobs | mean rel. error | p90 rel. error |", "|---|---|---|---|"]
    md += [f"| {r['observations']} | {r['jobs']} | {r['mean_rel_error']:.3f} | {r['p90_rel_error']:.3f} |"
           for r in rows]
    _write("estimator_error", rows, "\n".join(md))


def load_rows(durations: str = "hops", cluster: str = "hops-512", n_jobs: int = 500) -> list[dict]:
    """Every row of the load sweep's result files, all loads."""
    suffix = "" if durations == "philly" else f"_{durations}"
    rows = []
    for f in sorted(OUT.glob(f"load_{cluster}_{n_jobs}jobs_*ph{suffix}.json")):
        rows += json.loads(f.read_text())
    return rows


def plot_load(plt, rows) -> None:
    """Avg JCT and max LR against load, per label: mean over seeds with a 95% CI bar."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    for lab in SETUPS["load"]:
        loads = sorted({r["load"] for r in rows if r["label"] == lab})
        for ax, key in zip(axes, ("avg_jct_h", "avg_wait_h", "max_lr")):
            vals = [np.array([r[key] for r in rows if r["label"] == lab and r["load"] == x]) for x in loads]
            ci = [1.96 * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0 for v in vals]
            ax.errorbar(loads, [v.mean() for v in vals], yerr=ci, marker="o", capsize=2, label=lab)
            ax.set(xscale="log", xlabel="arrivals (jobs/h)", ylabel=key)
    axes[0].legend(fontsize=7)
    fig.suptitle("Hops load sweep (hops-512, 500 jobs, size-class workload)")
    fig.tight_layout(), fig.savefig(OUT / "load_sweep.png", dpi=100)


def load_summary(rows) -> str:
    """Per load: each label's mean avg JCT / avg wait / max LR, and Hops' paired avg-JCT ratio
    to each baseline with its bootstrap CI."""
    labels = list(SETUPS["load"])
    md = ["| load (jobs/h) | seeds | " + " | ".join(f"{lab} JCT / wait / max LR" for lab in labels) + " | "
          + " | ".join(f"hops / {lab} JCT" for lab in labels[1:]) + " |", "|---" * (2 * len(labels) + 1) + "|"]
    for load in sorted({r["load"] for r in rows}):
        by = {lab: {r["seed"]: r for r in rows if r["label"] == lab and r["load"] == load} for lab in labels}
        cells = [" / ".join(f"{np.mean([r[k] for r in by[lab].values()]):.2f}"
                            for k in ("avg_jct_h", "avg_wait_h", "max_lr")) if by[lab] else "-" for lab in labels]
        ratios = []
        for lab in labels[1:]:
            seeds = sorted(set(by["hops"]) & set(by[lab]))
            ratios.append(paired_ratio_ci([by["hops"][s]["avg_jct_h"] for s in seeds],
                                          [by[lab][s]["avg_jct_h"] for s in seeds]).label() if seeds else "-")
        md.append(f"| {load:g} | {len(by['hops'])} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(md)


def plots() -> None:
    """PNG figures (and the load sweep's summary table) from the committed JSON results."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if load_rows():
        plot_load(plt, load_rows())
        (OUT / "load_sweep.md").write_text(load_summary(load_rows()) + "\n")
    est, ilp = OUT / "estimator_error.json", OUT / "ilp_time.json"
    if est.exists():
        rows = json.loads(est.read_text())
        fig, ax = plt.subplots(figsize=(4.5, 3))
        for kind in ("stable", "unstable"):
            sel = [r for r in rows if r["jobs"] == kind]
            ax.plot([r["observations"] for r in sel], [r["mean_rel_error"] for r in sel], "o-", label=kind)
        ax.set(xscale="symlog", xlabel="running observations per server", ylabel="mean relative error",
               title="Hops estimator vs hidden speeds")
        ax.legend(), fig.tight_layout(), fig.savefig(OUT / "estimator_error.png", dpi=100)
    if ilp.exists():
        rows = json.loads(ilp.read_text())
        fig, ax = plt.subplots(figsize=(4.5, 3))
        for gap in sorted({r["gap"] for r in rows}):
            g = sorted({r["gpus"] for r in rows if r["gap"] == gap})
            ax.plot(g, [np.mean([r["seconds"] for r in rows if r["gap"] == gap and r["gpus"] == x]) for x in g],
                    "o-", label=f"gap {gap}")
        ax.set(xscale="log", yscale="log", xlabel="GPUs (8 per server)", ylabel="CPU seconds per round ILP",
               title="Hops first-plan ILP time (HiGHS)")
        ax.legend(), fig.tight_layout(), fig.savefig(OUT / "ilp_time.png", dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=[*SETUPS, "ilp-time", "estimator", "plots"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=None, help="default 500 (table3: 25)")
    ap.add_argument("--loads", default=None, help="jobs/h, comma-separated; default 100 (table3: 10)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cluster", default=None, help="default hops-512 (table3: hops-64)")
    ap.add_argument("--durations", default="hops", choices=("hops", "philly"),
                    help="run times: the paper's size classes (default) or Philly's")
    ap.add_argument("--sizes", default="gavel", choices=("gavel", "hops"),
                    help="GPU counts: Gavel's law (default) or 1-16 GPUs, powers of two, uniform "
                         "(sim.workload HOPS_GPU_COUNTS: the contended regime)")
    ap.add_argument("--scales", default="0.25,0.5,1,2,4,8,16")
    ap.add_argument("--gaps", default="0.01,0.05")
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--labels", default=None,
                    help="comma-separated labels of the setup to run (others keep their earlier rows)")
    a = ap.parse_args()
    if a.what == "ilp-time":
        ilp_time([float(x) for x in a.scales.split(",")], [float(x) for x in a.gaps.split(",")], a.seeds,
                 a.time_limit)
    elif a.what == "estimator":
        estimator_error(a.jobs, 0)
    elif a.what == "plots":
        plots()
    else:
        cluster, jobs, load = DEFAULTS.get(a.what, ("hops-512", 500, 100.0))
        loads = [float(x) for x in a.loads.split(",")] if a.loads else [load]
        run_setup(a.what, a.seeds, a.jobs or jobs, loads, a.cluster or cluster, a.workers,
                  a.labels.split(",") if a.labels else None, a.durations, a.sizes)


if __name__ == "__main__":
    main()
