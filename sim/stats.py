"""Confidence intervals of paired ratios: a policy against a baseline on the same workloads.

Runs of two policies on the same seed share their workload, so they are compared as pairs: the
statistic is the mean of the log-ratios ``log(value / baseline)`` over the pairs, reported as a
ratio (``exp`` of it: the geometric mean of the per-seed ratios), with a bootstrap confidence
interval of that mean (:func:`scipy.stats.bootstrap`, resampling pairs).  Working on the log
scale keeps ratios symmetric (0.5 and 2 are equally far from 1) and the interval positive: a
ratio's interval never reaches below zero.

>>> ci = paired_ratio_ci([90.0, 80.0, 100.0, 85.0], [100.0, 100.0, 110.0, 100.0])
>>> f"{ci.ratio:.3f} [{ci.low:.3f}, {ci.high:.3f}] n={ci.n}"
'0.864 [0.812, 0.902] n=4'

With few pairs the bootstrap cannot be more precise than the data allow: with 3 seeds there are
10 distinct resamples, so an interval is a rough guide; one pair has no interval (NaN bounds).

Where one test is made per workload (is ours different from theirs on this workload?), the
chance that one of many tests falls below 0.05 by luck grows with their number:
:func:`holm` adjusts the p-values for that (Holm's step-down method, which controls the
chance of any false "different" at the level compared against).

>>> [round(p, 3) for p in holm([0.01, 0.04, 0.03, float("nan")])]
[0.03, 0.06, 0.06, nan]
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

from .errors import ConfigError

__all__ = ["RatioCI", "paired_ratio_ci", "paired_ratios", "holm", "CONFIDENCE", "N_RESAMPLES"]

CONFIDENCE = 0.95
N_RESAMPLES = 9999


@dataclass(frozen=True)
class RatioCI:
    """A ratio to a baseline (geometric mean over pairs) and its confidence interval."""

    ratio: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE

    @property
    def change_pct(self) -> float:
        """The ratio as a change in percent (0.9 -> -10.0)."""
        return 100.0 * (self.ratio - 1.0)

    def label(self, digits: int = 2) -> str:
        """``"0.86 [0.81, 0.90]"`` (the interval left out when there is none)."""
        if math.isnan(self.low):
            return f"{self.ratio:.{digits}f}"
        return f"{self.ratio:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def paired_ratio_ci(values: Sequence[float], baseline: Sequence[float], *,
                    confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                    seed: int = 0) -> RatioCI:
    """Ratio of ``values`` to ``baseline`` (aligned pairs) with a bootstrap CI of the mean
    log-ratio (BCa; percentile where BCa is undefined).  Pairs with a value that is not finite
    and positive are left out; no pair left gives NaN throughout."""
    logs = _log_ratios(values, baseline)
    if logs.size == 0:
        return RatioCI(math.nan, math.nan, math.nan, 0, confidence)
    ratio = math.exp(float(logs.mean()))
    if logs.size == 1:
        return RatioCI(ratio, math.nan, math.nan, 1, confidence)
    if np.ptp(logs) == 0.0:                    # every pair the same ratio: nothing to resample
        return RatioCI(ratio, ratio, ratio, int(logs.size), confidence)
    low, high = _bootstrap_mean(logs, confidence, n_resamples, seed)
    return RatioCI(ratio, math.exp(low), math.exp(high), int(logs.size), confidence)


def _log_ratios(values, baseline) -> np.ndarray:
    v, b = np.asarray(values, float), np.asarray(baseline, float)
    if v.shape != b.shape or v.ndim != 1:
        raise ConfigError(f"paired ratios need two 1-d sequences of one length, got shapes "
                          f"{v.shape} and {b.shape}")
    ok = np.isfinite(v) & np.isfinite(b) & (v > 0) & (b > 0)
    return np.log(v[ok] / b[ok])


def _bootstrap_mean(logs: np.ndarray, confidence: float, n_resamples: int, seed: int):
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # BCa's warnings on tiny samples: we fall back
            res = stats.bootstrap((logs,), np.mean, confidence_level=confidence,
                                  n_resamples=n_resamples, method=method,
                                  random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return low, high
    return math.nan, math.nan


def paired_ratios(rows: Iterable[dict], *, group: Sequence[str], treatment: str, baseline: str,
                  metric: str, pair: str = "seed", **options) -> list[dict]:
    """Ratios to ``baseline`` for every group and treatment of ``rows``.

    ``rows`` are dicts (one run each); ``group`` the columns that must match (cluster, load,
    ...), ``treatment`` the column naming what is compared (policy, variant), ``pair`` the
    column that pairs a run with the baseline's run (seed).  Returns one dict per (group,
    treatment) with the group columns, ``treatment``, ``metric``, ``ratio``, ``low``, ``high``,
    ``n`` and ``change_pct``; treatments without a paired baseline run are left out.
    """
    by_group: dict[tuple, list[dict]] = {}
    for r in rows:
        by_group.setdefault(tuple(r[c] for c in group), []).append(r)
    out = []
    for key in sorted(by_group, key=str):
        sub = by_group[key]
        base = {r[pair]: r[metric] for r in sub if r[treatment] == baseline}
        for t in sorted({r[treatment] for r in sub}, key=str):
            pairs = [(r[metric], base[r[pair]]) for r in sub if r[treatment] == t and r[pair] in base]
            if not pairs:
                continue
            v, b = zip(*pairs)
            ci = paired_ratio_ci(v, b, **options)
            out.append({**dict(zip(group, key)), treatment: t, "metric": metric, "ratio": ci.ratio,
                        "low": ci.low, "high": ci.high, "n": ci.n, "change_pct": ci.change_pct})
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: the k-th smallest of the m finite ones
    becomes ``max over j <= k of min(1, (m - j + 1) p_(j))``; NaN (no test) stays NaN and is
    not counted in m."""
    p = np.asarray(pvalues, float)
    if np.any(p[np.isfinite(p)] < 0) or np.any(p[np.isfinite(p)] > 1) or np.any(np.isinf(p)):
        raise ConfigError(f"holm: p-values must be in [0, 1] or NaN, got {list(pvalues)!r}")
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(np.isfinite(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m, running = order.size, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out.tolist()
