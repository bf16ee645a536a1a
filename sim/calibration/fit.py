"""Fitting performance models to measurements, per (model, GPU type), by nonlinear least squares.

Two models (algorithms.md §5.5 and §4.3); ``b`` is the per-GPU (atomic) batch, ``K`` the GPUs,
``N`` the servers:

**Pollux/Sia step time** (:class:`PolluxParams`, 7 parameters, plus ``beta_l``)::

    T_compute(b)  = alpha_c + beta_c * b
    T_network     = alpha_n + beta_n * max(K - 2, 0)      if N > 1
                  = alpha_r + beta_r * max(K - 2, 0)      if N = 1 and K > 1
                  = 0                                     if K = 1
                  + beta_l * (K_max - 1)                  (K_max = most GPUs on one server)
    T_step        = (T_compute^gamma + T_network^gamma)^(1 / gamma),   1 <= gamma <= 10
    T_iter(s)     = s * T_compute + T_step                (s gradient-accumulation steps)

fitted, as in Pollux, to the step time and to the accumulation-step time ``step - sync`` (when
``sync_time_s`` is measured; the update is part of the synchronising step, as in Pollux's
profiles) in log space, with Pollux's regularizers ``1e-3 (gamma - 1)^2`` and
``1e-2 ((beta_n / alpha_n)^2 + (beta_r / alpha_r)^2)`` and bounds ``[1e-8, inf)``, ``[1, 10]``.

``beta_l`` (our extension, not in Pollux or Sia) is the synchronisation time each further GPU on
the busiest server adds: GPUs that share a server's PCIe bus or NIC contend for it, so the same
GPU count spread as 3+3 synchronises faster than 2+4 or 6 on one server (Sia's V100 profiles show
it).  It is fitted only when the measurements hold placements with the same GPU and server counts
but a different ``K_max``; otherwise it is pinned to 0 (Pollux's model).  Without a placement list
``K_max`` is taken as ``ceil(K / N)`` (an even spread).

**Hops iteration time** (:class:`HopsParams`; Hops eq. 1-4, expectation form)::

    T_f + T_b     = a_c + b_c * b,   T_b = r_b * (a_c + b_c * b),   T_f = (1 - r_b) * (a_c + b_c * b)
    T_u           = u                 T_d = a_d + b_d * b            T_w = w if K > 1 else 0
    T_c           = c_link * (K - 1) / K   if N = 1   (c_link = params / B_link)
                  = c_net                  if N > 1   (c_net  = params / B_net)
    Tc_no         = nonoverlap * T_c      (Hops: 0.2)
    pattern 1:  T_iter = max(T_d, max(T_b + Tc_no, T_c) + T_u) + T_f + T_w
    pattern 2:  T_iter = T_d + max(T_b + Tc_no, T_c) + T_u + T_f + T_w

fitted to the step time, the accumulation-step time ``step - sync`` (no communication, wait or
update: ``T_c = T_w = T_u = 0``) and, where
measured, the forward, backward, update and data times.  The pattern is chosen by the lower cost
when data times are measured (Hops' profiler picks it); without them ``T_d`` is folded into the
compute terms and pattern 2 is used.  Hops' mixture of cache hits and misses (eq. 3-4) is not
identifiable from per-configuration means; the fitted ``T_d`` and ``T_w`` are its expectation.

Identifiability: a parameter that no measurement can determine is pinned before the fit and the
fit warns (:class:`~sim.calibration.schema.CalibrationWarning`), naming the model, the GPU type, the
parameters and the reason.  After the fit, the Jacobian of the residuals in log-parameter space is
checked: free parameters in a near-null direction (singular value below ``1e-6`` of the largest)
are reported as not separately identifiable.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field, fields, replace
from typing import ClassVar, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.optimize import least_squares

from ..errors import ConfigError
from .schema import CalibrationWarning, validate_measurements

__all__ = [
    "Observations", "group_observations", "PolluxParams", "HopsParams", "FitResult",
    "fit_pollux", "fit_hops", "fit", "fit_all", "KINDS", "ape",
]

KINDS = ("pollux", "hops")
_LO = 1e-8                 # lower bound of positive parameters (Pollux)
_HI = 1e4                  # upper bound of times in seconds (keeps the search finite)
_SVD_TOL = 1e-6            # relative singular value below which a direction is unidentified


# ----------------------------------------------------------------------------- observations
@dataclass(frozen=True)
class Observations:
    """The measurements of one (model, GPU type) as float64 arrays (NaN = not measured)."""

    model: str
    gpu_type: str
    n_gpus: np.ndarray
    n_nodes: np.ndarray
    local_bsz: np.ndarray
    step: np.ndarray
    sync: np.ndarray
    data: np.ndarray
    forward: np.ndarray
    backward: np.ndarray
    update: np.ndarray
    max_per_node: np.ndarray
    placement_key: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return int(self.step.shape[0])

    def subset(self, mask: np.ndarray) -> "Observations":
        mask = np.asarray(mask, bool)
        arrays = {f.name: getattr(self, f.name)[mask] for f in fields(self)
                  if isinstance(getattr(self, f.name), np.ndarray)}
        keys = tuple(k for k, m in zip(self.placement_key, mask) if m) if self.placement_key else ()
        return replace(self, **arrays, placement_key=keys)

    @classmethod
    def from_arrays(cls, model: str, gpu_type: str, *, n_gpus, n_nodes, local_bsz, step, sync=None,
                    data=None, forward=None, backward=None, update=None,
                    max_per_node=None) -> "Observations":
        n = len(step)

        def arr(v):
            return np.full(n, np.nan) if v is None else np.asarray(v, dtype=np.float64)
        k, nn = arr(n_gpus), arr(n_nodes)
        kmax = even_max_per_node(k, nn) if max_per_node is None else arr(max_per_node)
        return cls(model, gpu_type, k, nn, arr(local_bsz), arr(step), arr(sync),
                   arr(data), arr(forward), arr(backward), arr(update), kmax)


def even_max_per_node(n_gpus, n_nodes) -> np.ndarray:
    """Most GPUs on one server when ``n_gpus`` are spread evenly over ``n_nodes``."""
    k = np.asarray(n_gpus, dtype=np.float64)
    return np.ceil(k / np.maximum(np.asarray(n_nodes, dtype=np.float64), 1.0))


def _col(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(pc.cast(t.column(name), pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))


def _placement_keys(t: pa.Table) -> tuple[tuple[str, ...], np.ndarray]:
    """Per row: a placement key (``"3|3"``, or ``"2n6g"`` without a list) and the most GPUs on
    one server (the list's max, else an even spread)."""
    pl = t.column("placement").to_pylist()
    nn, kk = t.column("n_nodes").to_pylist(), t.column("n_gpus").to_pylist()
    keys = tuple("|".join(map(str, p)) if p else f"{n}n{k}g" for p, n, k in zip(pl, nn, kk))
    even = even_max_per_node(kk, nn)
    kmax = np.array([max(p) if p else e for p, e in zip(pl, even)], dtype=np.float64)
    return keys, kmax


def group_observations(table: pa.Table, source: str = "<memory>") -> dict[tuple[str, str], Observations]:
    """Split a measurement table by (model, GPU type), sorted by key."""
    t = validate_measurements(table, source)
    models = np.array(t.column("model").to_pylist(), dtype=object)
    types = np.array(t.column("gpu_type").to_pylist(), dtype=object)
    cols = {c: _col(t, c) for c in ("n_gpus", "n_nodes", "local_bsz", "step_time_s", "sync_time_s",
                                    "data_time_s", "forward_s", "backward_s", "update_s")}
    keys, kmax = _placement_keys(t)
    out = {}
    for m, g in sorted(set(zip(models.tolist(), types.tolist()))):
        sel = (models == m) & (types == g)
        out[(m, g)] = Observations(
            m, g, cols["n_gpus"][sel], cols["n_nodes"][sel], cols["local_bsz"][sel],
            cols["step_time_s"][sel], cols["sync_time_s"][sel], cols["data_time_s"][sel],
            cols["forward_s"][sel], cols["backward_s"][sel], cols["update_s"][sel], kmax[sel],
            tuple(k for k, s in zip(keys, sel) if s))
    return out


def ape(predicted, measured) -> np.ndarray:
    """Absolute percentage error, in percent."""
    return np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0) * 100.0


