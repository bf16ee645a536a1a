"""SMJP (paper 2): latency model, categories, market, sampling, exact optimum, policies."""
from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, small_cluster, specs
from reference_engine import reference_run
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.errors import ConfigError
from sim.policies import get_policy
from sim.smjp import Instance, LatencyModel, ProportionalRates, SamplingConfig, jain, solve_exact, solve_sampling
from sim.smjp.categories import bounded_split, enumerate_categories, sample_categories
from sim.smjp.gradients import gradient_bytes, per_gpu_batch
from sim.smjp.latency import comm_time, largest_remainder
from sim.smjp.market import auction, lsa_assignment, solve_categories, valuations
from sim.smjp.repair import best_placement, exact_jcts, placement_jct, repair, repair_context
from sim.smjp.sampling import solution

CONT = LatencyModel(integer_samples=False)


def toy(grad=0.0, model=CONT, remaining=(1.0, 1.0)):
    """2 jobs, 3 workers of 2 types: node 0 has 2 fast workers (2 samples/s), node 1 one slow
    (1 sample/s); P = 10 samples; intra 80 Gbit/s (10 GB/s), inter 8 Gbit/s (1 GB/s)."""
    return Instance(remaining=np.array(remaining), P=np.array([10.0, 10.0]), grad=np.full(2, grad),
                    kmin=np.array([1, 1]), kmax=np.array([3, 3]), wait=np.zeros(2),
                    rho=np.array([[2.0, 1.0], [2.0, 1.0]]), cap=np.array([2, 1]),
                    intra=np.array([80.0, 80.0]), inter=np.array([8.0, 8.0]), model=model)


# -- latency model ----------------------------------------------------------------------
def test_largest_remainder_by_hand():
    # 10 samples over rho 2, 1, 1 -> 5, 2.5, 2.5 -> 5, 3, 2 (tie: first entry first)
    got = largest_remainder(np.array([10.0]), np.array([2.0, 1.0, 1.0]), np.zeros(3, np.int64))
    assert got.tolist() == [5, 3, 2]
    got = largest_remainder(np.array([7.0, 4.0]), np.array([1.0, 1.0, 3.0, 1.0]), np.array([0, 0, 1, 1]))
    assert got.tolist() == [4, 3, 3, 1]


@given(st.lists(st.floats(0.1, 100.0), min_size=1, max_size=12), st.integers(1, 500))
def test_largest_remainder_sums_and_stays_within_one(w, total):
    w = np.array(w)
    got = largest_remainder(np.array([float(total)]), w, np.zeros(w.size, np.int64))
    assert got.sum() == total
    assert np.all(np.abs(got - total * w / w.sum()) < 1 + 1e-9)


def test_comm_time_is_ring_allreduce():
    # 4 workers, 1 GB over 1 GB/s: 2 * 3/4 * 1 = 1.5 s; one worker: none
    assert comm_time(np.array([4, 1]), np.array([1e9, 1e9]), np.array([1e9, 1e9])).tolist() == [1.5, 0.0]


def test_iteration_time_single_node_vs_spread():
    inst = toy(grad=1e9)
    # both fast workers, one node (10 GB/s): 10/4 + 2 * 1/2 * 1e9 / 1e10 = 2.6
    # one fast + the slow, two nodes (1 GB/s): 10/3 + 1.0
    x = np.array([[2, 0], [0, 1]])
    y = np.array([[1, 1], [1, 0]])
    np.testing.assert_allclose(inst.iteration_times(x), [2.6, 10.0])
    np.testing.assert_allclose(inst.iteration_times(y), [10 / 3 + 1.0, 5.0])


def test_integer_samples_straggle_by_at_most_one_sample():
    inst = toy(model=LatencyModel(integer_samples=True))
    # 10 samples on rho (2, 1): shares 6.67, 3.33 -> 7, 3: max(7/2, 3/1) = 3.5 (continuous 3.33)
    assert inst.iteration_times(np.array([[1, 1], [1, 0]]))[0] == pytest.approx(3.5)


def test_gradient_sizes_and_batches():
    g = gradient_bytes(["ResNet-50 (batch size 64)", "bert", "m0"], default_params=1e6)
    np.testing.assert_allclose(g, [25_557_032 * 4, 110e6 * 4, 4e6])
    assert per_gpu_batch(["ResNet-18 (batch size 128)", "m0"], 16).tolist() == [128, 16]


