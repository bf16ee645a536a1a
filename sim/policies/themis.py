"""Themis (Mahajan et al., NSDI'20; algorithms.md §5.4): finish-time fairness by leases and
partial-allocation auctions, as ``themis``.

**Finish-time fairness.**  ``rho_i = T_sh / T_id``: the finish time (from arrival) a job gets in
the shared cluster over the one it would get alone on a 1/N share.  ``T_id = W_i / y_iso_i``
with ``W_i`` the job's total work and ``y_iso_i`` its rate on Gavel's isolated split (1/N of
every GPU type over its scale factor, :func:`~sim.policies.gavel_lp.isolated_allocation`;
N = active jobs, recomputed at every decision).  The rho of job i after a decision, with
``a_i`` its time since arrival and ``r_i`` its remaining work:

* running on type t until it finishes: ``(a_i + r_i / y_it) / T_id`` (``y_it``: its rate there);
* left without GPUs: it waits one lease, then proceeds at its fair share:
  ``(a_i + lease_s + r_i / y_iso_i) / T_id``;
* "now" (used to rank jobs): at its fair share from now on, ``(a_i + r_i / y_iso_i) / T_id``.

**Leases.**  A job granted GPUs holds them for a lease (``lease_s``, default 600 s: Themis'
"about 10 min" GPU leases).  Decisions happen at arrivals, completions and lease expiries; a
job whose lease has not expired keeps its GPUs.  Jobs without a lease (queued, or expired)
are the contenders for the free GPUs.  A job that wins again the type it held and finds its
GPUs still free keeps them (no restart).

**Auction.**  The ``ceil((1 - f) N)`` contenders with the worst (largest) rho now take part
(``f``, the fairness knob, default 0.8, Themis' default; at least one).  The arbiter picks
the allocation of free GPUs to them maximizing the product of ``1 / rho`` (Nash social
welfare); each job bids for its whole gang (its requested GPUs, on one GPU type: jobs are
rigid here, so a job's bids are one per type).  Exact maximization is an integer program; we
take the bids greedily by their gain ``log rho_none - log rho_t`` (largest first, ties by
participant rank then type order) while their type has room -- the "greedy marginal"
algorithms.md §5.4 names.  **Partial allocation**: winner i gets the fraction ``c_i =
NSW_-i(with i) / NSW_-i(without i)`` (others' product of 1/rho in the chosen allocation,
over that of the allocation chosen without i; ``c_i <= 1``) -- of its lease, since a gang
cannot run on a fraction of its GPUs: it holds its GPUs for ``c_i * lease_s``, and what it
leaves is auctioned again then.  **Leftovers**: free GPUs no winner took go, work-
conservingly, to the other contenders (non-participants first, then losing participants,
each by rho now, worst first), each on its fastest type with room, for a full lease.

**Placement.**  Per type, a new job takes the servers with the most free GPUs first (fewest
servers).  Constants: ``lease_s`` 600, ``fairness_knob`` 0.8 (Themis' defaults, algorithms.md
§5.4 [R]); nothing else is tuned.  Left out: Themis' agents bid placement-aware rho tables
for subsets of the offer (our bids are whole gangs, consolidated when the type allows) and
estimate remaining work online (ours is the exact remaining work, as Gavel's simulator
assumes); the restart delay is not in the bids.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from ..state import ARRIVAL, COMPLETION, Plan, SchedState
from . import register
from .base import Policy
from .gavel_rounds import ThroughputCache, TypeCapacity, check_positive, validate_runnable
from .themis_kernels import contenders, decide_and_place

#: Themis' lease length (s) and fairness knob f (algorithms.md §5.4: ~10 min leases, f = 0.8)
LEASE_S = 600.0
FAIRNESS_KNOB = 0.8


@register
class Themis(Policy):
    name = "themis"
    description = ("Themis: finish-time fairness (rho) by GPU leases and partial-allocation "
                   "auctions among the worst 1 - f jobs, leftovers work-conserving")
    triggers = ARRIVAL | COMPLETION
    preemptive = True
    #: reads the true remaining work (an oracle baseline): given it in learning runs too
    clairvoyant = True
    #: a job runs on one GPU type only, so it may not ask for more GPUs than a type has
    single_type_jobs = True

    def __init__(self, placement: str = "consolidated", lease_s: float = LEASE_S,
                 fairness_knob: float = FAIRNESS_KNOB):
        super().__init__(placement)
        self.lease_s = check_positive(self.name, "lease_s", lease_s)
        f = check_positive(self.name, "fairness_knob", fairness_knob, zero=True)
        if not f < 1.0:
            raise ConfigError(f"policy {self.name}: fairness_knob must be in [0, 1), got {fairness_knob!r}")
        self.fairness_knob = f
        self._reset(None)

    def params(self) -> dict:
        return {**super().params(), "lease_s": self.lease_s, "fairness_knob": self.fairness_knob}

    def _reset(self, state: SchedState | None) -> None:
        n = 0 if state is None else len(state.jobs)
        self._jobs = None if state is None else state.jobs
        self._now = -np.inf
        self.lease_end = np.full(n, -np.inf)     # per job id: when its lease expires
        self.seen = np.zeros(n, bool)
        self.auctions = 0
        self._thr_cache = ThroughputCache()
        self._type_capacity = TypeCapacity()

    # -- entry point -------------------------------------------------------------------
    def schedule(self, state: SchedState) -> Plan:
        if self._jobs is not state.jobs or state.now < self._now:
            self._reset(state)
        self._now = now = state.now
        ids, thr = state.active, self._thr_cache.get(state)
        new = ~self.seen[ids]
        if new.any():
            validate_runnable(self.name, state, thr, new)
            self.seen[ids[new]] = True
        c = state.cluster
        lease_end = self.lease_end[ids]
        held, free, rank, rho_none, rho_type = contenders(
            state.running, lease_end, now, thr, state.demand, self._type_capacity(c),
            state.jobs.work[ids], now - state.jobs.arrival[ids], state.remaining, self.lease_s,
            state.pl_indptr, state.pl_nodes, state.pl_counts, c.node_type)
        k = 0
        log_none, log_type = rho_none, rho_type
        if rank.size:                                 # an auction
            k = max(1, math.ceil((1.0 - self.fairness_knob) * ids.size - 1e-9))
            with np.errstate(divide="ignore", invalid="ignore"):
                log_none, log_type = np.log(rho_none), np.log(rho_type)
            self.auctions += 1
        indptr, nodes, counts, wake = decide_and_place(
            rank, k, log_none, log_type, thr, state.demand, free, self.lease_s, held,
            state.pl_indptr, state.pl_nodes, state.pl_counts, c.node_type, c.node_gpus, lease_end, now)
        self.lease_end[ids] = lease_end
        return Plan(indptr, nodes, counts, wakeup=None if np.isnan(wake) else float(wake))
