"""Policies on toy clusters, with answers worked out by hand.

Unless said otherwise the cluster is one node of 4 "slow" GPUs at speed 1, so
with LinearOracle a job of model 0 on g GPUs progresses g iterations per second
and a job with work w on its requested g GPUs runs w / g seconds.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, small_cluster, specs
from reference_engine import reference_run
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.policies import get_policy
from sim.policies.tiresias import Tiresias
from sim.state import SchedState

ONE_NODE = dict(gpus=(4,), types=(1,), speed=(1.0,))
EVENTS = EngineConfig(round_s=0.0)


def run(policy, jobs, cluster=None, config=EVENTS):
    return run_jobs(cluster or small_cluster(**ONE_NODE), jobs, policy, LinearOracle(), config)


def check(res, first_start, finish, restarts=None):
    np.testing.assert_allclose(res.first_start, first_start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.finish, finish, rtol=0, atol=1e-9)
    if restarts is not None:
        np.testing.assert_array_equal(res.restarts, restarts)


# -- FIFO ------------------------------------------------------------------------
# J0: t=0, 2 GPUs, 10 s.  J1: t=1, 4 GPUs, 10 s (does not fit until J0 ends).
# J2: t=2, 1 GPU, 5 s (fits in J0's leftover 2 GPUs).
FIFO_JOBS = specs([0, 1, 2], [2, 4, 1], [20, 40, 5], delay=0.0)


def test_fifo_strict_head_of_line_blocking():
    # J2 waits behind J1: J1 runs 10-20, then J2 20-25.
    check(run(get_policy("fifo"), FIFO_JOBS), [0, 10, 20], [10, 20, 25])


def test_fifo_backfill_lets_small_job_pass():
    # J2 starts at once on the 2 free GPUs, 2-7; J1 still starts at 10.
    check(run(get_policy("fifo", backfill=True), FIFO_JOBS), [0, 10, 2], [10, 20, 7])


def test_fifo_strict_waits_behind_a_job_spanning_nodes():
    # Two 2-GPU nodes.  J0 (t=0, 1 GPU, 10 s) takes node 0; J1 (t=1, 4 GPUs, 10 s)
    # waits; J2 (t=2, 1 GPU, 1 s) would fit but must wait behind J1.
    c = small_cluster(gpus=(2, 2), types=(1, 1), speed=(1.0, 1.0))
    jobs = specs([0, 1, 2], [1, 4, 1], [10, 40, 1], delay=0.0)
    # J1 spans 2 nodes: rate 4 x 0.8 = 3.2 -> 40 / 3.2 = 12.5 s
    check(run(get_policy("fifo"), jobs, c), [0, 10, 22.5], [10, 22.5, 23.5])


# -- SJF ---------------------------------------------------------------------------
def test_sjf_orders_queue_by_gpu_time_and_backfills():
    # J0 holds all 4 GPUs 0-10.  Queued at t=10, by est. GPU-seconds:
    # J2 (2 GPUs x 5 s = 10), J3 (1 x 30 = 30), J1 (2 x 20 = 40).
    # J2 and J3 start at 10; J1 needs 2 but 1 is free: waits until J2 ends at 15.
    jobs = specs([0, 1, 2, 3], [4, 2, 2, 1], [40, 40, 10, 30], delay=0.0)
    check(run(get_policy("sjf"), jobs), [0, 15, 10, 10], [10, 35, 15, 40])


# -- SRTF --------------------------------------------------------------------------
def test_srtf_preempts_for_shorter_remaining_and_pays_restart_delay():
    # J0: t=0, 4 GPUs, 100 s.  J1: t=10, 4 GPUs, 20 s.  At t=10 J0 has 90 s x 4
    # left vs J1's 20 s x 4: J1 runs 10-30.  J0 resumes at 30, restart delay 5,
    # progress from 35 for its remaining 90 s: ends at 125.
    jobs = specs([0, 10], [4, 4], [400, 80], delay=5.0)
    res = run(get_policy("srtf"), jobs)
    check(res, [0, 10], [125, 30], restarts=[1, 0])
    np.testing.assert_allclose(res.gpu_seconds, [4 * 10 + 4 * 95, 4 * 20])


# -- LAS ---------------------------------------------------------------------------
def test_las_alternates_at_rounds():
    # Two 4-GPU jobs of 100 s each, both at t=0, rounds every 60 s (the policy's).
    # 0-60 J0 (tie: lower id); at 60 J0 has 240 GPU-s, J1 0: J1 runs 60-120;
    # at 120 both have 240: tie -> J0 runs 120-160 (its last 40 s); J1 160-200.
    jobs = specs([0, 0], [4, 4], [400, 400], delay=0.0)
    res = run(get_policy("las"), jobs, config=EngineConfig())
    check(res, [0, 60], [160, 200], restarts=[1, 1])


def test_las_event_driven_new_job_preempts():
    # J0: t=0, 4 GPUs, 100 s.  J1: t=10, 2 GPUs, 30 s, attained 0 < 40: J1 runs
    # 10-40 and J0 (4 GPUs) no longer fits.  J0 resumes at 40: 90 s left -> 130.
    # (J0 has run 10 s, past its 5 s lease.)
    jobs = specs([0, 10], [4, 2], [400, 60], delay=0.0)
    check(run(get_policy("las", min_run_s=5.0), jobs), [0, 10], [130, 40], restarts=[1, 0])


def test_las_lease_keeps_a_started_job():
    # The same jobs with the default 60 s lease: at t=10 J0 is inside its lease and keeps its
    # GPUs; event driven, the next decision is J0's completion at 100; J1 runs 100-130.
    jobs = specs([0, 10], [4, 2], [400, 60], delay=0.0)
    check(run(get_policy("las"), jobs), [0, 100], [100, 130], restarts=[0, 0])
    with pytest.raises(ConfigError, match="min_run_s must be finite and > 0"):
        get_policy("las", min_run_s=0)


# -- Tiresias ------------------------------------------------------------------------
def test_tiresias_demotion_puts_long_job_behind_new_short_job():
    # Limit 100 GPU-s.  J0: t=0, 4 GPUs, 100 s.  J1: t=10, 4 GPUs, 10 s.
    # At 10, both in Q0 and J0 runs (running ahead of pending).  J0 reaches 100
    # GPU-s at exactly t=25 and drops to Q1: J1 runs 25-35.  J0 resumes at 35,
    # restart delay 5, 300 iterations left at 4/s from 40: ends 115.
    jobs = specs([0, 10], [4, 4], [400, 40], delay=5.0)
    res = run(get_policy("tiresias", thresholds=[100]), jobs)
    check(res, [0, 25], [115, 35], restarts=[1, 0])
    assert 25.0 in res.timeline.time                       # woken exactly at the demotion


def test_tiresias_wakes_for_demotions_only_while_a_job_waits():
    # Limits 100 and 300 GPU-s; a 2-GPU job alone crosses them at t=50 and t=150.
    jobs = specs([0], [2], [500], delay=0.0)
    res = run(get_policy("tiresias", thresholds=[100, 300]), jobs)
    assert res.timeline.time == [0.0]                      # nobody waits: no wakeups
    check(res, [0], [250])
    waking = get_policy("tiresias", thresholds=[100, 300])
    waking.wake_without_contention = True
    res = run(waking, jobs)
    assert res.timeline.time == [0.0, 50.0, 150.0]         # woken exactly at each demotion
    check(res, [0], [250])


def test_tiresias_folds_in_silent_demotions_at_their_crossing_times():
    # Limit 100 GPU-s, one 4-GPU node.  J0: t=0, 1 GPU, crosses at t=100.  J1: t=10,
    # 2 GPUs, crosses at t=60.  Nobody waits, so no wakeups.  J2: t=120, 2 GPUs, 10 s,
    # does not fit: Q1 in FIFO order of entry is J1 (60), J0 (100), so J0 (not J1, the
    # earlier arrival) yields its GPU.  J0 resumes at 130 with 880 s left.
    jobs = specs([0, 10, 120], [1, 2, 2], [1000, 2000, 20], delay=0.0)
    expect = dict(first_start=[0, 10, 120], finish=[1010, 1010, 130], restarts=[1, 0, 0])
    res = run(get_policy("tiresias", thresholds=[100]), jobs)
    check(res, **expect)
    assert 60.0 not in res.timeline.time and 100.0 not in res.timeline.time
    waking = get_policy("tiresias", thresholds=[100])
    waking.wake_without_contention = True
    res = run(waking, jobs)
    check(res, **expect)
    assert 60.0 in res.timeline.time and 100.0 in res.timeline.time


def test_tiresias_default_is_one_limit_at_an_hour_of_gpu_time():
    # One 4-GPU job of 2000 s: its one demotion is at 3600 / 4 = 900 s.
    p = get_policy("tiresias")
    assert p.thresholds.tolist() == [3600.0] and p.promote_knob == 0.0
    p.wake_without_contention = True
    res = run(p, specs([0], [4], [8000], delay=0.0))
    assert res.timeline.time == [0.0, 900.0]
    assert get_policy("tiresias", thresholds="code").thresholds.tolist() == [3250, 7200, 18000]


def test_tiresias_same_queue_is_fifo_with_running_jobs_ahead():
    # No demotions (limit far away).  J0: 2 GPUs, 10 s at t=0; J1: 4 GPUs, 10 s at
    # t=1; J2: 2 GPUs, 10 s at t=2.  At 1, J1 is pending behind running J0; at 2,
    # J2 (pending, Q0) is behind J1 by FIFO, but J1 does not fit and J2 does:
    # not blocking, so J2 starts at 2.  At 10 J0 ends; J1 still does not fit (J2
    # runs, kept ahead); at 12 J2 ends and J1 runs 12-22.
    jobs = specs([0, 1, 2], [2, 4, 2], [20, 40, 20], delay=0.0)
    check(run(get_policy("tiresias"), jobs), [0, 12, 2], [10, 22, 12])


# R (job 0): t=0, 2 GPUs, 180 iterations.  J (job 1): t=0, 4 GPUs, 300 iterations.
# Limit 100 GPU-s, no restart delay.
#   0-50   R runs (Q0, lower id); J waits (never ran, no promotion).
#   50     R reaches 100 GPU-s -> Q1; J (Q0) runs.
#   75     J reaches 100 -> Q1, at the tail behind pending R: R runs, J waits.
# Without the knob R (settled, running first in Q1) runs to the end: 80 more
# iterations at 2/s -> 115; J then runs 115-165.
# With knob 1, J (executed 25 s, pending since 75) is promoted to Q0 at 100 and
# preempts R; J's queue service restarts, so it is demoted again at 125, behind
# R, which finishes its last 30 iterations at 140; J runs 140-165.
STARVE_JOBS = specs([0, 0], [2, 4], [180, 300], delay=0.0)


def test_tiresias_without_promote_knob_lower_queue_job_waits():
    res = run(get_policy("tiresias", thresholds=[100]), STARVE_JOBS)
    check(res, [0, 50], [115, 165], restarts=[1, 1])


def test_tiresias_promote_knob_promotes_starved_job():
    res = run(get_policy("tiresias", thresholds=[100], promote_knob=1), STARVE_JOBS)
    check(res, [0, 50], [140, 165], restarts=[2, 2])
    for t in (50.0, 75.0, 100.0, 125.0, 140.0):
        assert t in res.timeline.time


def test_tiresias_promote_knob_cannot_livelock_on_restart_delays():
    # Limit 10 GPU-s: a 4-GPU job's Q0 stint is 2.5 s, shorter than the 5 s
    # restart delay.  A, B: t=0, 4 GPUs, 100 iterations each; knob 1.
    #   0-2.5   A runs (first start, no delay; 10 done), demoted; B runs.
    #   5       B demoted (10 done); A (pending 2.5 s = its executed time) is
    #           promoted and restarts: it holds GPUs 5-7.5, all restart delay.
    #   7.5     A demoted, B promoted the same way, holds GPUs 7.5-10 in delay.
    #   10      B demoted.  Neither did work since its promotion, so neither is
    #           promoted again: A (entered Q1 first) runs, resumes 15, ends 37.5;
    #           B restarts at 37.5, resumes 42.5, ends 65.
    # Without the progress guard A and B would swap every 2.5 s forever.
    jobs = specs([0, 0], [4, 4], [100, 100], delay=5.0)
    res = run(get_policy("tiresias", thresholds=[10], promote_knob=1), jobs)
    check(res, [0, 2.5], [37.5, 65], restarts=[2, 2])


def test_tiresias_found_livelock_case_finishes():
    # found by the engine-vs-reference property test (8-GPU jobs, 5 s restarts; now 6 GPUs,
    # the most one GPU type of the test cluster has)
    jobs = specs([5.0, 6.0, 6.0, 26.0, 31.0, 36.0, 56.0, 57.0], [4, 2, 1, 6, 4, 2, 6, 6],
                 [60.0, 10.0, 60.0, 500.0, 10.0, 200.0, 10.0, 200.0], delay=5.0)
    res = run(get_policy("tiresias", thresholds=[30, 200], promote_knob=1), jobs,
              cluster=small_cluster())
    assert np.all(np.isfinite(res.finish)) and res.decisions < 200


def _state(now, ngpu, attained, run_s, queued_since, jobs):
    k = len(ngpu)
    return SchedState(now=now, reasons=0, cluster=small_cluster(), jobs=jobs,
                      active=np.arange(k, dtype=np.int64), ngpu=np.array(ngpu, np.int32),
                      remaining=np.ones(k), attained_gpu_s=np.array(attained, float),
                      run_s=np.array(run_s, float), queued_since=np.array(queued_since, float),
                      pl_indptr=np.zeros(k + 1, np.int64), pl_nodes=np.zeros(0, np.int32),
                      pl_counts=np.zeros(0, np.int32))


def test_tiresias_next_wakeup_is_the_earliest_demotion_or_promotion():
    jobs = specs([0, 0, 0, 0], [2, 4, 1, 1], [1e6] * 4)
    p = Tiresias(thresholds=[100, 300], promote_knob=2)
    # job 0: 2 GPUs, 60 GPU-s -> Q0 limit at 10 + 40 / 2 = 30
    # job 1: 4 GPUs, 0 -> 10 + 100 / 4 = 35
    # job 2: 1 GPU, 150 (Q1) -> 10 + 150 = 160
    # job 3: pending in Q1, ran 120 s, queued since 5 -> promoted at 5 + 2 x 120 = 245
    s = _state(10.0, [2, 4, 1, 0], [60, 0, 150, 120], [30, 0, 150, 120],
               [np.nan, np.nan, np.nan, 5.0], jobs)
    assert p.next_wakeup(s) == 30.0
    assert p.queue.tolist() == [0, 0, 1, 1]
    assert p.next_wakeup(s, ngpu=[0, 0, 0, 0]) == 245.0      # nothing runs after the plan
    # a job passing two limits at once falls through both
    s2 = _state(20.0, [1, 4, 1, 0], [400, 40, 160, 120], [50, 10, 160, 120],
                [np.nan, np.nan, np.nan, 5.0], jobs)
    p.order(s2)
    assert p.queue.tolist() == [2, 0, 1, 1]


def test_tiresias_rejects_bad_parameters():
    for bad in ([0], [100, 50], [float("inf")], "nope", ["x"]):
        with pytest.raises(ConfigError):
            get_policy("tiresias", thresholds=bad)
    with pytest.raises(ConfigError):
        get_policy("tiresias", promote_knob=-1)


@st.composite
def _workloads(draw):
    n = draw(st.integers(1, 12))
    arrival = np.cumsum(draw(st.lists(st.sampled_from([0.0, 1.0, 5.0, 20.0]), min_size=n,
                                      max_size=n)))
    demand = draw(st.lists(st.sampled_from([1, 2, 4, 6]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([10.0, 60.0, 200.0, 500.0]), min_size=n, max_size=n))
    return specs(arrival, demand, work, delay=draw(st.sampled_from([0.0, 5.0])))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=_workloads(), knob=st.sampled_from([0, 1, 2]),
       thresholds=st.sampled_from([[50], [30, 200], [3600]]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_tiresias_engine_matches_reference_with_demotions(jobs, knob, thresholds, placement):
    kw = dict(placement=placement, thresholds=thresholds, promote_knob=knob)
    res = run_jobs(small_cluster(), jobs, get_policy("tiresias", **kw), LinearOracle(), EVENTS)
    ref = reference_run(small_cluster(), jobs, get_policy("tiresias", **kw), LinearOracle(), 0.0)
    for key in ("first_start", "finish", "gpu_seconds"):
        np.testing.assert_allclose(getattr(res, key), ref[key], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(res.restarts, ref["restarts"])


def _same_jobs(a, b):
    for key in ("first_start", "finish", "gpu_seconds"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(a.restarts, b.restarts)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=_workloads(), knob=st.sampled_from([0, 1, 2]),
       thresholds=st.sampled_from([[50], [30, 200]]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_tiresias_silent_demotions_give_the_results_of_waking_at_each(jobs, knob, thresholds,
                                                                      placement):
    kw = dict(placement=placement, thresholds=thresholds, promote_knob=knob)
    waking = get_policy("tiresias", **kw)
    waking.wake_without_contention = True
    waking.skip_idle_completions = False
    quiet = run_jobs(small_cluster(), jobs, get_policy("tiresias", **kw), LinearOracle(), EVENTS)
    loud = run_jobs(small_cluster(), jobs, waking, LinearOracle(), EVENTS)
    _same_jobs(quiet, loud)
    assert quiet.decisions <= loud.decisions


def _always_asked(name, **params):
    """The policy with every engine shortcut off: asked at every decision point."""
    cls = type(get_policy(name))
    off = {"skip_idle_completions": False, "place_lone_arrivals": False, "skip_if_nothing_fits": False}
    return type("Asked" + cls.__name__, (cls,), off)(**params)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=_workloads(), name=st.sampled_from(["fifo", "sjf", "srtf", "las", "tiresias"]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_engine_shortcuts_change_no_result(jobs, name, placement):
    config = EngineConfig()                       # LAS with its rounds
    fast = run_jobs(small_cluster(), jobs, get_policy(name, placement=placement), LinearOracle(),
                    config)
    full = run_jobs(small_cluster(), jobs, _always_asked(name, placement=placement),
                    LinearOracle(), config)
    _same_jobs(fast, full)
    assert full.skipped_decisions == full.engine_placed == 0
    assert fast.decisions + fast.skipped_decisions + fast.engine_placed == full.decisions


@pytest.mark.parametrize("a, b, limit, c", [(3.3, 23.55, 40.5, 50.6), (8.3, 20.0, 23.4, 43.1)])
def test_tiresias_simultaneous_crossings_tie_whatever_the_rounding(a, b, limit, c):
    # J0 (1 GPU from a) and J1 (2 GPUs from b = a + limit/2) reach the limit at the same
    # instant, J0 by 1 GPU-s/s, J1 by 2: their computed crossing times differ in the last
    # bits.  J2 (2 GPUs) arrives when the node is full: Q1 is a tie on entry time, so FIFO
    # by arrival keeps J0 and J1 yields -- by every path, shortcuts on or off.
    jobs = specs([a, b, c], [1, 2, 2], [1e4, 1e4, 50.0], delay=0.0)
    waking = get_policy("tiresias", thresholds=[limit])
    waking.wake_without_contention = True
    for policy in (get_policy("tiresias", thresholds=[limit]), waking,
                   _always_asked("tiresias", thresholds=[limit])):
        np.testing.assert_array_equal(run(policy, jobs).restarts, [0, 1, 1])
    ref = reference_run(small_cluster(**ONE_NODE), jobs, get_policy("tiresias", thresholds=[limit]),
                        LinearOracle(), 0.0)
    np.testing.assert_array_equal(ref["restarts"], [0, 1, 1])


@pytest.mark.parametrize("arrival, demand, work", [
    ([2.6, 12.4, 22.2], [1, 2, 2], [1e4, 1e4, 50.0]),            # a lone arrival placed
    ([3.5, 5.6, 21.8, 40.1], [1, 1, 2, 2], [1e4, 1.9, 1e4, 50.0]),  # an idle completion
])
def test_las_ties_do_not_depend_on_how_often_the_engine_looked(arrival, demand, work):
    # Two jobs reach equal attained service when a newcomer forces one out: reading the
    # kernel's state never writes, so skipped decisions cannot round the tie differently.
    jobs = specs(arrival, demand, work, delay=0.0)
    fast = run(get_policy("las"), jobs)
    _same_jobs(fast, run(_always_asked("las"), jobs))
    ref = reference_run(small_cluster(**ONE_NODE), jobs, get_policy("las"), LinearOracle(), 0.0)
    np.testing.assert_array_equal(fast.restarts, ref["restarts"])


def test_subclass_that_decides_differently_loses_the_shortcuts():
    from sim.policies.queue import SRTF

    class Elastic(SRTF):                     # changes what the engine would assume
        def allocate(self, state, order):
            return np.minimum(state.demand, 2).astype(np.int32)

    class Reordered(SRTF):                   # only the order: the shortcuts still hold
        def order(self, state):
            return super().order(state)[::-1].copy()

    assert not Elastic.skip_idle_completions and not Elastic.place_lone_arrivals
    assert Reordered.skip_idle_completions and Reordered.place_lone_arrivals
    assert Tiresias.skip_idle_completions and get_policy("tiresias").place_lone_arrivals


def test_engine_places_lone_arrivals_and_skips_idle_completions():
    # three jobs that never wait: three lone arrivals and three idle completions
    jobs = specs([0, 5, 10], [1, 1, 2], [100, 100, 100], delay=0.0)
    for name in ("fifo", "sjf", "srtf", "las", "tiresias"):
        res = run(get_policy(name), jobs)
        assert res.engine_placed == 3, name
        full = run(_always_asked(name), jobs)
        _same_jobs(res, full)


# -- determinism ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "las", "tiresias"])
def test_same_inputs_give_identical_results(name):
    rng = np.random.default_rng(7)
    n = 30
    jobs = specs(np.cumsum(rng.choice([0.0, 3.0, 40.0], n)), rng.choice([1, 2, 4, 6], n),
                 rng.choice([30.0, 300.0, 3000.0], n), model=rng.integers(0, 2, n))
    policy = get_policy(name, placement="spread")
    cfg = EngineConfig(type_choice="random", type_seed=3)       # the same seed: the same draws
    a = run_jobs(small_cluster(), jobs, policy, LinearOracle(), cfg)
    b = run_jobs(small_cluster(), jobs, policy, LinearOracle(), cfg)   # reused
    c = run_jobs(small_cluster(), jobs, get_policy(name, placement="spread"), LinearOracle(),
                 EngineConfig(type_choice="random", type_seed=3, native=False))
    other_seed = run_jobs(small_cluster(), jobs, get_policy(name, placement="spread"), LinearOracle(),
                          EngineConfig(type_choice="random", type_seed=4))
    assert not np.array_equal(a.gpu_types_used, other_seed.gpu_types_used)
    for other in (b, c):
        for key in ("first_start", "finish", "gpu_seconds", "run_seconds", "restarts",
                    "gpu_types_used"):
            np.testing.assert_array_equal(getattr(a, key), getattr(other, key), err_msg=key)
        assert a.timeline.time == other.timeline.time
        assert a.timeline.used_gpus == other.timeline.used_gpus
