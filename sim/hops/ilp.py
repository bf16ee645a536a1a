"""Hops' prior-weighted ILP (algorithms.md §4.8; Hops eq.11-13) on HiGHS (scipy.optimize.milp).

    max  sum_ij (prior_i + bias)^lambda * G_ij * X_ij
    s.t. sum_j X_ij <= 1                      for every job i
         sum_ij X_ij * Consume_ijt <= S_t     for every server t,   X_ij in {0, 1}

``G_ij`` = throughput of config j / the smallest throughput among job i's configs (Sia's
normalization); ``bias = |min prior| + 0.01`` when some priority is <= 0, else 0.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import csr_matrix, vstack

from .configs import Configs

__all__ = ["prior_weights", "gain", "solve_ilp", "DEFAULT_MIP_GAP"]

#: relative MIP gap (algorithms.md §4.8: 0.01, following the paper's Fig.14)
DEFAULT_MIP_GAP = 0.01


def prior_weights(prior: np.ndarray, lam: float = 1.0) -> np.ndarray:
    """``(prior + bias) ** lambda`` with Hops' bias."""
    prior = np.asarray(prior, float)
    bias = 0.0 if prior.size == 0 or prior.min() > 0 else abs(prior.min()) + 0.01
    return (prior + bias) ** float(lam)


def gain(job: np.ndarray, thr: np.ndarray, n_jobs: int) -> np.ndarray:
    """G per config: its throughput over the smallest positive one of the same job."""
    low = np.full(n_jobs, np.inf)
    pos = thr > 0
    np.minimum.at(low, job[pos], thr[pos])
    return np.where(pos, thr / low[job], 0.0)


def solve_ilp(cfg: Configs, weight_gain: np.ndarray, n_jobs: int, capacity: np.ndarray,
              mip_rel_gap: float = DEFAULT_MIP_GAP, time_limit_s: float | None = None) -> np.ndarray:
    """Chosen config index per job (-1: none), maximizing ``sum weight_gain * X`` under the
    one-config-per-job and per-server capacity constraints."""
    m = cfg.job.shape[0]
    choice = np.full(n_jobs, -1, np.int64)
    if m == 0:
        return choice
    lens = np.diff(cfg.indptr)
    one = csr_matrix((np.ones(m), (cfg.job, np.arange(m))), shape=(n_jobs, m))
    cons = csr_matrix((cfg.counts.astype(float), (cfg.nodes, np.repeat(np.arange(m), lens))),
                      shape=(capacity.shape[0], m))
    a = vstack([one, cons]).tocsr()
    ub = np.concatenate([np.ones(n_jobs), np.asarray(capacity, float)])
    opts = {"mip_rel_gap": float(mip_rel_gap), "disp": False}
    if time_limit_s is not None:
        opts["time_limit"] = float(time_limit_s)
    res = milp(-np.asarray(weight_gain, float), constraints=LinearConstraint(a, -np.inf, ub),
               integrality=np.ones(m), bounds=(0, 1), options=opts)
    if res.x is None:
        return choice
    on = np.flatnonzero(res.x > 0.5)
    choice[cfg.job[on]] = on
    return choice
