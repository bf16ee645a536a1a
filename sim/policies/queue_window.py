"""Any policy behind Hops' queue priority and service window: the Hops paper's baselines.

The Hops paper (SoCC'24 §4; algorithms.md §4.11) runs Sia and Gavel "with the same LR queue
priority as Hops".  It does not say how a priority enters a policy that has no queue of its own
(Sia's ILP and Gavel's LP decide over every job at once).  Our reading [I]: the priority works
there as it does in Hops, through the service window (§4.5).  At each decision:

1. every active job gets the Hops priority (``priority``, default the latency ratio ``wait /
   expected age``, with Hops' own ``R_avg`` over the job's requirement set), taken at the last
   ``refresh_s`` = 30 s tick, as in Hops (:mod:`sim.hops.priority`);
2. the queue, sorted by that priority (ties by job id), is cut by the service window over the
   GPUs the inner policy will give each job (its request ``demand``);
3. the inner policy decides over the window's jobs only, on the GPUs the others free: a job
   outside the window holds nothing this decision (it is preempted, as in Hops, where a round
   re-plans every job).

The inner policy keeps its own rounds, timers and per-job memory; it only ever sees the window.
Registered as ``queue-window`` (``inner`` names the policy, built with its defaults).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ConfigError
from ..hops.configs import requirement_sets
from ..hops.priority import PRIORITIES, priority
from ..hops.window import service_window
from ..placement import csr_rows
from ..state import Plan, SchedState
from .base import Policy
from .registry import get_policy, register

__all__ = ["QueueWindow", "window_state", "widen_plan"]


def window_state(state: SchedState, keep: np.ndarray) -> SchedState:
    """``state`` restricted to the active positions ``keep`` (sorted): the placement CSR of the
    kept jobs, and free GPUs counting those of the dropped jobs as free."""
    keep = np.asarray(keep, np.int64)
    lens, flat = csr_rows(state.pl_indptr, keep)
    nodes, counts = state.pl_nodes[flat], state.pl_counts[flat]
    free = None
    if state.node_free is not None:
        held = np.zeros(state.cluster.n_nodes, np.int64)
        np.add.at(held, nodes, counts.astype(np.int64))
        free = (state.cluster.node_gpus.astype(np.int64) - held).astype(state.node_free.dtype)
    same = {f.name: getattr(state, f.name) for f in dataclasses.fields(SchedState)}
    return SchedState(**{
        **same, "active": state.active[keep], "ngpu": state.ngpu[keep], "remaining": state.remaining[keep],
        "attained_gpu_s": state.attained_gpu_s[keep], "run_s": state.run_s[keep],
        "queued_since": state.queued_since[keep],
        "pl_indptr": np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        "pl_nodes": nodes, "pl_counts": counts, "node_free": free})


def widen_plan(plan: Plan, keep: np.ndarray, n_active: int) -> Plan:
    """A plan over the kept positions as a plan over all ``n_active`` jobs (the others empty,
    rate scale 1)."""
    keep = np.asarray(keep, np.int64)
    lens = np.zeros(n_active, np.int64)
    lens[keep] = np.diff(plan.indptr)
    scale = None
    if plan.rate_scale is not None:
        scale = np.ones(n_active)
        scale[keep] = plan.rate_scale
    if plan.sampling is not None:
        raise ConfigError("policy queue-window: the inner policy's per-worker sampling is not supported")
    return Plan(np.concatenate([[0], np.cumsum(lens)]).astype(np.int64), plan.nodes, plan.counts,
                plan.wakeup, scale)


@register
class QueueWindow(Policy):
    name = "queue-window"
    description = "a policy (inner=) over the jobs of Hops' LR service window: the Hops paper's Sia and Gavel"
    preemptive = True

    def __init__(self, inner: str = "sia-rigid", priority: str = "lr", refresh_s: float = 30.0,
                 placement: str = "consolidated"):
        super().__init__(placement)
        if priority not in PRIORITIES:
            raise ConfigError(f"policy queue-window: unknown priority {priority!r} (known: {', '.join(PRIORITIES)})")
        if not refresh_s > 0:
            raise ConfigError(f"policy queue-window: refresh_s must be > 0, got {refresh_s}")
        if inner == self.name:
            raise ConfigError("policy queue-window: inner must be another policy")
        self.inner = get_policy(inner) if isinstance(inner, str) else inner
        if self.inner.view != "all":
            raise ConfigError(f"policy queue-window: inner policy {self.inner.name} sees only queued jobs "
                              "(view 'queued'); the window needs one that re-plans every job")
        self.priority, self.refresh_s = priority, float(refresh_s)
        # the engine reads these from the instance: the inner policy's rounds and triggers
        self.triggers, self.round_s = self.inner.triggers, self.inner.round_s
        # the latency ratio reads each job's work (its expected age), as Hops does
        self.clairvoyant, self.rate_model = True, self.inner.rate_model
        self._jobs = None

    def params(self) -> dict:
        return {**super().params(), "inner": self.inner.name, "priority": self.priority,
                "refresh_s": self.refresh_s}

    def schedule(self, state: SchedState) -> Plan:
        if state.jobs is not self._jobs:
            j = state.jobs
            self._jobs = j
            self._r_avg = np.array([r.mean() for r in requirement_sets(
                j.demand, j.gpus_min, j.gpus_max, j.gpus_allowed)])
        keep = self.window(state)
        plan = self.inner.schedule(window_state(state, keep))
        return widen_plan(plan, keep, state.active.shape[0])

    def window(self, state: SchedState) -> np.ndarray:
        """Sorted active positions of the service window at ``state.now``."""
        tick = np.floor(state.now / self.refresh_s) * self.refresh_s
        prio = priority(self.priority, state, tick, self._r_avg[state.active])
        order = np.lexsort((state.active, -prio))
        win = service_window(state.demand[order], state.cluster.total_gpus)
        return np.sort(order[:win])
