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

    def time_decision_dp(self):
        p, s, e = self.dp
        p.decide(s, e)


def objectives(n_nodes: int = 64, n_jobs: int = 100, seed: int = 0) -> dict:
    """Seconds and objective value (power mean) of each search on one round."""
    import time
    out = {}
    for search in ("dp", "nsga2"):
        p, s, e = build_state(n_nodes, n_jobs, search, seed)
        order = np.lexsort((s.jobs.arrival[s.active], s.attained_gpu_s))
        problem = p.problem(s, order)
        t = time.perf_counter()
        plan = p.decide(s, e)
        dt = time.perf_counter() - t
        x = np.zeros_like(problem.base)
        for row, i in enumerate(order):
            sl = slice(int(plan.indptr[i]), int(plan.indptr[i + 1]))
            x[row, plan.nodes[sl]] = plan.counts[sl]
        out[search] = {"seconds": dt, "objective": float(problem.values(x[None])[0][0])}
    return out


if __name__ == "__main__":
    print(objectives())
