"""Gavel's round mechanism decided inside the C event kernel (csrc/sk_gavel.c).

A Gavel round policy (:class:`sim.policies.gavel_rounds.GavelRounds`) does the same
procedure every round between two allocation resets; ``sk_gavel_run`` runs those rounds, and
the event loop between them, in C, on the policy's own arrays, and returns to Python only for
what Python does: a reset (the allocation LP, :meth:`GavelRounds._maybe_reset`), more
shuffled type orders for the agnostic policies, full record buffers, errors, the end.  Its
runs are the Python path's job for job (tests/test_gavel_native.py);
``EngineConfig(native=False)`` forces the Python path.

Eligible runs: the policy says ``native_rounds``, the engine's rates are a throughput
table's (:class:`sim.throughput.TableThroughput`: a placement's rate is the table's at the
job's request, on one server or on several, times the slowest server's speed), no learning
world, hidden server truth, policy rate model, defragmentation or progress bar, at most
:data:`MAX_TYPES` GPU types, no method of the round procedure (:data:`MECHANISM`) overridden
by a subclass or replaced on the policy object (a wrapper expects to be called), and the
engine checked every job up front (``JobSpecs.type_rates``).  A decision's recorded seconds
include the Python reset it waited for.
"""
from __future__ import annotations

import time

import numpy as np

from ._native import DecisionRecords, ffi, lib, pointer as _ptr
from .errors import SimError
from .state import type_throughput_rows
from .throughput import TableThroughput

#: the policy's per-job arrays the kernel reads and updates in place
POLICY_ARRAYS = ("member", "time_so_far", "deficit", "alloc", "in_alloc", "ran_on", "credit",
                 "to_finish", "overran", "worker_time")
#: GavelRounds' methods that the kernel does in C: a policy that overrides one runs in Python
MECHANISM = ("schedule", "_round", "_plan", "_micro_tasks", "_credit_finished", "note_completed",
             "_credit_running", "_join", "_hold", "hold_until", "between_rounds", "_type_order",
             "_throughputs")
#: GPU types the kernel takes (type masks in 64-bit words)
MAX_TYPES = 62
#: the clock of the Python time a pending decision waits for
_clock = time.perf_counter
#: decision points recorded per return to Python
RECORD_ROWS = 1 << 14
#: shuffled type orders handed to the kernel at a time
ORDERS_AHEAD = 1 << 12


def eligible(run) -> bool:
    """Whether engine run ``run`` (sim.engine._Run) can decide its rounds in C."""
    p = run.policy
    return (run.config.native and run.quiet and bool(getattr(p, "native_rounds", False))
            and run.world is None and run.truth is None and run.rate_model is None
            and not run.defragment and not run.config.progress
            and run.jobs.type_rates is not None and type(run.rates_from) is TableThroughput
            and len(run.jobs) > 0 and len(run.cluster.gpu_types) <= MAX_TYPES
            and eligible_policy(p))


def eligible_policy(policy) -> bool:
    """Whether the policy runs GavelRounds' own round procedure, which the kernel ports: no
    method of it overridden by a subclass or on the object (a wrapper expects to be called)."""
    from .policies.gavel_rounds import GavelRounds
    return isinstance(policy, GavelRounds) and all(
        name not in vars(policy) and getattr(type(policy), name) is getattr(GavelRounds, name)
        for name in MECHANISM)


