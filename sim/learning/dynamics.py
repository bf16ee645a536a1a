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

import numpy as np

from ..errors import ConfigError
from ._kernels import micro_update_batch, rate_factors, surrogate_u
from .spec import MODES, DynamicsConfig, LearningSpec, entropy_curve

__all__ = ["DynamicsConfig", "LearningSpec", "LearningState", "micro_update_batch",
           "entropy_curve", "MODES"]


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
        surrogate_u(np.asarray(jids, np.int64), np.asarray(epochs, np.int64), np.asarray(xe, float),
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
        rate_factors(ids, K, indptr, nodes, counts, state.cluster.node_speed, self.w, self.b,
                      self.spec.difficulty, self.alpha[ids], self.beta[ids], self.s_intra[ids],
                      self.s_inter[ids], Bf, self.M0[ids], self.demand[ids], phi, self.tta[ids],
                      bool(micro_on and cfg.shard), cfg.gain_cap if micro_on else 1.0, lr_pen,
                      scale, spw)
        self.spw[ids] = spw
        self.scale[ids] = scale
        return scale
