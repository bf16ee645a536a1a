"""SMJP's latency model: proportional workload assignment plus ring all-reduce (paper 2).

Worker k of job i processes a share of the global batch ``P_i`` (samples) proportional to its
throughput ``rho[i,k]`` (samples/s), so every worker finishes its share at the same time and no
worker straggles.  One iteration then takes

    compute   P_i / sum_k rho[i,k]              (integer shares: max_k n_k / rho[i,k], below)
    all-reduce 2 (n - 1) / n * D_i / r_min       (ring all-reduce of D_i gradient bytes, n workers)

with ``r_min`` the slowest link of the ring: the node's intra-node bandwidth when all workers
share one node, else the smallest inter-node bandwidth among the nodes used (algorithms.md
§3.4).  A job's completion time is ``wait + T_i * iteration``.  With ``integer_samples`` each
worker gets a whole number of samples, ``n_k = floor(P rho_k / sum rho)`` plus one for the
largest remainders, and the compute time is that of the slowest share.

Units: a job's work (sim.state.JobSpecs.work) counts per-GPU batches, the convention of the
throughput oracle (Gavel's tables: ``k`` GPUs make about ``k`` times the progress of one).  One
iteration of the global batch ``P_i = demand_i x B_i`` samples (``B_i``: the model's per-GPU
batch) is therefore ``demand_i`` units of work: ``T_i = work / demand_i`` iterations, and the
engine's rate is ``demand_i / iteration time`` work units per second.

Everything works on placements as CSR arrays (one entry per job and node); a worker whose
throughput is 0, or a ring over a link of bandwidth 0, gives an infinite iteration time.
:class:`ProportionalRates` is the same model as the engine's placement-level rate model
(sim.state.RateModel), so a job runs at exactly the rate SMJP planned with.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..network import GBIT_BYTES, comm_time
from .gradients import BYTES_PER_PARAM, DEFAULT_BATCH, DEFAULT_PARAMETERS, gradient_bytes, per_gpu_batch

__all__ = ["LatencyModel", "ProportionalRates", "GBIT_BYTES", "largest_remainder", "comm_time",
           "placement_times"]


def largest_remainder(total: np.ndarray, weights: np.ndarray, group: np.ndarray) -> np.ndarray:
    """int64 shares of ``total[g]`` over the entries of each group ``g``, proportional to
    ``weights``, rounded by largest remainder (ties: first entry first).  ``group`` is sorted;
    a group whose weights sum to 0 gets all-zero shares."""
    wsum = np.bincount(group, weights=weights, minlength=total.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(wsum[group] > 0, total[group] * weights / wsum[group], 0.0)
    base = np.floor(share + 1e-9).astype(np.int64)
    left = np.where(wsum > 0, total - np.bincount(group, weights=base, minlength=total.shape[0]), 0)
    order = np.lexsort((-(share - base), group))
    start = np.searchsorted(group, np.arange(total.shape[0]))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0]) - start[group[order]]
    return base + (rank < np.rint(left).astype(np.int64)[group])


def placement_times(P, grad, indptr, counts, rho, intra, inter, integer: bool = False) -> np.ndarray:
    """float64 seconds per iteration of each job on its placement.

    P, grad: per job (samples per iteration, gradient bytes); indptr: CSR over the entries (one
    per job and node, none empty); counts, rho, intra, inter: per entry (workers, samples/s of
    one worker, the node's intra- and inter-node bandwidth in bytes/s).
    """
    lens = np.diff(indptr)
    n = lens.shape[0]
    job = np.repeat(np.arange(n), lens)
    counts = np.asarray(counts, np.int64)
    n_w = np.bincount(job, weights=counts, minlength=n)
    rsum = np.bincount(job, weights=counts * rho, minlength=n)
    starts = indptr[:-1][lens > 0]
    inter_min = np.full(n, np.inf)
    inter_min[lens > 0] = np.minimum.reduceat(inter, starts) if starts.size else 0.0
    first = np.minimum(indptr[:-1], max(len(intra) - 1, 0))
    r_min = np.where(lens == 1, intra[first] if len(intra) else 0.0, inter_min)
    dead = np.bincount(job, weights=(rho <= 0), minlength=n) > 0
    compute = _integer_compute(P, job, counts, rho, n) if integer else _continuous(P, rsum)
    t = compute + comm_time(n_w, grad, r_min)
    return np.where(dead | (lens == 0), np.inf, t)


def _continuous(P, rsum):
    with np.errstate(divide="ignore"):
        return np.where(rsum > 0, P / rsum, np.inf)


def _integer_compute(P, job, counts, rho, n):
    """max_k n_k / rho_k with integer shares n_k (largest remainder) over single workers."""
    w_job = np.repeat(job, counts)
    w_rho = np.repeat(rho, counts)
    share = largest_remainder(np.rint(np.asarray(P, float)), w_rho, w_job)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(w_rho > 0, share / w_rho, np.inf)
    out = np.zeros(n)
    np.maximum.at(out, w_job, per)
    return out


@dataclass(frozen=True, eq=False)
class ModelTables:
    """Per model of an oracle on a cluster's GPU types: one GPU's iterations/s per type
    ([M, T], consolidated, server speed 1), gradient bytes and per-GPU batch ([M])."""

    one_gpu: np.ndarray
    grad: np.ndarray
    batch: np.ndarray


@dataclass(eq=False)
class LatencyModel:
    """The latency model with its knobs.

    integer_samples: whole samples per worker (largest remainder; default True) or the
        continuous share ``P / sum rho``.
    default_params: parameters of a model without an entry in sim.smjp.gradients.PARAMETERS.
    bytes_per_param: bytes per gradient entry (4: fp32).
    default_batch: per-GPU batch of a model whose name gives none.
    """

    integer_samples: bool = True
    default_params: float = DEFAULT_PARAMETERS
    bytes_per_param: float = BYTES_PER_PARAM
    default_batch: int = DEFAULT_BATCH
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        gradient_bytes([], default_params=self.default_params, bytes_per_param=self.bytes_per_param)
        if int(self.default_batch) < 1:
            raise ConfigError(f"latency model: default_batch must be >= 1, got {self.default_batch!r}")

    def tables(self, oracle, gpu_types: tuple[str, ...]) -> ModelTables:
        """The oracle's per-model tables on these GPU types (computed once per pair)."""
        key = (id(oracle), tuple(gpu_types))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is oracle:
            return hit[1]
        models = tuple(getattr(oracle, "models", ()))
        m, t = len(models), len(gpu_types)
        idx = np.repeat(np.arange(m, dtype=np.int64), t)
        mask = np.tile(np.left_shift(np.int64(1), np.arange(t, dtype=np.int64)), m)
        one = np.ones(m * t, np.int64)
        r1 = np.asarray(oracle.rates(idx, one, one, mask, np.ones(m * t), tuple(gpu_types)), float)
        tab = ModelTables(one_gpu=r1.reshape(m, t),
                          grad=gradient_bytes(models, default_params=self.default_params,
                                              bytes_per_param=self.bytes_per_param),
                          batch=per_gpu_batch(models, self.default_batch))
        self._cache[key] = (oracle, tab)
        return tab

    def job_terms(self, tab: ModelTables, model: np.ndarray, demand: np.ndarray):
        """(P samples per iteration, per-GPU batch, gradient bytes) of jobs: the global batch
        is the requested GPU count times the model's per-GPU batch."""
        batch = tab.batch[model].astype(float)
        return demand * batch, batch, tab.grad[model]

    def times(self, P, grad, indptr, counts, rho, intra_gbps, inter_gbps) -> np.ndarray:
        """Seconds per iteration (sim.smjp.latency.placement_times), bandwidths in Gbit/s."""
        return placement_times(np.asarray(P, float), np.asarray(grad, float),
                               np.asarray(indptr, np.int64), counts, np.asarray(rho, float),
                               np.asarray(intra_gbps, float) * GBIT_BYTES,
                               np.asarray(inter_gbps, float) * GBIT_BYTES, self.integer_samples)

    def params(self) -> dict:
        return {"integer_samples": self.integer_samples, "default_params": self.default_params,
                "bytes_per_param": self.bytes_per_param, "default_batch": self.default_batch}


class ProportionalRates:
    """The engine's rate model for SMJP placements (sim.state.RateModel): work units/s =
    ``demand / iteration time`` of :class:`LatencyModel` on the placement (units: module
    docstring).  Any policy may opt in by setting ``policy.rate_model = ProportionalRates()``."""

    def __init__(self, model: LatencyModel | None = None):
        self.model = model or LatencyModel()

    def rates(self, jobs, ids, indptr, nodes, counts, cluster, oracle) -> np.ndarray:
        tab = self.model.tables(oracle, cluster.gpu_types)
        m = jobs.model[ids]
        P, batch, grad = self.model.job_terms(tab, m, jobs.demand[ids].astype(float))
        job = np.repeat(np.arange(ids.shape[0]), np.diff(indptr))
        rho = (tab.one_gpu[m[job], cluster.node_type[nodes]] * cluster.node_speed[nodes]
               * batch[job])
        it = self.model.times(P, grad, indptr, counts, rho, cluster.intra_bw_gbps[nodes],
                              cluster.inter_bw_gbps[nodes])
        with np.errstate(divide="ignore"):
            return np.where(np.isfinite(it) & (it > 0), jobs.demand[ids] / it, 0.0)
