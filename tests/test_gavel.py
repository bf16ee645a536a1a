"""Gavel's LPs, round mechanism and policies (sim/policies/gavel*.py), on hand-worked toys."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine_helpers import LinearOracle, specs
from sim.cluster import Cluster
from sim.presets import load_cluster
from sim.engine import EngineConfig, run_jobs, simulate
from sim.errors import ConfigError
from sim.metrics import summary
from sim.policies import get_policy, list_policies
from sim.policies.gavel_lp import (AllocationLP, _gavel_bisection, finish_time_fair_allocation,
                                   isolated_allocation, makespan_allocation,
                                   proportional_allocation)
from sim.state import SchedState
from sim.throughput import TableThroughput
from sim.workload import generate_workload

GAVEL = sorted(p for p in list_policies() if p.startswith("gavel-"))


def _y(thr, x):
    return np.sum(thr * x, axis=1)


# -- the LPs, two jobs on one V100 and one K80 ------------------------------------------
ONE_EACH = np.array([1.0, 1.0])


def test_max_min_fairness_perf_with_weights_by_hand():
    # both jobs run 4 it/s on the V100, 1 on the K80; job B has priority weight 2.
    # Every GPU is used and rows sum to 1, so a1 + a2 = 1, b1 = 1 - a1, b2 = a1:
    # y_A = 1 + 3 a1, y_B = 4 - 3 a1; max-min of y/(w * 2.5) equalizes y_A = y_B / 2,
    # a1 = 2/9, y_A = 5/3, y_B = 10/3.
    thr = np.array([[4.0, 1.0], [4.0, 1.0]])
    lp = AllocationLP(ONE_EACH, ONE_EACH)
    prop = _y(thr, proportional_allocation(2, ONE_EACH))
    np.testing.assert_allclose(prop, [2.5, 2.5])
    x, z = lp.max_min(thr * (1.0 / (np.array([1.0, 2.0]) * prop))[:, None])
    np.testing.assert_allclose(_y(thr, x), [5 / 3, 10 / 3], rtol=1e-5)
    assert z == pytest.approx(2 / 3, rel=1e-6)


def test_max_min_fairness_agnostic_by_hand():
    # all types alike: shares s_i * sum_t X / w_i; weight 2 for B caps at B's row (1): z = 1/2
    lp = AllocationLP(ONE_EACH, ONE_EACH)
    x, z = lp.max_min(np.ones((2, 2)) * np.array([[1.0], [0.5]]))
    assert z == pytest.approx(0.5, rel=1e-6)
    assert x[1].sum() == pytest.approx(1.0, rel=1e-6)


def test_max_sum_throughput_by_hand():
    # A: 4 on V100, 1 on K80; B: 2 and 1.  A on the V100 and B on the K80 give 5 > 3.
    thr = np.array([[4.0, 1.0], [2.0, 1.0]])
    x = AllocationLP(ONE_EACH, ONE_EACH, solver="simplex").max_sum(thr)
    np.testing.assert_allclose(x, [[1, 0], [0, 1]], atol=1e-7)
    x = AllocationLP(ONE_EACH, ONE_EACH).max_sum(thr)
    np.testing.assert_allclose(x, [[1, 0], [0, 1]], atol=1e-5)


def test_min_total_duration_by_hand():
    # A (4000 iterations) at 4 it/s on the V100 and B (1000) at 1 it/s on the K80 both take
    # 1000 s; A cannot go faster, so T* = 1000 and Gavel's bisection ends within 5% above.
    thr = np.array([[4.0, 1.0], [2.0, 1.0]])
    rem = np.array([4000.0, 1000.0])
    T = _gavel_bisection(lambda t: t >= 1000.0)
    assert 1000.0 <= T <= 1050.0
    x = makespan_allocation(AllocationLP(ONE_EACH, ONE_EACH), thr, rem)
    assert np.all(_y(thr, x) >= rem / T * (1 - 1e-6))


def test_finish_time_fairness_by_hand():
    # one GPU, two jobs at 1 it/s: A 100 iterations left, isolated finish 200 s; B waited
    # 300 s, 300 left, isolated finish 600 s.  rho_A = 0.5 / y_A, rho_B = 0.5 + 0.5 / y_B,
    # y_A + y_B = 1: y_A^2 - 3 y_A + 1 = 0, y_A = (3 - sqrt 5) / 2.
    lp = AllocationLP(np.array([1.0, 1.0]), np.array([1.0]))
    x = finish_time_fair_allocation(lp, np.ones((2, 1)), np.array([0.0, 300.0]),
                                    np.array([100.0, 300.0]), np.array([200.0, 600.0]), 1e-6)
    assert x[0, 0] == pytest.approx((3 - math.sqrt(5)) / 2, abs=1e-4)
    assert x.sum() == pytest.approx(1.0, abs=1e-5)


def test_isolated_allocation_by_hand():
    # 2 + 2 GPUs, scale factors 1 and 4: 1 GPU of each type per job, over the scale factor,
    # rows above 1 scaled down: A (1, 1) -> (0.5, 0.5); B (0.25, 0.25).
    x = isolated_allocation(np.array([1.0, 4.0]), np.array([2.0, 2.0]))
    np.testing.assert_allclose(x, [[0.5, 0.5], [0.25, 0.25]])


# -- the round mechanism ------------------------------------------------------------------
def _two_gpu_cluster():
    return Cluster(name="toy", gpu_types=("fast", "slow"), node_gpus=np.array([1, 1], np.int32),
                   node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                   intra_bw_gbps=np.full(2, 100.0), inter_bw_gbps=np.full(2, 10.0))


def _state(cluster, jobs, now, active, placement, reasons=4):
    """placement: {job id: node} (one GPU each)."""
    active = np.asarray(active, np.int64)
    nodes = [placement[j] for j in active if j in placement]
    lens = [1 if j in placement else 0 for j in active]
    indptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    return SchedState(now=now, reasons=reasons, cluster=cluster, jobs=jobs, active=active,
                      ngpu=np.asarray(lens, np.int32), remaining=jobs.work[active].copy(),
                      attained_gpu_s=np.zeros(active.size), run_s=np.zeros(active.size),
                      queued_since=np.zeros(active.size), pl_indptr=indptr,
                      pl_nodes=np.asarray(nodes, np.int32),
                      pl_counts=np.ones(len(nodes), np.int32), oracle=LinearOracle())


def _placed(state, plan):
    return {int(state.active[i]): int(plan.nodes[plan.indptr[i]])
            for i in range(state.active.size) if plan.indptr[i + 1] > plan.indptr[i]}


def test_rounds_rotate_by_time_received():
    # three equal one-GPU jobs, one fast and one slow GPU: X = 1/3 everywhere.  Round 1
    # (t=0): equal priorities, ties by id: job 0 fast, job 1 slow.  Round 2: fractions
    # fast (3/5, 1/5, 1/5), slow (1/5, 3/5, 1/5): job 1 fast, job 0 slow.  Round 3: job 2
    # (1/7 on both) first: fast; slow: jobs 0 and 1 tie at 3/7, job 0 keeps its GPU.
    cluster = _two_gpu_cluster()
    jobs = specs([0.0, 0.0, 0.0], [1, 1, 1], [1e9] * 3, delay=0.0)
    pol = get_policy("gavel-max-min-fairness-perf")
    s1 = _state(cluster, jobs, 0.0, [0, 1, 2], {}, reasons=1)
    p1 = pol.schedule(s1)
    assert _placed(s1, p1) == {0: 0, 1: 1} and p1.wakeup == 360.0
    np.testing.assert_allclose(pol.alloc[:3], 1 / 3, rtol=1e-4)
    s2 = _state(cluster, jobs, 360.0, [0, 1, 2], {0: 0, 1: 1}, reasons=8)
    p2 = pol.schedule(s2)
    assert _placed(s2, p2) == {1: 0, 0: 1}
    s3 = _state(cluster, jobs, 720.0, [0, 1, 2], {1: 0, 0: 1}, reasons=8)
    p3 = pol.schedule(s3)
    assert _placed(s3, p3) == {2: 0, 0: 1}
    assert pol.lease_extensions == 1


def test_new_job_waits_for_the_reset_interval():
    # job 0 arrives at t=100 (first reset); job 1 at 200.  It gets no allocation, so no
    # GPU, until a round at least 1920 s after the last reset: rounds 460 ... 1900 leave the
    # slow GPU idle, the round at 2260 places it.  A mid-round arrival changes nothing.
    cluster = _two_gpu_cluster()
    jobs = specs([100.0, 200.0], [1, 1], [1e9] * 2, delay=0.0)
    pol = get_policy("gavel-max-min-fairness-perf")
    s = _state(cluster, jobs, 100.0, [0], {}, reasons=1)
    assert _placed(s, pol.schedule(s)) == {0: 0}
    s = _state(cluster, jobs, 200.0, [0, 1], {0: 0}, reasons=1)
    assert _placed(s, pol.schedule(s)) == {0: 0}
    for t in (460.0, 820.0, 1180.0, 1540.0, 1900.0):
        s = _state(cluster, jobs, t, [0, 1], {0: 0}, reasons=8)
        assert _placed(s, pol.schedule(s)) == {0: 0}, t
    s = _state(cluster, jobs, 2260.0, [0, 1], {0: 0}, reasons=8)
    assert set(_placed(s, pol.schedule(s))) == {0, 1}


def test_integral_steps_per_round_as_gavel():
    # Gavel's micro-task (scheduler.py _get_num_steps): min(int(rate * 360), remaining)
    # iterations, the round ends with the last one.  Job a runs 0.7 it/s: int(251.99...) = 251
    # iterations a round (358.57 s), job b 2 it/s: 720 (360 s).  Rounds last 360 s; a does
    # 251 iterations in each (rate scale 251 / (0.7 * 360)), so its 1000 iterations end in
    # round 4 at 3 * 360 + 247 / 0.7 s, not at 1000 / 0.7 s (b's 720 fill its rounds exactly).
    from sim.jobs import JobTable
    oracle = TableThroughput({"v100": {"a": {1: 0.7}, "b": {1: 2.0}}}, reference_type="v100")
    cluster = Cluster(name="toy", gpu_types=("v100",), node_gpus=np.array([1, 1], np.int32),
                      node_type=np.array([0, 0], np.int32), node_speed=np.ones(2),
                      intra_bw_gbps=np.full(2, 100.0), inter_bw_gbps=np.full(2, 10.0))
    wl = JobTable.from_columns(arrival_s=np.zeros(2), gpus=np.ones(2, np.int32),
                               iterations=np.array([1000.0, 1e5]), model=np.array(["a", "b"]))
    for name in ("gavel-fifo-perf", "gavel-max-min-fairness-perf"):
        res = simulate(cluster, wl, get_policy(name), oracle, EngineConfig(restart_delay_s=0.0))
        assert res.finish[0] == pytest.approx(3 * 360.0 + 247 / 0.7, rel=1e-12), name
        assert res.finish[1] == pytest.approx(1e5 / 2.0, rel=1e-12), name


def test_a_job_that_overruns_its_last_round_gets_whole_rounds():
    # Two 4-GPU jobs of 3000 iterations at 8 it/s alternate on one 4-GPU server, 5 s restart
    # delay (Gavel's simulator has none).  Rounds 1-2 (0, 360): 2880 iterations each.  Round
    # 3 (720): job 0 is to finish its 120 in 15 s, but the restart delay leaves it 40 short at
    # the round's end (735); round 4: job 1 likewise (735-750).  From then on each gets whole
    # rounds, else the rounds would shrink to less than the restart delay and nobody would
    # progress: job 0 restarts at 750 and ends at 760, job 1 at 760 + 5 + 5 = 770.
    from sim.cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS
    cluster = Cluster(name="toy", gpu_types=("fast",), node_gpus=np.array([4], np.int32),
                      node_type=np.array([0], np.int32), node_speed=np.ones(1),
                      intra_bw_gbps=np.full(1, DEFAULT_INTRA_BW_GBPS),
                      inter_bw_gbps=np.full(1, DEFAULT_INTER_BW_GBPS))
    pol = get_policy("gavel-max-min-fairness-perf")
    res = run_jobs(cluster, specs([0.0, 0.0], [4, 4], [3000.0, 3000.0], delay=5.0), pol,
                   LinearOracle(), EngineConfig())
    np.testing.assert_allclose(res.finish, [760.0, 770.0], rtol=1e-12)
    assert pol.rounds <= 8


def test_fifo_forgets_finished_jobs_when_none_is_left():
    # Gavel computes an allocation also when no job is active; its FIFO then deletes the
    # finished jobs from its allocation, so a later arrival does not inherit their types.
    cluster = _two_gpu_cluster()
    jobs = specs([0.0, 9000.0], [1, 1], [1e9] * 2, delay=0.0)
    pol = get_policy("gavel-fifo")
    s = _state(cluster, jobs, 0.0, [0], {}, reasons=1)
    pol.schedule(s)
    assert pol.fifo_type[0] >= 0
    s = _state(cluster, jobs, 5000.0, [], {}, reasons=8)       # job 0 done, job 1 not yet here
    pol.schedule(s)
    assert pol.fifo_type[0] == -1


def test_job_never_runs_where_its_throughput_is_zero():
    table = {"v100": {"a": {1: 2.0}, "b": {1: 1.0}}, "k80": {"a": {1: 0.0}, "b": {1: 0.5}}}
    oracle = TableThroughput(table, reference_type="v100")
    cluster = Cluster(name="toy", gpu_types=("v100", "k80"), node_gpus=np.array([1, 1], np.int32),
                      node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                      intra_bw_gbps=np.full(2, 100.0), inter_bw_gbps=np.full(2, 10.0))
    from sim.jobs import JobTable
    wl = JobTable.from_columns(arrival_s=np.zeros(3), gpus=np.ones(3, np.int32),
                               duration_s=np.full(3, 3600.0), model=np.array(["a", "a", "b"]))
    for name in GAVEL:
        res = simulate(cluster, wl, get_policy(name), oracle, EngineConfig(restart_delay_s=0.0))
        assert np.all(res.gpu_types_used[:2] == 1), name     # model "a" only on the v100


# -- bad input ------------------------------------------------------------------------------
def test_zero_throughput_everywhere_names_the_job():
    cluster = _two_gpu_cluster()
    jobs = specs([0.0, 0.0], [1, 1], [10.0, 10.0], model=[1, 0], delay=0.0)

    class Dead(LinearOracle):                # model 1 cannot run anywhere
        def rates(self, model_idx, *args):
            return super().rates(model_idx, *args) * (np.asarray(model_idx) != 1)

    s = _state(cluster, jobs, 0.0, [0, 1], {}, reasons=1)
    s = SchedState(**{**s.__dict__, "oracle": Dead()})
    with pytest.raises(ConfigError, match="job 0 .*throughput is 0 on every GPU type"):
        get_policy("gavel-max-min-fairness-perf").schedule(s)


def test_scale_factor_beyond_every_type_names_the_job():
    cluster = _two_gpu_cluster()
    jobs = specs([0.0, 0.0], [1, 2], [10.0, 10.0], delay=0.0)
    s = _state(cluster, jobs, 0.0, [0, 1], {}, reasons=1)
    with pytest.raises(ConfigError, match="job 1 .*asks for 2 GPUs"):
        get_policy("gavel-fifo").schedule(s)


def test_bad_parameters():
    with pytest.raises(ConfigError, match="solver"):
        get_policy("gavel-max-min-fairness", solver="cvxpy")


def test_structured_fast_takes_a_close_to_optimal_end_as_it_is():
    # the LP of tests/test_gavel_hsd.py's CLOSE_TO_OPTIMAL: "structured" reruns it to full
    # accuracy, "structured-fast" keeps where the normal equations stopped (ECOS's
    # reduced-accuracy tolerances met)
    scale, capacity = np.array([8.0, 2.0, 8.0, 2.0, 1.0, 8.0]), np.array([11.0, 1.0])
    thr = np.repeat([[0.5], [1.0], [0.5], [1.0], [40.0], [0.5]], 2, axis=1)
    strict, fast = AllocationLP(scale, capacity, "structured"), AllocationLP(scale, capacity)
    X, Xf = strict.max_sum(thr), fast.max_sum(thr)
    assert strict.ecos_path_inaccurate == 0 and fast.ecos_path_inaccurate == 1
    assert 1e-7 < np.abs(Xf - X).max() < 1e-4
    assert get_policy("gavel-max-sum-throughput-perf").solver == "structured-fast"      # the default
    assert get_policy("gavel-max-sum-throughput-perf", solver="structured").solver == "structured"
    with pytest.raises(ConfigError, match="time_per_round_s"):
        get_policy("gavel-isolated", time_per_round_s=0)


# -- end to end ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gavel_run():
    oracle = TableThroughput.builtin()
    jobs = generate_workload(40, load_jobs_per_hour=8, seed=1, throughput=oracle)
    return load_cluster("gavel-108"), jobs, oracle


@pytest.mark.parametrize("name", GAVEL)
def test_every_gavel_policy_runs_on_gavel_108(gavel_run, name):
    cluster, jobs, oracle = gavel_run
    pol = get_policy(name)
    decide = pol.schedule

    def one_type_per_job(state):                        # no plan mixes types in a job
        plan = decide(state)
        owner = np.repeat(np.arange(state.active.size), np.diff(plan.indptr))
        types = cluster.node_type[plan.nodes]
        assert np.all(types == types[np.searchsorted(owner, owner)])
        return plan

    pol.schedule = one_type_per_job
    res = simulate(cluster, jobs, pol, oracle, EngineConfig(restart_delay_s=0.0))
    assert np.all(np.isfinite(res.finish)) and summary(res)["avg_jct_s"] > 0


@pytest.mark.parametrize("name", ["gavel-max-min-fairness-perf", "gavel-finish-time-fairness",
                                  "gavel-fifo", "gavel-min-total-duration-perf"])
def test_skipped_mid_round_decisions_change_nothing(gavel_run, monkeypatch, name):
    # the engine skips arrivals and completions inside a round (GavelRounds.skips_mid_round)
    # and reports the completions to the policy: the same run, job for job and point for point
    from sim.policies.gavel_rounds import GavelRounds
    cluster, jobs, oracle = gavel_run
    config = EngineConfig(restart_delay_s=0.0)
    skipped = simulate(cluster, jobs, get_policy(name), oracle, config)
    monkeypatch.setattr(GavelRounds, "skips_mid_round", False)
    asked = simulate(cluster, jobs, get_policy(name), oracle, config)
    assert skipped.skipped_decisions > 0 and asked.skipped_decisions == 0
    assert skipped.decisions + skipped.skipped_decisions == asked.decisions
    np.testing.assert_array_equal(skipped.finish, asked.finish)
    np.testing.assert_array_equal(skipped.first_start, asked.first_start)
    for got, want in zip(skipped.timeline.arrays().values(), asked.timeline.arrays().values()):
        np.testing.assert_array_equal(got, want)


def _same_run(got, want):
    np.testing.assert_array_equal(got.finish, want.finish)
    np.testing.assert_array_equal(got.first_start, want.first_start)
    np.testing.assert_array_equal(got.restarts, want.restarts)
    for a, b in zip(got.timeline.arrays().values(), want.timeline.arrays().values()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(got.fragmentation["fgd"], want.fragmentation["fgd"], rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(got.fragmentation["idle_gpus_while_waiting"],
                                  want.fragmentation["idle_gpus_while_waiting"])
    assert (got.decisions, got.skipped_decisions) == (want.decisions, want.skipped_decisions)


def _quiet_runs(monkeypatch, cluster, jobs, oracle, name, caps=(0, 1, 3)):
    """The run with the kernel passing over mid-round points (sk_engine_step_quiet), and with
    its row buffer of each size in ``caps`` (0: every point back to Python, ``_mid_round``);
    the Python path's rounds (the native rounds: tests/test_gavel_native.py)."""
    from sim.engine import QuietRows
    config = EngineConfig(restart_delay_s=0.0, native=False)
    fast = simulate(cluster, jobs, get_policy(name), oracle, config)
    others = []
    for cap in caps:
        monkeypatch.setattr(QuietRows, "CAP", cap)
        others.append(simulate(cluster, jobs, get_policy(name), oracle, config))
    monkeypatch.undo()
    return fast, others


