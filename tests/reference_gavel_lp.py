"""Plain reference of sim/policies/gavel_lp.py's solves: the same LPs built with scipy.sparse
and handed to ``scipy.optimize.linprog`` (the code the direct HiGHS calls replaced)."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse
from scipy.optimize import OptimizeWarning, linprog

from reference_pairwise_sum import pairwise_sum_reference

METHODS = {"ipm": ("highs-ipm", {"presolve": False, "run_crossover": "off"}),
           "simplex": ("highs-ds", {})}


def _solve(scale, capacity, solver, c, a=None, z_coef=0.0, rhs=None):
    n, m = len(scale), len(capacity)
    nm = n * m
    cols = np.arange(nm)
    job = cols // m
    A = sparse.vstack([sparse.csr_array((np.asarray(scale, float)[job], (cols % m, cols)), shape=(m, nm + 1)),
                       sparse.csr_array((np.ones(nm), (job, cols)), shape=(n, nm + 1))], format="csr")
    b = np.concatenate([np.asarray(capacity, float), np.ones(n)])
    if a is not None:
        data = np.column_stack([-np.asarray(a, float), np.full(n, z_coef)]).ravel()
        indices = np.column_stack([cols.reshape(n, m), np.full(n, nm)]).ravel()
        rows = sparse.csr_array((data, indices, np.arange(n + 1) * (m + 1)), shape=(n, nm + 1))
        A, b = sparse.vstack([A, rows], format="csr"), np.concatenate([b, rhs])
    bounds = np.column_stack([np.zeros(nm + 1), np.r_[np.ones(nm), np.inf]])
    method, options = METHODS[solver]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
        return linprog(c, A_ub=A, b_ub=b, bounds=bounds, method=method, options=options)


def within_bounds_reference(x, activity, upper, col_upper, tol):
    """The numpy test ``gavel_lp.within_bounds`` replaced (linprog's acceptance test)."""
    return bool((upper - activity).min(initial=np.inf) >= -tol and x.min(initial=np.inf) >= -tol
                and (col_upper + tol - x).min(initial=np.inf) >= 0.0)


def max_min_coefficients_reference(thr, scale, weight, share):
    """``gavel_lp.max_min_coefficients`` in plain Python: the equal-split throughput summed
    in NumPy's order (tests/reference_pairwise_sum.py)."""
    n, m = len(thr), len(share)
    out = np.empty((n, m))
    for i in range(n):
        products = [np.float64(thr[i][t]) * np.float64(share[t]) for t in range(m)]
        prop = pairwise_sum_reference(products, 0, m)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.float64(scale[i]) / (np.float64(weight[i]) * np.float64(prop))
            for t in range(m):
                out[i, t] = np.float64(thr[i][t]) * f
    return out


def max_min_reference(scale, capacity, a, solver="ipm"):
    """(X, optimum) of ``max_X min_i sum_t a[i, t] X[i, t]``, or None if linprog fails."""
    n, m = a.shape
    c = np.zeros(n * m + 1)
    c[-1] = -1.0
    res = _solve(scale, capacity, solver, c, a, 1.0, np.zeros(n))
    if res.status != 0:
        return None
    return np.clip(res.x[:n * m].reshape(n, m), 0.0, 1.0), float(res.x[-1])


def max_sum_reference(scale, capacity, a, solver="ipm"):
    n, m = a.shape
    res = _solve(scale, capacity, solver, np.r_[-np.asarray(a, float).ravel(), 0.0])
    return None if res.status != 0 else np.clip(res.x[:n * m].reshape(n, m), 0.0, 1.0)


def feasible_reference(scale, capacity, a, need, solver="ipm"):
    n, m = a.shape
    res = _solve(scale, capacity, solver, np.zeros(n * m + 1), a, 0.0, -np.asarray(need, float))
    return None if res.status != 0 else np.clip(res.x[:n * m].reshape(n, m), 0.0, 1.0)


def finish_time_fair_reference(lp, thr, since_start, remaining, isolated_time, rel_tol):
    """The plain bisection on rho, one max-min solve per step (the code the bound-skipping
    bisection of ``gavel_lp.finish_time_fair_allocation`` replaced)."""
    from sim.policies.gavel_lp import _ftf_rows, isolated_allocation
    best = np.max(thr * np.minimum(1.0, lp.capacity[None, :] / lp.scale[:, None]), axis=1)
    lo = float(np.max((since_start + remaining / best) / isolated_time))
    y_iso = np.sum(thr * isolated_allocation(lp.scale, lp.capacity), axis=1)
    hi = float(np.max((since_start + remaining / y_iso) / isolated_time))
    x_hi = None
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2.0
        x, z = lp.max_min(_ftf_rows(thr, mid, since_start, remaining, isolated_time))
        if z >= 1.0:
            hi, x_hi = mid, x
        else:
            lo = mid
    if x_hi is None:
        x_hi = lp.max_min(_ftf_rows(thr, hi, since_start, remaining, isolated_time))[0]
    return x_hi
