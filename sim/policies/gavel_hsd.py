"""A homogeneous self-dual interior-point method on the path ECOS takes (Numba), for Gavel's
feasibility LP.

Gavel's ``MinTotalDurationPolicyWithPerf`` asks cvxpy + ECOS for *some* X with::

    -X <= 0,   sum_i s_i X[i, t] <= N_t,   sum_t X[i, t] <= 1,   -sum_t a[i, t] X[i, t] <= -need_i

and a constant objective.  Every feasible X is optimal, so the X it gets is wherever ECOS's
iteration ends, and that X decides how the slack is shared between jobs (JCT).  No other
interior-point method ends there (docs/gavel.md, "Solver").  This module follows the
algorithm ECOS publishes (Domahidi, Chu and Boyd, "ECOS: An SOCP solver for embedded
systems", ECC 2013; it is Vandenberghe's CVXOPT ``conelp`` method for the LP cone) on the
same rows as cvxpy hands ECOS, step by step:

- Ruiz equilibration, :data:`EQUIL_ITERS` passes: every column and row is divided by the
  square root of its largest absolute entry (1 where that is below 1e-6); b, h and c are
  scaled with them.  Residuals and stopping tests are in the scaled problem.
- The starting point of CVXOPT: x from ``min ||s||`` with ``G x + s = h``; z from
  ``min ||z||`` with ``G' z + c = 0``; each of s and z shifted by ``(1 + alpha) e`` where
  ``alpha = -min`` is not negative; tau = kappa = 1.
- The homogeneous self-dual embedding with Nesterov-Todd scaling (``W^2 = s / z`` on the LP
  cone), Mehrotra's predictor-corrector: the affine step to the boundary (at most
  :data:`STEP_MAX`) sets ``sigma = (1 - alpha)^3`` in [:data:`SIGMA_MIN`,
  :data:`SIGMA_MAX`]; the combined direction reduces the residuals by ``1 - sigma`` with the
  second-order term; the step is :data:`GAMMA` times the step to the boundary (at most
  :data:`STEP_MAX`).
- Stop when the scaled primal residual ``||rz|| / max(max(1, ||h||) + ||x|| + ||s||, 1) /
  tau`` and dual residual ``||rx|| / max(max(1, ||c||) + ||z||, 1) / tau`` are below
  ``feastol`` and the gap ``s'z`` is below ``abstol`` (or the relative gap below ``reltol``),
  all 1e-8 as ECOS's defaults; return ``x / tau``.

Held against ECOS 2.0.10's printed iteration logs (cost, gap, residuals, mu, step and sigma
of every iteration) and its x on Gavel's LPs: the same number of iterations and x within
3e-4 (docs/gavel.md).  ECOS's KKT solver (a regularised sparse LDL with iterative
refinement) is not reproduced: here the normal equations ``G' W^-2 G dx = r`` are solved by
eliminating every job's m x m block and a dense system of the m capacity rows (Woodbury),
with iterative refinement; the directions agree to rounding.

:func:`solve_feasibility` returns a status instead of raising: 0 optimal, 1 iteration limit,
2 numerical trouble (a non-positive pivot or a non-finite iterate), 3 infeasible (a ray z >= 0
with ``G'z`` below ``feastol`` times ``-h'z``); the caller falls back.
Plain-Python reference: tests/reference_gavel_hsd.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit

OPTIMAL, ITERATION_LIMIT, NUMERICAL_TROUBLE, INFEASIBLE = 0, 1, 2, 3
#: Ruiz equilibration passes; norms below EQUIL_FLOOR leave their row or column unscaled
EQUIL_ITERS = 3
EQUIL_FLOOR = 1e-6
#: step: GAMMA times the step to the boundary, which is capped at STEP_MAX (affine step too)
GAMMA = 0.99
STEP_MAX = 0.999
STEP_MIN = 1e-6
#: centering sigma = (1 - affine step)^3, clipped to [SIGMA_MIN, SIGMA_MAX]
SIGMA_MIN = 1e-4
SIGMA_MAX = 1.0
#: ECOS's default tolerances and iteration cap
FEASTOL = ABSTOL = RELTOL = 1e-8
MAX_ITERATIONS = 100
#: iterative refinement of each normal-equations solve
REFINEMENT_STEPS = 8
REFINEMENT_TOLERANCE = 1e-13


def solve_feasibility(scale, capacity, a, need, cost=None, max_iter: int = MAX_ITERATIONS):
    """Some X with Gavel's base rows and ``sum_t a[i, t] X[i, t] >= need[i]`` (minimizing
    ``cost . X`` if given; Gavel's problem has none), on ECOS's path.

    Returns (X float [n, m], status, iterations)."""
    a = np.ascontiguousarray(a, np.float64)
    n, m = a.shape
    c = np.zeros((n, m)) if cost is None else np.ascontiguousarray(cost, np.float64).reshape(n, m)
    return _solve(np.ascontiguousarray(scale, np.float64), np.ascontiguousarray(capacity, np.float64),
                  a, np.ascontiguousarray(need, np.float64), c, int(max_iter))


# -- the constraint matrix G (rows: P = -X >= 0 bounds, C capacity, J job, R need) ---------
@njit(cache=True, error_model="numpy")
def _root(v):
    return 1.0 if abs(v) < EQUIL_FLOOR else np.sqrt(v)


@njit(cache=True, error_model="numpy")
def _equilibrate(scale, a):
    """The scaled entries (eP, eC, eJ, eR: each [n, m]) and the scalings (column xe [n, m],
    rows gP [n, m], gC [m], gJ [n], gR [n])."""
    n, m = a.shape
    eP, eC, eJ, eR = -np.ones((n, m)), np.empty((n, m)), np.ones((n, m)), -a.copy()
    for i in range(n):
        eC[i, :] = scale[i]
    xe, gP = np.ones((n, m)), np.ones((n, m))
    gC, gJ, gR = np.ones(m), np.ones(n), np.ones(n)
    col, rC, rJ, rR = np.empty((n, m)), np.zeros(m), np.zeros(n), np.zeros(n)
    for _ in range(EQUIL_ITERS):
        rC[:] = 0.0
        for i in range(n):
            rJ[i] = 0.0
            rR[i] = 0.0
            for t in range(m):
                col[i, t] = max(abs(eP[i, t]), abs(eC[i, t]), abs(eJ[i, t]), abs(eR[i, t]))
                rC[t] = max(rC[t], abs(eC[i, t]))
                rJ[i] = max(rJ[i], abs(eJ[i, t]))
                rR[i] = max(rR[i], abs(eR[i, t]))
        for t in range(m):
            rC[t] = _root(rC[t])
            gC[t] *= rC[t]
        for i in range(n):
            rJ[i] = _root(rJ[i])
            rR[i] = _root(rR[i])
            gJ[i] *= rJ[i]
            gR[i] *= rR[i]
            for t in range(m):
                ct, rp = _root(col[i, t]), _root(abs(eP[i, t]))
                xe[i, t] *= ct
                gP[i, t] *= rp
                eP[i, t] /= rp * ct
                eC[i, t] /= rC[t] * ct
                eJ[i, t] /= rJ[i] * ct
                eR[i, t] /= rR[i] * ct
    return eP, eC, eJ, eR, xe, gP, gC, gJ, gR


@njit(cache=True, error_model="numpy")
def _gx(E, x, out):
    """out = G x (flat rows: P [n*m], C [m], J [n], R [n])."""
    eP, eC, eJ, eR = E
    n, m = x.shape
    nm = n * m
    out[nm:nm + m] = 0.0
    for i in range(n):
        sj = 0.0
        sr = 0.0
        for t in range(m):
            v = x[i, t]
            out[i * m + t] = eP[i, t] * v
            out[nm + t] += eC[i, t] * v
            sj += eJ[i, t] * v
            sr += eR[i, t] * v
        out[nm + m + i] = sj
        out[nm + m + n + i] = sr


@njit(cache=True, error_model="numpy")
def _gtz(E, z, out):
    """out = G' z ([n, m])."""
    eP, eC, eJ, eR = E
    n, m = out.shape
    nm = n * m
    for i in range(n):
        for t in range(m):
            out[i, t] = (eP[i, t] * z[i * m + t] + eC[i, t] * z[nm + t]
                         + eJ[i, t] * z[nm + m + i] + eR[i, t] * z[nm + m + n + i])


