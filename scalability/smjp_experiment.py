"""The SMJP experiment (paper 2; issue 13): the paper's claims measured on our instances.

Parts (every setting ours [I]; docs/smjp.md reports the numbers):

* ``gap``: >= 200 random instances, 4..16 workers on nodes of 1, 2 or 4 GPUs of 2-3 types, 2..6
  jobs with ``1 <= K_i <= kmax_i``; per-worker throughputs from Gavel's measured table
  (../shared/data/throughputs/gavel, else the built-in excerpt) or from Sia's seed profiles
  (../shared/data/profiles/sia_seed: samples/s = local batch / step time), half each.  The
  sampling solver (N = 64) against the exact MILP: gap of average JCT, decision times.
* ``scale``: decision time of the ``smjp`` policy (instance building included) with 100
  waiting elastic jobs on hops-like clusters of 64..1024 nodes of 8 GPUs, all free.
* ``fairness``: Jain's index of slowdowns and average JCT versus theta and beta_f.
* ``e2e``: average JCT of FIFO, Tiresias, Gavel's heterogeneity-aware LAS
  (gavel-max-min-fairness-perf) and SMJP on ``sia-64`` and ``hops-512``, 5 seeds, 95%
  t-intervals; the baselines both under the oracle's slowest-worker rule and with SMJP's
  proportional rate model (sim.smjp.ProportionalRates).  Sia is `sia-rigid` (its rigid-job path).
* ``ablation``: a cluster of 2-GPU nodes of two types where most jobs must mix types: FIFO
  (slowest worker), FIFO with proportional assignment, SMJP with FIFO admission, SMJP.

Outputs in ``--out`` (default scalability/results/smjp): gap.csv, scale.csv, fairness.csv,
e2e.csv, ablation.csv, summary.json and smjp.png.  Usage::

    python scalability/smjp_experiment.py                 # everything (about 20 min, 2 cores)
    python scalability/smjp_experiment.py --parts gap,scale --instances 40
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.metrics import summary
from sim.policies import get_policy
from sim.presets import load_cluster
from sim.smjp import Instance, LatencyModel, ProportionalRates, SamplingConfig, solve_exact, solve_sampling
from sim.smjp.gradients import gradient_bytes
from sim.state import JobSpecs, SchedState
from sim.throughput import TableThroughput
from sim.workload import generate_workload

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA", ROOT.parent / "shared" / "data"))
#: bandwidths of the random instances, Gbit/s: PCIe 3 inside a node, 25 GbE between nodes, and
#: NVLink inside A100 servers
INTRA, INTER, NVLINK = 128.0, 25.0, 4800.0


# -- per-worker throughput sources ----------------------------------------------------------
def gavel_source():
    path = SHARED / "throughputs" / "gavel" / "simulation_throughputs.json"
    oracle = TableThroughput.from_gavel_json(path) if path.exists() else TableThroughput.builtin()
    types = ("v100", "p100", "k80")
    m = len(oracle.models)
    idx = np.repeat(np.arange(m), 3)
    mask = np.tile(1 << np.arange(3), m)
    r1 = np.asarray(oracle.rates(idx, np.ones(3 * m, np.int64), np.ones(3 * m, np.int64), mask,
                                 np.ones(3 * m), types)).reshape(m, 3)
    batch = np.array([int(s.split("batch size ")[1].rstrip(")")) if "batch size" in s else 32
                      for s in oracle.models])
    ok = (r1 > 0).all(axis=1)
    return {"name": "gavel", "types": types, "models": [oracle.models[i] for i in np.flatnonzero(ok)],
            "samples_s": (r1 * batch[:, None])[ok], "batch": batch[ok]}


def sia_source():
    folder = SHARED / "profiles" / "sia_seed"
    if not folder.exists():
        return None
    types = ("dgx", "quad", "rtx", "t4", "v100")
    models, rates, batch = [], [], []
    for f in sorted(folder.glob("*.csv")):
        rows = {r["gpu_type"]: r for r in csv.DictReader(f.open())}
        if all(t in rows for t in types):
            models.append(f.stem)
            rates.append([float(rows[t]["local_bsz"]) / float(rows[t]["step_time"]) for t in types])
            batch.append(int(float(rows["v100"]["local_bsz"])))
    return {"name": "sia", "types": types, "models": models, "samples_s": np.array(rates),
            "batch": np.array(batch)}


# -- (a) gap to the exact optimum -------------------------------------------------------------
def random_instance(rng, src, model: LatencyModel, max_workers=16, max_patterns=20_000) -> Instance:
    while True:
        t = rng.choice(len(src["types"]), size=rng.integers(2, min(3, len(src["types"])) + 1),
                       replace=False)
        n_nodes = int(rng.integers(2, 7))
        cap = rng.choice([1, 2, 4], size=n_nodes)
        if 4 <= cap.sum() <= max_workers and np.prod(cap + 1.0) <= max_patterns:
            break
    node_type = t[rng.integers(0, len(t), n_nodes)]
    S = int(rng.integers(2, min(6, cap.sum()) + 1))
    mi = rng.integers(0, len(src["models"]), S)
    rho = src["samples_s"][mi][:, node_type]
    kmax = rng.integers(1, min(8, int(cap.sum())) + 1, S)
    P = src["batch"][mi] * kmax
    single = P / rho.max(axis=1)                    # s per iteration on the best single GPU
    remaining = np.power(10.0, rng.uniform(2, 4, S)) / single
    dgx = np.array([src["types"][k] in ("dgx", "a100") for k in node_type])
    return Instance(remaining=remaining, P=P.astype(float),
                    grad=gradient_bytes([src["models"][i] for i in mi]), kmin=np.ones(S, np.int64),
                    kmax=kmax.astype(np.int64), wait=np.zeros(S), rho=rho, cap=cap.astype(np.int64),
                    intra=np.where(dgx, NVLINK, INTRA), inter=np.full(n_nodes, INTER), model=model)


def part_gap(n_instances: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    sources = [s for s in (gavel_source(), sia_source()) if s is not None]
    model = LatencyModel()
    rows = []
    for k in range(n_instances):
        src = sources[k % len(sources)]
        inst = random_instance(rng, src, model)
        c0 = time.process_time()
        samp = solve_sampling(inst, SamplingConfig(seed=k))
        c1 = time.process_time()
        exact = solve_exact(inst)
        c2 = time.process_time()
        rows.append({"instance": k, "source": src["name"], "workers": inst.n_workers,
                     "jobs": inst.n_jobs, "nodes": int(inst.cap.size),
                     "sampling_avg_jct": samp.avg_jct, "exact_avg_jct": exact.avg_jct,
                     "gap": samp.avg_jct / exact.avg_jct - 1.0, "sampling_s": samp.seconds,
                     "exact_s": exact.seconds, "sampling_cpu_s": c1 - c0, "exact_cpu_s": c2 - c1,
                     "sampling_jain": samp.jain, "exact_jain": exact.jain})
    return rows


# -- (c) decision time at scale ---------------------------------------------------------------
def hops_like(nodes: int):
    k = nodes // 8
    groups = [(2 * k, "gtx1080ti", 1.0), (2 * k, "titanxp", 1.0), (2 * k, "rtx3090", 0.9),
              (k, "rtx3090", 1.0), (k, "rtx3090", 1.1)]
    return cluster_from_groups(f"hops-like-{nodes}", [
        {"count": c, "gpus": 8, "type": t, "speed": s, "inter_bw_gbps": 100.0} for c, t, s in groups])


def waiting_state(cluster, oracle, n_jobs: int, seed: int, free_gpus: int | None = None) -> SchedState:
    """A decision point with ``n_jobs`` queued elastic jobs and every GPU free, or
    ``free_gpus`` free GPUs scattered over random nodes (the rest busy)."""
    table = generate_workload(n_jobs, load_jobs_per_hour=1000, seed=seed, throughput=oracle)
    js = job_specs(table, oracle)
    js = JobSpecs(arrival=np.zeros(n_jobs), demand=js.demand, gpus_min=np.maximum(js.demand // 2, 1),
                  gpus_max=2 * js.demand, model=js.model, work=js.work, est_duration=js.est_duration,
                  priority=js.priority, restart_delay=js.restart_delay)
    z = np.zeros(n_jobs)
    return SchedState(now=0.0, reasons=1, cluster=cluster, jobs=js, active=np.arange(n_jobs),
                      ngpu=np.zeros(n_jobs, np.int32), remaining=js.work.copy(), attained_gpu_s=z,
                      run_s=z, queued_since=z, pl_indptr=np.zeros(n_jobs + 1, np.int64),
                      pl_nodes=np.zeros(0, np.int32), pl_counts=np.zeros(0, np.int32),
                      node_free=_scatter(cluster, free_gpus, seed), oracle=oracle)


def _scatter(cluster, free_gpus: int | None, seed: int) -> np.ndarray:
    if free_gpus is None:
        return cluster.node_gpus.copy()
    rng = np.random.default_rng(seed)
    free = np.zeros(cluster.n_nodes, np.int32)
    for n in rng.choice(np.repeat(np.arange(cluster.n_nodes), cluster.node_gpus), free_gpus, replace=False):
        free[n] += 1
    return free


def part_scale(reps: int = 5) -> list[dict]:
    oracle = TableThroughput.builtin()
    rows = []
    for nodes, free in itertools.product((64, 128, 256, 512, 1024), (None, 150)):
        cluster = hops_like(nodes)
        for rep in range(reps):
            state = waiting_state(cluster, oracle, 100, rep, free)
            pol = get_policy("smjp", seed=rep)
            pol.schedule(state)                        # warm (Numba caches, tables)
            t0, c0 = time.perf_counter(), time.process_time()
            plan = pol.schedule(state)
            rows.append({"nodes": nodes, "gpus": cluster.total_gpus, "jobs": 100, "rep": rep,
                         "free_gpus": int(state.node_free.sum()),
                         "decision_s": time.perf_counter() - t0,
                         "decision_cpu_s": time.process_time() - c0,
                         "placed_jobs": int((np.diff(plan.indptr) > 0).sum())})
    return rows


# -- (d) fairness knobs -------------------------------------------------------------------------
def part_fairness(n_instances: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    src = gavel_source()
    model = LatencyModel()
    insts = [random_instance(rng, src, model, max_workers=32, max_patterns=1e12) for _ in range(n_instances)]
    rows = []
    for theta in (0.0, 0.25, 0.5, 0.75, 1.0):
        for beta in (0.0, 1.0, 4.0):
            sols = [solve_sampling(i, SamplingConfig(theta=theta, beta_f=beta, seed=k))
                    for k, i in enumerate(insts)]
            rows.append({"theta": theta, "beta_f": beta, "instances": n_instances,
                         "mean_jain": float(np.mean([s.jain for s in sols])),
                         "mean_avg_jct": float(np.mean([s.avg_jct for s in sols]))})
    base = next(r for r in rows if r["theta"] == 0.5 and r["beta_f"] == 0.0)["mean_avg_jct"]
    for r in rows:
        r["avg_jct_vs_default"] = r["mean_avg_jct"] / base
    return rows


# -- (e) end to end, and the ablation -------------------------------------------------------------
BASELINES = ("fifo", "tiresias", "gavel-max-min-fairness-perf", "sia-rigid")


def _policy(name: str, proportional: bool, **params):
    pol = get_policy(name, **params)
    if proportional and pol.rate_model is None:
        pol.rate_model = ProportionalRates()
    return pol


def _run(cluster, jobs, oracle, label, name, proportional, **params) -> dict:
    t0 = time.perf_counter()
    res = run_jobs(cluster, jobs, _policy(name, proportional, **params), oracle, EngineConfig())
    s = summary(res)
    return {"policy": label, "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"],
            "wall_s": time.perf_counter() - t0}


def part_e2e(seeds, n_jobs: int, presets=("sia-64", "hops-512")) -> list[dict]:
    oracle = TableThroughput.builtin()
    rows = []
    for preset in presets:
        cluster = load_cluster(preset)
        load = cluster.total_gpus / 32.0   # jobs/h: about the GPU-hours the cluster serves (our choice)
        for seed in seeds:
            table = generate_workload(n_jobs, load_jobs_per_hour=load, seed=seed, throughput=oracle)
            jobs = job_specs(table, oracle)
            runs = [("smjp", "smjp", False)] + [(b, b, False) for b in BASELINES] + \
                   [(f"{b}+prop", b, True) for b in BASELINES]
            for label, name, prop in runs:
                rows.append({"preset": preset, "seed": seed,
                             **_run(cluster, jobs, oracle, label, name, prop)})
    return rows


def mixed_cluster():
    """8 nodes of 2 K80s and 8 of 2 V100s (default bandwidths): jobs of 4 or 8 GPUs must span
    nodes and, as the types fill, mix them.  The ablation offers 2 jobs/h, about twice the
    GPU-hours the cluster serves (our choice)."""
    return cluster_from_groups("mixed-32", [{"count": 8, "gpus": 2, "type": "k80"},
                                             {"count": 8, "gpus": 2, "type": "v100"}])


def part_ablation(seeds, n_jobs: int) -> list[dict]:
    oracle = TableThroughput.builtin()
    cluster = mixed_cluster()
    rows = []
    for seed in seeds:
        table = generate_workload(n_jobs, load_jobs_per_hour=2, seed=seed, throughput=oracle)
        jobs = job_specs(table, oracle)
        for label, name, prop, params in (("fifo", "fifo", False, {}), ("fifo+prop", "fifo", True, {}),
                                          ("smjp-fifo-order", "smjp", False, {"admission": "fifo"}),
                                          ("smjp", "smjp", False, {})):
            rows.append({"cluster": cluster.name, "seed": seed,
                         **_run(cluster, jobs, oracle, label, name, prop, **params)})
    return rows


def mixed_rate_example() -> dict:
    """One 8-GPU ResNet-50 job on 4 K80 + 4 V100: both rules' rates."""
    oracle = TableThroughput.builtin()
    c = mixed_cluster()
    m = oracle.model_index("ResNet-50 (batch size 64)")
    jobs = JobSpecs(*(np.array([v]) for v in (0.0, 8, 8, 8, m, 1.0, 1.0, 1.0, 0.0)))
    nodes = np.array([0, 1, 8, 9], np.int32)
    counts = np.full(4, 2, np.int32)
    prop = ProportionalRates().rates(jobs, np.array([0]), np.array([0, 4]), nodes, counts, c, oracle)
    slow = oracle.rates(np.array([m]), np.array([8]), np.array([4]), np.array([3]), np.ones(1),
                        c.gpu_types)
    return {"model": oracle.models[m], "placement": "4 x k80 + 4 x v100 on 4 nodes",
            "slowest_worker_it_s": float(slow[0]), "proportional_it_s": float(prop[0])}


