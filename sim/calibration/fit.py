"""Fitting performance models to measurements, per (model, GPU type), by nonlinear least squares.

The step-time models (Pollux/Sia and Hops) are defined in :mod:`sim.calibration.models`; this
module fits their parameters to measurements, in log space, with bounds and regularizers as
described there.

Identifiability: a parameter that no measurement can determine is pinned before the fit and the
fit warns (:class:`~sim.calibration.schema.CalibrationWarning`), naming the model, the GPU type, the
parameters and the reason.  After the fit, the Jacobian of the residuals in log-parameter space is
checked: free parameters in a near-null direction (singular value below ``1e-6`` of the largest)
are reported as not separately identifiable.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
from scipy.optimize import least_squares

from ..blas import one_blas_thread
from ..errors import ConfigError
from .models import (KINDS, LOWER_BOUND, HopsParams, PolluxParams, hops_components, hops_iter_time,
                     params_from_dict, pollux_iter_time)
from .observations import Observations, ape, even_max_per_node, group_observations
from .schema import CalibrationWarning

__all__ = [
    "Observations", "group_observations", "PolluxParams", "HopsParams", "FitResult",
    "fit_pollux", "fit_hops", "fit", "fit_all", "KINDS", "ape",
    # re-exported from .models and .observations, where they live
    "params_from_dict", "pollux_iter_time", "hops_iter_time", "hops_components", "even_max_per_node",
]

_HI = 1e4                  # upper bound of times in seconds (keeps the search finite)
_SVD_TOL = 1e-6            # relative singular value below which a direction is unidentified


# ----------------------------------------------------------------------------- results
@dataclass
class FitResult:
    """One fitted model of one (model, GPU type)."""

    kind: str
    model: str
    gpu_type: str
    params: PolluxParams | HopsParams
    n_points: int
    pinned: dict[str, str] = field(default_factory=dict)     # parameter -> why it was pinned
    warnings: list[str] = field(default_factory=list)
    cost: float = float("nan")
    median_ape: float = float("nan")                         # in-sample, step time, percent
    p90_ape: float = float("nan")
    local_bsz_range: tuple[int, int] = (1, 1)
    local_bsz_median: int = 1
    gpu_counts: tuple[int, ...] = (1,)
    max_nodes: int = 1

    def predict(self, local_bsz, n_nodes, n_gpus, accum_steps=0, max_per_node=None) -> np.ndarray:
        return self.params.step_time(local_bsz, n_nodes, n_gpus, accum_steps, max_per_node)

    @property
    def label(self) -> str:
        return f"{self.model} on {self.gpu_type}"


def _coverage(obs: Observations) -> dict:
    k, nn, b = obs.n_gpus, obs.n_nodes, obs.local_bsz
    return dict(
        batches=np.unique(b),
        multi_node=bool(np.any(nn > 1)),
        single_multi=bool(np.any((nn == 1) & (k > 1))),
        multi_node_gt2=bool(np.any((nn > 1) & (k > 2))),
        single_gt2=bool(np.any((nn == 1) & (k > 2))),
        any_multi=bool(np.any(k > 1)),
        has_sync=bool(np.any(np.isfinite(obs.sync))),
        shape_varies=_shape_varies(obs),
    )


def _shape_varies(obs: Observations) -> bool:
    """Do some placements share GPU and server counts but differ in the most GPUs on one server?"""
    seen: dict[tuple[float, float], float] = {}
    for k, nn, km in zip(obs.n_gpus, obs.n_nodes, obs.max_per_node):
        if seen.setdefault((k, nn), km) != km:
            return True
    return False


def _pin_fixed_compute(obs: Observations, cov: dict, acc: np.ndarray, acc_ok: np.ndarray,
                       x0: np.ndarray, free: list, pinned: dict, name: str, why: str = "") -> None:
    """One batch size: split the compute time (x0[0] fixed, x0[1] per sample) half and half
    and pin the fixed part, saying so under ``name``."""
    one = obs.n_gpus == 1
    y = acc[acc_ok] if acc_ok.any() else obs.step[one] if one.any() else obs.step
    x0[0] = float(np.mean(y)) / 2
    x0[1] = float(np.mean(y)) / 2 / float(cov["batches"][0])
    free[0] = False
    pinned[name] = (f"only one batch size (b={int(cov['batches'][0])}) measured: the fixed and "
                    f"per-sample compute times cannot be separated; {name} pinned to half the "
                    f"compute time{why}")


def _accum_target(obs: Observations) -> tuple[np.ndarray, np.ndarray]:
    """Rows and values of the measured accumulation-step (compute-only) time ``step - sync``."""
    acc = obs.step - obs.sync
    ok = np.isfinite(acc) & (acc > 0)
    return ok, acc


def _compute_guess(obs: Observations) -> tuple[float, float]:
    """Least-squares line through the compute-only times (or the 1-GPU step times) against b."""
    ok, acc = _accum_target(obs)
    if not ok.any():
        ok = obs.n_gpus == 1
        acc = obs.step
        if not ok.any():
            ok = np.ones(obs.n, bool)
    b, y = obs.local_bsz[ok], acc[ok]
    if np.unique(b).size >= 2:
        slope, icpt = np.polyfit(b, y, 1)
    else:
        slope, icpt = float(np.mean(y)) / 2 / max(float(b[0]), 1.0), float(np.mean(y)) / 2
    slope = max(float(slope), 1e-6 * float(np.mean(y)) / max(float(np.mean(b)), 1.0))
    icpt = max(float(icpt), 0.05 * float(np.min(y)))
    return icpt, slope


class _Problem:
    """A bounded least-squares problem over a subset of free parameters."""

    def __init__(self, names: Sequence[str], x_full: np.ndarray, free: Sequence[bool],
                 log: Sequence[bool], lo: Sequence[float], hi: Sequence[float]):
        self.names = tuple(names)
        self.x_full = np.array(x_full, float)
        self.free = np.array(free, bool)
        self.log = np.array(log, bool)
        self.lo, self.hi = np.array(lo, float), np.array(hi, float)

    def to_z(self, x: np.ndarray) -> np.ndarray:
        x = np.clip(x, self.lo, self.hi)
        z = np.where(self.log, np.log(np.maximum(x, LOWER_BOUND)), x)
        return z[self.free]

    def to_x(self, z: np.ndarray) -> np.ndarray:
        x = self.x_full.copy()
        zz = np.where(self.log[self.free], np.exp(z), z)
        x[self.free] = zz
        return x

    def bounds(self):
        lo = np.where(self.log, np.log(np.maximum(self.lo, LOWER_BOUND)), self.lo)[self.free]
        hi = np.where(self.log, np.log(np.clip(self.hi, LOWER_BOUND, _HI)), self.hi)[self.free]
        return lo, hi


def _solve(problem: _Problem, residuals, starts: Iterable[np.ndarray]):
    """Multi-start TRF; returns (x_full, result) of the lowest cost."""
    with one_blas_thread():
        return _solve_inner(problem, residuals, starts)


def _solve_inner(problem: _Problem, residuals, starts: Iterable[np.ndarray]):
    best = None
    lo, hi = problem.bounds()
    if not problem.free.any():
        x = problem.x_full.copy()
        return x, None
    inner_lo = lo + 1e-9 * (np.abs(lo) + 1)
    inner_hi = hi - 1e-9 * (np.abs(hi) + 1)
    for x0 in starts:
        z0 = np.clip(problem.to_z(x0), inner_lo, inner_hi)

        def fun(z):
            return residuals(problem.to_x(z))
        try:
            res = least_squares(fun, z0, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=2000)
        except ValueError:
            continue
        if best is None or res.cost < best.cost:
            best = res
    if best is None:
        raise ConfigError("least-squares fit failed from every starting point")
    return problem.to_x(best.x), best


def _identifiability(problem: _Problem, result, n_data: int, x: np.ndarray, label: str) -> list[str]:
    """Names of free parameters in near-null directions of the data Jacobian (log-parameter space)."""
    if result is None or result.jac is None:
        return []
    J = np.asarray(result.jac)[:n_data]
    free_names = [n for n, f in zip(problem.names, problem.free) if f]
    xf = x[problem.free]
    active = np.array([not (lg and v <= 10 * LOWER_BOUND) for lg, v in zip(problem.log[problem.free], xf)])
    if active.sum() == 0:
        return []
    J = J[:, active]
    names = [n for n, a in zip(free_names, active) if a]
    if J.shape[0] < J.shape[1]:
        return [f"{label}: {len(names)} free parameters ({', '.join(names)}) but only {J.shape[0]} "
                f"data residuals: the fit is underdetermined"]
    s, vt = np.linalg.svd(J, full_matrices=False)[1:]
    if s.size == 0 or s[0] <= 0:
        return [f"{label}: the data do not depend on {', '.join(names)}"]
    out = []
    for i in np.flatnonzero(s < _SVD_TOL * s[0]):
        v = np.abs(vt[i])
        involved = [names[j] for j in np.flatnonzero(v > 0.3)] or [names[int(np.argmax(v))]]
        if len(involved) == 1:
            out.append(f"{label}: {involved[0]} is not determined by these measurements (the fit does not "
                       f"depend on it near the optimum); its value is arbitrary")
        else:
            out.append(f"{label}: {' and '.join(involved)} cannot be separated by these measurements "
                       f"(near-null direction of the fit's Jacobian); their individual values are arbitrary")
    return out


def _finish(result: FitResult, obs: Observations, emit: bool) -> FitResult:
    pred = result.params.step_time(obs.local_bsz, obs.n_nodes, obs.n_gpus, 0, obs.max_per_node)
    e = ape(pred, obs.step)
    result.median_ape = float(np.median(e))
    result.p90_ape = float(np.percentile(e, 90))
    b = obs.local_bsz.astype(int)
    result.local_bsz_range = (int(b.min()), int(b.max()))
    result.local_bsz_median = int(np.median(b))
    result.gpu_counts = tuple(int(k) for k in np.unique(obs.n_gpus))
    result.max_nodes = int(obs.n_nodes.max())
    if emit:
        for w in result.warnings:
            warnings.warn(CalibrationWarning(w), stacklevel=3)
    return result


def _check_obs(obs: Observations, kind: str) -> None:
    if obs.n == 0:
        raise ConfigError(f"{obs.model} on {obs.gpu_type}: no measurements to fit the {kind} model to")
    bad = ~(obs.step > 0) | ~np.isfinite(obs.step)
    if bad.any():
        raise ConfigError(f"{obs.model} on {obs.gpu_type}: step time {obs.step[bad][0]!r} is not > 0")


# ----------------------------------------------------------------------------- Pollux fit
def fit_pollux(obs: Observations, *, emit_warnings: bool = True) -> FitResult:
    """Fit :class:`PolluxParams` to one (model, GPU type)."""
    _check_obs(obs, "pollux")
    label = f"{obs.model} on {obs.gpu_type} (pollux)"
    cov = _coverage(obs)
    names = PolluxParams.names
    pinned: dict[str, str] = {}
    acc_ok, acc = _accum_target(obs)
    ac0, bc0 = _compute_guess(obs)
    x0 = np.array([ac0, bc0, 0.0, 0.0, 0.0, 0.0, 1.5, LOWER_BOUND])
    # network guesses: what the step time adds over compute, by link kind
    tc_guess = ac0 + bc0 * obs.local_bsz
    extra = np.maximum(obs.step - tc_guess, 0.05 * obs.step)
    mn, sm = (obs.n_nodes > 1), (obs.n_nodes == 1) & (obs.n_gpus > 1)
    x0[2] = float(np.median(extra[mn])) if mn.any() else LOWER_BOUND
    x0[4] = float(np.median(extra[sm])) if sm.any() else LOWER_BOUND
    x0[3] = 0.05 * x0[2] if cov["multi_node_gt2"] else LOWER_BOUND
    x0[5] = 0.05 * x0[4] if cov["single_gt2"] else LOWER_BOUND
    free = [True] * 8
    if cov["batches"].size == 1:
        _pin_fixed_compute(obs, cov, acc, acc_ok, x0, free, pinned, "alpha_c", " (Pollux's rule)")
    if not cov["shape_varies"]:
        free[7] = False
        pinned["beta_l"] = ("no placements with the same GPU and server counts but a different spread: "
                            "per-server contention beta_l pinned to 0 (Pollux's model)")
    if not cov["any_multi"]:
        free[2:7] = [False] * 5
        x0[2:6] = LOWER_BOUND
        x0[6] = 1.0
        for p in names[2:7]:
            pinned[p] = ("no multi-GPU measurement: no network time can be fitted; alpha_r = beta_r = 0, "
                         "alpha_n, beta_n = 1.1 x those (prior), gamma = 1, so multi-GPU predictions assume "
                         "perfect scaling (optimistic)")
    elif not cov["multi_node"]:
        free[2] = free[3] = False
        x0[2] = x0[3] = LOWER_BOUND
        pinned["alpha_n"] = pinned["beta_n"] = ("no multi-node measurement: set after the fit by the prior "
                                                "alpha_n = 1.1 alpha_r, beta_n = 1.1 beta_r")
    elif not cov["multi_node_gt2"]:
        free[3] = False
        x0[3] = LOWER_BOUND
        pinned["beta_n"] = "no multi-node measurement with more than 2 GPUs: retrogression beta_n pinned to 0"
    if cov["any_multi"] and not cov["single_multi"]:
        free[4] = free[5] = False
        x0[4] = x0[5] = LOWER_BOUND
        pinned["alpha_r"] = pinned["beta_r"] = ("no single-node multi-GPU measurement: intra-node network "
                                                "time pinned to 0 (optimistic)")
    elif cov["any_multi"] and not cov["single_gt2"]:
        free[5] = False
        x0[5] = LOWER_BOUND
        pinned["beta_r"] = "no single-node measurement with more than 2 GPUs: retrogression beta_r pinned to 0"
    problem = _Problem(names, x0, free, log=[True] * 6 + [False, True], lo=[LOWER_BOUND] * 6 + [1.0, LOWER_BOUND],
                       hi=[_HI] * 6 + [10.0, _HI])
    n_acc, n_step = int(acc_ok.sum()), obs.n
    w_acc = 1.0 / math.sqrt(max(n_acc, 1))
    w_step = 1.0 / math.sqrt(n_step)
    b, nn, k, kmax = obs.local_bsz, obs.n_nodes, obs.n_gpus, obs.max_per_node
    log_acc, log_step = np.log(acc[acc_ok]), np.log(obs.step)

    def residuals(x):
        tc = x[0] + x[1] * b
        r = [w_step * (np.log(pollux_iter_time(x, b, nn, k, 0, kmax)) - log_step)]
        if n_acc:
            r.append(w_acc * (np.log(tc[acc_ok]) - log_acc))
        reg = [math.sqrt(1e-3) * (x[6] - 1.0) if free[6] else 0.0,
               0.1 * x[3] / x[2] if free[3] else 0.0,
               0.1 * x[5] / x[4] if free[5] else 0.0]
        r.append(np.array(reg))
        return np.concatenate(r)

    starts = []
    # beta_l starts near 0 and at a twentieth of the multi-GPU step time (a log-parameter
    # started at its bound moves slowly)
    bl_starts = (LOWER_BOUND, 0.05 * float(np.median(obs.step[k > 1]))) if free[7] else (x0[7],)
    for g in (1.0 + 1e-3, 2.0, 5.0) if free[6] else (x0[6],):
        for bl in bl_starts:
            s = x0.copy()
            s[6] = g
            s[7] = bl
            starts.append(s)
    x, res = _solve(problem, residuals, starts)
    if not cov["multi_node"]:
        x[2] = max(x[2], 1.1 * x[4])
        x[3] = max(x[3], 1.1 * x[5])
    warn = [f"{label}: {', '.join(sorted(p for p, r in pinned.items() if r == reason))} not identifiable: {reason}"
            for reason in dict.fromkeys(pinned.values())]
    warn += _identifiability(problem, res, n_step + n_acc, x, label)
    out = FitResult("pollux", obs.model, obs.gpu_type, PolluxParams(*map(float, x)), obs.n,
                    pinned=pinned, warnings=warn, cost=float(res.cost) if res is not None else 0.0)
    return _finish(out, obs, emit_warnings)


# ----------------------------------------------------------------------------- Hops fit
def fit_hops(obs: Observations, *, nonoverlap: float = 0.2, pattern: int | None = None,
             emit_warnings: bool = True) -> FitResult:
    """Fit :class:`HopsParams` to one (model, GPU type); ``pattern=None`` picks 1 or 2."""
    _check_obs(obs, "hops")
    label = f"{obs.model} on {obs.gpu_type} (hops)"
    cov = _coverage(obs)
    names = HopsParams.names
    pinned: dict[str, str] = {}
    has = {c: bool(np.any(np.isfinite(getattr(obs, c)))) for c in ("forward", "backward", "update", "data")}
    acc_ok, acc = _accum_target(obs)
    ac0, bc0 = _compute_guess(obs)
    tc_guess = ac0 + bc0 * obs.local_bsz
    extra = np.maximum(obs.step - tc_guess, 0.05 * obs.step)
    mn, sm = (obs.n_nodes > 1), (obs.n_nodes == 1) & (obs.n_gpus > 1)
    x0 = np.array([ac0, bc0, 2.0 / 3.0, LOWER_BOUND, LOWER_BOUND, LOWER_BOUND, LOWER_BOUND,
                   float(np.median(extra[sm])) * 1.5 if sm.any() else LOWER_BOUND,
                   float(np.median(extra[mn])) if mn.any() else LOWER_BOUND])
    free = [True] * 9
    one_sync = (obs.n_gpus == 1) & np.isfinite(obs.sync)
    if has["update"]:
        x0[3] = max(float(np.nanmedian(obs.update)), 1e-6)
    elif one_sync.any():
        x0[3] = max(float(np.median(obs.sync[one_sync])), 1e-6)     # on one GPU, sync = update
    elif not cov["has_sync"]:
        free[3] = False
        pinned["u"] = ("no update_s or sync_time_s measured: the update time T_u is folded into the "
                       "compute terms")
    if has["data"]:
        d_ok = np.isfinite(obs.data)
        x0[4] = max(float(np.median(obs.data[d_ok])), 1e-6)
        x0[5] = 1e-3 * x0[4]
    else:
        free[4] = free[5] = False
        pinned["a_d"] = pinned["b_d"] = ("no data_time_s measured: data loading T_d is folded into the "
                                         "compute terms and pattern 2 is used")
    if cov["batches"].size == 1:
        _pin_fixed_compute(obs, cov, acc, acc_ok, x0, free, pinned, "a_c")
        if has["data"]:
            free[4] = False
            x0[4] = float(np.nanmean(obs.data)) / 2
            x0[5] = x0[4] / float(cov["batches"][0])
            pinned["a_d"] = "only one batch size measured: a_d pinned to half the data time"
    fb = has["forward"] or has["backward"]
    if not cov["any_multi"]:
        free[6] = free[7] = free[8] = False
        x0[6] = x0[7] = x0[8] = LOWER_BOUND
        pinned["w"] = pinned["c_link"] = pinned["c_net"] = ("no multi-GPU measurement: communication and "
                                                            "synchronisation wait pinned to 0")
        if not fb:
            free[2] = False
            pinned["r_b"] = ("no multi-GPU and no forward_s/backward_s measurement: the forward/backward "
                             "split r_b is pinned to 2/3")
    else:
        if not cov["single_multi"]:
            free[7] = False
            x0[7] = LOWER_BOUND
            pinned["c_link"] = ("no single-node multi-GPU measurement: intra-node communication pinned "
                                "to 0 (optimistic)")
        if not cov["multi_node"]:
            free[8] = False
            x0[8] = LOWER_BOUND
            pinned["c_net"] = "no multi-node measurement: set after the fit by the prior c_net = 1.1 c_link"
    x0[6] = 1e-6 if free[6] else x0[6]
    problem = _Problem(names, x0, free, log=[True, True, False] + [True] * 6,
                       lo=[LOWER_BOUND, LOWER_BOUND, 0.0] + [LOWER_BOUND] * 6, hi=[_HI, _HI, 1.0] + [_HI] * 6)
    b, nn, k = obs.local_bsz, obs.n_nodes, obs.n_gpus
    comp_obs = {c: (np.isfinite(getattr(obs, c)), getattr(obs, c)) for c in ("forward", "backward", "update", "data")
                if has[c]}
    eps = 0.01 * obs.step
    n_acc = int(acc_ok.sum())
    w_step, w_acc = 1.0 / math.sqrt(obs.n), 1.0 / math.sqrt(max(n_acc, 1))
    log_step, log_acc = np.log(obs.step), np.log(acc[acc_ok])
    n_data = obs.n + n_acc + sum(int(m.sum()) for m, _ in comp_obs.values())

    def make_residuals(pat):
        def residuals(x):
            r = [w_step * (np.log(hops_iter_time(x, b, nn, k, pattern=pat, nonoverlap=nonoverlap)) - log_step)]
            if n_acc:
                nos = hops_iter_time(x, b, nn, k, pattern=pat, nonoverlap=nonoverlap, sync=False)
                r.append(w_acc * (np.log(nos[acc_ok]) - log_acc))
            if comp_obs:
                c = hops_components(x, b, nn, k, nonoverlap)
                for name, (m, v) in comp_obs.items():
                    r.append((np.log(c[name][m] + eps[m]) - np.log(v[m] + eps[m])) / math.sqrt(m.sum()))
            prior = 0.03 * (x[2] - 2.0 / 3.0) if (free[2] and not fb) else 0.0
            r.append(np.array([prior]))
            return np.concatenate(r)
        return residuals

    patterns = [pattern] if pattern is not None else ([1, 2] if has["data"] else [2])
    best = None
    for pat in patterns:
        starts = []
        for rb in ((0.5, 2.0 / 3.0, 0.9) if free[2] else (x0[2],)):
            s = x0.copy()
            s[2] = rb
            starts.append(s)
        x, res = _solve(problem, make_residuals(pat), starts)
        cost = float(res.cost) if res is not None else 0.0
        if best is None or cost < best[2]:
            best = (x, res, cost, pat)
    x, res, cost, pat = best
    if not cov["multi_node"] and cov["any_multi"]:
        x[8] = max(x[8], 1.1 * x[7])
    warn = [f"{label}: {', '.join(sorted(p for p, r in pinned.items() if r == reason))} not identifiable: {reason}"
            for reason in dict.fromkeys(pinned.values())]
    if free[2] and not fb:
        warn.append(f"{label}: r_b (backward share of compute) is inferred only from how communication "
                    f"overlaps the backward pass (no forward_s/backward_s measured), with a weak prior at 2/3")
    warn += _identifiability(problem, res, n_data, x, label)
    params = HopsParams(*map(float, x), pattern=int(pat), nonoverlap=float(nonoverlap))
    out = FitResult("hops", obs.model, obs.gpu_type, params, obs.n, pinned=pinned, warnings=warn, cost=cost)
    return _finish(out, obs, emit_warnings)


_FITTERS = {"pollux": fit_pollux, "hops": fit_hops}


def fit(obs: Observations, kind: str = "pollux", **kwargs) -> FitResult:
    """Fit one model ``kind`` (``"pollux"`` or ``"hops"``) to one (model, GPU type)."""
    try:
        f = _FITTERS[kind]
    except KeyError:
        raise ConfigError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})") from None
    return f(obs, **kwargs)


def fit_all(table: pa.Table, kinds: Sequence[str] = KINDS, *, source: str = "<memory>",
            emit_warnings: bool = True) -> dict[tuple[str, str, str], FitResult]:
    """Every kind for every (model, GPU type) of a measurement table: ``{(model, gpu, kind): fit}``."""
    for k in kinds:
        if k not in _FITTERS:
            raise ConfigError(f"unknown model kind {k!r} (known: {', '.join(KINDS)})")
    out = {}
    for (m, g), obs in group_observations(table, source).items():
        for k in kinds:
            out[(m, g, k)] = fit(obs, k, emit_warnings=emit_warnings)
    return out
