"""An interior-point solver for Gavel's allocation LPs that uses their structure (Numba).

The LPs of :mod:`sim.policies.gavel_lp` all have the same shape (n jobs, m GPU types,
``X[i, t]`` the time fraction of job i on type t)::

    min  sum c[i, t] X[i, t] + c_z z
    s.t. sum_i s_i X[i, t] <= N_t                 (m capacity rows)
         sum_t X[i, t] <= 1                       (n job rows)
         z_coef z - sum_t a[i, t] X[i, t] <= r_i  (n extra rows, optional)
         X >= 0, z >= 0

which is Gavel's own formulation (``policy.py``'s base constraints, no upper bound on X:
``x >= 0`` and the job rows; cvxpy hands ECOS exactly these cones).  A general LP solver
treats the constraint matrix as sparse and pays for it (HiGHS's IPX: about 1 ms for ten
jobs, most of it per-iteration machinery).  Here the normal equations
``A Theta A' dy = r`` are solved in O(n m^3): every job touches only its own one or two rows
and the m capacity rows, so each job's 2 x 2 block is eliminated and what is left is a small
dense system of the capacity rows and the z column (:func:`_factor`).

The method is Mehrotra's predictor-corrector primal-dual path following from an infeasible
start (Wright, *Primal-Dual Interior-Point Methods*, 1997, ch. 10), with the row slacks as
variables: the same barrier as ECOS's on Gavel's cvxpy problem.  It stops at relative primal
and dual infeasibility and duality gap ``tol`` (HiGHS's IPM defaults are 1e-7 and 1e-8; we use
1e-8 for all three).  Like any interior-point method without crossover it returns a point in
the relative interior of the optimal face, not a vertex; which interior point depends on the
method's path (ECOS's, IPX's and this one differ; docs/gavel.md, "Solver").  Since ECOS's
own path is followed by :mod:`sim.policies.gavel_hsd`, this method solves what that one
cannot finish (``AllocationLP._structured``).

:func:`solve` returns a status instead of raising: 0 optimal, 1 iteration limit, 2 numerical
trouble (a zero pivot, a non-finite iterate, or more than ``MAX_GLOBAL_JOBS`` jobs to keep in
the dense system); the caller falls back to HiGHS.  The kernels divide IEEE-style
(``error_model="numpy"``): a zero divisor gives inf or NaN, which the finiteness checks turn
into NUMERICAL_TROUBLE, never an exception.  The iteration works in preallocated buffers with
one loop per update; every sum runs in the order numpy's ``sum`` in Numba uses (sequential),
so the points are those of the array expressions it replaced, bit for bit.
Plain-Python reference: tests/reference_gavel_ipm.py.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

OPTIMAL, ITERATION_LIMIT, NUMERICAL_TROUBLE = 0, 1, 2
#: stopping tolerance (relative primal/dual infeasibility and duality gap) and iteration cap
TOLERANCE = 1e-8
MAX_ITERATIONS = 100
#: fraction of the step to the boundary taken (Mehrotra's 0.99 ... 0.995; Wright ch. 10)
STEP_FRACTION = 0.99
#: iterative refinement of each Newton solve: at most this many steps, stopping when the
#: relative residual is below the tolerance or stops falling
REFINEMENT_STEPS = 10
REFINEMENT_TOLERANCE = 1e-10
#: a job block with ``det B < ILL_BLOCK * B_jj * B_ee`` stays in the global system (_factor);
#: with more than MAX_GLOBAL_JOBS such jobs the problem goes to HiGHS instead
ILL_BLOCK = 1e-6
MAX_GLOBAL_JOBS = 100


def solve(scale, capacity, c, c_z, a, z_coef, rhs, use_z: bool, tol: float = TOLERANCE,
          max_iter: int = MAX_ITERATIONS):
    """Solve the LP above.

    Args:
        scale: float [n] scale factors; capacity: float [m] GPUs per type.
        c: float [n, m] objective on X; c_z: objective on z.
        a: float [n, m] extra rows' coefficients, or None for no extra rows (then z is
            absent too).
        z_coef: z's coefficient in every extra row; rhs: float [n] extra rows' right side.
        use_z: whether the LP has the variable z (max-min); without it z is fixed at 0.

    Returns (X float [n, m], z, status, iterations, size of the largest global system).
    """
    n, m = np.shape(c)
    extra = a is not None
    return _solve(np.ascontiguousarray(scale, np.float64), np.ascontiguousarray(capacity, np.float64),
                  np.ascontiguousarray(c, np.float64).reshape(n, m), float(c_z),
                  np.ascontiguousarray(a if extra else np.zeros((n, m)), np.float64),
                  float(z_coef), np.ascontiguousarray(rhs if extra else np.zeros(n), np.float64),
                  bool(extra), bool(use_z and extra), float(tol), int(max_iter))


def row_activities(scale, a, z_coef: float, X, z: float) -> np.ndarray:
    """``A (X, z)``: the capacity rows, the job rows, then (when ``a`` is given) the extra rows."""
    extra = a is not None
    return _rows(np.ascontiguousarray(scale, np.float64),
                 np.ascontiguousarray(a if extra else np.zeros(np.shape(X)), np.float64),
                 float(z_coef), np.ascontiguousarray(X, np.float64), float(z), extra)


@njit(cache=True, error_model="numpy")
def _rows(scale, a, z_coef, X, z, extra):
    """Row activities ``A (X, z)`` (capacity, job, extra rows)."""
    n, m = X.shape
    out = np.empty(m + n + (n if extra else 0))
    _rows_into(scale, a, z_coef, X, z, extra, out)
    return out


@njit(cache=True, error_model="numpy")
def _rows_into(scale, a, z_coef, X, z, extra, out):
    """:func:`_rows` into ``out``."""
    n, m = X.shape
    out[:] = 0.0
    for i in range(n):
        for t in range(m):
            out[t] += scale[i] * X[i, t]
            out[m + i] += X[i, t]
            if extra:
                out[m + n + i] -= a[i, t] * X[i, t]
        if extra:
            out[m + n + i] += z_coef * z


@njit(cache=True, error_model="numpy")
def _cols(scale, a, z_coef, y, extra, out):
    """``A' y`` on the X columns into ``out`` [n, m]; returns its z entry."""
    n, m = out.shape
    yz = 0.0
    for i in range(n):
        for t in range(m):
            v = scale[i] * y[t] + y[m + i]
            if extra:
                v -= a[i, t] * y[m + n + i]
            out[i, t] = v
        if extra:
            yz += z_coef * y[m + n + i]
    return yz