# ----------------------------------------------------------------------------- parameter sets
@dataclass(frozen=True)
class PolluxParams:
    """Pollux/Sia throughput-model parameters (seconds; gamma dimensionless)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float
    beta_l: float = 0.0

    kind: ClassVar[str] = "pollux"
    names: ClassVar[tuple[str, ...]] = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r",
                                        "gamma", "beta_l")
    optional: ClassVar[dict[str, float]] = {"beta_l": 0.0}   # absent from older calib.toml files

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in self.names])

    def as_dict(self) -> dict[str, float]:
        return {n: float(getattr(self, n)) for n in self.names}

    def compute_time(self, local_bsz) -> np.ndarray:
        return self.alpha_c + self.beta_c * np.asarray(local_bsz, dtype=np.float64)

    def network_time(self, n_nodes, n_gpus, max_per_node=None) -> np.ndarray:
        return _pollux_network(self.as_array(), np.asarray(n_nodes, float), np.asarray(n_gpus, float),
                               max_per_node)

    def step_time(self, local_bsz, n_nodes, n_gpus, accum_steps=0, max_per_node=None) -> np.ndarray:
        """Time of one optimizer step (with ``accum_steps`` accumulation steps before it);
        ``max_per_node``: most GPUs on one server (default: an even spread)."""
        return pollux_iter_time(self.as_array(), local_bsz, n_nodes, n_gpus, accum_steps, max_per_node)

    def accum_time(self, local_bsz, n_nodes=1, n_gpus=1) -> np.ndarray:
        """A step without synchronisation (gradient accumulation): the compute time."""
        return self.compute_time(local_bsz) + 0.0 * np.asarray(n_gpus, float)


def _pollux_network(th: np.ndarray, nn: np.ndarray, k: np.ndarray, kmax=None) -> np.ndarray:
    th = np.asarray(th, float)
    an, bn, ar, br = th[..., 2], th[..., 3], th[..., 4], th[..., 5]
    retro = np.maximum(k - 2.0, 0.0)
    net = np.where(nn > 1, an + bn * retro, np.where(k > 1, ar + br * retro, _LO))
    if th.shape[-1] > 7:
        kmax = even_max_per_node(k, nn) if kmax is None else np.asarray(kmax, float)
        net = net + th[..., 7] * np.maximum(kmax - 1.0, 0.0)
    return net


def pollux_iter_time(th, local_bsz, n_nodes, n_gpus, accum_steps=0, max_per_node=None) -> np.ndarray:
    """Vectorized Pollux iteration time; ``th`` is ``[..., 7]`` or ``[..., 8]`` (with ``beta_l``) in
    :attr:`PolluxParams.names` order; ``max_per_node`` defaults to an even spread."""
    th = np.asarray(th, float)
    b = np.asarray(local_bsz, float)
    tc = th[..., 0] + th[..., 1] * b
    tn = _pollux_network(th, np.asarray(n_nodes, float), np.asarray(n_gpus, float), max_per_node)
    g = th[..., 6]
    # (tc^g + tn^g)^(1/g), computed stably as m * (1 + (x/m)^g)^(1/g)
    m = np.maximum(tc, tn)
    lo = np.minimum(tc, tn)
    step = m * np.power(1.0 + np.power(lo / m, g), 1.0 / g)
    return np.asarray(accum_steps, float) * tc + step


@dataclass(frozen=True)
class HopsParams:
    """Hops iteration-time parameters (seconds except ``r_b``; see the module docstring)."""

    a_c: float
    b_c: float
    r_b: float
    u: float
    a_d: float
    b_d: float
    w: float
    c_link: float
    c_net: float
    pattern: int = 2
    nonoverlap: float = 0.2

    kind: ClassVar[str] = "hops"
    names: ClassVar[tuple[str, ...]] = ("a_c", "b_c", "r_b", "u", "a_d", "b_d", "w", "c_link", "c_net")

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in self.names])

    def as_dict(self) -> dict[str, float]:
        d = {n: float(getattr(self, n)) for n in self.names}
        d.update(pattern=int(self.pattern), nonoverlap=float(self.nonoverlap))
        return d

    def components(self, local_bsz, n_nodes, n_gpus) -> dict[str, np.ndarray]:
        return hops_components(self.as_array(), local_bsz, n_nodes, n_gpus, self.nonoverlap)

    def step_time(self, local_bsz, n_nodes, n_gpus, accum_steps=0, max_per_node=None) -> np.ndarray:
        """Hops' model has no placement-shape term: ``max_per_node`` is accepted and ignored."""
        return hops_iter_time(self.as_array(), local_bsz, n_nodes, n_gpus, accum_steps,
                              pattern=self.pattern, nonoverlap=self.nonoverlap)

    def accum_time(self, local_bsz, n_nodes=1, n_gpus=1) -> np.ndarray:
        return hops_iter_time(self.as_array(), local_bsz, n_nodes, n_gpus, 0, pattern=self.pattern,
                              nonoverlap=self.nonoverlap, sync=False)