# -- toy instances with hand-worked optima ------------------------------------------------
def test_toy_without_communication():
    # T = 100, P = 10: {f,f}+{s}: 250 and 1000 s; {f,s}+{f}: 333.3 and 500 s (the optimum)
    inst = toy(remaining=(100.0, 100.0))
    for sol in (solve_sampling(inst), solve_exact(inst)):
        assert sorted(sol.jct.tolist()) == pytest.approx([1000 / 3, 500.0])
        assert sol.avg_jct == pytest.approx((1000 / 3 + 500) / 2)


def test_toy_where_communication_favours_mixing():
    # D = 1 GB: {f,s}+{f} = 4.33 + 5 = 9.33 beats {f},{f} = 10 and {f,f}+{s} = 12.6
    inst = toy(grad=1e9)
    for sol in (solve_sampling(inst), solve_exact(inst)):
        assert sol.avg_jct == pytest.approx((10 / 3 + 1.0 + 5.0) / 2)


def test_toy_where_the_slow_worker_stays_idle():
    # D = 3 GB: {f,s}+{f} = 6.33 + 5; {f,f}+{s} = 2.8 + 10; {f}+{f} = 10 with s idle: the optimum
    inst = toy(grad=3e9)
    for sol in (solve_sampling(inst), solve_exact(inst)):
        assert sol.avg_jct == pytest.approx(5.0)
        assert sol.x[:, 1].sum() == 0


def brute_force(inst: Instance) -> float:
    """Least average JCT over every map of single workers to jobs or idle (tiny instances)."""
    node_of = np.repeat(np.arange(inst.cap.size), inst.cap)
    best = np.inf
    for owner in itertools.product(range(inst.n_jobs + 1), repeat=node_of.size):
        x = np.zeros(inst.rho.shape, np.int64)
        o = np.array(owner)
        np.add.at(x, (o[o < inst.n_jobs], node_of[o < inst.n_jobs]), 1)
        if inst.fits(x):
            best = min(best, float(inst.jct(x).mean()))
    return best


@st.composite
def tiny_instances(draw, max_workers=6, max_jobs=3):
    n_nodes = draw(st.integers(1, 3))
    cap = np.array(draw(st.lists(st.integers(1, 2), min_size=n_nodes, max_size=n_nodes)))
    assume_workers = int(cap.sum())
    S = draw(st.integers(1, min(max_jobs, assume_workers)))
    rho = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=S * n_nodes,
                                 max_size=S * n_nodes))).reshape(S, n_nodes)
    rho[:, 0] = np.maximum(rho[:, 0], 1.0)              # every job can run somewhere
    kmin = np.ones(S, np.int64)
    kmax = np.array(draw(st.lists(st.integers(1, 3), min_size=S, max_size=S)))
    return Instance(remaining=np.array(draw(st.lists(st.sampled_from([1.0, 10.0, 50.0]), min_size=S,
                                                     max_size=S))),
                    P=np.full(S, 12.0), grad=np.array(draw(st.lists(st.sampled_from([0.0, 1e8, 2e9]),
                                                                    min_size=S, max_size=S))),
                    kmin=kmin, kmax=kmax, wait=np.zeros(S), rho=rho, cap=cap,
                    intra=np.full(n_nodes, 80.0), inter=np.array(draw(st.lists(
                        st.sampled_from([8.0, 25.0]), min_size=n_nodes, max_size=n_nodes))),
                    model=LatencyModel(integer_samples=draw(st.booleans())))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_exact_milp_matches_brute_force(inst):
    ref = brute_force(inst)
    sol = solve_exact(inst)
    if not np.isfinite(ref):
        assert sol is None
        return
    assert sol.avg_jct == pytest.approx(ref, rel=1e-9)
    assert inst.fits(sol.x)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances())
def test_sampling_is_feasible_and_never_beats_the_optimum(inst):
    sol = solve_sampling(inst, SamplingConfig(samples=16))
    opt = solve_exact(inst)
    if sol is None:
        return
    assert inst.fits(sol.x)
    assert sol.avg_jct >= opt.avg_jct * (1 - 1e-9)


# -- categories ----------------------------------------------------------------------------
def test_category_enumeration_counts_compositions():
    K, S = 7, 3
    cats = enumerate_categories(np.ones(S), np.full(S, K), K, exact_sum=True)
    assert cats.shape == (comb(K - 1, S - 1), S)
    assert np.all(cats.sum(axis=1) == K)
    assert enumerate_categories([1, 2], [2, 3], 4).tolist() == [[1, 2], [1, 3], [2, 2]]


