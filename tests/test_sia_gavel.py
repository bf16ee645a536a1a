"""sia-gavel (the Sia simulator's Gavel): a toy round worked by hand -- priorities, the one-list
pick, lease extension and the worker walk, their restart rule, the engine placement --, the
first start's delay, and bad input."""
from types import SimpleNamespace

import numpy as np
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from goodput_helpers import write_profile, write_workload
from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.errors import ConfigError
from sim.goodput.workload import read_goodput_workload
from sim.policies import get_policy
from sim.policies.peer_placement import node_shape as _shape
from sim.policies.sia_gavel import SiaGavel


def _cluster():
    # a100 listed first: the pick still serves t4 first (the Sia simulator's cluster order)
    return cluster_from_groups("toy", [{"count": 1, "gpus": 8, "type": "a100"},
                                       {"count": 2, "gpus": 4, "type": "t4"}])


def _policy(n_jobs, demand):
    pol = SiaGavel()
    pol.reset(n_jobs)
    state = _state(demand, [[] for _ in demand])
    pol._start_cluster(state)
    return pol, state


def _state(demand, pairs):
    """A SchedState stand-in: active jobs 0..n-1 with ``demand`` and current (node, GPUs)."""
    indptr = np.cumsum([0] + [len(p) for p in pairs]).astype(np.int64)
    flat = [x for p in pairs for x in p]
    return SimpleNamespace(cluster=_cluster(), active=np.arange(len(demand)),
                           jobs=SimpleNamespace(demand=np.array(demand, np.int64)),
                           pl_indptr=indptr, pl_nodes=np.array([n for n, _ in flat], np.int32),
                           pl_counts=np.array([c for _, c in flat], np.int32))


def test_type_order_and_capacity_follow_the_sia_simulator():
    pol, _ = _policy(1, [4])
    t4, a100 = 1, 0
    assert pol.order == [t4, a100]
    assert pol.capacity.tolist() == [8, 8] and pol.per_node.tolist() == [8, 4]


def test_toy_round_priorities_and_pick():
    # Types t4 (index 1, served first) and a100 (index 0), 8 GPUs each.  Jobs 0, 1 ask for 4
    # GPUs, job 2 for 8.  Each joined with 180 s on both types (totals 540 s); job 1 then ran
    # one round on t4: job_time[1, t4] = 540, t4 total 900.
    pol, _ = _policy(3, [4, 4, 8])
    t4, a100 = 1, 0
    pol.job_time[:] = 180.0
    pol.job_time[1, t4] = 540.0
    pol.type_time[:] = [540.0, 900.0]
    x = np.zeros((3, 2))
    x[0, t4] = 1.0
    x[1, t4] = x[1, a100] = 0.5
    x[2, a100] = 1.0
    pri = pol.priorities(np.arange(3), x)
    # X / fraction: job 0 on t4 1 / (180/900) = 5; job 1 on t4 0.5 / (540/900) = 0.833, on
    # a100 0.5 / (180/540) = 1.5; job 2 on a100 1 / (180/540) = 3; 0 where X = 0.
    assert pri[0, t4] == pytest.approx(5.0) and pri[2, a100] == pytest.approx(3.0)
    assert pri[1, t4] == pytest.approx(0.5 / 0.6) and pri[1, a100] == pytest.approx(1.5)
    assert pri[0, a100] == 0.0 and pri[2, t4] == 0.0
    # One list: (0, t4) 5 -> t4 (4 left); (2, a100) 3 -> a100 (0 left); (1, a100) 1.5: a100
    # full; (1, t4) 0.833 -> t4 (0 left).
    chosen, picks = pol.pick(np.arange(3), x, pri, np.array([4, 4, 8]))
    assert chosen.tolist() == [t4, t4, a100] and picks == [0, 2, 1]


def test_leftover_gpus_go_to_priority_zero_jobs_in_their_order():
    # Job 0 (X on t4 only) takes t4's 4 GPUs... job 1 has X = 0 everywhere but still runs on the
    # a100 GPUs left (the pick has no throughput or priority test).
    pol, _ = _policy(2, [8, 4])
    t4, a100 = 1, 0
    pol.job_time[:] = 180.0
    pol.type_time[:] = 360.0
    x = np.zeros((2, 2))
    x[0, t4] = 1.0
    chosen, _ = pol.pick(np.arange(2), x, pol.priorities(np.arange(2), x), np.array([8, 4]))
    assert chosen.tolist() == [t4, a100]


