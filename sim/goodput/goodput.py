"""Goodput = throughput x statistical efficiency (algorithms.md §5.5; Pollux, OSDI'21).

* **Throughput** (samples/s) of ``r`` GPUs on ``n`` nodes at per-GPU (atomic) batch ``b`` with
  ``s`` accumulation steps: ``r * b * (s + 1) / T_iter``, with ``T_iter`` the 7-parameter Pollux
  step-time model fitted by :mod:`sim.calibration.fit` (:func:`fit_application`, the same fit,
  ``beta_l`` pinned to 0 as in Pollux) and evaluated by :func:`sim.calibration.models.pollux_iter_time`.
* **Statistical efficiency** of a global batch ``M``: ``EFF(M) = (phi + M0) / (phi + M)`` with the
  gradient noise scale ``phi = M0 * var / sqr`` (:mod:`sim.learning.stats_efficiency`); the
  *gain* of a step is ``M / M0 * EFF(M)``: the initial-batch steps it is worth.
* **Batch-size optimization** (:func:`optimize`, Pollux's ``GoodputFunction.optimize``):
  :data:`BATCH_CANDIDATES` global batches spaced geometrically between ``max(M0, r * b_min)`` and the
  largest batch; each is split into atomic batches and accumulation steps (``s = ceil(local /
  b_max) - 1``, at least 1 on one GPU above ``M0``, where the noise estimate needs two
  micro-batches); configurations with an atomic batch outside ``[b_min, b_max]`` get 0; the
  best is kept.  Vectorized over many ``(n, r)`` at once.
* **Speedup tables** (:func:`speedup_table`): goodput of the best batch at ``(n, r)`` over the
  goodput at a base configuration, for every node and GPU count up to the job's limits.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np

from ..calibration.fit import fit_pollux
from ..calibration.importers import import_pollux_profile
from ..calibration.models import PolluxParams, pollux_iter_time
from ..calibration.observations import even_max_per_node, group_observations
from ..learning.stats_efficiency import efficiency, noise_scale

__all__ = ["BATCH_CANDIDATES", "EPS", "fit_application", "gain", "throughput", "goodput", "optimize",
           "split_batch", "speedup_tables"]

#: Global batch sizes tried per configuration (Pollux: ``np.geomspace``'s default of 50).
BATCH_CANDIDATES = 50

#: Tolerance of the floor/ceil operations on batch sizes (Pollux's ``eps``).
EPS = 1e-8


@lru_cache(maxsize=None)
def fit_application(folder: str) -> PolluxParams:
    """The 7-parameter model of one profile folder (placements and scalability rows), fitted by
    :func:`sim.calibration.fit.fit_pollux` with the per-server term ``beta_l`` pinned to 0."""
    obs = next(iter(group_observations(import_pollux_profile(folder)).values()))
    obs = dataclasses.replace(obs, max_per_node=even_max_per_node(obs.n_gpus, obs.n_nodes))
    return fit_pollux(obs, emit_warnings=False).params


def gain(batch, init_batch, grad_sqr, grad_var) -> np.ndarray:
    """Initial-batch steps one step at ``batch`` is worth: ``M / M0 * EFF(M)``."""
    b = np.asarray(batch, float)
    phi = np.where(np.asarray(grad_sqr) > 0, noise_scale(grad_sqr, grad_var, init_batch), 0.0)
    return b / init_batch * efficiency(b, init_batch, np.maximum(phi, 0.0))


def throughput(theta: np.ndarray, n_nodes, n_gpus, atomic_bsz, accum_steps) -> np.ndarray:
    """Samples per second of the model ``theta`` (PolluxParams.as_array())."""
    t = pollux_iter_time(theta, atomic_bsz, n_nodes, n_gpus, accum_steps)
    return np.asarray(n_gpus, float) * np.asarray(atomic_bsz, float) * (np.asarray(accum_steps) + 1) / t


def goodput(theta, grad_sqr, grad_var, init_batch, n_nodes, n_gpus, atomic_bsz, accum_steps) -> np.ndarray:
    """Progress (initial-batch steps) per second: ``throughput / M0 * EFF``."""
    batch = np.asarray(n_gpus) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
    thr = throughput(theta, n_nodes, n_gpus, atomic_bsz, accum_steps)
    return thr / batch * gain(batch, init_batch, grad_sqr, grad_var)


def split_batch(local_bsz, n_gpus, init_batch, max_atomic, accumulation: bool = True):
    """(atomic batch, accumulation steps) of a per-GPU batch, Pollux's rule (module docstring)."""
    local = np.asarray(local_bsz, float)
    r = np.asarray(n_gpus)
    if accumulation:
        s = np.ceil(local / max_atomic - EPS) - 1
        s = np.where((r == 1) & (local > init_batch + EPS), np.maximum(s, 1), s).astype(np.int64)
    else:
        s = np.zeros(local.shape, np.int64)
    return np.ceil(local / (s + 1) - EPS).astype(np.int64), s


