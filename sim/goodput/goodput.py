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
from ..calibration.importers import import_pollux_profile, import_sia_profile
from ..calibration.models import PolluxParams, pollux_iter_time
from ..calibration.observations import even_max_per_node, group_observations
from ..learning.stats_efficiency import efficiency, noise_scale

__all__ = ["BATCH_CANDIDATES", "EPS", "fit_application", "gain", "throughput", "goodput", "optimize",
           "optimize_memo", "split_batch", "speedup_tables"]

#: Global batch sizes tried per configuration (Pollux: ``np.geomspace``'s default of 50).
BATCH_CANDIDATES = 50

#: Tolerance of the floor/ceil operations on batch sizes (Pollux's ``eps``).
EPS = 1e-8


@lru_cache(maxsize=None)
def fit_application(folder: str, suffix: str | None = None) -> PolluxParams:
    """The 7-parameter model of one profile folder (placements and scalability rows; with
    ``suffix``, Sia's ``placements-<suffix>.csv`` of one GPU type), fitted by
    :func:`sim.calibration.fit.fit_pollux` with the per-server term ``beta_l`` pinned to 0."""
    table = import_sia_profile(folder, suffix) if suffix else import_pollux_profile(folder)
    obs = next(iter(group_observations(table).values()))
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


def split_batch(local_bsz, n_gpus, init_batch, max_atomic, accumulation: bool = True, dtype=float):
    """(atomic batch, accumulation steps) of a per-GPU batch, Pollux's rule (module docstring).
    ``dtype``: of the per-GPU batch and the steps' arithmetic (float32: :func:`float32_candidates`,
    with Python-int ``init_batch`` and ``max_atomic`` so that numpy keeps float32)."""
    local = np.asarray(local_bsz, dtype)
    r = np.asarray(n_gpus)
    if accumulation:
        s = np.ceil(local / max_atomic - EPS) - 1
        s = np.where((r == 1) & (local > init_batch + EPS), np.maximum(s, 1), s).astype(np.int64)
    else:
        s = np.zeros(local.shape, np.int64)
    return np.ceil(local / (s + 1) - EPS).astype(np.int64), s


def optimize(theta, grad_sqr, grad_var, init_batch, n_nodes, n_gpus, max_batch, atomic_range,
             accumulation: bool = True, float32_batches: bool = False):
    """Best (goodput, atomic batch, accumulation steps) at each ``(n_nodes, n_gpus)`` (arrays).
    ``float32_batches``: the candidate batches in float32 as the Sia simulator computes them
    (:func:`float32_candidates`)."""
    n = np.atleast_1d(np.asarray(n_nodes, float))
    r = np.atleast_1d(np.asarray(n_gpus, float))
    lo_b, hi_b = atomic_range
    if float32_batches:
        atomic, steps = float32_candidates(r, int(init_batch), int(lo_b), int(hi_b), int(max_batch),
                                           accumulation)
    else:
        lo = np.maximum(init_batch, lo_b * r)
        batch = np.geomspace(lo, max_batch, BATCH_CANDIDATES)            # [candidates, configs]
        atomic, steps = split_batch(batch / r, r, init_batch, hi_b, accumulation)
    g = goodput(theta, grad_sqr, grad_var, init_batch, n, r, atomic, steps)
    g = np.where((atomic >= lo_b) & (atomic <= hi_b), g, 0.0)
    best = np.argmax(g, axis=0)
    cols = np.arange(g.shape[1])
    return g[best, cols], atomic[best, cols], steps[best, cols]


class OptimizeMemo:
    """:func:`optimize` remembered by its arguments' exact bits (dtype, shape and bytes of each): a
    pure function, so a remembered answer is the answer, bit for bit.  Jobs of one application
    share fitted models (:func:`sim.goodput.observed._fit_points`) and gradient statistics, and a
    job's statistics and model change only at epoch ends and new configurations, so most calls of
    a run repeat (Sia, saturn workload-1: 18,816 distinct of 51,731).  At most ``size`` answers are
    kept (the oldest dropped first); answers are read-only."""

    def __init__(self, size: int = 1 << 16) -> None:
        self.size = int(size)
        self._answers: dict[tuple, tuple] = {}
        self.hits = self.misses = 0

    def __call__(self, *args, **kwargs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = tuple(_exact_key(a) for a in args) + tuple(sorted(kwargs.items()))
        out = self._answers.get(key)
        if out is not None:
            self.hits += 1
            return out
        self.misses += 1
        out = optimize(*args, **kwargs)
        for a in out:
            a.flags.writeable = False
        if len(self._answers) >= self.size:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = out
        return out


def _exact_key(value) -> tuple:
    a = np.asarray(value)
    return a.dtype.str, a.shape, a.tobytes()


#: the memo the job model and Sia's goodput rows share
optimize_memo = OptimizeMemo()


def float32_candidates(r: np.ndarray, init_batch: int, lo_b: int, hi_b: int, max_batch: int,
                       accumulation: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(atomic batch, accumulation steps) of the candidate batches [candidates, configs] as the Sia
    simulator computes them: its ``_compute_goodputs_v2`` passes the GPU counts as float32, so
    numpy 1.23 (its stack) draws the candidates, per-GPU batches and accumulation steps in float32
    (``GoodputFunction.optimize``).  Where the
    smallest batch equals the largest (``b_min r`` = the workload's batch size), the inner
    candidates come out as e.g. 64.00001 instead of 64, and a per-GPU batch of 4.0000005 rounds
    up to 5: their row scores the configuration at a batch above the cap.  Written out step by
    step so that numpy 2 gives the same bits (its own ``geomspace`` differs)."""
    r32 = np.asarray(r, np.float32)
    lo = np.maximum(np.float32(init_batch), np.float32(lo_b) * r32)
    batch = _geomspace_numpy123(lo, np.float32(max_batch), BATCH_CANDIDATES)
    return split_batch(batch / r32, r32, int(init_batch), int(hi_b), accumulation, dtype=np.float32)


def _geomspace_numpy123(start: np.ndarray, stop: np.float32, num: int) -> np.ndarray:
    """numpy 1.23's ``geomspace(start, stop, num)`` of a float32 array and a scalar, every step in
    float32: logarithms, its ``linspace`` (a float32 ``arange`` times the step, or divided by
    ``num - 1`` then times the span where a step is 0), the power of 10, the exact endpoints.
    The logarithms and powers are taken in float64 and rounded to float32 (:func:`_f32`): numpy
    2.4's own float32 ``log10`` on AVX-512 differs in the last bit on some inputs and fails 7 of
    the test's 60 digests of the Sia simulator's candidates; the rounded float64 values pass all
    60 with numpy's AVX-512 code on and off."""
    log_start, log_stop = _f32(np.log10, start), _f32(np.log10, stop)
    delta = log_stop - log_start
    div = np.float32(num - 1)
    y = np.arange(num, dtype=np.float32).reshape(-1, 1)
    step = delta / div
    y = (y / div) * delta if np.any(step == 0) else y * step
    y = y + log_start
    y[-1] = log_stop
    out = _f32(np.power, 10.0, y)
    out[0], out[-1] = start, stop
    return out


def _f32(fn, *args) -> np.ndarray:
    """``fn`` of float32 arguments evaluated in float64, the result rounded to float32: the
    correctly rounded value but for double rounding, whatever SIMD code numpy picks for float32
    on this machine (glibc's own ``log10f`` is not correctly rounded everywhere)."""
    return np.asarray(fn(*(np.asarray(a, np.float64) for a in args)), np.float64).astype(np.float32)


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
