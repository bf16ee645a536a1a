"""Gavel's rounds decided in C (sim.native_rounds, csrc/sk_gavel.c) against the Python path
(``EngineConfig(native=False)``: sim.policies.gavel_rounds and its Numba kernels, the
plain-Python reference of every piece): the same runs, job for job and point for point."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import native_rounds
from sim.cluster import cluster_from_groups
from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs, simulate
from sim.errors import SimError
from sim.policies import get_policy, list_policies
from sim.policies.gavel import GavelFifoPerf, GavelMaxMinFairnessPerf
from sim.presets import load_cluster
from sim.throughput import TableThroughput
from sim.workload import generate_workload

#: every Gavel policy run by the round mechanism (gandiva packs: its own mechanism)
ROUNDS = sorted(p for p in list_policies() if p.startswith("gavel-") and p != "gavel-gandiva")
ORACLE = TableThroughput.builtin()


def _one_gpu_servers(v: int, p: int, k: int):
    return cluster_from_groups("gavel-1gpu", [
        {"count": n, "gpus": 1, "type": t, "name_prefix": f"{t}-"}
        for n, t in ((v, "v100"), (p, "p100"), (k, "k80")) if n])


def _pair(cluster, jobs, name, restart_delay_s=0.0, **params):
    """(native run, Python run) of one policy."""
    runs = []
    for native in (True, False):
        config = EngineConfig(restart_delay_s=restart_delay_s, native=native)
        pol = get_policy(name, **params)
        runs.append((simulate(cluster, jobs, pol, ORACLE, config), pol))
    return runs


def _same(native, python):
    (a, pa), (b, pb) = native, python
    assert a.profile["native"] and not b.profile["native"]
    np.testing.assert_array_equal(a.finish, b.finish)
    np.testing.assert_array_equal(a.first_start, b.first_start)
    np.testing.assert_array_equal(a.restarts, b.restarts)
    np.testing.assert_array_equal(a.gpu_seconds, b.gpu_seconds)
    np.testing.assert_array_equal(a.gpu_types_used, b.gpu_types_used)
    for x, y in zip(a.timeline.arrays().values(), b.timeline.arrays().values()):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(a.fragmentation["fgd"], b.fragmentation["fgd"], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a.fragmentation["idle_gpus_while_waiting"],
                                  b.fragmentation["idle_gpus_while_waiting"])
    assert (a.decisions, a.skipped_decisions) == (b.decisions, b.skipped_decisions)
    for key in ("rounds", "resets", "lease_extensions", "last_reset", "round_end", "credit_start"):
        assert getattr(pa, key) == getattr(pb, key), key
    for key in ("time_so_far", "deficit", "alloc", "worker_time", "credit", "ran_on", "member"):
        np.testing.assert_array_equal(getattr(pa, key), getattr(pb, key), err_msg=key)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40),
       load=st.sampled_from([2.0, 8.0, 30.0, 120.0]), name=st.sampled_from(ROUNDS),
       cluster=st.sampled_from(["gavel-108", "1gpu"]), delay=st.sampled_from([0.0, None]))
def test_native_rounds_are_the_python_rounds(seed, n, load, name, cluster, delay):
    # gavel-108 (4 GPUs a server: jobs span servers, the table's spread rates) and one-GPU
    # servers (Gavel's simulator setting), with and without restart delays
    c = load_cluster("gavel-108") if cluster == "gavel-108" else _one_gpu_servers(8, 8, 8)
    jobs = generate_workload(n, load_jobs_per_hour=load, seed=seed, throughput=ORACLE)
    _same(*_pair(c, jobs, name, restart_delay_s=delay))


@pytest.mark.parametrize("name", ["gavel-max-min-fairness", "gavel-fifo", "gavel-isolated"])
def test_small_buffers_and_few_orders_change_nothing(monkeypatch, name):
    # records drained every row or three, shuffled type orders handed over one at a time:
    # every return to Python resumes where the kernel stopped
    c = load_cluster("gavel-108")
    jobs = generate_workload(30, load_jobs_per_hour=20.0, seed=3, throughput=ORACLE)
    want = _pair(c, jobs, name)[1]
    for rows, orders in ((1, 1), (3, 2)):
        monkeypatch.setattr(native_rounds, "RECORD_ROWS", rows)
        monkeypatch.setattr(native_rounds, "ORDERS_AHEAD", orders)
        pol = get_policy(name)
        got = simulate(c, jobs, pol, ORACLE, EngineConfig(restart_delay_s=0.0))
        _same((got, pol), want)


def test_the_python_path_runs_where_the_kernel_cannot():
    c = load_cluster("gavel-108")
    jobs = generate_workload(6, load_jobs_per_hour=8.0, seed=0, throughput=ORACLE)
    config = EngineConfig(restart_delay_s=0.0)
    assert simulate(c, jobs, get_policy("gavel-fifo-perf"), ORACLE, config).profile["native"]
    # a replaced schedule expects to be called
    pol = get_policy("gavel-fifo-perf")
    calls = []
    decide = pol.schedule
    pol.schedule = lambda state: calls.append(state.now) or decide(state)
    res = simulate(c, jobs, pol, ORACLE, config)
    assert calls and len(calls) == res.decisions and not res.profile["native"]
    # rates that are not a throughput table's
    res = run_jobs(small_cluster(), specs([0.0, 5.0], [2, 1], [100.0, 50.0]),
                   get_policy("gavel-max-min-fairness-perf"), LinearOracle(), config)
    assert np.all(np.isfinite(res.finish)) and not res.profile["native"]


class _NoAllocationFifo(GavelFifoPerf):
    """FIFO that allocates nothing: no job is ever placed."""
    name = "gavel-fifo-perf-test-none"

    def allocation(self, state, thr):
        return np.zeros_like(thr)


def test_nothing_schedulable_stops_both_paths_alike():
    c = load_cluster("gavel-108")
    jobs = generate_workload(3, load_jobs_per_hour=8.0, seed=0, throughput=ORACLE)
    messages = []
    for native in (True, False):
        with pytest.raises(SimError, match="no active job can be scheduled") as err:
            simulate(c, jobs, _NoAllocationFifo(), ORACLE, EngineConfig(native=native))
        messages.append(str(err.value))
    assert messages[0] == messages[1]


class _OwnTypeOrder(GavelFifoPerf):
    """A subclass with its own type order: a method of the round procedure."""
    name = "gavel-fifo-perf-test-order"

    def _type_order(self, m):
        return list(range(m))[::-1]


class _ReboundArrays(GavelMaxMinFairnessPerf):
    """A reset that replaces the per-job arrays instead of updating them in place."""
    name = "gavel-max-min-fairness-perf-test-rebound"

    def _maybe_reset(self, state, thr):
        super()._maybe_reset(state, thr)
        self.worker_time = self.worker_time.copy()
        self.deficit = self.deficit.copy()


def test_an_overridden_round_method_runs_in_python_and_replaced_arrays_are_followed():
    c = load_cluster("gavel-108")
    jobs = generate_workload(30, load_jobs_per_hour=20.0, seed=3, throughput=ORACLE)
    config = EngineConfig(restart_delay_s=0.0)
    assert not simulate(c, jobs, _OwnTypeOrder(), ORACLE, config).profile["native"]
    pol = get_policy("gavel-fifo-perf")
    pol._plan = pol._plan                     # replaced on the object
    assert not native_rounds.eligible_policy(pol)
    runs = []
    for native in (True, False):
        pol = _ReboundArrays()
        runs.append((simulate(c, jobs, pol, ORACLE, EngineConfig(restart_delay_s=0.0, native=native)), pol))
    assert runs[0][1].resets > 1
    _same(*runs)


def test_a_decision_counts_the_python_reset_it_waited_for(monkeypatch):
    # a clock that moves one second a reading: each return to Python for a reset adds exactly
    # one second to the pending decision's recorded time (the kernel's own time is real)
    ticks = iter(range(10**9))
    monkeypatch.setattr(native_rounds, "_clock", lambda: float(next(ticks)))
    c = load_cluster("gavel-108")
    jobs = generate_workload(30, load_jobs_per_hour=20.0, seed=3, throughput=ORACLE)
    pol = get_policy("gavel-max-min-fairness-perf")
    res = simulate(c, jobs, pol, ORACLE, EngineConfig(restart_delay_s=0.0))
    assert res.profile["native"] and pol.resets > 1
    seconds = np.asarray(res.decision_seconds)
    assert np.sum(seconds >= 1.0) == pol.resets and np.all(seconds < 2.0)
