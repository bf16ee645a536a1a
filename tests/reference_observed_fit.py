"""Plain-Python reference of the online fit's per-point terms (sim/goodput/observed_kernels.py):
the numpy expressions ``observed_kernels.fit_terms`` replaced in ``observed._objective``."""
from __future__ import annotations

import numpy as np

from sim.calibration.models import LOWER_BOUND


def _network_terms(x, nodes, gpus):
    """(network time, index of its alpha or -1, its retrogression multiplier): the inter-node terms
    (2, 3) on several nodes, the intra-node ones (4, 5) on several GPUs of one node, else 1e-8."""
    which = np.where(nodes > 1, 2, np.where(gpus > 1, 4, -1))
    alpha = np.where(which >= 0, x[np.maximum(which, 0)], LOWER_BOUND)
    beta = np.where(which >= 0, x[np.maximum(which, 0) + 1], LOWER_BOUND)
    retro = np.maximum(gpus - 2, LOWER_BOUND)
    return alpha + beta * retro, which, retro


def fit_terms_reference(x, nodes, gpus, bsz, log_compute, log_step):
    """(err1, derr1, err2, derr2): the log errors of the compute and step times per point and their
    derivatives ``[7, points]``, as numpy expressions."""
    g = x[6]
    compute = x[0] + x[1] * bsz
    net, which, retro = _network_terms(x, nodes, gpus)
    cg, ng = compute ** g, net ** g
    total = cg + ng
    d_compute = np.zeros((7, bsz.shape[0]))
    d_compute[0], d_compute[1] = 1.0, bsz
    d_log_step = d_compute * (cg / compute / total)
    for k in (2, 4):
        on = which == k
        d_log_step[k] = np.where(on, ng / net / total, 0.0)
        d_log_step[k + 1] = d_log_step[k] * retro
    d_log_step[6] = (cg * np.log(compute) + ng * np.log(net)) / (g * total) - np.log(total) / g ** 2
    return (np.log(compute) - log_compute, d_compute / compute,
            np.log(total) / g - log_step, d_log_step)
