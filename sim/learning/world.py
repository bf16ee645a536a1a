"""The learning simulator: the jobs' learning truth, on the simulator's side (issue 16).

The engine knows work only.  For a time-to-accuracy (TTA) job the work is the *progress* it
needs to reach its target, in reference steps (see Units); this module turns progress into
what training would show and the scheduler's choices into progress:

* **truth** (never handed to a policy): normalized progress ``x = done / work``, the learning
  curve and entropy ``H(x) = H_inf + (H0 - H_inf)(1 - q)^(x^kappa)``
  (:func:`sim.learning.spec.entropy_curve`), the gradient noise scale ``phi(x)``, each
  worker's shard difficulty ``d_k``;
* **observations** (:class:`~sim.learning.observation.LearningObservation`): at every decision
  at which a job ran since the previous one, one entropy sample per worker, ``u_k =
  clip(H(x) d_k + sigma_u N, 0, 1)`` (surrogate; ``N`` a counter-based hash of (seed, job,
  sample, worker)) or the recorded logits of the epoch the job is in (logits trace); work
  done in samples; the measured noise scale; the user's budget (the job table's
  ``budget_iterations`` where given, :attr:`LearningSpec.budget`; else ``LearningSpec.budget_factor``
  x work; an iteration job's budget is its work);
* **masking**: the state a policy gets has ``remaining`` and ``jobs.work`` (and
  ``jobs.est_duration``) NaN for TTA jobs, unless the policy is ``clairvoyant``;
* **rates** (:meth:`LearningWorld.settle`): each placed TTA job's rate scale is ``EFF(k b;
  phi) x G``, times the policy's own ``Plan.rate_scale``.

**Units** (one for every oracle).  The oracle's rate at ``k`` GPUs counts the whole job's
throughput in iterations at the job's requested batch ``M0 = demand x b``: samples/s at
``k`` GPUs = ``rate(k) x M0``.  (Gavel's table cannot be read as global steps of ``k b``
samples: ResNet-18's ``rate(8) / rate(1) = 10.6`` would then be 85x the samples on 8x the
GPUs.)  A reference step is ``M0`` samples; at global batch ``B = k b`` a sample makes
``EFF(B) / M0`` reference steps of progress (Pollux, ``EFF(M0) = 1``), so the progress rate
is ``rate(k) x EFF(k b)``: the first design's extra ``k / demand`` counted the added GPUs
twice (tested by hand in tests/test_learning_world.py).

**Micro level** (what the policy's ``Plan.sampling`` does): workers keep equal shards and
batches, so a step is never slower; the policy only tilts which partitions samples come
from.  Spending samples on harder partitions gains ``G = clip(sum_k s_k d_k / mean_k d_k,
1, gain_cap)`` [I] (``s_k`` the sampling shares), which is at most ``1 + CV(d)^2`` for an
unconstrained tilt and never below 1.  The LR factor the controller computes has no modelled
effect.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import ConfigError
from ._kernels import surrogate_u
from .observation import LearningObservation
from .spec import DynamicsConfig, LearningSpec


class LearningWorld:
    """The learning truth of one run's jobs (module docstring).  ``spec`` says which job
    learns what; ``dynamics`` sets the surrogate's knobs (:class:`DynamicsConfig`)."""

    def __init__(self, spec: LearningSpec, dynamics: dict | None = None):
        if not isinstance(spec, LearningSpec):
            raise ConfigError("LearningWorld needs a LearningSpec")
        self.spec = spec
        self.cfg = DynamicsConfig.from_params(dynamics)
        self.jobs = None

    # ------------------------------------------------------------------ per run
    def start(self, jobs) -> None:
        """Bind to one run's jobs (``sim.state.JobSpecs``) and reset every counter."""
        spec, n = self.spec, len(jobs)
        if spec.n_jobs != n:
            raise ConfigError(f"learning spec has {spec.n_jobs} jobs, the run has {n}")
        if n and int(np.max(jobs.gpus_max)) > spec.k_cap:
            raise ConfigError(f"a job may use {int(np.max(jobs.gpus_max))} GPUs but the learning "
                              f"spec sizes workers for {spec.k_cap}")
        if int(np.max(jobs.model, initial=-1)) >= len(spec.profile):
            raise ConfigError("a job's model index is beyond the learning spec's model names")
        self.jobs = jobs
        a = spec.surrogate.arrays()
        prof = spec.profile[jobs.model] if n else np.zeros(0, np.int64)
        self.kappa_family = a["kappa"][prof]
        self.kappa = self.kappa_family * self.cfg.kappa_scale
        src = "" if self.cfg.phi_source == "efficiency" else "_gns"
        self.phi0, self.phi_slope = a["phi0" + src][prof], a["phi_slope" + src][prof]
        # profile progress at the target, to place x on the profile's noise-scale growth
        self.P_q = a["tau"][prof] * (-np.log1p(-spec.quality)) ** (1.0 / a["kappa"][prof])
        self.p_end = a["p_end"][prof]
        self.epoch_samples = a["epoch_samples"][prof] if spec.epoch_samples is None else \
            spec.epoch_samples
        self.M0 = jobs.demand * spec.local_batch
        self.tta = spec.mode.astype(bool)
        self.budget = self._budgets(jobs)
        self.masked_jobs = replace(jobs, work=np.where(self.tta, np.nan, jobs.work),
                                   est_duration=np.where(self.tta, np.nan, jobs.est_duration))
        kc = spec.k_cap
        self.last_done = np.zeros(n)
        self.samples = np.zeros(n)
        self.spw = self.M0.copy()                   # samples per unit of progress in force
        self.k = np.zeros(n, np.int64)              # GPUs in force
        self.u = np.zeros((n, kc))
        self.n_workers = np.zeros(n, np.int64)
        self.u_done = np.zeros(n)
        self.n_samples = np.zeros(n, np.int64)
        self.h_first = np.full(n, np.nan)
        self.x = np.zeros(n)
        self.trace_classes = np.full(n, -1, np.int64)
        if spec.trace is not None:
            spec.trace.bind(spec.model_names, jobs.model, np.arange(n))
            last = np.array([spec.trace.n_epochs.get(m, 1) - 1 for m in spec.model_names], np.int64)
            self.trace_last = last[jobs.model] if n else np.zeros(0, np.int64)

    def _budgets(self, jobs) -> np.ndarray:
        """The users' budgets: given (the spec's ``budget``, from the job table) or the work
        times the spec's ``budget_factor``; an iteration job's is its work, and a budget given
        for one that is not its work is a ConfigError."""
        spec = self.spec
        bf = np.ones(len(jobs)) if spec.budget_factor is None else spec.budget_factor
        drawn = jobs.work * np.where(self.tta, bf, 1.0)
        if spec.budget is None:
            return drawn
        given = ~np.isnan(spec.budget)
        clash = np.flatnonzero(given & ~self.tta & (spec.budget != jobs.work))
        if clash.size:
            r = int(clash[0])
            raise ConfigError(f"the job in row {r} of the job table runs a fixed number of iterations ({jobs.work[r]:g}), but "
                              f"its budget is given as {spec.budget[r]:g}: an iteration job's budget "
                              f"is its work (give none, or the work)")
        return np.where(given, spec.budget, drawn)

    # ------------------------------------------------------------------ truth
    def phi(self, ids) -> np.ndarray:
        """The true gradient noise scale now (samples)."""
        P = self.x[ids] * self.P_q[ids]
        return self.cfg.phi_scale * (self.phi0[ids] + self.phi_slope[ids] * P / self.p_end[ids])

    def worker_entropy(self, jids, counters, K) -> np.ndarray:
        """u[r, k] for job jids[r] with K[r] workers (surrogate, or the logits trace's epoch)."""
        out = np.zeros((jids.size, max(int(K.max()) if K.size else 1, 1)))
        tr = self.spec.trace
        if tr is not None:
            # the epoch the job is in; the trace's last epoch once the job is beyond it
            epochs = np.minimum(np.floor(self.samples[jids] / self.epoch_samples[jids]),
                                self.trace_last[jids]).astype(np.int64)
            vals = tr.worker_entropy(self, jids, epochs, K)
            out[:, :vals.shape[1]] = vals
            return out
        c = self.cfg
        surrogate_u(jids.astype(np.int64), counters.astype(np.int64), self.x[jids], K.astype(np.int64),
                     self.spec.quality, self.kappa[jids], self.spec.difficulty, self.spec.seed,
                     c.H0, c.H_inf, c.sigma_u, np.ones(jids.size), out)
        return out

    # ------------------------------------------------------------------ per decision
    def observe(self, state, clairvoyant: bool = False):
        """Fold the progress since the last decision into samples and entropy samples; returns
        the state the policy sees (truth masked, ``learning`` set)."""
        ids = state.active
        done = self.jobs.work[ids] - state.remaining
        delta = np.maximum(done - self.last_done[ids], 0.0)
        self.last_done[ids] = done
        self.samples[ids] += delta * self.spw[ids]
        self.x[ids] = np.clip(done / self.jobs.work[ids], 0.0, 1.0)
        ran = (delta > 0) & (self.k[ids] > 0)
        if ran.any():
            self._sample(ids[ran])
        obs = self._observation(ids, ran)
        if clairvoyant:
            return replace(state, learning=obs)
        return replace(state, jobs=self.masked_jobs, learning=obs,
                       remaining=np.where(self.tta[ids], np.nan, state.remaining))

    def _sample(self, jids) -> None:
        K = self.k[jids]
        u = self.worker_entropy(jids, self.n_samples[jids], K)
        kc = self.u.shape[1]
        cols = np.arange(kc)[None, :] < K[:, None]
        full = np.zeros((jids.size, kc))
        full[:, :u.shape[1]] = u[:, :kc]
        self.u[jids] = np.where(cols, full, 0.0)
        self.n_workers[jids] = K
        h = (self.u[jids] * cols).sum(axis=1) / K
        first = self.n_samples[jids] == 0
        self.h_first[jids[first]] = h[first]
        self.n_samples[jids] += 1
        self.u_done[jids] = self.samples[jids] / self.M0[jids]

    def _observation(self, ids, fresh) -> LearningObservation:
        return LearningObservation(
            tta=self.tta[ids], budget=self.budget[ids], done=self.samples[ids] / self.M0[ids],
            quality=self.spec.quality[ids], kappa=self.kappa_family[ids], noise_scale=self.phi(ids),
            local_batch=self.spec.local_batch[ids], u=self.u[ids], n_workers=self.n_workers[ids],
            u_done=self.u_done[ids], n_samples=self.n_samples[ids], fresh=fresh,
            h_first=self.h_first[ids])

    def settle(self, state, plan):
        """The plan with each job's true rate scale (``EFF x G`` for TTA jobs, module
        docstring) times the policy's own."""
        ids = state.active
        k = np.diff(plan.indptr)
        k = np.bincount(np.repeat(np.arange(ids.size), k), weights=plan.counts,
                        minlength=ids.size).astype(np.int64)
        eff, gain = self.efficiency(ids, k), self.sampling_gain(ids, k, plan.sampling)
        tta = self.tta[ids]
        scale = np.where(tta & (k > 0), eff * gain, 1.0)
        self.spw[ids] = np.where(tta, self.M0[ids] / np.where(k > 0, eff * gain, 1.0), self.M0[ids])
        self.k[ids] = k
        if plan.rate_scale is not None:
            scale = scale * np.asarray(plan.rate_scale, float)
        return replace(plan, rate_scale=scale)

    def efficiency(self, ids, k) -> np.ndarray:
        """Pollux's EFF(k b) relative to the reference batch M0 at the true noise scale."""
        phi = self.phi(ids)
        B = np.maximum(k, 1) * self.spec.local_batch[ids]
        return (phi + self.M0[ids]) / (phi + B)

    def sampling_gain(self, ids, k, sampling) -> np.ndarray:
        """G = clip(sum_k s_k d_k / mean_k d_k, 1, gain_cap) over each job's k workers."""
        if sampling is None:
            return np.ones(ids.size)
        kc = self.spec.k_cap
        s = np.zeros((ids.size, kc))
        src = np.asarray(sampling, float)
        s[:, :min(kc, src.shape[1])] = src[:, :kc]
        cols = np.arange(kc)[None, :] < k[:, None]
        d = self.spec.difficulty[ids]
        mean_d = (d * cols).sum(axis=1) / np.maximum(k, 1)
        g = (s * d * cols).sum(axis=1) / np.where(mean_d > 0, mean_d, 1.0)
        return np.where(k > 0, np.clip(g, 1.0, self.cfg.gain_cap), 1.0)
