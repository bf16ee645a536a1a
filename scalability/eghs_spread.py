"""Where a policy's GPU-time goes in the EGHS experiment: per model, the GPU-hours of placed
jobs, the share of them on jobs spread over more nodes than their GPUs need (``nodes >
ceil(GPUs / 8)``), the share on more than one node, and the mean server speed, integrated over
the intervals between decisions (docs/eghs.md section 4: the twin's fragmentation against
Pollux).  Usage::

    python scalability/eghs_spread.py contended 64 0 twin pollux-dp
"""
from __future__ import annotations

import sys

import numpy as np

import eghs_experiment as E
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.learning.workload import learning_world
from sim.policies import get_policy
from sim.throughput import TableThroughput


class PlanLog:
    """Wraps a policy; records (time, active jobs, GPUs, nodes, speed-weighted GPUs) per plan."""

    def __init__(self, policy, cluster):
        self.policy, self.cluster, self.log = policy, cluster, []

    def __getattr__(self, item):
        return getattr(self.policy, item)

    def schedule(self, state):
        plan = self.policy.schedule(state)
        lens = np.diff(plan.indptr)
        owner = np.repeat(np.arange(lens.size), lens)
        gpus = np.bincount(owner, weights=plan.counts, minlength=lens.size)
        speed = np.bincount(owner, weights=self.cluster.node_speed[plan.nodes] * plan.counts,
                            minlength=lens.size)
        self.log.append((state.now, state.active.copy(), gpus, lens, speed))
        return plan


def spread_report(workload: str, nodes: int, seed: int, variant: str) -> list[str]:
    oracle = TableThroughput.builtin()
    jpn, load = E.WORKLOADS[workload][nodes]
    wl = E.make_workload(nodes, seed, jpn, load, E.DURATION_SCALE, oracle)
    jobs, cluster = job_specs(wl, oracle), E.make_cluster(nodes)
    name, params, _ = E.VARIANTS[variant]
    rec = PlanLog(get_policy(name, **params), cluster)
    res = run_jobs(cluster, jobs, rec, oracle, EngineConfig(round_s=60.0), job_ids=wl.job_id,
                   learning=learning_world(wl, oracle, seed, None))
    ends = [t for t, *_ in rec.log[1:]] + [float(np.max(res.finish))]
    per_node = int(cluster.node_gpus.max())
    acc = np.zeros((len(oracle.models), 4))
    for (t, active, gpus, n_nodes, speed), end in zip(rec.log, ends):
        on = gpus > 0
        model = jobs.model[active]
        over = n_nodes > np.ceil(gpus / per_node)
        for col, w in enumerate((gpus, gpus * over, gpus * (n_nodes > 1), speed)):
            acc[:, col] += (end - t) * np.bincount(model[on], weights=w[on], minlength=len(oracle.models))
    lines = [f"== {variant}: avg JCT {np.mean(res.finish - jobs.arrival):.0f} s, "
             f"{res.gpu_seconds.sum() / 3600:.0f} GPU-hours"]
    for m, (g, over, multi, speed) in enumerate(acc):
        if g > 0:
            lines.append(f"  {oracle.models[m]:>28s} GPU-h {g / 3600:6.0f}  spread beyond need "
                         f"{over / g:6.1%}  multi-node {multi / g:6.1%}  mean speed {speed / g:.3f}")
    return lines


def main(argv: list[str]) -> int:
    workload, nodes, seed, *variants = argv
    for v in variants:
        print("\n".join(spread_report(workload, int(nodes), int(seed), v)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
