"""Gavel's allocation problems (algorithms.md §5.7; Narayanan et al., OSDI'20), on HiGHS.

``X[i, t]`` is the fraction of wall-clock time job i spends on GPU type t.  Every problem
shares Gavel's base constraints (gavel ``scheduler/policies/policy.py``)::

    X >= 0,    sum_t X[i, t] <= 1,    sum_i s_i X[i, t] <= N_t

with ``s_i`` the scale factor (GPUs the job asks for) and ``N_t`` the GPUs of type t.
:class:`AllocationLP` builds that matrix once per job set in sparse form (scipy.sparse) and
re-solves it with different objective rows; nothing here loops over jobs in Python.

Solver: HiGHS through ``scipy.optimize.linprog``.  ``solver="ipm"`` (the default) is HiGHS's
interior-point method without crossover and without presolve: like Gavel's ECOS (also an
interior-point method) it returns a point near the analytic centre of the optimal face, which
matters because max-min and max-sum problems have many optima and the round mechanism turns
whichever one is returned into priorities.  ``solver="simplex"`` returns a vertex instead
(faster, different ties).
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse
from scipy.optimize import OptimizeWarning, linprog

from ..errors import ConfigError, SimError

#: HiGHS method and options per solver name (see the module docstring)
SOLVERS = {
    "ipm": ("highs-ipm", {"presolve": False, "run_crossover": "off"}),
    "simplex": ("highs-ds", {}),
}

#: Gavel's bisection bracket for the makespan T (s) and its stopping ratio
#: (``min_total_duration.py``: ``max_T = 1e6``, ``min_T = 100``, ``1.05 * min_T < max_T``)
MAKESPAN_BRACKET_S = (100.0, 1.0e6)
MAKESPAN_RATIO = 1.05


def check_solver(solver: str) -> str:
    if solver not in SOLVERS:
        raise ConfigError(f"unknown LP solver {solver!r}; choose from {sorted(SOLVERS)}")
    return solver


class AllocationLP:
    """Gavel's base constraints for one job set, built once, solved many times.

    Args:
        scale: int [n] scale factors (GPUs per job).
        capacity: int [m] GPUs of each type.
        solver: a key of :data:`SOLVERS`.

    Variables are ``X`` flattened row-major (n*m), then one auxiliary ``z`` (max-min).
    """

    def __init__(self, scale: np.ndarray, capacity: np.ndarray, solver: str = "ipm"):
        self.scale = np.asarray(scale, float)
        self.capacity = np.asarray(capacity, float)
        self.n, self.m = self.scale.shape[0], self.capacity.shape[0]
        self.method, self.options = SOLVERS[check_solver(solver)]
        n, m, nm = self.n, self.m, self.n * self.m
        cols = np.arange(nm)
        job = cols // m
        cap_rows = sparse.csr_array((self.scale[job], (cols % m, cols)), shape=(m, nm + 1))
        job_rows = sparse.csr_array((np.ones(nm), (job, cols)), shape=(n, nm + 1))
        self.base = sparse.vstack([cap_rows, job_rows], format="csr")
        self.base_rhs = np.concatenate([self.capacity, np.ones(n)])
        # rows i of "z - sum_t a[i, t] X[i, t] <= 0": fixed structure, data set per solve
        self._row_indptr = np.arange(n + 1) * (m + 1)
        self._row_indices = np.column_stack([cols.reshape(n, m), np.full(n, nm)]).ravel()
        self.bounds = np.column_stack([np.zeros(nm + 1), np.r_[np.ones(nm), np.inf]])

    # -- pieces --------------------------------------------------------------
    def _rows(self, a: np.ndarray, z_coef: float) -> sparse.csr_array:
        """Row i: ``z_coef * z - sum_t a[i, t] X[i, t]``."""
        data = np.column_stack([-np.asarray(a, float), np.full(self.n, z_coef)]).ravel()
        return sparse.csr_array((data, self._row_indices, self._row_indptr),
                                shape=(self.n, self.n * self.m + 1))

    def _solve(self, c: np.ndarray, rows=None, rhs=None):
        A, b = self.base, self.base_rhs
        if rows is not None:
            A, b = sparse.vstack([A, rows], format="csr"), np.concatenate([b, rhs])
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
            res = linprog(c, A_ub=A, b_ub=b, bounds=self.bounds, method=self.method,
                          options=self.options)
        return res

    def _x(self, res) -> np.ndarray:
        return np.clip(res.x[: self.n * self.m].reshape(self.n, self.m), 0.0, 1.0)

    # -- problems ------------------------------------------------------------
    def max_min(self, a: np.ndarray) -> tuple[np.ndarray, float]:
        """``max_X min_i sum_t a[i, t] X[i, t]``; returns (X, optimum)."""
        if self.n == 0:
            return np.zeros((0, self.m)), 0.0
        c = np.zeros(self.n * self.m + 1)
        c[-1] = -1.0
        res = self._solve(c, self._rows(a, 1.0), np.zeros(self.n))
        if res.status != 0:
            raise SimError(f"Gavel max-min LP failed ({res.message}) for {self.n} jobs")
        return self._x(res), float(res.x[-1])

    def max_sum(self, a: np.ndarray) -> np.ndarray:
        """``max_X sum_{i,t} a[i, t] X[i, t]``."""
        c = np.r_[-np.asarray(a, float).ravel(), 0.0]
        res = self._solve(c)
        if res.status != 0:
            raise SimError(f"Gavel max-sum LP failed ({res.message}) for {self.n} jobs")
        return self._x(res)

    def feasible(self, a: np.ndarray, need: np.ndarray) -> np.ndarray | None:
        """Some X (an interior one with ``ipm``) with ``sum_t a[i, t] X[i, t] >= need[i]``,
        or None if there is none."""
        res = self._solve(np.zeros(self.n * self.m + 1), self._rows(a, 0.0), -np.asarray(need, float))
        return self._x(res) if res.status == 0 else None


# -- reference allocations (no LP) -----------------------------------------------
def proportional_allocation(n: int, capacity: np.ndarray) -> np.ndarray:
    """Gavel's ``proportional.py``: ``X[i, t] = N_t / n``, scaled so the largest row sums to 1."""
    x = np.tile(np.asarray(capacity, float) / max(n, 1), (n, 1))
    return x / x.sum(axis=1).max() if n else x