@pytest.mark.parametrize("name", ["gavel-max-min-fairness-perf", "gavel-fifo",
                                  "gavel-min-total-duration-perf"])
def test_kernel_passes_over_mid_round_points_as_python_does(gavel_run, monkeypatch, name):
    fast, others = _quiet_runs(monkeypatch, *gavel_run, name)
    assert fast.skipped_decisions > 0
    for other in others:
        _same_run(fast, other)


def test_all_ten_gavel_names_registered():
    assert GAVEL == sorted([
        "gavel-fifo", "gavel-fifo-perf", "gavel-finish-time-fairness", "gavel-gandiva",
        "gavel-finish-time-fairness-perf", "gavel-isolated", "gavel-max-min-fairness",
        "gavel-max-min-fairness-perf", "gavel-max-sum-throughput-perf",
        "gavel-min-total-duration-perf"])


# -- the round kernels agree with their plain-Python references ---------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from reference_gavel_rounds import assign_workers_reference, select_jobs_reference  # noqa: E402
from sim.errors import SimError  # noqa: E402
from sim.policies.gavel_kernels import assign_workers, select_jobs  # noqa: E402


@st.composite
def _round_inputs(draw):
    m = draw(st.integers(1, 3))
    n_nodes = draw(st.integers(1, 6))
    node_type = np.array(draw(st.lists(st.integers(0, m - 1), min_size=n_nodes, max_size=n_nodes)))
    node_gpus = np.array(draw(st.lists(st.integers(1, 4), min_size=n_nodes, max_size=n_nodes)))
    n = draw(st.integers(0, 8))
    scale = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n)), np.int64)
    pri = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=n * m,
                                 max_size=n * m))).reshape(n, m)
    thr = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 3.0]), min_size=n * m,
                                 max_size=n * m))).reshape(n, m)
    # previous placements: some jobs on one node each, within the node's GPUs
    prev_node = np.array(draw(st.lists(st.integers(-1, n_nodes - 1), min_size=n, max_size=n)), np.int64)
    lens = (prev_node >= 0).astype(np.int64)
    pl_nodes = prev_node[prev_node >= 0]
    pl_counts = np.minimum(scale[lens > 0], node_gpus[pl_nodes]) if pl_nodes.size else np.zeros(0, np.int64)
    return dict(m=m, node_type=node_type, node_gpus=node_gpus, scale=scale, pri=pri, thr=thr,
                pl_indptr=np.r_[0, np.cumsum(lens)].astype(np.int64), pl_nodes=pl_nodes,
                pl_counts=pl_counts.astype(np.int64),
                prev_type=np.where(lens > 0, node_type[np.maximum(prev_node, 0)], -1),
                placeable=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool),
                order=np.array(draw(st.permutations(list(range(m))))),
                skip=draw(st.booleans()))


