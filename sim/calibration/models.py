"""The step-time models fitted by :mod:`sim.calibration.fit`, as parameter sets and vectorized functions.

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

See :mod:`sim.calibration.fit` for how they are fitted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from .observations import even_max_per_node

__all__ = ["KINDS", "LOWER_BOUND", "PolluxParams", "HopsParams", "pollux_iter_time", "hops_iter_time",
           "hops_components", "params_from_dict"]

KINDS = ("pollux", "hops")
LOWER_BOUND = 1e-8         # lower bound of positive parameters (Pollux); the network time of 1 GPU


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
    net = np.where(nn > 1, an + bn * retro, np.where(k > 1, ar + br * retro, LOWER_BOUND))
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