def hops_components(th, local_bsz, n_nodes, n_gpus, nonoverlap=0.2) -> dict[str, np.ndarray]:
    th = np.asarray(th, float)
    b = np.asarray(local_bsz, float)
    nn, k = np.asarray(n_nodes, float), np.asarray(n_gpus, float)
    comp = th[..., 0] + th[..., 1] * b
    tb = th[..., 2] * comp
    tf = comp - tb
    tu = th[..., 3] + 0.0 * b
    td = th[..., 4] + th[..., 5] * b
    tw = np.where(k > 1, th[..., 6], 0.0)
    tc = np.where(nn > 1, th[..., 8], th[..., 7] * (k - 1.0) / np.maximum(k, 1.0))
    return {"forward": tf, "backward": tb, "update": tu, "data": td, "wait": tw, "comm": tc,
            "comm_exposed": nonoverlap * tc}


def hops_iter_time(th, local_bsz, n_nodes, n_gpus, accum_steps=0, *, pattern=2, nonoverlap=0.2,
                   sync=True) -> np.ndarray:
    """Vectorized Hops iteration time (``th`` in :attr:`HopsParams.names` order).

    ``sync=False`` gives a gradient-accumulation step (no communication, wait or update).  With
    ``accum_steps = s`` the job runs ``s`` accumulation steps before each full one (as Pollux).
    ``pattern`` may be an array (one per row).
    """
    c = hops_components(th, local_bsz, n_nodes, n_gpus, nonoverlap)
    tf, tb, tu, td = c["forward"], c["backward"], c["update"], c["data"]
    pat1 = np.asarray(pattern) == 1
    nos = np.where(pat1, np.maximum(td, tb) + tf, td + tb + tf)        # accumulation step
    if not sync:
        return nos
    tc, tw = c["comm"], c["wait"]
    bc = np.maximum(tb + nonoverlap * tc, tc)
    out = np.where(pat1, np.maximum(td, bc + tu) + tf + tw, td + bc + tu + tf + tw)
    if np.any(np.asarray(accum_steps) != 0):
        out = out + np.asarray(accum_steps, float) * nos
    return out


