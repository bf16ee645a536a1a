"""A homogeneous self-dual interior-point method on the path ECOS takes (Numba), for Gavel's
allocation LPs.

Gavel hands its LPs to cvxpy + ECOS.  Max-min, max-sum and the min-total-duration
feasibility problem have many optima (the feasibility problem's objective is a constant:
every feasible X is optimal), so the X Gavel gets is wherever ECOS's iteration ends, and that
X decides the round's priorities (JCT).  No other interior-point method ends there
(docs/gavel.md, "Solver").  This module follows the algorithm ECOS publishes (Domahidi, Chu
and Boyd, "ECOS: An SOCP solver for embedded systems", ECC 2013; Vandenberghe's CVXOPT
``conelp`` method, here on the LP cone) on the rows cvxpy hands ECOS for Gavel's problems::

    min  c . X + c_z z
    s.t. -X <= 0,   sum_i s_i X[i, t] <= N_t,   sum_t X[i, t] <= 1,
         z_coef z - sum_t a[i, t] X[i, t] <= rhs_i       (the extra rows, optional)

(max-min: the extra rows with z, cvxpy's epigraph of ``min``; feasibility: the extra rows
without z; max-sum: no extra rows), step by step:

- Ruiz equilibration, :data:`EQUIL_ITERS` passes: every column and row is divided by the
  square root of its largest absolute entry (1 where that is below :data:`EQUIL_FLOOR`); h
  and c are scaled with them.  Residuals and stopping tests are in the scaled problem.
- The starting point of CVXOPT: x from ``min ||s||`` with ``G x + s = h``; z from
  ``min ||z||`` with ``G' z + c = 0``; each of s and z shifted into the cone as ECOS 2.0.10
  does (by ``1 - min`` when an entry is not positive, else by ``1 - GAMMA``); tau = kappa = 1.
- The homogeneous self-dual embedding with Nesterov-Todd scaling (``W^2 = s / z`` on the LP
  cone), Mehrotra's predictor-corrector: the affine step to the boundary (at most
  :data:`STEP_MAX`) sets ``sigma = (1 - alpha)^3`` in [:data:`SIGMA_MIN`,
  :data:`SIGMA_MAX`]; the combined direction reduces the residuals by ``1 - sigma`` with the
  second-order term; the step is :data:`GAMMA` times the step to the boundary (at most
  :data:`STEP_MAX`).
- Stop when the scaled primal residual ``||rz|| / max(max(1, ||h||) + ||x|| + ||s||, 1) /
  tau`` and dual residual ``||rx|| / max(max(1, ||c||) + ||z||, 1) / tau`` are below
  :data:`FEASTOL` and the gap ``s'z`` is below :data:`ABSTOL` (or the relative gap below
  :data:`RELTOL`), ECOS's defaults, with ``-c'x > 0`` or ``-h'z >= -ABSTOL``; return
  ``x / tau``.  Else infeasible when ``h'z / max(1, ||z||) < -RELTOL``, ``||G'z|| /
  max(1, ||z||) < FEASTOL`` and ``tau < kappa`` (ECOS 2.0.10's exit tests, in its order).

Held against ECOS 2.0.10's printed iteration logs (costs, gap, residuals, mu, step and sigma
of every iteration) and its x on Gavel's LPs: the same iterations, x within 3e-4
(docs/gavel.md).  ECOS's KKT solver (a regularised sparse LDL with iterative refinement) is
not reproduced: here the normal equations ``G' W^-2 G dx = r`` are solved by eliminating
every job's m x m block, a Woodbury correction for the m capacity rows and a bordered
elimination of z, with iterative refinement; the directions agree to rounding.  Where rows
are tight the normal equations can lose what the augmented system keeps (the Woodbury
correction of a tight capacity row cancels): a solve that ends in trouble or close to optimal
is rerun from the start on the augmented system, by LU with partial pivoting (the dense
elimination's factors, bit for bit, computed over the nonzeros: :mod:`.sparse_lu`;
:data:`RESCUE_MAX_SIZE`).

:func:`solve` returns a status instead of raising: 0 optimal, 1 iteration limit, 2 numerical
trouble (a failed factorization or a step below :data:`STEP_MIN`), 3 infeasible (the test
above), 4 close to optimal (trouble at an
iterate that meets ECOS's reduced-accuracy tolerances, where ECOS also stops with
"optimal_inaccurate"); the caller falls back on 1-3.
Plain-Python reference: tests/reference_gavel_hsd.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import sparse_lu
from .gavel_ipm import _dot

OPTIMAL, ITERATION_LIMIT, NUMERICAL_TROUBLE, INFEASIBLE, OPTIMAL_INACCURATE = 0, 1, 2, 3, 4
#: Ruiz equilibration passes; norms below EQUIL_FLOOR leave their row or column unscaled
EQUIL_ITERS = 3
EQUIL_FLOOR = 1e-6
#: step: GAMMA times the step to the boundary, which is capped at STEP_MAX (affine step too);
#: a step below STEP_MIN ends the solve (numerical trouble)
GAMMA = 0.99
STEP_MAX = 0.999
STEP_MIN = 1e-6
#: centering sigma = (1 - affine step)^3, clipped to [SIGMA_MIN, SIGMA_MAX]
SIGMA_MIN = 1e-4
SIGMA_MAX = 1.0
#: ECOS's default tolerances and iteration cap
FEASTOL = ABSTOL = RELTOL = 1e-8
#: ECOS's reduced-accuracy tolerances: a solve that cannot go on from an iterate meeting them
#: ends there, "close to optimal" (OPTIMAL_INACCURATE)
FEASTOL_INACC = 1e-4
ABSTOL_INACC = RELTOL_INACC = 5e-5
MAX_ITERATIONS = 100
#: iterative refinement of each normal-equations solve
REFINEMENT_STEPS = 8
REFINEMENT_TOLERANCE = 1e-13
#: a solve that ends in trouble or "close to optimal" (the latter unless the caller takes a
#: close-to-optimal end: ``rerun_inaccurate=False``) is rerun from the start with every
#: Newton system solved on the augmented system by LU (the reference's method) when that
#: has at most RESCUE_MAX_SIZE unknowns: where capacity or other rows are tight the normal
#: equations lose what the augmented system keeps (docs/gavel.md, "Solver")
RESCUE_MAX_SIZE = 400
#: a job block's pivot below REG_EPS times its largest diagonal entry becomes REG_DELTA times
#: it (the block is singular where every type runs the job and its rows are alike: agnostic
#: max-min; the capacity rows make the whole system definite)
REG_EPS = 1e-13
REG_DELTA = 1e-10


def solve(scale, capacity, c, c_z=0.0, a=None, z_coef=0.0, rhs=None, use_z=False,
          max_iter: int = MAX_ITERATIONS, rerun_inaccurate: bool = True):
    """Solve the LP above on ECOS's path (arguments as :func:`sim.policies.gavel_ipm.solve`:
    c float [n, m]; a float [n, m] and rhs float [n] for the extra rows, or None; use_z:
    whether z is a variable, only with extra rows).  ``rerun_inaccurate``: rerun on the
    augmented system a solve that ends close to optimal, to ECOS's full accuracy (the
    default); when False such a solve ends there (OPTIMAL_INACCURATE: a feasibility
    problem's callers, which take only OPTIMAL, then solve it otherwise) and only one that
    ends in trouble is rerun.

    Returns (X float [n, m], z, status, iterations)."""
    c = np.ascontiguousarray(c, np.float64)
    n, m = c.shape
    rows = a is not None
    return _solve(np.ascontiguousarray(scale, np.float64), np.ascontiguousarray(capacity, np.float64),
                  c, float(c_z), np.ascontiguousarray(a if rows else np.zeros((n, m)), np.float64),
                  float(z_coef), np.ascontiguousarray(rhs if rows else np.zeros(n), np.float64),
                  rows, bool(use_z and rows), int(max_iter), bool(rerun_inaccurate))


def solve_feasibility(scale, capacity, a, need, max_iter: int = MAX_ITERATIONS):
    """Some X with the base rows and ``sum_t a[i, t] X[i, t] >= need[i]`` (Gavel's
    min-total-duration problem: no objective).  Returns (X, status, iterations)."""
    a = np.asarray(a, np.float64)
    X, _, status, it = solve(scale, capacity, np.zeros(a.shape), 0.0, a, 0.0,
                             -np.asarray(need, np.float64), False, max_iter)
    return X, status, it


# -- the constraint matrix G --------------------------------------------------------------
# Variables: X flattened row-major (n*m), then z when present.  Rows, flat: P (-X >= 0
# bounds, n*m), C (capacity, m), J (job, n), then R (extra, n) when present.
@njit(cache=True, error_model="numpy")
def _root(v):
    return 1.0 if abs(v) < EQUIL_FLOOR else np.sqrt(v)


@njit(cache=True, error_model="numpy")
def _equilibrate(scale, a, z_coef, rows, use_z):
    """Scaled entries (eP, eC, eJ, eR [n, m]; ez [n], z's entries in the R rows) and the
    column scaling xe (flat variables) and row scaling ge (flat rows)."""
    n, m = a.shape
    nm = n * m
    eP, eC, eJ, eR = -np.ones((n, m)), np.empty((n, m)), np.ones((n, m)), -a.copy()
    ez = np.full(n, z_coef if use_z else 0.0)
    for i in range(n):
        eC[i, :] = scale[i]
    nv, nr = nm + (1 if use_z else 0), nm + m + n + (n if rows else 0)
    xe, ge = np.ones(nv), np.ones(nr)
    col, row = np.empty(nv), np.empty(nr)
    for _ in range(EQUIL_ITERS):
        row[:] = 0.0
        zmax = 0.0
        for i in range(n):
            for t in range(m):
                k = i * m + t
                r_ = abs(eR[i, t]) if rows else 0.0
                col[k] = max(abs(eP[i, t]), abs(eC[i, t]), abs(eJ[i, t]), r_)
                row[k] = abs(eP[i, t])
                row[nm + t] = max(row[nm + t], abs(eC[i, t]))
                row[nm + m + i] = max(row[nm + m + i], abs(eJ[i, t]))
                if rows:
                    row[nm + m + n + i] = max(row[nm + m + n + i], r_, abs(ez[i]))
            zmax = max(zmax, abs(ez[i]))
        if use_z:
            col[nm] = zmax
        for k in range(nv):
            col[k] = _root(col[k])
            xe[k] *= col[k]
        for k in range(nr):
            row[k] = _root(row[k])
            ge[k] *= row[k]
        for i in range(n):
            if rows:
                ez[i] /= row[nm + m + n + i] * (col[nm] if use_z else 1.0)
            for t in range(m):
                k = i * m + t
                eP[i, t] /= row[k] * col[k]
                eC[i, t] /= row[nm + t] * col[k]
                eJ[i, t] /= row[nm + m + i] * col[k]
                if rows:
                    eR[i, t] /= row[nm + m + n + i] * col[k]
    return (eP, eC, eJ, eR, ez, rows, use_z), xe, ge


@njit(cache=True, error_model="numpy")
def _gx(E, x, out):
    """out = G x."""
    eP, eC, eJ, eR, ez, rows, use_z = E
    n, m = eP.shape
    nm = n * m
    out[nm:nm + m] = 0.0
    zv = x[nm] if use_z else 0.0
    for i in range(n):
        sj = 0.0
        sr = ez[i] * zv
        for t in range(m):
            v = x[i * m + t]
            out[i * m + t] = eP[i, t] * v
            out[nm + t] += eC[i, t] * v
            sj += eJ[i, t] * v
            sr += eR[i, t] * v
        out[nm + m + i] = sj
        if rows:
            out[nm + m + n + i] = sr


@njit(cache=True, error_model="numpy")
def _gtz(E, z, out):
    """out = G' z."""
    eP, eC, eJ, eR, ez, rows, use_z = E
    n, m = eP.shape
    nm = n * m
    sz = 0.0
    for i in range(n):
        zr = z[nm + m + n + i] if rows else 0.0
        sz += ez[i] * zr
        for t in range(m):
            out[i * m + t] = (eP[i, t] * z[i * m + t] + eC[i, t] * z[nm + t]
                              + eJ[i, t] * z[nm + m + i] + eR[i, t] * zr)
    if use_z:
        out[nm] = sz


# -- the normal equations G' W^-2 G dx = r ----------------------------------------------------
# Every job's m x m block is stored along the last axis ([m, m, n]: entry (t, u) of all jobs
# contiguous), so each step of the factorizations runs over all jobs at once.  Each entry
# takes the same operations in the same order as one block at a time would.
@njit(cache=True, error_model="numpy")
def _cholesky(A, L, top, d):
    """L[:, :, i] L[:, :, i]' = A[:, :, i] for every block i (lower triangles; ``top``,
    ``d``: scratch of one entry a block); a pivot below REG_EPS times the block's largest
    diagonal entry becomes REG_DELTA times it (ECOS's dynamic regularization; the refinement
    on the unregularized system removes the error).  False on a non-finite block."""
    k, n = A.shape[0], A.shape[2]
    for i in range(n):
        top[i] = 0.0
    for j in range(k):
        for i in range(n):
            top[i] = max(top[i], A[j, j, i])
    for i in range(n):
        if not (top[i] > 0.0 and np.isfinite(top[i])):
            return False
    for j in range(k):
        d[:] = A[j, j]
        for p in range(j):
            for i in range(n):
                d[i] -= L[j, p, i] * L[j, p, i]
        for i in range(n):
            if not d[i] > REG_EPS * top[i]:
                if not np.isfinite(d[i]):
                    return False
                d[i] = REG_DELTA * top[i]
            L[j, j, i] = np.sqrt(d[i])
        for r in range(j + 1, k):
            d[:] = A[r, j]
            for p in range(j):
                for i in range(n):
                    d[i] -= L[r, p, i] * L[j, p, i]
            for i in range(n):
                L[r, j, i] = d[i] / L[j, j, i]
    return True


@njit(cache=True, error_model="numpy")
def _chol_solve(L, b, out):
    """out = (L L')^-1 b for one block (L[:, :, 0])."""
    k = L.shape[0]
    for j in range(k):
        v = b[j]
        for p in range(j):
            v -= L[j, p, 0] * out[p]
        out[j] = v / L[j, j, 0]
    for j in range(k - 1, -1, -1):
        v = out[j]
        for p in range(j + 1, k):
            v -= L[p, j, 0] * out[p]
        out[j] = v / L[j, j, 0]


@njit(cache=True, error_model="numpy")
def _invert(L, Binv, d):
    """Binv[:, :, i] = (L L')^-1 of every block from its Cholesky factor in L."""
    k, n = L.shape[0], L.shape[2]
    for u in range(k):                       # column u of L^-1 in Binv[:, u] (lower part)
        for j in range(u, k):
            d[:] = 1.0 if j == u else 0.0
            for p in range(u, j):
                for i in range(n):
                    d[i] -= L[j, p, i] * Binv[p, u, i]
            for i in range(n):
                Binv[j, u, i] = d[i] / L[j, j, i]
    for t in range(k):                       # (L^-1)' L^-1, lower triangle then mirrored
        for u in range(t, k):
            d[:] = 0.0
            for j in range(u, k):
                for i in range(n):
                    d[i] += Binv[j, t, i] * Binv[j, u, i]
            Binv[u, t] = d                   # row u >= t: column t of L^-1 is consumed
    for t in range(k):
        for u in range(t + 1, k):
            Binv[t, u] = Binv[u, t]


@njit(cache=True, error_model="numpy")
def _factor_buffers(n, m):
    """What :func:`_factor` fills and the solves read: (Binv, L, Ls, B, S, col, out, zc, v,
    piv, and two scratch vectors of one entry a job)."""
    return (np.zeros((m, m, n)), np.zeros((m, m, n)), np.zeros((m, m, 1)), np.empty((m, m, n)),
            np.empty((m, m, 1)), np.empty(m), np.empty(m), np.zeros(n * m), np.zeros(n * m),
            np.zeros(1), np.empty(n), np.empty(n))


@njit(cache=True, error_model="numpy")
def _factor(E, w2, F):
    """Factor ``G' W^-2 G``: X's part is ``B + U diag(1 / w2_C) U'`` (every job's block B_i
    inverted in Binv[:, :, i], the capacity system diag(w2_C) + sum U_i' B_i^-1 U_i in Ls);
    with z, v = (X's part)^-1 (the z column's coupling) and the bordered pivot.  False on
    trouble."""
    eP, eC, eJ, eR, ez, rows, use_z = E
    Binv, L, Ls, B, S, col, out, zc, v, piv, top, d = F
    n, m = eP.shape
    nm = n * m
    for i in range(n):
        top[i] = 1.0 / w2[nm + m + i]               # scratch: the J row's weight
        d[i] = 1.0 / w2[nm + m + n + i] if rows else 0.0   # and the R row's
    for t in range(m):
        for u in range(m):
            for i in range(n):
                B[t, u, i] = eJ[i, t] * eJ[i, u] * top[i] + eR[i, t] * eR[i, u] * d[i]
        for i in range(n):
            B[t, t, i] += eP[i, t] * eP[i, t] / w2[i * m + t]
    if not _cholesky(B, L, top, d):
        return False
    _invert(L, Binv, d)
    for t in range(m):
        for u in range(m):
            s = w2[nm + t] if t == u else 0.0
            for i in range(n):
                s += eC[i, t] * Binv[t, u, i] * eC[i, u]
            S[t, u, 0] = s
    if not _cholesky(S, Ls, top[:1], d[:1]):
        return False
    if use_z:
        dz = 0.0
        for i in range(n):
            ir = 1.0 / w2[nm + m + n + i]
            dz += ez[i] * ez[i] * ir
            for t in range(m):
                zc[i * m + t] = eR[i, t] * ez[i] * ir
        _x_solve(E, F, zc, v)
        first = dz
        for k in range(nm):
            dz -= zc[k] * v[k]
        if not (first > 0.0 and np.isfinite(dz)):
            return False
        piv[0] = dz if dz > REG_EPS * first else REG_DELTA * first
    return True


@njit(cache=True, error_model="numpy")
def _x_solve(E, F, r, dx):
    """dx[:nm] = (X's part of G' W^-2 G)^-1 r[:nm], by Woodbury over the factors."""
    eC = E[1]
    Binv, L, Ls, B, S, col, out, zc, v, piv, top, d = F
    n, m = eC.shape
    for t in range(m):
        d[:] = 0.0
        for u in range(m):
            for i in range(n):
                d[i] += Binv[t, u, i] * r[i * m + u]
        acc = 0.0
        for i in range(n):
            dx[i * m + t] = d[i]
            acc += eC[i, t] * d[i]
        col[t] = acc
    _chol_solve(Ls, col, out)
    for t in range(m):
        d[:] = 0.0
        for u in range(m):
            for i in range(n):
                d[i] += Binv[t, u, i] * eC[i, u] * out[u]
        for i in range(n):
            dx[i * m + t] -= d[i]


@njit(cache=True, error_model="numpy")
def _normal_solve(E, F, r, dx):
    """dx = (G' W^-2 G)^-1 r; z by the bordered elimination."""
    use_z = E[6]
    _x_solve(E, F, r, dx)
    if use_z:
        zc, v, piv = F[7], F[8], F[9]
        nm = zc.shape[0]
        dzv = r[nm]
        for k in range(nm):
            dzv -= zc[k] * dx[k]
        dzv /= piv[0]
        for k in range(nm):
            dx[k] -= v[k] * dzv
        dx[nm] = dzv


@njit(cache=True, error_model="numpy")
def _kkt(E, w2, F, rx, rz, dx, dz, W, D, dense):
    """Solve ``G' dz = rx, -G dx + W^2 dz = rz``: dx from the normal equations (refined),
    ``dz = (rz + G dx) / W^2``; with dense, on the augmented system instead, by its LU
    factors in D (:func:`_augmented_factor`).  W: work buffers (rows x 2, variables x 3)."""
    if dense:
        _augmented_solve(D, rx, rz, dx, dz)
        return
    trow, gdx, r, gz, corr = W
    for k in range(rz.shape[0]):
        trow[k] = rz[k] / w2[k]
    _gtz(E, trow, gz)
    rnorm = 0.0
    for k in range(rx.shape[0]):
        r[k] = rx[k] - gz[k]
        rnorm += r[k] * r[k]
    rnorm = np.sqrt(rnorm) + 1e-300
    _normal_solve(E, F, r, dx)
    last = np.inf
    fresh = False                            # gdx = G dx of the current dx
    for _ in range(REFINEMENT_STEPS):
        _gx(E, dx, gdx)
        for k in range(trow.shape[0]):
            trow[k] = gdx[k] / w2[k]
        _gtz(E, trow, gz)
        err = 0.0
        for k in range(r.shape[0]):
            gz[k] = r[k] - gz[k]
            err += gz[k] * gz[k]
        err = np.sqrt(err) / rnorm
        if not err > REFINEMENT_TOLERANCE or not err < 0.5 * last:
            fresh = True
            break
        last = err
        _normal_solve(E, F, gz, corr)
        dx += corr
    if not fresh:
        _gx(E, dx, gdx)
    for k in range(rz.shape[0]):
        dz[k] = (rz[k] + gdx[k]) / w2[k]


@njit(cache=True, error_model="numpy")
def _augmented_size(E):
    eP, eC, eJ, eR, ez, rows, use_z = E
    n, m = eP.shape
    return 2 * n * m + m + n + (n if rows else 0) + (1 if use_z else 0)


@njit(cache=True, error_model="numpy")
def _augmented_buffers(E, dense):
    """D for :func:`_augmented_factor`: the augmented matrix ``[0 G'; -G W^2]`` by rows in
    CSR (W^2 at the ``slot`` entries), and sparse_lu's work space and factors; empty unless
    dense."""
    size = _augmented_size(E) if dense else 0
    work, factors = sparse_lu.buffers(size)
    if not dense:
        return (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
                work, factors)
    eP = E[0]
    nv = eP.shape[0] * eP.shape[1] + (1 if E[6] else 0)
    nr = size - nv
    G = np.zeros((nr, nv))
    unit = np.zeros(nv)
    g = np.empty(nr)
    for j in range(nv):                      # column j of G is G e_j
        unit[j] = 1.0
        _gx(E, unit, g)
        unit[j] = 0.0
        G[:, j] = g
    nnz = 2 * np.count_nonzero(G) + nr
    indptr, indices, data = np.zeros(size + 1, np.int64), np.empty(nnz, np.int64), np.empty(nnz)
    slot = np.empty(nr, np.int64)
    q = 0
    for j in range(nv):                      # row j: column j of G
        for k in range(nr):
            if G[k, j] != 0.0:
                indices[q], data[q] = nv + k, G[k, j]
                q += 1
        indptr[j + 1] = q
    for k in range(nr):                      # row nv + k: -G's row k, then W^2
        for j in range(nv):
            if G[k, j] != 0.0:
                indices[q], data[q] = j, -G[k, j]
                q += 1
        indices[q], slot[k] = nv + k, q
        q += 1
        indptr[nv + k + 1] = q
    return indptr, indices, data, slot, work, factors


@njit(cache=True, error_model="numpy")
def _augmented_factor(E, w2, D):
    """``[0 G'; -G W^2]`` factored by LU with partial pivoting (the reference's method;
    sparse_lu: gavel_ipm's dense LU, bit for bit, over the nonzeros) into D, once for the
    Newton systems of an iteration (the factors keep 6,000 of 105,000 entries at 46 jobs)."""
    indptr, indices, data, slot, work, factors = D
    for k in range(w2.shape[0]):
        data[slot[k]] = w2[k]
    sparse_lu.factor(indptr, indices, data, work, factors)


@njit(cache=True, error_model="numpy")
def _augmented_solve(D, rx, rz, dx, dz):
    """``[0 G'; -G W^2] [dx; dz] = [rx; rz]`` by the factors in D; dx NaN where the system
    was singular (the solve then ends in trouble)."""
    nv = rx.shape[0]
    b = np.concatenate((rx, rz))
    x = np.empty(b.shape[0])
    sparse_lu.solve(D[5], b, x)
    dx[:] = x[:nv]
    dz[:] = x[nv:]


# -- the iteration --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _to_cone(r):
    """Shift into the cone as ECOS 2.0.10 does (its alpha starts at -GAMMA): by 1 - min(r)
    when some entry is not positive, else by 1 - GAMMA."""
    lo = np.min(r)
    return r + (1.0 - lo if lo <= 0.0 else 1.0 - GAMMA)


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
def _dots(u, v, p, q):
    """(u . v, p . q), each summed in index order, in one pass."""
    a = b = 0.0
    both = min(u.shape[0], p.shape[0])
    for k in range(both):
        a += u[k] * v[k]
        b += p[k] * q[k]
    for k in range(both, u.shape[0]):
        a += u[k] * v[k]
    for k in range(both, p.shape[0]):
        b += p[k] * q[k]
    return a, b


@njit(cache=True, error_model="numpy")
def _tau_step(c, h, rt, x2, z2, rk, tau, denom, f):
    cx2, hz2 = _dots(c, x2, h, z2)
    return (-f * rt + cx2 + hz2 + rk / tau) / denom


@njit(cache=True, error_model="numpy")
def _result(x, xe, tau, n, m, use_z, status, it):
    X = np.empty((n, m))
    for i in range(n):
        for t in range(m):
            X[i, t] = x[i * m + t] / xe[i * m + t] / tau
    zv = x[n * m] / xe[n * m] / tau if use_z else 0.0
    return X, zv, status, it


@njit(cache=True, error_model="numpy")
def _solve(scale, capacity, cost, c_z, a, z_coef, rhs, rows, use_z, max_iter, rerun_inaccurate):
    n, m = a.shape
    nm = n * m
    if n == 0:
        return np.zeros((0, m)), 0.0, OPTIMAL, 0
    E, xe, ge = _equilibrate(scale, a, z_coef, rows, use_z)
    nv, nr = xe.shape[0], ge.shape[0]
    h = np.zeros(nr)
    for t in range(m):
        h[nm + t] = capacity[t] / ge[nm + t]
    for i in range(n):
        h[nm + m + i] = 1.0 / ge[nm + m + i]
        if rows:
            h[nm + m + n + i] = rhs[i] / ge[nm + m + n + i]
    c = np.empty(nv)
    cf = cost.ravel()
    for k in range(nm):
        c[k] = cf[k] / xe[k]
    if use_z:
        c[nm] = c_z / xe[nm]
    F = _factor_buffers(n, m)
    W = (np.empty(nr), np.empty(nr), np.empty(nv), np.empty(nv), np.empty(nv))
    X, zv, status, it = _iterate(E, xe, h, c, F, W, n, m, use_z, max_iter, False)
    rerun = status == NUMERICAL_TROUBLE or (status == OPTIMAL_INACCURATE and rerun_inaccurate)
    if rerun and _augmented_size(E) <= RESCUE_MAX_SIZE:
        X, zv, status, it = _iterate(E, xe, h, c, F, W, n, m, use_z, max_iter, True)
    return X, zv, status, it


@njit(cache=True, error_model="numpy")
def _iterate(E, xe, h, c, F, W, n, m, use_z, max_iter, dense):
    """The iteration from CVXOPT's start (dense: every Newton system on the augmented system,
    :func:`_augmented_factor`)."""
    nm = n * m
    nv, nr = xe.shape[0], h.shape[0]
    x, z, x1, z1, x2, z2 = (np.zeros(nv), np.zeros(nr), np.empty(nv), np.empty(nr),
                            np.empty(nv), np.empty(nr))
    rx, rz, gx, gz, w2 = np.empty(nv), np.empty(nr), np.empty(nr), np.empty(nv), np.ones(nr)
    vx, vz, rc, dza, dsa, dz, ds = (np.empty(nv), np.empty(nr), np.empty(nr), np.empty(nr),
                                    np.empty(nr), np.empty(nr), np.empty(nr))
    negc, negh = -c, -h
    D = _augmented_buffers(E, dense)
    # CVXOPT's start: least-squares x, s = h - G x; z from G'z = -c; both into the cone
    if dense:
        _augmented_factor(E, w2, D)
    elif not _factor(E, w2, F):
        return _result(x, xe, 1.0, n, m, use_z, NUMERICAL_TROUBLE, 0)
    _kkt(E, w2, F, np.zeros(nv), -h, x, z, W, D, dense)
    s = _to_cone(-z)
    _kkt(E, w2, F, -c, np.zeros(nr), x1, z1, W, D, dense)
    z = _to_cone(z1)
    tau = kap = 1.0
    hn = max(1.0, np.sqrt(_dot(h, h)))
    cn = max(1.0, np.sqrt(_dot(c, c)))
    for it in range(max_iter + 1):
        _gtz(E, z, gz)
        _gx(E, x, gx)
        # the residuals and their sums, each summed in index order (several sums a pass)
        cx = xx = rxx = 0.0
        for k in range(nv):
            rx[k] = gz[k] + c[k] * tau
            cx += c[k] * x[k]
            xx += x[k] * x[k]
            rxx += rx[k] * rx[k]
        hz = sz = ss = zz = rzz = 0.0
        for k in range(nr):
            rz[k] = -gx[k] + h[k] * tau - s[k]
            hz += h[k] * z[k]
            sz += s[k] * z[k]
            ss += s[k] * s[k]
            zz += z[k] * z[k]
            rzz += rz[k] * rz[k]
        rt = -cx - hz - kap
        mu = (sz + tau * kap) / (nr + 1)
        pres = np.sqrt(rzz) / max(hn + np.sqrt(xx) + np.sqrt(ss), 1.0) / tau
        dres = np.sqrt(rxx) / max(cn + np.sqrt(zz), 1.0) / tau
        pcost, dcost = cx / tau, -hz / tau
        relgap = sz / -pcost if pcost < 0.0 else (sz / dcost if dcost > 0.0 else np.nan)
        if not (np.isfinite(pres) and np.isfinite(dres) and np.isfinite(sz)):
            return _result(x, xe, tau, n, m, use_z, NUMERICAL_TROUBLE, it)
        if ((-cx > 0.0 or -hz >= -ABSTOL) and pres < FEASTOL and dres < FEASTOL
                and (sz < ABSTOL or relgap < RELTOL)):
            return _result(x, xe, tau, n, m, use_z, OPTIMAL, it)
        zn = max(1.0, np.sqrt(zz))
        if hz / zn < -RELTOL and np.sqrt(_dot(gz, gz)) / zn < FEASTOL and tau < kap:
            return _result(x, xe, tau, n, m, use_z, INFEASIBLE, it)
        # where the solve cannot go on from here: close to optimal, or trouble
        stuck = (OPTIMAL_INACCURATE if pres < FEASTOL_INACC and dres < FEASTOL_INACC
                 and (sz < ABSTOL_INACC or relgap < RELTOL_INACC) else NUMERICAL_TROUBLE)
        if it == max_iter:
            break
        for k in range(nr):
            w2[k] = s[k] / z[k]
        if dense:
            _augmented_factor(E, w2, D)
        elif not _factor(E, w2, F):
            return _result(x, xe, tau, n, m, use_z, stuck, it)
        _kkt(E, w2, F, negc, negh, x1, z1, W, D, dense)  # the tau column, both steps
        cx1, hz1 = _dots(c, x1, h, z1)
        denom = -cx1 - hz1 + kap / tau
        # affine (predictor) step
        rk = -tau * kap
        for k in range(nv):
            vx[k] = -rx[k]
        for k in range(nr):
            rc[k] = -s[k] * z[k]
            vz[k] = -rz[k] + rc[k] / z[k]
        _kkt(E, w2, F, vx, vz, x2, z2, W, D, dense)
        dta = _tau_step(c, h, rt, x2, z2, rk, tau, denom, 1.0)
        for k in range(nr):
            dza[k] = z2[k] + dta * z1[k]
            dsa[k] = (rc[k] - s[k] * dza[k]) / z[k]
        dka = (rk - kap * dta) / tau
        sigma = min(max((1.0 - _max_step(z, dza, s, dsa, tau, dta, kap, dka)) ** 3, SIGMA_MIN),
                    SIGMA_MAX)
        # combined step
        f = 1.0 - sigma
        rk = -tau * kap + sigma * mu - dta * dka
        for k in range(nv):
            vx[k] = -f * rx[k]
        for k in range(nr):
            rc[k] = -s[k] * z[k] + sigma * mu - dsa[k] * dza[k]
            vz[k] = -f * rz[k] + rc[k] / z[k]
        _kkt(E, w2, F, vx, vz, x2, z2, W, D, dense)
        dtau = _tau_step(c, h, rt, x2, z2, rk, tau, denom, f)
        for k in range(nr):
            dz[k] = z2[k] + dtau * z1[k]
            ds[k] = (rc[k] - s[k] * dz[k]) / z[k]
        dkap = (rk - kap * dtau) / tau
        step = GAMMA * _max_step(z, dz, s, ds, tau, dtau, kap, dkap)
        if not step >= STEP_MIN:                   # stuck at the boundary (or NaN)
            return _result(x, xe, tau, n, m, use_z, stuck, it)
        for k in range(nv):
            x[k] += step * (x2[k] + dtau * x1[k])
        for k in range(nr):
            z[k] += step * dz[k]
            s[k] += step * ds[k]
        tau += step * dtau
        kap += step * dkap
    return _result(x, xe, tau, n, m, use_z, ITERATION_LIMIT, max_iter)