@njit(cache=True, error_model="numpy")
def _pair_sum(th, a, skip, extra):
    """``sum_{v<u} th_v th_u (a_v - a_u)^2`` over the types other than ``skip``."""
    total = 0.0
    if not extra:
        return total
    m = th.shape[0]
    for v in range(m):
        if v == skip:
            continue
        for u in range(v + 1, m):
            if u != skip:
                d = a[v] - a[u]
                total += th[v] * th[u] * d * d
    return total


@njit(cache=True, error_model="numpy")
def _block_det(th, a, wj, we, skip, extra):
    """Determinant of job block ``B = K Theta K' + diag(wj, we)`` (``K = [1; -a]``) over the
    types other than ``skip``, summed from non-negative terms (Lagrange's identity) so that
    the large ``theta`` of the job's basic columns do not cancel."""
    s0 = 0.0
    s2 = 0.0
    for v in range(th.shape[0]):
        if v != skip:
            s0 += th[v]
            s2 += th[v] * a[v] * a[v]
    if not extra:
        return s0 + wj
    return _pair_sum(th, a, skip, extra) + wj * s2 + we * s0 + wj * we


@njit(cache=True, error_model="numpy")
def _factor(scale, a, z_coef, thx, thz, thw, extra, use_z):
    """Factor ``M = A diag(thx, thz) A' + diag(thw)`` for :func:`_eliminate`.

    ``M dy = r`` is solved as the bordered system ``[[M0, z_coef e], [z_coef e', -1/thz]]
    [dy; zeta] = [r; 0]`` (M0: M without the z column, e: the extra rows), which is M's
    system with ``zeta = thz z_coef e' dy``.  Its unknowns are the m capacity rows and zeta
    (global) and each job's job and extra rows (a 2 x 2 block ``B_i = K_i Theta_i K_i' +
    diag(wj, we)``, ``K_i = [1; -a_i]``).  The blocks are eliminated, leaving a small dense
    global system solved by LU with pivoting, except the blocks that are nearly singular
    (``det B_i`` below ``ILL_BLOCK`` of its diagonal's product: a job whose two rows are
    both tight and which runs on one type, whose row duals only the z column fixes), which
    stay in the global system.  Near the optimum the thetas span twenty orders of
    magnitude: every eliminated term is summed from closed forms without cancellation
    (``det B`` by Lagrange's identity, ``P_tt = theta_t det B_-t / det B``, ...).

    Returns (binv [n, 3], g [n, m, 2], LU [k, k], pivots [k], ill [n], dom [n], ok): the
    symmetric block inverses (jj, je, ee) and ``g[i, t] = F_i[t] B_i^-1`` of the eliminated
    jobs, the global system's LU factors, each job's position in the global system (-1:
    eliminated) and, for those there, its dominant type (:func:`_global_block`).
    """
    n, m = thx.shape
    binv = np.zeros((n, 3))
    g = np.zeros((n, m, 2))
    ill = np.full(n, -1, np.int64)
    dom = np.full(n, -1, np.int64)
    base = m + 1 if use_z else m
    k = base
    dets = np.empty(n)
    pairs = np.empty((m, m))
    for i in range(n):
        th, ai = thx[i], a[i]
        wj = thw[m + i]
        we = thw[m + n + i] if extra else 0.0
        s0, s1, s2 = wj, 0.0, we
        for t in range(m):
            s0 += th[t]
            s1 += th[t] * ai[t]
            s2 += th[t] * ai[t] * ai[t]
        det = _block_det(th, ai, wj, we, -1, extra)
        if not (det > 0.0):
            return binv, g, np.zeros((1, 1)), np.zeros(0, np.int64), ill, dom, False
        dets[i] = det
        if extra:
            binv[i, 0], binv[i, 1], binv[i, 2] = s2 / det, s1 / det, s0 / det
            if det < ILL_BLOCK * s0 * s2:
                if k + 2 > base + 2 * MAX_GLOBAL_JOBS:
                    return binv, g, np.zeros((1, 1)), np.zeros(0, np.int64), ill, dom, False
                ill[i] = k
                k += 2
        else:
            binv[i, 0] = 1.0 / det
    S = np.zeros((k, k))
    for t in range(m):
        S[t, t] = thw[t]
    if use_z:
        S[m, m] = -1.0 / thz
    for i in range(n):
        th, ai = thx[i], a[i]
        sc = scale[i]
        if ill[i] >= 0:
            dom[i] = _global_block(S, ill[i], th, ai, sc, thw[m + i], thw[m + n + i],
                                   z_coef, m, use_z)
            continue
        we = thw[m + n + i] if extra else 0.0
        _eliminated_block(S, g[i], th, ai, sc, thw[m + i], we, dets[i], binv[i, 2], z_coef, m,
                          extra, use_z, pairs)
    for t in range(m):
        if not (S[t, t] > 0.0):
            return binv, g, S, np.zeros(0, np.int64), ill, dom, False
    piv = _lu(S)
    return binv, g, S, piv, ill, dom, piv.size == k


