"""The exact optimum of a small instance: a MILP on HiGHS over every node pattern of every job.

A *pattern* of job i is a vector of workers per node within the free workers, with a total in
``[kmin_i, kmax_i]`` and no worker where the job's throughput is 0.  Its cost is the job's exact
completion time under the latency model (integer shares and all), so the MILP

    min sum_{i,p} JCT_i(p) z_ip   s.t.  sum_p z_ip = 1 (each job),
                                        sum_{i,p} p[n] z_ip <= cap[n] (each node),  z binary

is the optimum over all categories and all assignments: the reference the sampling solver's gap
is measured against.  The number of patterns grows as ``prod_n (cap[n] + 1)``: only for small
clusters (``max_patterns``).
"""
from __future__ import annotations

import time

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_matrix, vstack

from ..errors import ConfigError
from ..quiet import quiet_stdout
from .instance import Instance
from .sampling import Solution, solution

__all__ = ["node_patterns", "pattern_count", "solve_exact"]

#: default bound on patterns per job (our choice: a MILP HiGHS solves in seconds)
MAX_PATTERNS = 200_000


def pattern_count(inst: Instance) -> int:
    return int(np.prod(inst.cap.astype(float) + 1.0))


def node_patterns(inst: Instance, i: int) -> np.ndarray:
    """int64 [n_patterns, N]: job i's feasible placements on the free workers."""
    dims = np.where(inst.rho[i] > 0, inst.cap, 0).astype(np.int64) + 1
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(dims))), tuple(dims)), axis=1)
    total = grid.sum(axis=1)
    return grid[(total >= inst.kmin[i]) & (total <= inst.kmax[i])].astype(np.int64)


def solve_exact(inst: Instance, max_patterns: int = MAX_PATTERNS, time_limit_s: float = 60.0,
                beta_f: float = 0.0) -> Solution | None:
    """The placement of least average JCT (HiGHS MILP); None when none exists."""
    t0 = time.perf_counter()
    if pattern_count(inst) > max_patterns:
        raise ConfigError(f"SMJP exact: {pattern_count(inst):.0f} node patterns per job exceed "
                          f"max_patterns={max_patterns} (use the sampling solver, or fewer workers)")
    pats = [node_patterns(inst, i) for i in range(inst.n_jobs)]
    costs = [inst.pattern_jct(i, p) for i, p in enumerate(pats)]
    keep = [np.isfinite(c) for c in costs]
    pats = [p[k] for p, k in zip(pats, keep)]
    costs = [c[k] for c, k in zip(costs, keep)]
    if any(p.shape[0] == 0 for p in pats):
        return None
    c = np.concatenate(costs)
    owner = np.repeat(np.arange(inst.n_jobs), [p.shape[0] for p in pats])
    allp = np.concatenate(pats)
    one = coo_matrix((np.ones(c.size), (owner, np.arange(c.size))), shape=(inst.n_jobs, c.size))
    a = vstack([one, coo_matrix(allp.T)]).tocsr()
    lb = np.concatenate([np.ones(inst.n_jobs), np.zeros(inst.cap.size)])
    ub = np.concatenate([np.ones(inst.n_jobs), inst.cap.astype(float)])
    scale = max(float(np.abs(c).max()), 1e-300)
    with quiet_stdout():
        res = milp(c / scale, constraints=LinearConstraint(a, lb, ub), integrality=np.ones(c.size),
                   bounds=(0, 1), options={"time_limit": float(time_limit_s), "mip_rel_gap": 1e-9})
    if res.x is None:
        return None
    chosen = np.flatnonzero(res.x > 0.5)
    x = np.zeros(inst.rho.shape, np.int64)
    x[owner[chosen]] = allp[chosen]
    return solution(inst, x, beta_f, 1, time.perf_counter() - t0)
