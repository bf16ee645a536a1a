"""Learning dynamics of simulated training jobs (entropy-guided scheduling, algorithms.md §2).

The engine only knows iterations.  This package keeps everything about *learning*:

* :mod:`sim.learning.surrogate`: a parametric learning-curve surrogate per model profile,
  fitted to the real Pollux validation curves (fitted parameters ship in
  ``sim/data/learning_surrogate.json``; the raw data do not);
* :mod:`sim.learning.stats_efficiency`: Pollux-style statistical efficiency from the
  gradient noise scale;
* :mod:`sim.learning.logits_trace`: an Arrow IPC "logits trace" (model, epoch, worker,
  logits) read into per-worker entropy batched per epoch event, and a synthetic generator;
* :mod:`sim.learning.spec`: the dynamics' knobs and per-job learning specs (which profile,
  iterations or time-to-accuracy);
* :mod:`sim.learning.dynamics`: the per-job / per-worker learning state a policy carries, over
  the Numba kernels of :mod:`sim.learning._kernels`.
"""
from __future__ import annotations

from .surrogate import LearningSurrogate, Profile, load_surrogate, profile_for_model
from .stats_efficiency import efficiency, noise_scale, progress_per_iteration
from .dynamics import LearningSpec, LearningState, DynamicsConfig

__all__ = ["LearningSurrogate", "Profile", "load_surrogate", "profile_for_model", "efficiency",
           "noise_scale", "progress_per_iteration", "LearningSpec", "LearningState",
           "DynamicsConfig"]
