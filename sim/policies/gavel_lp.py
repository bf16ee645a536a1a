"""Gavel's allocation problems (algorithms.md §5.7; Narayanan et al., OSDI'20): our structured
interior point (:mod:`sim.policies.gavel_ipm`) or HiGHS.

``X[i, t]`` is the fraction of wall-clock time job i spends on GPU type t.  Every problem
shares Gavel's base constraints (gavel ``scheduler/policies/policy.py``)::

    X >= 0,    sum_t X[i, t] <= 1,    sum_i s_i X[i, t] <= N_t

with ``s_i`` the scale factor (GPUs the job asks for) and ``N_t`` the GPUs of type t.
:class:`AllocationLP` builds that matrix once per job set in sparse column-wise (CSC) form and
re-solves it with different objective rows; nothing here loops over jobs in Python.

Solvers (``solver=``; docs/gavel.md, "Solver"): ``"structured"`` follows
ECOS's published method on the rows cvxpy hands ECOS (:mod:`sim.policies.gavel_hsd`), which
lands on the points Gavel's runs use; what it cannot finish goes to our Mehrotra
interior point for exactly these LPs (:mod:`sim.policies.gavel_ipm`), then to HiGHS's IPM.
``"structured-fast"`` (the default) is the same path, except that a solve ending close to
optimal (ECOS's reduced-accuracy tolerances met where a step fails) is taken there instead of
being rerun on the augmented system to full accuracy (:func:`sim.policies.gavel_hsd.solve`'s
``rerun_inaccurate``): faster where such solves are many (Gavel's max-sum: 16 of t500's 309
LPs), the same runs elsewhere on Gavel's traces (docs/gavel.md, "Solver").  ``"mehrotra"`` is that interior point alone (then HiGHS's IPM): the default before ECOS's
path, kept so that numbers measured with it can be reproduced.  ``"ipm"`` is HiGHS's interior-point
method without crossover and without presolve, called directly (the HiGHS build that scipy's
``linprog(method="highs-*")`` wraps, ``scipy.optimize._highspy``, or the ``highspy`` package
where scipy has none; with neither, scipy before 1.15, ``linprog`` itself:
:func:`highs_backend`), with the options ``linprog`` sets and the constraint matrix in the
same column-wise (CSC) layout, so the solutions are those ``linprog`` returns, without its
per-call option checks, matrix conversions and per-column dual bookkeeping.  Like Gavel's
ECOS, both interior-point methods return a point inside the optimal face, which matters
because max-min and max-sum problems have many optima and the round mechanism turns
whichever one is returned into priorities.  ``"simplex"`` returns a vertex instead (HiGHS's
dual simplex; different ties).
"""
from __future__ import annotations

import functools
import importlib

import numpy as np
from numba import njit

from ..errors import ConfigError, SimError
from ..pairwise_sum import pairwise_sum
from . import gavel_hsd, gavel_ipm

#: HiGHS options per solver name (see the module docstring): ``linprog``'s for the method
#: ``highs-ipm`` with ``presolve=False, run_crossover="off"``, and for ``highs-ds``
SOLVERS = {
    "ipm": {"solver": "ipm", "presolve": "off", "run_crossover": "off"},
    "simplex": {"solver": "simplex", "presolve": "on"},
}
#: the same, as ``linprog`` methods and options (the fallback without HiGHS bindings)
LINPROG_METHODS = {
    "ipm": ("highs-ipm", {"presolve": False, "run_crossover": "off"}),
    "simplex": ("highs-ds", {}),
}
#: linprog's acceptance test of a solution (``_check_result``: ``10 * sqrt(1e-9)``)
_FEASIBILITY_TOL = 10.0 * np.sqrt(1e-9)

#: Gavel's bisection bracket for the makespan T (s) and its stopping ratio
#: (``min_total_duration.py``: ``max_T = 1e6``, ``min_T = 100``, ``1.05 * min_T < max_T``)
MAKESPAN_BRACKET_S = (100.0, 1.0e6)
MAKESPAN_RATIO = 1.05