@njit(cache=True, error_model="numpy")
def _eliminated_block(S, gi, th, ai, sc, wj, we, det, binv_ee, z_coef, m, extra, use_z, pairs):
    """Add one eliminated job's Schur complement to the global system ``S`` and write its
    ``g`` rows (``gi`` [m, 2]); see :func:`_factor`.  Every term is the closed form of
    :func:`_block_det` and :func:`_cross`, evaluated in their order (``pairs``: scratch for
    the job's ``theta_v theta_u (a_v - a_u)^2``)."""
    if extra:
        for v in range(m):
            for u in range(v + 1, m):
                d = ai[v] - ai[u]
                pairs[v, u] = th[v] * th[u] * d * d
    sc2 = sc * sc
    for t in range(m):
        tht, at = th[t], ai[t]
        ts = tht * sc
        if extra:
            gj, ge = we, -at * wj
            s0 = 0.0
            s2 = 0.0
            for v in range(m):
                if v != t:
                    tv, av = th[v], ai[v]
                    dv = av - at
                    gj += tv * av * dv
                    ge += tv * dv
                    s0 += tv
                    s2 += tv * av * av
            gi[t, 0] = ts * gj / det
            gi[t, 1] = ts * ge / det
            ps = 0.0
            for v in range(m):
                if v != t:
                    for u in range(v + 1, m):
                        if u != t:
                            ps += pairs[v, u]
            bd = ps + wj * s2 + we * s0 + wj * we
        else:
            gi[t, 0] = ts / det
            s0 = 0.0
            for v in range(m):
                if v != t:
                    s0 += th[v]
            bd = s0 + wj
        S[t, t] += sc2 * tht * bd / det
        for u in range(t + 1, m):
            kk = _cross(th, ai, t, u) + we + at * ai[u] * wj if extra else 1.0
            off = -sc * sc * tht * th[u] * kk / det
            S[t, u] += off
            S[u, t] += off
        if use_z:
            S[t, m] -= z_coef * gi[t, 1]
            S[m, t] -= z_coef * gi[t, 1]
    if use_z:
        S[m, m] -= z_coef * z_coef * binv_ee


