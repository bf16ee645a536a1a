"""Per-job learning state for entropy-guided scheduling (algorithms.md §2.2, all [I]).

The engine only knows iterations ("work").  Learning lives here, carried by a policy in
numpy arrays indexed by job id (per-worker arrays are ``[n_jobs, K_cap]``), allocated on
the policy's first call of a run.

**Two kinds of jobs** (:class:`LearningSpec` ``mode``):

* ``"iterations"``: the job ends after its iterations (the engine's work).  Its learning
  progress is ``x = iterations done / iterations`` (the budget is taken to train it to its
  quality ``q``).
* ``"tta"`` (time to accuracy): the engine's work is the *progress* the job needs, in
  reference iterations: steps at its reference batch ``M0 = demand * b`` (``b`` = per-GPU
  batch), weighted by statistical efficiency.  One real iteration at ``k`` GPUs (global
  batch ``k * b``) makes ``(k / demand) * EFF(k * b) * G_micro * lr_pen`` reference
  iterations, handed to the engine as ``Plan.rate_scale`` (:mod:`sim.learning.stats_efficiency`).
  The job completes when the engine's remaining work reaches 0, which is exactly when the
  surrogate's metric reaches the job's target ``m* = m_inf + (m_0 - m_inf)(1 - q)``
  (:meth:`LearningState.metric` tells the metric at any point).  At ``k = demand`` with the
  micro level off the factor is 1, so learning-unaware policies (FIFO, SRTF, Tiresias) run
  the same jobs unchanged.

**Entropy signal.** Normalized progress ``x`` maps to the profile's progress
``P = x * P_q``; the job-level entropy follows the fitted learning curve's remaining gap::

    H(x) = H_inf + (H_0 - H_inf) * (1 - q) ** (x ** kappa)        (kappa: fitted per profile)

and worker k's epoch uncertainty is ``u_k = clip(H(x_e) * d_k + N(0, sigma_u^2), 0, 1)``
with ``d_k ~ LogNormal(0, sigma_d)`` the non-IID difficulty of its shard (drawn once per
job and worker slot) and the noise a counter-based hash of (seed, job, epoch, worker), so
results never depend on call order.  With a :class:`~sim.learning.logits_trace.LogitsTrace`
the ``u_k`` come from recorded logits instead.

**Epochs.** An epoch is ``epoch_samples`` of the profile (the dataset).  Samples are counted
from the work done between decisions (``samples per work unit``: ``M0 / (EFF G lr_pen)`` for
TTA jobs, the global batch for iteration jobs).  At each decision every job that crossed
``n`` epoch boundaries is updated: ``epoch_batching="merge"`` (default; surrogate signal)
makes one update with ``u`` at the middle of those epochs (noise ``sigma_u / sqrt(n)``),
EMA weight ``beta_u ** n`` and rate limit ``n * rate_limit``; ``"replay"`` (and always with
a logits trace) replays the epochs one by one (at most ``max_epochs_per_update``, the
latest).

**Micro controller** (the batched Numba twin of :class:`sim.micro.MicroController`, power
weight map; tests hold it to the Python controller): EMA ``ubar``, weights projected onto
``[w_min, w_max]`` with a per-epoch rate limit, fixed-budget integer batches ``b_k`` summing
to ``B = k * b``, and the LR factor ``clip(1 + kappa_lr dU / U, 1 - delta_eta, 1 + delta_eta)``.
A resize re-shards: the new workers start at uniform weights with ``ubar`` = the job's last
``Ubar`` (or none before its first epoch).

**What the micro level costs and gains** (the rate factor of a placed job)::

    T0     = (alpha_c + beta_c * B / k) / s_min + T_sync          uniform step (the oracle's)
    T      = max_k (alpha_c + beta_c * b_k) / s_k + T_sync         straggler step
    steps  = max_k (sigma_k * B / b_k)                             sync steps per epoch / uniform
    balance= T0 / (T * steps)
    G      = clip(sum_k sigma_k d_k / mean_k d_k, 1, gain_cap)     (TTA jobs only)
    lr_pen = 1 - lr_penalty if the batch composition changed and LR modulation is off

``sigma_k`` are the shard shares (``w_k`` with uncertainty sharding, else ``1/k``), ``s_k``
the speed factor of worker k's server, ``T_sync`` the fitted ``sync_intra`` (one node) or
``sync_inter`` (several nodes), 0 for one GPU.  The rate scale is ``balance`` times, for TTA
jobs, ``(k / demand) * EFF * G * lr_pen``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Sequence

import numpy as np
from numba import njit

from ..errors import ConfigError, SimError
from .surrogate import LearningSurrogate, load_surrogate

__all__ = ["DynamicsConfig", "LearningSpec", "LearningState", "micro_update_batch",
           "entropy_curve", "MODES"]

MODES = {"iterations": 0, "tta": 1}
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
              epoch_samples=None) -> "LearningSpec":
        """Learning facts for ``n_jobs`` jobs.

        ``mode``: "tta" or "iterations" (all jobs), or a per-job array of 0/1.
        ``quality``: one q, or a (lo, hi) range drawn uniformly per job (seeded).
        ``local_batch``: per-GPU batch per job; default 32 (:meth:`for_workload` reads the
        table).  ``gpus_max``: per job, sizes the per-worker arrays.  ``epoch_samples``:
        samples per epoch (one value or one per job); default the profile's dataset size.
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
        return cls(model_names=names, surrogate=sur, profile=prof, mode=modes, quality=q,
                   local_batch=lb, difficulty=diff, seed=int(seed), trace=trace, epoch_samples=es)

    @classmethod
    def for_workload(cls, workload, oracle, **kwargs) -> "LearningSpec":
        """From a :class:`sim.jobs.JobTable` and the throughput oracle of the run: the
        per-GPU batch is the table's ``batch_size`` when set (else the model name's)."""
        names = tuple(oracle.models)
        codes = workload.model_codes(names)
        bs = np.asarray(workload.table.column("batch_size").to_numpy(zero_copy_only=False), float)
        from_name = np.array([float(m.group(1)) if (m := _BATCH_RE.search(s)) else 32.0
                              for s in names])[codes] if len(codes) else np.zeros(0)
        lb = np.where(bs > 0, bs, from_name)
        kwargs.setdefault("local_batch", lb)
        return cls.build(len(codes), names, workload.gpus_max, **kwargs)

    def target_metric(self, model_idx: np.ndarray) -> np.ndarray:
        """The validation metric each job must reach (jobs aligned with ``model_idx``)."""
        prof = self.profile[np.asarray(model_idx)]
        a = self.surrogate.arrays()
        return a["m_inf"][prof] + (a["m0"][prof] - a["m_inf"][prof]) * (1.0 - self.quality)


