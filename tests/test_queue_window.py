"""A policy behind Hops' LR service window (sim/policies/queue_window.py), on hand-worked toys."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import specs
from sim.cluster import Cluster
from sim.engine import EngineConfig, simulate
from sim.errors import ConfigError
from sim.jobs import JobTable
from sim.policies import get_policy
from sim.policies.queue_window import widen_plan, window_state
from sim.state import Plan, SchedState
from sim.throughput import TableThroughput

TABLE = {"fast": {"a": {1: 2.0, 2: 4.0}}, "slow": {"a": {1: 1.0, 2: 2.0}}}
ORACLE = TableThroughput(TABLE, reference_type="slow")


def _cluster(gpus=(1, 1)) -> Cluster:
    return Cluster(name="toy", gpu_types=("fast", "slow"), node_gpus=np.array(gpus, np.int32),
                   node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                   intra_bw_gbps=np.full(2, 128.0), inter_bw_gbps=np.full(2, 25.0))


def _state(jobs, now, placement, run_s) -> SchedState:
    """Every job active; placement: {job id: node} (one GPU each)."""
    active = np.arange(len(jobs), dtype=np.int64)
    lens = [1 if j in placement else 0 for j in active]
    nodes = [placement[j] for j in active if j in placement]
    free = np.ones(2, np.int32)
    free[nodes] -= 1
    return SchedState(now=now, reasons=8, cluster=_cluster(), jobs=jobs, active=active,
                      ngpu=np.asarray(lens, np.int32), remaining=jobs.work.copy(),
                      attained_gpu_s=np.asarray(run_s, float), run_s=np.asarray(run_s, float),
                      queued_since=np.zeros(active.size), pl_indptr=np.r_[0, np.cumsum(lens)].astype(np.int64),
                      pl_nodes=np.asarray(nodes, np.int32), pl_counts=np.ones(len(nodes), np.int32),
                      node_free=free, oracle=ORACLE)


def test_window_takes_the_highest_latency_ratio_and_frees_the_rest():
    # t = 100: jobs 0 and 1 ran all along (wait 0), job 2 waited 100 s: LR 2 > LR 0 = LR 1, so the
    # window over 2 GPUs is {2, 0} (ties by job id); job 1 loses its GPU, job 2 gets one
    jobs = specs([0.0, 0.0, 0.0], [1, 1, 1], [1e6, 1e6, 1e6], delay=0.0)
    s = _state(jobs, 100.0, {0: 0, 1: 1}, [100.0, 100.0, 0.0])
    pol = get_policy("queue-window", inner="sia-rigid")
    plan = pol.schedule(s)
    lens = np.diff(plan.indptr)
    assert lens.tolist() == [1, 0, 1]
    assert sorted(plan.nodes.tolist()) == [0, 1]
    np.testing.assert_array_equal(pol.window(s), [0, 2])


def test_window_state_counts_dropped_jobs_gpus_as_free():
    jobs = specs([0.0, 0.0, 0.0], [1, 1, 1], [1e6, 1e6, 1e6])
    s = _state(jobs, 0.0, {0: 0, 1: 1}, [0.0, 0.0, 0.0])
    sub = window_state(s, np.array([1, 2]))
    np.testing.assert_array_equal(sub.active, [1, 2])
    np.testing.assert_array_equal(sub.pl_indptr, [0, 1, 1])
    np.testing.assert_array_equal(sub.pl_nodes, [1])
    np.testing.assert_array_equal(sub.node_free, [1, 0])
    wide = widen_plan(Plan(np.array([0, 0, 1]), np.array([0], np.int32), np.array([1], np.int32), 7.0,
                           np.array([1.0, 0.5])), np.array([1, 2]), 3)
    np.testing.assert_array_equal(wide.indptr, [0, 0, 0, 1])
    np.testing.assert_array_equal(wide.rate_scale, [1.0, 1.0, 0.5])
    assert wide.wakeup == 7.0


def _workload(n, seed):
    rng = np.random.default_rng(seed)
    return JobTable.from_columns(arrival_s=np.sort(rng.uniform(0, 3600, n)), gpus=rng.choice([1, 2], n).astype(np.int32),
                                 duration_s=rng.uniform(600, 7200, n), model=["a"] * n)


@pytest.mark.parametrize("inner", ["sia-rigid", "gavel-max-min-fairness-perf"])
def test_a_window_that_holds_every_job_changes_nothing(inner):
    wl, c = _workload(6, 1), _cluster((8, 8))          # 6 jobs of at most 2 GPUs on 16 GPUs
    cfg = EngineConfig(restart_delay_s=30.0)
    a = simulate(c, wl, get_policy(inner), ORACLE, cfg)
    b = simulate(c, wl, get_policy("queue-window", inner=inner), ORACLE, cfg)
    np.testing.assert_array_equal(a.finish, b.finish)


def test_oversubscribed_run_finishes_every_job_deterministically():
    wl = _workload(14, 2)
    runs = [simulate(_cluster((2, 2)), wl, get_policy("queue-window", inner="sia-rigid"), ORACLE,
                     EngineConfig(restart_delay_s=30.0)) for _ in range(2)]
    assert np.all(np.isfinite(runs[0].finish))
    np.testing.assert_array_equal(runs[0].finish, runs[1].finish)
    plain = simulate(_cluster((2, 2)), wl, get_policy("sia-rigid"), ORACLE, EngineConfig(restart_delay_s=30.0))
    assert not np.array_equal(plain.finish, runs[0].finish)     # the window binds here


def test_bad_parameters():
    with pytest.raises(ConfigError, match="unknown priority"):
        get_policy("queue-window", priority="edf")
    with pytest.raises(ConfigError, match="view 'queued'"):
        get_policy("queue-window", inner="fifo")
    with pytest.raises(ConfigError, match="another policy"):
        get_policy("queue-window", inner="queue-window")
    with pytest.raises(ConfigError, match="refresh_s"):
        get_policy("queue-window", refresh_s=0)
