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

from engine_helpers import (NETWORK_BANDWIDTHS, BarredOracle, LinearOracle, NetworkOracle, runnable,
                            small_cluster, specs)
from sim.cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError, SimError
from sim.native import NativeRun, native_params
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
def clusters(draw, bandwidths=None):
    n = draw(st.integers(1, 5))
    gpus = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n))
    types = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    speed = draw(st.lists(st.sampled_from([1.0, 0.5, 0.75]), min_size=n, max_size=n))
    if bandwidths is None:
        return small_cluster(tuple(gpus), tuple(types), tuple(speed))
    return small_cluster(tuple(gpus), tuple(types), tuple(speed), bandwidths=bandwidths)


def _policy(name, placement, thresholds):
    if name == "tiresias":
        return get_policy(name, placement=placement, thresholds=thresholds)
    return get_policy(name, placement=placement)


def assert_same_run(cluster, jobs, make_policy, round_s, oracle=None, type_choice="first-fit"):
    oracle = LinearOracle() if oracle is None else oracle
    jobs = runnable(jobs, cluster, oracle)
    cfg = dict(round_s=round_s, type_choice=type_choice, type_seed=11)
    a = run_jobs(cluster, jobs, make_policy(), oracle, EngineConfig(**cfg))
    b = run_jobs(cluster, jobs, make_policy(), oracle, EngineConfig(**cfg, native=False))
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
    return a