def test_bounded_split_by_hand():
    assert bounded_split([3.0, 1.0], [1, 1], [8, 8], 8).tolist() == [6, 2]
    assert bounded_split([3.0, 1.0], [1, 1], [2, 8], 8).tolist() == [2, 6]
    with pytest.raises(ConfigError):
        bounded_split([1.0, 1.0], [3, 3], [4, 4], 5)


@given(st.integers(0, 1000))
def test_sampled_categories_respect_bounds(seed):
    rng = np.random.default_rng(seed)
    kmin, kmax = np.array([1, 2, 1, 1]), np.array([4, 2, 8, 3])
    w = rng.random(4)
    cats = sample_categories(w, kmin, kmax, 12, 20, rng)
    assert np.all(cats >= kmin) and np.all(cats <= kmax)
    assert np.all(cats.sum(axis=1) == min(12, kmax.sum()))
    assert len(np.unique(cats, axis=0)) == len(cats)
    assert cats[0].tolist() == bounded_split(w, kmin, kmax, 12).tolist()


# -- the matching market ----------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 10_000))
@example(1, 2, 776)  # prices climbed past the stuck-market bound over the eps phases
def test_auction_matches_linear_sum_assignment(S, C, seed):
    rng = np.random.default_rng(seed)
    value = rng.random((S, C)) * 10
    value[rng.random((S, C)) < 0.2] = -np.inf
    cap = rng.integers(1, 4, C)
    K = rng.integers(1, 3, S)
    y, eps = auction(value, K, cap)
    ly, total = lsa_assignment(value, K, cap)
    if ly is None:
        assert y is None
        return
    assert y is not None
    assert np.all(y.sum(axis=1) == K) and np.all(y.sum(axis=0) <= cap)
    got = float((np.where(y > 0, value, 0) * y).sum())
    assert got == pytest.approx(total, abs=cap.sum() * eps + 1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_batched_markets_match_one_auction_each(seed):
    rng = np.random.default_rng(seed)
    S, N = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    cap = rng.integers(1, 4, N)
    rho = rng.choice([0.0, 1.0, 2.0, 5.0], size=(S, N))
    rho[:, 0] = np.maximum(rho[:, 0], 1.0)
    inst = Instance(remaining=rng.uniform(1, 100, S), P=np.full(S, 12.0), grad=np.zeros(S),
                    kmin=np.ones(S, np.int64), kmax=np.full(S, 3), wait=np.zeros(S), rho=rho,
                    cap=cap, intra=np.full(N, 80.0), inter=np.full(N, 8.0), model=CONT)
    cats = rng.integers(1, 3, (4, S))
    for K, got in zip(cats, solve_categories(inst, cats)):
        y, _ = auction(valuations(inst, inst.classes, K), K, inst.classes.cap)
        assert (got is None) == (y is None)
        if y is not None:
            assert got[0].tolist() == y.tolist()


def test_valuations_prefer_fast_workers_for_long_jobs():
    inst = toy(remaining=(100.0, 1.0))
    v = valuations(inst, inst.classes, np.array([2, 1]))
    # the long job values every worker more, and fast over slow
    assert np.all(v[0] > v[1])
    fast = int(np.argmax(inst.classes.rho[0]))
    assert v[0, fast] > v[0, 1 - fast]


def test_jain_index():
    assert jain(np.array([1.0, 1.0, 1.0])) == 1.0
    assert jain(np.array([1.0, 0.0])) == pytest.approx(0.5)


def test_sampling_config_rejects_bad_knobs():
    for bad in ({"theta": 1.5}, {"samples": 0}, {"beta_f": -1.0}, {"refine_top": 0},
                {"repair_passes": -1}):
        with pytest.raises(ConfigError):
            SamplingConfig(**bad)
    with pytest.raises(ConfigError):
        get_policy("smjp", admission="lifo")
    with pytest.raises(ConfigError):
        get_policy("smjp", theta=-0.1)


# -- the policies in the engine ------------------------------------------------------------
def test_engine_runs_smjp_jobs_at_the_latency_models_rate():
    # one job of 6 GPUs on the test cluster (4 fast of 2 it/s, 4 slow of 1 it/s on node 1, 2 slow
    # at speed 0.5): SMJP takes the 4 fast and 2 slow of node 1.  P = 6 x 32 = 192 samples,
    # rho 64 / 32 samples/s: shares 38.4 x 4, 19.2 x 2 -> 39, 39, 38, 38, 19, 19: 39/64 s;
    # ring over 10 Gbit/s: 2 * 5/6 * 102,228,128 B / 1.25e9 B/s.  600 units of work (per-GPU
    # batches) are 100 iterations of the 6-GPU global batch.
    jobs = specs([0.0], [6], [600.0], [0])
    cluster = small_cluster(bandwidths=((100.0, 10.0),) * 2)
    res = run_jobs(cluster, jobs, get_policy("smjp"), LinearOracle(), EngineConfig())
    it = 39 / 64 + 2 * 5 / 6 * 25_557_032 * 4 / 1.25e9
    assert res.finish[0] == pytest.approx(100 * it, rel=1e-12)


def test_rate_model_opt_in_matches_the_reference_engine():
    pol = get_policy("fifo")
    pol.rate_model = ProportionalRates()
    jobs = specs([0, 0, 1, 5, 9], [1, 6, 4, 2, 3], [10, 100, 60, 1000, 333.3], [0, 1, 0, 1, 0])
    res = run_jobs(small_cluster(), jobs, pol, LinearOracle(), EngineConfig())
    ref = reference_run(small_cluster(), jobs, pol, LinearOracle(), 0.0)
    assert res.profile["native"] is False
    np.testing.assert_allclose(res.finish, ref["finish"], rtol=1e-9)
    plain = run_jobs(small_cluster(), jobs, get_policy("fifo"), LinearOracle(), EngineConfig())
    assert not np.allclose(plain.finish, res.finish)


@pytest.mark.parametrize("name", ["smjp", "smjp-exact"])
def test_a_job_that_does_not_fit_now_waits(name):
    jobs = specs([0.0, 1.0], [8, 4], [100.0, 10.0], [0, 0])
    res = run_jobs(small_cluster(), jobs, get_policy(name), LinearOracle(), EngineConfig())
    assert res.first_start[1] >= res.finish[0] - 1e-9 or res.first_start[1] == pytest.approx(1.0)
    assert np.all(np.isfinite(res.finish))


class _NoSlowOracle(LinearOracle):
    """m1 cannot run at all (throughput 0 on every type); m0 runs only on "fast"."""

    def rates(self, model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types):
        r = super().rates(model_idx, ngpu, n_nodes, type_mask, min_speed, cluster_types)
        slow = (np.asarray(type_mask) >> 1) & 1 == 1
        return np.where((np.asarray(model_idx) == 1) | slow, 0.0, r)


def test_zero_throughput_workers_are_never_used():
    jobs = specs([0.0, 0.0], [2, 2], [100.0, 50.0], [0, 0])
    res = run_jobs(small_cluster(), jobs, get_policy("smjp"), _NoSlowOracle(), EngineConfig())
    assert np.all(np.isfinite(res.finish))
    assert np.all(res.gpu_types_used == 1)            # fast only


def test_a_job_no_category_can_hold_is_a_config_error():
    jobs = specs([0.0], [2], [100.0], [1])
    with pytest.raises(ConfigError, match="throughput is 0 on every GPU type"):
        run_jobs(small_cluster(), jobs, get_policy("smjp"), _NoSlowOracle(), EngineConfig())
    jobs = specs([0.0], [6], [100.0], [0])
    with pytest.raises(ConfigError, match="types it can run on have 4"):
        run_jobs(small_cluster(), jobs, get_policy("smjp"), _NoSlowOracle(), EngineConfig())


def test_smjp_exact_refuses_large_clusters_clearly():
    jobs = specs([0.0], [2], [100.0], [0])
    with pytest.raises(ConfigError, match="max_patterns"):
        run_jobs(small_cluster(), jobs, get_policy("smjp-exact", max_patterns=10), LinearOracle(),
                 EngineConfig())


def test_smjp_on_a_preset_with_several_gpu_types():
    from sim.presets import load_cluster
    from sim.throughput import TableThroughput
    from sim.workload import generate_workload

    oracle = TableThroughput.builtin()
    jobs = generate_workload(40, load_jobs_per_hour=30, seed=1, throughput=oracle)
    res = run_jobs(load_cluster("gavel-108"), job_specs(jobs, oracle), get_policy("smjp", samples=16),
                   oracle, EngineConfig())
    assert np.all(np.isfinite(res.finish)) and res.decisions > 0


# -- node-level repair ------------------------------------------------------------------------
def two_nodes(remaining, P, grad, rho, cap, kmax):
    """Jobs on two nodes; intra 80 Gbit/s (10 GB/s), inter 8 Gbit/s (1 GB/s), integer shares."""
    S = len(remaining)
    return Instance(remaining=np.array(remaining, float), P=np.array(P, float),
                    grad=np.array(grad, float), kmin=np.ones(S, np.int64), kmax=np.array(kmax),
                    wait=np.zeros(S), rho=np.array(rho, float), cap=np.array(cap),
                    intra=np.full(2, 80.0), inter=np.full(2, 8.0), model=LatencyModel())


def test_best_placement_prefers_one_node_with_fewer_workers():
    # P = 4 on 4 equal workers over two nodes, D = 1 GB: all four: 4/4 + 2 * 3/4 * 1 = 2.5 s;
    # two on one node: 4/2 + 2 * 1/2 * 0.1 = 2.1 s (the best); one: 4 s
    inst = two_nodes([10.0], [4], [1e9], [[1.0, 1.0]], [2, 2], [4])
    row, jct = best_placement(inst, 0, np.array([2, 2]))
    assert row.tolist() == [2, 0] and jct == pytest.approx(21.0)
    row, jct = best_placement(inst, 0, np.array([1, 2]))       # the tightest node that fits
    assert row.tolist() == [0, 2]
    x = np.array([[2, 2]])
    assert repair(inst, x) == 1 and x.tolist() == [[2, 0]]


def test_repair_moves_a_pair_out_of_a_whole_node_conflict():
    # node 0: 2 fast workers (2 samples/s), node 1: 2 slow (1); P = 8.  Job A (T = 100,
    # D = 1 GB) is spread over 1 fast + 2 slow (shares 4, 2, 2: 2 s; all-reduce 2 * 2/3 * 1 s)
    # because job B (T = 1, D = 0) sits on the other fast worker (4 s).  Alone, neither can do
    # better; together: A on node 0 (8/4 + 0.1 = 2.1 s: 210) and B on node 1 (8/2: 4).
    inst = two_nodes([100.0, 1.0], [8, 8], [1e9, 0.0], [[2.0, 1.0], [2.0, 1.0]], [2, 2], [3, 2])
    x = np.array([[1, 2], [1, 0]])
    np.testing.assert_allclose(inst.jct(x), [100 * (2 + 4 / 3), 4.0])
    assert repair(inst, x) >= 1
    assert x.tolist() == [[2, 0], [0, 2]]
    np.testing.assert_allclose(inst.jct(x), [210.0, 4.0])
    assert solve_exact(inst).avg_jct == pytest.approx(107.0)
    assert solve_sampling(inst).avg_jct == pytest.approx(107.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_instances(), st.integers(0, 10_000))
def test_repair_keeps_placements_feasible_costs_them_exactly_and_never_worsens(inst, seed):
    rng = np.random.default_rng(seed)
    x = np.zeros(inst.rho.shape, np.int64)
    free = inst.cap.copy()
    for i in rng.permutation(inst.n_jobs):           # greedy in a random order, if it fits
        row, _ = best_placement(inst, i, free)
        if row is None:
            return
        x[i] = row
        free -= row
    for i in range(inst.n_jobs):
        assert placement_jct(inst, i, x[i]) == pytest.approx(inst.pattern_jct(i, x[i:i + 1])[0],
                                                             rel=1e-12)
    np.testing.assert_allclose(exact_jcts(x, repair_context(inst)), inst.jct(x), rtol=1e-12)
    before = inst.jct(x).mean()
    beta = float(rng.choice([0.0, 1.0]))
    s0 = solution(inst, x.copy(), beta, 1, 0.0).score
    repair(inst, x, passes=2, beta_f=beta)
    assert inst.fits(x)
    assert solution(inst, x, beta, 1, 0.0).score <= s0 * (1 + 1e-9)
    if beta == 0.0:
        assert inst.jct(x).mean() <= before * (1 + 1e-9)


def test_sampling_is_deterministic_and_repair_can_be_turned_off():
    inst = two_nodes([100.0, 1.0], [8, 8], [1e9, 0.0], [[2.0, 1.0], [2.0, 1.0]], [2, 2], [3, 2])
    a, b = solve_sampling(inst, SamplingConfig(seed=3)), solve_sampling(inst, SamplingConfig(seed=3))
    assert a.x.tolist() == b.x.tolist() and a.avg_jct == b.avg_jct
    off = solve_sampling(inst, SamplingConfig(repair_passes=0))
    assert off.avg_jct >= a.avg_jct
    assert get_policy("smjp", repair_passes=0).params()["repair_passes"] == 0
    assert get_policy("smjp").params()["repair_passes"] == 1
