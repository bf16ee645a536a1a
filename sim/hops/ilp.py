"""Hops' prior-weighted ILP (algorithms.md §4.8; Hops eq.11-13) on HiGHS.

    max  sum_ij (prior_i + bias)^lambda * G_ij * X_ij
    s.t. sum_j X_ij <= 1                      for every job i
         sum_ij X_ij * Consume_ijt <= S_t     for every server t,   X_ij in {0, 1}

``G_ij`` = throughput of config j / the smallest throughput among job i's configs (Sia's
normalization); ``bias = |min prior| + 0.01`` when some priority is <= 0, else 0.

How a round's ILP is bounded in time (issue 14; docs/hops.md "ILP time").  Profiling a 512-GPU
round showed HiGHS solving every instance at its root node (4,000-5,000 binaries, ~170 jobs):
the time is root processing (cuts, probing, heuristics), not branching, so a node limit does not
bound it.  :func:`solve` therefore works in up to four steps, each deterministic:

0. **Trivial**: when every job's best configuration fits together, that choice is optimal
   (``how == "trivial"``; most rounds of a lightly loaded cluster).
1. **LP relaxation** (upper bound ``U``; 0.02-0.05 s at that size).
2. **Relax-and-fix incumbent**: every column at 1 in the LP is fixed, the small residual ILP
   (fractional jobs on the capacity left) is solved to optimality.  If its value ``V`` satisfies
   ``V >= (1 - mip_rel_gap) * U`` the answer carries the same guarantee HiGHS' gap test gives,
   and the full ILP is skipped (``IlpOutcome.how == "lp"``).
3. Otherwise the **full ILP**, warm-started with the incumbent (HiGHS ``setSolution``), at
   ``mip_rel_gap``, with the optional wall-clock ``time_limit_s`` (None: no limit, runs stay
   deterministic) and ``max_nodes``.  When a limit stops it, HiGHS' best solution is used; it is
   never worse than the incumbent (``how == "limit"``; counted by the policy).

HiGHS runs with ``output_flag`` off and one thread, through :mod:`sim.highs` (the highspy
bindings scipy ships).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import highs
from .configs import Configs

__all__ = ["prior_weights", "gain", "solve_ilp", "solve", "IlpOutcome", "DEFAULT_MIP_GAP"]

#: relative MIP gap (algorithms.md §4.8: 0.01, following the paper's Fig.14)
DEFAULT_MIP_GAP = 0.01
_EPS = 1e-6


def prior_weights(prior: np.ndarray, lam: float = 1.0) -> np.ndarray:
    """``(prior + bias) ** lambda`` with Hops' bias."""
    prior = np.asarray(prior, float)
    bias = 0.0 if prior.size == 0 or prior.min() > 0 else abs(prior.min()) + 0.01
    return (prior + bias) ** float(lam)


def gain(job: np.ndarray, thr: np.ndarray, n_jobs: int) -> np.ndarray:
    """G per config: its throughput over the smallest positive one of the same job."""
    low = np.full(n_jobs, np.inf)
    pos = thr > 0
    np.minimum.at(low, job[pos], thr[pos])
    return np.where(pos, thr / low[job], 0.0)


@dataclass
class IlpOutcome:
    """choice: config index per job (-1: none); how: "empty", "trivial" (every job's best config
    fits), "lp" (relax-and-fix within the gap),
    "ilp" (HiGHS within the gap), "limit" (a time/node limit stopped HiGHS: its best solution,
    at least the incumbent) or "fallback" (HiGHS gave no solution: the incumbent);
    bound: the LP bound; value: the objective of ``choice``."""

    choice: np.ndarray
    how: str
    bound: float = 0.0
    value: float = 0.0


def _matrix(cfg: Configs, n_jobs: int):
    """Column-wise constraint matrix: one-per-job rows, then one row per server."""
    lens = np.diff(cfg.indptr)
    start = np.concatenate([[0], np.cumsum(lens + 1)]).astype(np.int32)
    idx = np.empty(start[-1], np.int32)
    val = np.empty(start[-1])
    head = np.zeros(start[-1], np.bool_)
    head[start[:-1]] = True
    idx[head], val[head] = cfg.job, 1.0
    idx[~head], val[~head] = n_jobs + cfg.nodes, cfg.counts
    return start, idx, val


def _highs(cfg: Configs, w: np.ndarray, n_jobs: int, capacity: np.ndarray, integer: bool, opts: dict):
    m = cfg.job.shape[0]
    start, idx, val = _matrix(cfg, n_jobs)
    return highs.build(w, np.zeros(m), np.ones(m), start, idx, val,
                       np.concatenate([np.ones(n_jobs), np.asarray(capacity, float)]), integer,
                       {"threads": 1, **opts}, maximize=True)


def _run(h) -> tuple[np.ndarray | None, str]:
    res = highs.solve(h, True)
    return res.x, res.message


