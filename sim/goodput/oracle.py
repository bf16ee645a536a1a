"""The throughput oracle of Pollux-model workloads (:class:`GoodputOracle`).

Work is counted in Pollux *progress* (initial-batch steps weighted by statistical efficiency) and a
job's target is its application's :attr:`~sim.goodput.profiles.Application.target_progress`.  The
oracle's rate of a placement is the progress per second that the fitted 7-parameter model predicts
at the start of training (epoch 0's gradient statistics) with the default batch
``max(M0, r * b_min)``: a fair stand-in for policies that know nothing of goodput.  Policies of
the goodput family (:mod:`sim.policies.goodput_base`) replace it, through ``Plan.rate_scale``, by
the profile's measured step time and the gradient statistics of the job's current epoch and
batch (:mod:`sim.goodput.jobmodel`), as the authors' simulators do.

The oracle also carries the run's per-job workload facts that the job model needs and the
engine's ``JobSpecs`` lacks (``job_batch``: the batch size the workload asks for).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..errors import ConfigError
from .goodput import fit_application, goodput, split_batch
from .profiles import Application

__all__ = ["GoodputOracle", "POLLUX_RESTART_S", "GPUS_PER_NODE"]


def _thetas(apps) -> np.ndarray:
    return np.stack([fit_application(str(a.folder), a.suffix).as_array() for a in apps])

#: Restart (re-scale) delay of the Pollux simulator, every application (simulator.py
#: ``rescale_time = 30``).
POLLUX_RESTART_S = 30.0

#: GPUs per node assumed by :meth:`GoodputOracle.reference_rate` (the Pollux testbed's 4 x T4).
GPUS_PER_NODE = 4


@dataclass(eq=False)
class GoodputOracle:
    """Throughput oracle over Pollux applications; see the module docstring."""

    applications: tuple[Application, ...]
    job_batch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    restart_s: Mapping[str, float] | float = POLLUX_RESTART_S
    gpu_types: tuple[str, ...] = ("t4",)
    #: GPU type -> the applications (aligned with ``applications``) profiled on that type (Sia's
    #: per-type profiles); empty: one profile serves every type (Pollux)
    typed: Mapping[str, tuple[Application, ...]] = field(default_factory=dict)
    #: application -> slowdown that divides its measured goodput (the Sia simulator's calibration
    #: ``SLOWDOWNS``); 1 where absent
    slowdown: Mapping[str, float] = field(default_factory=dict)
    #: network interference (the Pollux simulator's ``--interference``): a distributed job (GPUs
    #: on more than one node) with a GPU on a node shared by two or more distributed jobs runs at
    #: ``1 - interference`` of its goodput; 0 (their default) models none
    interference: float = 0.0

    def __post_init__(self):
        if not self.applications:
            raise ConfigError("GoodputOracle needs at least one application")
        if not 0.0 <= float(self.interference) < 1.0:
            raise ConfigError(f"GoodputOracle: interference must be in [0, 1), got {self.interference!r}")
        self.interference = float(self.interference)
        self.models = tuple(a.name for a in self.applications)
        self.theta = _thetas(self.applications)
        self.typed = dict(self.typed)
        for t, apps in self.typed.items():
            if tuple(a.name for a in apps) != self.models:
                raise ConfigError(f"GoodputOracle: the {t} profiles are of {[a.name for a in apps]}, "
                                  f"expected {list(self.models)}")
        self.theta_typed = {t: _thetas(apps) for t, apps in self.typed.items()}
        self.job_batch = np.asarray(self.job_batch, np.int64)
        self._rate_memo: dict[tuple[int, int, int], float] = {}

    def app(self, model: int, gpu_type: str | None = None) -> Application:
        """The application of ``model``; its profile on ``gpu_type`` where there are per-type ones."""
        apps = self.typed.get(gpu_type, self.applications) if gpu_type is not None else self.applications
        return apps[int(model)]

    def model_theta(self, model: int, gpu_type: str | None = None) -> np.ndarray:
        """The fitted 7-parameter model of ``model`` (on ``gpu_type`` where profiled per type)."""
        table = self.theta_typed.get(gpu_type, self.theta) if gpu_type is not None else self.theta
        return table[int(model)]

    def calibration(self, model: int) -> float:
        """Factor on the measured goodput of ``model``: ``1 / slowdown``."""
        return 1.0 / float(self.slowdown.get(self.models[int(model)], 1.0))

    # -- the ThroughputOracle protocol --------------------------------------
    def rates(self, model_idx, ngpu, n_nodes, type_mask=None, min_speed=None, cluster_types=()) -> np.ndarray:
        m = np.asarray(model_idx, np.int64)
        r = np.asarray(ngpu, np.int64)
        n = np.maximum(np.asarray(n_nodes, np.int64), 1)
        keys = list(zip(m.ravel().tolist(), r.ravel().tolist(), n.ravel().tolist()))
        self._remember_rates({k for k in keys if k[1] > 0 and k not in self._rate_memo})
        return np.array([self._rate_memo.get(k, 0.0) for k in keys], float).reshape(m.shape)

    def _remember_rates(self, keys: set) -> None:
        """Compute the base rates of (model, GPUs, nodes) ``keys`` (one vectorized call per model)
        into the memo: a rate depends on nothing else, and the job model asks for the same few
        placements thousands of times a run."""
        for a in sorted({k[0] for k in keys}):
            mine = sorted(k for k in keys if k[0] == a)
            rates = self._base_rate(a, np.array([k[1] for k in mine]), np.array([k[2] for k in mine]))
            self._rate_memo.update(zip(mine, rates.tolist()))

    def _base_rate(self, a: int, r: np.ndarray, n: np.ndarray) -> np.ndarray:
        app = self.applications[a]
        m0 = app.init_batch_size
        batch = np.maximum(m0, app.min_local_bsz * r)
        atomic, steps = split_batch(np.ceil(batch / r - 1e-8), r, m0, app.max_local_bsz)
        sqr, var = app.grad_stats(r * atomic * (steps + 1), 0)
        return goodput(self.theta[a], sqr, var, m0, np.minimum(n, r), r, atomic, steps)

    def reference_rate(self, model_idx, ngpu) -> np.ndarray:
        r = np.maximum(np.asarray(ngpu, np.int64), 1)
        return self.rates(model_idx, r, -(-r // GPUS_PER_NODE))

    def supported_counts(self, model) -> tuple[int, ...]:
        return tuple(range(1, 65))

    def restart_delay_s(self, model) -> float:
        if isinstance(self.restart_s, Mapping):
            return float(self.restart_s.get(model, POLLUX_RESTART_S))
        return float(self.restart_s)
