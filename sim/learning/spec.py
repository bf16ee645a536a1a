"""What a run's learning is: the knobs of the learning dynamics and the per-job learning specs.

The state that evolves during a run, and the formulas, are in :mod:`sim.learning.dynamics`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np

from ..errors import ConfigError
from .surrogate import LearningSurrogate, load_surrogate

__all__ = ["DynamicsConfig", "LearningSpec", "entropy_curve", "budget_factors", "MODES", "BUDGET_SLACK"]

MODES = {"iterations": 0, "tta": 1}
#: mean relative over-estimate of a user's budget over the work to the target [I]: users ask
#: for fixed epoch counts with headroom; 0.5 means budgets 1.5x the need on average
BUDGET_SLACK = 0.5
_BATCH_RE = re.compile(r"\(batch size (\d+)\)", re.IGNORECASE)


@dataclass(frozen=True)
class DynamicsConfig:
    """Knobs of the learning dynamics and of the micro level (all [I]; names as in
    algorithms.md §2.2 where it has one)."""

    # entropy surrogate
    H0: float = 0.95               # entropy at x = 0
    H_inf: float = 0.10            # entropy at convergence
    sigma_u: float = 0.02          # per-worker measurement noise
    sigma_d: float = 0.2           # LogNormal sigma of worker (shard) difficulty
    kappa_scale: float = 1.0       # multiplies the fitted kappa (sensitivity)
    phi_scale: float = 1.0         # multiplies the fitted noise scale (sensitivity)
    phi_source: str = "efficiency"  # "efficiency" or "grad_stats" fit of the noise scale
    # micro controller (sim.micro.MicroConfig names; bounds are per 1/K)
    beta_u: float = 0.8
    gamma: float = 1.0
    w_min_k: float = 0.5           # w_min = w_min_k / K
    w_max_k: float = 2.0           # w_max = w_max_k / K
    rate_limit_k: float = 0.25     # |dw| <= rate_limit_k / K per epoch
    b_min: int = 1
    kappa_lr: float = 1.0
    delta_eta: float = 0.2
    eps: float = 1e-8
    # micro switches and their modelled effects
    shard: bool = True             # uncertainty-aware sharding (else uniform shards)
    batch: bool = True             # fixed-budget batch reallocation (else uniform batches)
    lr: bool = True                # LR modulation (else constant LR)
    gain_cap: float = 1.3          # cap of G_micro
    lr_penalty: float = 0.05       # efficiency lost when batches change with constant LR
    max_epochs_per_update: int = 8
    epoch_batching: str = "merge"  # "merge" or "replay" the epochs crossed between decisions

    def validate(self) -> None:
        def bad(msg):
            raise ConfigError(f"learning dynamics: {msg}")
        if not (0 <= self.H_inf <= self.H0 <= 1):
            bad(f"need 0 <= H_inf <= H0 <= 1, got H_inf={self.H_inf}, H0={self.H0}")
        for name in ("sigma_u", "sigma_d", "lr_penalty"):
            if not getattr(self, name) >= 0:
                bad(f"{name} must be >= 0")
        for name in ("kappa_scale", "phi_scale", "gamma", "rate_limit_k"):
            if not getattr(self, name) > 0:
                bad(f"{name} must be > 0")
        if self.phi_source not in ("efficiency", "grad_stats"):
            bad(f"phi_source must be 'efficiency' or 'grad_stats', got {self.phi_source!r}")
        if not 0 <= self.beta_u < 1:
            bad(f"beta_u must be in [0, 1), got {self.beta_u}")
        if not (0 <= self.w_min_k <= 1 <= self.w_max_k):
            bad(f"need 0 <= w_min_k <= 1 <= w_max_k, got {self.w_min_k}, {self.w_max_k}")
        if not 0 <= self.delta_eta < 1:
            bad(f"delta_eta must be in [0, 1), got {self.delta_eta}")
        if self.gain_cap < 1:
            bad(f"gain_cap must be >= 1, got {self.gain_cap}")
        if self.lr_penalty >= 1:
            bad(f"lr_penalty must be < 1, got {self.lr_penalty}")
        if self.max_epochs_per_update < 1:
            bad("max_epochs_per_update must be >= 1")
        if self.epoch_batching not in ("merge", "replay"):
            bad(f"epoch_batching must be 'merge' or 'replay', got {self.epoch_batching!r}")
        if self.b_min < 0:
            bad("b_min must be >= 0")

    @classmethod
    def from_params(cls, params: dict | None) -> "DynamicsConfig":
        params = dict(params or {})
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise ConfigError(f"unknown learning-dynamics parameter(s) {unknown}; known: {sorted(names)}")
        cfg = cls(**params)
        cfg.validate()
        return cfg


def entropy_curve(x, q, kappa, H0: float, H_inf: float) -> np.ndarray:
    """``H(x) = H_inf + (H0 - H_inf) * (1 - q) ** (x ** kappa)`` (x clipped to [0, 1])."""
    x = np.clip(np.asarray(x, float), 0.0, 1.0)
    return H_inf + (H0 - H_inf) * np.power(1.0 - np.asarray(q, float), np.power(x, kappa))


def budget_factors(n_jobs: int, seed: int, slack: float = BUDGET_SLACK) -> np.ndarray:
    """The users' budgets over the work to the target: ``1 + Exponential(mean slack)`` per job,
    seeded by ``seed`` on a stream of their own (so no other draw depends on them)."""
    if not slack >= 0:
        raise ConfigError("budget_slack must be >= 0")
    rng = np.random.Generator(np.random.PCG64([int(seed), 0xB0D6]))
    return 1.0 + rng.exponential(1.0, int(n_jobs)) * float(slack)


def _given_budgets(budget, n: int) -> np.ndarray | None:
    """Per-job budgets (reference steps; NaN: none given) as a float64 array, checked."""
    if budget is None:
        return None
    b = np.asarray(budget, float)
    if b.shape != (n,):
        raise ConfigError(f"budget must be one value per job ({n}), got shape {b.shape}")
    bad = np.flatnonzero(~np.isnan(b) & ~((b > 0) & np.isfinite(b)))
    if bad.size:
        raise ConfigError(f"budget of job {int(bad[0])} is {b[bad[0]]!r}: must be > 0 and finite "
                          f"(NaN: no budget given)")
    return b.copy()


@dataclass(frozen=True, eq=False)
class LearningSpec:
    """Static learning facts of every job of a run (arrays indexed by job id).

    Build with :meth:`build`.  ``trace``: a :class:`~sim.learning.logits_trace.LogitsTrace`
    whose logits give the entropy signal instead of the surrogate.
    """

    model_names: tuple[str, ...]      # the oracle's model names (a job's model indexes here)
    surrogate: LearningSurrogate
    profile: np.ndarray               # int64 [n_models]: profile of each oracle model
    mode: np.ndarray                  # int8 [n_jobs]: 0 iterations, 1 tta
    quality: np.ndarray               # float64 [n_jobs]: q in (0, 1)
    local_batch: np.ndarray           # float64 [n_jobs]: per-GPU batch b
    difficulty: np.ndarray            # float64 [n_jobs, K_cap]: d_k per worker slot
    seed: int = 0
    trace: object | None = None
    epoch_samples: np.ndarray | None = None   # float64 [n_jobs]; None: the profile's dataset
    #: float64 [n_jobs]: the user's budget over the work to the target (>= 1); None: 1
    budget_factor: np.ndarray | None = None
    #: float64 [n_jobs]: budgets given by the job table (reference steps, its
    #: ``budget_iterations`` column); NaN where none is given (then ``budget_factor`` applies);
    #: None: none given
    budget: np.ndarray | None = None

    @property
    def n_jobs(self) -> int:
        return int(self.mode.shape[0])

    @property
    def k_cap(self) -> int:
        return int(self.difficulty.shape[1])

    @classmethod
    def build(cls, n_jobs: int, model_names: Sequence[str], gpus_max, *, mode: str = "tta",
              quality=(0.90, 0.97), local_batch=None, sigma_d: float = 0.2, seed: int = 0,
              surrogate: LearningSurrogate | None = None, trace=None,
              epoch_samples=None, budget_slack: float = BUDGET_SLACK, budget=None) -> "LearningSpec":
        """Learning facts for ``n_jobs`` jobs.

        ``mode``: "tta" or "iterations" (all jobs), or a per-job array of 0/1.
        ``quality``: one q, or a (lo, hi) range drawn uniformly per job (seeded).
        ``local_batch``: per-GPU batch per job; default 32 (:meth:`for_workload` reads the
        table).  ``gpus_max``: per job, sizes the per-worker arrays.  ``epoch_samples``:
        samples per epoch (one value or one per job); default the profile's dataset size.
        ``budget_slack``: the users' budgets (``LearningObservation.budget``) over-estimate
        the work to the target by a factor ``1 + Exponential(mean budget_slack)`` per job
        (seeded; its own random stream, so the other draws do not depend on it).  ``budget``:
        budgets given per job (reference steps; NaN: none, the factor applies), e.g. a job
        table's ``budget_iterations`` (:meth:`for_workload`).
        """
        n = int(n_jobs)
        sur = surrogate if surrogate is not None else load_surrogate()
        names = tuple(str(m) for m in model_names)
        prof = sur.profile_indices(names) if names else np.zeros(0, np.int64)
        rng = np.random.Generator(np.random.PCG64([int(seed), 0x1EA2]))
        if isinstance(mode, str):
            if mode not in MODES:
                raise ConfigError(f"learning mode must be one of {sorted(MODES)}, got {mode!r}")
            modes = np.full(n, MODES[mode], np.int8)
        else:
            modes = np.asarray(mode, np.int8)
            if modes.shape != (n,) or not np.isin(modes, (0, 1)).all():
                raise ConfigError("per-job learning modes must be 0 (iterations) or 1 (tta)")
        if np.ndim(quality) == 0:
            q = np.full(n, float(quality))
        else:
            qq = np.asarray(quality, float)
            if qq.shape == (2,):
                q = qq[0] + (qq[1] - qq[0]) * rng.random(n)
            elif qq.shape == (n,):
                q = qq.copy()
            else:
                raise ConfigError("quality must be a number, a (lo, hi) range or one value per job")
        if not np.all((q > 0) & (q < 1)):
            raise ConfigError("job quality q must lie in (0, 1)")
        gmax = np.asarray(gpus_max, np.int64)
        k_cap = int(max(1, gmax.max() if gmax.size else 1))
        if sigma_d < 0:
            raise ConfigError("sigma_d must be >= 0")
        diff = np.exp(sigma_d * rng.standard_normal((n, k_cap)))
        if local_batch is None:
            lb = np.full(n, 32.0)
        else:
            lb = np.asarray(local_batch, float)
            if lb.shape != (n,) or not np.all(lb >= 1):
                raise ConfigError("local_batch must be one value >= 1 per job")
        es = None
        if epoch_samples is not None:
            es = np.broadcast_to(np.asarray(epoch_samples, float), (n,)).copy()
            if not np.all(es > 0):
                raise ConfigError("epoch_samples must be > 0")
        bf = budget_factors(n, seed, budget_slack)
        return cls(model_names=names, surrogate=sur, profile=prof, mode=modes, quality=q,
                   local_batch=lb, difficulty=diff, seed=int(seed), trace=trace, epoch_samples=es,
                   budget_factor=bf, budget=_given_budgets(budget, n))

    @classmethod
    def for_workload(cls, workload, oracle, **kwargs) -> "LearningSpec":
        """From a :class:`sim.jobs.JobTable` and the throughput oracle of the run: the
        per-GPU batch is the table's ``batch_size`` when set (else the model name's); the
        budgets are the table's ``budget_iterations`` where given."""
        names = tuple(oracle.models)
        codes = workload.model_codes(names)
        bs = np.asarray(workload.table.column("batch_size").to_numpy(zero_copy_only=False), float)
        from_name = np.array([float(m.group(1)) if (m := _BATCH_RE.search(s)) else 32.0
                              for s in names])[codes] if len(codes) else np.zeros(0)
        lb = np.where(bs > 0, bs, from_name)
        kwargs.setdefault("local_batch", lb)
        given = workload.budget_iterations
        kwargs.setdefault("budget", given if np.any(~np.isnan(given)) else None)
        return cls.build(len(codes), names, workload.gpus_max, **kwargs)

    def target_metric(self, model_idx: np.ndarray) -> np.ndarray:
        """The validation metric each job must reach (jobs aligned with ``model_idx``)."""
        prof = self.profile[np.asarray(model_idx)]
        a = self.surrogate.arrays()
        return a["m_inf"][prof] + (a["m0"][prof] - a["m_inf"][prof]) * (1.0 - self.quality)