_PARAM_CLASSES = {"pollux": PolluxParams, "hops": HopsParams}


def params_from_dict(kind: str, d: dict) -> PolluxParams | HopsParams:
    cls = _PARAM_CLASSES.get(kind)
    if cls is None:
        raise ConfigError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})")
    optional = getattr(cls, "optional", {})
    missing = [n for n in cls.names if n not in d and n not in optional]
    if missing:
        raise ConfigError(f"{kind} parameters lack {', '.join(missing)}")
    kw = {n: float(d.get(n, optional.get(n))) for n in cls.names}
    if cls is HopsParams:
        kw.update(pattern=int(d.get("pattern", 2)), nonoverlap=float(d.get("nonoverlap", 0.2)))
    return cls(**kw)


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
        z = np.where(self.log, np.log(np.maximum(x, _LO)), x)
        return z[self.free]

    def to_x(self, z: np.ndarray) -> np.ndarray:
        x = self.x_full.copy()
        zz = np.where(self.log[self.free], np.exp(z), z)
        x[self.free] = zz
        return x

    def bounds(self):
        lo = np.where(self.log, np.log(np.maximum(self.lo, _LO)), self.lo)[self.free]
        hi = np.where(self.log, np.log(np.clip(self.hi, _LO, _HI)), self.hi)[self.free]
        return lo, hi