# ------------------------------------------------------------------ Numba kernels

@njit(cache=True)
def _project(target, lo, hi, total, out):
    """Euclidean projection onto {sum w = total, lo <= w <= hi} (sim.micro.project_box_simplex)."""
    K = target.shape[0]
    a = np.inf
    b = -np.inf
    for i in range(K):
        a = min(a, lo[i] - target[i])
        b = max(b, hi[i] - target[i])
    a -= 1.0
    b += 1.0
    for _ in range(200):
        mid = 0.5 * (a + b)
        if b - a <= 4e-16 * max(1.0, abs(a), abs(b)):
            break              # tau known to ~1 ulp of the weights: w cannot change any more
        s = 0.0
        for i in range(K):
            s += min(max(target[i] + mid, lo[i]), hi[i])
        if s < total:
            a = mid
        else:
            b = mid
    t = 0.5 * (a + b)
    s = 0.0
    nfree = 0
    for i in range(K):
        out[i] = min(max(target[i] + t, lo[i]), hi[i])
        s += out[i]
    for i in range(K):
        if out[i] > lo[i] + 1e-15 and out[i] < hi[i] - 1e-15:
            nfree += 1
    if nfree > 0:
        add = (total - s) / nfree
        for i in range(K):
            if out[i] > lo[i] + 1e-15 and out[i] < hi[i] - 1e-15:
                out[i] = min(max(out[i] + add, lo[i]), hi[i])