@settings(max_examples=80, deadline=None)
@given(d=_round_inputs())
def test_round_kernels_match_reference(d):
    n, m = d["scale"].size, d["m"]
    queues = np.stack([np.argsort(-d["pri"][:, t], kind="stable") for t in range(m)]) if n \
        else np.zeros((m, 0), np.int64)
    left = np.bincount(d["node_type"], weights=d["node_gpus"], minlength=m).astype(np.int64)
    args = (d["order"], queues, d["thr"], d["pri"], d["scale"], left, d["skip"])
    chosen = select_jobs(*args)
    np.testing.assert_array_equal(chosen, select_jobs_reference(*args))
    wargs = (d["order"], chosen, d["scale"], d["placeable"], d["prev_type"], d["pl_indptr"],
             d["pl_nodes"], d["pl_counts"], d["node_type"], d["node_gpus"])
    want = assign_workers_reference(*wargs)
    if want is None:
        with pytest.raises(SimError, match="could not assign"):
            assign_workers(*wargs, "gavel-x", np.arange(n))
        return
    got = assign_workers(*wargs, "gavel-x", np.arange(n))
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    assert got[3] == want[3]


@settings(max_examples=80, deadline=None)
@given(d=_round_inputs(), data=st.data())
def test_round_plan_matches_reference(d, data):
    """The fused round kernel (priorities, queues, pick, assignment, plan) against the numpy
    code it replaced, on job ids that are a subset of a larger run."""
    from reference_gavel_rounds import round_plan_reference
    from sim.policies.gavel_kernels import round_plan
    n, m = d["scale"].size, d["m"]
    n_jobs = n + data.draw(st.integers(0, 3))
    ids = np.sort(np.array(data.draw(st.permutations(list(range(n_jobs))))[:n], np.int64))
    vals = st.sampled_from([0.0, 0.25, 0.5, 1.0])
    per_job = lambda: np.array(data.draw(st.lists(vals, min_size=n_jobs * m, max_size=n_jobs * m))
                               ).reshape(n_jobs, m)
    alloc, deficit = per_job(), per_job() - 0.5
    time_so_far = per_job() * 360.0
    in_alloc = np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs)), bool)
    worker_time = np.array(data.draw(st.lists(st.sampled_from([0.0, 180.0, 900.0]), min_size=m,
                                              max_size=m)))
    left = np.bincount(d["node_type"], weights=d["node_gpus"], minlength=m).astype(np.int64)
    args = (ids, d["thr"], alloc, deficit, time_so_far, in_alloc, worker_time, d["order"],
            d["scale"], left, d["skip"], d["pl_indptr"], d["pl_nodes"], d["pl_counts"],
            d["node_type"], d["node_gpus"])
    want = round_plan_reference(*args)
    if want is None:
        with pytest.raises(SimError, match="could not assign"):
            round_plan(*args, "gavel-x")
        return
    got = round_plan(*args, "gavel-x")
    for g, w in zip(got[:4], want[:4]):
        np.testing.assert_array_equal(g, w)
    assert got[4] == want[4]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_queues_are_lexsort_order(data):
    """The queue sort (radix on the priority's top bits, then insertion runs and merges on the
    whole comparison) gives np.lexsort's stable order, on more jobs than one insertion run,
    with many ties in every key, priorities equal in their top bits only, signed zeros,
    negatives and subnormals."""
    from sim.policies.gavel_kernels import QUEUE_RUN, _queues
    n = data.draw(st.integers(0, 20 * QUEUE_RUN))
    m = data.draw(st.integers(1, 3))
    values = st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.0 + 2**-40, 1.0 - 2**-45, 1e9, -3.0, 5e-324,
                              np.nextafter(1e9, 2e9)])
    keys = st.lists(values | st.floats(-1e12, 1e12), min_size=n * m, max_size=n * m)
    pri, deficit, x = (np.array(data.draw(keys)).reshape(n, m) for _ in range(3))
    got = _queues(pri, deficit, x)
    for t in range(m):
        np.testing.assert_array_equal(got[t], np.lexsort((-x[:, t], -deficit[:, t], -pri[:, t])))


