"""Optimus as the Pollux authors simulate it (petuum/adaptdl ``simulator/optimus.py``;
algorithms.md §5.8): greedy marginal gain with oracle remaining work.

Each round every job (in workload order) gets one GPU while GPUs remain; the rest go one at a
time to the job of largest marginal gain ``(t(r) - t(r + 1)) * remaining``: ``t(r)`` is the
measured step time (profile) of its fixed batch on ``r`` GPUs packed ``gpus_per_node`` to a node
(at least one accumulation step on one GPU), ``remaining`` the iterations its batch needs from the
current epoch to the last (an oracle of the remaining work).  A job grows to at most ``batch //
b_min`` GPUs (NCF: 1).  Jobs keeping their GPU count keep their placement; the others, fewest
GPUs first, take GPUs from the most free nodes.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..goodput.goodput import EPS
from ..state import Plan, SchedState
from .goodput_base import GoodputPolicy, keep_or_place, packed_counts
from .registry import register

#: applications that never run on more than one GPU (the authors' ``ncf: max_replicas = 1``)
SINGLE_GPU_APPS = ("ncf",)


@register
class Optimus(GoodputPolicy):
    name = "optimus"
    description = "Optimus (Pollux authors' simulator): greedy marginal gain, oracle remaining work"

    def __init__(self, placement: str = "consolidated", gpus_per_node: int = 4):
        super().__init__(placement)
        self.gpus_per_node = int(gpus_per_node)

    def params(self) -> dict:
        return {**super().params(), "gpus_per_node": self.gpus_per_node}

    def step_time(self, job: int, r: int) -> float:
        m = self.model
        app = m.oracle.app(m.oracle_model(job))
        batch = int(m.oracle.job_batch[job])
        local = np.ceil(batch / r - EPS)
        steps = int(np.ceil(local / app.max_local_bsz - EPS)) - 1
        if r == 1:
            steps = max(1, steps)
        atomic = int(np.ceil(local / (steps + 1) - EPS))
        atomic = min(atomic, int(app.max_batch_size / (r * (steps + 1))))
        step, sync = app.step_times(packed_counts(r, self.gpus_per_node), atomic)
        return step + (step - sync) * steps

    def remaining(self, job: int, epoch: int) -> float:
        m = self.model
        app = m.oracle.app(m.oracle_model(job))
        last = app.max_epochs - 1
        if last <= epoch:
            return 1.0
        batch = m.oracle.job_batch[job]
        return float(app.iterations(batch, last) - app.iterations(batch, epoch))

    def max_replicas(self, job: int) -> int:
        m = self.model
        app = m.oracle.app(m.oracle_model(job))
        return 1 if app.name in SINGLE_GPU_APPS else int(m.oracle.job_batch[job] // app.min_local_bsz)

    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        ids = state.active
        k = ids.shape[0]
        free = int(state.cluster.node_gpus.sum())
        want = np.zeros(k, np.int64)
        gain = np.zeros(k)
        rem = np.array([self.remaining(int(j), int(e)) for j, e in zip(ids, epochs)])
        cap = np.array([self.max_replicas(int(j)) for j in ids])
        for i in range(k):
            if free < 1:
                break
            want[i] = 1
            free -= 1
            gain[i] = self._gain(int(ids[i]), 1, cap[i], free, rem[i])
        while free > 0 and k and gain.max() > 0:
            i = int(np.argmax(gain))
            want[i] += 1
            gain[i] = self._gain(int(ids[i]), int(want[i]), cap[i], free, rem[i])
            free -= 1
        order = np.argsort(want, kind="stable")
        return keep_or_place(state, order, want, self.model)

    def _gain(self, job: int, r: int, cap: int, free: int, remaining: float) -> float:
        if r + 1 > cap or free < 1:
            return 0.0
        return (self.step_time(job, r) - self.step_time(job, r + 1)) * remaining