@njit(cache=True)
def _allocate(shares, total, lo, hi, out, sh, lof, hif, target, frac, order):
    """Integers near shares * total summing to total within [lo, hi] (sim.micro.allocate_integers).
    sh, lof, hif, target, frac (float) and order (int) are scratch of length K."""
    K = shares.shape[0]
    s = 0.0
    for i in range(K):
        s += shares[i]
    for i in range(K):
        sh[i] = shares[i] / s * total if s > 0 else total / K
        lof[i] = lo[i]
        hif[i] = hi[i]
    _project(sh, lof, hif, float(total), target)
    rem = total
    for i in range(K):
        v = np.int64(math.floor(target[i] + 1e-9))
        v = min(max(v, lo[i]), hi[i])
        out[i] = v
        rem -= v
        frac[i] = target[i] - v
    if rem == 0:
        return
    step = 1 if rem > 0 else -1
    # stable order by -frac (rem > 0) or frac (rem < 0), ties by index: insertion sort
    for i in range(K):
        order[i] = i
    for i in range(1, K):
        k = order[i]
        key = -frac[k] if step > 0 else frac[k]
        j = i - 1
        while j >= 0 and (-frac[order[j]] if step > 0 else frac[order[j]]) > key:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = k
    while rem != 0:
        moved = False
        for j in range(K):
            k = order[j]
            if rem == 0:
                break
            if (step > 0 and out[k] < hi[k]) or (step < 0 and out[k] > lo[k]):
                out[k] += step
                rem -= step
                moved = True
        if not moved:
            break


@njit(cache=True)
def _micro_one(u, ubar, has_ubar, w, b, K, B, beta_u, gamma, w_lo, w_hi, rl, b_min,
               enabled, prev_U, kappa_lr, delta_eta, eps, fs, ns):
    """One epoch of the micro controller for one job; updates ubar, w, b in place.
    fs: float scratch [9, >= K]; ns: int scratch [4, >= K].
    Returns (U, lr_factor, batch_changed)."""
    for i in range(K):
        x = u[i]
        x = 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)
        ubar[i] = beta_u * ubar[i] + (1.0 - beta_u) * x if has_ubar else x
    newb = ns[0, :K]
    lo_b = ns[1, :K]
    hi_b = ns[2, :K]
    for i in range(K):
        lo_b[i] = b_min
        hi_b[i] = B
    if enabled:
        raw = fs[0, :K]
        s = 0.0
        for i in range(K):
            raw[i] = max(ubar[i], 0.0) ** gamma
            s += raw[i]
        for i in range(K):
            raw[i] = raw[i] / s if s > 0 else 1.0 / K
        lo = fs[1, :K]
        hi = fs[2, :K]
        for i in range(K):
            lo[i] = max(w_lo, w[i] - rl)
            hi[i] = min(w_hi, w[i] + rl)
        nw = fs[3, :K]
        _project(raw, lo, hi, 1.0, nw)
        for i in range(K):
            w[i] = nw[i]
    else:
        for i in range(K):
            w[i] = 1.0 / K
    _allocate(w, B, lo_b, hi_b, newb, fs[4, :K], fs[5, :K], fs[6, :K], fs[7, :K], fs[8, :K],
              ns[3, :K])
    changed = False
    for i in range(K):
        if newb[i] != b[i]:
            changed = True
        b[i] = newb[i]
    U = 0.0
    for i in range(K):
        U += w[i] * ubar[i]
    if not enabled or np.isnan(prev_U):
        f = 1.0
    else:
        rel = (U - prev_U) / max(prev_U, eps)
        f = min(max(1.0 + kappa_lr * rel, 1.0 - delta_eta), 1.0 + delta_eta)
    return U, f, changed


def micro_update_batch(rows, u, ubar, has_ubar, w, b, K, B, cfg: DynamicsConfig, enabled: bool,
                       prev_U, n_epochs=None):
    """Vectorized entry point: one update for each row ``r`` of ``rows``, with ``u[r, :K[r]]``;
    updates the ``[n, K_cap]`` arrays in place.  ``n_epochs[r]`` > 1 merges that many epochs
    of the same ``u`` into one update: EMA weight ``beta_u ** n`` and rate limit
    ``n * rate_limit`` (exact for the EMA, a relaxation of n successive rate limits).
    Returns (U, lr_factor, batch_changed) per row."""
    rows = np.asarray(rows, np.int64)
    n_ep = np.ones(rows.size) if n_epochs is None else np.asarray(n_epochs, float)
    return _micro_rows(rows, np.ascontiguousarray(u, float), ubar, has_ubar,
                       w, b, np.asarray(K, np.int64), np.asarray(B, np.int64), cfg.beta_u, cfg.gamma,
                       cfg.w_min_k, cfg.w_max_k, cfg.rate_limit_k, cfg.b_min, enabled,
                       np.asarray(prev_U, float), cfg.kappa_lr, cfg.delta_eta, cfg.eps, n_ep)


