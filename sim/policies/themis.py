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
from .gavel_lp import isolated_allocation
from .gavel_rounds import ThroughputCache, check_positive, plan_from_owners, validate_runnable

#: Themis' lease length (s) and fairness knob f (algorithms.md §5.4: ~10 min leases, f = 0.8)
LEASE_S = 600.0
FAIRNESS_KNOB = 0.8


def greedy_auction(gain: np.ndarray, demand: np.ndarray, free: np.ndarray,
                   skip: int = -1) -> np.ndarray:
    """The type each participant wins (-1: none), bids taken by gain (largest first) while
    the type has room; row ``skip`` does not take part.  ``gain`` [p, m] (NaN/<= 0: no bid)."""
    p, m = gain.shape
    won = np.full(p, -1, np.int64)
    left = free.astype(np.int64).copy()
    g = np.where(np.isfinite(gain) & (gain > 0), gain, -np.inf)
    if 0 <= skip < p:
        g[skip] = -np.inf
    flat = np.argsort(-g, axis=None, kind="stable")
    flat = flat[np.isfinite(g.ravel()[flat])]
    for k in flat:
        i, t = divmod(int(k), m)
        if won[i] < 0 and demand[i] <= left[t]:
            won[i] = t
            left[t] -= demand[i]
            if not left.any():
                break
    return won


