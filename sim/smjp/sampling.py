"""Sampling-based multi-job placement (paper 2): the sparsified search over categories.

``N`` categories are drawn around the work-proportional split (sim.smjp.categories); each is
cleared by the matching market (sim.smjp.market) and scored by its estimated completion times;
the ``refine_top`` best are improved by pairwise-swap local search, packed onto nodes and
scored exactly; the best of them is repaired at node level (sim.smjp.repair: jobs re-inserted
at their best placements, alone or in conflicting pairs, judged by the exact JCTs).  Score:

    score = avg JCT * (1 + beta_f * (1 - Jain(slowdowns)))

with ``slowdown_i = JCT_i / (T_i * isolated iteration time_i)``.  ``theta`` moves the centre of
the draws from the equal split (0, fairer) to the work-proportional one (1).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .categories import sample_categories, work_weights
from .instance import Instance, jain
from .market import local_search, pack, solve_categories
from .repair import exact_jcts, repair, repair_context

__all__ = ["Solution", "SamplingConfig", "solve_sampling", "score", "solution"]


@dataclass(frozen=True)
class SamplingConfig:
    """Knobs of the sampling solver.

    samples: categories drawn per decision (N; default 64).
    theta: centre of the draws, 0 = equal split (fair) ... 1 = work-proportional (default 0.5).
    beta_f: weight of unfairness in the score (0: pure average JCT; default 0).
    swap_passes: sweeps of the pairwise-swap local search per refined category (default 2).
    refine_top: best-estimated categories refined by local search, packed onto nodes and
        scored exactly (default 4).
    seed: seed of the draws.
    repair_passes: sweeps of the node-level repair of the best packed candidate
        (sim.smjp.repair: jobs, and pairs of conflicting jobs, re-inserted at their best
        placements, judged by the exact JCTs); 0 turns it off (default 1).
    """

    samples: int = 64
    theta: float = 0.5
    beta_f: float = 0.0
    swap_passes: int = 2
    refine_top: int = 4
    seed: int = 0
    repair_passes: int = 1

    def __post_init__(self):
        checks = [("samples", self.samples >= 1), ("theta", 0.0 <= self.theta <= 1.0),
                  ("beta_f", self.beta_f >= 0 and np.isfinite(self.beta_f)),
                  ("swap_passes", self.swap_passes >= 0), ("refine_top", self.refine_top >= 1),
                  ("repair_passes", self.repair_passes >= 0)]
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"SMJP: bad {name}={getattr(self, name)!r} (samples >= 1, "
                                  f"0 <= theta <= 1, beta_f >= 0, swap_passes >= 0, refine_top >= 1, "
                                  f"repair_passes >= 0)")


@dataclass(frozen=True, eq=False)
class Solution:
    x: np.ndarray           # [S, N] workers of each job on each node
    jct: np.ndarray         # [S] seconds
    avg_jct: float
    jain: float             # Jain's index of the slowdowns
    score: float
    categories: int         # categories evaluated
    seconds: float          # decision time


def score(avg_jct: float, fairness: float, beta_f: float) -> float:
    return avg_jct * (1.0 + beta_f * (1.0 - fairness))


def solution(inst: Instance, x: np.ndarray, beta_f: float, categories: int, seconds: float,
             jct: np.ndarray | None = None) -> Solution:
    """The Solution of placement ``x`` (``jct``: its completion times, if known)."""
    jct = inst.jct(x) if jct is None else jct
    avg = float(jct.mean()) if jct.size else 0.0
    fair = jain(inst.slowdowns(jct))
    return Solution(x, jct, avg, fair, score(avg, fair, beta_f), categories, seconds)


def _estimated_scores(inst: Instance, solved, beta_f: float) -> np.ndarray:
    out = np.full(len(solved), np.inf)
    found = [k for k, sol in enumerate(solved) if sol is not None]
    if not found:
        return out
    jct = inst.wait + inst.remaining * np.stack([solved[k][1] for k in found])
    if beta_f == 0:                           # the score is the average JCT
        out[found] = jct.mean(axis=1)
        return out
    for k, row in zip(found, jct):
        out[k] = score(float(row.mean()), jain(inst.slowdowns(row)), beta_f)
    return out


def solve_sampling(inst: Instance, config: SamplingConfig = SamplingConfig(),
                   rng: np.random.Generator | None = None) -> Solution | None:
    """The sampling-based placement of every job of ``inst``; None when no drawn category can
    be matched (e.g. too few workers the jobs can use)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(config.seed) if rng is None else rng
    total = min(inst.n_workers, int(inst.kmax.sum()))
    if int(inst.kmin.sum()) > total:
        return None
    usable = inst.cap[None, :] * (inst.rho > 0)
    rbar = (inst.rho * usable).sum(axis=1) / np.maximum(usable.sum(axis=1), 1)
    w = work_weights(inst.remaining, inst.P, rbar, config.theta)
    cats = sample_categories(w, inst.kmin, inst.kmax, total, config.samples, rng)
    solved = solve_categories(inst, cats)
    est = _estimated_scores(inst, solved, config.beta_f)
    top = [k for k in np.argsort(est, kind="stable")[:config.refine_top] if np.isfinite(est[k])]
    if not top:
        return None
    best, ev = None, repair_context(inst, config.beta_f)
    for k in top:
        y = solved[k][0]
        if config.swap_passes > 0:
            local_search(inst, y, config.swap_passes)
        x = pack(inst, y)
        sol = solution(inst, x, config.beta_f, len(cats), 0.0, exact_jcts(x, ev))
        if best is None or sol.score < best.score:
            best = sol
    if config.repair_passes > 0 and repair(inst, best.x, config.repair_passes, config.beta_f, ev):
        best = solution(inst, best.x, config.beta_f, len(cats), 0.0, exact_jcts(best.x, ev))
    return Solution(best.x, best.jct, best.avg_jct, best.jain, best.score, len(cats),
                    time.perf_counter() - t0)
