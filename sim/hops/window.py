"""Hops' service window and its sensitivity adjustment (algorithms.md §4.5, §4.9)."""
from __future__ import annotations

import numpy as np

__all__ = ["service_window", "sensitivity_adjust"]


def service_window(r_min_sorted: np.ndarray, total_gpus: int) -> int:
    """Length of the window over a queue sorted by priority: jobs from the head up to and
    including the first at which the cumulative minimum requirement reaches ``total_gpus``
    (the whole queue if it never does)."""
    cum = np.cumsum(np.asarray(r_min_sorted, np.int64))
    hit = np.flatnonzero(cum >= total_gpus)
    return int(hit[0]) + 1 if hit.size else int(cum.shape[0])


def sensitivity_adjust(rho_sorted: np.ndarray, r_min_sorted: np.ndarray, in_set: np.ndarray,
                       boundary: int, idle: int) -> np.ndarray:
    """Candidates of a fragment plan (§4.9): the set ``in_set`` (bool over the sorted queue)
    plus, while the set's mean sensitivity exceeds the queue's, jobs scanned backward from the
    window ``boundary`` (the paper's "backward from the window boundary in queue order": we read
    it as walking away from the window's end into the queue's tail, i.e. positions boundary,
    boundary+1, ...) with ``rho < rho_queue`` and ``R_1 <= idle``.  Returns the new bool mask."""
    out = np.asarray(in_set, np.bool_).copy()
    rho = np.asarray(rho_sorted, float)
    if rho.size == 0:
        return out
    rho_queue = rho.mean()
    for p in range(boundary, rho.shape[0]):
        if out.any() and rho[out].mean() <= rho_queue:     # an empty set counts as too sensitive
            break
        if not out[p] and rho[p] < rho_queue and r_min_sorted[p] <= idle:
            out[p] = True
    return out
