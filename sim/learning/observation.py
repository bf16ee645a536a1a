"""What a scheduler may know about its jobs' learning (the information contract, issue 16).

Decisions read observations, never the simulator's truth.  :class:`LearningObservation`
is handed to policies as ``SchedState.learning`` by the learning simulator
(:mod:`sim.learning.world`); its arrays are aligned with ``SchedState.active``.  For a
time-to-accuracy job the state's ``remaining`` and ``jobs.work`` are NaN: the exact distance
to the target is not observable.  What is:

* ``tta``: the job stops at a target metric (else after its iterations);
* ``budget``: the work the user asked for (reference steps, see below; the job table's
  ``budget_iterations`` where given): for a time-to-accuracy job usually an over-estimate of
  the work to the target (the job stops earlier); for an iteration job the work itself;
* ``done``: work done so far, in reference steps: samples processed / ``M0`` (``M0 =
  demand x per-GPU batch``, the batch at the requested size); the unit of ``budget``;
* ``quality``: the target, as the fraction ``q`` of its model family's achievable metric
  gap (a target metric ``m*`` is ``m_inf + (m_0 - m_inf)(1 - q)`` of the family's curve);
* ``kappa``: the shape of the family's learning curve (fitted to real curves,
  ``sim.learning.surrogate``);
* ``noise_scale``: the gradient noise scale measured now (samples; as Pollux's agents do);
* ``local_batch``: the per-GPU batch ``b``;
* entropy samples, taken from the training logits at every decision the job ran:
  ``u`` (the latest per-worker normalized entropy, ``[n_active, K]``, 0 beyond the job's
  workers), ``u_done`` (``done`` when it was taken), ``n_samples`` (samples so far),
  ``fresh`` (a sample was taken at this decision) and ``h_first`` (the first sample's
  mean over workers, NaN before).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LearningObservation"]


@dataclass(frozen=True, eq=False)
class LearningObservation:
    """Observable learning facts of the active jobs (module docstring); arrays aligned with
    ``SchedState.active``."""

    tta: np.ndarray            # bool
    budget: np.ndarray         # float64, reference steps
    done: np.ndarray           # float64, reference steps
    quality: np.ndarray        # float64, q in (0, 1)
    kappa: np.ndarray          # float64, family curve shape
    noise_scale: np.ndarray    # float64, samples
    local_batch: np.ndarray    # float64
    u: np.ndarray              # float64 [n_active, K_cap]
    n_workers: np.ndarray      # int64, workers of the latest sample
    u_done: np.ndarray         # float64
    n_samples: np.ndarray      # int64
    fresh: np.ndarray          # bool
    h_first: np.ndarray        # float64

    @property
    def h_last(self) -> np.ndarray:
        """The latest sample's mean over the job's workers (NaN before the first)."""
        k = np.maximum(self.n_workers, 1)
        cols = np.arange(self.u.shape[1])[None, :] < self.n_workers[:, None]
        with np.errstate(invalid="ignore"):
            return np.where(self.n_samples > 0, (self.u * cols).sum(axis=1) / k, np.nan)
