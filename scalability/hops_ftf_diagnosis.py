"""Why Hops with the FTF priority has a larger max rho than with LR (docs/hops.md, "FTF
experiment"): per reference-duration class, what each priority does to the jobs, and how far
apart its priorities put short and long jobs.

    python scalability/hops_ftf_diagnosis.py [--seeds 0,1,2,3,4] [--load 100] [--spy-seed 0]

Runs ``hops-ftf-lam2`` and ``hops-lr`` of ``hops_experiment.py ftf`` (Table 4's setup) and prints,
per class of reference duration, the mean over seeds of: the max rho, the mean run time over the
reference duration, restarts a job, the wait.  On ``--spy-seed`` it records every priority refresh
and prints the median, over refreshes where both kinds are active, of the median priority of
jobs under 10 min and of jobs of 10 h or more, and of their ratio.
"""
from __future__ import annotations

import argparse

import numpy as np

import hops_experiment as he
from sim.metrics import finish_time_fairness
from sim.hops.metrics import DURATION_EDGES, duration_classes

LABELS = ("hops-ftf-lam2", "hops-lr")


def run(label: str, seed: int, load: float, spy: list | None = None):
    """One run; with ``spy`` a list, the policy appends (active ids, priorities) per decision."""
    name, kw = he.SETUPS["ftf"][label]
    cluster, oracle = he.get_preset("hops-512"), he.TableThroughput.builtin()
    w = he.workload(500, load, seed, oracle)
    truth = he.ServerTruth(cluster, 500, seed=seed)
    policy = he.get_policy(name, **kw)
    policy.priority_log = spy
    return he.simulate(cluster, w, policy, oracle, he.EngineConfig(), truth=truth)


def per_class(res) -> np.ndarray:
    """[class, (max rho, run / reference, restarts, wait s)]"""
    rho = finish_time_fairness(res)
    est = np.asarray(res.jobs.est_duration, float)
    cut, names = duration_classes(est)
    wait = res.first_start - res.jobs.arrival
    out = np.full((len(names), 5), np.nan)
    for k in range(out.shape[0]):
        m = cut == k
        if m.any():
            out[k] = (rho[m].max(), (res.run_seconds[m] / est[m]).mean(), res.restarts[m].mean(),
                      wait[m].mean(), m.sum())
    return out


def spread(res, spy) -> str:
    est = np.asarray(res.jobs.est_duration, float)
    short, long_, ratio = [], [], []
    for ids, p in spy:
        s, lg = est[ids] < DURATION_EDGES[0], est[ids] >= DURATION_EDGES[-1]
        if s.any() and lg.any():
            a, b = np.median(p[s]), np.median(p[lg])
            short.append(a), long_.append(b), ratio.append(a / max(b, 1e-12))
    return (f"refreshes with both: {len(ratio)} of {len(spy)}; median priority short {np.median(short):.4g}, "
            f"long {np.median(long_):.4g}; short / long {np.median(ratio):.3g} "
            f"(p10 {np.percentile(ratio, 10):.3g}, p90 {np.percentile(ratio, 90):.3g})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--load", type=float, default=100.0)
    ap.add_argument("--spy-seed", type=int, default=0)
    ap.add_argument("--labels", default=",".join(LABELS))
    a = ap.parse_args()
    edges = duration_classes(np.zeros(0))[1]
    for label in a.labels.split(","):
        rows, restarts = [], []
        for seed in (int(s) for s in a.seeds.split(",")):
            spy = [] if seed == a.spy_seed else None
            res = run(label, seed, a.load, spy)
            rows.append(per_class(res))
            restarts.append(res.restarts.mean())
            if spy is not None:
                print(f"{label} seed {seed}: {spread(res, spy)}")
        m = np.nanmean(np.stack(rows), axis=0)
        print(f"{label}: restarts a job {np.mean(restarts):.1f} (per seed {np.round(restarts, 1).tolist()})")
        for k, name in enumerate(edges):
            print(f"  est {name:>12} s: jobs/seed {m[k, 4]:.0f}  max rho {m[k, 0]:.2f}  run/ref {m[k, 1]:.2f}  "
                  f"restarts {m[k, 2]:.1f}  wait {m[k, 3]:.0f} s")


if __name__ == "__main__":
    main()
