"""Sia (SOSP'23; algorithms.md §5.8): heterogeneity-aware goodput scheduling with an ILP, as the
authors' simulator runs it (siasosp23/artifacts ``sia-simulator/sia.py``, ``--policy=sia
--policy_p_val=-0.5 --mip_lambda_n=1.1 --interval=60 --project_throughput --share_max_replicas``).

Every ``round_s`` = 60 s:

* a GPU type without its own profile in the oracle uses the application's single profile (all
  types alike: a Pollux workload on any cluster);
* **configurations** (type, nodes, GPUs) per GPU type (:func:`sim.goodput.sia_configs.sia_configs`);
  a job may take those with ``1 <= GPUs <= min(max(2 x the most GPUs it has run on, 1), 64,
  M_max / b_min)`` (observed models: the most GPUs of a configuration it has trained on, as their
  ``max_profiled_replicas``);
* **goodput** of a configuration: the best goodput (batch size and accumulation optimized, the
  batch at most the workload's ``batch_size``, :meth:`Sia.batch_cap`) of the job's 7-parameter
  model on that type with the gradient statistics it last measured; with ``float32_rows`` (default)
  the candidate batches are drawn in float32 as the Sia simulator draws them
  (:func:`sim.goodput.goodput.float32_candidates`: at ``b_min r`` = the cap it scores a batch just
  above the cap).  With
  ``throughput_models="observed"`` (default, the authors' simulator) that model is fitted online
  on the configurations the job has run on that type (:mod:`sim.goodput.observed`: one run on 1
  GPU predicts near-linear scaling, a few runs on one node extrapolate to several nodes from
  those); with ``"profile"`` it is the application's model fitted on the type's whole profile.
  A type the job has not run on is **bootstrapped**: the model of the first type it has run on,
  in :data:`SOURCE_ORDER` (the Sia simulator's cluster order), at the same GPU count on that
  type's nodes, times the application's throughput ratio between the two types
  (:func:`~sim.goodput.sia_configs.single_gpu_throughput`).  A job that has not run yet has
  goodput 1 on each type's one-GPU configuration and nothing else;
* **normalized goodput**: each row over its smallest non-zero entry (the job's goodput on its
  min configuration);
* **restart factor** (Pollux's): for a job that held a configuration in the last round, every
  configuration but that one is scaled by ``max(age - restarts x d, 0) / (age + d)`` (1 while
  ``age < d``), ``d`` Sia's per-application restart penalty :data:`RESTART_PENALTY_S`; a job that
  held none (new, or left out last round) is not scaled (their ``prev_allocs_v2`` is None);
* the ILP (:mod:`sim.policies.sia_ilp`) minimizes ``sum round(S^p, 2) + lambda_n x unallocated``,
  ``p`` = -0.5, ``lambda_n`` = 1.1; jobs still in checkpoint-restore keep their configuration;
* **placement** per type (Sia's ``alloc_to_placement_fast``): every allocated job, most GPUs
  first, takes whole free nodes first, then free GPUs anywhere, a node pointer carried from job
  to job, from empty nodes each round, kept jobs included; a job restarts only where its type or
  its GPUs-per-node tuple changes (:mod:`sim.policies.peer_placement` maps this onto engine
  GPUs).  ``placement_rule="keep"`` is the earlier rule: jobs keeping their configuration keep
  their GPUs and only the others are walked, around them.

Between rounds the batch size is re-optimized at each epoch boundary (the job model).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..errors import ConfigError
from ..goodput.goodput import optimize_memo
from ..goodput.sia_configs import MAX_CONFIG_GPUS, SiaConfigs, sia_configs, single_gpu_throughput
from ..state import Plan, SchedState
from .goodput_base import GoodputPolicy, csr_plan, current_pairs
from .peer_placement import PeerKey, PeerPlacer
from .registry import register
from .sia_ilp import MIP_REL_GAP, TIME_LIMIT_S, solve_sia_ilp

__all__ = ["Sia", "place_by_type", "place_on_type", "realloc_factor", "RESTART_PENALTY_S", "P_FAIRNESS", "LAMBDA_N", "GOODPUT_CLIP",
           "SOURCE_ORDER", "THROUGHPUT_MODELS"]

#: fairness power (``sia_default_p_val``)
P_FAIRNESS = -0.5
#: cost of leaving a job without GPUs (``sia_default_lambda_n``; must exceed 1)
LAMBDA_N = 1.1
#: cap on ``S^p`` (``sia_goodput_clip_val``)
GOODPUT_CLIP = 3000.0
#: restart penalty of the restart factor per application, seconds (``get_restart_penalty``; 30
#: for others).  Not the engine's restart delay (:data:`sim.goodput.sia_profiles.SIA_RESTART_S`).
RESTART_PENALTY_S = {"deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0, "yolov3": 45.0}
DEFAULT_RESTART_PENALTY_S = 30.0
#: the models goodput is predicted with: fitted online on what each job ran (the authors'), or on
#: each type's whole profile
THROUGHPUT_MODELS = ("observed", "profile")
#: how a round's allocation becomes placements: ``"peer"``, the Sia simulator's (every allocated
#: job re-walked from empty nodes, a restart only where the type or the GPUs-per-node tuple
#: changes: sim.policies.peer_placement); ``"keep"``, jobs keeping their configuration keep their
#: GPUs and the others are walked around them
PLACEMENT_RULES = ("peer", "keep")
#: GPU types in the Sia simulator's cluster order (``simulator_config.cluster_nnodes``: aws,
#: dgx-ext, rtx); a job's goodput on a type it has not run on is projected from the first of these
#: it has run on (other types after these, in the cluster's order)
SOURCE_ORDER = ("t4", "a100", "rtx2080ti")


@register
class Sia(GoodputPolicy):
    name = "sia"
    description = "Sia: per-GPU-type configurations, normalized goodput, p=-0.5 ILP on HiGHS every 60 s"
    adaptive = True
    rigid_policy = "sia-rigid"
    sia_batch_limits = True       # a job's own batch: the placement's limits (update_local_bsz)
    sia_batch_timing = True       # re-picked at moves, epoch ends and round starts (Job.step)

    def __init__(self, placement: str = "consolidated", p: float = P_FAIRNESS, lambda_n: float = LAMBDA_N,
                 mip_rel_gap: float = MIP_REL_GAP, time_limit_s: float = TIME_LIMIT_S,
                 max_config_gpus: int = MAX_CONFIG_GPUS, goodput_clip: float = GOODPUT_CLIP,
                 throughput_models: str = "observed", placement_rule: str = "peer",
                 float32_rows: bool = True):
        super().__init__(placement)
        self.float32_rows = bool(float32_rows)
        if placement_rule not in PLACEMENT_RULES:
            raise ConfigError(f"policy sia: placement_rule must be one of {PLACEMENT_RULES}, "
                              f"got {placement_rule!r}")
        self.placement_rule = placement_rule
        if throughput_models not in THROUGHPUT_MODELS:
            raise ConfigError(f"policy sia: throughput_models must be one of {THROUGHPUT_MODELS}, "
                              f"got {throughput_models!r}")
        self.throughput_models = throughput_models
        self.observed_models = throughput_models == "observed"
        if p >= 0 or lambda_n <= 1:
            raise ConfigError(f"policy sia: need p < 0 and lambda_n > 1 (Sia's rules), got p={p}, "
                              f"lambda_n={lambda_n}")
        self.p, self.lambda_n = float(p), float(lambda_n)
        self.mip_rel_gap, self.time_limit_s = float(mip_rel_gap), float(time_limit_s)
        self.max_config_gpus, self.goodput_clip = int(max_config_gpus), float(goodput_clip)

    def params(self) -> dict:
        return {**super().params(), "p": self.p, "lambda_n": self.lambda_n, "mip_rel_gap": self.mip_rel_gap,
                "time_limit_s": self.time_limit_s, "max_config_gpus": self.max_config_gpus,
                "goodput_clip": self.goodput_clip, "throughput_models": self.throughput_models,
                "placement_rule": self.placement_rule, "float32_rows": self.float32_rows}

    def reset(self, n_jobs: int) -> None:
        self.configs: SiaConfigs | None = None
        self.prev = np.full(n_jobs, -1, np.int64)         # configuration of the last round
        self.seen: np.ndarray | None = None               # [jobs, types] has run on the type
        self.last = None                                  # the last round's IlpResult
        self._last_inputs: tuple | None = None            # what it was solved for
        self.placer = PeerPlacer(self.name)

    @property
    def peer_keys(self) -> dict[int, PeerKey]:
        """Job id -> its placement in the Sia simulator last round (the placer's memory)."""
        return self.placer.keys

    @peer_keys.setter
    def peer_keys(self, keys: dict[int, PeerKey]) -> None:
        self.placer.keys = keys

    # -- goodput ----------------------------------------------------------------
    def _start_cluster(self, state: SchedState) -> None:
        cfg = sia_configs(state.cluster, self.max_config_gpus)
        self.configs = cfg
        self.seen = np.zeros((len(self.prev), len(cfg.types)), bool)
        oracle = self.model.oracle
        xput = np.array([[single_gpu_throughput(oracle.app(m, t)) for t in cfg.types]
                         for m in range(len(oracle.models))])
        self.ratio = xput[:, :, None] / xput[:, None, :]   # [model, to type, from type]
        self.source_order = source_order(cfg.types)

    def max_replicas(self, ids: np.ndarray) -> np.ndarray:
        m = self.model
        out = np.empty(ids.shape[0], np.int64)
        for i, j in enumerate(ids):
            app = m.oracle.app(m.oracle_model(int(j)))
            most = m.observed.most_gpus(int(j)) if m.observed is not None else int(m.max_seen[j])
            out[i] = min(max(2 * most, 1), self.max_config_gpus,
                         app.max_batch_size // app.min_local_bsz)
        return out

    def job_goodputs(self, j: int) -> np.ndarray:
        """Goodput of job ``j`` on every configuration (0: no model), before normalizing."""
        cfg, m = self.configs, self.model
        model = m.oracle_model(j)
        out = np.zeros(len(cfg))
        theta = self.job_models(j)
        if not theta:
            out[cfg.gpus == 1] = 1.0
            return out
        app = m.oracle.app(model)
        sqr, var = app.grad_stats(m.stat_batch[j], m.stat_epoch[j])
        first = next(t for t in self.source_order if t in theta)
        for t in range(len(cfg.types)):
            src = t if t in theta else first
            cols = np.flatnonzero(cfg.type_idx == t)
            r = cfg.gpus[cols]
            n = -(-r // cfg.per_node[src])
            a = m.oracle.app(model, cfg.types[src])
            g = optimize_memo(theta[src], sqr, var, app.init_batch_size, n, r,
                              self.batch_cap(j), (a.min_local_bsz, a.max_local_bsz),
                              float32_batches=self.float32_rows)[0]
            out[cols] = g * (1.0 if src == t else self.ratio[model, t, src])
        return out

    def batch_cap(self, j: int) -> int:
        """Largest global batch the goodput row of job ``j`` may choose: the workload's batch size
        where it gives one, else the application's largest.  The Sia simulator's jobs carry
        ``target_batch_size`` = the workload's ``batch_size`` and its ``get_speedup_fn`` caps the
        batch search there (``job.py``), while the job itself trains with batches up to the
        application's largest (``update_local_bsz``; our job model likewise): the ILP scores
        configurations at the workload's batch, the job runs at its own."""
        batch = self.model.oracle.job_batch
        app = self.model.oracle.app(self.model.oracle_model(j))
        return int(batch[j]) if j < batch.shape[0] and batch[j] > 0 else app.max_batch_size

    def job_models(self, j: int) -> dict[int, np.ndarray]:
        """Type index -> the step-time model job ``j`` predicts with there, for the types it has a
        model on (observed: has trained on; profile: has been placed on)."""
        m, types = self.model, self.configs.types
        if m.observed is not None:
            out = {t: m.observed.theta(j, types[t]) for t in range(len(types))}
            return {t: th for t, th in out.items() if th is not None}
        if not m.started[j]:
            return {}
        return {int(t): m.oracle.model_theta(m.oracle_model(j), types[t]) for t in np.flatnonzero(self.seen[j])}

    def normalized_goodputs(self, ids: np.ndarray) -> np.ndarray:
        """``S[i, c]``: goodput over the job's smallest non-zero goodput (0 where invalid)."""
        g = np.stack([self.job_goodputs(int(j)) for j in ids]) if ids.size else np.zeros((0, len(self.configs)))
        g = np.where(self.configs.gpus[None, :] <= self.max_replicas(ids)[:, None], g, 0.0)
        low = np.where(g > 0, g, np.inf).min(axis=1, keepdims=True)
        return np.where(g > 0, g / np.where(np.isfinite(low), low, 1.0), 0.0)

    def restart_factors(self, state: SchedState, ids: np.ndarray) -> np.ndarray:
        names = self.model.oracle.models
        d = np.array([RESTART_PENALTY_S.get(names[mi], DEFAULT_RESTART_PENALTY_S) for mi in state.jobs.model[ids]])
        age = state.now - state.jobs.arrival[ids]
        return np.where(age < d, 1.0, realloc_factor(age, np.maximum(self.model.restarts[ids], 0), d))

    def costs(self, state: SchedState, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(A = round(S^p, 2) clipped, valid) of the active jobs, S with the restart factor on
        every configuration but the last round's, for jobs that had one (the Sia simulator scales
        a row only when ``prev_allocs_v2[job]`` is not None: a job left without GPUs, new or
        not, competes unscaled)."""
        s = self.normalized_goodputs(ids)
        valid = s > 0
        prev = self.prev[ids]
        factor = self.restart_factors(state, ids)
        has = prev >= 0
        unscaled = ~has[:, None] | (np.arange(s.shape[1])[None, :] == prev[:, None])
        s = np.where(unscaled, s, s * factor[:, None])
        with np.errstate(divide="ignore"):
            a = np.round(np.power(np.where(s > 0, s, 1.0), self.p), 2)
        return np.minimum(a, self.goodput_clip), valid & (s > 0)

    # -- the round ----------------------------------------------------------------
    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        if self.configs is None:
            self._start_cluster(state)
        ids = state.active
        ngpu = np.asarray(state.ngpu)
        self._observe_types(state)
        self.prev[ids] = np.where(ngpu > 0, self.prev[ids], -1)
        cost, valid = self.costs(state, ids)
        restoring = (self.model.resume_at[ids] > state.now) & (self.prev[ids] >= 0)
        fixed = np.where(restoring & valid[np.arange(ids.size), np.maximum(self.prev[ids], 0)], self.prev[ids], -1)
        res = self._solve(cost, valid, fixed)
        plan = self.place(state, res.choice)
        self.prev[ids] = res.choice
        return plan

    def _solve(self, cost: np.ndarray, valid: np.ndarray, fixed: np.ndarray):
        """The round's ILP; the last round's answer where its inputs (costs, valid configurations,
        held jobs, the configuration set) are the same, bit for bit (HiGHS is deterministic;
        about a sixth of the rounds of a workload change nothing)."""
        cfg = self.configs
        inputs = (cfg, cost.shape, cost.tobytes(), valid.tobytes(), fixed.tobytes())
        last = self._last_inputs
        if last is None or last[0] is not cfg or last[1:] != inputs[1:]:
            self.last = solve_sia_ilp(cost, valid, cfg.type_idx, cfg.gpus, cfg.capacity, self.lambda_n,
                                      fixed, self.mip_rel_gap, self.time_limit_s)
            self._last_inputs = inputs
        return self.last

    def _observe_types(self, state: SchedState) -> None:
        for i in np.flatnonzero(np.asarray(state.ngpu) > 0):
            nodes = state.pl_nodes[int(state.pl_indptr[i]):int(state.pl_indptr[i + 1])]
            self.seen[state.active[i], state.cluster.node_type[nodes]] = True

    def place(self, state: SchedState, choice: np.ndarray) -> Plan:
        """The round's placements by :attr:`placement_rule` (:data:`PLACEMENT_RULES`)."""
        cfg = self.configs
        chosen = choice >= 0
        col = np.maximum(choice, 0)
        job_type = np.where(chosen, cfg.type_idx[col], -1)
        if self.placement_rule == "keep":
            kept = chosen & (choice == self.prev[state.active])
            return place_by_type(state, kept, job_type, cfg.gpus[col], cfg.per_node)
        keys = walk_by_type(state, job_type, cfg.gpus[col], cfg.per_node)
        return self.placer.place(state, keys, self.model)


def walk_by_type(state: SchedState, job_type: np.ndarray, job_gpus: np.ndarray,
                 per_node: np.ndarray) -> dict[int, PeerKey]:
    """The Sia simulator's placement of a whole allocation from empty nodes: per type, its jobs
    most GPUs first (stable), through :func:`walk_type`; active index -> (type, node per GPU)."""
    free = state.cluster.node_gpus.astype(np.int64).copy()
    todo = np.flatnonzero(job_type >= 0)
    out: dict[int, PeerKey] = {}
    for t in range(per_node.shape[0]):
        mine = todo[job_type[todo] == t]
        order = mine[np.argsort(-job_gpus[mine], kind="stable")]
        nodes = np.flatnonzero(state.cluster.node_type == t)
        for i, got in walk_type(nodes, int(per_node[t]), free, [(int(i), int(job_gpus[i])) for i in order]):
            out[i] = (t, got)
    return out


def realloc_factor(age: np.ndarray, restarts: np.ndarray, penalty_s) -> np.ndarray:
    """Pollux's re-allocation factor as Sia applies it: ``max(age - restarts d, 0) / (age + d)``
    (each caller adds its own rule for jobs too young to be penalized)."""
    return np.maximum(age - restarts * penalty_s, 0.0) / (age + penalty_s)


def place_by_type(state: SchedState, kept: np.ndarray, job_type: np.ndarray, job_gpus: np.ndarray,
                  per_node: np.ndarray) -> Plan:
    """Sia's placement of a round's allocation: active job ``i`` gets ``job_gpus[i]`` GPUs of type
    ``job_type[i]`` (-1: none); ``kept`` jobs keep their current GPUs; the others, per type, most
    GPUs first, go through :func:`place_on_type`; ``per_node`` is each type's GPUs per node."""
    per_job: list[list[tuple[int, int]]] = [[] for _ in range(job_type.shape[0])]
    free = state.cluster.node_gpus.astype(np.int64).copy()
    for i in np.flatnonzero(kept):
        per_job[i] = current_pairs(state, int(i))
        for n, c in per_job[i]:
            free[n] -= c
    todo = np.flatnonzero((job_type >= 0) & ~kept)
    for t in range(per_node.shape[0]):
        nodes = np.flatnonzero(state.cluster.node_type == t)
        mine = todo[job_type[todo] == t]
        order = mine[np.argsort(-job_gpus[mine], kind="stable")]
        place_on_type(nodes, int(per_node[t]), free, [(int(i), int(job_gpus[i])) for i in order], per_job)
    return csr_plan(per_job)


def source_order(types: tuple[str, ...]) -> list[int]:
    """Indices of ``types`` in the order a projection source is picked: :data:`SOURCE_ORDER`
    first, then the others as given."""
    rank = {t: i for i, t in enumerate(SOURCE_ORDER)}
    return sorted(range(len(types)), key=lambda t: (rank.get(types[t], len(rank)), t))


def place_on_type(nodes: np.ndarray, full: int, free: np.ndarray, wants: list[tuple[int, int]],
                  per_job: list[list[tuple[int, int]]]) -> None:
    """:func:`walk_type`'s placement as (node, GPUs) pairs in ``per_job``."""
    for i, got in walk_type(nodes, full, free, wants):
        per_job[i] = sorted(Counter(got).items())


def walk_type(nodes: np.ndarray, full: int, free: np.ndarray,
              wants: list[tuple[int, int]]) -> list[tuple[int, tuple[int, ...]]]:
    """Sia's ``alloc_to_placement_fast`` on one type's ``nodes``: each job ``(i, GPUs)`` in order
    takes whole free nodes for its whole-node part, then free GPUs anywhere, scanning from a
    pointer carried from job to job; ``full`` is the type's GPUs per node; ``free`` is updated.
    Returns each job's node per GPU, in the order taken (their placement list)."""
    ptr, n_nodes, out = 0, nodes.shape[0], []
    for i, want in wants:
        got: list[int] = []
        whole = want // full
        for pos in (ptr + np.arange(n_nodes)) % n_nodes if whole else ():
            node = int(nodes[pos])
            if free[node] == full:
                free[node] = 0
                got += [node] * full
                want, whole = want - full, whole - 1
            ptr = (pos + 1) % n_nodes
            if whole == 0:
                break
        for pos in (ptr + np.arange(n_nodes)) % n_nodes if want else ():
            node = int(nodes[pos])
            take = min(int(free[node]), want)
            free[node] -= take
            got += [node] * take
            want -= take
            ptr = (pos + 1) % n_nodes
            if want == 0:
                break
        if want > 0:
            raise ConfigError(f"policy sia: {want} GPUs of a configuration found no free GPU on their type")
        out.append((i, tuple(got)))
    return out