def partial_fractions(gain: np.ndarray, demand: np.ndarray, free: np.ndarray,
                      won: np.ndarray) -> np.ndarray:
    """Each winner's share ``c_i`` of the partial-allocation mechanism (1 for losers):
    ``exp(sum_{j != i} gain_j(with i) - sum_{j != i} gain_j(without i))``."""
    rows = np.arange(won.size)
    got = np.where(won >= 0, gain[rows, np.maximum(won, 0)], 0.0)
    frac = np.ones(won.size)
    for i in np.flatnonzero(won >= 0):
        alt = greedy_auction(gain, demand, free, skip=int(i))
        alt_got = np.where(alt >= 0, gain[rows, np.maximum(alt, 0)], 0.0)
        frac[i] = math.exp(min(0.0, (got.sum() - got[i]) - alt_got.sum()))
    return frac


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
        held = state.running & (self.lease_end[ids] > now * (1 + 1e-12))
        free = self._free_per_type(state, held)
        chosen, lease = self._decide(state, thr, held, free)
        owner, nodes, counts = self._place(state, held, chosen)
        placed = chosen >= 0
        self.lease_end[ids[placed]] = now + lease[placed]
        self.lease_end[ids[~placed & ~held]] = -np.inf
        plan = plan_from_owners(ids.size, owner, nodes, counts)
        running = held | placed
        wake = float(self.lease_end[ids[running]].min()) if running.any() else None
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup=wake)

    # -- the decision ------------------------------------------------------------------
    def _rhos(self, state: SchedState, thr: np.ndarray):
        """(rho now, rho without GPUs, rho on each type [n, m]) of the active jobs."""
        ids, c = state.active, state.cluster
        cap = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types))
        y_iso = np.sum(thr * isolated_allocation(state.demand.astype(float), cap), axis=1)
        t_id = state.jobs.work[ids] / y_iso
        since = state.now - state.jobs.arrival[ids]
        rem = np.maximum(state.remaining, 0.0)
        with np.errstate(divide="ignore"):
            on_type = (since[:, None] + rem[:, None] / thr) / t_id[:, None]
        now = (since + rem / y_iso) / t_id
        none = (since + self.lease_s + rem / y_iso) / t_id
        return now, none, on_type

    def _decide(self, state: SchedState, thr: np.ndarray, held: np.ndarray, free: np.ndarray):
        """(type each active job starts a lease on, -1 none; the lease lengths)."""
        n = state.active.size
        chosen = np.full(n, -1, np.int64)
        lease = np.full(n, self.lease_s)
        cont = np.flatnonzero(~held)
        if cont.size == 0 or not free.any():
            return chosen, lease
        rho_now, rho_none, rho_type = self._rhos(state, thr)
        rank = cont[np.lexsort((cont, -rho_now[cont]))]            # worst first, ties by id
        k = max(1, math.ceil((1.0 - self.fairness_knob) * n - 1e-9))
        part = rank[:k]
        demand = state.demand.astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.log(rho_none[part])[:, None] - np.log(rho_type[part])
        gain[(thr[part] <= 0)] = np.nan
        won = greedy_auction(gain, demand[part], free)
        lease[part] = self.lease_s * partial_fractions(gain, demand[part], free, won)
        chosen[part] = won
        self.auctions += 1
        left = free - np.bincount(won[won >= 0], weights=demand[part][won >= 0],
                                  minlength=free.size).astype(np.int64)
        rest = np.r_[rank[k:], part[won < 0]]
        self._leftovers(rest, thr, demand, left, chosen)
        return chosen, lease

    @staticmethod
    def _leftovers(rest, thr, demand, left, chosen) -> None:
        """Work-conserving: each job of ``rest`` in turn takes its fastest type with room."""
        for i in rest:
            if not left.any():
                return
            fits = (thr[i] > 0) & (left >= demand[i])
            if fits.any():
                t = int(np.argmax(np.where(fits, thr[i], -1.0)))
                chosen[i] = t
                left[t] -= demand[i]

    # -- GPUs --------------------------------------------------------------------------
    @staticmethod
    def _free_per_type(state: SchedState, held: np.ndarray) -> np.ndarray:
        c = state.cluster
        cap = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types))
        lens = np.diff(state.pl_indptr)
        mine = np.repeat(held, lens)
        used = np.bincount(c.node_type[state.pl_nodes[mine]], weights=state.pl_counts[mine],
                           minlength=len(c.gpu_types))
        return (cap - used).astype(np.int64)

    def _place(self, state: SchedState, held: np.ndarray, chosen: np.ndarray):
        """(owner, nodes, counts): held jobs keep their GPUs; a job that won the type it ran
        on keeps its GPUs if they are free; others take the fullest free servers first."""
        c = state.cluster
        lens = np.diff(state.pl_indptr)
        job_of = np.repeat(np.arange(lens.size), lens)
        free = c.node_gpus.astype(np.int64).copy()
        keep = held[job_of]
        np.subtract.at(free, state.pl_nodes[keep], state.pl_counts[keep])
        owner = [job_of[keep]]
        nodes = [state.pl_nodes[keep]]
        counts = [state.pl_counts[keep]]
        for i in np.flatnonzero(chosen >= 0):
            pn = state.pl_nodes[state.pl_indptr[i]:state.pl_indptr[i + 1]]
            pc = state.pl_counts[state.pl_indptr[i]:state.pl_indptr[i + 1]]
            if pn.size and np.all(c.node_type[pn] == chosen[i]) and np.all(free[pn] >= pc):
                take_n, take_c = pn, pc
            else:
                take_n, take_c = _fullest_first(free, c.node_type, int(chosen[i]),
                                                 int(state.demand[i]))
            free[take_n] -= take_c
            owner.append(np.full(take_n.size, i))
            nodes.append(take_n)
            counts.append(take_c)
        return (np.concatenate(owner).astype(np.int64), np.concatenate(nodes).astype(np.int32),
                np.concatenate(counts).astype(np.int32))


def _fullest_first(free: np.ndarray, node_type: np.ndarray, t: int, need: int):
    """``need`` GPUs of type ``t`` from the servers with the most free GPUs first (returned
    in node order, as a plan lists them)."""
    cand = np.flatnonzero((node_type == t) & (free > 0))
    cand = cand[np.argsort(-free[cand], kind="stable")]
    take = np.minimum(free[cand], np.maximum(need - np.r_[0, np.cumsum(free[cand])[:-1]], 0))
    sel = np.flatnonzero(take > 0)
    sel = sel[np.argsort(cand[sel])]
    return cand[sel], take[sel]
