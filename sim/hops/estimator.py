"""Hops' three-layer throughput estimator (algorithms.md §4.3; Hops §3.3, §3.5).

A job's speed on a server is a factor on the throughput oracle's type-level rate (the public
Gavel-style table the policy may read).  The factor is looked up top-down:

1. **server entity**: the mean of the factors observed for (job, server),
2. **GPU type**: the mean of the factors observed for (job, type),
3. **theoretical**: the profile's iteration-time model -- Hops eq.1 with the profiled overlap
   pattern, and eq.3-4's mixture of cache hits and loads, fitted to the profiled data times
   (:func:`mixture_factor`); 1 before the job is profiled.

Layers 1 and 2 keep one table for every GPU count (a server's factor does not depend on the count
in our truth, sim/hops/servers.py; the paper keeps aggregated and distributed tables apart).  A
distributed run's observed factor is that of its slowest server; it is recorded as one
observation of each of its servers (our choice [I]; it under-states the faster ones until they
run alone).
"""
from __future__ import annotations

import numpy as np

from ..calibration.models import hops_iter_time
from .servers import R_B

__all__ = ["ThroughputEstimator", "mixture_factor"]


def mixture_factor(data: np.ndarray, iters: np.ndarray, pattern: int) -> float:
    """Theoretical-layer factor of one profiling run: split the data-time samples into cache hits
    and loads at the midpoint of their range, take each branch's mean and share (eq.3), evaluate
    eq.1 per branch and weight them (eq.4).  The compute time is the profiled iteration time less
    the exposed data time; the factor is 1 / (E[T_iter] * the profiled server's slowness)."""
    data, iters = np.asarray(data, float), np.asarray(iters, float)
    cut = 0.5 * (data.min() + data.max())
    hit = data <= cut
    p = hit.mean()
    mu = np.array([data[hit].mean(), data[~hit].mean() if (~hit).any() else 0.0])
    branch = _branch_time(mu, pattern)
    expected = p * branch[0] + (1 - p) * branch[1]
    # the profiled server's slowness: measured over modelled iteration time at the measured data
    slowness = float(np.median(iters / _branch_time(data, pattern)))
    return float(1.0 / (expected * slowness))


def _branch_time(data: np.ndarray, pattern: int) -> np.ndarray:
    th = np.zeros((data.size, 9))
    th[:, 0], th[:, 2], th[:, 4] = 1.0, R_B, data
    return hops_iter_time(th, 0.0, 1, 1, pattern=pattern)


class ThroughputEstimator:
    """Per-job speed factors on every server, learned from profiling and running observations."""

    def __init__(self, n_jobs: int, node_type: np.ndarray, n_types: int):
        n = node_type.shape[0]
        self.node_type = np.asarray(node_type, np.int64)
        self.n_types = n_types
        self.srv_sum, self.srv_cnt = np.zeros((n_jobs, n)), np.zeros((n_jobs, n), np.int64)
        self.typ_sum, self.typ_cnt = np.zeros((n_jobs, n_types)), np.zeros((n_jobs, n_types), np.int64)
        self.theory = np.ones((n_jobs, n_types))
        self.profiled = np.zeros(n_jobs, np.bool_)

    def record(self, job: int, nodes: np.ndarray, factor: float) -> None:
        """One observed factor of ``job`` run on ``nodes`` (layers 1 and 2)."""
        nodes = np.unique(np.asarray(nodes, np.int64))
        self.srv_sum[job, nodes] += factor
        self.srv_cnt[job, nodes] += 1
        types = np.unique(self.node_type[nodes])
        self.typ_sum[job, types] += factor
        self.typ_cnt[job, types] += 1

    def record_profile(self, job: int, node: int, prof: dict) -> None:
        """A profiling run on one server of a type: layer 3 for that type, layer 1 for the server
        (layer 2 fills from running observations only)."""
        t = int(self.node_type[node])
        self.theory[job, t] = mixture_factor(prof["data"], prof["iter"], prof["pattern"])
        self.srv_sum[job, node] += 1.0 / np.mean(prof["iter"])
        self.srv_cnt[job, node] += 1

    def factors(self, jobs: np.ndarray) -> np.ndarray:
        """float64 [len(jobs), n_nodes]: layer 1 where observed, else layer 2, else layer 3."""
        jobs = np.asarray(jobs, np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            srv = self.srv_sum[jobs] / self.srv_cnt[jobs]
            typ = (self.typ_sum[jobs] / self.typ_cnt[jobs])[:, self.node_type]
        theory = self.theory[jobs][:, self.node_type]
        return np.where(self.srv_cnt[jobs] > 0, srv, np.where(self.typ_cnt[jobs][:, self.node_type] > 0,
                                                                typ, theory))
