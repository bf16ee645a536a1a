"""Sia: configurations, the ILP, normalized goodput, placement (toy cases worked by hand)."""
import numpy as np
import pytest

from sim.cluster import cluster_from_groups
from sim.errors import ConfigError
from sim.goodput.sia_configs import sia_configs
from sim.policies.sia import Sia, place_on_type, source_order
from sim.policies.sia_ilp import solve_sia_ilp


def _cluster():
    return cluster_from_groups("toy", [{"count": 6, "gpus": 4, "type": "t4"},
                                       {"count": 2, "gpus": 8, "type": "a100"}])


def test_configurations_are_sias_sets():
    cfg = sia_configs(_cluster())
    t4 = cfg.type_idx == cfg.types.index("t4")
    assert cfg.gpus[t4].tolist() == [1, 2, 4, 8, 12, 16, 20, 24]           # CONFIGS_4GPU up to 6 nodes
    assert cfg.nodes[t4].tolist() == [1, 1, 1, 2, 3, 4, 5, 6]
    assert cfg.gpus[~t4].tolist() == [1, 2, 4, 8, 16]                       # CONFIGS_8GPU up to 2 nodes
    assert cfg.capacity.tolist() == [24, 16] or cfg.capacity.tolist() == [16, 24]


def test_two_job_ilp_has_the_hand_worked_optimum():
    # 3 GPUs of one type; costs S^p of (1 GPU, 2 GPUs): job 0 (1.0, 0.5), job 1 (1.0, 0.6).
    # (2, 1) costs 1.5, (1, 2) 1.6, (1, 1) 2.0, one job alone >= 0.5 + 1.1: the optimum is (2, 1).
    cost = np.array([[1.0, 0.5], [1.0, 0.6]])
    res = solve_sia_ilp(cost, np.ones((2, 2), bool), np.array([0, 0]), np.array([1, 2]), np.array([3]), 1.1)
    assert res.choice.tolist() == [1, 0]
    assert res.objective == pytest.approx(1.5)


def test_ilp_leaves_a_job_out_when_gpus_run_short_and_keeps_fixed_jobs():
    cost = np.array([[1.0], [0.9]])
    res = solve_sia_ilp(cost, np.ones((2, 1), bool), np.array([0]), np.array([1]), np.array([1]), 1.1)
    assert res.choice.tolist() == [-1, 0] and res.objective == pytest.approx(0.9 + 1.1)
    res = solve_sia_ilp(cost, np.ones((2, 1), bool), np.array([0]), np.array([1]), np.array([1]), 1.1,
                        fixed=np.array([0, -1]))
    assert res.choice.tolist() == [0, -1]


def test_normalized_goodput_of_a_fresh_job_is_one_on_each_one_gpu_config():
    pol = Sia()
    pol.configs = sia_configs(_cluster())
    pol.seen = np.zeros((1, 2), bool)

    class _M:
        started = np.zeros(1, bool)
        max_seen = np.zeros(1, np.int64)
        observed = None

        @staticmethod
        def oracle_model(j):
            return 0
    pol.model = _M()
    pol.max_replicas = lambda ids: np.ones(ids.shape[0], np.int64)
    s = pol.normalized_goodputs(np.array([0]))
    assert s[0].tolist() == [1.0 if g == 1 else 0.0 for g in pol.configs.gpus]


def test_normalized_goodput_of_a_known_config(tmp_path):
    # goodputs 2 (1 GPU) and 6 (4 GPUs): normalized 1 and 3; S^p at p = -0.5: 1 and 0.58
    pol = Sia()
    pol.configs = sia_configs(_cluster())
    g = np.zeros(len(pol.configs))
    g[0], g[2] = 2.0, 6.0
    pol.job_goodputs = lambda j: g
    pol.max_replicas = lambda ids: np.full(ids.shape[0], 64)
    s = pol.normalized_goodputs(np.array([0]))
    assert s[0, 0] == 1.0 and s[0, 2] == pytest.approx(3.0)
    assert np.round(s[0, 2] ** -0.5, 2) == 0.58


def test_restart_factor_scales_only_jobs_that_held_a_configuration():
    # Both jobs: normalized goodput 1 and 3 on two configurations, restart factor 0.25.  Job 0
    # held configuration 0 last round: configuration 1 is scaled to 0.75, A = round(0.75^-0.5, 2)
    # = 1.15.  Job 1 held none (new, or left out): its row is not scaled, as in the Sia
    # simulator (prev_allocs_v2 None), A = round(3^-0.5, 2) = 0.58.
    pol = Sia()
    pol.normalized_goodputs = lambda ids: np.array([[1.0, 3.0], [1.0, 3.0]])
    pol.restart_factors = lambda state, ids: np.array([0.25, 0.25])
    pol.prev = np.array([0, -1])
    cost, valid = pol.costs(None, np.array([0, 1]))
    assert cost.tolist() == [[1.0, 1.15], [1.0, 0.58]] and valid.all()
    pol.prev = np.array([1, -1])             # held configuration 1: configuration 0 scaled to 0.25
    cost, _ = pol.costs(None, np.array([0, 1]))
    assert cost.tolist() == [[2.0, 0.58], [1.0, 0.58]]


