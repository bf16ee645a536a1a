"""asv: Gavel's policies (docs/gavel.md, "Speed").

* ``GavelTrace``: a whole run of a ``gavel-*`` policy (or ``themis``) on 500 Gavel-generated
  jobs (3 jobs/h, seed 0, Gavel's multi-GPU mix) on ``gavel-108``; Gavel's own simulator takes
  about 9-10 CPU-s on a trace like it (scalability/gavel_speed.py), the issue's yardstick
  15-80 CPU-s.
* ``GavelLP``: one heterogeneity-aware max-min LP with 2,000 active jobs on 1,024 8-GPU
  servers (issue 11 target: <= 1 s).
"""
from __future__ import annotations

import numpy as np

from sim.engine import EngineConfig, simulate
from sim.policies import get_policy
from sim.policies.gavel_lp import AllocationLP, proportional_allocation
from sim.presets import load_cluster
from sim.throughput import default_oracle
from sim.workload import generate_workload


class GavelTrace:
    timeout = 600
    params = [["gavel-max-min-fairness-perf", "gavel-finish-time-fairness-perf", "gavel-fifo-perf",
               "themis"]]
    param_names = ["policy"]

    def setup(self, policy):
        self.oracle = default_oracle()
        self.cluster = load_cluster("gavel-108")
        self.jobs = generate_workload(500, 3.0, 0, throughput=self.oracle, runnable_only=False)
        self.config = EngineConfig(restart_delay_s=0.0)
        warm = generate_workload(10, 3.0, 1, throughput=self.oracle)
        simulate(self.cluster, warm, get_policy(policy), self.oracle, self.config)

    def time_run(self, policy):
        simulate(self.cluster, self.jobs, get_policy(policy), self.oracle, self.config)


class GavelLP:
    timeout = 120

    def setup(self):
        rng = np.random.default_rng(0)
        n = 2000
        self.capacity = np.full(3, 1024 * 8 // 3, float)
        self.scale = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05]).astype(float)
        thr = rng.uniform(0.5, 4.0, (n, 3)) * np.array([3.0, 2.0, 1.0])
        prop = np.sum(thr * proportional_allocation(n, self.capacity), axis=1)
        self.a = thr * (self.scale / prop)[:, None]

    def time_max_min_2000_jobs(self):
        AllocationLP(self.scale, self.capacity).max_min(self.a)
