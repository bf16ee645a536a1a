"""asv: Pollux decision latency (policy tier).  One round at 64 nodes x 4 GPUs with 100 active
jobs; target <= 1 s with our search (``search="dp"``); the authors' NSGA-II is timed too, and
:func:`objectives` reports the objective value each reaches (docs/goodput.md).

The jobs are drawn from the Pollux applications (the shared profiles when present, else the
synthetic test profile), all measured once (so speedups come from the fitted model), at random
epochs; about half of the GPUs are held by a valid current allocation.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from sim.cluster import uniform_cluster
from sim.goodput.oracle import GoodputOracle
from sim.goodput.profiles import load_applications, shared_profiles_dir
from sim.policies import get_policy
from sim.state import ROUND, JobSpecs, SchedState


def _applications():
    root = shared_profiles_dir("pollux")
    if root is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from goodput_helpers import write_profile
        root = Path(tempfile.mkdtemp()) / "profiles"
        write_profile(root)
    return tuple(load_applications(root).values())


def build_state(n_nodes: int = 64, n_jobs: int = 100, search: str = "dp", seed: int = 0, **params):
    rng = np.random.default_rng(seed)
    apps = _applications()
    oracle = GoodputOracle(apps, job_batch=np.zeros(n_jobs, np.int64))
    cluster = uniform_cluster(n_nodes, 4, gpu_type="t4")
    model = rng.integers(0, len(apps), n_jobs).astype(np.int32)
    work = np.array([apps[m].target_progress for m in model])
    ones = np.ones(n_jobs)
    jobs = JobSpecs(arrival=np.sort(rng.uniform(0, 3600, n_jobs)), demand=np.ones(n_jobs, np.int32),
                    gpus_min=np.ones(n_jobs, np.int32), gpus_max=np.full(n_jobs, 64, np.int32), model=model,
                    work=work, est_duration=ones, priority=ones, restart_delay=30 * ones)
    frac = rng.uniform(0, 0.9, n_jobs)
    want = rng.choice([1, 2, 4], n_jobs)
    per_node = np.repeat(np.arange(n_nodes), 4)[: cluster.total_gpus // 2]
    held = np.minimum(np.cumsum(want), per_node.shape[0])
    start = np.concatenate([[0], held[:-1]])
    nodes, counts, sizes = [], [], []
    for a, b in zip(start, held):
        u, c = np.unique(per_node[a:b], return_counts=True)
        nodes += u.tolist()
        counts += c.tolist()
        sizes.append(len(u))
    indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ngpu = np.diff(np.concatenate([[0], held])).astype(np.int32)
    state = SchedState(now=4000.0, reasons=ROUND, cluster=cluster, jobs=jobs, active=np.arange(n_jobs),
                       ngpu=ngpu, remaining=work * (1 - frac), attained_gpu_s=rng.uniform(0, 1e5, n_jobs),
                       run_s=np.full(n_jobs, 600.0), queued_since=np.where(ngpu > 0, np.nan, 0.0),
                       pl_indptr=indptr, pl_nodes=np.array(nodes, np.int32), pl_counts=np.array(counts, np.int32),
                       node_free=None, oracle=oracle)
    policy = get_policy("pollux", search=search, **params)
    policy._start(state)
    policy.model.started[:] = True
    policy.model.max_seen[:] = 16
    policy.model.stat_batch[:] = [apps[m].init_batch_size for m in model]
    epochs = policy.model.begin(state)
    policy.model.stat_epoch[:] = epochs
    return policy, state, epochs


class PolluxDecision:
    timeout = 300

    def setup(self):
        self.dp = build_state(search="dp")
        self.dp_nopolish = build_state(search="dp", polish=False)

    def time_decision_dp(self):
        p, s, e = self.dp
        p.decide(s, e)

    def time_decision_dp_nopolish(self):
        p, s, e = self.dp_nopolish
        p.decide(s, e)


#: the searches :func:`objectives` compares: name -> (search, parameters)
SEARCH_VARIANTS = {"dp": ("dp", {}), "dp-nopolish": ("dp", {"polish": False}), "nsga2": ("nsga2", {})}


def objectives(n_nodes: int = 64, n_jobs: int = 100, seed: int = 0, variants=tuple(SEARCH_VARIANTS)) -> dict:
    """Seconds and objective value (power mean) of each search on one round."""
    import time
    out = {}
    for name in variants:
        search, params = SEARCH_VARIANTS[name]
        p, s, e = build_state(n_nodes, n_jobs, search, seed, **params)
        order = np.lexsort((s.jobs.arrival[s.active], s.attained_gpu_s))
        problem = p.problem(s, order)
        t = time.perf_counter()
        plan = p.decide(s, e)
        dt = time.perf_counter() - t
        x = np.zeros_like(problem.base)
        for row, i in enumerate(order):
            sl = slice(int(plan.indptr[i]), int(plan.indptr[i + 1]))
            x[row, plan.nodes[sl]] = plan.counts[sl]
        out[name] = {"seconds": dt, "objective": float(problem.values(x[None])[0][0])}
    return out


if __name__ == "__main__" and sys.argv[1:] != ["sia"]:
    print(objectives())


# -- Sia: one ILP round at 1,024 nodes with 2,000 active jobs (target <= 5 s; docs/goodput.md) ------

def sia_round_inputs(n_jobs: int = 2000, seed: int = 0):
    """The ILP of one Sia round on 512 x 4 T4 + 256 x 8 RTX 2080 Ti + 256 x 8 A100 (1,024 nodes):
    Sia's configurations; each job's normalized goodput ``speed[type] x r^u`` (u in [0.5, 1], a
    concave scaling curve, speeds 1 / 1.6 / 3.5 with +-30% per job), up to 64 GPUs; the restart
    factor 0.9 on every configuration but the current one (a random one for half the jobs);
    costs ``round(S^-0.5, 2)`` as the policy builds them."""
    from sim.cluster import cluster_from_groups
    from sim.goodput.sia_configs import sia_configs
    cluster = cluster_from_groups("sia-1024", [{"count": 512, "gpus": 4, "type": "t4"},
                                               {"count": 256, "gpus": 8, "type": "rtx2080ti"},
                                               {"count": 256, "gpus": 8, "type": "a100"}])
    cfg = sia_configs(cluster)
    rng = np.random.default_rng(seed)
    speed = np.array([1.0, 1.6, 3.5])[None, :] * rng.uniform(0.7, 1.3, (n_jobs, 3))
    u = rng.uniform(0.5, 1.0, (n_jobs, 1))
    s = speed[:, cfg.type_idx] * cfg.gpus[None, :] ** u
    s /= s.min(axis=1, keepdims=True)
    prev = np.where(rng.random(n_jobs) < 0.5, rng.integers(0, len(cfg), n_jobs), -1)
    keep = np.zeros_like(s, bool)
    keep[np.flatnonzero(prev >= 0), prev[prev >= 0]] = True
    s = np.where(keep, s, 0.9 * s)
    return np.round(s ** -0.5, 2), np.ones_like(s, bool), cfg


class SiaRound:
    timeout = 120

    def setup(self):
        self.inputs = sia_round_inputs()

    def time_ilp_round(self):
        from sim.policies.sia_ilp import solve_sia_ilp
        cost, valid, cfg = self.inputs
        solve_sia_ilp(cost, valid, cfg.type_idx, cfg.gpus, cfg.capacity, 1.1)


def sia_round(n_jobs: int = 2000, seed: int = 0, **ilp) -> dict:
    """Seconds, MIP gap and objective of one Sia ILP round (``ilp``: mip_rel_gap, time_limit_s)."""
    import time
    from sim.policies.sia_ilp import solve_sia_ilp
    cost, valid, cfg = sia_round_inputs(n_jobs, seed)
    t0 = time.perf_counter()
    res = solve_sia_ilp(cost, valid, cfg.type_idx, cfg.gpus, cfg.capacity, 1.1, **ilp)
    return {"seconds": time.perf_counter() - t0, "mip_gap": res.mip_gap, "objective": res.objective,
            "allocated": int((res.choice >= 0).sum()), "configs": len(cfg)}


if __name__ == "__main__" and sys.argv[1:] == ["sia"]:
    print(sia_round())
    print(sia_round(mip_rel_gap=1e-2))


class GoodputWorkload:
    """A whole paper workload (docs/goodput.md, "Speed"): Sia on Sia's saturn workload-1 (160 jobs,
    ``sia-64``) and Pollux (our default search) on the Pollux workloads-0.5/workload-1 (80 jobs,
    ``pollux-64``), from the workload already read (profiles loaded and fitted) to the last
    completion.  Needs the shared data (skipped without it).  The authors' simulators take
    160-450 CPU-s for a Sia workload on this kind of machine (docs/goodput.md); they cannot run
    inside asv, so the ratio is reported in docs from ``scalability/sia_fidelity.py``."""
    timeout = 600
    number = 1
    repeat = 1
    params = ["sia", "pollux"]
    param_names = ["policy"]

    def setup(self, policy):
        from sim.goodput.profiles import shared_workloads_dir
        from sim.goodput.workload import read_goodput_workload
        kind, name = {"sia": ("sia", "saturn/workload-1.csv"),
                      "pollux": ("pollux", "workloads-0.5/workload-1.csv")}[policy]
        root = shared_workloads_dir(kind)
        if root is None:
            raise NotImplementedError("the shared data's workloads are absent")
        self.table, self.oracle = read_goodput_workload(root / name)
        self.cluster = {"sia": "sia-64", "pollux": "pollux-64"}[policy]

    def time_whole_workload(self, policy):
        from sim.api import simulate
        simulate(self.cluster, self.table, policy, self.oracle)
