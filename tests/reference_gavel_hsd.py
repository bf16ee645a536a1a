"""Plain reference of sim/policies/gavel_hsd.py: the same homogeneous self-dual iteration on
the same rows, with G built densely, Ruiz equilibration on the dense matrix and every
Newton step from ``numpy.linalg.solve`` (LU with pivoting) on the dense augmented system
(no normal equations, no job blocks, no Woodbury, no bordering, no refinement)."""
from __future__ import annotations

import numpy as np

EQUIL_ITERS, EQUIL_FLOOR = 3, 1e-6
GAMMA, STEP_MAX, STEP_MIN, SIGMA_MIN, SIGMA_MAX = 0.99, 0.999, 1e-6, 1e-4, 1.0
FEASTOL = ABSTOL = RELTOL = 1e-8


def dense_rows(scale, capacity, a=None, rhs=None, z_coef=0.0, use_z=False):
    """(G, h): rows -X <= 0, capacity, job, then (a given) ``z_coef z - a X <= rhs``;
    variables X flattened row-major, then z when ``use_z``."""
    n, m = len(scale), len(capacity)
    rows = a is not None
    use_z = use_z and rows
    G = np.zeros((n * m + m + n + (n if rows else 0), n * m + use_z))
    for i in range(n):
        for t in range(m):
            k = i * m + t
            G[k, k] = -1.0
            G[n * m + t, k] = scale[i]
            G[n * m + m + i, k] = 1.0
            if rows:
                G[n * m + m + n + i, k] = -a[i][t]
        if use_z:
            G[n * m + m + n + i, n * m] = z_coef
    h = np.r_[np.zeros(n * m), capacity, np.ones(n), rhs if rows else []].astype(float)
    return G, h


def equilibrate(G):
    G = G.copy()
    xe, ge = np.ones(G.shape[1]), np.ones(G.shape[0])
    root = np.vectorize(lambda v: 1.0 if abs(v) < EQUIL_FLOOR else np.sqrt(v))
    for _ in range(EQUIL_ITERS):
        col, row = root(np.abs(G).max(0)), root(np.abs(G).max(1))
        G = G / row[:, None] / col[None, :]
        xe, ge = xe * col, ge * row
    return G, xe, ge


def to_cone(r):
    lo = r.min()
    return r + (1.0 - lo if lo <= 0 else 1.0 - GAMMA)


def solve_reference(scale, capacity, c, c_z=0.0, a=None, z_coef=0.0, rhs=None, use_z=False,
                    max_iter=100):
    """(X, z, status, iterations) as :func:`sim.policies.gavel_hsd.solve`."""
    n, m = np.shape(c)
    use_z = use_z and a is not None
    G0, h0 = dense_rows(scale, capacity, a, rhs, z_coef, use_z)
    G, xe, ge = equilibrate(G0)
    h = h0 / ge
    c = np.r_[np.ravel(c), [c_z] if use_z else []] / xe
    rows = G.shape[0]

    def result(x, tau, status, it):
        v = x / xe / tau
        return v[:n * m].reshape(n, m), (v[n * m] if use_z else 0.0), status, it

    def kkt(w2, rx, rz):                    # G' dz = rx, -G dx + W^2 dz = rz: the augmented system
        nv = G.shape[1]
        K = np.block([[np.zeros((nv, nv)), G.T], [-G, np.diag(w2)]])
        sol = np.linalg.solve(K, np.r_[rx, rz])
        return sol[:nv], sol[nv:]

    x, z = kkt(np.ones(rows), np.zeros(len(c)), -h)
    s = to_cone(-z)
    z = to_cone(kkt(np.ones(rows), -c, np.zeros(rows))[1])
    tau = kap = 1.0
    for it in range(max_iter + 1):
        rx, rz = G.T @ z + c * tau, -G @ x + h * tau - s
        rt, sz = -c @ x - h @ z - kap, s @ z
        mu = (sz + tau * kap) / (rows + 1)
        pres = np.linalg.norm(rz) / max(max(1, np.linalg.norm(h)) + np.linalg.norm(x)
                                        + np.linalg.norm(s), 1) / tau
        dres = np.linalg.norm(rx) / max(max(1, np.linalg.norm(c)) + np.linalg.norm(z), 1) / tau
        pcost, dcost = c @ x / tau, -h @ z / tau
        relgap = sz / -pcost if pcost < 0 else (sz / dcost if dcost > 0 else np.nan)
        if ((-(c @ x) > 0 or -(h @ z) >= -ABSTOL) and pres < FEASTOL and dres < FEASTOL
                and (sz < ABSTOL or relgap < RELTOL)):
            return result(x, tau, 0, it)
        zn = max(1.0, np.linalg.norm(z))
        if (h @ z) / zn < -RELTOL and np.linalg.norm(G.T @ z) / zn < FEASTOL and tau < kap:
            return result(x, tau, 3, it)
        stuck = 4 if pres < 1e-4 and dres < 1e-4 and (sz < 5e-5 or relgap < 5e-5) else 2
        if it == max_iter:
            return result(x, tau, 1, it)
        w2 = s / z
        x1, z1 = kkt(w2, -c, -h)
        denom = -c @ x1 - h @ z1 + kap / tau

        def direction(f, rc, rk):
            x2, z2 = kkt(w2, -f * rx, -f * rz + rc / z)
            dtau = (-f * rt + c @ x2 + h @ z2 + rk / tau) / denom
            dz = z2 + dtau * z1
            return x2 + dtau * x1, dz, (rc - s * dz) / z, dtau, (rk - kap * dtau) / tau

        def max_step(dz, ds, dtau, dkap):
            ratios = [-v / d for v, d in zip(np.r_[z, s, tau, kap], np.r_[dz, ds, dtau, dkap])
                      if d < 0]
            return min(min(ratios, default=np.inf), STEP_MAX)

        _, dza, dsa, dta, dka = direction(1.0, -s * z, -tau * kap)
        sigma = min(max((1 - max_step(dza, dsa, dta, dka)) ** 3, SIGMA_MIN), SIGMA_MAX)
        dx, dz, ds, dtau, dkap = direction(1 - sigma, -s * z + sigma * mu - dsa * dza,
                                           -tau * kap + sigma * mu - dta * dka)
        step = GAMMA * max_step(dz, ds, dtau, dkap)
        if not step >= STEP_MIN:
            return result(x, tau, stuck, it)
        x, z, s = x + step * dx, z + step * dz, s + step * ds
        tau, kap = tau + step * dtau, kap + step * dkap
