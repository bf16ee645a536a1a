"""Gavel's round mechanism with space sharing (packing): job combinations instead of jobs.

Gavel's policies whose name holds "Packing" (``scheduler.py`` with ``_job_packing``; its
Gandiva port is one) schedule *job combinations*: a job alone, or two jobs of the same scale
factor that share the same GPUs, each at its measured co-located rate (the throughput table's
pairs, ``TableThroughput.pair_rates``).  Everything :mod:`sim.policies.gavel_rounds` keys by
job is keyed here by combination, as in Gavel:

* **Combinations.**  A job joining the job set brings its single entry and one pair with every
  job of the same scale factor already in the set (Gavel's ``add_job`` /
  ``_populate_job_combination_metadata``), in that order; a job leaving takes its single and
  all its pairs with it (``_remove_job``).  The order of the entries is Gavel's priority-dict
  order, which breaks ties in the per-type sort.
* **Time received** per combination and type: a single starts at half a round (Gavel's initial
  time), a pair at 0 (Gavel's ``_job_time_so_far[pair] = 0.0``); a reset puts every entry at
  half a round and the type's total at (entries) x half a round.  A combination dispatched in a
  round is credited its finish -- the later of its jobs' micro-tasks -- minus Gavel's round
  start, once, also when one of its jobs finished in it.
* **Deficits and allocation** per combination (the allocation covers every entry, zero for
  the combinations the policy did not choose); priorities ``X / fraction``, ``X * 1e9`` while
  the type's total is 0, 0 where a member's throughput is 0 or the entry has no allocation.
* **Selection**: types in the cluster's order (Gavel does not shuffle "Packing" policies),
  each type's entries by (priority, deficit, allocation) descending, stable in entry order; an
  entry is taken if none of its jobs is taken yet, every member's throughput there is > 0 and
  its scale factor fits in the type's GPUs left.  Zero-priority entries are taken too, on
  GPUs left over (Gavel skips them for FIFO only).
* **Placement**: per type, largest scale factor first; a combination that ran on this type
  last round keeps its GPUs if they are still free (lease extension), the others take free GPUs
  walking the type's servers with one pointer; an entry that has no allocation yet is not
  placed.  The two jobs of a pair get the same GPUs as shared placements (``Plan.shared``).
* **Micro-tasks**: each job of a combination runs ``min(int(rate * round), remaining)``
  iterations at its rate there (a pair's: the co-located one); the combination's micro-task ends
  when the later of them stops, and each of its jobs is recorded as ending then (Gavel's
  ``_per_job_latest_timestamps``): a job that finishes in a pair runs at the rate that ends its
  last iteration at the pair's end.  Jobs that go on run to the round's end at the rate that
  does exactly their iterations (``Plan.rate_scale``, as in gavel_rounds).

The per-round work is O(entries), i.e. O(jobs^2) with one scale factor, as in Gavel.  Written
in plain Python and numpy but for the greedy pick, which walks every entry of every type's
queue (a Numba kernel: :func:`sim.policies.gavel_kernels.pick_combinations`).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError, SimError
from ..state import Plan, SchedState
from .gavel_kernels import pick_combinations
from .gavel_rounds import RoundClock, plan_from_owners, validate_runnable


class Combination:
    """One job, or two sharing GPUs: its members and per-type member rates; its time
    received, deficit and allocation are row ``row`` of the policy's :class:`EntryTable`."""

    __slots__ = ("jobs", "scale", "rates", "row")

    def __init__(self, jobs: tuple, scale: int, rates: np.ndarray):
        self.jobs = jobs                     # job ids, increasing
        self.scale = scale                   # GPUs (every member's scale factor)
        self.rates = rates                   # [types, members] iterations/s, 0 where none
        self.row = -1


