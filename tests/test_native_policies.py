"""The native policies (csrc/sk_native.c) make the Python policies' decisions, job by job.

Each built-in rigid policy runs twice on the same inputs: decided inside the C kernel
(``EngineConfig(native=True)``, the default) and by the Python policy at every decision
(``native=False``).  Per-job results, the per-decision timeline, the GPU types used and the
decision counts must be identical, not merely close: the native kernel follows the same
float operations in the same order.  The reference-engine test (test_engine_reference.py)
holds the native runs to the plain-Python engine as well.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, small_cluster, specs
from sim.cluster import Cluster
from sim.engine import EngineConfig, run_jobs
from sim.errors import SimError
from sim.native import native_params
from sim.policies import get_policy
from sim.policies.queue import FIFO

NATIVE = ["fifo", "sjf", "srtf", "las", "tiresias"]
PER_JOB = ("first_start", "finish", "gpu_seconds", "run_seconds", "restarts", "gpu_types_used")


@st.composite
def workloads(draw, max_jobs=30):
    n = draw(st.integers(1, max_jobs))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 7.0, 30.0, 120.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([1, 1, 2, 3, 4, 5, 8]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([1.0, 10.0, 60.0, 100.0, 333.3, 1000.0, 5000.0]),
                         min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return specs(np.cumsum(gaps), demand, work, model, delay=draw(st.sampled_from([0.0, 5.0, 30.0])))


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 5))
    gpus = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n))
    types = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    speed = draw(st.lists(st.sampled_from([1.0, 0.5, 0.75]), min_size=n, max_size=n))
    return small_cluster(tuple(gpus), tuple(types), tuple(speed))


def _policy(name, placement, thresholds):
    if name == "tiresias":
        return get_policy(name, placement=placement, thresholds=thresholds)
    return get_policy(name, placement=placement)


def assert_same_run(cluster, jobs, make_policy, round_s):
    a = run_jobs(cluster, jobs, make_policy(), LinearOracle(), EngineConfig(round_s=round_s))
    b = run_jobs(cluster, jobs, make_policy(), LinearOracle(), EngineConfig(round_s=round_s, native=False))
    assert a.profile["native"] and not b.profile["native"]
    for key in PER_JOB:
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    assert a.timeline.time == b.timeline.time
    assert a.timeline.used_gpus == b.timeline.used_gpus
    assert a.timeline.queued == b.timeline.queued
    assert (a.decisions, a.skipped_decisions, a.engine_placed) == \
        (b.decisions, b.skipped_decisions, b.engine_placed)
    np.testing.assert_array_equal(a.fragmentation["idle_gpus_while_waiting"],
                                  b.fragmentation["idle_gpus_while_waiting"])
    np.testing.assert_allclose(a.fragmentation["fgd"], b.fragmentation["fgd"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), cluster=clusters(), round_s=st.sampled_from([0.0, 0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       thresholds=st.sampled_from([(3600.0,), (50.0,), (20.0, 100.0, 400.0), ()]))
def test_native_matches_python_policy(name, jobs, cluster, round_s, placement, thresholds):
    if int(jobs.demand.max()) > cluster.total_gpus:
        jobs = specs(jobs.arrival, np.minimum(jobs.demand, cluster.total_gpus), jobs.work, jobs.model,
                     delay=float(jobs.restart_delay[0]))
    assert_same_run(cluster, jobs, lambda: _policy(name, placement, thresholds), round_s)


@st.composite
def las_contended(draw, max_jobs=50):
    """More work than GPUs, bursts of identical arrivals, several requests per class."""
    n = draw(st.integers(2, max_jobs))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0, 3.0, 10.0, 45.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([1, 1, 2, 2, 3, 4, 8]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([5.0, 40.0, 60.0, 100.0, 500.0, 2000.0]), min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return specs(np.cumsum(gaps), demand, work, model, delay=draw(st.sampled_from([0.0, 5.0, 30.0, 90.0])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_contended(), cluster=clusters(), round_s=st.sampled_from([5.0, 30.0, 60.0]),
       min_run_s=st.sampled_from([1.0, 20.0, 60.0, 250.0]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_native_las_classes_match_python(jobs, cluster, round_s, min_run_s, placement):
    """The native LAS keeps running jobs by request class (leased ones apart, the others in
    sorted runs that are merged, kept in bulk up to the next waiting head, preempted as each
    run's tail): its plain-Python reference is the Python LAS on the greedy placer, which
    walks one sorted list job by job.  Leases ending between rounds, restarts longer than
    rounds, completions of leased and unleased jobs, ties of identical jobs."""
    if int(jobs.demand.max()) > cluster.total_gpus:
        jobs = specs(jobs.arrival, np.minimum(jobs.demand, cluster.total_gpus), jobs.work, jobs.model,
                     delay=float(jobs.restart_delay[0]))
    assert_same_run(cluster, jobs, lambda: get_policy("las", placement=placement, min_run_s=min_run_s),
                    round_s)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads())
def test_native_fifo_backfill_matches(jobs):
    assert_same_run(small_cluster(), jobs, lambda: get_policy("fifo", backfill=True), 0.0)


@pytest.mark.parametrize("name", ["srtf", "las", "tiresias"])
def test_native_without_shortcuts_matches(name):
    """Instance flags reach the kernel: with the shortcuts off every decision point decides."""
    jobs = specs(np.arange(12) * 3.0, [1, 2, 4, 8, 1, 3] * 2, [100.0, 40.0, 900.0] * 4, delay=5.0)

    def make():
        p = _policy(name, "consolidated", (50.0,))
        p.skip_idle_completions = False
        if name != "tiresias":           # Tiresias derives it from its wakeup setting
            p.place_lone_arrivals = False
        return p
    assert_same_run(small_cluster(), jobs, make, 0.0)
    res = run_jobs(small_cluster(), jobs, make(), LinearOracle(), EngineConfig())
    assert res.skipped_decisions == 0 and (name == "tiresias" or res.engine_placed == 0)


def test_identical_jobs_tie_by_arrival_then_id():
    """Ties on every key fall back to job id, as np.lexsort's stable order does."""
    jobs = specs(np.zeros(10), [2] * 10, [100.0] * 10)
    for name in NATIVE:
        assert_same_run(small_cluster(), jobs, lambda: get_policy(name), 0.0)


def test_policies_without_native_form_decide_in_python():
    assert native_params(get_policy("tiresias", promote_knob=2.0)) is None
    assert native_params(get_policy("tiresias")) is not None

    class MyFIFO(FIFO):
        name = "my-fifo"

        def order(self, state):            # a new order: the kernel's would be wrong
            return super().order(state)[::-1]
    assert native_params(MyFIFO()) is None
    assert native_params(get_policy("eghs")) is None


def test_profile_says_where_time_went():
    jobs = specs(np.arange(20) * 2.0, [1, 2, 4] * 6 + [8, 1], [100.0] * 20)
    for native in (True, False):
        res = run_jobs(small_cluster(), jobs, get_policy("las"), LinearOracle(),
                       EngineConfig(native=native))
        prof = res.profile
        assert prof["native"] is native
        for key in ("kernel_s", "policy_s", "oracle_s", "glue_s", "wall_s"):
            assert prof[key] >= 0.0
        assert prof["decisions"] == res.decisions > 0
        assert prof["decision_points"] == len(res.timeline.time)
        assert res.decision_seconds.shape == (res.decisions,)


def test_native_zero_throughput_is_a_clear_error():
    """A placement where the oracle says the model cannot run stops the run, naming the job."""

    class NoSlow(LinearOracle):
        def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
            r = super().rates(model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types)
            return np.where((np.asarray(type_mask) >> 1) & 1, 0.0, r)
    cluster = Cluster(name="t", gpu_types=("fast", "slow"), node_gpus=np.array([1, 4], np.int32),
                      node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                      intra_bw_gbps=np.full(2, 100.0), inter_bw_gbps=np.full(2, 10.0))
    jobs = specs([0.0, 0.0], [1, 1], [100.0, 100.0])
    for native in (True, False):
        with pytest.raises(SimError, match=r"placed job 1 at t=0.0 on GPU types slow where its throughput is 0"):
            run_jobs(cluster, jobs, get_policy("fifo"), NoSlow(), EngineConfig(native=native))


def test_cli_profile_flag_says_where_time_went(capsys):
    from sim.cli import main
    assert main(["run", "--cluster", "uniform:nodes=4,gpus=8", "--jobs", "30", "--policy", "tiresias,smjp",
                 "--no-progress", "--profile"]) in (0, None)
    err = capsys.readouterr().err
    assert "profile tiresias: native (decided in C); wall" in err
    assert "profile smjp: python;" in err and "decisions" in err
