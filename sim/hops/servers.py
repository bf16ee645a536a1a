"""Servers that differ: the simulated cluster's hidden truth for Hops (algorithms.md §4.3, [I]).

Each server ``n`` has a hidden speed factor ``perf_n``, and each (job, server) pair a hidden
data-loading behaviour: with probability ``p_cache`` an iteration's data time is
``N(mu_c, sigma_c)`` (cache hit), else ``N(mu_l, sigma_l)`` (load), in units of the job's compute
time per iteration (Hops eq.3).  A job's iteration time on a server follows Hops eq.1 with its
overlap pattern (1: data overlaps backward; 2: no overlap), computed by
:func:`sim.calibration.models.hops_iter_time` with the compute time normalized to 1; the true
rate of a placement is the oracle's type-level rate times the smallest factor
``perf_n / E[T_iter]`` (eq.4) over its servers (the slowest worker dominates).

Policies never read this object.  The engine applies :meth:`ServerTruth.factors` to every rate
(``sim.engine.run_jobs(truth=...)``), and a policy sees only :class:`Monitor` through
``SchedState.monitor``: noisy measurements of iterations it ran (Hops' running-mode profiler).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..calibration.models import hops_iter_time
from ..cluster import Cluster
from ..errors import ConfigError
from ..presets import HOPS_RTX3090_SPEED, HOPS_SERVER_PREFIX

__all__ = ["LoadingLaw", "ServerTruth", "Monitor", "hidden_server_speeds"]

#: share of the compute time in the backward pass (T_b = R_B * (T_f + T_b)), our choice [I]
R_B = 2.0 / 3.0


def hidden_server_speeds(cluster: Cluster) -> np.ndarray:
    """float64 [n_nodes]: each server model's hidden factor (:data:`HOPS_RTX3090_SPEED`, found by
    node-name prefix, :data:`HOPS_SERVER_PREFIX`), times the visible ``node_speed``."""
    names = np.asarray(cluster.node_names or [""] * cluster.n_nodes, dtype=object)
    speed = np.asarray(cluster.node_speed, float).copy()
    for kind, prefix in HOPS_SERVER_PREFIX.items():
        speed[np.char.startswith(names.astype(str), prefix)] *= HOPS_RTX3090_SPEED[kind]
    return speed


@dataclass(frozen=True)
class LoadingLaw:
    """How hidden data-loading behaviours are drawn (all times in units of compute time).

    unstable_fraction: share of jobs with unstable loading (Hops Fig.7: wav2vec, GPT-2 style).
    stable_p_cache: (low, high) of a stable job's per-server cache-hit probability.
    unstable_p_cache: the same for an unstable job.
    mu_cache: mean data time on a cache hit; sigma_cache its standard deviation.
    stable_mu_load, unstable_mu_load: (low, high) of the per-server mean data time on a miss.
    load_cv: sigma_l / mu_l.
    pattern1_fraction: share of jobs whose loading overlaps the backward pass (pattern 1).
    speed_jitter: log-normal sigma of a per-server jitter on top of the server model's factor.
    """

    unstable_fraction: float = 0.3
    stable_p_cache: tuple[float, float] = (0.9, 1.0)
    unstable_p_cache: tuple[float, float] = (0.2, 0.8)
    mu_cache: float = 0.05
    sigma_cache: float = 0.01
    stable_mu_load: tuple[float, float] = (0.1, 0.4)
    unstable_mu_load: tuple[float, float] = (0.5, 1.5)
    load_cv: float = 0.5
    pattern1_fraction: float = 0.5
    speed_jitter: float = 0.03

    def __post_init__(self):
        if not 0.0 <= self.unstable_fraction <= 1.0 or not 0.0 <= self.pattern1_fraction <= 1.0:
            raise ConfigError("LoadingLaw: fractions must be in [0, 1]")


def _iter_time(data: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """Normalized iteration time (compute 1, single GPU) for data times ``data`` (Hops eq.1)."""
    th = np.zeros(data.shape + (9,))
    th[..., 0], th[..., 2], th[..., 4] = 1.0, R_B, np.maximum(data, 0.0)
    return hops_iter_time(th, 0.0, 1, 1, pattern=pattern)


class ServerTruth:
    """The hidden per-server speeds and per-(job, server) loading of one run (see module doc)."""

    def __init__(self, cluster: Cluster, n_jobs: int, seed: int = 0,
                 law: LoadingLaw = LoadingLaw(), speed: np.ndarray | None = None):
        rng = np.random.Generator(np.random.PCG64(seed))
        n = cluster.n_nodes
        base = hidden_server_speeds(cluster) if speed is None else np.asarray(speed, float)
        self.perf = base * np.exp(law.speed_jitter * rng.standard_normal(n))
        self.unstable = rng.random(n_jobs) < law.unstable_fraction
        self.pattern = np.where(rng.random(n_jobs) < law.pattern1_fraction, 1, 2)
        lo_p = np.where(self.unstable, law.unstable_p_cache[0], law.stable_p_cache[0])[:, None]
        hi_p = np.where(self.unstable, law.unstable_p_cache[1], law.stable_p_cache[1])[:, None]
        self.p_cache = lo_p + (hi_p - lo_p) * rng.random((n_jobs, n))
        lo_l = np.where(self.unstable, law.unstable_mu_load[0], law.stable_mu_load[0])[:, None]
        hi_l = np.where(self.unstable, law.unstable_mu_load[1], law.stable_mu_load[1])[:, None]
        self.mu_load = lo_l + (hi_l - lo_l) * rng.random((n_jobs, n))
        self.law = law
        self.rng = np.random.Generator(np.random.PCG64(seed + 1))
        pat = self.pattern[:, None]
        t_hit = _iter_time(np.full((n_jobs, n), law.mu_cache), pat)
        t_miss = _iter_time(self.mu_load, pat)
        #: true factor [n_jobs, n_nodes] = perf_n / E[T_iter] (eq.4)
        self.factor = self.perf[None, :] / (self.p_cache * t_hit + (1 - self.p_cache) * t_miss)

    def factors(self, ids: np.ndarray, indptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Per job ``ids[i]`` on the servers ``nodes[indptr[i]:indptr[i+1]]``: the smallest true
        factor (1 for an empty placement)."""
        ids, indptr = np.asarray(ids, np.int64), np.asarray(indptr, np.int64)
        lens = np.diff(indptr)
        out = np.ones(ids.shape[0])
        if nodes.size:
            vals = self.factor[np.repeat(ids, lens), np.asarray(nodes, np.int64)]
            on = lens > 0
            out[on] = np.minimum.reduceat(vals, indptr[:-1][on])
        return out

    def sample(self, job: int, node: int, n_iter: int) -> tuple[np.ndarray, np.ndarray]:
        """``n_iter`` iterations of ``job`` on ``node``: (data times, iteration times), both in
        units of the job's compute time on a nominal server of that type."""
        law, rng = self.law, self.rng
        hit = rng.random(n_iter) < self.p_cache[job, node]
        mu_l = self.mu_load[job, node]
        data = np.where(hit, law.mu_cache + law.sigma_cache * rng.standard_normal(n_iter),
                        mu_l + law.load_cv * mu_l * rng.standard_normal(n_iter))
        data = np.maximum(data, 0.0)
        it = _iter_time(data, np.full(n_iter, self.pattern[job])) / self.perf[node]
        return data, it

    def monitor(self) -> "Monitor":
        return Monitor(self)


class Monitor:
    """What a policy may observe: measured iterations of jobs on servers (Hops' profiler)."""

    def __init__(self, truth: ServerTruth):
        self._truth = truth

    def profile(self, job: int, node: int, n_iter: int) -> dict:
        """A profiling run: data-time samples, iteration-time samples and the overlap pattern."""
        data, it = self._truth.sample(int(job), int(node), int(n_iter))
        return {"data": data, "iter": it, "pattern": int(self._truth.pattern[int(job)])}

    def observe(self, job: int, nodes: np.ndarray, n_iter: int) -> float:
        """Observed speed factor (type-level time / measured time) of a run of ``n_iter``
        iterations on ``nodes``: the slowest server's."""
        return float(min(1.0 / self._truth.sample(int(job), int(n), int(n_iter))[1].mean()
                         for n in np.asarray(nodes).tolist()))