class EntryTable:
    """The combinations' per-type state, one row an entry in the entries' (Gavel's priority
    dict's) order: time received, deficit, allocation and whether the last allocation covered
    the entry, and, fixed, the slowest member's rate, the scale factor and the member job ids
    (-1: a single's second), so that a round reads them without gathering them entry by entry."""

    def __init__(self, m: int):
        self.time, self.deficit, self.alloc = np.zeros((0, m)), np.zeros((0, m)), np.zeros((0, m))
        self.in_alloc = np.zeros(0, bool)
        self.low, self.scale, self.members = np.zeros((0, m)), np.zeros(0, np.int64), np.zeros((0, 2), np.int64)

    def append(self, added: list[Combination], time0: list[float]) -> None:
        """New entries at the end (rows numbered on), each starting at its ``time0``."""
        if not added:
            return
        m, k = self.time.shape[1], len(added)
        for q, e in enumerate(added):
            e.row = self.time.shape[0] + q
        self.time = np.concatenate([self.time, np.repeat(np.asarray(time0, float)[:, None], m, axis=1)])
        self.deficit = np.concatenate([self.deficit, np.zeros((k, m))])
        self.alloc = np.concatenate([self.alloc, np.zeros((k, m))])
        self.in_alloc = np.concatenate([self.in_alloc, np.zeros(k, bool)])
        self.low = np.concatenate([self.low, np.array([e.rates.min(axis=1) for e in added])])
        self.scale = np.concatenate([self.scale, np.array([e.scale for e in added], np.int64)])
        self.members = np.concatenate([self.members, np.array(
            [e.jobs if len(e.jobs) == 2 else (e.jobs[0], -1) for e in added], np.int64)])

    def keep(self, kept: list[Combination]) -> None:
        """Only the rows of ``kept`` (in order), renumbered."""
        rows = np.array([e.row for e in kept], np.int64)
        for name in ("time", "deficit", "alloc", "in_alloc", "low", "scale", "members"):
            setattr(self, name, getattr(self, name)[rows])
        for q, e in enumerate(kept):
            e.row = q