def test_goodput_row_searches_batches_up_to_the_workloads_batch_size(tmp_path):
    # The Sia simulator scores a configuration at batches up to the job's workload batch_size
    # (job.py get_speedup_fn: target_batch_size), not the application's largest (16 here).
    from types import SimpleNamespace
    from goodput_helpers import write_profile
    from sim.goodput.goodput import optimize
    from sim.goodput.profiles import Application
    write_profile(tmp_path)
    app = Application.load(tmp_path / "toy")
    theta = np.array([0.01, 0.001, 0.05, 0.001, 0.02, 0.001, 1.0, 0.0])
    pol = Sia()
    pol.configs = sia_configs(cluster_from_groups("toy", [{"count": 2, "gpus": 4, "type": "t4"}]))
    pol.source_order = [0]
    pol.job_models = lambda j: {0: theta}
    oracle = SimpleNamespace(job_batch=np.array([8, 0]), app=lambda m, t=None: app)
    pol.model = SimpleNamespace(oracle=oracle, oracle_model=lambda j: 0,
                                stat_batch=np.array([8.0, 8.0]), stat_epoch=np.array([0, 0]))
    sqr, var = app.grad_stats(8.0, 0)
    r = pol.configs.gpus
    n = -(-r // pol.configs.per_node[0])

    def row(cap, f32):
        return optimize(theta, sqr, var, app.init_batch_size, n, r, cap, (app.min_local_bsz, app.max_local_bsz),
                        float32_batches=f32)[0]
    assert pol.batch_cap(0) == 8 and pol.batch_cap(1) == app.max_batch_size == 16
    for f32 in (True, False):
        pol.float32_rows = f32
        np.testing.assert_array_equal(pol.job_goodputs(0), row(8, f32))
        np.testing.assert_array_equal(pol.job_goodputs(1), row(16, f32))
        assert not np.array_equal(row(8, f32), row(16, f32))


def test_placement_takes_whole_nodes_first():
    free = np.array([4, 2, 4, 4])
    per_job = [[], []]
    place_on_type(np.arange(4), 4, free, [(0, 8), (1, 3)], per_job)
    assert per_job[0] == [(0, 4), (2, 4)]          # node 1 is partly used: skipped for whole nodes
    assert sum(c for _, c in per_job[1]) == 3
    assert free.sum() == 14 - 11


def test_sia_rejects_bad_parameters():
    from sim.errors import ConfigError
    with pytest.raises(ConfigError):
        Sia(p=0.5)
    with pytest.raises(ConfigError):
        Sia(lambda_n=0.9)


def test_projection_source_follows_the_sia_simulators_cluster_order():
    # its cluster_nnodes order is aws (t4), dgx-ext (a100), rtx (rtx2080ti); others after
    assert source_order(("t4", "rtx2080ti", "a100", "v100")) == [0, 2, 1, 3]
    assert source_order(("v100", "rtx2080ti")) == [1, 0]


def test_sia_throughput_models_parameter():
    from sim.errors import ConfigError
    assert Sia().observed_models and Sia().params()["throughput_models"] == "observed"
    assert not Sia(throughput_models="profile").observed_models
    with pytest.raises(ConfigError):
        Sia(throughput_models="oracle")


def _peer_state(pairs):
    """Active jobs 0..n-1 with current (node, GPUs) on three 4-GPU t4 nodes."""
    from types import SimpleNamespace
    indptr = np.cumsum([0] + [len(p) for p in pairs]).astype(np.int64)
    flat = [x for p in pairs for x in p]
    return SimpleNamespace(cluster=cluster_from_groups("toy", [{"count": 3, "gpus": 4, "type": "t4"}]),
                           active=np.arange(len(pairs)),
                           pl_indptr=indptr, pl_nodes=np.array([n for n, _ in flat], np.int32),
                           pl_counts=np.array([c for _, c in flat], np.int32))


def _peer_place(pol, state, gpus):
    """Sia.place with configuration = (t4, gpus[i] GPUs) for each active job (0: none)."""
    from sim.goodput.sia_configs import sia_configs
    pol.configs = cfg = sia_configs(state.cluster)
    choice = np.array([int(np.flatnonzero(cfg.gpus == g)[0]) if g else -1 for g in gpus])
    return pol.place(state, choice)


def _pairs(plan, i):
    lo, hi = plan.indptr[i], plan.indptr[i + 1]
    return list(zip(plan.nodes[lo:hi].tolist(), plan.counts.tolist()[lo:hi]))


def test_peer_rule_rewalks_kept_jobs_and_restarts_only_on_a_new_per_node_tuple():
    # Round 1: job 0 (2 GPUs) alone walks node 0: theirs (0, 0), ours node 0.
    pol = Sia()
    pol.reset(2)
    plan = _peer_place(pol, _peer_state([[], []]), [2, 0])
    assert _pairs(plan, 0) == [(0, 2)] and pol.peer_keys == {0: (0, (0, 0))}
    # Round 2: job 1 (4 GPUs) arrives; most GPUs first it takes whole node 0, and job 0 (same
    # configuration) is walked on to node 1: its tuple (2,) is unchanged, so in theirs it does
    # not restart, and in ours it keeps node 0's GPUs; job 1 gets its node-0 walk elsewhere, on
    # the best-fitting whole free node.
    plan = _peer_place(pol, _peer_state([[(0, 2)], []]), [2, 4])
    assert pol.peer_keys == {1: (0, (0, 0, 0, 0)), 0: (0, (1, 1))}
    assert _pairs(plan, 0) == [(0, 2)] and _pairs(plan, 1) == [(1, 4)]
    # The "keep" rule walks job 1 around job 0's GPUs from node 0: node 1 as well.
    keep = Sia(placement_rule="keep")
    keep.reset(2)
    keep.prev[:] = -1
    _peer_place(keep, _peer_state([[], []]), [2, 0])
    keep.prev[0] = int(np.flatnonzero(keep.configs.gpus == 2)[0])
    assert _pairs(_peer_place(keep, _peer_state([[(0, 2)], []]), [2, 4]), 1) == [(1, 4)]


def test_peer_rule_restarts_a_kept_job_whose_per_node_tuple_changes():
    # Job 0 (2 GPUs) ran split in theirs, one GPU on each of nodes 0 and 1: tuple (1, 1).  Job 1
    # (4 GPUs) arrives: most GPUs first it takes node 0 whole, and job 0, walked on from node 1,
    # gets 2 GPUs there: tuple (2,), so it restarts although its configuration is kept.  Both
    # restart and get their walk's nodes (free).
    pol = Sia()
    pol.reset(2)
    pol.peer_keys = {0: (0, (0, 1))}
    plan = _peer_place(pol, _peer_state([[(0, 1), (1, 1)], []]), [2, 4])
    assert pol.peer_keys == {1: (0, (0, 0, 0, 0)), 0: (0, (1, 1))}
    assert _pairs(plan, 1) == [(0, 4)] and _pairs(plan, 0) == [(1, 2)]
    assert pol.placer.missed_restarts == 0 and pol.placer.shape_misses == 0
    with pytest.raises(ConfigError):
        Sia(placement_rule="nope")


def test_tie_order_harness_changes_only_which_equal_cost_column_wins():
    # scalability/sia_tie_order.py: one job, two one-GPU configurations of equal cost on two
    # types; HiGHS takes the first column, so rotating the type order moves its pick to the
    # other type, at the same objective, and the answer maps back to the original columns.
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scalability" / "sia_tie_order.py"
    spec = importlib.util.spec_from_file_location("sia_tie_order_for_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = (np.array([[1.0, 1.0]]), np.ones((1, 2), bool), np.array([0, 1]), np.array([1, 1]),
            np.array([1, 1]), 1.1)
    picks = {r: mod.rotated(solve_sia_ilp, r)(*args) for r in (0, 1)}
    assert picks[0].objective == picks[1].objective == pytest.approx(1.0)
    assert {picks[0].choice[0], picks[1].choice[0]} == {0, 1}, "HiGHS no longer takes the first tied column"
    # a fixed (checkpoint-restoring) job keeps its column through the permutation and back
    three = (np.array([[1.0, 1.0, 2.0]]), np.ones((1, 3), bool), np.array([0, 1, 1]), np.array([1, 1, 2]),
             np.array([1, 2]), 1.1)
    assert mod.rotated(solve_sia_ilp, 1)(*three, fixed=np.array([2])).choice.tolist() == [2]


def test_a_round_with_the_last_rounds_ilp_inputs_reuses_its_answer(monkeypatch):
    import sim.policies.sia as sia_module
    calls = []

    def counting(*args):
        calls.append(args)
        return solve_sia_ilp(*args)
    monkeypatch.setattr(sia_module, "solve_sia_ilp", counting)
    pol = Sia()
    pol.reset(2)
    pol.configs = sia_configs(_cluster())
    c = len(pol.configs)
    cost = np.full((2, c), 2.0)
    cost[0, 0], cost[1, 1] = 0.5, 0.7
    valid, free = np.ones((2, c), bool), np.array([-1, -1])
    first = pol._solve(cost, valid, free)
    assert pol._solve(cost.copy(), valid.copy(), free.copy()) is first and len(calls) == 1
    assert pol._solve(cost, valid, np.array([2, -1])).choice[0] == 2 and len(calls) == 2   # held job
    cost[1, 1] = 0.6
    pol._solve(cost, valid, np.array([2, -1]))
    pol.configs = sia_configs(_cluster())                     # another configuration set
    pol._solve(cost, valid, np.array([2, -1]))
    assert len(calls) == 4
