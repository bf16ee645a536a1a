"""Per-worker (micro-level) controller of entropy-guided scheduling, algorithms.md section 2.2.

One synchronous data-parallel job with K workers.  At every epoch boundary the caller
hands over each worker's epoch uncertainty ``u_k`` (the mean normalized entropy of the
training logits the worker saw, e.g. from :func:`sim.entropy.grouped_mean_entropy`, or
let :meth:`MicroController.observe` compute it from the logits), and the controller
returns the next epoch's controls:

* stable weights: EMA ``ubar_k = beta_u * ubar_k + (1 - beta_u) * u_k`` (the first epoch
  takes ``u_k``), a weight map (``ubar^gamma`` normalized, or ``softmax(ubar / T_w)``), then
  the Euclidean projection onto ``{sum_k w_k = 1, w_min <= w_k <= w_max,
  |w_k - w_k(prev)| <= rate_limit}`` (the spec's "clip, renormalize, rate-limit" done
  so that all three hold at once);
* uncertainty-aware data sharding: a deterministic (seed, epoch) permutation of the
  sample indices split into shards of ``round(s_k * D)`` samples (largest remainder),
  ``s_k = w_k`` (``shard_mode="uncertainty"``), or uniform (``"uniform"``);
* fixed-budget batch reallocation: integers ``b_k`` that sum exactly to the global batch
  ``B``, near ``w_k * B``, with floors ``b_min``, ceilings ``b_max`` and per-worker memory
  caps; gradients are aggregated with weights ``b_k / B`` so synchronous SGD still
  estimates the global mean;
* bounded learning-rate modulation: ``eta = eta0 * clip(1 + kappa * (U - U_prev) /
  max(U_prev, eps), 1 - delta_eta, 1 + delta_eta)`` with ``U = sum_k w_k ubar_k``.

``enabled=False`` is the learning-unaware baseline: uniform weights, shards and batches
and a constant learning rate.  Inputs may be numpy arrays, sequences or torch tensors
(torch is optional); outputs are numpy arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
import numpy as np

from .errors import ConfigError

__all__ = ["MicroConfig", "MicroController", "EpochControls", "allocate_integers",
           "project_box_simplex"]

_WEIGHT_MAPS = ("power", "softmax")
_SHARD_MODES = ("uncertainty", "uniform")


@dataclass(frozen=True)
class MicroConfig:
    """Knobs of the micro controller; names as in algorithms.md section 2.2.

    ``w_min``, ``w_max`` and ``rate_limit`` default to 0.5/K, 2/K and 0.25/K.
    ``b_max`` caps every worker's batch; ``mem_cap`` (one value per worker, in samples)
    caps each one separately.
    """

    beta_u: float = 0.8
    gamma: float = 1.0
    w_min: float | None = None
    w_max: float | None = None
    rate_limit: float | None = None
    weight_map: str = "power"
    T_w: float = 0.1
    shard_mode: str = "uncertainty"
    b_min: int = 1
    b_max: int | None = None
    mem_cap: tuple[int, ...] | None = None
    kappa: float = 1.0
    delta_eta: float = 0.2
    eps: float = 1e-8
    enabled: bool = True

    def validate(self, n_workers: int, global_batch: int) -> None:
        """Raise ConfigError naming the first bad knob."""
        K = n_workers
        if not 0.0 <= self.beta_u < 1.0:
            raise ConfigError(f"beta_u must be in [0, 1), got {self.beta_u}")
        if not self.gamma > 0:
            raise ConfigError(f"gamma must be > 0, got {self.gamma}")
        if self.weight_map not in _WEIGHT_MAPS:
            raise ConfigError(f"weight_map must be one of {_WEIGHT_MAPS}, got {self.weight_map!r}")
        if self.shard_mode not in _SHARD_MODES:
            raise ConfigError(f"shard_mode must be one of {_SHARD_MODES}, got {self.shard_mode!r}")
        if not self.T_w > 0:
            raise ConfigError(f"T_w must be > 0, got {self.T_w}")
        lo, hi, rl = self.bounds(K)
        if not (0.0 <= lo <= 1.0 / K <= hi):
            raise ConfigError(f"need 0 <= w_min <= 1/K <= w_max; got w_min={lo}, w_max={hi}, K={K}")
        if not rl > 0:
            raise ConfigError(f"rate_limit must be > 0, got {rl}")
        if not 0.0 <= self.delta_eta < 1.0:
            raise ConfigError(f"delta_eta must be in [0, 1), got {self.delta_eta}")
        if self.b_min < 0:
            raise ConfigError(f"b_min must be >= 0, got {self.b_min}")
        if self.mem_cap is not None and len(self.mem_cap) != K:
            raise ConfigError(f"mem_cap has {len(self.mem_cap)} entries for {K} workers")
        caps = self.batch_caps(K, global_batch)
        if self.b_min * K > global_batch:
            raise ConfigError(f"b_min={self.b_min} times K={K} exceeds the global batch {global_batch}")
        if int(caps.sum()) < global_batch:
            raise ConfigError(f"batch ceilings (b_max / mem_cap) sum to {int(caps.sum())} < "
                              f"global batch {global_batch}")
        if (caps < self.b_min).any():
            raise ConfigError(f"a batch ceiling is below b_min={self.b_min}: {caps.tolist()}")

    def bounds(self, K: int) -> tuple[float, float, float]:
        lo = 0.5 / K if self.w_min is None else float(self.w_min)
        hi = 2.0 / K if self.w_max is None else float(self.w_max)
        rl = 0.25 / K if self.rate_limit is None else float(self.rate_limit)
        return lo, hi, rl

    def batch_caps(self, K: int, global_batch: int) -> np.ndarray:
        caps = np.full(K, global_batch, dtype=np.int64)
        if self.b_max is not None:
            caps = np.minimum(caps, int(self.b_max))
        if self.mem_cap is not None:
            caps = np.minimum(caps, np.asarray(self.mem_cap, dtype=np.int64))
        return caps


@dataclass(frozen=True)
class EpochControls:
    """What the controller decided for one epoch."""

    epoch: int
    u: np.ndarray            # the uncertainties it was given
    ubar: np.ndarray         # EMA
    weights: np.ndarray      # w_k, sum 1
    batch_sizes: np.ndarray  # b_k, sum B
    lr: float
    job_uncertainty: float   # Ubar_j = sum_k w_k ubar_k


def _to_numpy(x, what: str) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ConfigError(f"{what} must be 1-D (one value per worker), got shape {a.shape}")
    return a


def project_box_simplex(target: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                        total: float = 1.0) -> np.ndarray:
    """Euclidean projection of ``target`` onto {sum w = total, lo <= w <= hi}.

    ``w = clip(target + tau, lo, hi)`` with ``tau`` found by bisection; deterministic.
    """
    target = np.asarray(target, dtype=np.float64)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), target.shape)
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), target.shape)
    if lo.sum() > total + 1e-12 or hi.sum() < total - 1e-12 or (lo > hi + 1e-15).any():
        raise ConfigError(f"no weights in [lo, hi] sum to {total}")
    a = float(np.min(lo - target)) - 1.0
    b = float(np.max(hi - target)) + 1.0
    for _ in range(200):
        mid = 0.5 * (a + b)
        if np.clip(target + mid, lo, hi).sum() < total:
            a = mid
        else:
            b = mid
    w = np.clip(target + 0.5 * (a + b), lo, hi)
    # put the last rounding residue on the free coordinates
    free = (w > lo + 1e-15) & (w < hi - 1e-15)
    if free.any():
        w[free] += (total - w.sum()) / free.sum()
        w = np.clip(w, lo, hi)
    return w


def allocate_integers(shares: np.ndarray, total: int, lo, hi) -> np.ndarray:
    """Integers near ``shares * total`` that sum exactly to ``total``, within [lo, hi].

    Projects the real targets into the box first, floors them, then hands out the
    remaining units by largest remainder (ties go to the lower index).
    """
    shares = np.asarray(shares, dtype=np.float64)
    K = shares.size
    lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), (K,)).copy()
    hi = np.broadcast_to(np.asarray(hi, dtype=np.int64), (K,)).copy()
    if lo.sum() > total or hi.sum() < total or (lo > hi).any():
        raise ConfigError(f"cannot split {total} into {K} integers within floors "
                          f"{lo.tolist()} and ceilings {hi.tolist()}")
    s = shares.sum()
    shares = shares / s if s > 0 else np.full(K, 1.0 / K)
    target = project_box_simplex(shares * total, lo, hi, float(total))
    base = np.clip(np.floor(target + 1e-9).astype(np.int64), lo, hi)
    rem = total - int(base.sum())
    frac = target - base
    order = sorted(range(K), key=lambda k: (-frac[k], k)) if rem > 0 else \
        sorted(range(K), key=lambda k: (frac[k], k))
    step = 1 if rem > 0 else -1
    while rem != 0:
        moved = False
        for k in order:
            if rem == 0:
                break
            if (step > 0 and base[k] < hi[k]) or (step < 0 and base[k] > lo[k]):
                base[k] += step
                rem -= step
                moved = True
        if not moved:  # pragma: no cover - excluded by the feasibility check
            raise ConfigError("integer allocation did not converge")
    return base


@dataclass
class MicroController:
    """The micro controller of one job.  Call :meth:`update` once per epoch."""

    n_workers: int
    global_batch: int
    base_lr: float
    config: MicroConfig = field(default_factory=MicroConfig)
    seed: int = 0

    def __post_init__(self):
        if self.n_workers < 1:
            raise ConfigError(f"n_workers must be >= 1, got {self.n_workers}")
        if self.global_batch < 1:
            raise ConfigError(f"global_batch must be >= 1, got {self.global_batch}")
        if not self.base_lr > 0:
            raise ConfigError(f"base_lr must be > 0, got {self.base_lr}")
        self.config.validate(self.n_workers, self.global_batch)
        K = self.n_workers
        self.epoch = 0
        self.ubar: np.ndarray | None = None
        self.weights = np.full(K, 1.0 / K)
        self.batch_sizes = allocate_integers(self.weights, self.global_batch,
                                             self._b_lo(), self._b_hi())
        self.lr = float(self.base_lr)
        self.job_uncertainty: float | None = None
        self.history: list[EpochControls] = []

    # ---------------------------------------------------------------- helpers
    def _b_lo(self) -> np.ndarray:
        return np.full(self.n_workers, self.config.b_min, dtype=np.int64)

    def _b_hi(self) -> np.ndarray:
        return self.config.batch_caps(self.n_workers, self.global_batch)

    def _map(self, ubar: np.ndarray) -> np.ndarray:
        cfg = self.config
        if cfg.weight_map == "softmax":
            z = ubar / cfg.T_w
            z = np.exp(z - z.max())
            return z / z.sum()
        p = np.power(np.maximum(ubar, 0.0), cfg.gamma)
        s = p.sum()
        return p / s if s > 0 else np.full(ubar.size, 1.0 / ubar.size)

    # ------------------------------------------------------------------- API
    def observe(self, logits, worker_ids, impl: str = "c") -> np.ndarray:
        """Per-worker mean normalized entropy of one epoch's training logits.

        ``logits``: any input of :func:`sim.entropy.grouped_mean_entropy` (numpy, torch,
        Arrow); ``worker_ids``: the worker of each row.  Workers with no rows get NaN.
        """
        from .entropy import grouped_mean_entropy
        if hasattr(worker_ids, "detach"):
            worker_ids = worker_ids.detach().cpu().numpy()
        return grouped_mean_entropy(logits, worker_ids, impl=impl, n_groups=self.n_workers)

    def update(self, u) -> EpochControls:
        """Take this epoch's per-worker uncertainties, set the next epoch's controls."""
        u = _to_numpy(u, "u")
        K = self.n_workers
        if u.size != K:
            raise ConfigError(f"u has {u.size} values for {K} workers")
        if not np.isfinite(u).all():
            # a worker that saw nothing (NaN) keeps its previous estimate
            fill = self.ubar if self.ubar is not None else np.full(K, np.nanmean(u) if
                                                                    np.isfinite(u).any() else 1.0)
            u = np.where(np.isfinite(u), u, fill)
        u = np.clip(u, 0.0, 1.0)
        cfg = self.config
        ubar = u.copy() if self.ubar is None else cfg.beta_u * self.ubar + (1 - cfg.beta_u) * u
        prev_U = self.job_uncertainty
        if cfg.enabled:
            lo, hi, rl = cfg.bounds(K)
            raw = self._map(ubar)
            lo_k = np.maximum(lo, self.weights - rl)
            hi_k = np.minimum(hi, self.weights + rl)
            w = project_box_simplex(raw, lo_k, hi_k)
            b = allocate_integers(w, self.global_batch, self._b_lo(), self._b_hi())
            U = float(np.dot(w, ubar))
            if prev_U is None:
                factor = 1.0
            else:
                rel = (U - prev_U) / max(prev_U, cfg.eps)
                factor = min(max(1.0 + cfg.kappa * rel, 1.0 - cfg.delta_eta), 1.0 + cfg.delta_eta)
            lr = self.base_lr * factor
        else:
            w = np.full(K, 1.0 / K)
            b = allocate_integers(w, self.global_batch, self._b_lo(), self._b_hi())
            U = float(np.dot(w, ubar))
            lr = float(self.base_lr)
        self.ubar, self.weights, self.batch_sizes, self.lr = ubar, w, b, lr
        self.job_uncertainty = U
        self.epoch += 1
        ctl = EpochControls(self.epoch, u, ubar.copy(), w.copy(), b.copy(), lr, U)
        self.history.append(ctl)
        return ctl

    def aggregation_weights(self) -> np.ndarray:
        """``b_k / B``: weights of the per-worker mean gradients in the global mean."""
        return self.batch_sizes / float(self.global_batch)

    def shard_sizes(self, n_samples: int) -> np.ndarray:
        """Samples per worker this epoch; they sum exactly to ``n_samples``."""
        if n_samples < 0:
            raise ConfigError(f"n_samples must be >= 0, got {n_samples}")
        K = self.n_workers
        shares = self.weights if (self.config.enabled and
                                  self.config.shard_mode == "uncertainty") else np.full(K, 1.0 / K)
        return allocate_integers(shares, n_samples, 0, n_samples)

    def shards(self, n_samples: int, epoch: int | None = None) -> list[np.ndarray]:
        """Deterministic per-(seed, epoch) assignment of sample indices to workers."""
        e = self.epoch if epoch is None else int(epoch)
        perm = np.random.default_rng([int(self.seed), e]).permutation(n_samples)
        sizes = self.shard_sizes(n_samples)
        return np.split(perm, np.cumsum(sizes)[:-1])

    def with_config(self, **changes) -> "MicroController":
        """A fresh controller with some knobs changed."""
        return MicroController(self.n_workers, self.global_batch, self.base_lr,
                               replace(self.config, **changes), self.seed)


def lr_scale_rule(lr: float, old_batch: int, new_batch: int, rule: str = "sqrt") -> float:
    """Learning-rate rescaling when the global batch changes (square-root or linear)."""
    if rule == "sqrt":
        return lr * math.sqrt(new_batch / old_batch)
    if rule == "linear":
        return lr * new_batch / old_batch
    raise ConfigError(f"rule must be 'sqrt' or 'linear', got {rule!r}")