#: every solver name: ours (:data:`OURS`), then HiGHS's (:data:`SOLVERS`); the first is every
#: Gavel LP policy's default
SOLVER_NAMES = ("structured-fast", "structured", "mehrotra", *SOLVERS)
DEFAULT_SOLVER = SOLVER_NAMES[0]
#: our solvers, as (ECOS's path first, rerun a close-to-optimal end to full accuracy): ECOS's
#: path then the Mehrotra interior point ("structured-fast", the default since the
#: thirty-second session, takes a close-to-optimal end as it is; "structured", the default
#: before, reruns it), or the Mehrotra interior point alone ("mehrotra": the default of the
#: twenty-seventh and twenty-eighth sessions, which reproduces their numbers); HiGHS's IPM
#: takes what they cannot finish
OURS = {"structured": (True, True), "structured-fast": (True, False), "mehrotra": (False, True)}


def check_solver(solver: str) -> str:
    if solver not in SOLVER_NAMES:
        raise ConfigError(f"unknown LP solver {solver!r}; choose from {sorted(SOLVER_NAMES)}")
    return solver


class _DirectHighs:
    """HiGHS through its Python bindings (``core``: scipy's vendored ``_highspy._core``, or
    ``highspy._core``), with the options and the layout ``linprog`` uses."""

    def __init__(self, core):
        self.core = core
        common = {"output_flag": False, "log_to_console": False,
                  "highs_debug_level": core.HighsDebugLevel.kHighsDebugLevelNone,
                  "simplex_strategy": core.simplex_constants.SimplexStrategy.kSimplexStrategyDual}
        self.options = {name: self._options({**opts, **common}) for name, opts in SOLVERS.items()}
        self.inf = core.kHighsInf

    def _options(self, values: dict):
        opts = self.core.HighsOptions()
        for key, value in values.items():
            setattr(opts, key, value)
        return opts

    def solve(self, solver, c, indptr, indices, data, col_upper, row_upper):
        """(x, row activities), or None when HiGHS finds no optimum."""
        core = self.core
        highs = core._Highs()
        highs.passOptions(self.options[solver])
        status = highs.passModel(c.size, row_upper.size, data.size, int(core.MatrixFormat.kColwise),
                                 int(core.ObjSense.kMinimize), 0.0, c, np.zeros(c.size), col_upper,
                                 np.full(row_upper.size, -self.inf), row_upper,
                                 indptr[:-1], indices, data, np.zeros(c.size, np.int32))
        if status == core.HighsStatus.kError or highs.run() == core.HighsStatus.kError or \
                highs.getModelStatus() != core.HighsModelStatus.kOptimal:
            return None
        sol = highs.getSolution()
        return np.array(sol.col_value), np.array(sol.row_value)


class _LinprogHighs:
    """The same solves through ``scipy.optimize.linprog`` (scipy before 1.15, without the
    ``highspy`` package): the same HiGHS, slower."""

    inf = np.inf

    def solve(self, solver, c, indptr, indices, data, col_upper, row_upper):
        import warnings

        from scipy.optimize import OptimizeWarning, linprog
        from scipy.sparse import csc_array
        A = csc_array((data, indices, indptr), shape=(row_upper.size, c.size))
        method, options = LINPROG_METHODS[solver]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
            res = linprog(c, A_ub=A, b_ub=row_upper, bounds=np.column_stack([np.zeros(c.size), col_upper]),
                          method=method, options=options)
        return None if res.status != 0 else (res.x, row_upper - res.slack)


def highs_backend():
    """scipy's vendored HiGHS bindings, else the ``highspy`` package, else ``linprog``."""
    for module in ("scipy.optimize._highspy._core", "highspy._core"):
        try:
            return _DirectHighs(importlib.import_module(module))
        except (ImportError, AttributeError):
            continue
    return _LinprogHighs()


