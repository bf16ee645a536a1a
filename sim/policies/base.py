"""The scheduler protocol: ordering/admission, allocation, placement.

A policy is a small class.  The engine calls :meth:`Policy.schedule` at each
decision point with a :class:`~sim.state.SchedState` and applies the returned
:class:`~sim.state.Plan`.  The default ``schedule`` composes three steps that a
policy overrides as needed:

1. ``order(state)``: indices into ``state.active``, highest priority first; jobs
   left out are not admitted now (ordering and admission).
2. ``allocate(state, order)``: GPUs wanted per active job (allocation; default:
   the rigid request).
3. ``place(state, order, want)``: node placements (default: the Numba greedy
   placer with this policy's placement mode, preemption and blocking rules).

Built-in policies use numpy or Numba only: no Python call per job.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..errors import ConfigError
from ..placement import PLACEMENT_MODES, greedy_place, type_inputs
from ..state import ARRIVAL, COMPLETION, Plan, SchedState


class Policy:
    """Base class of all scheduling policies."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: decision points besides rounds and timers (bits of sim.state ARRIVAL/COMPLETION)
    triggers: ClassVar[int] = ARRIVAL | COMPLETION
    #: default scheduling round period in seconds (None: event driven only)
    round_s: ClassVar[float | None] = None
    #: may running jobs lose their GPUs?
    preemptive: ClassVar[bool] = False
    #: stop at the first job that does not fit (True) or let later jobs backfill
    blocking: ClassVar[bool] = False
    #: the engine may skip an arrival/completion decision when no queued job fits in the
    #: free GPUs by count.  Only sound for non-preemptive policies that give each job its
    #: rigid request and keep no state between calls (FIFO, SJF).
    skip_if_nothing_fits: ClassVar[bool] = False
    #: the engine may skip a decision triggered by completions alone when no job is queued:
    #: every active job then runs and, with rigid requests (``allocate`` = demand) and the
    #: greedy placer, keeps its GPUs.  Sound for preemptive policies that keep their
    #: requests rigid and need no notice of completions (SRTF, LAS, Tiresias).
    skip_idle_completions: ClassVar[bool] = False
    #: the engine may decide an arrival itself when the arriving job is the only queued one
    #: and fits in the free GPUs by count, without asking the policy: it places the job
    #: with ``place_one`` on the free GPUs in the policy's placement mode.  Sound when
    #: (a) requests are rigid, so with everything fitting by count every job is selected
    #: and every running job keeps its GPUs; (b) the policy uses the greedy placer, which
    #: then gives the newcomer exactly that placement; (c) asked, the policy would return
    #: no wakeup and no rate scale (Tiresias: nobody waits); (d) its state catches up on a
    #: job it has not seen at its next decision (FIFO, SJF, SRTF, LAS, Tiresias).
    place_lone_arrivals: ClassVar[bool] = False
    #: Both shortcuts rest on one more fact: reading the kernel's state never changes it,
    #: so skipping a decision cannot even change how a sum is rounded.  A subclass that
    #: overrides ``allocate``, ``place``, ``schedule`` or ``next_wakeup`` loses the
    #: shortcuts (and ``skip_if_nothing_fits``) unless it sets them itself
    #: (``__init_subclass__``): its decisions may no longer be the ones they assume.
    #: the same policy as a native kernel (csrc/sk_native.c) that decides inside the event
    #: loop: "fifo", "sjf", "srtf", "las" or "tiresias"; None: Python decides.  Like the
    #: shortcuts it is dropped by subclasses that override a deciding step.
    native: ClassVar[str | None] = None
    _SHORTCUTS: ClassVar[tuple[str, ...]] = ("skip_if_nothing_fits", "skip_idle_completions",
                                             "place_lone_arrivals", "native")
    _DECIDING: ClassVar[tuple[str, ...]] = ("allocate", "place", "schedule", "next_wakeup")
    #: "all": the policy sees every active job; "queued": only queued jobs (for
    #: non-preemptive policies; running jobs keep their GPUs, the engine then does
    #: O(queued) work per decision instead of O(active))
    view: ClassVar[str] = "all"
    #: the engine re-places this policy's spread jobs onto fewer nodes when room appears,
    #: paying the restart delay (``sim.defrag.defragment_plan``); off by default
    defragment: ClassVar[bool] = False
    #: the policy reads the simulator's truth (``remaining`` and ``jobs.work`` of
    #: time-to-accuracy jobs), which runs with a learning simulator otherwise mask: oracle
    #: baselines (SJF, SRTF, Themis, Gavel's FTF and makespan policies, SMJP, Hops,
    #: ``eghs-unaware-oracle``); tests/test_learning_world.py holds every other policy to it
    clairvoyant: ClassVar[bool] = False
    #: a placement-level rate model (sim.state.RateModel) the engine uses instead of the
    #: oracle's slowest-worker rule for this policy's placements (e.g. SMJP's proportional
    #: assignment); None: the oracle's rule.  A policy with one never takes the native path.
    rate_model = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "order" in cls.__dict__ and "native" not in cls.__dict__:
            cls.native = None            # a new order is not the native kernel's
        if any(m in cls.__dict__ for m in cls._DECIDING):
            for flag in cls._SHORTCUTS:
                if flag not in cls.__dict__:
                    setattr(cls, flag, None if flag == "native" else False)

    def __init__(self, placement: str = "consolidated"):
        if placement not in PLACEMENT_MODES:
            raise ConfigError(f"policy {self.name}: unknown placement {placement!r}; "
                              f"choose from {sorted(PLACEMENT_MODES)}")
        self.placement = placement

    # -- the three steps -------------------------------------------------
    def order(self, state: SchedState) -> np.ndarray:
        raise NotImplementedError

    def allocate(self, state: SchedState, order: np.ndarray) -> np.ndarray:
        return state.demand.astype(np.int32)

    def place(self, state: SchedState, order: np.ndarray, want: np.ndarray) -> Plan:
        c = state.cluster
        # in the "queued" view no running job is listed: their GPUs are already
        # taken out of node_free, which then plays the role of the capacity
        capacity = state.node_free if self.view == "queued" else c.node_gpus
        allowed, keys = type_inputs(state)      # one GPU type per job, chosen by the run's rule
        indptr, nodes, counts = greedy_place(
            np.ascontiguousarray(order, np.int64), np.ascontiguousarray(want, np.int32),
            state.pl_indptr, state.pl_nodes, state.pl_counts, capacity, c.node_type,
            len(c.gpu_types), PLACEMENT_MODES[self.placement], self.preemptive, self.blocking,
            allowed, keys)
        return Plan(indptr, nodes, counts)

    # -- entry point -----------------------------------------------------
    def schedule(self, state: SchedState) -> Plan:
        order = self.order(state)
        want = self.allocate(state, order)
        plan = self.place(state, order, want)
        wake = self.next_wakeup(state)
        if wake is not None:
            plan = Plan(plan.indptr, plan.nodes, plan.counts, wake, plan.rate_scale)
        return plan

    def next_wakeup(self, state: SchedState) -> float | None:
        """A time at which the policy must be asked again (e.g. a queue demotion)."""
        return None

    def params(self) -> dict:
        return {"placement": self.placement}

    def native_params(self) -> dict | None:
        """Parameters of the native kernel (see ``native``), or None when this instance's
        settings have no native form."""
        return {} if self.native else None


def stable_order(*keys: np.ndarray) -> np.ndarray:
    """Indices sorted by the keys (last key most significant), ties by position.

    np.lexsort is stable, so equal keys keep the active list's order, which is
    by job id: the same inputs always give the same order.
    """
    return np.lexsort(keys).astype(np.int64)
