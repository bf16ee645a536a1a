"""Hops' evaluation metrics (algorithms.md §1.2, §4.4, §4.11) on a finished run.

``LR_j = wait_j / age_j`` uses the run seconds as the age, as :func:`sim.metrics.summary` does.
"""
from __future__ import annotations

import numpy as np

from ..metrics import finish_time_fairness
from ..result import wait_times

__all__ = ["latency_ratios", "max_latency_ratio", "raqlr", "fragments_per_round", "max_ftf_rho",
           "max_ftf_rho_by_duration", "duration_classes", "DURATION_EDGES"]


def latency_ratios(result) -> np.ndarray:
    """LR per job (eq.6): queueing time over run time; NaN for a job that never ran."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(result.run_seconds > 0, wait_times(result) / result.run_seconds, np.nan)


def max_latency_ratio(result) -> float:
    lr = latency_ratios(result)
    return float(np.nanmax(lr)) if np.isfinite(lr).any() else float("nan")


def raqlr(result, at: float, window_s: float) -> float:
    """Eq.7: the mean LR of the jobs that finished in ``(at - window_s, at]``; NaN if none."""
    done = (result.finish > at - window_s) & (result.finish <= at)
    lr = latency_ratios(result)[done]
    return float(np.nanmean(lr)) if np.isfinite(lr).any() else float("nan")


def fragments_per_round(result, round_s: float, profiling=None, hold_s: float | None = None,
                        at: str = "start") -> np.ndarray:
    """Hops' fragmentation (§4.2): per round, the idle GPUs while at least one job is still
    unassigned (0 when none waits); one value per round of the run.

    ``at="start"`` (default) reads each round just after the decisions at its start (the state
    the round's plan left: the same instant for every policy, event-driven or round-based);
    ``"end"`` after the round's last decision, which sees more waiting jobs in a policy that
    is asked at every arrival than in one asked only at rounds.

    ``profiling``: Hops' profiling queue (``Hops.profile_log``: (time, GPUs, jobs) per round that
    profiled), whose GPUs the engine sees idle and whose jobs it sees queued; for ``hold_s``
    (default ``round_s``) from each entry they count busy and assigned."""
    if at not in ("start", "end"):
        raise ValueError(f"at must be 'start' or 'end', got {at!r}")
    tl = result.timeline
    t = np.asarray(tl.time, float)
    if t.size == 0:
        return np.zeros(0)
    if at == "end":
        rnd = np.floor((t - t[0]) / round_s).astype(np.int64)
        last = np.flatnonzero(np.r_[rnd[1:] != rnd[:-1], True])
    else:
        starts = t[0] + round_s * np.arange(int(np.floor((t[-1] - t[0]) / round_s)) + 1)
        last = np.searchsorted(t, starts, side="right") - 1
    when = t[last] if at == "end" else starts
    idle = result.cluster.total_gpus - np.asarray(tl.used_gpus, float)[last]
    queued = np.asarray(tl.queued, float)[last]
    if profiling:
        at_, gpus, jobs = (np.asarray(x, float) for x in zip(*profiling))
        k = np.searchsorted(at_, when, side="right") - 1
        live = (k >= 0) & (when < at_[np.maximum(k, 0)] + (round_s if hold_s is None else hold_s))
        idle = idle - np.where(live, gpus[np.maximum(k, 0)], 0.0)
        queued = queued - np.where(live, jobs[np.maximum(k, 0)], 0.0)
    return np.where(queued > 0, idle, 0.0)


def max_ftf_rho(result) -> float:
    """The largest finish-time fairness rho (Themis; :func:`sim.metrics.finish_time_fairness`)."""
    rho = finish_time_fairness(result)
    return float(np.nanmax(rho)) if np.isfinite(rho).any() else float("nan")


#: reference-duration class edges (s) of :func:`max_ftf_rho_by_duration`: 10 min, 1 h, 10 h
DURATION_EDGES = (600.0, 3600.0, 36000.0)


def duration_classes(est_duration, edges=DURATION_EDGES) -> tuple[np.ndarray, list[str]]:
    """(class index per job, class names): reference duration in ``[edges[k-1], edges[k])``,
    named ``"<600"``, ``"600-3600"``, ..., ``">=36000"``."""
    cut = np.searchsorted(np.asarray(edges, float), np.asarray(est_duration, float), side="right")
    names = [f"<{edges[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(edges[:-1], edges[1:])] + [f">={edges[-1]:g}"]
    return cut, names


def max_ftf_rho_by_duration(result, edges=DURATION_EDGES) -> dict[str, float]:
    """The largest rho among the jobs of each reference-duration class
    (:func:`duration_classes`); NaN for an empty class.  Separates the short jobs, whose rho a
    few rounds of delay multiply, from the rest."""
    rho = finish_time_fairness(result)
    cut, names = duration_classes(result.jobs.est_duration, edges)
    out = {}
    for k, name in enumerate(names):
        r = rho[(cut == k) & np.isfinite(rho)]
        out[name] = float(r.max()) if r.size else float("nan")
    return out