def optimize(theta, grad_sqr, grad_var, init_batch, n_nodes, n_gpus, max_batch, atomic_range,
             accumulation: bool = True):
    """Best (goodput, atomic batch, accumulation steps) at each ``(n_nodes, n_gpus)`` (arrays)."""
    n = np.atleast_1d(np.asarray(n_nodes, float))
    r = np.atleast_1d(np.asarray(n_gpus, float))
    lo_b, hi_b = atomic_range
    lo = np.maximum(init_batch, lo_b * r)
    batch = np.geomspace(lo, max_batch, BATCH_CANDIDATES)            # [candidates, configs]
    atomic, steps = split_batch(batch / r, r, init_batch, hi_b, accumulation)
    g = goodput(theta, grad_sqr, grad_var, init_batch, n, r, atomic, steps)
    g = np.where((atomic >= lo_b) & (atomic <= hi_b), g, 0.0)
    best = np.argmax(g, axis=0)
    cols = np.arange(g.shape[1])
    return g[best, cols], atomic[best, cols], steps[best, cols]


def speedup_tables(theta, grad_sqr, grad_var, init_batch, max_batch, min_atomic, max_atomic,
                   max_nodes: int, max_gpus, base: tuple[int, int] = (1, 1)) -> np.ndarray:
    """``S[j, n, r]``: job j's best goodput on n nodes and r GPUs over its best at ``base`` =
    (nodes, GPUs); 0 where n > r, n = 0, or r is 0 or above ``max_gpus[j]``.  Every argument but
    ``max_nodes`` and ``base`` is per job (``theta`` is [J, 7 or 8]); one vectorized
    :func:`optimize` call over all jobs and configurations."""
    theta = np.atleast_2d(np.asarray(theta, float))
    cap = np.asarray(max_gpus, np.int64)
    n_jobs, r_max = theta.shape[0], int(cap.max(initial=1))
    jj, nn, rr = np.meshgrid(np.arange(n_jobs), np.arange(1, max_nodes + 1), np.arange(1, r_max + 1),
                             indexing="ij")
    ok = (nn <= rr) & (rr <= cap[jj])
    j, n, r = jj[ok], nn[ok], rr[ok]
    j = np.concatenate([j, np.arange(n_jobs)])
    n = np.concatenate([n, np.full(n_jobs, base[0])])
    r = np.concatenate([r, np.full(n_jobs, base[1])])
    per = [np.asarray(x, float)[j] for x in (grad_sqr, grad_var, init_batch, max_batch, min_atomic, max_atomic)]
    g = optimize(theta[j], per[0], per[1], per[2], n, r, per[3], (per[4], per[5]))[0]
    g0 = g[-n_jobs:]
    out = np.zeros((n_jobs, max_nodes + 1, r_max + 1))
    k = ok.sum()
    out[j[:k], n[:k], r[:k]] = g[:k] / np.where(g0 > 0, g0, np.inf)[j[:k]]
    return out