def _one_blas_thread():
    """Small dense least squares run far faster on one BLAS thread (a context manager)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                      # optional: only a speed-up
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _solve(problem: _Problem, residuals, starts: Iterable[np.ndarray]):
    """Multi-start TRF; returns (x_full, result) of the lowest cost."""
    with _one_blas_thread():
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
    active = np.array([not (lg and v <= 10 * _LO) for lg, v in zip(problem.log[problem.free], xf)])
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
    x0 = np.array([ac0, bc0, 0.0, 0.0, 0.0, 0.0, 1.5, _LO])
    # network guesses: what the step time adds over compute, by link kind
    tc_guess = ac0 + bc0 * obs.local_bsz
    extra = np.maximum(obs.step - tc_guess, 0.05 * obs.step)
    mn, sm = (obs.n_nodes > 1), (obs.n_nodes == 1) & (obs.n_gpus > 1)
    x0[2] = float(np.median(extra[mn])) if mn.any() else _LO
    x0[4] = float(np.median(extra[sm])) if sm.any() else _LO
    x0[3] = 0.05 * x0[2] if cov["multi_node_gt2"] else _LO
    x0[5] = 0.05 * x0[4] if cov["single_gt2"] else _LO
    free = [True] * 8
    if cov["batches"].size == 1:
        _pin_fixed_compute(obs, cov, acc, acc_ok, x0, free, pinned, "alpha_c", " (Pollux's rule)")
    if not cov["shape_varies"]:
        free[7] = False
        pinned["beta_l"] = ("no placements with the same GPU and server counts but a different spread: "
                            "per-server contention beta_l pinned to 0 (Pollux's model)")
    if not cov["any_multi"]:
        free[2:7] = [False] * 5
        x0[2:6] = _LO
        x0[6] = 1.0
        for p in names[2:7]:
            pinned[p] = ("no multi-GPU measurement: no network time can be fitted; alpha_r = beta_r = 0, "
                         "alpha_n, beta_n = 1.1 x those (prior), gamma = 1, so multi-GPU predictions assume "
                         "perfect scaling (optimistic)")
    elif not cov["multi_node"]:
        free[2] = free[3] = False
        x0[2] = x0[3] = _LO
        pinned["alpha_n"] = pinned["beta_n"] = ("no multi-node measurement: set after the fit by the prior "
                                                "alpha_n = 1.1 alpha_r, beta_n = 1.1 beta_r")
    elif not cov["multi_node_gt2"]:
        free[3] = False
        x0[3] = _LO
        pinned["beta_n"] = "no multi-node measurement with more than 2 GPUs: retrogression beta_n pinned to 0"
    if cov["any_multi"] and not cov["single_multi"]:
        free[4] = free[5] = False
        x0[4] = x0[5] = _LO
        pinned["alpha_r"] = pinned["beta_r"] = ("no single-node multi-GPU measurement: intra-node network "
                                                "time pinned to 0 (optimistic)")
    elif cov["any_multi"] and not cov["single_gt2"]:
        free[5] = False
        x0[5] = _LO
        pinned["beta_r"] = "no single-node measurement with more than 2 GPUs: retrogression beta_r pinned to 0"
    problem = _Problem(names, x0, free, log=[True] * 6 + [False, True], lo=[_LO] * 6 + [1.0, _LO],
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
    bl_starts = (_LO, 0.05 * float(np.median(obs.step[k > 1]))) if free[7] else (x0[7],)
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
    x0 = np.array([ac0, bc0, 2.0 / 3.0, _LO, _LO, _LO, _LO,
                   float(np.median(extra[sm])) * 1.5 if sm.any() else _LO,
                   float(np.median(extra[mn])) if mn.any() else _LO])
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
        x0[6] = x0[7] = x0[8] = _LO
        pinned["w"] = pinned["c_link"] = pinned["c_net"] = ("no multi-GPU measurement: communication and "
                                                            "synchronisation wait pinned to 0")
        if not fb:
            free[2] = False
            pinned["r_b"] = ("no multi-GPU and no forward_s/backward_s measurement: the forward/backward "
                             "split r_b is pinned to 2/3")
    else:
        if not cov["single_multi"]:
            free[7] = False
            x0[7] = _LO
            pinned["c_link"] = ("no single-node multi-GPU measurement: intra-node communication pinned "
                                "to 0 (optimistic)")
        if not cov["multi_node"]:
            free[8] = False
            x0[8] = _LO
            pinned["c_net"] = "no multi-node measurement: set after the fit by the prior c_net = 1.1 c_link"
    x0[6] = 1e-6 if free[6] else x0[6]
    problem = _Problem(names, x0, free, log=[True, True, False] + [True] * 6,
                       lo=[_LO, _LO, 0.0] + [_LO] * 6, hi=[_HI, _HI, 1.0] + [_HI] * 6)
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
