"""Sia's allocation ILP (SOSP'23 §4; ``sia-simulator/sia.py`` ``__solve_mip_rescaled``) on HiGHS
(:mod:`sim.highs`: its bindings called directly, the feasibility-jump heuristic off).

One binary ``x[j, c]`` per job and *valid* configuration ``c`` (type, nodes, GPUs):

    minimize   sum_{j,c} (A[j, c] - lambda_n) x[j, c]        (= Sia's objective minus a constant)
    subject to sum_c x[j, c] <= 1                  each job at most one configuration
               sum_{j,c: type(c) = t} gpus(c) x[j, c] <= capacity(t)   each GPU type
               x[j, prev_j] = 1                    jobs in checkpoint-restore keep theirs

with ``A = round(S^p, 2)`` clipped at :data:`~sim.policies.sia.GOODPUT_CLIP`, ``S`` the scaled
normalized goodput.  Sia lists every configuration with a gain of 1e-4 for invalid ones (cost
``1e-4^p`` = 100 at p = -0.5, far above ``lambda_n``, so never chosen); we leave them out, which
gives the same optimum with fewer variables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import highs
from ..errors import ConfigError

__all__ = ["IlpResult", "solve_sia_ilp", "MIP_REL_GAP", "TIME_LIMIT_S"]

#: relative MIP gap at which HiGHS stops (Sia's ``sia_solver_thresh`` = 1e-4)
MIP_REL_GAP = 1e-4
#: HiGHS time limit per round, seconds (the best solution found by then is used)
TIME_LIMIT_S = 5.0


@dataclass(frozen=True)
class IlpResult:
    choice: np.ndarray        # int64 [J]: chosen column per job, -1 for none
    objective: float          # Sia's objective value: sum A x + lambda_n (J - sum x)
    mip_gap: float            # HiGHS's final relative gap
    status: int


def solve_sia_ilp(cost: np.ndarray, valid: np.ndarray, col_type: np.ndarray, col_gpus: np.ndarray,
                  capacity: np.ndarray, lambda_n: float, fixed: np.ndarray | None = None,
                  mip_rel_gap: float = MIP_REL_GAP, time_limit_s: float = TIME_LIMIT_S,
                  method: str = "auto") -> IlpResult:
    """Solve the ILP above.  ``cost`` [J, C] is ``A``; ``valid`` [J, C] bool; ``col_type`` and
    ``col_gpus`` [C] describe the columns; ``capacity`` [types]; ``fixed`` [J] a column that job
    must keep, or -1.  ``method``: ``"milp"`` (HiGHS branch and bound on the whole ILP),
    ``"lp-round"`` (the LP relaxation, whose basic optimum has at most one fractional job per GPU
    type; jobs it assigns integrally keep that, the rest are solved exactly as a small ILP on the
    capacity left; the gap is then measured against the LP bound), ``"auto"``: ``"milp"`` up to
    :data:`DIRECT_MAX_VARS` variables."""
    if method not in ("auto", "milp", "lp-round"):
        raise ConfigError(f"Sia ILP: method must be 'auto', 'milp' or 'lp-round', got {method!r}")
    n_jobs = cost.shape[0]
    if n_jobs == 0:
        return IlpResult(np.zeros(0, np.int64), 0.0, 0.0, 0)
    fixed = np.full(n_jobs, -1, np.int64) if fixed is None else np.asarray(fixed, np.int64)
    keep = fixed >= 0
    if np.any(~valid[np.flatnonzero(keep), fixed[keep]]):
        raise ConfigError("Sia ILP: a job in checkpoint-restore must keep a valid configuration")
    j, c = np.nonzero(valid)
    if method == "auto":
        method = "milp" if j.shape[0] <= DIRECT_MAX_VARS else "lp-round"
    prob = (cost[j, c] - lambda_n, j, c, col_type, col_gpus, n_jobs, np.where(keep[j] & (fixed[j] == c), 1.0, 0.0))
    if method == "milp":
        x, gap, status = _solve(*prob, capacity.astype(float), True, mip_rel_gap, time_limit_s)
    else:
        x, gap, status = _lp_round(prob, capacity.astype(float), mip_rel_gap, time_limit_s)
    choice = np.full(n_jobs, -1, np.int64)
    choice[j[x]] = c[x]
    value = float(cost[j[x], c[x]].sum() + lambda_n * (n_jobs - x.sum()))
    return IlpResult(choice, value, gap, status)


#: variables above which ``method="auto"`` solves the LP relaxation first (``"lp-round"``)
DIRECT_MAX_VARS = 20_000


def _solve(obj, j, c, col_type, col_gpus, n_jobs, lo, cap, integral, gap, limit):
    """One HiGHS solve; rows: one per job (at most one configuration), then one per GPU type."""
    n_var = j.shape[0]
    indices = np.empty(2 * n_var, np.int32)             # column k: its job's row, its type's row
    data = np.ones(2 * n_var)
    indices[0::2], indices[1::2] = j, n_jobs + col_type[c]
    data[1::2] = col_gpus[c]
    h = highs.build(obj, lo, np.ones(n_var), np.arange(0, 2 * n_var + 1, 2), indices, data,
                    np.concatenate([np.ones(n_jobs), cap]), integral,
                    {"mip_rel_gap": float(gap), "time_limit": float(limit), **highs.NO_FEASIBILITY_JUMP})
    res = highs.solve(h, integral)
    if res.x is None or (not integral and res.status != 0):   # lp-round needs the LP's optimum
        raise ConfigError(f"Sia ILP: HiGHS found no solution (status {res.status}: {res.message})")
    out = res.x if not integral else res.x > 0.5
    return out, res.mip_gap, res.status


def _lp_round(prob, cap, gap, limit):
    obj, j, c, col_type, col_gpus, n_jobs, lo = prob
    x, _, _ = _solve(obj, j, c, col_type, col_gpus, n_jobs, lo, cap, False, gap, limit)
    bound = float(obj @ x)
    whole = x > 1 - 1e-7
    done = np.zeros(n_jobs, bool)
    done[j[whole]] = True
    frac = np.flatnonzero(~done & (np.bincount(j, weights=x, minlength=n_jobs) > 1e-7))
    used = np.bincount(col_type[c[whole]], weights=col_gpus[c[whole]], minlength=cap.shape[0])
    out = whole.copy()
    if frac.size:
        sel = np.isin(j, frac)
        remap = np.full(n_jobs, -1)
        remap[frac] = np.arange(frac.size)
        y, _, _ = _solve(obj[sel], remap[j[sel]], c[sel], col_type, col_gpus, frac.size, lo[sel],
                         cap - used, True, gap, limit)
        out[np.flatnonzero(sel)[y]] = True
    value = float(obj[out].sum())
    return out, (value - bound) / max(abs(value), 1e-12), 0
