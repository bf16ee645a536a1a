"""Queue priorities of Hops (algorithms.md §4.4): latency ratio, and LAS/SJF/SRTF/FTF for the
ablation.  Each maps the state to one float per active job, higher = served first."""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..state import SchedState

__all__ = ["PRIORITIES", "priority", "expected_age"]


def expected_age(state: SchedState, r_avg: np.ndarray) -> np.ndarray:
    """Hops eq.9: ``age_i = sum_j P(type j) * work_i / (thr_per_gpu_{i,j} * R_avg)`` with
    ``P(type j)`` the type's share of the cluster's GPUs."""
    c = state.cluster
    share = c.gpus_per_type() / max(c.total_gpus, 1)
    per_gpu = state.type_throughputs / np.maximum(state.demand, 1)[:, None]
    with np.errstate(divide="ignore"):
        t = state.jobs.work[state.active][:, None] / (per_gpu * r_avg[:, None])
    t = np.where(per_gpu > 0, t, 0.0)
    return np.maximum((t * share[None, :]).sum(axis=1), 1e-9)


def _waited(state: SchedState, now: float) -> np.ndarray:
    """Seconds each job has waited without GPUs up to ``now``."""
    ids = state.active
    held = state.run_s
    return np.maximum(now - state.jobs.arrival[ids] - held, 0.0)


def _lr(state, now, r_avg):
    return _waited(state, now) / expected_age(state, r_avg)


def _las(state, now, r_avg):
    return -state.attained_gpu_s


def _sjf(state, now, r_avg):
    return -expected_age(state, r_avg)


def _srtf(state, now, r_avg):
    ids = state.active
    return -expected_age(state, r_avg) * state.remaining / state.jobs.work[ids]


def _ftf(state, now, r_avg):
    """Estimated finish-time fairness rho (Themis): (elapsed + remaining time) / isolated time,
    with the isolated time ``age * max(1, N * R_avg / total GPUs)``."""
    ids = state.active
    age = expected_age(state, r_avg)
    n = ids.shape[0]
    iso = age * np.maximum(1.0, n * r_avg / max(state.cluster.total_gpus, 1))
    left = age * state.remaining / state.jobs.work[ids]
    return (now - state.jobs.arrival[ids] + left) / iso


PRIORITIES = {"lr": _lr, "las": _las, "sjf": _sjf, "srtf": _srtf, "ftf": _ftf}


def priority(kind: str, state: SchedState, now: float, r_avg: np.ndarray) -> np.ndarray:
    """float64 per active job: the ``kind`` priority at time ``now`` (the last refresh)."""
    if kind not in PRIORITIES:
        raise ConfigError(f"unknown Hops priority {kind!r} (known: {', '.join(PRIORITIES)})")
    return np.asarray(PRIORITIES[kind](state, now, r_avg), float)
