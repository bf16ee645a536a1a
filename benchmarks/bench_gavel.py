"""asv: Gavel's policies (docs/gavel.md, "Speed").

* ``GavelTrace``: a whole run of a ``gavel-*`` policy (or ``themis``) on 500 Gavel-generated
  jobs (3 jobs/h, seed 0, Gavel's multi-GPU mix) on ``gavel-108``; Gavel's own simulator takes
  about 9-30 CPU-s on a trace like it (scalability/gavel_speed.py, scalability/results/
  gavel_speed/), the issue's yardstick 15-80 CPU-s.
  ``path``: ``native`` (the default engine: a Gavel round policy's rounds decided in C between
  its resets, sim.native_rounds) or ``python`` (``EngineConfig(native=False)``, the same runs
  job for job) side by side.
  ``gavel-gandiva`` packs there (jobs ask for more than the 108 GPUs): its rounds run over
  job combinations, O(jobs^2) (sim/policies/gavel_packing.py).
* ``GavelLargeTrace``: ``gavel-max-min-fairness-perf`` on 4,740 generated jobs at 28 jobs/h on
  1,024 one-GPU servers (344:340:340), Gavel's simulator setting for its 4,740-job trace
  (about 100 CPU-s in Gavel's simulator; the issue's 204).  One run per measurement.
* ``GavelLP``: one heterogeneity-aware max-min LP with 2,000 active jobs on 1,024 8-GPU
  servers (issue 11 target: <= 1 s), and a whole finish-time-fairness bisection on it, with
  our structured interior point (the default) and HiGHS's IPM side by side.
* ``GavelRoundKernel``: one round's kernel (priorities, per-type queues, greedy pick, worker
  assignment; ``gavel_kernels.round_plan``) with 300 or 2,000 active jobs on 1,024 one-GPU
  servers of three types, half the jobs holding last round's GPUs.
* ``GavelRescueLU``: one factorization of the augmented system ``[0 G'; -G W^2]`` that
  ``gavel_hsd``'s rescue factors each iteration (a max-sum LP, 45 jobs on three types: 318
  unknowns), by ``sparse_lu`` (the default) and by the dense loop it reproduces bit for bit
  (``gavel_ipm._lu``), ten factorizations a measurement inside Numba.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, simulate
from sim.policies import get_policy
from sim.policies import gavel_hsd, sparse_lu
from sim.policies.gavel_ipm import _lu
from sim.policies.gavel_kernels import round_plan
from sim.policies.gavel_lp import (AllocationLP, finish_time_fair_allocation, isolated_allocation,
                                   proportional_allocation)
from sim.presets import load_cluster
from sim.throughput import default_oracle
from sim.workload import generate_workload


def _warm_up(cluster, policy, oracle, config):
    """Imports done and Numba kernels compiled before timing."""
    warm = generate_workload(10, 3.0, 1, throughput=oracle)
    simulate(cluster, warm, get_policy(policy), oracle, config)


class GavelTrace:
    timeout = 600
    params = [["gavel-max-min-fairness-perf", "gavel-max-min-fairness",
               "gavel-finish-time-fairness-perf", "gavel-min-total-duration-perf",
               "gavel-max-sum-throughput-perf", "gavel-fifo-perf", "gavel-gandiva", "themis"],
              ["native", "python"]]
    param_names = ["policy", "path"]

    def setup(self, policy, path):
        self.oracle = default_oracle()
        self.cluster = load_cluster("gavel-108")
        self.jobs = generate_workload(500, 3.0, 0, throughput=self.oracle, runnable_only=False)
        self.config = EngineConfig(restart_delay_s=0.0, native=path == "native")
        _warm_up(self.cluster, policy, self.oracle, self.config)

    def time_run(self, policy, path):
        simulate(self.cluster, self.jobs, get_policy(policy), self.oracle, self.config)


class GavelLargeTrace:
    timeout = 900
    number = 1
    repeat = 1
    rounds = 1
    warmup_time = 0.0

    def setup(self):
        self.oracle = default_oracle()
        self.cluster = cluster_from_groups("gavel-1024-1gpu", [
            {"count": n, "gpus": 1, "type": t, "name_prefix": f"{t}-"}
            for n, t in ((344, "v100"), (340, "p100"), (340, "k80"))])
        self.jobs = generate_workload(4740, 28.0, 0, throughput=self.oracle, runnable_only=False)
        self.config = EngineConfig(restart_delay_s=0.0)
        _warm_up(self.cluster, "gavel-max-min-fairness-perf", self.oracle, self.config)

    def time_max_min_fairness_perf(self):
        simulate(self.cluster, self.jobs, get_policy("gavel-max-min-fairness-perf"), self.oracle,
                 self.config)


class GavelLP:
    timeout = 120
    params = [["structured-fast", "structured", "mehrotra", "ipm"]]
    param_names = ["solver"]

    def setup(self, solver):
        rng = np.random.default_rng(0)
        n = 2000
        self.capacity = np.full(3, 1024 * 8 // 3, float)
        self.scale = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05]).astype(float)
        self.thr = rng.uniform(0.5, 4.0, (n, 3)) * np.array([3.0, 2.0, 1.0])
        prop = np.sum(self.thr * proportional_allocation(n, self.capacity), axis=1)
        self.a = self.thr * (self.scale / prop)[:, None]
        # finish-time fairness: time since arrival, remaining work, and the isolated finish
        # time as the policy computes it (past isolated time + remaining at the isolated rate)
        self.since = rng.uniform(0.0, 3600.0, n)
        self.remaining = rng.uniform(1e3, 1e6, n)
        iso = np.sum(self.thr * isolated_allocation(self.scale, self.capacity), axis=1)
        self.isolated = 0.5 * self.since + self.remaining / iso

        AllocationLP(self.scale[:10], self.capacity, solver).max_min(self.a[:10])  # compiled

    def time_max_min_2000_jobs(self, solver):
        AllocationLP(self.scale, self.capacity, solver).max_min(self.a)

    def time_finish_time_fairness_2000_jobs(self, solver):
        finish_time_fair_allocation(AllocationLP(self.scale, self.capacity, solver), self.thr,
                                    self.since, self.remaining, self.isolated, 1e-4)


class GavelRoundKernel:
    params = [[300, 2000]]
    param_names = ["jobs"]

    def setup(self, n):
        rng = np.random.default_rng(0)
        m, nodes = 3, 1024
        self.node_type = np.repeat(np.arange(m, dtype=np.int32), [344, 340, 340])
        self.node_gpus = np.ones(nodes, np.int32)
        self.scale = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05]).astype(np.int32)
        self.thr = rng.uniform(0.5, 4.0, (n, m)) * np.array([3.0, 2.0, 1.0])
        x = rng.uniform(0.0, 1.0, (n, m))
        self.alloc = x / x.sum(axis=1, keepdims=True) * rng.uniform(0.1, 1.0, (n, 1))
        self.deficit = rng.normal(0.0, 100.0, (n, m))
        self.time_so_far = rng.uniform(180.0, 5000.0, (n, m))
        self.worker_time = self.time_so_far.sum(axis=0)
        self.ids = np.arange(n, dtype=np.int64)
        self.in_alloc = np.ones(n, np.bool_)
        self.left = np.bincount(self.node_type, weights=self.node_gpus, minlength=m)
        # last round's placement: every other job on consecutive servers of one type
        owner, node = [], 0
        for j in range(0, n, 2):
            if node + self.scale[j] > nodes:
                break
            owner += [j] * int(self.scale[j])
            node += int(self.scale[j])
        self.pl_nodes = np.arange(len(owner), dtype=np.int32)
        self.pl_counts = np.ones(len(owner), np.int32)
        self.pl_indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(np.array(owner, np.int64), minlength=n), out=self.pl_indptr[1:])
        self.time_round(n)                                   # compiled

    def time_round(self, n):
        round_plan(self.ids, self.thr, self.alloc, self.deficit, self.time_so_far, self.in_alloc,
                   self.worker_time, [0, 1, 2], self.scale, self.left, False, self.pl_indptr,
                   self.pl_nodes, self.pl_counts, self.node_type, self.node_gpus, "bench")


@njit
def _factor_sparse(indptr, indices, data, work, factors, reps):
    for _ in range(reps):
        sparse_lu.factor(indptr, indices, data, work, factors)


@njit
def _factor_dense(K, reps):
    for _ in range(reps):
        _lu(K.copy())


class GavelRescueLU:
    params = [["sparse", "dense"]]
    param_names = ["lu"]

    def setup(self, lu):
        rng = np.random.default_rng(0)
        n, m = 45, 3
        scale = rng.choice([1.0, 2.0, 4.0, 8.0], size=n, p=[0.7, 0.1, 0.15, 0.05])
        E = gavel_hsd._equilibrate(scale, np.zeros((n, m)), 0.0, False, False)[0]
        self.D = gavel_hsd._augmented_buffers(E, True)
        indptr, indices, data, slot = self.D[:4]
        data[slot] = 10.0 ** rng.uniform(-4, 4, slot.shape[0])     # W^2 late in a solve
        size = indptr.shape[0] - 1
        self.K = np.zeros((size, size))
        for r in range(size):
            self.K[r, indices[indptr[r]:indptr[r + 1]]] = data[indptr[r]:indptr[r + 1]]
        self.time_factor(lu)                                      # compiled

    def time_factor(self, lu):
        if lu == "sparse":
            _factor_sparse(*self.D[:3], *self.D[4:], 10)
        else:
            _factor_dense(self.K, 10)