@pytest.mark.parametrize("name", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), cluster=clusters(), round_s=st.sampled_from([0.0, 0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       thresholds=st.sampled_from([(3600.0,), (50.0,), (20.0, 100.0, 400.0), ()]),
       oracle=st.sampled_from([LinearOracle(), BarredOracle()]),
       type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_native_matches_python_policy(name, jobs, cluster, round_s, placement, thresholds, oracle,
                                      type_choice):
    jobs = runnable(jobs, cluster, oracle)
    assert_same_run(cluster, jobs, lambda: _policy(name, placement, thresholds), round_s, oracle,
                    type_choice)


@pytest.mark.parametrize("name", NATIVE)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), cluster=clusters(NETWORK_BANDWIDTHS), round_s=st.sampled_from([0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_native_matches_python_with_network_term(name, jobs, cluster, round_s, placement):
    """The kernel caches rates per placement summary: with per-type bandwidths the network
    term (sim.network) follows from the summary, so both paths run at the same rates."""
    jobs = _fit(jobs, cluster)
    assert_same_run(cluster, jobs, lambda: _policy(name, placement, (50.0,)), round_s, NetworkOracle())


@st.composite
def las_contended(draw, max_jobs=50):
    """More work than GPUs, bursts of identical arrivals, several requests per class."""
    n = draw(st.integers(2, max_jobs))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0, 3.0, 10.0, 45.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([1, 1, 2, 2, 3, 4, 8]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([5.0, 40.0, 60.0, 100.0, 500.0, 2000.0]), min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return specs(np.cumsum(gaps), demand, work, model, delay=draw(st.sampled_from([0.0, 5.0, 30.0, 90.0])))


def _fit(jobs, cluster):
    """The jobs with no request larger than the cluster."""
    if int(jobs.demand.max()) <= cluster.total_gpus:
        return jobs
    return specs(jobs.arrival, np.minimum(jobs.demand, cluster.total_gpus), jobs.work, jobs.model,
                 delay=float(jobs.restart_delay[0]))


def assert_same_results(a, b, counts=("placements", "preemptions", "decisions")):
    """Two native runs agree job by job, in their timelines and in their counts."""
    assert a.profile["native"] and b.profile["native"]
    for key in PER_JOB:
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    assert a.timeline.time == b.timeline.time
    assert a.timeline.used_gpus == b.timeline.used_gpus
    for key in counts:
        assert a.profile[key] == b.profile[key], key


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_contended(), cluster=clusters(), round_s=st.sampled_from([5.0, 30.0, 60.0]),
       min_run_s=st.sampled_from([1.0, 20.0, 60.0, 250.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       oracle=st.sampled_from([LinearOracle(), BarredOracle()]),
       type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_native_las_classes_match_python(jobs, cluster, round_s, min_run_s, placement, oracle,
                                         type_choice):
    """The native LAS keeps running jobs by request class (leased ones apart, the others in
    sorted runs that are merged, kept in bulk up to the next waiting head, preempted as each
    run's tail): its plain-Python reference is the Python LAS on the greedy placer, which
    walks one sorted list job by job.  Leases ending between rounds, restarts longer than
    rounds, completions of leased and unleased jobs, ties of identical jobs.  One GPU type:
    the bulk keeps; mixed types (some jobs barred from one): the walk job by job with
    per-type budgets, moves between types and each type rule."""
    jobs = _fit(jobs, cluster)
    assert_same_run(cluster, jobs, lambda: get_policy("las", placement=placement, min_run_s=min_run_s),
                    round_s, oracle, type_choice)


@st.composite
def las_rounding(draw, max_jobs=40):
    """LAS keys that rounding can reorder: arrivals, works and restart delays that are not
    binary fractions, at times where an ulp is large, so that jobs with (nearly) equal attained
    service differ in their last bits and their computed order can change between decisions."""
    n = draw(st.integers(2, max_jobs))
    base = draw(st.sampled_from([0.0, 1e6 + 0.1, 1e10 / 3]))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.1, 1 / 3, 0.7, 10.0, 45.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([1, 1, 2, 3]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([0.7, 33.3, 100 / 3, 60.0, 500.0]), min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return specs(base + np.cumsum(gaps), demand, work, model, delay=draw(st.sampled_from([0.0, 0.3, 5.0])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_rounding(), cluster=clusters(), round_s=st.sampled_from([0.0, 1.1, 10 / 3, 30.0]),
       min_run_s=st.sampled_from([1 / 3, 1.0, 20.0]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_native_las_order_certificate_matches_python(jobs, cluster, round_s, min_run_s, placement):
    """The native LAS re-keys a class's unleased jobs only when the certificate of its order
    (the gaps between neighbours against the rounding bound of their keys) runs out, and keys
    the jobs it reads otherwise.  Near-ties that rounding decides, at large times, must give
    the Python LAS's run, which re-keys and sorts every job at every decision."""
    jobs = _fit(jobs, cluster)
    assert_same_run(cluster, jobs, lambda: get_policy("las", placement=placement, min_run_s=min_run_s),
                    round_s)


def test_native_las_reorders_a_class_when_rounding_ties_its_keys():
    """Two 1-GPU jobs run side by side from 0 (B) and 1e-9 s (A): A's attained service is
    1e-9 GPU-s less, so it comes first while an ulp of the keys is smaller than that, and from
    about 1e7 s on their keys round to the same value and B, the earlier arrival, comes first.
    Rounds of 1e6 s see the order before and after the change; C, arriving at 2e7 s, takes one
    of the two GPUs.  A class order certified once and kept would preempt B; LAS preempts A."""
    cluster = small_cluster(gpus=(2,), types=(0,), speed=(1.0,))
    jobs = specs([0.0, 1e-9, 2e7], [1, 1, 1], [1e8, 1e8, 10.0], delay=0.0)
    native = assert_same_run(cluster, jobs, lambda: get_policy("las", min_run_s=60.0), 1e6)
    assert list(native.restarts[:2]) == [0, 1]


@st.composite
def wide_clusters(draw):
    """More nodes than a 64-bit word (the placement's bit sets span words and summary bits),
    small nodes, two GPU types interleaved so that a type's range starts and ends inside words."""
    n = draw(st.integers(65, 200))
    gpus = draw(st.lists(st.sampled_from([1, 2, 2, 4]), min_size=n, max_size=n))
    types = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return small_cluster(tuple(gpus), tuple(types), (1.0,) * n)


@pytest.mark.parametrize("name", NATIVE)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_contended(max_jobs=120), cluster=wide_clusters(), round_s=st.sampled_from([0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_native_matches_python_on_many_nodes(name, jobs, cluster, round_s, placement, type_choice):
    """First fits and fewest-node placements over hundreds of nodes (requests of up to 8 GPUs
    on nodes of 1-4 span several nodes): the native placement's bit sets against the Python
    placer."""
    jobs = specs(jobs.arrival, jobs.demand * 2, jobs.work * 4, jobs.model,
                 delay=float(jobs.restart_delay[0]))
    assert_same_run(cluster, jobs, lambda: _policy(name, placement, (50.0,)), round_s, LinearOracle(),
                    type_choice)


def assert_same_as_checked(cluster, jobs, policy, round_s, oracle, type_choice):
    """The kernel applies its own plans as built (no validation, no sort by job id); the same
    plans validated and applied in job-id order must give the same run."""
    cfg = EngineConfig(round_s=round_s, type_choice=type_choice, type_seed=5)
    trusted = run_jobs(cluster, jobs, policy(), oracle, cfg)
    NativeRun.check_plans = True
    try:
        checked = run_jobs(cluster, jobs, policy(), oracle, cfg)
    finally:
        NativeRun.check_plans = False
    assert_same_results(trusted, checked)
    assert trusted.timeline.queued == checked.timeline.queued


@pytest.mark.parametrize("name", ["srtf", "las", "tiresias"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_contended(), cluster=clusters(), round_s=st.sampled_from([0.0, 5.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       oracle=st.sampled_from([LinearOracle(), BarredOracle()]),
       type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_native_plans_applied_as_built_match_validated(name, jobs, cluster, round_s, placement, oracle,
                                                       type_choice):
    """Preemptions, moves between types, restarts and ties of equal-time completions."""
    jobs = _fit(jobs, cluster)
    jobs = runnable(jobs, cluster, oracle)
    assert_same_as_checked(cluster, jobs, lambda: _policy(name, placement, (50.0,)), round_s, oracle,
                           type_choice)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads())
def test_native_fifo_backfill_matches(jobs):
    assert_same_run(small_cluster(), jobs, lambda: get_policy("fifo", backfill=True), 0.0)


@pytest.mark.parametrize("name", ["srtf", "las", "tiresias"])
def test_native_without_shortcuts_matches(name):
    """Instance flags reach the kernel: with the shortcuts off every decision point decides."""
    jobs = specs(np.arange(12) * 3.0, [1, 2, 4, 6, 1, 3] * 2, [100.0, 40.0, 900.0] * 4, delay=5.0)

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
    jobs = specs(np.arange(20) * 2.0, [1, 2, 4] * 6 + [6, 1], [100.0] * 20)
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


def _no_slow_cluster():
    return Cluster(name="t", gpu_types=("fast", "slow"), node_gpus=np.array([1, 4], np.int32),
                   node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                   intra_bw_gbps=np.full(2, DEFAULT_INTRA_BW_GBPS), inter_bw_gbps=np.full(2, DEFAULT_INTER_BW_GBPS))


class NoSlow(LinearOracle):
    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
        r = super().rates(model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types)
        return np.where((np.asarray(type_mask) >> 1) & 1, 0.0, r)


@pytest.mark.parametrize("name", NATIVE)
def test_zero_throughput_type_is_never_used_job_waits(name):
    """Hand-worked: one fast GPU, four slow ones where the model's throughput is 0.  Two
    1-GPU jobs of 100 iterations at t=0 (rate 2 on fast): job 0 runs 0-50 s on the fast GPU,
    job 1 waits for it (the idle slow GPUs are barred) and runs 50-100 s; no slow GPU is used."""
    jobs = specs([0.0, 0.0], [1, 1], [100.0, 100.0], delay=0.0)
    runs = [run_jobs(_no_slow_cluster(), jobs, get_policy(name), NoSlow(),
                     EngineConfig(native=native, round_s=0.0)) for native in (True, False)]
    for res in runs:
        np.testing.assert_allclose(res.finish, [50.0, 100.0])
        assert res.gpu_types_used.tolist() == [1, 1]       # bit 0: fast only


def test_job_that_runs_on_no_type_is_a_clear_error():
    jobs = specs([0.0, 0.0], [1, 2], [100.0, 100.0])
    for native in (True, False):
        with pytest.raises(ConfigError, match=r"job at row 1 cannot run on cluster t: it asks for 2 "
                                              r"GPUs, more than any GPU type it can run on has"):
            run_jobs(_no_slow_cluster(), jobs, get_policy("fifo"), NoSlow(), EngineConfig(native=native))

    class Dead(LinearOracle):
        def rates(self, model_idx, *args):
            return super().rates(model_idx, *args) * (np.asarray(model_idx) != 1)
    jobs = specs([0.0, 0.0], [1, 1], [100.0, 100.0], model=[0, 1])
    with pytest.raises(ConfigError, match=r"row 1 .*throughput is 0 on every GPU type"):
        run_jobs(_no_slow_cluster(), jobs, get_policy("srtf"), Dead(), EngineConfig())


def test_cli_profile_flag_says_where_time_went(capsys):
    from sim.cli import main
    assert main(["run", "--cluster", "uniform:nodes=4,gpus=8", "--jobs", "30", "--policy", "tiresias,smjp",
                 "--no-progress", "--profile"]) in (0, None)
    err = capsys.readouterr().err
    assert "profile tiresias: native (decided in C); wall" in err
    assert "profile smjp: python;" in err and "decisions" in err


@pytest.mark.parametrize("name", NATIVE)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), cluster=clusters(), placement=st.sampled_from(["consolidated", "spread"]),
       type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_never_on_a_zero_throughput_type_never_mixed(name, jobs, cluster, placement, type_choice):
    """Model 1 cannot run on "slow" GPUs: no stint of a model-1 job uses one; a job of a
    non-preemptive policy (one stint) uses exactly one type."""
    oracle = BarredOracle()
    jobs = runnable(jobs, cluster, oracle)
    res = run_jobs(cluster, jobs, _policy(name, placement, (50.0,)), oracle,
                   EngineConfig(type_choice=type_choice, type_seed=1))
    if "slow" in cluster.gpu_types:
        slow = 1 << cluster.gpu_types.index("slow")
        assert not np.any((res.gpu_types_used & slow)[jobs.model == 1])
    if name in ("fifo", "sjf"):
        assert all(bin(int(m)).count("1") == 1 for m in res.gpu_types_used)


@pytest.mark.parametrize("name", ["fifo", "srtf", "las", "tiresias"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=las_contended(), cluster=clusters(), round_s=st.sampled_from([0.0, 5.0, 30.0]))
def test_native_run_that_yields_after_every_decision_point_is_the_same_run(name, jobs, cluster, round_s):
    """The kernel gives control back to Python after YIELD_S seconds of a call (so Ctrl-C is
    seen); with YIELD_S = 0 it returns after every decision point, and the run is the same."""
    import sim.native
    jobs = _fit(jobs, cluster)
    oracle = LinearOracle()
    jobs = runnable(jobs, cluster, oracle)
    cfg = EngineConfig(round_s=round_s)
    whole = run_jobs(cluster, jobs, _policy(name, "consolidated", (50.0,)), oracle, cfg)
    saved, sim.native.YIELD_S = sim.native.YIELD_S, 0.0
    try:
        stepwise = run_jobs(cluster, jobs, _policy(name, "consolidated", (50.0,)), oracle, cfg)
    finally:
        sim.native.YIELD_S = saved
    assert stepwise.profile["kernel_calls"] > stepwise.profile["decision_points"]
    assert whole.profile["kernel_calls"] <= stepwise.profile["kernel_calls"]
    assert_same_results(whole, stepwise)