# -- the normal equations G' W^-2 G dx = r ----------------------------------------------------
@njit(cache=True, error_model="numpy")
def _cholesky(A, L):
    """L L' = A (m x m); False on a non-positive pivot."""
    k = A.shape[0]
    for j in range(k):
        d = A[j, j]
        for p in range(j):
            d -= L[j, p] * L[j, p]
        if not d > 0.0:
            return False
        L[j, j] = np.sqrt(d)
        for r in range(j + 1, k):
            v = A[r, j]
            for p in range(j):
                v -= L[r, p] * L[j, p]
            L[r, j] = v / L[j, j]
        for r in range(j):
            L[r, j] = 0.0
    return True


@njit(cache=True, error_model="numpy")
def _chol_solve(L, b, out):
    k = L.shape[0]
    for j in range(k):
        v = b[j]
        for p in range(j):
            v -= L[j, p] * out[p]
        out[j] = v / L[j, j]
    for j in range(k - 1, -1, -1):
        v = out[j]
        for p in range(j + 1, k):
            v -= L[p, j] * out[p]
        out[j] = v / L[j, j]


@njit(cache=True, error_model="numpy")
def _factor(E, w2, Lb, Y, Ls):
    """Factor G' W^-2 G = B + U diag(1 / w2_C) U': every job's block B_i (Lb[i]), Y_i =
    B_i^-1 U_i and the capacity system diag(w2_C) + sum U_i' Y_i (Ls); False on trouble."""
    eP, eC, eJ, eR = E
    n, m = eP.shape
    nm = n * m
    B = np.empty((m, m))
    S = np.zeros((m, m))
    for t in range(m):
        S[t, t] = w2[nm + t]
    col, out = np.empty(m), np.empty(m)
    for i in range(n):
        ij, ir = 1.0 / w2[nm + m + i], 1.0 / w2[nm + m + n + i]
        for t in range(m):
            for u in range(m):
                B[t, u] = eJ[i, t] * eJ[i, u] * ij + eR[i, t] * eR[i, u] * ir
            B[t, t] += eP[i, t] * eP[i, t] / w2[i * m + t]
        if not _cholesky(B, Lb[i]):
            return False
        for u in range(m):
            col[:] = 0.0
            col[u] = eC[i, u]
            _chol_solve(Lb[i], col, out)
            Y[i, :, u] = out
        for t in range(m):
            for u in range(m):
                S[t, u] += eC[i, t] * Y[i, t, u]
    return _cholesky(S, Ls)