@st.composite
def _lp_inputs(draw):
    n, m = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    scale = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n)), float)
    capacity = np.array(draw(st.lists(st.integers(1, 8), min_size=m, max_size=m)), float)
    a = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), min_size=n * m,
                               max_size=n * m))).reshape(n, m)
    need = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 2.0]), min_size=n, max_size=n)))
    return scale, capacity, a, need, draw(st.sampled_from(["ipm", "simplex"]))


@settings(max_examples=60, deadline=None)
@given(d=_lp_inputs())
def test_direct_highs_matches_linprog(d):
    """AllocationLP calls HiGHS directly; the solutions are linprog's, to the last digit."""
    from reference_gavel_lp import feasible_reference, max_min_reference, max_sum_reference
    scale, capacity, a, need, solver = d
    lp = AllocationLP(scale, capacity, solver)
    want = max_min_reference(scale, capacity, a, solver)
    if want is None:
        with pytest.raises(SimError, match="max-min LP failed"):
            lp.max_min(a)
    else:
        x, z = lp.max_min(a)
        np.testing.assert_array_equal(x, want[0])
        assert z == want[1]
    np.testing.assert_array_equal(lp.max_sum(a), max_sum_reference(scale, capacity, a, solver))
    got, want = lp.feasible(a, need), feasible_reference(scale, capacity, a, need, solver)
    assert (got is None) == (want is None)
    if got is not None:
        np.testing.assert_array_equal(got, want)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_max_min_coefficients_kernel_matches_reference(data):
    """Gavel's max-min rows, kernel against plain Python and against the numpy code it
    replaced, bit for bit: zero throughputs, a job that runs nowhere (inf or NaN rows, as
    before), one type, more than 8 types (NumPy's pairwise sum), no job."""
    from reference_gavel_lp import max_min_coefficients_reference
    from sim.policies.gavel_lp import max_min_coefficients, proportional_share
    n, m = data.draw(st.integers(0, 6)), data.draw(st.integers(1, 20))
    thr = np.array(data.draw(st.lists(st.sampled_from([0.0, 1e-3, 0.37, 1.0, 7.9, 1234.5]),
                                      min_size=n * m, max_size=n * m))).reshape(n, m)
    scale = np.array(data.draw(st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0]), min_size=n, max_size=n)))
    weight = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=n, max_size=n)))
    capacity = np.array(data.draw(st.lists(st.integers(1, 40), min_size=m, max_size=m)), float)
    share = proportional_share(max(n, 1), capacity)
    got = max_min_coefficients(thr, scale, weight, share)
    np.testing.assert_array_equal(got, max_min_coefficients_reference(thr, scale, weight, share))
    with np.errstate(divide="ignore", invalid="ignore"):
        before = thr * (scale / (weight * np.sum(thr * share, axis=1)))[:, None]
    np.testing.assert_array_equal(got, before)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_acceptance_kernel_matches_reference(data):
    """linprog's acceptance test, kernel against the numpy test it replaced: values at and
    just past the tolerance, NaN, infinite bounds, empty arrays."""
    from reference_gavel_lp import within_bounds_reference
    from sim.policies.gavel_lp import _FEASIBILITY_TOL, within_bounds
    tol = _FEASIBILITY_TOL
    value = st.sampled_from([0.0, -tol, -2 * tol, 0.5, 1.0, 1.0 + tol, 1.0 + 2 * tol, np.nan, np.inf])
    n_cols, n_rows = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 6))
    x = np.array(data.draw(st.lists(value, min_size=n_cols, max_size=n_cols)), float)
    col_upper = np.array(data.draw(st.lists(st.sampled_from([1.0, np.inf]), min_size=n_cols,
                                            max_size=n_cols)), float)
    row_value = st.one_of(value, st.sampled_from([tol, 2 * tol]))   # 0 - tol: at the tolerance
    activity = np.array(data.draw(st.lists(row_value, min_size=n_rows, max_size=n_rows)), float)
    upper = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 36.0]), min_size=n_rows,
                                        max_size=n_rows)), float)
    with np.errstate(invalid="ignore"):                  # inf - inf in the reference
        want = within_bounds_reference(x, activity, upper, col_upper, tol)
    assert within_bounds(x, activity, upper, col_upper, tol) == want


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_credit_kernels_match_reference(data):
    """The round-time bookkeeping kernels against the numpy code they replaced, in place."""
    from reference_gavel_rounds import (credit_completed_reference, credit_finished_reference,
                                        credit_running_reference)
    from sim.policies.gavel_kernels import credit_completed, credit_finished, credit_running
    n_jobs, m = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 3))
    ids = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs))))
    ran_on = np.array(data.draw(st.lists(st.integers(-1, m - 1), min_size=n_jobs, max_size=n_jobs)), np.int64)
    member = np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs)), bool)
    time_so_far = np.array(data.draw(st.lists(st.sampled_from([180.0, 0.1, 1e7]), min_size=n_jobs * m,
                                              max_size=n_jobs * m))).reshape(n_jobs, m)
    worker_time = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.3, 1e9]), min_size=m, max_size=m)))
    elapsed = data.draw(st.sampled_from([0.1, 360.0, 123.456]))
    credit = np.array(data.draw(st.lists(st.sampled_from([0.1, 359.998, 360.0, 1e4]), min_size=n_jobs,
                                         max_size=n_jobs)))       # per job id (credit_running)
    completed = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs,
                                                           max_size=n_jobs))))
    for kernel, ref, extra, spent, which in (
            (credit_finished, credit_finished_reference, (), elapsed, ids),
            (credit_running, credit_running_reference, (time_so_far,), credit, ids),
            (credit_completed, credit_completed_reference, (), elapsed, completed)):
        got = [a.copy() for a in (ran_on, member, *extra, worker_time)]
        want = [a.copy() for a in (ran_on, member, *extra, worker_time)]
        assert kernel(which, *got, spent) == ref(which, *want, spent)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_settle_deficits_kernel_matches_reference(data):
    """The reset's deficit bookkeeping, kernel against the numpy code it replaced, in place
    and bit for bit (jobs in and out of the old allocation, no active job)."""
    from reference_gavel_rounds import settle_deficits_reference
    from sim.policies.gavel_kernels import settle_deficits
    n_jobs, m = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 3))
    ids = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs))))
    in_alloc = np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs)), bool)
    cell = st.sampled_from([0.0, 1e-9, 0.25, 1.0 / 3.0, 1.0])
    alloc = np.array(data.draw(st.lists(cell, min_size=n_jobs * m, max_size=n_jobs * m))).reshape(n_jobs, m)
    arrays = [np.array(data.draw(st.lists(st.sampled_from(values), min_size=n_jobs * m,
                                          max_size=n_jobs * m))).reshape(n_jobs, m)
              for values in ([180.0, 0.1, 1e7, 359.97], [0.0, -1234.5, 3.3e5])]   # time, deficit
    elapsed = data.draw(st.sampled_from([0.0, 360.0, 1920.0, 123.456]))
    got = [a.copy() for a in arrays]
    want = [a.copy() for a in arrays]
    settle_deficits(ids, in_alloc, alloc, *got, elapsed, 180.0)
    settle_deficits_reference(ids, in_alloc, alloc, *want, elapsed, 180.0)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_micro_tasks_kernel_matches_reference(data):
    """Gavel's micro-tasks of a round, kernel against the numpy code it replaced, in place
    and bit for bit (hidden remaining work, overruns, rates that do not fill a step)."""
    from reference_gavel_rounds import micro_tasks_reference
    from sim.policies.gavel_kernels import micro_tasks
    n_jobs = data.draw(st.integers(1, 9))
    active = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs,
                                                        max_size=n_jobs))))
    if active.size == 0:
        active = np.array([0])
    placed = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=active.size,
                                                        max_size=active.size))))
    if placed.size == 0:
        placed = np.array([0])
    k = placed.size
    rate = np.array(data.draw(st.lists(st.sampled_from([1e-4, 0.0021, 0.5, 3.7, 250.0]),
                                       min_size=k, max_size=k)))
    remaining = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 77.0, 1e6, np.nan]),
                                            min_size=k, max_size=k)))
    flags = [np.array(data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs)))
             for _ in range(2)]
    credit = np.zeros(n_jobs)
    now, start = data.draw(st.sampled_from([(0.0, 0.0), (3600.0, 3240.5), (1e6, 999_640.0)]))
    got = [a.copy() for a in (*flags, credit)]
    want = [a.copy() for a in (*flags, credit)]
    end, scale = micro_tasks(now, 360.0, rate, remaining, active, placed, *got, start)
    end_ref, scale_ref = micro_tasks_reference(now, 360.0, rate, remaining, active, placed, *want,
                                               start)
    assert end == end_ref
    np.testing.assert_array_equal(scale, scale_ref)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_linprog_fallback_gives_the_direct_solutions(monkeypatch):
    """Without HiGHS bindings (scipy < 1.15, no highspy) the LPs go through linprog: the
    same solutions."""
    import sim.policies.gavel_lp as gavel_lp
    rng = np.random.default_rng(3)
    scale, capacity = rng.choice([1.0, 2.0, 4.0], 12), np.array([8.0, 6.0, 4.0])
    a = rng.uniform(0.0, 3.0, (12, 3))
    direct = AllocationLP(scale, capacity)
    got = (direct.max_min(a), direct.max_sum(a), direct.feasible(a, np.full(12, 0.1)))
    monkeypatch.setattr(gavel_lp, "_HIGHS", gavel_lp._LinprogHighs())
    slow = AllocationLP(scale, capacity)
    want = (slow.max_min(a), slow.max_sum(a), slow.feasible(a, np.full(12, 0.1)))
    np.testing.assert_array_equal(got[0][0], want[0][0])
    assert got[0][1] == want[0][1]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_finish_time_fairness_skips_only_decided_steps(data):
    """The bisection that skips the steps earlier solves decide returns the X of the plain
    bisection (every step solved), to the last digit."""
    from reference_gavel_lp import finish_time_fair_reference
    n, m = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 3))
    scale = np.array(data.draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n)), float)
    capacity = np.array(data.draw(st.lists(st.integers(4, 8), min_size=m, max_size=m)), float)
    thr = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.5]), min_size=n * m,
                                      max_size=n * m))).reshape(n, m)
    since = np.array(data.draw(st.lists(st.sampled_from([0.0, 100.0, 3600.0, 36000.0]),
                                        min_size=n, max_size=n)))
    remaining = np.array(data.draw(st.lists(st.sampled_from([1e2, 1e4, 1e6]), min_size=n, max_size=n)))
    iso = np.sum(thr * isolated_allocation(scale, capacity), axis=1)
    isolated = data.draw(st.sampled_from([0.0, 0.5, 1.0])) * since + remaining / iso
    lp = AllocationLP(scale, capacity)
    got = finish_time_fair_allocation(lp, thr, since, remaining, isolated, 1e-4)
    np.testing.assert_array_equal(got, finish_time_fair_reference(lp, thr, since, remaining,
                                                                  isolated, 1e-4))


