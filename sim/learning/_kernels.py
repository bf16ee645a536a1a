"""Numba kernels of the learning dynamics (:mod:`sim.learning.dynamics` has the formulas).

Plain arrays in, plain arrays out: the batched micro controller (:func:`micro_update_batch`,
the twin of :class:`sim.micro.MicroController`), the surrogate entropy signal
(:func:`surrogate_u`) and the rate factors of placed jobs (:func:`rate_factors`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .spec import DynamicsConfig

__all__ = ["micro_update_batch", "surrogate_u", "rate_factors"]


@njit(cache=True)
def _project(target, lo, hi, total, out):
    """Euclidean projection onto {sum w = total, lo <= w <= hi} (sim.micro.project_box_simplex)."""
    K = target.shape[0]
    a = np.inf
    b = -np.inf
    for i in range(K):
        a = min(a, lo[i] - target[i])
        b = max(b, hi[i] - target[i])
    a -= 1.0
    b += 1.0
    for _ in range(200):
        mid = 0.5 * (a + b)
        if b - a <= 4e-16 * max(1.0, abs(a), abs(b)):
            break              # tau known to ~1 ulp of the weights: w cannot change any more
        s = 0.0
        for i in range(K):
            s += min(max(target[i] + mid, lo[i]), hi[i])
        if s < total:
            a = mid
        else:
            b = mid
    t = 0.5 * (a + b)
    s = 0.0
    nfree = 0
    for i in range(K):
        out[i] = min(max(target[i] + t, lo[i]), hi[i])
        s += out[i]
    for i in range(K):
        if out[i] > lo[i] + 1e-15 and out[i] < hi[i] - 1e-15:
            nfree += 1
    if nfree > 0:
        add = (total - s) / nfree
        for i in range(K):
            if out[i] > lo[i] + 1e-15 and out[i] < hi[i] - 1e-15:
                out[i] = min(max(out[i] + add, lo[i]), hi[i])


@njit(cache=True)
def _allocate(shares, total, lo, hi, out, sh, lof, hif, target, frac, order):
    """Integers near shares * total summing to total within [lo, hi] (sim.micro.allocate_integers).
    sh, lof, hif, target, frac (float) and order (int) are scratch of length K."""
    K = shares.shape[0]
    s = 0.0
    for i in range(K):
        s += shares[i]
    for i in range(K):
        sh[i] = shares[i] / s * total if s > 0 else total / K
        lof[i] = lo[i]
        hif[i] = hi[i]
    _project(sh, lof, hif, float(total), target)
    rem = total
    for i in range(K):
        v = np.int64(math.floor(target[i] + 1e-9))
        v = min(max(v, lo[i]), hi[i])
        out[i] = v
        rem -= v
        frac[i] = target[i] - v
    if rem == 0:
        return
    step = 1 if rem > 0 else -1
    # stable order by -frac (rem > 0) or frac (rem < 0), ties by index: insertion sort
    for i in range(K):
        order[i] = i
    for i in range(1, K):
        k = order[i]
        key = -frac[k] if step > 0 else frac[k]
        j = i - 1
        while j >= 0 and (-frac[order[j]] if step > 0 else frac[order[j]]) > key:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = k
    while rem != 0:
        moved = False
        for j in range(K):
            k = order[j]
            if rem == 0:
                break
            if (step > 0 and out[k] < hi[k]) or (step < 0 and out[k] > lo[k]):
                out[k] += step
                rem -= step
                moved = True
        if not moved:
            break


@njit(cache=True)
def _micro_one(u, ubar, has_ubar, w, b, K, B, beta_u, gamma, w_lo, w_hi, rl, b_min,
               enabled, prev_U, kappa_lr, delta_eta, eps, fs, ns):
    """One epoch of the micro controller for one job; updates ubar, w, b in place.
    fs: float scratch [9, >= K]; ns: int scratch [4, >= K].
    Returns (U, lr_factor, batch_changed)."""
    for i in range(K):
        x = u[i]
        x = 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)
        ubar[i] = beta_u * ubar[i] + (1.0 - beta_u) * x if has_ubar else x
    newb = ns[0, :K]
    lo_b = ns[1, :K]
    hi_b = ns[2, :K]
    for i in range(K):
        lo_b[i] = b_min
        hi_b[i] = B
    if enabled:
        raw = fs[0, :K]
        s = 0.0
        for i in range(K):
            raw[i] = max(ubar[i], 0.0) ** gamma
            s += raw[i]
        for i in range(K):
            raw[i] = raw[i] / s if s > 0 else 1.0 / K
        lo = fs[1, :K]
        hi = fs[2, :K]
        for i in range(K):
            lo[i] = max(w_lo, w[i] - rl)
            hi[i] = min(w_hi, w[i] + rl)
        nw = fs[3, :K]
        _project(raw, lo, hi, 1.0, nw)
        for i in range(K):
            w[i] = nw[i]
    else:
        for i in range(K):
            w[i] = 1.0 / K
    _allocate(w, B, lo_b, hi_b, newb, fs[4, :K], fs[5, :K], fs[6, :K], fs[7, :K], fs[8, :K],
              ns[3, :K])
    changed = False
    for i in range(K):
        if newb[i] != b[i]:
            changed = True
        b[i] = newb[i]
    U = 0.0
    for i in range(K):
        U += w[i] * ubar[i]
    if not enabled or np.isnan(prev_U):
        f = 1.0
    else:
        rel = (U - prev_U) / max(prev_U, eps)
        f = min(max(1.0 + kappa_lr * rel, 1.0 - delta_eta), 1.0 + delta_eta)
    return U, f, changed


def micro_update_batch(rows, u, ubar, has_ubar, w, b, K, B, cfg: DynamicsConfig, enabled: bool,
                       prev_U, n_epochs=None):
    """Vectorized entry point: one update for each row ``r`` of ``rows``, with ``u[r, :K[r]]``;
    updates the ``[n, K_cap]`` arrays in place.  ``n_epochs[r]`` > 1 merges that many epochs
    of the same ``u`` into one update: EMA weight ``beta_u ** n`` and rate limit
    ``n * rate_limit`` (exact for the EMA, a relaxation of n successive rate limits).
    Returns (U, lr_factor, batch_changed) per row."""
    rows = np.asarray(rows, np.int64)
    n_ep = np.ones(rows.size) if n_epochs is None else np.asarray(n_epochs, float)
    return _micro_rows(rows, np.ascontiguousarray(u, float), ubar, has_ubar,
                       w, b, np.asarray(K, np.int64), np.asarray(B, np.int64), cfg.beta_u, cfg.gamma,
                       cfg.w_min_k, cfg.w_max_k, cfg.rate_limit_k, cfg.b_min, enabled,
                       np.asarray(prev_U, float), cfg.kappa_lr, cfg.delta_eta, cfg.eps, n_ep)


@njit(cache=True)
def _micro_rows(rows, u, ubar, has_ubar, w, b, K, B, beta_u, gamma, w_min_k, w_max_k, rl_k,
                b_min, enabled, prev_U, kappa_lr, delta_eta, eps, n_ep):
    n = rows.shape[0]
    U = np.empty(n)
    f = np.empty(n)
    ch = np.zeros(n, np.bool_)
    kc = ubar.shape[1]
    fs = np.empty((9, kc))
    ns = np.empty((4, kc), np.int64)
    for r in range(n):
        j = rows[r]
        k = K[r]
        U[r], f[r], ch[r] = _micro_one(u[r, :k], ubar[j, :k], has_ubar[j], w[j, :k], b[j, :k], k,
                                       B[r], beta_u ** n_ep[r], gamma, w_min_k / k, w_max_k / k,
                                       n_ep[r] * rl_k / k, b_min, enabled, prev_U[r], kappa_lr,
                                       delta_eta, eps, fs, ns)
        has_ubar[j] = True
    return U, f, ch


@njit(cache=True)
def _splitmix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _hash_normal(seed, job, epoch, worker):
    """A standard normal from a counter-based hash (deterministic, order independent)."""
    h = _splitmix(np.uint64(seed) * np.uint64(0x100000001B3) ^ np.uint64(job))
    h = _splitmix(h ^ (np.uint64(epoch) * np.uint64(0x9E3779B1)))
    h = _splitmix(h ^ (np.uint64(worker) + np.uint64(0x85EBCA6B)))
    h2 = _splitmix(h)
    u1 = ((h >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740993.0)
    u2 = (h2 >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@njit(cache=True)
def surrogate_u(jobs, epochs, xs, K, q, kappa, diff, seed, H0, H_inf, sigma_u, noise_scale, out):
    """u[r, k] = clip(H(x_r) * d[job, k] + sigma_u * N, 0, 1)."""
    for r in range(jobs.shape[0]):
        j = jobs[r]
        x = min(max(xs[r], 0.0), 1.0)
        H = H_inf + (H0 - H_inf) * (1.0 - q[j]) ** (x ** kappa[r])
        for k in range(K[r]):
            v = H * diff[j, k] + sigma_u * noise_scale[r] * _hash_normal(seed, j, epochs[r], k)
            out[r, k] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


@njit(cache=True)
def rate_factors(ids, K, indptr, nodes, counts, node_speed, w, b, diff, alpha, beta, s_intra,
                  s_inter, B, M0, demand, phi, tta, shard, gain_cap, lr_pen, out_scale, out_spw):
    """Per placed job: the rate scale and the samples per work unit (module docstring)."""
    for a in range(ids.shape[0]):
        j = ids[a]
        k = K[a]
        lo, hi = indptr[a], indptr[a + 1]
        if k <= 0 or hi <= lo:
            out_scale[a] = 1.0
            out_spw[a] = B[a]
            continue
        speeds = np.empty(k)
        m = 0
        for e in range(lo, hi):
            for _ in range(counts[e]):
                if m < k:
                    speeds[m] = node_speed[nodes[e]]
                    m += 1
        smin = np.inf
        for i in range(k):
            smin = min(smin, speeds[i])
        sync = 0.0 if k == 1 else (s_intra[a] if hi - lo == 1 else s_inter[a])
        t0 = (alpha[a] + beta[a] * B[a] / k) / smin + sync
        tm = 0.0
        steps = 0.0
        gsum = 0.0
        dsum = 0.0
        for i in range(k):
            bi = max(b[j, i], 1)
            tm = max(tm, (alpha[a] + beta[a] * bi) / speeds[i])
            sig = w[j, i] if shard else 1.0 / k
            steps = max(steps, sig * B[a] / bi)
            gsum += sig * diff[j, i]
            dsum += diff[j, i]
        tm += sync
        balance = t0 / (tm * steps)
        if tta[a]:
            g = gsum / (dsum / k)
            g = min(max(g, 1.0), gain_cap)
            eff = (phi[a] + M0[a]) / (phi[a] + B[a])
            prog = (k / demand[a]) * eff * g * lr_pen[a]
            out_scale[a] = balance * prog
            out_spw[a] = M0[a] / (eff * g * lr_pen[a])
        else:
            out_scale[a] = balance
            out_spw[a] = B[a]
