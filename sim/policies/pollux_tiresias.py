"""Tiresias as the Pollux authors simulate it (petuum/adaptdl ``simulator/tiresias.py``),
registered as ``pollux-tiresias``: it differs from our ``tiresias`` (sim.policies.tiresias).

* Two queues, demotion at ``threshold_gpu_s`` = 16 GPU-hours of service (time since the job was
  first counted as running, in whole seconds at round times, times its requested GPUs); no
  starvation promotion (``_solve_starvation = 0``), FIFO within a queue (a demoted job joins the
  end of queue 1).
* Each round, in queue order, a job runs if its requested GPUs fit in those not yet given to
  jobs before it (no blocking: later, smaller jobs may run); the others are preempted.
* A running job keeps its GPUs; a newly running one takes GPUs from the most free nodes.
* The batch size is the workload's, fixed (the job model, sim.goodput.jobmodel).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..state import Plan, SchedState
from .goodput_base import GoodputPolicy, keep_or_place
from .registry import register

#: the authors' ``_queue_threshold`` (GPU-seconds)
THRESHOLD_GPU_S = 3600 * 16


@register
class PolluxTiresias(GoodputPolicy):
    name = "pollux-tiresias"
    description = "Tiresias as in the Pollux simulator: 2 queues at 16 GPU-h, rigid requests, fixed batch"

    def __init__(self, placement: str = "consolidated", threshold_gpu_s: float = THRESHOLD_GPU_S):
        super().__init__(placement)
        self.threshold_gpu_s = float(threshold_gpu_s)

    def params(self) -> dict:
        return {**super().params(), "threshold_gpu_s": self.threshold_gpu_s}

    def reset(self, n_jobs: int) -> None:
        self.queue = np.full(n_jobs, -1, np.int64)     # -1 unseen, 0 / 1
        self.seq = np.zeros(n_jobs, np.int64)          # position within the queue (FIFO)
        self.running = np.zeros(n_jobs, bool)
        self.executed = np.zeros(n_jobs, np.int64)     # whole seconds counted running
        self.last_check = np.zeros(n_jobs, np.int64)
        self.counter = 0

    def decide(self, state: SchedState, epochs: np.ndarray) -> Plan:
        ids = state.active
        now = int(state.now)
        new = ids[self.queue[ids] < 0]
        self._enqueue(new, 0, now)
        run = ids[self.running[ids]]
        self.executed[run] += now - self.last_check[run]
        self.last_check[ids] = now
        demote = run[(self.queue[run] == 0) & (self.executed[run] * state.jobs.demand[run] >= self.threshold_gpu_s)]
        self._enqueue(demote[np.argsort(self.seq[demote], kind="stable")], 1, now)
        order = np.lexsort((self.seq[ids], self.queue[ids]))
        want = np.zeros(ids.shape[0], np.int64)
        free = int(state.cluster.node_gpus.sum())
        for i in order:
            d = int(state.jobs.demand[ids[i]])
            if d <= free:
                want[i] = d
                free -= d
        self.running[ids] = want > 0
        return keep_or_place(state, order, want, self.model)

    def _enqueue(self, jobs: np.ndarray, queue: int, now: int) -> None:
        self.queue[jobs] = queue
        self.seq[jobs] = self.counter + np.arange(jobs.shape[0])
        self.counter += jobs.shape[0]
        self.last_check[jobs] = np.where(self.queue[jobs] == 0, now, self.last_check[jobs])
