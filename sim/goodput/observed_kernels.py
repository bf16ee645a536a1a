"""Numba kernel of the online fit's per-point terms (:func:`sim.goodput.observed.fit_observed`).

One L-BFGS-B fit evaluates its objective about 40 times on a handful of points; written as numpy
expressions each evaluation was some 50 small-array calls (about 0.15 ms), a quarter of a Sia run.
:func:`fit_terms` computes the per-point errors and their derivatives in one pass, operation for
operation as the numpy expressions they replace (``tests/reference_observed_fit.py``), so each
element has the same bits where numpy's ``log`` and ``power`` are the C library's (x86-64
without AVX-512, as here); the reductions (the means and the ``derr @ err`` products) stay in
numpy, whose summation order a loop would not reproduce.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..calibration.models import LOWER_BOUND

__all__ = ["fit_terms"]


@njit(cache=True)
def fit_terms(x, g2, nodes, gpus, bsz, log_compute, log_step):
    """(err1, derr1, err2, derr2) of the fit objective at parameters ``x`` (7) with ``g2`` =
    ``x[6] ** 2`` (computed by the caller, as numpy's scalar power): the log errors of the compute
    time and of the step time per point, and their derivatives ``[7, points]``."""
    n = bsz.shape[0]
    g = x[6]
    err1, err2 = np.empty(n), np.empty(n)
    derr1, derr2 = np.zeros((7, n)), np.zeros((7, n))
    for i in range(n):
        compute = x[0] + x[1] * bsz[i]
        k = 2 if nodes[i] > 1 else (4 if gpus[i] > 1 else -1)
        retro = max(gpus[i] - 2.0, LOWER_BOUND)
        alpha = x[k] if k >= 0 else LOWER_BOUND
        beta = x[k + 1] if k >= 0 else LOWER_BOUND
        net = alpha + beta * retro
        cg, ng = compute ** g, net ** g
        total = cg + ng
        log_c, log_t = np.log(compute), np.log(total)
        err1[i] = log_c - log_compute[i]
        derr1[0, i] = 1.0 / compute
        derr1[1, i] = bsz[i] / compute
        share = cg / compute / total
        derr2[0, i] = 1.0 * share
        derr2[1, i] = bsz[i] * share
        if k >= 0:
            on = ng / net / total
            derr2[k, i] = on
            derr2[k + 1, i] = on * retro
        derr2[6, i] = (cg * log_c + ng * np.log(net)) / (g * total) - log_t / g2
        err2[i] = log_t / g - log_step[i]
    return err1, derr1, err2, derr2
