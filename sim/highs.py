"""HiGHS's MIP and LP solvers through the Python bindings scipy ships (``scipy.optimize._highspy``,
scipy >= 1.15: the same API as the ``highspy`` package, without a new dependency; a private
module: if a scipy release moves it, declare ``highspy`` and import ``highspy._core`` instead).

Called directly rather than through :func:`scipy.optimize.milp`, whose option checks and sparse
conversions cost about a fifth of a small solve.  The model goes in column-wise (CSC), one
``Highs`` object per solve; C-level output is silenced (:mod:`sim.quiet`).

:data:`NO_FEASIBILITY_JUMP` turns off HiGHS' feasibility-jump heuristic (HiGHS >= 1.9), which
runs a fixed amount of work before the root LP whatever the model's size: about two thirds of
the 3-8 ms HiGHS spends on one of Sia's rounds (7 jobs, 100 binaries on average).  It is a
primal heuristic only: the optimality test (``mip_rel_gap``) is the same with or without it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize._highspy import _core as core

from .quiet import quiet_stdout

__all__ = ["core", "NO_FEASIBILITY_JUMP", "Solved", "build", "solve"]

#: option that turns the feasibility-jump heuristic off (module docstring)
NO_FEASIBILITY_JUMP = {"mip_heuristic_run_feasibility_jump": False}

#: scipy.optimize.milp's status codes by HiGHS model status (0 optimal, 1 a limit stopped it,
#: 2 infeasible, 3 unbounded, 4 anything else)
_STATUS = {"Optimal": 0, "Time limit reached": 1, "Iteration limit reached": 1,
           "Infeasible": 2, "Unbounded": 3}


@dataclass(frozen=True)
class Solved:
    """x: column values (None without a feasible solution); status: milp's code (above);
    message: HiGHS' model status; mip_gap: the final relative gap (0 for an LP)."""

    x: np.ndarray | None
    status: int
    message: str
    mip_gap: float


def build(cost, lower, upper, indptr, indices, data, row_upper, integral: bool,
          options: dict, maximize: bool = False):
    """A ``Highs`` holding ``min (or max) cost @ x`` s.t. ``A x <= row_upper``, ``lower <= x <=
    upper``, with ``A`` column-wise (``indptr`` [n + 1], ``indices``, ``data``), every column
    integer if ``integral``.  ``options``: HiGHS option names and values (an option this HiGHS
    does not know is skipped: it has no such feature to switch)."""
    n, m = len(cost), len(row_upper)
    h = core._Highs()
    for key, value in {"output_flag": False, **options}.items():
        h.setOptionValue(key, value)
    h.passModel(n, m, len(data), int(core.MatrixFormat.kColwise),
                int(core.ObjSense.kMaximize if maximize else core.ObjSense.kMinimize), 0.0,
                np.asarray(cost, float), np.asarray(lower, float), np.asarray(upper, float),
                np.full(m, -np.inf), np.asarray(row_upper, float),
                np.asarray(indptr[:-1], np.int32), np.asarray(indices, np.int32),
                np.asarray(data, float), np.full(n, int(integral), np.int32))
    return h


def solve(h, integral: bool) -> Solved:
    """Run ``h`` (from :func:`build`)."""
    with quiet_stdout():
        h.run()
    message = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    x = np.asarray(h.getSolution().col_value, float)
    ok = info.primal_solution_status == 2 and x.size        # kSolutionStatusFeasible
    gap = float(info.mip_gap) if integral and ok else 0.0
    return Solved(x if ok else None, _STATUS.get(message, 4), message, gap if np.isfinite(gap) else 0.0)