@njit(cache=True)
def _micro_rows(rows, u, ubar, has_ubar, w, b, K, B, beta_u, gamma, w_min_k, w_max_k, rl_k,
                b_min, enabled, prev_U, kappa_lr, delta_eta, eps, n_ep):
    n = rows.shape[0]
    U = np.empty(n)
    f = np.empty(n)
    ch = np.zeros(n, np.bool_)
    kc = ubar.shape[1]
    fs = np.empty((9, kc))
    ns = np.empty((4, kc), np.int64)
    for r in range(n):
        j = rows[r]
        k = K[r]
        U[r], f[r], ch[r] = _micro_one(u[r, :k], ubar[j, :k], has_ubar[j], w[j, :k], b[j, :k], k,
                                       B[r], beta_u ** n_ep[r], gamma, w_min_k / k, w_max_k / k,
                                       n_ep[r] * rl_k / k, b_min, enabled, prev_U[r], kappa_lr,
                                       delta_eta, eps, fs, ns)
        has_ubar[j] = True
    return U, f, ch


@njit(cache=True)
def _splitmix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _hash_normal(seed, job, epoch, worker):
    """A standard normal from a counter-based hash (deterministic, order independent)."""
    h = _splitmix(np.uint64(seed) * np.uint64(0x100000001B3) ^ np.uint64(job))
    h = _splitmix(h ^ (np.uint64(epoch) * np.uint64(0x9E3779B1)))
    h = _splitmix(h ^ (np.uint64(worker) + np.uint64(0x85EBCA6B)))
    h2 = _splitmix(h)
    u1 = ((h >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740993.0)
    u2 = (h2 >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@njit(cache=True)
def _surrogate_u(jobs, epochs, xs, K, q, kappa, diff, seed, H0, H_inf, sigma_u, noise_scale, out):
    """u[r, k] = clip(H(x_r) * d[job, k] + sigma_u * N, 0, 1)."""
    for r in range(jobs.shape[0]):
        j = jobs[r]
        x = min(max(xs[r], 0.0), 1.0)
        H = H_inf + (H0 - H_inf) * (1.0 - q[j]) ** (x ** kappa[r])
        for k in range(K[r]):
            v = H * diff[j, k] + sigma_u * noise_scale[r] * _hash_normal(seed, j, epochs[r], k)
            out[r, k] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


@njit(cache=True)
def _rate_factors(ids, K, indptr, nodes, counts, node_speed, w, b, diff, alpha, beta, s_intra,
                  s_inter, B, M0, demand, phi, tta, shard, gain_cap, lr_pen, out_scale, out_spw):
    """Per placed job: the rate scale and the samples per work unit (module docstring)."""
    for a in range(ids.shape[0]):
        j = ids[a]
        k = K[a]
        lo, hi = indptr[a], indptr[a + 1]
        if k <= 0 or hi <= lo:
            out_scale[a] = 1.0
            out_spw[a] = B[a]
            continue
        speeds = np.empty(k)
        m = 0
        for e in range(lo, hi):
            for _ in range(counts[e]):
                if m < k:
                    speeds[m] = node_speed[nodes[e]]
                    m += 1
        smin = np.inf
        for i in range(k):
            smin = min(smin, speeds[i])
        sync = 0.0 if k == 1 else (s_intra[a] if hi - lo == 1 else s_inter[a])
        t0 = (alpha[a] + beta[a] * B[a] / k) / smin + sync
        tm = 0.0
        steps = 0.0
        gsum = 0.0
        dsum = 0.0
        for i in range(k):
            bi = max(b[j, i], 1)
            tm = max(tm, (alpha[a] + beta[a] * bi) / speeds[i])
            sig = w[j, i] if shard else 1.0 / k
            steps = max(steps, sig * B[a] / bi)
            gsum += sig * diff[j, i]
            dsum += diff[j, i]
        tm += sync
        balance = t0 / (tm * steps)
        if tta[a]:
            g = gsum / (dsum / k)
            g = min(max(g, 1.0), gain_cap)
            eff = (phi[a] + M0[a]) / (phi[a] + B[a])
            prog = (k / demand[a]) * eff * g * lr_pen[a]
            out_scale[a] = balance * prog
            out_spw[a] = M0[a] / (eff * g * lr_pen[a])
        else:
            out_scale[a] = balance
            out_spw[a] = B[a]


# ------------------------------------------------------------------ the state

class LearningState:
    """The learning state of every job of one run (arrays indexed by job id).

    Driven by a policy: :meth:`observe` at the start of each decision (progress, epochs,
    micro updates), :meth:`settle` after the placement is known (resizes, rate scales).
    """

    def __init__(self, spec: LearningSpec, jobs, cfg: DynamicsConfig, micro: bool):
        n = len(jobs)
        if spec.n_jobs != n:
            raise ConfigError(f"learning spec has {spec.n_jobs} jobs, the run has {n}")
        if int(np.max(jobs.model, initial=-1)) >= len(spec.profile):
            raise ConfigError(f"job model index {int(np.max(jobs.model))} is beyond the learning "
                              f"spec's {len(spec.profile)} model names")
        if n and int(np.max(jobs.gpus_max)) > spec.k_cap:
            raise ConfigError(f"a job may use {int(np.max(jobs.gpus_max))} GPUs but the learning "
                              f"spec sizes workers for {spec.k_cap}")
        self.spec, self.jobs, self.cfg, self.micro = spec, jobs, cfg, bool(micro)
        a = spec.surrogate.arrays()
        prof = spec.profile[jobs.model] if n else np.zeros(0, np.int64)
        self.prof = prof
        self.kappa = a["kappa"][prof] * cfg.kappa_scale
        q = spec.quality
        # profile progress at the target: P_q = tau (-ln(1-q))^(1/kappa_fit)
        self.P_q = a["tau"][prof] * (-np.log1p(-q)) ** (1.0 / a["kappa"][prof])
        if cfg.phi_source == "efficiency":
            self.phi0, self.phi_slope = a["phi0"][prof], a["phi_slope"][prof]
        else:
            self.phi0, self.phi_slope = a["phi0_gns"][prof], a["phi_slope_gns"][prof]
        self.p_end = a["p_end"][prof]
        self.alpha, self.beta = a["alpha_c"][prof], a["beta_c"][prof]
        self.s_intra, self.s_inter = a["sync_intra"][prof], a["sync_inter"][prof]
        self.epoch_samples = a["epoch_samples"][prof] if spec.epoch_samples is None else \
            spec.epoch_samples
        self.m0_metric, self.minf_metric = a["m0"][prof], a["m_inf"][prof]
        self.demand = jobs.demand.astype(float)
        self.M0 = self.demand * spec.local_batch
        self.tta = spec.mode.astype(bool)
        kc = spec.k_cap
        self.seen = np.zeros(n, bool)
        self.samples = np.zeros(n)
        self.epoch = np.zeros(n, np.int64)          # epochs completed (micro updates counted)
        self.last_done = np.zeros(n)
        self.x_last = np.zeros(n)
        self.spw = self.M0.copy()                   # samples per work unit in force
        self.k = np.zeros(n, np.int64)              # workers of the micro state (0: none)
        self.ubar = np.zeros((n, kc))
        self.has_ubar = np.zeros(n, bool)
        self.w = np.zeros((n, kc))
        self.b = np.zeros((n, kc), np.int64)
        self.U = np.full(n, np.nan)                 # last observed job uncertainty Ubar_j
        self.lr_factor = np.ones(n)
        self.batch_changed = np.zeros(n, bool)
        self.scale = np.ones(n)
        self.updates = 0                            # micro updates done (all jobs)
        self.trace_classes = np.full(n, -1, np.int64)

    # -------------------------------------------------------------- queries
    def progress(self, ids, remaining) -> np.ndarray:
        w = self.jobs.work[ids]
        return np.clip((w - remaining) / w, 0.0, 1.0)

    def entropy(self, ids, x) -> np.ndarray:
        """The surrogate's job-level entropy H(x) (ground truth, not what the policy sees)."""
        c = self.cfg
        return entropy_curve(x, self.spec.quality[ids], self.kappa[ids], c.H0, c.H_inf)

    def metric(self, ids, x) -> np.ndarray:
        """The surrogate's validation metric at normalized progress x."""
        P = np.asarray(x, float) * self.P_q[ids]
        a = self.spec.surrogate.arrays()
        tau = a["tau"][self.prof[ids]]
        kap = a["kappa"][self.prof[ids]]
        return self.minf_metric[ids] + (self.m0_metric[ids] - self.minf_metric[ids]) * \
            np.exp(-(P / tau) ** kap)

    def phi(self, ids, x) -> np.ndarray:
        P = np.asarray(x, float) * self.P_q[ids]
        return self.cfg.phi_scale * (self.phi0[ids] + self.phi_slope[ids] * P / self.p_end[ids])

    def job_uncertainty(self, ids) -> np.ndarray:
        """Ubar_j as the scheduler sees it: the last micro-level value, H0 before any epoch."""
        u = self.U[ids]
        return np.where(np.isnan(u), self.cfg.H0, u)

    # -------------------------------------------------------------- per decision
    def observe(self, state) -> np.ndarray:
        """Fold the work done since the last decision into samples and epochs; run the micro
        controller for every epoch crossed.  Returns x (normalized progress) per active job."""
        ids = state.active
        new = ~self.seen[ids]
        if new.any():
            self.seen[ids[new]] = True
        done = self.jobs.work[ids] - state.remaining
        delta = np.maximum(done - self.last_done[ids], 0.0)
        self.last_done[ids] = done
        s_prev = self.samples[ids]
        s_now = s_prev + delta * self.spw[ids]
        self.samples[ids] = s_now
        x_prev = self.x_last[ids]
        x_now = self.progress(ids, state.remaining)
        self.x_last[ids] = x_now
        D = self.epoch_samples[ids]
        e_now = np.floor(s_now / D).astype(np.int64)
        crossed = e_now - self.epoch[ids]
        act = (crossed > 0) & (self.k[ids] > 0)
        # epochs crossed while not running (cannot happen: no work without GPUs) or before
        # any micro state exist are just counted
        self.epoch[ids[~act & (crossed > 0)]] = e_now[~act & (crossed > 0)]
        if act.any():
            self._epochs(ids[act], s_prev[act], s_now[act], x_prev[act], x_now[act],
                         self.epoch[ids[act]], e_now[act], D[act])
        return x_now

    def _epochs(self, jids, s0, s1, x0, x1, e_from, e_to, D):
        cfg = self.cfg
        if cfg.epoch_batching == "merge" and self.spec.trace is None:
            # one update for all epochs crossed: u at the middle of them, noise / sqrt(n)
            n = (e_to - e_from).astype(np.int64)
            self.epoch[jids] = e_to
            s_mid = 0.5 * (e_from + e_to) * D
            span = np.maximum(s1 - s0, 1e-300)
            xe = x0 + (x1 - x0) * np.clip((s_mid - s0) / span, 0.0, 1.0)
            K = self.k[jids]
            u = self.worker_uncertainty(jids, e_to - 1, xe, K, n)
            B = np.rint(K * self.spec.local_batch[jids]).astype(np.int64)
            U, f, ch = micro_update_batch(jids, u, self.ubar, self.has_ubar, self.w, self.b, K, B,
                                          cfg, self.micro, self.U[jids], n)
            self.U[jids] = U
            self.lr_factor[jids] = f if (self.micro and cfg.lr) else 1.0
            self.batch_changed[jids] = ch
            self.updates += int(jids.size)
            return
        mx = cfg.max_epochs_per_update
        first = np.maximum(e_from, e_to - mx)        # epochs replayed: first .. e_to - 1
        n_rep = (e_to - first).astype(np.int64)
        self.epoch[jids] = e_to
        for step in range(int(n_rep.max())):
            sel = n_rep > step
            j = jids[sel]
            e = first[sel] + step                     # the epoch that just ended (0-based)
            # x at the end of epoch e, linear in samples over the interval
            s_end = (e + 1) * D[sel]
            span = np.maximum(s1[sel] - s0[sel], 1e-300)
            frac = np.clip((s_end - s0[sel]) / span, 0.0, 1.0)
            xe = x0[sel] + (x1[sel] - x0[sel]) * frac
            K = self.k[j]
            u = self.worker_uncertainty(j, e, xe, K)
            B = np.rint(K * self.spec.local_batch[j]).astype(np.int64)
            U, f, ch = micro_update_batch(j, u, self.ubar, self.has_ubar, self.w, self.b, K, B,
                                          cfg, self.micro, self.U[j])
            self.U[j] = U
            self.lr_factor[j] = f if (self.micro and cfg.lr) else 1.0
            self.batch_changed[j] = ch
            self.updates += int(j.size)

    def worker_uncertainty(self, jids, epochs, xe, K, n_merged=None) -> np.ndarray:
        """u[r, k] for job jids[r] at epoch epochs[r] (progress xe[r]) and its K[r] workers."""
        kmax = int(K.max()) if K.size else 1
        out = np.zeros((jids.size, max(kmax, 1)))
        if self.spec.trace is not None:
            vals = self.spec.trace.worker_entropy(self, jids, epochs, K)
            out[:, :vals.shape[1]] = vals
            return out
        c = self.cfg
        ns = np.ones(jids.size) if n_merged is None else 1.0 / np.sqrt(np.asarray(n_merged, float))
        _surrogate_u(np.asarray(jids, np.int64), np.asarray(epochs, np.int64), np.asarray(xe, float),
                     np.asarray(K, np.int64), self.spec.quality, self.kappa[jids],
                     self.spec.difficulty, self.spec.seed, c.H0, c.H_inf, c.sigma_u, ns, out)
        return out

    def settle(self, state, indptr, nodes, counts, ngpu_after: np.ndarray, x: np.ndarray) -> np.ndarray:
        """After the placement: re-shard resized jobs and compute each active job's rate scale."""
        ids = state.active
        k_new = ngpu_after.astype(np.int64)
        resized = (k_new > 0) & (k_new != self.k[ids])
        if resized.any():
            j = ids[resized]
            kk = k_new[resized]
            self.ubar[j] = 0.0
            self.w[j] = 0.0
            self.b[j] = 0
            known = ~np.isnan(self.U[j])
            cols = np.arange(self.spec.k_cap)[None, :] < kk[:, None]
            self.ubar[j] = np.where(cols, np.where(known, self.U[j], 0.0)[:, None], 0.0)
            self.has_ubar[j] = known
            self.w[j] = np.where(cols, 1.0 / kk[:, None], 0.0)
            lb = np.rint(self.spec.local_batch[j]).astype(np.int64)
            self.b[j] = np.where(cols, lb[:, None], 0)
            self.batch_changed[j] = False
            self.lr_factor[j] = 1.0
            self.k[j] = kk
        cfg = self.cfg
        micro_on = self.micro
        lr_pen = np.where(micro_on & cfg.batch & (not cfg.lr) & self.batch_changed[ids],
                          1.0 - cfg.lr_penalty, 1.0)
        K = k_new
        Bf = K * self.spec.local_batch[ids]
        # the micro controls that are switched off act as uniform: shard via shard flag,
        # uniform batches via b (reset below when batch realloc is off)
        if micro_on and not cfg.batch:
            on = K > 0
            j = ids[on]
            cols = np.arange(self.spec.k_cap)[None, :] < K[on][:, None]
            self.b[j] = np.where(cols, np.rint(self.spec.local_batch[j]).astype(np.int64)[:, None], 0)
        scale = np.ones(ids.size)
        spw = np.empty(ids.size)
        phi = self.phi(ids, x)
        _rate_factors(ids, K, indptr, nodes, counts, state.cluster.node_speed, self.w, self.b,
                      self.spec.difficulty, self.alpha[ids], self.beta[ids], self.s_intra[ids],
                      self.s_inter[ids], Bf, self.M0[ids], self.demand[ids], phi, self.tta[ids],
                      bool(micro_on and cfg.shard), cfg.gain_cap if micro_on else 1.0, lr_pen,
                      scale, spw)
        self.spw[ids] = spw
        self.scale[ids] = scale
        return scale