# -- summaries, output ---------------------------------------------------------------------------
def ci95(x) -> tuple[float, float]:
    from scipy import stats
    x = np.asarray(x, float)
    if x.size < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def _median(rows: list[dict], key: str) -> float | None:
    return float(np.median([r[key] for r in rows])) if rows else None


def _median_ratio(rows: list[dict], num: str, den: str) -> float | None:
    return float(np.median([r[num] / r[den] for r in rows])) if rows else None


def summarize(out: Path, parts: dict) -> dict:
    s = {}
    if "gap" in parts:
        g = np.array([r["gap"] for r in parts["gap"]])
        w16 = [r for r in parts["gap"] if r["workers"] >= 14]
        s["gap"] = {"instances": int(g.size), "mean_pct": 100 * float(g.mean()),
                    "p95_pct": 100 * float(np.percentile(g, 95)), "max_pct": 100 * float(g.max()),
                    "optimal_share": float(np.mean(g < 1e-9)),
                    "within_2.04pct_share": float(np.mean(g <= 0.0204)),
                    "speedup_median_14_16_workers": float(np.median([r["exact_s"] / r["sampling_s"]
                                                                     for r in w16])) if w16 else None,
                    "sampling_median_s_14_16": float(np.median([r["sampling_s"] for r in w16])) if w16 else None,
                    "exact_median_s_14_16": float(np.median([r["exact_s"] for r in w16])) if w16 else None,
                    "speedup_cpu_median_14_16_workers": _median_ratio(w16, "exact_cpu_s", "sampling_cpu_s"),
                    "sampling_cpu_median_s_14_16": _median(w16, "sampling_cpu_s"),
                    "exact_cpu_median_s_14_16": _median(w16, "exact_cpu_s")}
    if "scale" in parts:
        cells = {}
        for r in parts["scale"]:
            key = f"{r['nodes']} nodes, {'all' if r['free_gpus'] == r['gpus'] else r['free_gpus']} free"
            cells.setdefault(key, []).append(r)
        s["scale"] = {k: {"median_ms": 1e3 * float(np.median([r["decision_s"] for r in v])),
                          "median_cpu_ms": 1e3 * float(np.median([r["decision_cpu_s"] for r in v])),
                          "max_ms": 1e3 * float(np.max([r["decision_s"] for r in v])),
                          "placed_jobs": float(np.mean([r["placed_jobs"] for r in v]))}
                      for k, v in cells.items()}
    for key, group in (("e2e", ("preset", "policy")), ("ablation", ("cluster", "policy"))):
        if key in parts:
            cells = {}
            for r in parts[key]:
                cells.setdefault(tuple(r[g] for g in group), []).append(r["avg_jct_s"])
            s[key] = [{**dict(zip(group, k)), "mean_avg_jct_s": ci95(v)[0], "ci95_s": ci95(v)[1],
                       "seeds": len(v)} for k, v in cells.items()]
    if "ablation" in parts:
        s["mixed_rate_example"] = mixed_rate_example()
    old = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    old.update(s)
    (out / "summary.json").write_text(json.dumps(old, indent=1) + "\n")
    return old


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def read_csv(path: Path) -> list[dict]:
    rows = list(csv.DictReader(path.open()))
    return [{k: _num(v) for k, v in r.items()} for r in rows]


