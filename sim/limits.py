"""Valid ranges of the numeric inputs, checked once where each value enters.

================== ================================= ==========================================
input              valid range                       checked in
================== ================================= ==========================================
arrival time       finite, 0 <= arrival_s <= 1e10 s  :mod:`sim.jobs` (job tables), trace readers
                                                     (:func:`sim.traces.common.build_load`),
                                                     :func:`sim.engine.run_jobs` (job specs)
run time           0 < duration_s <= 1e10 s          the same places; for work in iterations
                                                     the engine checks work / reference rate
round period       0 (off) or 1 s <= round_s <= 1e10 :class:`sim.engine.EngineConfig`
                                                     (``--round``, sweep ``engine.round_s``)
restart delay      0 <= restart_delay_s <= 1e10 s    :class:`sim.engine.EngineConfig`
generator load     1e-6 <= jobs/h <= 1e9, and the     :func:`sim.workload.generate_workload`
                   arrivals must end before 1e10 s
seed               integer, 0 <= seed < 2**63        :func:`sim.workload.generate_workload`
bandwidth          finite, >= 0 Gbit/s; one (intra,  :class:`sim.cluster.Cluster`;
                   inter) per GPU type where the     :func:`sim.network.rate_oracle`
                   throughput model reads them       (docs/network.md)
================== ================================= ==========================================

The horizon (:data:`MAX_TIME_S`, about 317 years) keeps every event time exact to well under a
millisecond in float64 and, with the minimum round period, bounds a run's round events by
``horizon / round_s`` (the kernel schedules no round while the cluster is idle).
"""
from __future__ import annotations

import math

from .errors import ConfigError

__all__ = ["MAX_TIME_S", "MIN_ROUND_S", "MIN_LOAD_PER_HOUR", "MAX_LOAD_PER_HOUR", "MAX_SEED",
           "check_round", "check_seconds", "check_seed", "fmt_num", "clip"]

#: Latest arrival and longest run time, in seconds.
MAX_TIME_S = 1e10
#: Shortest scheduling round period (s); 0 turns periodic rounds off.
MIN_ROUND_S = 1.0
#: Generator arrival rates (jobs per hour).
MIN_LOAD_PER_HOUR = 1e-6
MAX_LOAD_PER_HOUR = 1e9
#: Seeds are non-negative 63-bit integers.
MAX_SEED = 2 ** 63 - 1


def fmt_num(x) -> str:
    """A number as plain text (``inf``, ``1e+300``, ``3``), never ``np.float64(...)``."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return clip(repr(x))
    if f.is_integer() and abs(f) < 1e6:
        return str(int(f))
    short = f"{f:.6g}"
    return short if float(short) == f else repr(f)


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to at most about ``limit`` characters, saying how much was left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}...[{len(text) - 2 * keep} characters left out]...{text[-keep:]}"


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ConfigError(f"{where} must be a number, got {clip(repr(value))}")
    return float(value)


def check_seconds(value, where: str, *, low: float = 0.0, high: float = MAX_TIME_S) -> float:
    """``value`` as a float in [low, high] (finite), else ConfigError naming ``where``."""
    v = _number(value, where)
    if not (math.isfinite(v) and low <= v <= high):
        raise ConfigError(f"{where} must be in [{fmt_num(low)}, {fmt_num(high)}] s, got {fmt_num(v)}")
    return v


def check_round(value, where: str) -> float | None:
    """A round period: None (the policy's own), 0 (off) or in [MIN_ROUND_S, MAX_TIME_S]."""
    if value is None:
        return None
    v = _number(value, where)
    if v == 0.0:
        return 0.0
    if not (math.isfinite(v) and MIN_ROUND_S <= v <= MAX_TIME_S):
        raise ConfigError(f"{where} must be 0 (no periodic rounds) or in [{fmt_num(MIN_ROUND_S)}, "
                          f"{fmt_num(MAX_TIME_S)}] s, got {fmt_num(v)}")
    return v


def check_seed(value, where: str = "seed") -> int:
    """A seed: an integer in [0, MAX_SEED]."""
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ConfigError(f"{where} must be an integer, got {clip(repr(value))}")
    v = int(value)
    if not 0 <= v <= MAX_SEED:
        raise ConfigError(f"{where} must be an integer in [0, 2**63 - 1], got {clip(str(v))}")
    return v