@njit(cache=True, error_model="numpy")
def _normal_solve(E, Lb, Y, Ls, r, dx):
    """dx = (G' W^-2 G)^-1 r by Woodbury over the factors of :func:`_factor`."""
    eC = E[1]
    n, m = r.shape
    ut = np.zeros(m)
    yi = np.empty(m)
    for i in range(n):
        _chol_solve(Lb[i], r[i], yi)
        dx[i, :] = yi
        for t in range(m):
            ut[t] += eC[i, t] * yi[t]
    w = np.empty(m)
    _chol_solve(Ls, ut, w)
    for i in range(n):
        for t in range(m):
            v = 0.0
            for u in range(m):
                v += Y[i, t, u] * w[u]
            dx[i, t] -= v


@njit(cache=True, error_model="numpy")
def _kkt(E, w2, Lb, Y, Ls, rx, rz, dx, dz, gz, tmp):
    """Solve G' dz = rx, -G dx + W^2 dz = rz: dx from the normal equations (refined),
    dz = (rz + G dx) / W^2."""
    n, m = rx.shape
    for k in range(rz.shape[0]):
        tmp[k] = rz[k] / w2[k]
    _gtz(E, tmp, gz)
    r = rx - gz
    _normal_solve(E, Lb, Y, Ls, r, dx)
    rnorm = np.sqrt(np.sum(r * r)) + 1e-300
    corr = np.empty((n, m))
    last = np.inf
    for _ in range(REFINEMENT_STEPS):
        _gx(E, dx, tmp)
        for k in range(tmp.shape[0]):
            tmp[k] /= w2[k]
        _gtz(E, tmp, gz)
        res = r - gz
        err = np.sqrt(np.sum(res * res)) / rnorm
        if not err > REFINEMENT_TOLERANCE or not err < 0.5 * last:
            break
        last = err
        _normal_solve(E, Lb, Y, Ls, res, corr)
        dx += corr
    _gx(E, dx, tmp)
    for k in range(rz.shape[0]):
        dz[k] = (rz[k] + tmp[k]) / w2[k]


# -- the iteration --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _to_cone(r):
    alpha = -np.min(r)
    return r + (1.0 + alpha) if alpha >= 0.0 else r.copy()


@njit(cache=True, error_model="numpy")
def _max_step(z, dz, s, ds, tau, dtau, kap, dkap):
    alpha = np.inf
    for k in range(z.shape[0]):
        if dz[k] < 0.0:
            alpha = min(alpha, -z[k] / dz[k])
        if ds[k] < 0.0:
            alpha = min(alpha, -s[k] / ds[k])
    if dtau < 0.0:
        alpha = min(alpha, -tau / dtau)
    if dkap < 0.0:
        alpha = min(alpha, -kap / dkap)
    return min(alpha, STEP_MAX)


