"""Bounded L-BFGS-B on scipy's own routine, without :func:`scipy.optimize.minimize`'s wrappers.

``minimize(method="L-BFGS-B", jac=True)`` wraps the objective in ``ScalarFunction`` and
``MemoizeJac`` and checks its arguments on every call: for the 7-parameter online fits of the
Sia and Pollux job models (:mod:`sim.goodput.observed`; thousands per run, each a few dozen
evaluations) that bookkeeping is as costly as the objective itself.  :func:`lbfgsb` drives
scipy's ``setulb`` (scipy >= 1.15: its C port of the L-BFGS-B code) with the loop
``_minimize_lbfgsb`` runs, so it visits the same points and returns the same ``x``, bit for bit.

``setulb`` is private.  Before its first use :func:`lbfgsb` checks itself against ``minimize`` on
a small bounded problem; if this scipy's routine has another signature or gives another answer,
every call goes through ``minimize`` instead (slower, the same result).
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, minimize

__all__ = ["lbfgsb"]

#: ``minimize``'s L-BFGS-B defaults that its ``tol`` does not set
_MAXCOR, _MAXLS, _MAXITER, _MAXFUN = 10, 20, 15000, 15000
_direct: bool | None = None          # None: not checked yet


def lbfgsb(fun, x0: np.ndarray, lower: np.ndarray, upper: np.ndarray, tol: float, args=()) -> np.ndarray:
    """``minimize(fun, x0, args, method="L-BFGS-B", jac=True, bounds=Bounds(lower, upper),
    tol=tol).x``: ``fun(x, *args)`` returns (value, gradient); bounds may be infinite, not NaN."""
    global _direct
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    if np.isnan(lower).any() or np.isnan(upper).any() or (lower > upper).any():
        raise ValueError("lbfgsb: bounds must not be NaN and lower <= upper")
    if _direct is None:
        _direct = _self_check()
    if not _direct:
        return _by_minimize(fun, x0, lower, upper, tol, args)
    return _drive(fun, x0, lower, upper, tol, args)


def _by_minimize(fun, x0, lower, upper, tol, args) -> np.ndarray:
    return minimize(fun, x0, args=args, method="L-BFGS-B", jac=True,
                    bounds=Bounds(lower, upper, keep_feasible=True), tol=tol).x


def _drive(fun, x0, lower, upper, tol, args) -> np.ndarray:
    from scipy.optimize import _lbfgsb
    n = x0.shape[0]
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    low_bnd = np.where(np.isinf(lower), 0.0, lower)
    upper_bnd = np.where(np.isinf(upper), 0.0, upper)
    # setulb's bound codes: 0 none, 1 lower only, 2 both, 3 upper only
    nbd = np.where(np.isinf(lower), np.where(np.isinf(upper), 0, 3),
                   np.where(np.isinf(upper), 1, 2)).astype(np.int32)
    x = np.clip(np.asarray(x0, np.float64), lower, upper)
    f, g = np.array(0.0), np.zeros(n)
    m = _MAXCOR
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m)
    iwa = np.zeros(3 * n, np.int32)
    task, ln_task = np.zeros(2, np.int32), np.zeros(2, np.int32)
    lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
    factr = tol / np.finfo(float).eps
    nfev = iters = 0
    while True:
        _lbfgsb.setulb(m, x, low_bnd, upper_bnd, nbd, f, g, factr, tol, wa, iwa, task, lsave,
                       isave, dsave, _MAXLS, ln_task)
        if task[0] == 3:                          # wants f and g at x
            f, g = fun(x.copy(), *args)
            g = np.asarray(g, np.float64)
            nfev += 1
        elif task[0] == 1:                        # a new iteration
            iters += 1
            if iters >= _MAXITER:
                task[0], task[1] = 5, 504
            elif nfev > _MAXFUN:
                task[0], task[1] = 5, 502
        else:
            return x


def _self_check() -> bool:
    """Does :func:`_drive` give ``minimize``'s answer on a bounded problem here?"""
    target = np.array([0.3, -2.0, 5.0, 1.5])
    lower, upper = np.array([0.0, -1.0, 0.0, 1.0]), np.array([1.0, 1.0, 4.0, 10.0])

    def fun(x):
        d = x - target
        return float(np.sum(d ** 2 * (1.0 + x ** 2))), 2 * d * (1.0 + x ** 2) + 2 * x * d ** 2

    x0 = np.array([0.9, 0.5, 0.1, 9.0])
    try:
        return bool(np.array_equal(_drive(fun, x0, lower, upper, 1e-9, ()),
                                   _by_minimize(fun, x0, lower, upper, 1e-9, ())))
    except Exception:                   # noqa: BLE001 - any failure of the private routine: minimize
        return False