def _num(v: str):
    try:
        return float(v) if any(ch in v for ch in ".en") else int(v)
    except ValueError:
        return v


def plot(out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    if (out / "gap.csv").exists():
        gap = read_csv(out / "gap.csv")
        g = np.sort([100 * r["gap"] for r in gap])
        ax[0, 0].plot(g, np.arange(1, g.size + 1) / g.size)
        ax[0, 0].axvline(2.04, ls="--", c="gray", label="paper: 2.04%")
        ax[0, 0].set(xlabel="gap of avg JCT to the exact optimum (%)", ylabel="CDF of instances",
                     title=f"(a) sampling vs exact MILP, {g.size} instances")
        ax[0, 0].legend()
        w = sorted({r["workers"] for r in gap})
        for key, lab in (("sampling_s", "sampling (N=64)"), ("exact_s", "exact MILP")):
            ax[0, 1].plot(w, [1e3 * np.median([r[key] for r in gap if r["workers"] == k]) for k in w],
                          "o-", label=lab)
    if (out / "scale.csv").exists():
        sc = read_csv(out / "scale.csv")
        nodes = sorted({r["nodes"] for r in sc})
        for lab, pick in (("all free", lambda r: r["free_gpus"] == r["gpus"]),
                          ("150 free", lambda r: r["free_gpus"] != r["gpus"])):
            ax[0, 1].plot([8 * n for n in nodes],
                          [1e3 * np.median([r["decision_s"] for r in sc if r["nodes"] == n and pick(r)])
                           for n in nodes], "s-", label=f"smjp policy, 100 jobs, {lab} (x: cluster GPUs)")
    ax[0, 1].axhline(50, ls="--", c="gray")
    ax[0, 1].set(xscale="log", yscale="log", xlabel="free workers (GPUs)", ylabel="decision time (ms)",
                 title="(b, c) decision time")
    ax[0, 1].legend()
    if (out / "fairness.csv").exists():
        fr = read_csv(out / "fairness.csv")
        for beta in sorted({r["beta_f"] for r in fr}):
            rr = [r for r in fr if r["beta_f"] == beta]
            ax[1, 0].plot([r["theta"] for r in rr], [r["mean_jain"] for r in rr], "o-",
                          label=f"beta_f={beta:g}")
        ax[1, 0].set(xlabel="theta", ylabel="mean Jain index of slowdowns", title="(d) fairness knobs")
        ax[1, 0].legend()
    if (out / "summary.json").exists() and "e2e" in json.loads((out / "summary.json").read_text()):
        e2e = json.loads((out / "summary.json").read_text())["e2e"]
        labels = sorted({r["policy"] for r in e2e})
        for k, preset in enumerate(sorted({r["preset"] for r in e2e})):
            rr = {r["policy"]: r for r in e2e if r["preset"] == preset}
            ref = rr["fifo"]["mean_avg_jct_s"]
            xs = np.arange(len(labels)) + 0.4 * k
            ax[1, 1].bar(xs, [rr[p]["mean_avg_jct_s"] / ref for p in labels], width=0.4,
                         yerr=[rr[p]["ci95_s"] / ref for p in labels], label=preset)
        ax[1, 1].set_xticks(np.arange(len(labels)) + 0.2, labels, rotation=35, ha="right", fontsize=8)
        ax[1, 1].set(ylabel="avg JCT / FIFO's", title="(e) end to end, 5 seeds, 95% CI")
        ax[1, 1].legend()
    fig.tight_layout()
    fig.savefig(out / "smjp.png", dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="gap,scale,fairness,e2e,ablation")
    ap.add_argument("--instances", type=int, default=240)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--e2e-jobs", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "scalability" / "results" / "smjp")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seeds))
    runners = {"gap": lambda: part_gap(args.instances, 13),
               "scale": part_scale,
               "fairness": lambda: part_fairness(24, 7),
               "e2e": lambda: part_e2e(seeds, args.e2e_jobs),
               "ablation": lambda: part_ablation(seeds, 120)}
    done = {}
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        done[part] = runners[part]()
        write_csv(done[part], args.out / f"{part}.csv")
        print(f"{part}: {len(done[part])} rows in {time.perf_counter() - t0:.1f} s", flush=True)
    print(json.dumps(summarize(args.out, done), indent=1))
    plot(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