@njit(cache=True, error_model="numpy")
def _solve(scale, capacity, a, need, cost, max_iter):
    n, m = a.shape
    nm, rows = n * m, n * m + m + 2 * n
    eP, eC, eJ, eR, xe, gP, gC, gJ, gR = _equilibrate(scale, a)
    E = (eP, eC, eJ, eR)
    h = np.zeros(rows)
    h[nm:nm + m] = capacity / gC
    h[nm + m:nm + m + n] = 1.0 / gJ
    h[nm + m + n:] = -need / gR
    c = cost / xe
    Lb, Y, Ls = np.zeros((n, m, m)), np.zeros((n, m, m)), np.zeros((m, m))
    gz, tmp = np.empty((n, m)), np.empty(rows)
    x, z, s = np.zeros((n, m)), np.zeros(rows), np.zeros(rows)
    x1, z1, x2, z2 = np.empty((n, m)), np.empty(rows), np.empty((n, m)), np.empty(rows)
    ones = np.ones(rows)
    if n == 0:
        return np.zeros((0, m)), OPTIMAL, 0
    # CVXOPT's start: least-squares x, s = h - G x; z from G'z = -c; both into the cone
    if not _factor(E, ones, Lb, Y, Ls):
        return x, NUMERICAL_TROUBLE, 0
    _kkt(E, ones, Lb, Y, Ls, np.zeros((n, m)), -h, x, z, gz, tmp)
    s = _to_cone(-z)
    _kkt(E, ones, Lb, Y, Ls, -c, np.zeros(rows), x1, z1, gz, tmp)
    z = _to_cone(z1)
    tau = kap = 1.0
    hn = max(1.0, np.sqrt(np.sum(h * h)))
    cn = max(1.0, np.sqrt(np.sum(c * c)))
    gx = np.empty(rows)
    for it in range(max_iter + 1):
        _gtz(E, z, gz)
        rx = gz + c * tau
        _gx(E, x, gx)
        rz = -gx + h * tau - s
        cx, hz, sz = np.sum(c * x), np.sum(h * z), np.sum(s * z)
        rt = -cx - hz - kap
        mu = (sz + tau * kap) / (rows + 1)
        pres = np.sqrt(np.sum(rz * rz)) / max(hn + np.sqrt(np.sum(x * x)) + np.sqrt(np.sum(s * s)), 1.0) / tau
        dres = np.sqrt(np.sum(rx * rx)) / max(cn + np.sqrt(np.sum(z * z)), 1.0) / tau
        pcost, dcost = cx / tau, -hz / tau
        relgap = sz / -pcost if pcost < 0.0 else (sz / dcost if dcost > 0.0 else np.nan)
        if not (np.isfinite(pres) and np.isfinite(dres) and np.isfinite(sz)):
            return x / xe / tau, NUMERICAL_TROUBLE, it
        if -hz > 0.0 and np.sqrt(np.sum(gz * gz)) / max(1.0, np.sqrt(np.sum(z * z))) < FEASTOL * -hz:
            return x / xe / tau, INFEASIBLE, it
        if pres < FEASTOL and dres < FEASTOL and (sz < ABSTOL or relgap < RELTOL):
            return x / xe / tau, OPTIMAL, it
        if it == max_iter:
            break
        w2 = s / z
        if not _factor(E, w2, Lb, Y, Ls):
            return x / xe / tau, NUMERICAL_TROUBLE, it
        _kkt(E, w2, Lb, Y, Ls, -c, -h, x1, z1, gz, tmp)        # the tau column, both steps
        denom = -np.sum(c * x1) - np.sum(h * z1) + kap / tau
        # affine (predictor) step
        rc, rk = -s * z, -tau * kap
        _kkt(E, w2, Lb, Y, Ls, -rx, -rz + rc / z, x2, z2, gz, tmp)
        dta = (-rt + np.sum(c * x2) + np.sum(h * z2) + rk / tau) / denom
        dza = z2 + dta * z1
        dsa = (rc - s * dza) / z
        dka = (rk - kap * dta) / tau
        sigma = min(max((1.0 - _max_step(z, dza, s, dsa, tau, dta, kap, dka)) ** 3, SIGMA_MIN),
                    SIGMA_MAX)
        # combined step
        f = 1.0 - sigma
        rc = -s * z + sigma * mu - dsa * dza
        rk = -tau * kap + sigma * mu - dta * dka
        _kkt(E, w2, Lb, Y, Ls, -f * rx, -f * rz + rc / z, x2, z2, gz, tmp)
        dtau = (-f * rt + np.sum(c * x2) + np.sum(h * z2) + rk / tau) / denom
        dx = x2 + dtau * x1
        dz = z2 + dtau * z1
        ds = (rc - s * dz) / z
        dkap = (rk - kap * dtau) / tau
        step = max(GAMMA * _max_step(z, dz, s, ds, tau, dtau, kap, dkap), STEP_MIN)
        x += step * dx
        z += step * dz
        s += step * ds
        tau += step * dtau
        kap += step * dkap
    return x / xe / tau, ITERATION_LIMIT, max_iter