@njit(cache=True, error_model="numpy")
def _lu(S):
    """In-place LU with partial pivoting of the small dense global system; returns the
    pivot rows, or an empty array when a pivot is zero or not finite (the caller gives the
    problem to HiGHS)."""
    k = S.shape[0]
    piv = np.arange(k)
    for c in range(k):
        p = c
        for r in range(c + 1, k):
            if abs(S[r, c]) > abs(S[p, c]):
                p = r
        if not (abs(S[p, c]) > 0.0) or not np.isfinite(S[p, c]):
            return np.zeros(0, np.int64)
        if p != c:
            for j in range(k):
                S[c, j], S[p, j] = S[p, j], S[c, j]
            piv[c], piv[p] = piv[p], piv[c]
        for r in range(c + 1, k):
            f = S[r, c] / S[c, c]
            S[r, c] = f
            if f != 0.0:
                for j in range(c + 1, k):
                    S[r, j] -= f * S[c, j]
    return piv


@njit(cache=True, error_model="numpy")
def _lu_solve(LU, piv, b):
    k = b.shape[0]
    x = np.empty(k)
    for r in range(k):
        x[r] = b[piv[r]]
    for r in range(k):
        for j in range(r):
            x[r] -= LU[r, j] * x[j]
    for r in range(k - 1, -1, -1):
        for j in range(r + 1, k):
            x[r] -= LU[r, j] * x[j]
        x[r] /= LU[r, r]
    return x


@njit(cache=True, error_model="numpy")
def _global_block(S, at, th, ai, sc, wj, we, z_coef, m, use_z):
    """Put a nearly singular job block into the global system at rows ``at`` (p) and
    ``at + 1`` (q), with its columns' and row slacks' coupling to the capacity rows and z;
    returns the job's dominant type d (largest theta).

    The unknowns are changed so that the dominant column, whose theta dwarfs everything
    else near the optimum, touches one unknown only: the job's row duals are ``y_job =
    p' + a_d q``, ``y_extra = q`` with ``p' = p - s y_d`` (y_d: the dual of capacity row d).
    In that basis column d's vector ``(s e_d, 1, 0)`` becomes ``e_p``, and each other term
    is a small theta or slack times an outer product of small integers and coefficients:
    no sum mixes the dominant theta with the terms it would round away (column v != d:
    ``s e_v - s e_d + e_p + (a_d - a_v) e_q``; the job row's slack: ``-s e_d + e_p + a_d
    e_q``; the extra row's: ``e_q``)."""
    d = 0
    for t in range(m):
        if th[t] > th[d]:
            d = t
    ad = ai[d]
    p, q = at, at + 1
    S[p, p] += th[d]
    for v in range(m):
        if v != d:
            _outer(S, th[v], v, sc, d, -sc, p, 1.0, q, ad - ai[v])
    _outer(S, wj, d, -sc, d, 0.0, p, 1.0, q, ad)
    S[q, q] += we
    if use_z:
        S[m, q] += z_coef
        S[q, m] += z_coef
    return d