_HIGHS = highs_backend()


class AllocationLP:
    """Gavel's base constraints for one job set, built once, solved many times.

    Args:
        scale: int [n] scale factors (GPUs per job).
        capacity: int [m] GPUs of each type.
        solver: a name in :data:`SOLVER_NAMES` (ours, :data:`OURS`, or HiGHS's, :data:`SOLVERS`).

    Variables are ``X`` flattened row-major (n*m), then one auxiliary ``z`` (max-min).  Rows:
    the m capacity rows, the n rows ``sum_t X[i, t] <= 1``, then (max-min and feasibility) n
    rows ``z_coef * z - sum_t a[i, t] X[i, t] <= rhs_i``.  The column-wise matrix is laid out
    once (every X column holds its type's capacity row, its job's row and, when present, its
    job's extra row); a solve only writes the extra rows' coefficients.
    """

    def __init__(self, scale: np.ndarray, capacity: np.ndarray, solver: str = DEFAULT_SOLVER):
        self.scale = np.asarray(scale, float)
        self.capacity = np.asarray(capacity, float)
        self.n, self.m = self.scale.shape[0], self.capacity.shape[0]
        self.solver = check_solver(solver)
        self.simplex_fallbacks = 0      # solves the IPM failed and the simplex made (_solve)
        self.highs_fallbacks = 0        # solves our solvers failed and HiGHS made
        self.ecos_path_fallbacks = 0    # solves gavel_hsd failed and gavel_ipm made (_structured)
        self.ecos_path_inaccurate = 0   # gavel_hsd's "close to optimal" points taken (max-min, max-sum)

    # -- pieces --------------------------------------------------------------
    @functools.cached_property
    def base_rhs(self) -> np.ndarray:
        """The base rows' right-hand sides: capacity, then 1 per job row."""
        return np.concatenate([self.capacity, np.ones(self.n)])

    @functools.cached_property
    def col_upper(self) -> np.ndarray:
        """Column upper bounds: 1 on X, none on z."""
        upper = np.ones(self.n * self.m + 1)
        upper[-1] = _HIGHS.inf
        return upper

    @functools.cached_property
    def _base_layout(self):
        """Per X column: its base rows (capacity, job; sorted), their coefficients, and its
        extra row (built on first use: only HiGHS needs the matrix)."""
        n, m, nm = self.n, self.m, self.n * self.m
        job, typ = np.divmod(np.arange(nm), m)
        return (np.column_stack([typ, m + job]), np.column_stack([self.scale[job], np.ones(nm)]),
                (m + n + job)[:, None])

    def _matrix(self, a: np.ndarray | None, z_coef: float):
        """CSC (indptr, indices, data): the base rows, plus row i ``z_coef * z - sum_t a[i, t]
        X[i, t]`` when ``a`` is given (the layout scipy's ``csc_array`` gives linprog)."""
        n, m, nm = self.n, self.m, self.n * self.m
        base_rows, base_data, extra_rows = self._base_layout
        if a is None:
            per_col, rows, data = 2, base_rows, base_data
            z_rows, z_data = np.zeros(0, np.int64), np.zeros(0)
        else:
            per_col = 3
            rows = np.concatenate([base_rows, extra_rows], axis=1)
            data = np.concatenate([base_data, -np.asarray(a, float).reshape(nm, 1)], axis=1)
            z_rows, z_data = m + n + np.arange(n), np.full(n, float(z_coef))
        indptr = np.r_[np.arange(nm + 1) * per_col, nm * per_col + z_rows.size]
        return (indptr.astype(np.int32), np.r_[rows.ravel(), z_rows].astype(np.int32),
                np.r_[data.ravel(), z_data])

    def _solve(self, c: np.ndarray, a: np.ndarray | None = None, z_coef: float = 0.0,
               rhs: np.ndarray | None = None):
        """Solve ``min c x`` over the base rows (plus the extra rows of ``a``); returns x,
        or None when no solver finds an optimum or the point fails linprog's acceptance
        test.  Our solvers (:data:`OURS`, :meth:`_structured`) hand a problem they cannot
        finish to HiGHS's IPM (``highs_fallbacks`` counts those).  When HiGHS's
        interior-point solver fails on a problem (its IPM without crossover sometimes stops
        short of its tolerances on a well-posed LP: a 124-job max-min LP of the Hops FTF
        experiment, coefficients 0.4-162), the simplex solves it once more
        (``simplex_fallbacks`` counts those): a vertex of the same optimum, not a failed run."""
        upper = self.base_rhs if rhs is None else np.concatenate([self.base_rhs, rhs])
        if self.solver in OURS:
            x = self._accepted(self._structured(c, a, z_coef, rhs, *OURS[self.solver]), upper)
            if x is not None:
                return x
            self.highs_fallbacks += 1
        matrix = self._matrix(a, z_coef)
        solver = "ipm" if self.solver in OURS else self.solver
        x = self._accepted(_HIGHS.solve(solver, c, *matrix, self.col_upper, upper), upper)
        if x is None and solver != "simplex":
            x = self._accepted(_HIGHS.solve("simplex", c, *matrix, self.col_upper, upper), upper)
            self.simplex_fallbacks += x is not None
        return x

    def _structured(self, c, a, z_coef, rhs, ecos_path: bool = True, rerun_inaccurate: bool = True):
        """(x, row activities) from :func:`sim.policies.gavel_hsd.solve` (``ecos_path``) or
        else :func:`sim.policies.gavel_ipm.solve`, or None.  The z
        column enters only when it has a cost or a coefficient (the feasibility problem has
        neither); X has no upper bound there (Gavel's own formulation), the job rows
        bound it.  Every problem is solved on ECOS's path first (:mod:`sim.policies.gavel_hsd`;
        ``ecos_path_fallbacks`` counts the solves it cannot finish, which go to
        :mod:`sim.policies.gavel_ipm`)."""
        n, m = self.n, self.m
        use_z = a is not None and (c[-1] != 0.0 or z_coef != 0.0)
        if ecos_path:
            X, z, status, _ = gavel_hsd.solve(self.scale, self.capacity, c[: n * m].reshape(n, m),
                                              c[-1], a, z_coef, rhs, use_z,
                                              rerun_inaccurate=rerun_inaccurate)
            # close to optimal is ECOS's "optimal_inaccurate": Gavel uses that x for max-min
            # and max-sum, but its bisection takes only "optimal" as feasible
            feasibility = a is not None and not use_z
            if status == gavel_hsd.OPTIMAL or (status == gavel_hsd.OPTIMAL_INACCURATE
                                               and not feasibility):
                self.ecos_path_inaccurate += status == gavel_hsd.OPTIMAL_INACCURATE
                return np.append(X.ravel(), z), gavel_ipm.row_activities(self.scale, a, z_coef, X, z)
            self.ecos_path_fallbacks += 1
        X, z, status, *_ = gavel_ipm.solve(self.scale, self.capacity, c[: n * m].reshape(n, m),
                                          c[-1], a, z_coef, rhs, use_z)
        if status != gavel_ipm.OPTIMAL:
            return None
        return np.append(X.ravel(), z), gavel_ipm.row_activities(self.scale, a, z_coef, X, z)

    def _accepted(self, got, upper: np.ndarray):
        """x of a solve, or None when there is none or it fails linprog's acceptance test."""
        if got is None:
            return None
        x, activity = got
        return x if within_bounds(x, activity, upper, self.col_upper, _FEASIBILITY_TOL) else None

    def _x(self, x: np.ndarray) -> np.ndarray:
        """X clipped to [0, 1] (np.clip's values, without its wrapper's cost)."""
        return np.minimum(np.maximum(x[: self.n * self.m].reshape(self.n, self.m), 0.0), 1.0)

    # -- problems ------------------------------------------------------------
    def max_min(self, a: np.ndarray) -> tuple[np.ndarray, float]:
        """``max_X min_i sum_t a[i, t] X[i, t]``; returns (X, optimum)."""
        if self.n == 0:
            return np.zeros((0, self.m)), 0.0
        c = np.zeros(self.n * self.m + 1)
        c[-1] = -1.0
        x = self._solve(c, a, 1.0, np.zeros(self.n))
        if x is None:
            raise SimError(f"Gavel max-min LP failed (HiGHS found no acceptable optimum) for "
                           f"{self.n} jobs")
        return self._x(x), float(x[-1])

    def max_sum(self, a: np.ndarray) -> np.ndarray:
        """``max_X sum_{i,t} a[i, t] X[i, t]``."""
        x = self._solve(np.r_[-np.asarray(a, float).ravel(), 0.0])
        if x is None:
            raise SimError(f"Gavel max-sum LP failed (HiGHS found no acceptable optimum) for "
                           f"{self.n} jobs")
        return self._x(x)

    def feasible(self, a: np.ndarray, need: np.ndarray) -> np.ndarray | None:
        """Some X (an interior one with ``ipm``) with ``sum_t a[i, t] X[i, t] >= need[i]``,
        or None if there is none."""
        x = self._solve(np.zeros(self.n * self.m + 1), a, 0.0, -np.asarray(need, float))
        return None if x is None else self._x(x)