def _subset(cfg: Configs, keep: np.ndarray) -> Configs:
    k = np.flatnonzero(keep)
    lens = np.diff(cfg.indptr)[k]
    starts = np.concatenate([[0], np.cumsum(lens)])
    flat = np.repeat(cfg.indptr[k], lens) + np.arange(starts[-1]) - np.repeat(starts[:-1], lens)
    return Configs(cfg.job[k], starts, cfg.nodes[flat], cfg.counts[flat])


def _fits(cfg: Configs, cap: np.ndarray) -> np.ndarray:
    """bool per config: every server of it has room in ``cap``."""
    short = (cap[cfg.nodes] < cfg.counts).astype(np.int64)
    return np.add.reduceat(short, cfg.indptr[:-1]) == 0 if cfg.job.size else np.zeros(0, np.bool_)


def _best_each(cfg: Configs, w: np.ndarray, n_jobs: int) -> np.ndarray:
    """Per job its highest-weight config with a positive weight (-1: none; ties: the first)."""
    order = np.lexsort((np.arange(w.size), -w))
    order = order[w[order] > 0]
    best = np.full(n_jobs, -1, np.int64)
    first = np.unique(cfg.job[order], return_index=True)
    best[first[0]] = order[first[1]]
    return best


def _fits_together(cfg: Configs, pick: np.ndarray, capacity: np.ndarray) -> bool:
    use = np.zeros(len(capacity), np.int64)
    sel = _subset(cfg, np.isin(np.arange(cfg.job.size), pick[pick >= 0]))
    np.add.at(use, sel.nodes, sel.counts)
    return bool((use <= np.asarray(capacity)).all())


def _relax_and_fix(cfg, w, n_jobs, capacity, x_lp) -> np.ndarray:
    """0/1 per config: the LP's integral columns, plus the exact ILP over the rest."""
    x = (x_lp > 1 - _EPS).astype(float)
    cap = np.asarray(capacity, np.int64).copy()
    on = np.flatnonzero(x)
    lens = np.diff(cfg.indptr)
    flat = _subset(cfg, x > 0)
    np.subtract.at(cap, flat.nodes, flat.counts)
    done = np.zeros(n_jobs, np.bool_)
    done[cfg.job[on]] = True
    rest = ~done[cfg.job] & _fits(cfg, cap) & (lens > 0)
    if rest.any():
        sub = _subset(cfg, rest)
        y, _ = _run(_highs(sub, w[rest], n_jobs, cap, True, {"mip_rel_gap": 0.0}))
        if y is not None:
            x[np.flatnonzero(rest)] = np.round(y)
    return x


def solve(cfg: Configs, weight_gain: np.ndarray, n_jobs: int, capacity: np.ndarray,
          mip_rel_gap: float = DEFAULT_MIP_GAP, time_limit_s: float | None = None,
          max_nodes: int | None = None) -> IlpOutcome:
    """The ILP in the three steps of the module doc; see :class:`IlpOutcome`."""
    m = cfg.job.shape[0]
    choice = np.full(n_jobs, -1, np.int64)
    if m == 0:
        return IlpOutcome(choice, "empty")
    w = np.asarray(weight_gain, float)
    best = _best_each(cfg, w, n_jobs)
    if _fits_together(cfg, best, capacity):
        on = best[best >= 0]
        choice[cfg.job[on]] = on
        return IlpOutcome(choice, "trivial", float(w[on].sum()), float(w[on].sum()))
    x_lp, _ = _run(_highs(cfg, w, n_jobs, capacity, False, {}))
    bound = float(w @ x_lp) if x_lp is not None else float(w.sum())
    inc = _relax_and_fix(cfg, w, n_jobs, capacity, x_lp) if x_lp is not None else np.zeros(m)
    how = "lp"
    if w @ inc < (1 - mip_rel_gap) * bound - _EPS:
        opts = {"mip_rel_gap": float(mip_rel_gap)}
        if time_limit_s is not None:
            opts["time_limit"] = float(time_limit_s)
        if max_nodes is not None:
            opts["mip_max_nodes"] = int(max_nodes)
        h = _highs(cfg, w, n_jobs, capacity, True, opts)
        sol = highs.core.HighsSolution()
        sol.col_value = inc.tolist()
        h.setSolution(sol)
        x, status = _run(h)
        how = "ilp" if status == "Optimal" else "limit"
        if x is None:
            how = "fallback"
        elif w @ np.round(x) >= w @ inc:
            inc = np.round(x)
    on = np.flatnonzero(inc > 0.5)
    choice[cfg.job[on]] = on
    return IlpOutcome(choice, how, bound, float(w @ inc))


def solve_ilp(cfg: Configs, weight_gain: np.ndarray, n_jobs: int, capacity: np.ndarray,
              mip_rel_gap: float = DEFAULT_MIP_GAP, time_limit_s: float | None = None,
              max_nodes: int | None = None) -> np.ndarray:
    """Chosen config index per job (-1: none): :func:`solve`'s choice."""
    return solve(cfg, weight_gain, n_jobs, capacity, mip_rel_gap, time_limit_s, max_nodes).choice