@njit(cache=True, error_model="numpy")
def _outer(S, w, i0, c0, i1, c1, i2, c2, i3, c3):
    """``S += w c c'`` for the vector c with entries c0..c3 at i0..i3 (indices may repeat)."""
    idx = (i0, i1, i2, i3)
    val = (c0, c1, c2, c3)
    for x in range(4):
        for y in range(4):
            S[idx[x], idx[y]] += w * val[x] * val[y]


@njit(cache=True, error_model="numpy")
def _cross(th, a, t, u):
    """``sum_{v != t, u} theta_v (a_v - a_t)(a_v - a_u)``: ``k_t' adj(B) k_u`` without its
    ``we + a_t a_u wj``."""
    total = 0.0
    for v in range(th.shape[0]):
        if v != t and v != u:
            total += th[v] * (a[v] - a[t]) * (a[v] - a[u])
    return total


@njit(cache=True, error_model="numpy")
def _normal_solve(fac, thx, thz, thw, scale, a, z_coef, r, extra, use_z, out, work):
    """``out = M^-1 r``: :func:`_eliminate`, then iterative refinement against ``M`` applied
    exactly (``A Theta A' v + thw v``, O(n m)).  A job whose job and extra rows are both
    tight and which runs on one type has a nearly singular block: its two row duals are
    fixed only through the z column, and one elimination leaves errors that grow with the
    spread of the thetas; refinement removes them.  ``work``: scratch (:class:`_Work`)."""
    _eliminate(fac, thx, thz, scale, a, z_coef, r, extra, use_z, out)
    rnorm = _absmax(r)
    if not (rnorm > 0.0):
        return
    n, m = thx.shape
    corr, at, tat, act, res = work.corr, work.at, work.tat, work.act, work.res
    best = np.inf
    for _ in range(REFINEMENT_STEPS):
        atz = _cols(scale, a, z_coef, out, extra, at)
        for i in range(n):
            for t in range(m):
                tat[i, t] = thx[i, t] * at[i, t]
        _rows_into(scale, a, z_coef, tat, thz * atz, extra, act)
        for k in range(r.shape[0]):
            res[k] = r[k] - act[k] - thw[k] * out[k]
        err = _absmax(res) / rnorm
        if not (err < best) or err <= REFINEMENT_TOLERANCE:
            return
        best = err
        _eliminate(fac, thx, thz, scale, a, z_coef, res, extra, use_z, corr)
        for k in range(out.shape[0]):
            out[k] += corr[k]


@njit(cache=True, error_model="numpy")
def _eliminate(fac, thx, thz, scale, a, z_coef, r, extra, use_z, out):
    """``out = M^-1 r`` by eliminating the job blocks (see :func:`_factor`)."""
    binv, g, LU, piv, ill, dom, _ = fac
    n, m = thx.shape
    k = LU.shape[0]
    glob = np.zeros(k)
    for t in range(m):
        glob[t] = r[t]
    for i in range(n):
        rj = r[m + i]
        re = r[m + n + i] if extra else 0.0
        if ill[i] >= 0:                     # the right side in the basis of _global_block
            d = dom[i]
            glob[ill[i]], glob[ill[i] + 1] = rj, a[i, d] * rj + re
            glob[d] -= scale[i] * rj
            continue
        for t in range(m):
            glob[t] -= g[i, t, 0] * rj + g[i, t, 1] * re
        if use_z:
            glob[m] -= z_coef * (binv[i, 1] * rj + binv[i, 2] * re)
    sol = _lu_solve(LU, piv, glob)
    for t in range(m):
        out[t] = sol[t]
    zeta = sol[m] if use_z else 0.0
    for i in range(n):
        rj = r[m + i]
        if ill[i] >= 0:                     # back from the basis of _global_block
            d = dom[i]
            q = sol[ill[i] + 1]
            out[m + i], out[m + n + i] = sol[ill[i]] - scale[i] * sol[d] + a[i, d] * q, q
        elif extra:
            re = r[m + n + i]
            yj = binv[i, 0] * rj + binv[i, 1] * re - z_coef * zeta * binv[i, 1]
            ye = binv[i, 1] * rj + binv[i, 2] * re - z_coef * zeta * binv[i, 2]
            for t in range(m):
                yj -= g[i, t, 0] * sol[t]
                ye -= g[i, t, 1] * sol[t]
            out[m + i], out[m + n + i] = yj, ye
        else:
            yj = binv[i, 0] * rj
            for t in range(m):
                yj -= g[i, t, 0] * sol[t]
            out[m + i] = yj


