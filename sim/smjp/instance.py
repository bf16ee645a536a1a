"""A multi-job placement instance: waiting jobs, free workers on nodes, and its objective.

Jobs ``i = 0..S-1`` have ``T_i`` iterations left, a global batch ``P_i`` (samples), ``D_i``
gradient bytes, a worker range ``[kmin_i, kmax_i]`` and the time already waited.  Workers are the
free GPUs of ``N`` nodes (``cap[n]`` on node n); ``rho[i, n]`` is the samples/s of one worker of
node n for job i (0: the job cannot run there).  A placement is an integer matrix ``x`` [S, N].
Objective: the average JCT, ``mean_i wait_i + T_i * iteration_i(x)`` (sim.smjp.latency).

Nodes that look alike to every job (same throughputs and bandwidths) form a *class*; the market
works on classes (:attr:`Instance.classes`), the exact MILP on nodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import ConfigError
from .latency import LatencyModel

__all__ = ["Instance", "Classes", "jain"]


def jain(values: np.ndarray) -> float:
    """Jain's index ``(sum v)^2 / (n sum v^2)`` in (0, 1]; 1 for no values."""
    v = np.asarray(values, float)
    if v.size == 0 or not np.all(np.isfinite(v)):
        return 1.0 if v.size == 0 else 0.0
    den = v.size * float(np.sum(v * v))
    return float(np.sum(v)) ** 2 / den if den > 0 else 1.0


@dataclass(frozen=True, eq=False)
class Classes:
    """Nodes grouped by what a job can tell apart: ``of_node`` [N] -> class; per class the
    per-worker throughputs ``rho`` [S, C], free workers ``cap`` [C], the most free on one node
    ``node_max`` [C] and the bandwidths (Gbit/s)."""

    of_node: np.ndarray
    rho: np.ndarray
    cap: np.ndarray
    node_max: np.ndarray
    intra: np.ndarray
    inter: np.ndarray


@dataclass(frozen=True, eq=False)
class Instance:
    remaining: np.ndarray      # [S] iterations T_i
    P: np.ndarray              # [S] samples per iteration
    grad: np.ndarray           # [S] gradient bytes
    kmin: np.ndarray           # [S] int
    kmax: np.ndarray           # [S] int
    wait: np.ndarray           # [S] seconds waited so far
    rho: np.ndarray            # [S, N] samples/s of one worker
    cap: np.ndarray            # [N] free workers
    intra: np.ndarray          # [N] Gbit/s
    inter: np.ndarray          # [N] Gbit/s
    model: LatencyModel

    def __post_init__(self):
        S, N = self.rho.shape
        for name in ("remaining", "P", "grad", "kmin", "kmax", "wait"):
            if np.shape(getattr(self, name)) != (S,):
                raise ConfigError(f"SMJP instance: {name} has shape {np.shape(getattr(self, name))}, "
                                  f"expected ({S},)")
        for name in ("cap", "intra", "inter"):
            if np.shape(getattr(self, name)) != (N,):
                raise ConfigError(f"SMJP instance: {name} has shape {np.shape(getattr(self, name))}, "
                                  f"expected ({N},)")
        if np.any(self.kmin < 1) or np.any(self.kmax < self.kmin):
            raise ConfigError("SMJP instance: every job needs 1 <= kmin <= kmax")
        if np.any(self.rho < 0) or not np.all(np.isfinite(self.rho)):
            raise ConfigError("SMJP instance: throughputs rho must be finite and >= 0")

    @property
    def n_jobs(self) -> int:
        return int(self.rho.shape[0])

    @property
    def n_workers(self) -> int:
        return int(self.cap.sum())

    # -- objective --------------------------------------------------------------------
    def iteration_times(self, x: np.ndarray) -> np.ndarray:
        """Seconds per iteration of each job under placement ``x`` [S, N] (inf: no workers,
        or a worker or link it cannot use)."""
        rows, cols = np.nonzero(x)
        indptr = np.zeros(self.n_jobs + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=self.n_jobs), out=indptr[1:])
        return self.model.times(self.P, self.grad, indptr, x[rows, cols], self.rho[rows, cols],
                                self.intra[cols], self.inter[cols])

    def jct(self, x: np.ndarray) -> np.ndarray:
        return self.wait + self.remaining * self.iteration_times(x)

    def pattern_jct(self, i: int, pats: np.ndarray) -> np.ndarray:
        """Job i's completion time on each of the placements ``pats`` [n, N] (one row each)."""
        rows, cols = np.nonzero(pats)
        n = pats.shape[0]
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        t = self.model.times(np.full(n, self.P[i]), np.full(n, self.grad[i]), indptr,
                             pats[rows, cols], self.rho[i, cols], self.intra[cols], self.inter[cols])
        return self.wait[i] + self.remaining[i] * t

    @cached_property
    def isolated(self) -> np.ndarray:
        return self.isolated_times()

    def isolated_times(self) -> np.ndarray:
        """Each job's compute time per iteration on its ``kmax`` fastest free workers, alone
        (the slowdown denominator; communication left out)."""
        S = self.n_jobs
        order = np.argsort(-self.rho, axis=1, kind="stable")
        capo = self.cap[order]
        before = np.cumsum(capo, axis=1) - capo
        take = np.clip(self.kmax[:, None] - before, 0, capo)
        best = np.take_along_axis(self.rho, order, axis=1)
        rsum = (take * best).sum(axis=1)
        with np.errstate(divide="ignore"):
            return np.where(rsum > 0, self.P / rsum, np.inf) if S else np.zeros(0)

    def slowdowns(self, jct: np.ndarray) -> np.ndarray:
        return jct / np.maximum(self.remaining * self.isolated, 1e-300)

    def fits(self, x: np.ndarray) -> bool:
        n = x.sum(axis=1)
        return bool(np.all(x >= 0) and np.all(x.sum(axis=0) <= self.cap)
                    and np.all(n >= self.kmin) and np.all(n <= self.kmax))

    # -- classes ----------------------------------------------------------------------
    @cached_property
    def classes(self) -> Classes:
        key = np.vstack([self.rho, self.intra[None, :], self.inter[None, :]]).T
        _, first, of_node = np.unique(key, axis=0, return_index=True, return_inverse=True)
        of_node = of_node.reshape(-1)
        C = first.shape[0]
        node_max = np.zeros(C, np.int64)
        np.maximum.at(node_max, of_node, self.cap.astype(np.int64))
        return Classes(of_node=of_node, rho=self.rho[:, first],
                       cap=np.bincount(of_node, weights=self.cap, minlength=C).astype(np.int64),
                       node_max=node_max, intra=self.intra[first], inter=self.inter[first])
