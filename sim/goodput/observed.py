"""Throughput models fitted online from what a job has run (Pollux's and Sia's ``fit_perf_params``).

The authors' simulators (petuum/adaptdl ``simulator/``, siasosp23/artifacts ``sia-simulator/``
``job.py`` ``update_params``, ``goodput.py`` ``fit_perf_params``) do not give a job the model fitted
on its application's whole profile: each job keeps, per GPU type, the step and sync times of the
configurations ``(nodes, GPUs, atomic batch)`` it has actually run, and refits its 7-parameter
step-time model on those whenever a new configuration is seen.  A type the job has not run on has
no model (Sia bootstraps it from another type, :mod:`sim.policies.sia`).

The fit (:func:`fit_observed`), as ``fit_perf_params``:

* objective: RMS log error of the compute (accumulation) time ``alpha_c + beta_c b`` against
  ``step - sync``, plus that of the step time ``(T_c^gamma + T_n^gamma)^(1/gamma)`` against
  ``step``, plus ``1e-3 (gamma - 1)^2`` and ``1e-2 ((beta_n/alpha_n)^2 + (beta_r/alpha_r)^2)``;
  bounded (positive parameters >= 1e-8, ``1 <= gamma <= 10``) L-BFGS-B from ``alpha, beta = 0.1,
  0.01`` and ``gamma = 1.001``, tolerance 1e-5;
* **pins** from what was observed: one atomic batch size only -> ``alpha_c`` = half the mean
  compute time (optimistic about larger batches); no multi-node run -> ``alpha_n = beta_n`` =
  1e-8; no single-node multi-GPU run -> ``alpha_r = beta_r`` = 1e-8; never more than 2 GPUs ->
  ``beta_n = beta_r`` = 1e-8;
* **prior** after the fit when no multi-node run was seen: ``alpha_n >= 1.1 alpha_r``,
  ``beta_n >= 1.1 beta_r``.

So a job that has run on one GPU only predicts near-linear scaling, and one that has run a few
batch sizes on one node extrapolates to other node counts from those few points; Sia's decisions
follow these models, not the profile's.  The gradient here is analytic (theirs by
autograd): the same gradient, written out.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..blas import one_blas_thread
from ..calibration.models import LOWER_BOUND
from ..lbfgsb import lbfgsb
from .observed_kernels import fit_terms

__all__ = ["fit_observed", "ObservedProfiles"]

#: the 7 parameters: alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma (then beta_l = 0)
_START = np.array([1e-1, 1e-2] * 3 + [1.0 + 1e-3])
_LOWER = np.array([LOWER_BOUND] * 6 + [1.0])
_UPPER = np.array([np.inf] * 6 + [10.0])
#: the fit's tolerance (``tol`` of ``scipy.optimize.minimize``)
FIT_TOL = 1e-5
#: the prior's factor between inter-node and intra-node network terms when no multi-node run
NETWORK_PRIOR = 1.1


def _rms_and_grad(err: np.ndarray, derr: np.ndarray) -> tuple[float, np.ndarray]:
    """sqrt(mean(err^2)) and its gradient, from ``derr`` = d err / d x ([params, points])."""
    rms = float(np.sqrt(np.mean(err ** 2)))
    if rms == 0.0:
        return 0.0, np.zeros(derr.shape[0])
    return rms, (derr @ err) / (err.shape[0] * rms)


def _objective(x: np.ndarray, nodes, gpus, bsz, log_compute, log_step) -> tuple[float, np.ndarray]:
    """Pollux's fit objective (module docstring) and its gradient: the per-point terms by
    :func:`~sim.goodput.observed_kernels.fit_terms`, the reductions and the prior here."""
    g = x[6]
    err1, derr1, err2, derr2 = fit_terms(x, g ** 2, nodes, gpus, bsz, log_compute, log_step)
    rms1, grad1 = _rms_and_grad(err1, derr1)
    rms2, grad2 = _rms_and_grad(err2, derr2)
    reg = 1e-3 * (g - 1.0) ** 2 + 1e-2 * ((x[3] / x[2]) ** 2 + (x[5] / x[4]) ** 2)
    d_reg = np.zeros(7)
    d_reg[6] = 2e-3 * (g - 1.0)
    for a in (2, 4):
        d_reg[a + 1] = 2e-2 * x[a + 1] / x[a] ** 2
        d_reg[a] = -2e-2 * x[a + 1] ** 2 / x[a] ** 3
    return rms1 + rms2 + reg, grad1 + grad2 + d_reg


def _pinned(nodes, gpus, bsz, compute) -> dict[int, float]:
    """Parameter index -> value held fixed, from what was observed (module docstring)."""
    pins: dict[int, float] = {}
    if np.unique(bsz).size == 1:
        pins[0] = float(np.mean(compute)) / 2.0
    if not np.any(nodes > 1):
        pins[2] = pins[3] = LOWER_BOUND
    if not np.any((nodes == 1) & (gpus > 1)):
        pins[4] = pins[5] = LOWER_BOUND
    if not np.any(gpus > 2):
        pins[3] = pins[5] = LOWER_BOUND
    return pins


def fit_observed(nodes, gpus, bsz, step, sync) -> np.ndarray:
    """The 8-parameter model (:class:`~sim.calibration.models.PolluxParams` order, ``beta_l`` = 0)
    fitted to observed configurations: arrays of nodes, GPUs, atomic batch, step and sync times."""
    nodes, gpus, bsz, step, sync = (np.asarray(v, float) for v in (nodes, gpus, bsz, step, sync))
    compute = step - sync
    lo, hi, x0 = _LOWER.copy(), _UPPER.copy(), _START.copy()
    for i, v in _pinned(nodes, gpus, bsz, compute).items():
        lo[i] = hi[i] = x0[i] = v
    with one_blas_thread():                         # a 7-parameter fit: one BLAS thread is far faster
        x = lbfgsb(_objective, x0, lo, hi, FIT_TOL, args=(nodes, gpus, bsz, np.log(compute), np.log(step)))
    x = np.clip(x, lo, hi)
    if not np.any(nodes > 1):
        x[2] = max(x[2], x[4] * NETWORK_PRIOR)
        x[3] = max(x[3], x[5] * NETWORK_PRIOR)
    return np.append(x, 0.0)


@lru_cache(maxsize=1 << 14)
def _fit_points(points: tuple[tuple, ...]) -> np.ndarray:
    """:func:`fit_observed` of (nodes, GPUs, batch, step, sync) rows, remembered: jobs of one
    application run the same first configurations and read the same profile times, so many
    fit the same rows in the same order (the same fit, bit for bit).  Read-only result."""
    theta = fit_observed(*np.array(points, float).T)
    theta.flags.writeable = False
    return theta


class ObservedProfiles:
    """Per job and GPU type: the configurations run, their (step, sync) times, and the model fitted
    on them (refitted when a new configuration is recorded).  ``across_types``: one profile and
    model per job whatever the GPU type (the Sia simulator's heterogeneity-unaware jobs,
    ``Job(h_unaware=True)``: every type's runs in one dict, the first time for a key counts)."""

    def __init__(self, across_types: bool = False) -> None:
        self.across_types = bool(across_types)
        self._runs: dict[tuple[int, str], dict[tuple[int, int, int], tuple[float, float]]] = {}
        self._theta: dict[tuple[int, str], np.ndarray] = {}
        self._most: dict[int, int] = {}

    def record(self, job: int, gpu_type: str, nodes: int, gpus: int, bsz: int, step: float, sync: float) -> None:
        """A configuration ``job`` has run on ``gpu_type``; the first time data for a key counts
        (as ``update_params``)."""
        runs = self._runs.setdefault(self._key(job, gpu_type), {})
        key = (int(nodes), int(gpus), int(bsz))
        if key in runs:
            return
        runs[key] = (float(step), float(sync))
        self._most[job] = max(self._most.get(job, 0), int(gpus))
        self._theta[self._key(job, gpu_type)] = _fit_points(tuple(k + v for k, v in runs.items()))

    def _key(self, job: int, gpu_type: str | None) -> tuple[int, str | None]:
        return (job, None if self.across_types else gpu_type)

    def theta(self, job: int, gpu_type: str) -> np.ndarray | None:
        """The job's fitted model on ``gpu_type``, None if it has not run there."""
        return self._theta.get(self._key(job, gpu_type))

    def count(self, job: int, gpu_type: str) -> int:
        """How many configurations the job has run on ``gpu_type`` (its model's version)."""
        return len(self._runs.get(self._key(job, gpu_type), ()))

    def most_gpus(self, job: int) -> int:
        """Most GPUs of any configuration the job has run (0: none)."""
        return self._most.get(job, 0)

    def runs(self, job: int, gpu_type: str) -> dict[tuple[int, int, int], tuple[float, float]]:
        return dict(self._runs.get(self._key(job, gpu_type), {}))
