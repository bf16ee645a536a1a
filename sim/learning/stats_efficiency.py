"""Pollux-style statistical efficiency (algorithms.md §5.5; Qiao et al., OSDI'21).

With a gradient noise scale ``phi`` (samples) and the reference batch ``M0``, a step at
global batch ``M`` makes the progress of ``M / M0 * EFF(M)`` reference steps, where::

    EFF(M) = (phi + M0) / (phi + M)                 [S: petuum/adaptdl goodput.py]
    phi    = M0 * grad_var / grad_sqr               (gradient statistics at batch M0)

``EFF(M0) = 1``; ``EFF < 1`` for ``M > M0`` and ``> 1`` below.  The noise scale grows as
training proceeds, so large batches get more efficient late in training.  Our surrogate of
that growth (fitted per model profile, :mod:`sim.learning.surrogate`) is linear in the
profile's progress, the form of algorithms.md §2.2 (``phi0 * (1 + 9 s)``) with both
constants fitted [I]::

    phi(P) = phi0 + phi_slope * P / P_end

All functions are vectorized numpy; the policy's hot path uses the Numba twins in
:mod:`sim.learning.dynamics`.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["efficiency", "noise_scale", "phi_at", "progress_per_iteration", "fit_phi_linear",
           "realized_efficiency"]


def efficiency(batch, ref_batch, phi) -> np.ndarray:
    """EFF(M) = (phi + M0) / (phi + M), elementwise (float64)."""
    M = np.asarray(batch, float)
    M0 = np.asarray(ref_batch, float)
    p = np.asarray(phi, float)
    if (M <= 0).any() or (M0 <= 0).any() or (p < 0).any():
        raise ConfigError("efficiency needs batch > 0, ref_batch > 0 and phi >= 0")
    return (p + M0) / (p + M)


def noise_scale(grad_sqr, grad_var, ref_batch) -> np.ndarray:
    """Gradient noise scale in samples, ``phi = M0 * var / sqr`` (Pollux)."""
    sqr = np.asarray(grad_sqr, float)
    var = np.asarray(grad_var, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(ref_batch, float) * var / sqr


def phi_at(phi0, slope, progress_frac) -> np.ndarray:
    """``phi0 + slope * P / P_end`` with ``progress_frac = P / P_end``."""
    return np.asarray(phi0, float) + np.asarray(slope, float) * np.asarray(progress_frac, float)


def progress_per_iteration(n_gpus, demand, phi, ref_batch) -> np.ndarray:
    """Reference iterations of progress made by one iteration at ``n_gpus`` GPUs.

    Weak scaling with a fixed per-GPU batch ``b``: the global batch is ``n * b`` and the
    reference batch is the job's batch at its requested count, ``M0 = demand * b``, so the
    factor is ``(n / demand) * EFF(n * b)``; it is exactly 1 at ``n = demand``.
    """
    n = np.asarray(n_gpus, float)
    d = np.asarray(demand, float)
    M0 = np.asarray(ref_batch, float)
    B = M0 * n / d
    return (n / d) * (np.asarray(phi, float) + M0) / (np.asarray(phi, float) + B)


def realized_efficiency(progress, iteration, batch, ref_batch) -> tuple[np.ndarray, np.ndarray]:
    """Per interval of a Pollux validation run: (mid progress, EFF = dP * M0 / (dIter * B)).

    Pollux's ``progress`` counts reference-batch steps weighted by efficiency, so the ratio
    of progress to samples over an interval is the efficiency realized over it.
    """
    P = np.asarray(progress, float)
    it = np.asarray(iteration, float)
    dP, dI = np.diff(P), np.diff(it)
    ok = (dI > 0) & (dP > 0)
    mid = 0.5 * (P[1:] + P[:-1])
    return mid[ok], dP[ok] * float(ref_batch) / (dI[ok] * float(batch))


def _fit_phi(resid_of_phi, frac, n_obs, max_phi, seeds):
    from scipy.optimize import least_squares

    def resid(theta):
        return resid_of_phi(np.exp(theta[0]) + np.exp(theta[1]) * frac)

    best = None
    for lp in seeds:
        for ls in seeds:
            r = least_squares(resid, [lp, ls], bounds=([np.log(1e-3), np.log(1e-3)],
                                                       [np.log(max_phi), np.log(max_phi)]))
            if best is None or r.cost < best.cost:
                best = r
    rmse = float(np.sqrt(np.mean(best.fun ** 2))) if n_obs else float("nan")
    return float(np.exp(best.x[0])), float(np.exp(best.x[1])), rmse


def fit_phi_linear(frac, eff, batch, ref_batch, max_phi: float = 1e9) -> tuple[float, float, float]:
    """Fit ``phi(frac) = phi0 + slope * frac`` to efficiencies observed at batch sizes.

    Least squares on ``log EFF`` (scipy); returns (phi0, slope, rmse of log EFF).
    Observations with ``EFF >= 1`` say only "phi is large" and are clipped to 0.999.
    """
    frac = np.asarray(frac, float)
    eff = np.clip(np.asarray(eff, float), 1e-3, 0.999)
    B = np.asarray(batch, float)
    M0 = float(ref_batch)
    if frac.size == 0:
        return max_phi, 0.0, float("nan")
    seeds = [np.log(M0), np.log(10 * M0), np.log(100 * M0), np.log(1000 * M0)]
    return _fit_phi(lambda phi: np.log((phi + M0) / (phi + B)) - np.log(eff), frac, frac.size,
                    max_phi, seeds)


def fit_phi_loglinear(frac, phi_obs, max_phi: float = 1e9) -> tuple[float, float, float]:
    """Fit ``phi(frac) = phi0 + slope * frac`` to observed noise scales (gradient
    statistics), least squares on ``log phi``; returns (phi0, slope, rmse of log phi)."""
    frac = np.asarray(frac, float)
    phi_obs = np.asarray(phi_obs, float)
    ok = np.isfinite(phi_obs) & (phi_obs > 0)
    frac, lp = frac[ok], np.log(np.minimum(phi_obs[ok], max_phi))
    if frac.size == 0:
        return max_phi, 0.0, float("nan")
    seeds = [float(np.min(lp)), float(np.median(lp)), float(np.max(lp))]
    return _fit_phi(lambda phi: np.log(phi) - lp, frac, frac.size, max_phi, seeds)