def within_bounds(x, activity, upper, col_upper, tol: float) -> bool:
    """linprog's acceptance test of a point: every row activity at most its upper side and
    every column in [0, its upper bound], each within ``tol``; False on NaN."""
    return bool(_within_bounds(np.ascontiguousarray(x, np.float64),
                               np.ascontiguousarray(activity, np.float64),
                               np.ascontiguousarray(upper, np.float64),
                               np.ascontiguousarray(col_upper, np.float64), float(tol)))


@njit(cache=True)
def _within_bounds(x, activity, upper, col_upper, tol):
    for k in range(upper.shape[0]):
        if not upper[k] - activity[k] >= -tol:
            return False
    for k in range(x.shape[0]):
        if not (x[k] >= -tol and col_upper[k] + tol - x[k] >= 0.0):
            return False
    return True


# -- reference allocations (no LP) -----------------------------------------------
def proportional_share(n: int, capacity: np.ndarray) -> np.ndarray:
    """One row of :func:`proportional_allocation` (every row is the same): ``N_t / n``
    scaled to sum to 1."""
    row = np.asarray(capacity, float) / max(n, 1)
    return row / row.sum()


def max_min_coefficients(thr, scale, weight, share) -> np.ndarray:
    """Gavel's max-min fairness rows (``max_min_fairness.py``): ``a[i, t] = thr[i, t] * s_i /
    (w_i * sum_u thr[i, u] share[u])``, job i's throughput on type t normalized by its
    throughput under the equal split ``share`` (:func:`proportional_share`), weighted by its
    priority ``w_i`` and scale factor ``s_i``; the sum in NumPy's order (:mod:`sim.pairwise_sum`),
    so the rows are ``thr * (s / (w * np.sum(thr * share, axis=1)))[:, None]`` bit for bit.

    Args: thr float [n, m]; scale, weight float [n]; share float [m]."""
    return _max_min_coefficients(np.ascontiguousarray(thr, np.float64),
                                 np.ascontiguousarray(scale, np.float64),
                                 np.ascontiguousarray(weight, np.float64),
                                 np.ascontiguousarray(share, np.float64))