class GavelPackingRounds(RoundClock):
    """Gavel's rounds over job combinations; subclasses define :meth:`allocation`."""

    def allocation(self, state: SchedState, entries: dict, thr: np.ndarray) -> dict:
        """{key: X row [n_types]} for the combinations this policy runs (the others get 0)."""
        raise NotImplementedError

    # -- per-run memory -------------------------------------------------------------
    def _reset_memory(self, n: int, m: int) -> None:
        self.entries: dict[tuple, Combination] = {}   # Gavel's priority-dict order
        self.table = EntryTable(m)                    # their state, a row each, in that order
        self.members: list[int] = []                  # the job set, in joining order
        self.dispatched: dict[tuple, tuple[int, float]] = {}   # key -> (type, credit)
        self.previous: dict[tuple, tuple[int, tuple, tuple]] = {}  # key -> (type, nodes, counts)
        self.shared_now = np.zeros(n, bool)
        self.pairs_run = 0
        self.pairs_seen: set[tuple] = set()           # pairs that ran, for reports and tests

    def _hold(self, state: SchedState) -> Plan:
        """Inside a round: every placement stays, shared or not."""
        shared = self.shared_now[state.active] & state.running
        return Plan(state.pl_indptr, state.pl_nodes, state.pl_counts, shared=shared)

    def _round(self, state: SchedState) -> Plan:
        now, ids = state.now, state.active
        self._credit_running()
        thr = self._thr_cache.get(state)
        self._join(state, thr)
        if not state.running.any() and not (state.jobs.arrival > now).any():
            self.last_reset = 0.0          # Gavel forces a reset when nothing runs or comes
        self._maybe_reset(state, thr)
        chosen = self._select(state)
        assigned = self._assign(state, chosen)
        self.rounds += 1
        self.shared_now[:] = False
        if not assigned:
            self.round_end = None
            self.previous = {}
            if ids.size and not (state.jobs.arrival > now).any():
                raise SimError(f"policy {self.name}: no active job can be scheduled at t={now} "
                               f"(first: job {int(ids[0])}) and no job is left to arrive")
            return Plan(np.zeros(ids.size + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
        return self._plan(state, thr, assigned)

    # -- time received -----------------------------------------------------------------
    def _credit_finished(self, state: SchedState) -> None:
        """Combinations dispatched this round with a job that finished: their time (to now,
        from Gavel's round start) counts for their type, once; the finished jobs leave."""
        active = set(state.active.tolist())
        for key in [k for k in self.dispatched if not all(j in active for j in k)]:
            t, _ = self.dispatched.pop(key)
            self.worker_time[t] += state.now - self.credit_start
        gone = [j for j in self.members if j not in active]
        if gone:
            self._leave(gone)

    def _credit_running(self) -> None:
        for key, (t, credit) in self.dispatched.items():
            entry = self.entries.get(key)
            if entry is not None:
                self.table.time[entry.row, t] += credit
                self.worker_time[t] += credit
        self.dispatched = {}

    def _leave(self, gone: list[int]) -> None:
        out = set(gone)
        self.members = [j for j in self.members if j not in out]
        self.entries = {k: e for k, e in self.entries.items() if not out.intersection(k)}
        self.table.keep(list(self.entries.values()))
        self.need_update = True

    # -- the job set -------------------------------------------------------------------
    def _join(self, state: SchedState, thr: np.ndarray) -> None:
        known = set(self.members)
        new = np.array([j not in known for j in state.active.tolist()], bool)
        if not new.any():
            return
        validate_runnable(self.name, state, thr, new)
        half = self.time_per_round_s / 2.0
        added, time0 = [], []
        for i in np.flatnonzero(new):
            j = int(state.active[i])
            scale = int(state.demand[i])
            self.entries[(j,)] = e = Combination((j,), scale, thr[i][:, None].copy())
            added.append(e)
            time0.append(half)
            for other in self.members:
                if self.entries[(other,)].scale == scale:
                    key = (min(j, other), max(j, other))
                    self.entries[key] = e = Combination(key, scale, self._pair_rates(state, key, scale))
                    added.append(e)
                    time0.append(0.0)
            self.members.append(j)
        self.table.append(added, time0)
        self.need_update = True

    def _pair_rates(self, state: SchedState, key: tuple, scale: int) -> np.ndarray:
        """[types, 2] co-located rates of the pair's jobs, 0 where the table has none."""
        oracle = state.oracle
        if getattr(oracle, "pair_rates", None) is None:
            raise ConfigError(f"policy {self.name}: space sharing needs a throughput table with "
                              "co-location pairs (TableThroughput.pair_rates)")
        model = state.jobs.model
        rates = oracle.pair_rates(int(model[key[0]]), int(model[key[1]]), scale,
                                  state.cluster.gpu_types)[0]
        return np.where(np.isfinite(rates) & (rates > 0), rates, 0.0)   # not measured: cannot pair

    def _maybe_reset(self, state: SchedState, thr: np.ndarray) -> None:
        now = state.now
        due = now - self.last_reset >= self.reset_interval_s or self.last_reset == 0.0
        if not (self.need_update and due):
            return
        elapsed = now - self.last_reset
        half = self.time_per_round_s / 2.0
        tb = self.table
        tb.deficit += np.where(tb.in_alloc[:, None], tb.alloc * elapsed, 0.0) - (tb.time - half)
        tb.time[:] = half
        tb.in_alloc[:] = False
        self.worker_time[:] = len(self.entries) * half
        self.last_reset = now
        if self.entries:
            x = self.allocation(state, self.entries, thr)
            tb.alloc[:] = 0.0
            for key, row in x.items():
                e = self.entries.get(key)
                if e is not None:
                    tb.alloc[e.row] = np.asarray(row, float)
            tb.in_alloc[:] = True
        self.need_update = False
        self.resets += 1

    # -- selection and placement -------------------------------------------------------
    def _priorities(self, time: np.ndarray, alloc: np.ndarray, runs: np.ndarray,
                    t: int) -> np.ndarray:
        """Gavel's priorities on type t: X / fraction, X * 1e9 while the fraction is 0, 0 where
        X is 0 or a member cannot run (``runs`` False)."""
        total = self.worker_time[t]
        fraction = time / total if total != 0.0 else np.zeros(time.shape[0])
        prio = np.where(fraction > 0, alloc / np.where(fraction > 0, fraction, 1.0), alloc * 1e9)
        return np.where(runs & (alloc != 0), prio, 0.0)

    def _select(self, state: SchedState) -> list[tuple[tuple, int]]:
        """Gavel's greedy pick: (key, type) of each combination to run this round."""
        c = state.cluster
        if not self.entries:
            return []
        tb = self.table
        time, deficit, in_alloc, low = tb.time, tb.deficit, tb.in_alloc, tb.low
        alloc = np.where(in_alloc[:, None], tb.alloc, 0.0)
        m = len(c.gpu_types)
        queues = np.empty((m, len(self.entries)), np.int64)
        for t in range(m):
            prio = self._priorities(time[:, t], alloc[:, t], in_alloc & (low[:, t] != 0), t)
            queues[t] = np.lexsort((-alloc[:, t], -deficit[:, t], -prio))
        picked, types = pick_combinations(queues, low, tb.scale, tb.members, c.gpus_per_type(),
                                          len(state.jobs))
        keys = list(self.entries)
        return [(keys[i], t) for i, t in zip(picked.tolist(), types.tolist())]

    def _assign(self, state: SchedState, chosen) -> list[tuple[tuple, int, list]]:
        """Servers for the chosen combinations, type by type, largest first, lease extension
        before the strided walk: [(key, type, [(node, count), ...])]."""
        c = state.cluster
        used = np.zeros(c.n_nodes, np.int64)
        out = []
        for t in range(len(c.gpu_types)):
            mine = sorted([k for k, tt in chosen if tt == t], key=lambda k: -self.entries[k].scale)
            servers = np.flatnonzero(c.node_type == t)
            ptr = 0
            for scale in sorted({self.entries[k].scale for k in mine}, reverse=True):
                batch = [k for k in mine if self.entries[k].scale == scale]
                kept = set()
                for k in batch:
                    prev = self.previous.get(k)
                    if prev is not None and prev[0] == t and all(
                            used[n] + q <= c.node_gpus[n] for n, q in zip(prev[1], prev[2])):
                        for n, q in zip(prev[1], prev[2]):
                            used[n] += q
                        kept.add(k)
                        self.lease_extensions += 1
                        out.append((k, t, list(zip(prev[1], prev[2]))))
                for k in batch:
                    if k in kept or not self.table.in_alloc[self.entries[k].row]:
                        continue
                    need, where = scale, []
                    while need and ptr < servers.size:
                        n = int(servers[ptr])
                        q = min(need, int(c.node_gpus[n] - used[n]))
                        if q:
                            used[n] += q
                            need -= q
                            where.append((n, q))
                        if used[n] == c.node_gpus[n]:
                            ptr += 1
                    if need:
                        raise SimError(f"policy {self.name}: could not assign GPUs to jobs {k} "
                                       f"at t={state.now}")
                    out.append((k, t, where))
        return out

    # -- micro-tasks and the plan ------------------------------------------------------
    def _plan(self, state: SchedState, thr: np.ndarray, assigned) -> Plan:
        now, ids = state.now, state.active
        pos = {int(j): i for i, j in enumerate(ids.tolist())}
        T = self.time_per_round_s
        self.overran[ids[self.to_finish[ids]]] = True
        self.to_finish[:] = False
        plans = []                              # (key, type, where, fin, [(i, steps, rate, ends)])
        for key, t, where in assigned:
            e = self.entries[key]
            tasks, fin = [], now
            for m, j in enumerate(key):
                i = pos[j]
                rate = float(e.rates[t, m])
                full = np.floor(rate * T)
                full = full if full > 0 else rate * T
                rem = state.remaining[i] if state.learning is None else np.nan
                ends = bool(rem <= full) and not self.overran[j]
                steps = rem if ends else full
                fin = max(fin, now + steps / rate)
                tasks.append((i, steps, rate, ends))
            plans.append((key, t, where, fin, tasks))
        self.credit_start = 0.0 if self.last_round_end is None else self.last_round_end
        self.round_end = self.last_round_end = max(p[3] for p in plans)
        owner, nodes, counts = [], [], []
        scale = np.ones(ids.size)
        self.previous = {}
        for key, t, where, fin, tasks in plans:
            self.dispatched[key] = (t, fin - self.credit_start)
            self.previous[key] = (t, tuple(n for n, _ in where), tuple(q for _, q in where))
            if len(key) == 2:
                self.pairs_run += 1
                self.pairs_seen.add(key)
            for i, steps, rate, ends in tasks:
                j = int(ids[i])
                self.to_finish[j] = ends
                self.shared_now[j] = len(key) == 2
                if ends and now + steps / rate == fin:   # the last to stop: its own rate
                    scale[i] = rate / thr[i, t]
                else:                   # stops with its pair (ends) or at the round's end
                    scale[i] = steps / (thr[i, t] * ((fin if ends else self.round_end) - now))
                for n, q in where:
                    owner.append(i)
                    nodes.append(n)
                    counts.append(q)
        plan = plan_from_owners(ids.size, np.array(owner, np.int64), np.array(nodes, np.int32),
                                np.array(counts, np.int32))
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup=self.round_end, rate_scale=scale,
                    shared=self.shared_now[ids].copy())