def test_lease_extension_walk_and_their_restart_rule():
    # t4 nodes 1 and 2 (4 GPUs each; worker ids node * 8 + slot).  Job 0 (2 GPUs) ran on node 1's
    # workers 8, 9; job 1 (4 GPUs) is new.  Largest first: job 1 walks node 1 (8-11), so job 0's
    # lease fails and it walks on to node 2 (16, 17).  Same type, same GPUs per node (2,): no
    # restart in theirs, so it keeps its engine GPUs and job 1 gets the free node 2.
    pol, _ = _policy(2, [2, 4])
    t4 = 1
    pol.workers = {0: (8, 9)}
    pol.alloc_key = {0: pol._key((8, 9))}
    state = _state([2, 4], [[(1, 2)], []])
    chosen = np.array([t4, t4])
    workers = pol.assign_workers(state, state.active, chosen, [0, 1])
    assert workers == {1: (8, 9, 10, 11), 0: (16, 17)}
    restart = pol._restarts(state.active, [0, 1], workers)
    assert restart.tolist() == [False, True]
    plan = pol.engine_plan(state, [0, 1], workers, restart)
    assert plan.indptr.tolist() == [0, 1, 2]
    assert list(zip(plan.nodes.tolist(), plan.counts.tolist())) == [(1, 2), (2, 4)]
    assert pol.placer.shape_misses == 0


def test_lease_extension_keeps_exact_workers_when_free():
    pol, _ = _policy(2, [2, 4])
    t4 = 1
    pol.workers = {0: (16, 17)}
    pol.alloc_key = {0: pol._key((16, 17))}
    state = _state([2, 4], [[(2, 2)], []])
    workers = pol.assign_workers(state, state.active, np.array([t4, t4]), [0, 1])
    assert workers == {1: (8, 9, 10, 11), 0: (16, 17)}
    assert pol._restarts(state.active, [0, 1], workers).tolist() == [False, True]


def test_shape_is_the_per_node_tuple_in_worker_order():
    assert _shape((1, 1, 2)) == (2, 1) and _shape((2, 1, 1)) == (1, 2) and _shape((5,)) == (1,)


@pytest.fixture()
def one_job(tmp_path):
    write_profile(tmp_path / "profiles")
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 100, "toy", 2, 16)])
    table, oracle = read_goodput_workload(wl, tmp_path / "profiles")
    return job_specs(table, oracle), oracle


def test_first_round_is_at_360_s_and_the_first_start_pays_its_delay(one_job):
    jobs, oracle = one_job
    cluster = cluster_from_groups("two", [{"count": 2, "gpus": 4, "type": "t4"}])
    with_delay = run_jobs(cluster, jobs, SiaGavel(), oracle, EngineConfig())
    without = run_jobs(cluster, jobs, SiaGavel(), oracle, EngineConfig(first_start_delay=False))
    assert with_delay.first_start[0] == 360.0 and without.first_start[0] == 360.0
    # a lone job keeps its GPUs: the first start's delay alone separates the two runs
    assert with_delay.finish[0] - without.finish[0] == pytest.approx(jobs.restart_delay[0], rel=1e-6)
    assert with_delay.restarts[0] == without.restarts[0] == 0


def test_rigid_workload_names_the_gavel_policy_to_use():
    jobs = specs(np.zeros(1), [1], [10.0], [0])
    with pytest.raises(ConfigError, match="gavel-max-sum-throughput-perf"):
        run_jobs(small_cluster(), jobs, get_policy("sia-gavel"), LinearOracle(), EngineConfig())


def test_a_job_larger_than_every_type_is_an_error(tmp_path):
    write_profile(tmp_path / "profiles")
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 0, "toy", 12, 16)])
    table, oracle = read_goodput_workload(wl, tmp_path / "profiles")
    cluster = cluster_from_groups("mixed", [{"count": 2, "gpus": 4, "type": "t4"},
                                            {"count": 1, "gpus": 4, "type": "a100"}])
    with pytest.raises(ConfigError, match="asks for 12 GPUs, more than any GPU type"):
        run_jobs(cluster, job_specs(table, oracle), SiaGavel(), oracle, EngineConfig())
