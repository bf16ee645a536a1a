"""Gavel's Gandiva (``scheduler/policies/gandiva.py``, ``GandivaPolicy``): random packing.

At each allocation Gandiva keeps its pairs whose jobs are both still there and whose
normalized co-located throughput -- the sum, over GPU types and the two jobs, of packed /
isolated rate -- is at least 1 (a job left alone is always dropped: its "pair" normalizes to
0, Gavel's code), then:

* if the jobs' scale factors fit in the cluster's GPUs, no packing: each job gets ``N_t / (n
  s_i)`` of every type (Gavel's isolated split, rows above 1 scaled to 1);
* otherwise it draws pairs at random among the jobs not in a kept pair -- ``rng.sample(jobs,
  2)`` at most ``len(jobs)`` times, a draw of two scale factors that differ is wasted -- and
  splits the cluster the same way over the combinations (pairs and jobs left alone).

``random.Random(seed)`` draws as Gavel's ``self._rng`` does, on the same list (the unpaired
jobs in id order), so the same seed gives the same pairs.  The round mechanism is
:mod:`sim.policies.gavel_packing`.
"""
from __future__ import annotations

import random

import numpy as np

from . import register
from .gavel_lp import isolated_allocation
from .gavel_packing import GavelPackingRounds


@register
class GavelGandiva(GavelPackingRounds):
    name = "gavel-gandiva"
    description = ("Gavel's Gandiva: random pairs of jobs share GPUs (space sharing at the "
                   "measured co-located rates), kept while they pay; 360 s rounds")

    def _reset_run(self, state) -> None:
        self._rng = random.Random(self.seed)
        self._assigned: dict[int, tuple[tuple, int | None]] = {}   # job -> (combination, partner)

    def allocation(self, state, entries, thr) -> dict:
        c = state.cluster
        singles = sorted(k[0] for k in entries if len(k) == 1)
        self._drop_stale(set(singles), entries)
        scale = {j: entries[(j,)].scale for j in singles}
        capacity = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types))
        if sum(scale.values()) <= capacity.sum():
            combos = [(j,) for j in singles]                      # everything fits: no packing
        else:
            self._pair_up([j for j in singles if j not in self._assigned], scale)
            combos = list(dict.fromkeys(combo for combo, _ in self._assigned.values()))
        x = isolated_allocation(np.array([entries[k].scale for k in combos], float), capacity)
        return dict(zip(combos, x))

    def _drop_stale(self, present: set, entries) -> None:
        """Gavel's clean-up: pairs with a job gone, or normalized throughput below 1."""
        stale = []
        for j, (combo, other) in self._assigned.items():
            if j not in present or (other is not None and other not in present) or \
                    _normalized(entries, combo) < 1.0:
                stale += [j, other]
        for j in stale:
            if j is not None:
                self._assigned.pop(j, None)

    def _pair_up(self, free: list[int], scale: dict) -> None:
        n = len(free)
        tries = 0
        while len(free) > 1 and tries < n:
            tries += 1
            a, b = self._rng.sample(free, 2)
            if scale[a] != scale[b]:
                continue
            free.remove(a)
            free.remove(b)
            combo = (min(a, b), max(a, b))
            self._assigned[a] = (combo, b)
            self._assigned[b] = (combo, a)
        for j in free:
            self._assigned[j] = ((j,), None)


def _normalized(entries, combo: tuple) -> float:
    """Sum over types and both jobs of packed / isolated rate; 0 for a job alone or a pair
    that cannot run packed on some type (Gavel's ``_get_normalized_throughput``)."""
    if len(combo) != 2:
        return 0.0
    pair = entries[combo].rates
    total = 0.0
    for t in range(pair.shape[0]):
        for m, j in enumerate(combo):
            if pair[t, m] <= 0.0:
                return 0.0
            total += pair[t, m] / entries[(j,)].rates[t, 0]
    return total