def test_max_min_lp_that_stalls_the_ipm_is_solved_by_the_simplex():
    # A 124-job max-min LP of the Hops FTF experiment (hops-512, seed 2) on which HiGHS's IPM
    # without crossover stops short of an optimum (coefficients 0.4-162): the run went on
    # only with the simplex's second try, which reaches the same optimum.
    from pathlib import Path
    d = np.load(Path(__file__).with_name("gavel_ipm_stall_lp.npz"))
    lp = AllocationLP(d["scale"], d["capacity"], "ipm")
    x, z = lp.max_min(d["a"])
    _, z_simplex = AllocationLP(d["scale"], d["capacity"], "simplex").max_min(d["a"])
    assert z == pytest.approx(z_simplex, rel=1e-6)
    assert np.all((d["a"] * x).sum(axis=1) >= z * (1 - 1e-6))
    assert x.sum(axis=1).max() <= 1 + 1e-6


def test_a_failed_ipm_solve_falls_back_to_the_simplex(monkeypatch):
    import sim.policies.gavel_lp as gl
    solve = gl._HIGHS.solve
    monkeypatch.setattr(gl._HIGHS, "solve", lambda solver, *rest: None if solver == "ipm" else solve(solver, *rest))
    lp = AllocationLP(np.array([1, 1]), np.array([1, 1]), "ipm")
    x, z = lp.max_min(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert lp.simplex_fallbacks == 1 and z == pytest.approx(2.0)
    np.testing.assert_allclose(x, [[0.0, 1.0], [1.0, 0.0]], atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_throughput_cache_is_the_states_matrix(data):
    """The rows a ThroughputCache keeps across active sets (and resets for another oracle)
    are the state's own ``type_throughputs``, whatever the sequence of active sets."""
    from engine_helpers import BarredOracle
    from sim.policies.gavel_rounds import ThroughputCache
    cluster = _two_gpu_cluster()
    n = 6
    jobs = specs([0.0] * n, data.draw(st.lists(st.sampled_from([1, 2]), min_size=n, max_size=n)),
                 [10.0] * n, model=data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    cache, oracles = ThroughputCache(), (LinearOracle(), BarredOracle())
    for _ in range(data.draw(st.integers(1, 6))):
        active = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n)))
        s = _state(cluster, jobs, 0.0, active, {})
        s = SchedState(**{**s.__dict__, "oracle": oracles[data.draw(st.integers(0, 1))]})
        np.testing.assert_array_equal(cache.get(s), s.type_throughputs)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 30), load=st.sampled_from([4.0, 12.0, 40.0]),
       name=st.sampled_from(["gavel-max-min-fairness-perf", "gavel-fifo-perf",
                             "gavel-finish-time-fairness"]))
def test_quiet_stepping_matches_python_on_random_traces(seed, n, load, name):
    # sk_engine_step_quiet against its plain-Python reference: every mid-round point returned to
    # Python and skipped there (Engine._mid_round), with full and tiny row buffers
    import pytest as _pytest
    oracle = TableThroughput.builtin()
    jobs = generate_workload(n, load_jobs_per_hour=load, seed=seed, throughput=oracle)
    with _pytest.MonkeyPatch.context() as mp:
        fast, others = _quiet_runs(mp, load_cluster("gavel-108"), jobs, oracle, name, caps=(0, 1))
    for other in others:
        _same_run(fast, other)
