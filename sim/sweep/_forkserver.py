"""Preloaded by the local pool's forkserver (and only there): the forkserver dies with the
sweep's main process (sim.sweep.runners.die_with_parent), then warms the Numba kernels
(sim.sweep._warm) for the workers it forks."""
from __future__ import annotations

from .runners import die_with_parent

die_with_parent()

from . import _warm  # noqa: E402,F401  (import for its effect: warm kernels)