@njit(cache=True, error_model="numpy")
def _max_min_coefficients(thr, scale, weight, share):
    n, m = thr.shape
    a, products = np.empty((n, m)), np.empty(m)
    for i in range(n):
        for t in range(m):
            products[t] = thr[i, t] * share[t]
        f = scale[i] / (weight[i] * pairwise_sum(products, 0, m))
        for t in range(m):
            a[i, t] = thr[i, t] * f
    return a


def proportional_allocation(n: int, capacity: np.ndarray) -> np.ndarray:
    """Gavel's ``proportional.py``: ``X[i, t] = N_t / n``, scaled so the largest row sums to 1."""
    return np.tile(proportional_share(n, capacity), (n, 1))


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
    the max-min solution at the top.

    Each solve also bounds rho* (:class:`_RhoBounds`), and a bisection step whose outcome the
    bounds already decide is not solved: the same steps, the same final top and the same X
    as solving every step, with a fraction of the LPs."""
    best = np.max(thr * np.minimum(1.0, lp.capacity[None, :] / lp.scale[:, None]), axis=1)
    lo = float(np.max((since_start + remaining / best) / isolated_time))
    x_iso = isolated_allocation(lp.scale, lp.capacity)
    y_iso = np.sum(thr * x_iso, axis=1)
    hi = float(np.max((since_start + remaining / y_iso) / isolated_time))
    bounds = _RhoBounds()
    solved: dict[float, np.ndarray] = {}
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2.0
        reachable = bounds.decide(mid)
        if reachable is None:
            x, z = lp.max_min(_ftf_rows(thr, mid, since_start, remaining, isolated_time))
            reachable = z >= 1.0
            bounds.update(mid, z)
            if reachable:
                solved[mid] = x
                with np.errstate(divide="ignore"):
                    achieved = (since_start + remaining / np.sum(thr * x, axis=1)) / isolated_time
                bounds.reachable_from = min(bounds.reachable_from, float(np.max(achieved)))
        if reachable:
            hi = mid
        else:
            lo = mid
    if hi in solved:
        return solved[hi]
    return lp.max_min(_ftf_rows(thr, hi, since_start, remaining, isolated_time))[0]


class _RhoBounds:
    """What one max-min solve at rho tells about the others.  ``a(rho)`` scales job i's row
    by ``rho c_i - t_i`` (with ``t_i >= 0``), which grows at least as fast as rho above rho
    and at most as fast below it, so the optimum ``z`` of the max-min LP satisfies
    ``z(rho') >= z(rho) rho' / rho`` for ``rho' >= rho`` and ``z(rho') <= z(rho) rho' / rho``
    for ``rho' <= rho``: rho is reachable from ``rho / z`` on when z < 1, unreachable below
    ``rho / z`` when z >= 1.  A solution X also reaches its own ``max_i rho_i(X)``, which
    the caller records.  A step is decided only when it lies beyond a bound by ``MARGIN``
    (relative: 1,000 times the interior-point solvers' tolerances, a tenth of the
    bisection's final step at ``rel_tol = 1e-4``), so that a decided step is the one a solve would have
    given."""

    MARGIN = 1e-5

    def __init__(self):
        self.unreachable_below = 0.0    # every rho below is unreachable
        self.reachable_from = np.inf    # every rho above is reachable

    def update(self, rho: float, z: float) -> None:
        if z >= 1.0:
            self.reachable_from = min(self.reachable_from, rho)
            self.unreachable_below = max(self.unreachable_below, rho / z)
        else:
            self.unreachable_below = max(self.unreachable_below, rho)
            if z > 0:
                self.reachable_from = min(self.reachable_from, rho / z)

    def decide(self, rho: float) -> bool | None:
        """True / False when the bounds decide ``rho``; None when a solve must."""
        if rho > self.reachable_from * (1.0 + self.MARGIN):
            return True
        if rho < self.unreachable_below * (1.0 - self.MARGIN):
            return False
        return None


def _ftf_rows(thr, rho, since_start, remaining, isolated_time) -> np.ndarray:
    slack = np.maximum(rho * isolated_time - since_start, 0.0)
    return thr * (slack / remaining)[:, None]
