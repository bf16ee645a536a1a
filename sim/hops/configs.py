"""Requirement sets, placement sensitivity and configuration generation of Hops
(algorithms.md §4.1, §4.6, §4.7).

A configuration is a set of (server, GPUs) pairs; all configurations of one decision are held as
CSR arrays (``indptr``, ``nodes``, ``counts``) with the job position of each (``job``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["requirement_sets", "sensitivity", "Configs", "generate_configs"]


def requirement_sets(demand, gpus_min, gpus_max, allowed, r_num: int = 4) -> list[np.ndarray]:
    """Per job its sorted requirement set R: ``allowed`` (the job table's ``gpus_allowed``) when
    given, else ``r_num`` equally spaced counts in [gpus_min, gpus_max] (§4.1), else {demand}."""
    out = []
    for k in range(len(demand)):
        a = None if allowed is None else allowed[k]
        if a:
            out.append(np.unique(np.asarray(a, np.int64)))
        elif gpus_max[k] > gpus_min[k]:
            out.append(np.unique(np.round(np.linspace(gpus_min[k], gpus_max[k], r_num)).astype(np.int64)))
        else:
            out.append(np.array([int(demand[k])], np.int64))
    return out


def sensitivity(oracle, models: np.ndarray, gpu_types: tuple, type_id: int) -> np.ndarray:
    """Hops eq.10: ``thr_agg / thr_dis`` per GPU, {0:1} against {0:1, 1:1} on two servers of
    type ``type_id`` (from the oracle's type-level table)."""
    n = models.shape[0]
    mask = np.full(n, 1 << type_id, np.int64)
    one = oracle.rates(models, np.ones(n, np.int64), np.ones(n, np.int64), mask, np.ones(n), gpu_types)
    two = oracle.rates(models, np.full(n, 2, np.int64), np.full(n, 2, np.int64), mask, np.ones(n),
                       gpu_types)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(two > 0, np.asarray(one, float) / (np.asarray(two, float) / 2), 1.0)


@dataclass
class Configs:
    """Configurations of many jobs: ``job`` (position of the owner), CSR ``indptr/nodes/counts``."""

    job: np.ndarray
    indptr: np.ndarray
    nodes: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> np.ndarray:
        return np.add.reduceat(self.counts, self.indptr[:-1]) if self.job.size else np.zeros(0, np.int64)


def _aggregated(free, node_type, t, r, fac, top):
    """Configs {s: r} on the ``top`` servers of type t with room, best estimated factor first
    (ties: tightest fit).  Returns (job rows, server) pairs for the rows of ``fac``."""
    srv = np.flatnonzero((node_type == t) & (free >= r))
    if srv.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key = -fac[:, srv] * 1e6 + free[srv][None, :]
    pick = np.argsort(key, axis=1, kind="stable")[:, :top]
    rows = np.repeat(np.arange(fac.shape[0]), pick.shape[1])
    return rows, srv[pick].ravel()


def _distributed(free, node_type, t, r, limit):
    """Minimal runs of adjacent servers of type t (by ID, those with idle GPUs) whose idle GPUs
    reach r, each filled as much as possible (§4.7); at most ``limit``, lowest IDs first."""
    srv = np.flatnonzero((node_type == t) & (free > 0))
    cum = np.concatenate([[0], np.cumsum(free[srv])])
    ends = np.searchsorted(cum, cum[:-1] + r, side="left")      # first end with sum >= r
    ok = ends <= srv.size
    if not ok.any():
        return []
    length = np.where(ok, ends - np.arange(srv.size), np.iinfo(np.int64).max)
    best = length.min()
    if best < 2:
        return []
    starts = np.flatnonzero(length == best)[:limit]
    out = []
    for s in starts.tolist():
        nodes = srv[s:s + best]
        counts = free[nodes].copy()
        counts[-1] -= int(cum[s + best] - cum[s] - r)
        out.append((nodes, counts))
    return out


def generate_configs(reqs: list[np.ndarray], fac: np.ndarray, high: np.ndarray, free: np.ndarray,
                     node_type: np.ndarray, node_gpus: np.ndarray, n_types: int,
                     top: int = 4, dist_limit: int = 4) -> Configs:
    """Configurations of the candidate jobs on the ``free`` GPUs (§4.7).

    reqs: per candidate its requirement set; fac: [n_cand, n_nodes] estimated factors (for the
    choice of servers); high: bool per candidate, high placement sensitivity.  For every GPU type
    and requirement ``R_k``: aggregated configs ``{t: R_k}`` on servers with ``R_k <= S_t`` (the
    ``top`` best estimated servers of the type; our cap [I]), and, for low-sensitivity jobs (or
    high-sensitivity ones whose ``R_1`` exceeds every server of the type), distributed configs
    over the fewest adjacent servers, only when no single server of the type fits ``R_k``.
    """
    rows, nodes, counts, lens = [], [], [], []
    values = np.unique(np.concatenate(reqs)) if reqs else np.zeros(0, np.int64)
    has = np.array([[v in set(r.tolist()) for v in values] for r in reqs], np.bool_).reshape(len(reqs), -1)
    r1 = np.array([r[0] for r in reqs], np.int64)
    for t in range(n_types):
        biggest = int(node_gpus[node_type == t].max(initial=0))
        spread_ok = ~high | (r1 > biggest)
        for v_i, r in enumerate(values.tolist()):
            who = np.flatnonzero(has[:, v_i])
            if who.size == 0:
                continue
            jr, srv = _aggregated(free, node_type, t, r, fac[who], top)
            if jr.size:
                rows.append(who[jr]), nodes.append(srv), counts.append(np.full(srv.size, r)), \
                    lens.append(np.ones(srv.size, np.int64))
                continue
            spread = who[spread_ok[who]]
            for cn, cc in _distributed(free, node_type, t, r, dist_limit):
                rows.append(spread), lens.append(np.full(spread.size, cn.size, np.int64))
                nodes.append(np.tile(cn, spread.size)), counts.append(np.tile(cc, spread.size))
    if not rows:
        z = np.zeros(0, np.int64)
        return Configs(z, np.zeros(1, np.int64), z, z)
    job, ln = np.concatenate(rows), np.concatenate(lens)
    starts = np.concatenate([[0], np.cumsum(ln)])
    # group the flat lists by job (stable), keeping each config's servers together
    order = np.argsort(job, kind="stable")
    nd, ct = np.concatenate(nodes), np.concatenate(counts)
    seg = [np.arange(starts[i], starts[i + 1]) for i in order.tolist()]
    flat = np.concatenate(seg) if seg else np.zeros(0, np.int64)
    indptr = np.concatenate([[0], np.cumsum(ln[order])])
    return Configs(job[order], indptr, nd[flat].astype(np.int64), ct[flat].astype(np.int64))
