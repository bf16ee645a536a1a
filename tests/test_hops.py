"""Hops (paper 3): toy cases with hand-worked answers, the estimator, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.hops.configs import Configs, generate_configs, requirement_sets
from sim.hops.estimator import ThroughputEstimator
from sim.hops.ilp import gain, prior_weights, solve, solve_ilp
from sim.hops.metrics import fragments_per_round, max_ftf_rho_by_duration, max_latency_ratio, raqlr
from sim.hops.servers import ServerTruth
from sim.hops.window import sensitivity_adjust, service_window
from sim.policies import get_policy
from sim.presets import get_preset
from sim.state import ROUND, SchedState


def test_service_window_stops_at_first_job_reaching_the_cluster():
    # cumulative R_1: 2, 6, 7, 15 -> reaches 8 GPUs at the 4th job
    assert service_window(np.array([2, 4, 1, 8, 3]), 8) == 4
    assert service_window(np.array([2, 6, 5]), 8) == 2       # 2 + 6 = 8 counts (>=)
    assert service_window(np.array([1, 1]), 8) == 2          # never reached: the whole queue


def test_sensitivity_adjust_adds_low_sensitivity_jobs_past_the_window():
    rho = np.array([2.0, 1.9, 1.0, 1.7, 1.1, 1.0])           # queue mean 1.45
    rmin = np.array([1, 1, 4, 1, 2, 1])
    in_set = np.array([True, True, False, False, False, False])
    # set mean 1.95 > 1.45: walk from position 2: job 2 needs 4 > 3 idle, job 3 rho 1.7 >= mean,
    # job 4 (rho 1.1, R_1 2) joins -> set mean 1.67, still high -> job 5 joins -> 1.5, queue end
    out = sensitivity_adjust(rho, rmin, in_set, 2, idle=3)
    assert out.tolist() == [True, True, False, False, True, True]


def test_configuration_generation_by_hand():
    free = np.array([2, 3, 8, 1, 4])
    node_type, node_gpus = np.array([0, 0, 0, 1, 1]), np.array([8, 8, 8, 4, 4])
    # job 0 (low sensitivity) R = {1, 4}; job 1 (high) R = {6}; all factors equal
    cfg = generate_configs([np.array([1, 4]), np.array([6])], np.ones((2, 5)), np.array([False, True]),
                           free, node_type, node_gpus, 2, top=2)
    got = [(int(j), tuple(cfg.nodes[a:b]), tuple(cfg.counts[a:b]))
           for j, a, b in zip(cfg.job, cfg.indptr[:-1], cfg.indptr[1:])]
    # R=1 on type 0: the two tightest servers (0: 2 free, 1: 3 free); R=4: only server 2;
    # type 1: R=1 on servers 3, 4; R=4 on server 4.  Job 1: R=6 only on server 2 (type 1 has 5).
    assert got == [(0, (0,), (1,)), (0, (1,), (1,)), (0, (2,), (4,)), (0, (3,), (1,)),
                   (0, (4,), (1,)), (0, (4,), (4,)), (1, (2,), (6,))]
    # R = 5 does not fit one type-1 server: adjacent servers 3 + 4 filled as much as possible
    cfg = generate_configs([np.array([5])], np.ones((1, 5)), np.array([False]), free, node_type,
                           node_gpus, 2, top=2)
    assert cfg.nodes.tolist() == [2, 3, 4] and cfg.counts.tolist() == [5, 1, 4]
    # a high-sensitivity job never spreads when R_1 fits a server of the type
    cfg = generate_configs([np.array([3, 5])], np.ones((1, 5)), np.array([True]), free, node_type,
                           node_gpus, 2, top=2)
    assert np.diff(cfg.indptr).max() == 1


def test_requirement_sets():
    sets = requirement_sets(np.array([2, 4, 1]), np.array([2, 1, 1]), np.array([2, 8, 1]),
                            [None, None, (4, 1, 2)], r_num=4)
    assert [s.tolist() for s in sets] == [[2], [1, 3, 6, 8], [1, 2, 4]]


def test_prior_weights_bias_and_lambda():
    np.testing.assert_allclose(prior_weights(np.array([0.5, 2.0])), [0.5, 2.0])
    np.testing.assert_allclose(prior_weights(np.array([-1.0, 0.5])), [0.01, 1.51])
    np.testing.assert_allclose(prior_weights(np.array([-1.0, 0.5]), lam=2), [1e-4, 1.51 ** 2])


def test_small_ilp_by_hand():
    # one 4-GPU server.  job 0: {s:4} weight*gain 2.  job 1: {s:2} 3, {s:4} 4.5.
    # feasible sets: {job0 4} = 2, {job1 2} = 3, {job1 4} = 4.5 -> job 1 takes all 4 GPUs
    cfg = Configs(np.array([0, 1, 1]), np.array([0, 1, 2, 3]), np.array([0, 0, 0]), np.array([4, 2, 4]))
    assert solve_ilp(cfg, np.array([2.0, 3.0, 4.5]), 2, np.array([4]), mip_rel_gap=0).tolist() == [-1, 2]
    # two servers of 4: both jobs fit (2 + 4.5 on separate servers beats anything else)
    cfg = Configs(np.array([0, 1, 1]), np.array([0, 1, 2, 3]), np.array([0, 1, 1]), np.array([4, 2, 4]))
    assert solve_ilp(cfg, np.array([2.0, 3.0, 4.5]), 2, np.array([4, 4]), mip_rel_gap=0).tolist() == [0, 2]
    np.testing.assert_allclose(gain(np.array([0, 0, 1]), np.array([2.0, 6.0, 5.0]), 2), [1, 3, 1])


def test_estimator_layers_and_convergence():
    c = get_preset("hops-64")
    truth = ServerTruth(c, 4, seed=3)
    mon = truth.monitor()
    est = ThroughputEstimator(4, c.node_type, c.n_types)
    assert np.all(est.factors([0]) == 1.0)                    # nothing known: theory default 1
    est.record_profile(0, 0, mon.profile(0, 0, 30))
    f = est.factors([0])[0]
    assert f[1] == est.theory[0, c.node_type[1]]              # same type, unseen server: layer 3
    est.record(0, np.array([1]), 0.5)
    f = est.factors([0])[0]
    assert f[1] == 0.5 and f[2] == 1.0                        # titanxp never seen: layer 3 default
    est.record(0, np.array([2]), 0.7)                         # servers 2-5 are titanxp
    assert est.factors([0])[0, 3] == 0.7                      # server 3 unseen: layer 2 (type mean)
    # running observations converge to the hidden factor
    for _ in range(200):
        est.record(1, np.array([5]), mon.observe(1, [5], 20))
    assert abs(est.factors([1])[0, 5] / truth.factor[1, 5] - 1) < 0.05


def test_hops_runs_with_hidden_truth_and_learns():
    c = small_cluster()
    jobs = specs([0, 0, 10, 20], [2, 4, 1, 2], [500.0, 800.0, 100.0, 300.0])
    truth = ServerTruth(c, 4, seed=0, speed=np.array([1.0, 0.8, 1.2]))
    pol = get_policy("hops")
    res = run_jobs(c, jobs, pol, LinearOracle(), EngineConfig(), truth=truth)
    assert np.all(np.isfinite(res.finish))
    assert pol.est.profiled.all() and pol.est.srv_cnt.sum() > 0
    assert max_latency_ratio(res) >= 0 and np.isfinite(raqlr(res, float(res.finish.max()), 1e9))
    assert fragments_per_round(res, 60.0).min() >= 0
    # the profiling queue holds GPUs the engine sees idle: counted busy, never below 0 idle
    assert pol.profile_log[0] == (0.0, 2 * c.n_types, 2)          # jobs 0 and 1, one GPU per type each
    assert np.all(fragments_per_round(res, 60.0, pol.profile_log) <= fragments_per_round(res, 60.0))


def test_fragments_by_hand_with_profiling():
    """Rounds of 60 s, 10 GPUs; decisions at 0, 50, 70 and 130 s.
    At the end of each round ("end": the decisions at 50, 70 and 130 s): round 0 has 4 used and 2
    queued, both being profiled on 3 GPUs: 3 of the 6 idle GPUs are profiling and nobody else
    waits -> 0; round 1: 5 used, 1 queued, profiling over (it held 60 s from t = 0): 5 idle;
    round 2: 10 used -> 0.  At the start of each round ("start": the state at 0, 60 and 120 s, so
    the decisions at 0, 50 and 70 s): 8, 6 (4 used, 2 queued; profiling over at 60 s), 5."""
    from types import SimpleNamespace
    from sim.result import Timeline
    tl = Timeline(time=[0.0, 50.0, 70.0, 130.0], used_gpus=[2, 4, 5, 10], queued=[2, 2, 1, 1])
    res = SimpleNamespace(timeline=tl, cluster=SimpleNamespace(total_gpus=10))
    np.testing.assert_array_equal(fragments_per_round(res, 60.0, at="end"), [6, 5, 0])
    np.testing.assert_array_equal(fragments_per_round(res, 60.0, [(0.0, 3, 2)], at="end"), [0, 5, 0])
    np.testing.assert_array_equal(fragments_per_round(res, 60.0, [(0.0, 3, 1)], at="end"), [3, 5, 0])
    np.testing.assert_array_equal(fragments_per_round(res, 60.0), [8, 6, 5])
    np.testing.assert_array_equal(fragments_per_round(res, 60.0, [(0.0, 3, 2)]), [0, 6, 5])
    np.testing.assert_array_equal(fragments_per_round(res, 60.0, [(0.0, 3, 1)]), [5, 6, 5])


def test_max_rho_by_duration_class_by_hand():
    # 100 GPUs, 1-GPU jobs: the 1/N share always covers a job, so rho = JCT / est_duration
    from types import SimpleNamespace
    est = np.array([100.0, 500.0, 7200.0, 36000.0])
    jobs = SimpleNamespace(arrival=np.zeros(4), est_duration=est, demand=np.ones(4, np.int32))
    res = SimpleNamespace(jobs=jobs, finish=est * np.array([3.0, 1.0, 1.5, 1.0]),
                          cluster=SimpleNamespace(total_gpus=100))
    got = max_ftf_rho_by_duration(res)
    assert list(got) == ["<600", "600-3600", "3600-36000", ">=36000"]
    assert got["<600"] == pytest.approx(3.0) and np.isnan(got["600-3600"])
    assert got["3600-36000"] == pytest.approx(1.5) and got[">=36000"] == pytest.approx(1.0)


def _state(cluster, jobs, reasons=ROUND):
    n = len(jobs)
    return SchedState(now=0.0, reasons=reasons, cluster=cluster, jobs=jobs, active=np.arange(n),
                      ngpu=np.zeros(n, np.int32), remaining=jobs.work.copy(), attained_gpu_s=np.zeros(n),
                      run_s=np.zeros(n), queued_since=np.zeros(n), pl_indptr=np.zeros(n + 1, np.int64),
                      pl_nodes=np.zeros(0, np.int32), pl_counts=np.zeros(0, np.int32),
                      node_free=cluster.node_gpus.copy(), oracle=LinearOracle())


def test_bad_requirement_sets_wait_with_a_reason():
    from dataclasses import replace
    c = small_cluster()
    jobs = specs([0, 0, 0], [2, 1, 1], [10.0, 10.0, 10.0])
    # job 1: no count fits the 10-GPU cluster; job 2: 5 GPUs fit no server, and it is placed
    # nowhere (high sensitivity is not needed: type "fast" has 4 GPUs, "slow" 4 + 2 spread)
    jobs = replace(jobs, gpus_allowed=(None, (100,), (9,)))
    pol = get_policy("hops")
    plan = pol.schedule(_state(c, jobs))
    lens = np.diff(plan.indptr)
    assert lens[0] > 0 and lens[1] == 0 and lens[2] == 0
    assert "fits" in pol.waiting_reason[1]
    assert "fits" in pol.waiting_reason[2]                   # 9 > 4 ("fast") and > 6 ("slow")
    assert plan.wakeup is None                               # jobs that can never run: no wakeup


class _NoModel1(LinearOracle):
    """Model 1 runs nowhere: every configuration of its jobs has zero throughput."""

    def rates(self, model_idx, *args):
        return np.where(np.asarray(model_idx) == 1, 0.0, super().rates(model_idx, *args))


def test_job_whose_every_config_is_infeasible_waits_with_a_reason():
    c = small_cluster()
    jobs = specs([0, 0], [2, 1], [10.0, 10.0], model=[0, 1])
    st = _state(c, jobs)
    st = SchedState(**{**st.__dict__, "oracle": _NoModel1()})
    pol = get_policy("hops")
    plan = pol.schedule(st)
    lens = np.diff(plan.indptr)
    assert lens[0] > 0 and lens[1] == 0
    assert "infeasible" in pol.waiting_reason[1] and 0 not in pol.waiting_reason
    assert plan.wakeup is not None


def _brute_force(cfg, w, n_jobs, cap):
    """Best objective over every choice of at most one config per job (tiny instances)."""
    import itertools
    opts = [[-1] + np.flatnonzero(cfg.job == i).tolist() for i in range(n_jobs)]
    best = 0.0
    for pick in itertools.product(*opts):
        use = np.zeros_like(cap)
        on = [j for j in pick if j >= 0]
        for j in on:
            np.add.at(use, cfg.nodes[cfg.indptr[j]:cfg.indptr[j + 1]], cfg.counts[cfg.indptr[j]:cfg.indptr[j + 1]])
        if (use <= cap).all():
            best = max(best, float(w[on].sum()))
    return best


def test_ilp_steps_match_brute_force_on_random_instances():
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(30):
        n_jobs, n_srv = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        cap = rng.integers(1, 5, n_srv)
        job = np.sort(rng.integers(0, n_jobs, int(rng.integers(1, 8))))
        lens = rng.integers(1, n_srv + 1, job.size)
        nodes = np.concatenate([rng.choice(n_srv, k, replace=False) for k in lens])
        cfg = Configs(job, np.concatenate([[0], np.cumsum(lens)]), nodes, rng.integers(1, 4, nodes.size))
        w = rng.random(job.size) + 0.1
        out = solve(cfg, w, n_jobs, cap, mip_rel_gap=0.0)
        seen.add(out.how)
        assert out.how in ("trivial", "lp", "ilp") and out.value <= out.bound + 1e-9
        assert out.value == pytest.approx(_brute_force(cfg, w, n_jobs, cap))
        ch = out.choice[out.choice >= 0]
        assert (cfg.job[ch] == np.flatnonzero(out.choice >= 0)).all()
        if out.how == "ilp":              # a zero time limit hits unless presolve solves it:
            cut = solve(cfg, w, n_jobs, cap, mip_rel_gap=0.0, time_limit_s=0.0)
            seen.add(cut.how)                                # the incumbent, still feasible
            assert cut.how in ("ilp", "limit", "fallback") and cut.value <= out.value + 1e-9
    assert {"trivial", "lp", "ilp", "limit"} <= seen         # every path was exercised


def test_restart_penalty_of_a_running_job_by_hand():
    """Sia's factor on moving a running job: jobs 0-2 arrived at 0, now = 100 s, d = 30 s.
    Job 0 runs, attained 200 GPU-s, restarted once: (100 - 30) / 130.  Job 1 runs but attained
    20 < d GPU-s: 1.  Job 2 waits: 1 (starting it restarts nothing).  With d = 0: all 1."""
    from dataclasses import replace
    c = small_cluster()
    jobs = specs([0.0, 0.0, 0.0], [1, 1, 1], [1e6, 1e6, 1e6])
    s = replace(_state(c, jobs), now=100.0, ngpu=np.array([1, 1, 0], np.int32),
                attained_gpu_s=np.array([200.0, 20.0, 0.0]))
    pol = get_policy("hops")
    pol._start(s)
    pol.restarts[0] = 1
    np.testing.assert_allclose(pol._restart_factor(s, np.arange(3)), [70.0 / 130.0, 1.0, 1.0])
    pol.restart_penalty_s = 0.0
    np.testing.assert_allclose(pol._restart_factor(s, np.arange(3)), [1.0, 1.0, 1.0])
    with pytest.raises(Exception, match="restart_penalty_s"):
        get_policy("hops", restart_penalty_s=-1.0)


def test_hops_counts_restarts_of_moved_running_jobs():
    c = small_cluster()
    jobs = specs([0, 0, 10, 20], [2, 4, 1, 2], [500.0, 800.0, 100.0, 300.0])
    pol = get_policy("hops")
    res = run_jobs(c, jobs, pol, LinearOracle(), EngineConfig(), truth=ServerTruth(c, 4, seed=0))
    np.testing.assert_array_equal(pol.restarts, res.restarts)


def test_priority_log_records_each_decision_and_changes_nothing():
    c = small_cluster()
    jobs = specs([0, 0, 10, 20], [2, 4, 1, 2], [500.0, 800.0, 100.0, 300.0])
    plain = run_jobs(c, jobs, get_policy("hops"), LinearOracle(), EngineConfig(),
                     truth=ServerTruth(c, 4, seed=0))
    pol = get_policy("hops")
    pol.priority_log = []
    res = run_jobs(c, jobs, pol, LinearOracle(), EngineConfig(), truth=ServerTruth(c, 4, seed=0))
    np.testing.assert_array_equal(res.finish, plain.finish)
    assert len(pol.priority_log) == res.profile["decisions"]
    ids, prio = pol.priority_log[0]
    np.testing.assert_array_equal(ids, [0, 1])                  # the two jobs of time 0
    assert prio.shape == ids.shape and np.all(np.isfinite(prio))