class NativeRounds:
    """Drives ``sk_gavel_run`` for one engine run (sim.engine._Run), from its first decision
    point; collects the decision records.  rates: float64 [n_jobs, n_types, 2], each job's
    rate on each type at its request and speed 1, on one server ([..., 0]) and on several
    ([..., 1]) (sim.engine.type_rate_table); stall_limit: idle decisions in a row that stop
    the run (sim.engine.STALL_DECISIONS)."""

    def __init__(self, run, state, rates: np.ndarray, stall_limit: int):
        self.run_, self.policy = run, run.policy
        self.stall_limit = stall_limit
        self.name = run.policy.name
        self._orders = None
        self.policy._reset(state)
        self._arrays: dict[str, np.ndarray] = {}   # the policy's arrays the kernel points at
        self.g = self._install(rates)
        self.work = self._work()
        self._records = DecisionRecords(RECORD_ROWS)

    # -- set-up --------------------------------------------------------------------------
    def _install(self, rates: np.ndarray):
        run, p = self.run_, self.policy
        c, jobs = run.cluster, run.jobs
        n, m = len(jobs), len(c.gpu_types)
        thr = np.ascontiguousarray(type_throughput_rows(run.oracle, jobs, np.arange(n), c.gpu_types))
        keep = [np.ascontiguousarray(jobs.demand, np.int32), thr, np.ascontiguousarray(rates, float),
                np.ascontiguousarray(c.node_type, np.int32), np.ascontiguousarray(c.node_gpus, np.int32),
                np.ascontiguousarray(c.node_speed, float), np.ascontiguousarray(run.fgd_flat, float),
                np.ascontiguousarray(run.fgd_base, np.int64)]
        self._keep = keep                          # alive while the kernel reads them
        g = ffi.new("sk_gavel *")
        g.n_jobs, g.n_types, g.n_nodes = n, m, c.n_nodes
        (g.demand, g.thr, g.rate, g.node_type, g.node_gpus, g.node_speed, g.fgd_weights,
         g.fgd_base) = (_ptr(a) for a in keep)
        g.round_s, g.reset_interval_s = p.time_per_round_s, p.reset_interval_s
        g.round_period = float(run.round_s)
        g.skip_zero_priority = int(p.skip_zero_priority)
        g.stall_limit = self.stall_limit
        self._point_policy_arrays(g)
        g.scale_applied, g.used_types = _ptr(run.scale_applied), _ptr(run.used_types)
        g.orders, g.n_orders, g.next_order = ffi.NULL, 0, 0
        if p.shuffle_types:
            self._more_orders(g)
        g.phase = 0
        g.idle_decisions, g.stall_since, g.skipped = run.idle_decisions, run.stall_since, 0
        self._to_c(g)
        return g

    def _point_policy_arrays(self, g) -> None:
        """Point the kernel at the policy's per-job arrays themselves (it updates them in
        place), again after a reset that replaced one."""
        p = self.policy
        for key in POLICY_ARRAYS:
            array = getattr(p, key)
            if not array.flags["C_CONTIGUOUS"] or not array.flags["WRITEABLE"]:
                raise SimError(f"policy {self.name}: its per-job arrays must be contiguous and "
                               f"writable ({key} is not)")
            setattr(g, key, _ptr(array))
            self._arrays[key] = array

    def _work(self):
        out = ffi.new("sk_gavel_work **")
        k = self.run_.kernel
        k._check(lib.sk_gavel_work_new(out, k.ptr, self.g), "sk_gavel_work_new")
        return ffi.gc(out[0], lib.sk_gavel_work_free)

    def _more_orders(self, g) -> None:
        m = int(g.n_types)
        self._orders = np.array([self.policy._type_order(m) for _ in range(ORDERS_AHEAD)], np.int64)
        g.orders, g.n_orders, g.next_order = _ptr(self._orders), ORDERS_AHEAD, 0

    # -- the policy's scalars ------------------------------------------------------------
    def _to_c(self, g) -> None:
        p = self.policy
        g.now_seen, g.last_reset, g.need_update = p._now, p.last_reset, int(p.need_update)
        g.round_end = np.nan if p.round_end is None else p.round_end
        g.credit_start = p.credit_start
        g.last_round_end = np.nan if p.last_round_end is None else p.last_round_end
        g.rounds, g.lease_extensions = p.rounds, p.lease_extensions

    def _from_c(self, g) -> None:
        p = self.policy
        p._now, p.last_reset, p.need_update = g.now_seen, g.last_reset, bool(g.need_update)
        p.round_end = None if np.isnan(g.round_end) else g.round_end
        p.credit_start = g.credit_start
        p.last_round_end = None if np.isnan(g.last_round_end) else g.last_round_end
        p.rounds, p.lease_extensions = g.rounds, g.lease_extensions

    # -- the run -------------------------------------------------------------------------
    def run(self) -> None:
        run, g = self.run_, self.g
        k = run.kernel
        while True:
            rc = lib.sk_gavel_run(k.ptr, k.batch, g, self.work, self._records.struct)
            self._from_c(g)
            if rc not in (lib.SK_GAVEL_NEED_ALLOCATION, lib.SK_GAVEL_NEED_ORDERS):
                self._records.drain()
            k._check(rc, "sk_gavel_run")
            if rc == lib.SK_DONE:
                return
            if rc == lib.SK_GAVEL_FAILED:
                raise self._failure()
            t0 = _clock()
            if rc == lib.SK_GAVEL_NEED_ALLOCATION:
                self._reset()
                if any(getattr(self.policy, key) is not array for key, array in self._arrays.items()):
                    self._point_policy_arrays(g)
            elif rc == lib.SK_GAVEL_NEED_ORDERS:
                self._more_orders(g)
            self._to_c(g)
            g.paused_seconds += _clock() - t0      # the pending decision's time

    def _reset(self) -> None:
        """The reset the kernel found due: the policy's own code, on its arrays."""
        run = self.run_
        state = run.kernel.snapshot(run.cluster, run.jobs, run.queued_view, run.oracle,
                                    run.config.type_choice, int(run.config.type_seed),
                                    run.first_start_delay)
        self.policy._maybe_reset(state, self.policy._throughputs(state))

    def _failure(self) -> SimError:
        """The Python path's error for the kernel's failure."""
        g, c = self.g, self.run_.cluster
        now, j, count = self.run_.kernel.batch.now, int(g.failure_job), int(g.failure_count)
        if g.failure == lib.SK_GAVEL_NO_SCHEDULABLE:
            return SimError(f"policy {self.name}: no active job can be scheduled at t={now} "
                            f"(first: job {j}) and no job is left to arrive")
        if g.failure == lib.SK_GAVEL_CANNOT_ASSIGN:
            return SimError(f"policy {self.name}: could not assign {count} GPUs to job {j}")
        if g.failure == lib.SK_GAVEL_ZERO_RATE:
            types = [t for b, t in enumerate(c.gpu_types) if (int(g.failure_mask) >> b) & 1]
            return SimError(f"policy {self.name} placed job {j} at t={now} on GPU types "
                            f"{'|'.join(types)} where its throughput is 0 (the model cannot run there)")
        if g.failure == lib.SK_GAVEL_IDLE_QUEUED:
            return SimError(f"policy {self.name} left {count} jobs queued on an idle cluster at "
                            f"t={now} with nothing left to happen")
        return SimError(f"policy {self.name} left {count} jobs queued on an idle cluster for "
                        f"{self.stall_limit:,} decisions (t={g.stall_since:g} to {now:g} s) with "
                        f"every job arrived: its rounds or wakeups come, but it places nothing")

    # -- results -------------------------------------------------------------------------
    def records(self) -> dict[str, np.ndarray]:
        return self._records.records()
