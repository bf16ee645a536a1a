"""Plain reference of sim/policies/gavel_ipm.py: the same Mehrotra predictor-corrector on the
same LP, with the constraint matrix built densely and each Newton step solved from the dense
augmented system by ``numpy.linalg.solve`` (no normal equations, no structure, no Schur
complement)."""
from __future__ import annotations

import numpy as np

TOLERANCE, MAX_ITERATIONS, STEP_FRACTION = 1e-8, 100, 0.99


def dense_lp(scale, capacity, c, c_z, a, z_coef, rhs, use_z):
    """(A, b, cost) of ``min cost v`` over ``v = (X flattened, [z]) >= 0`` with ``A v <= b``."""
    n, m = np.shape(c)
    extra = a is not None
    use_z = use_z and extra
    rows = m + n + (n if extra else 0)
    A = np.zeros((rows, n * m + use_z))
    for i in range(n):
        for t in range(m):
            A[t, i * m + t] = scale[i]
            A[m + i, i * m + t] = 1.0
            if extra:
                A[m + n + i, i * m + t] = -a[i, t]
    if use_z:
        A[m + n:, n * m] = z_coef
    b = np.r_[capacity, np.ones(n), rhs if extra else []].astype(float)
    cost = np.r_[np.ravel(c), [c_z] if use_z else []].astype(float)
    return A, b, cost


def solve_reference(scale, capacity, c, c_z, a, z_coef, rhs, use_z, tol=TOLERANCE,
                    max_iter=MAX_ITERATIONS):
    """(X, z, status, iterations), as :func:`sim.policies.gavel_ipm.solve`."""
    n, m = np.shape(c)
    A, b, cost = dense_lp(scale, capacity, c, c_z, a, z_coef, rhs, use_z)
    rows, cols = A.shape
    Abar = np.hstack([A, np.eye(rows)])              # row slacks w as variables
    cbar = np.r_[cost, np.zeros(rows)]
    v = np.r_[np.full(n * m, 1.0 / m), np.ones(cols - n * m), np.ones(rows)]
    y, s = np.zeros(rows), np.ones(cols + rows)
    bnorm, cnorm = 1.0 + np.max(np.abs(b)), 1.0 + np.max(np.abs(cost), initial=0.0)

    def split(vec):
        return vec[: n * m].reshape(n, m), (vec[n * m] if cols > n * m else 0.0)

    for it in range(max_iter + 1):
        rp, rd = b - Abar @ v, cbar - Abar.T @ y - s
        mu = v @ s / v.size
        pinf, dinf = np.max(np.abs(rp)) / bnorm, np.max(np.abs(rd)) / cnorm
        if not np.isfinite([pinf, dinf, mu]).all():
            return *split(v), 2, it
        if pinf <= tol and dinf <= tol and abs(cbar @ v - b @ y) <= tol * (1 + abs(cbar @ v)):
            return *split(v), 0, it
        if it == max_iter:
            break
        theta = v / s
        # the augmented (KKT) system in (dv, dy): -diag(s / v) dv + Abar' dy = rhat,
        # Abar dv = rp; LU with pivoting on it keeps digits that the normal equations
        # ``Abar Theta Abar' dy = rp + Abar Theta rhat`` lose on degenerate problems
        K = np.block([[-np.diag(s / v), Abar.T], [Abar, np.zeros((rows, rows))]])
        dv = ds = None
        step_p = step_d = 0.0
        for phase in range(2):
            if phase == 0:
                rc = -v * s
            else:
                mu_aff = (v + step_p * dv) @ (s + step_d * ds) / v.size
                rc = (mu_aff / mu) ** 3 * mu - v * s - dv * ds
            rhat = rd - rc / v
            try:
                sol = np.linalg.solve(K, np.r_[rhat, rp])
            except np.linalg.LinAlgError:       # singular to working precision
                return *split(v), 2, it
            dv, dy = sol[: v.size], sol[v.size:]
            ds = (rc - s * dv) / v
            step_p, step_d = _max_step(v, dv), _max_step(s, ds)
        step_p, step_d = min(1.0, STEP_FRACTION * step_p), min(1.0, STEP_FRACTION * step_d)
        v, y, s = v + step_p * dv, y + step_d * dy, s + step_d * ds
    return *split(v), 1, max_iter


def _max_step(v, dv):
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0