def isolated_allocation(scale: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Gavel's ``isolated.py``: ``X[i, t] = N_t / (n s_i)``, rows above 1 scaled down to 1."""
    n = scale.shape[0]
    x = np.asarray(capacity, float)[None, :] / max(n, 1) / np.asarray(scale, float)[:, None]
    return x / np.maximum(x.sum(axis=1), 1.0)[:, None]


# -- composite problems -----------------------------------------------------------
def makespan_allocation(lp: AllocationLP, thr: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Gavel's ``MinTotalDurationPolicyWithPerf``: the bisection on the makespan T.

    Gavel re-solves a feasibility LP at every bisection step.  Feasibility at T is monotone
    (``T >= T*``), and ``T* = 1 / max_X min_i y_i(X) / r_i`` is one max-min LP, so we compute
    T* once, replay Gavel's bracket arithmetic on that predicate (the same T as Gavel's
    bisection) and solve one feasibility LP at the T it ends on."""
    z = lp.max_min(thr / remaining[:, None])[1]
    if not z > 0:
        raise SimError("gavel min-total-duration: some job cannot make progress on any GPU type")
    t_star = 1.0 / z
    T = _gavel_bisection(lambda t: t >= t_star)
    x = lp.feasible(thr, remaining / T)
    return x if x is not None else lp.max_min(thr / remaining[:, None])[0]


def _gavel_bisection(feasible) -> float:
    lo, hi = MAKESPAN_BRACKET_S
    last_hi, found = hi, None
    while found is None:
        while MAKESPAN_RATIO * lo < hi:
            mid = (lo + hi) / 2.0
            if feasible(mid):
                found, hi = mid, mid
            else:
                lo = mid
        lo, hi, last_hi = last_hi, last_hi * 10.0, last_hi * 10.0
    return found


def finish_time_fair_allocation(lp: AllocationLP, thr: np.ndarray, since_start: np.ndarray,
                                remaining: np.ndarray, isolated_time: np.ndarray,
                                rel_tol: float) -> np.ndarray:
    """Gavel's ``FinishTimeFairnessPolicyWithPerf``: ``min_X max_i rho_i(X)`` with
    ``rho_i = (t_i + r_i / y_i(X)) / c_i``, ``y_i = sum_t thr[i, t] X[i, t]`` and ``c_i``
    the isolated finish time.

    Gavel hands the convex program to ECOS; we bisect on rho (quasi-convex): rho is
    reachable iff ``y_i >= r_i / (rho c_i - t_i)`` for all i, i.e. iff the max-min LP with
    ``a[i, t] = thr[i, t] (rho c_i - t_i) / r_i`` reaches 1.  The bracket: the lower end lets
    every job have a whole type of its best throughput, the upper end is the isolated
    allocation (feasible).  Stops when the bracket is within ``rel_tol`` of its top; returns
    the max-min solution at the top."""
    best = np.max(thr * np.minimum(1.0, lp.capacity[None, :] / lp.scale[:, None]), axis=1)
    lo = float(np.max((since_start + remaining / best) / isolated_time))
    x_iso = isolated_allocation(lp.scale, lp.capacity)
    y_iso = np.sum(thr * x_iso, axis=1)
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


def _ftf_rows(thr, rho, since_start, remaining, isolated_time) -> np.ndarray:
    slack = np.maximum(rho * isolated_time - since_start, 0.0)
    return thr * (slack / remaining)[:, None]