@njit(cache=True, error_model="numpy")
def _max_step(v, dv):
    step = 1.0
    for k in range(v.shape[0]):
        if dv[k] < 0.0:
            step = min(step, -v[k] / dv[k])
    return step


@njit(cache=True, error_model="numpy")
def _dot(u, v):
    """``np.sum(u * v)``, summed in the same order (numpy's sum in Numba is sequential)."""
    total = 0.0
    for k in range(u.shape[0]):
        total += u[k] * v[k]
    return total


@njit(cache=True, error_model="numpy")
def _shifted_dot(u, du, step_u, v, dv, step_v):
    """``np.sum((u + step_u du) * (v + step_v dv))``, in the same order."""
    total = 0.0
    for k in range(u.shape[0]):
        total += (u[k] + step_u * du[k]) * (v[k] + step_v * dv[k])
    return total


@njit(cache=True, error_model="numpy")
def _absmax(v):
    """``np.max(np.abs(v))`` (a NaN anywhere gives NaN, as numpy's max in Numba)."""
    best = abs(v[0])
    if best != best:
        return best
    for k in range(1, v.shape[0]):
        x = abs(v[k])
        if x != x:
            return x
        if x > best:
            best = x
    return best


_Work = namedtuple("_Work", "corr at tat act res")


@njit(cache=True, error_model="numpy")
def _solve(scale, capacity, c, c_z, a, z_coef, rhs, extra, use_z, tol, max_iter):
    n, m = c.shape
    nm = n * m
    R = m + n + (n if extra else 0)
    b = np.zeros(R)
    b[:m] = capacity
    b[m:m + n] = 1.0
    if extra:
        b[m + n:] = rhs
    # primal v = (X, z, w), dual y and slacks s = (sX, sz, sw); z present iff use_z
    X = np.full((n, m), 1.0 / m)
    z = 1.0 if use_z else 0.0
    w = np.ones(R)
    y = np.zeros(R)
    sX = np.ones((n, m))
    sz = 1.0 if use_z else 0.0
    sw = np.ones(R)
    npairs = nm + R + (1 if use_z else 0)
    bnorm = 1.0 + np.max(np.abs(b))
    cnorm = 1.0 + max(np.max(np.abs(c)) if nm else 0.0, abs(c_z))
    mats = np.empty((8, n, m))
    atY, thx, dX, dsX, rcX, rdX, rhX, tX = (mats[0], mats[1], mats[2], mats[3], mats[4],
                                            mats[5], mats[6], mats[7])
    vecs = np.empty((10, R))
    thw, rhat, dy, dw, dsw, rcw, rp, rdw, act, rhs_n = (vecs[0], vecs[1], vecs[2], vecs[3],
                                                         vecs[4], vecs[5], vecs[6], vecs[7],
                                                         vecs[8], vecs[9])
    work = _Work(np.empty(R), np.empty((n, m)), np.empty((n, m)), np.empty(R), np.empty(R))
    # flat views of the [n, m] arrays, for the element-wise loops
    Xf, sXf, cf, atYf, thxf = X.reshape(nm), sX.reshape(nm), c.reshape(nm), atY.reshape(nm), thx.reshape(nm)
    dXf, dsXf, rcXf, rdXf, rhXf, tXf = (dX.reshape(nm), dsX.reshape(nm), rcX.reshape(nm),
                                        rdX.reshape(nm), rhX.reshape(nm), tX.reshape(nm))
    dz = dsz = rcz = 0.0
    glob_max = 0
    for it in range(max_iter + 1):
        _rows_into(scale, a, z_coef, X, z, extra, act)
        for k in range(R):
            rp[k] = b[k] - act[k] - w[k]
            rdw[k] = -y[k] - sw[k]
        atz = _cols(scale, a, z_coef, y, extra, atY)
        for k in range(nm):
            rdXf[k] = cf[k] - atYf[k] - sXf[k]
        rdz = (c_z - atz - sz) if use_z else 0.0
        gap = _dot(Xf, sXf) + _dot(w, sw) + z * sz
        mu = gap / npairs
        pobj = _dot(cf, Xf) + c_z * z
        dobj = _dot(b, y)
        pinf = _absmax(rp) / bnorm
        dinf = max(_absmax(rdXf) if nm else 0.0, abs(rdz), _absmax(rdw)) / cnorm
        if not (np.isfinite(pinf) and np.isfinite(dinf) and np.isfinite(mu)):
            return X, z, NUMERICAL_TROUBLE, it, glob_max
        if pinf <= tol and dinf <= tol and abs(pobj - dobj) <= tol * (1.0 + abs(pobj)):
            return X, z, OPTIMAL, it, glob_max
        if it == max_iter:
            break
        for k in range(nm):
            thxf[k] = Xf[k] / sXf[k]
        thz = z / sz if use_z else 0.0
        for k in range(R):
            thw[k] = w[k] / sw[k]
        fac = _factor(scale, a, z_coef, thx, thz, thw, extra, use_z)
        if not fac[6]:
            return X, z, NUMERICAL_TROUBLE, it, glob_max
        glob_max = max(glob_max, fac[2].shape[0])
        step_p = step_d = 0.0
        for phase in range(2):
            if phase == 0:                                  # predictor: sigma = 0
                for k in range(nm):
                    rcXf[k] = -Xf[k] * sXf[k]
                for k in range(R):
                    rcw[k] = -w[k] * sw[k]
                rcz = -z * sz
            else:                                           # corrector, Mehrotra's sigma
                mu_aff = (_shifted_dot(Xf, dXf, step_p, sXf, dsXf, step_d)
                          + _shifted_dot(w, dw, step_p, sw, dsw, step_d)
                          + (z + step_p * dz) * (sz + step_d * dsz)) / npairs
                sigma = (mu_aff / mu) ** 3
                smu = sigma * mu
                for k in range(nm):
                    rcXf[k] = smu - Xf[k] * sXf[k] - dXf[k] * dsXf[k]
                for k in range(R):
                    rcw[k] = smu - w[k] * sw[k] - dw[k] * dsw[k]
                rcz = smu - z * sz - dz * dsz if use_z else 0.0
            # dv = theta (A' dy - rhat), rhat = rd - rc / v; A Theta A' dy = rp + A Theta rhat
            for k in range(nm):
                rhXf[k] = rdXf[k] - rcXf[k] / Xf[k]
                tXf[k] = thxf[k] * rhXf[k]
            rhz = (rdz - rcz / z) if use_z else 0.0
            for k in range(R):
                rhat[k] = rdw[k] - rcw[k] / w[k]
            _rows_into(scale, a, z_coef, tX, thz * rhz, extra, act)
            for k in range(R):
                rhs_n[k] = rp[k] + act[k] + thw[k] * rhat[k]
            _normal_solve(fac, thx, thz, thw, scale, a, z_coef, rhs_n, extra, use_z, dy, work)
            atz = _cols(scale, a, z_coef, dy, extra, atY)
            for k in range(nm):
                dXf[k] = thxf[k] * (atYf[k] - rhXf[k])
                dsXf[k] = (rcXf[k] - sXf[k] * dXf[k]) / Xf[k]
            dz = thz * (atz - rhz) if use_z else 0.0
            for k in range(R):
                dw[k] = thw[k] * (dy[k] - rhat[k])
                dsw[k] = (rcw[k] - sw[k] * dw[k]) / w[k]
            dsz = (rcz - sz * dz) / z if use_z else 0.0
            step_p = min(_max_step(Xf, dXf), _max_step(w, dw))
            step_d = min(_max_step(sXf, dsXf), _max_step(sw, dsw))
            if use_z:
                if dz < 0.0:
                    step_p = min(step_p, -z / dz)
                if dsz < 0.0:
                    step_d = min(step_d, -sz / dsz)
        step_p = min(1.0, STEP_FRACTION * step_p)
        step_d = min(1.0, STEP_FRACTION * step_d)
        for k in range(nm):
            Xf[k] += step_p * dXf[k]
            sXf[k] += step_d * dsXf[k]
        for k in range(R):
            w[k] += step_p * dw[k]
            y[k] += step_d * dy[k]
            sw[k] += step_d * dsw[k]
        if use_z:
            z += step_p * dz
            sz += step_d * dsz
    return X, z, ITERATION_LIMIT, max_iter, glob_max
