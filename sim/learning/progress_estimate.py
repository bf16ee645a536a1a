"""Predicting a time-to-accuracy job's total work from what can be observed (issue 16).

Policy side: reads only :class:`~sim.learning.observation.LearningObservation`.  Two
predictors of the total work (reference steps):

* **budget**: the user's budget (the fair twin's estimate);
* **entropy**: fit the observed entropy decay online.  The curve family (fitted per model
  family to the real Pollux curves, ``sim.learning.surrogate``) is
  ``H(D) = H_inf + (H0 - H_inf) exp(-(D / tau)^kappa)`` with the family's ``kappa``; only
  the job's scale ``tau`` is unknown.  Samples are normalized by the job's first one
  (``H = H0 * h / h_first``: a worker's shard difficulty scales all its samples alike), so
  ``g = (H - H_inf) / (H0 - H_inf)`` and each sample with ``g`` in ``[g_lo, g_hi]`` gives
  ``ln tau = ln D - ln(-ln g) / kappa`` with variance ``(sigma_g / (kappa g ln g))^2``
  (``sigma_g`` the normalized measurement noise, floored at ``sigma_floor`` in ``ln tau``).
  A normal prior on ``ln tau`` is centred on the budget's value, ``ln(budget / (1 +
  prior_slack)) - ln c_q`` with sd ``prior_sd``; the posterior mean gives the prediction
  ``tau c_q``, ``c_q = (-ln(1 - q))^(1 / kappa)`` (the target's place on the curve).

Guards (documented parameters): the entropy prediction is used only after ``min_samples``
informative samples, and is clipped to ``[floor x budget, budget]`` (a budget over-estimates
the need, and the floor bounds the damage of a bad fit); otherwise the budget.  The
remaining work is ``max(total - done, rem_floor x budget)``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..errors import ConfigError

__all__ = ["EstimatorConfig", "ProgressEstimator", "PREDICTORS"]

PREDICTORS = ("entropy", "budget")


@dataclass(frozen=True)
class EstimatorConfig:
    """Knobs of the entropy predictor (all [I])."""

    H0: float = 0.95           # family entropy at the start (the surrogate's H0)
    H_inf: float = 0.10        # family entropy at convergence
    sigma_g: float = 0.03      # measurement noise of g (normalized entropy), per sample
    sigma_floor: float = 0.05  # least sd of one sample's ln tau
    g_lo: float = 0.05         # informative samples: g in [g_lo, g_hi]
    g_hi: float = 0.95
    prior_slack: float = 0.5   # prior: the budget over-estimates by 1 + prior_slack
    prior_sd: float = 0.5      # sd of the prior on ln tau
    min_samples: int = 3       # informative samples before the fit is used
    floor: float = 0.2         # the prediction is never below floor x budget
    rem_floor: float = 0.01    # remaining work at least rem_floor x budget

    @classmethod
    def from_params(cls, params: dict | None) -> "EstimatorConfig":
        params = dict(params or {})
        unknown = sorted(set(params) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"unknown estimator parameter(s) {unknown}")
        cfg = cls(**params)
        if not (0 <= cfg.H_inf < cfg.H0 <= 1 and 0 < cfg.g_lo < cfg.g_hi < 1):
            raise ConfigError("estimator: need 0 <= H_inf < H0 <= 1 and 0 < g_lo < g_hi < 1")
        if not (cfg.sigma_g > 0 and cfg.sigma_floor > 0 and cfg.prior_sd > 0 and cfg.prior_slack >= 0):
            raise ConfigError("estimator: noise, prior sd and slack must be positive")
        if not (0 <= cfg.floor <= 1 and 0 <= cfg.rem_floor < 1 and cfg.min_samples >= 0):
            raise ConfigError("estimator: floor and rem_floor in [0, 1], min_samples >= 0")
        return cfg


class ProgressEstimator:
    """Per-job sufficient statistics of the entropy fit (arrays by job id, grown on demand)."""

    def __init__(self, predictor: str = "entropy", config: EstimatorConfig | None = None):
        if predictor not in PREDICTORS:
            raise ConfigError(f"predictor must be one of {PREDICTORS}, got {predictor!r}")
        self.predictor = predictor
        self.cfg = config or EstimatorConfig()
        self.reset(0)

    def reset(self, n: int) -> None:
        self.prec = np.zeros(n)      # sum of 1/var over informative samples
        self.wsum = np.zeros(n)      # sum of ln tau / var
        self.count = np.zeros(n, np.int64)
        self.seen = np.zeros(n, np.int64)   # samples folded in so far

    def update(self, ids, obs) -> None:
        """Fold in the samples taken since the last call (``obs.n_samples`` counts them)."""
        new = (obs.n_samples > self.seen[ids]) & (obs.n_samples > 1) & obs.tta
        self.seen[ids] = obs.n_samples
        if not new.any():
            return
        c = self.cfg
        j = ids[new]
        H = c.H0 * obs.h_last[new] / obs.h_first[new]
        g = (H - c.H_inf) / (c.H0 - c.H_inf)
        D = obs.u_done[new]
        ok = (g >= c.g_lo) & (g <= c.g_hi) & (D > 0)
        if not ok.any():
            return
        g, D, kap, j = g[ok], D[ok], obs.kappa[new][ok], j[ok]
        lntau = np.log(D) - np.log(-np.log(g)) / kap
        sd = np.maximum(c.sigma_g / np.abs(kap * g * np.log(g)), c.sigma_floor)
        self.prec[j] += 1.0 / sd ** 2
        self.wsum[j] += lntau / sd ** 2
        self.count[j] += 1

    def total(self, ids, obs) -> np.ndarray:
        """Predicted total work (reference steps) of each job (the budget where it is the
        truth: iteration jobs; or where the guards say so)."""
        budget = obs.budget
        if self.predictor == "budget":
            return budget
        c = self.cfg
        cq = (-np.log1p(-obs.quality)) ** (1.0 / obs.kappa)
        mu0 = np.log(budget / (1.0 + c.prior_slack)) - np.log(cq)
        p0 = 1.0 / c.prior_sd ** 2
        lntau = (mu0 * p0 + self.wsum[ids]) / (p0 + self.prec[ids])
        pred = np.clip(np.exp(lntau) * cq, c.floor * budget, budget)
        use = obs.tta & (self.count[ids] >= c.min_samples)
        return np.where(use, pred, budget)

    def remaining(self, ids, obs) -> np.ndarray:
        return np.maximum(self.total(ids, obs) - obs.done, self.cfg.rem_floor * obs.budget)
