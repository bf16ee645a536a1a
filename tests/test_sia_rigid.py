"""Sia on rigid jobs (sim/policies/sia_rigid.py), on hand-worked toys."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import specs
from sim.cluster import Cluster
from sim.engine import EngineConfig, simulate
from sim.errors import ConfigError
from sim.jobs import JobTable
from sim.policies import get_policy
from sim.policies.sia_rigid import rigid_goodputs, rigid_restart_factors
from sim.state import SchedState
from sim.throughput import TableThroughput

#: model 0 ("a") is 3x faster on the fast GPU, model 1 ("b") 1.5x
TABLE = {"fast": {"a": {1: 3.0, 2: 6.0}, "b": {1: 1.5, 2: 3.0}}, "slow": {"a": {1: 1.0, 2: 2.0}, "b": {1: 1.0, 2: 2.0}}}


def _cluster(gpus=(1, 1)) -> Cluster:
    return Cluster(name="toy", gpu_types=("fast", "slow"), node_gpus=np.array(gpus, np.int32),
                   node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                   intra_bw_gbps=np.full(2, 128.0), inter_bw_gbps=np.full(2, 25.0))


def _state(jobs, now, active, placement, attained=None) -> SchedState:
    """placement: {job id: node} (one GPU each)."""
    active = np.asarray(active, np.int64)
    nodes = [placement[j] for j in active if j in placement]
    lens = [1 if j in placement else 0 for j in active]
    attained = np.zeros(active.size) if attained is None else np.asarray(attained, float)
    return SchedState(now=now, reasons=8, cluster=_cluster(), jobs=jobs, active=active,
                      ngpu=np.asarray(lens, np.int32), remaining=jobs.work[active].copy(),
                      attained_gpu_s=attained, run_s=np.zeros(active.size),
                      queued_since=np.zeros(active.size), pl_indptr=np.r_[0, np.cumsum(lens)].astype(np.int64),
                      pl_nodes=np.asarray(nodes, np.int32), pl_counts=np.ones(len(nodes), np.int32),
                      oracle=TableThroughput(TABLE, reference_type="slow"))


def _placed(state, plan) -> dict[int, int]:
    return {int(state.active[i]): int(plan.nodes[plan.indptr[i]])
            for i in range(state.active.size) if plan.indptr[i + 1] > plan.indptr[i]}


def test_goodputs_scale_the_slowest_type_to_the_gpu_count():
    g = rigid_goodputs(np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 0.0], [5.0, 10.0, 2.5]]), np.array([4, 2, 1]))
    np.testing.assert_allclose(g, [[8.0, 4.0, 0.0], [0.0, 0.0, 0.0], [2.0, 4.0, 1.0]])


def test_restart_factor_by_hand():
    f = rigid_restart_factors(np.array([100.0, 100.0, 10.0]), np.array([2, 2, 0]), np.array([500.0, 20.0, 40.0]),
                              np.full(3, 30.0))
    np.testing.assert_allclose(f, [40.0 / 130.0, 1.0, 10.0 / 40.0])


def test_faster_type_goes_to_the_job_it_speeds_up_most():
    # normalized goodputs a: (3, 1), b: (1.5, 1); costs S^-0.5: a fast + b slow = 0.58 + 1 = 1.58
    # beats a slow + b fast = 1 + 0.82 = 1.82
    jobs = specs([0.0, 0.0], [1, 1], [1e9, 1e9], model=[0, 1], delay=60.0)
    pol = get_policy("sia-rigid")
    s = _state(jobs, 0.0, [0, 1], {})
    assert _placed(s, pol.schedule(s)) == {0: 0, 1: 1}
    assert pol.last.objective == pytest.approx(0.58 + 1.0)


def test_restoring_job_keeps_its_type_then_yields():
    # b alone at t=0 takes the fast GPU.  a arrives; at t=30 b has attained 20 GPU-s < 30, so no
    # restart factor: swapping (1.58) beats keeping (1.82), but b still restores (delay 60), so it
    # keeps the fast GPU and a takes the slow one.  At t=3600 b's other types are scaled by
    # 3600/3630, a's too: a fast + b slow = 2.97^-0.5 + 0.99^-0.5 = 0.58 + 1.0 < keeping
    # (b fast 0.82 + a slow 1): they swap, one restart each.
    jobs = specs([0.0, 20.0], [1, 1], [1e9, 1e9], model=[1, 0], delay=60.0)
    pol = get_policy("sia-rigid")
    s = _state(jobs, 0.0, [0], {})
    assert _placed(s, pol.schedule(s)) == {0: 0}
    s = _state(jobs, 30.0, [0, 1], {0: 0}, attained=[20.0, 0.0])
    assert _placed(s, pol.schedule(s)) == {0: 0, 1: 1}
    s = _state(jobs, 3600.0, [0, 1], {0: 0, 1: 1}, attained=[3600.0, 3580.0])
    assert _placed(s, pol.schedule(s)) == {1: 0, 0: 1}
    np.testing.assert_array_equal(pol.restarts, [1, 1])


def test_request_larger_than_every_type_names_the_job():
    jobs = specs([0.0, 0.0], [1, 2], [10.0, 10.0], delay=0.0)
    s = _state(jobs, 0.0, [0, 1], {})
    with pytest.raises(ConfigError, match="job 1 wants 2 GPUs"):
        get_policy("sia-rigid").schedule(s)


def test_bad_parameters():
    with pytest.raises(ConfigError, match="p < 0"):
        get_policy("sia-rigid", p=0.5)
    with pytest.raises(ConfigError, match="restart_penalty_s"):
        get_policy("sia-rigid", restart_penalty_s=0.0)


def test_end_to_end_runs_every_job_and_is_deterministic():
    oracle = TableThroughput(TABLE, reference_type="slow")
    rng = np.random.default_rng(3)
    wl = JobTable.from_columns(arrival_s=np.sort(rng.uniform(0, 3600, 12)), gpus=rng.choice([1, 2], 12).astype(np.int32),
                               duration_s=rng.uniform(600, 7200, 12), model=rng.choice(["a", "b"], 12))
    runs = [simulate(_cluster((2, 2)), wl, get_policy("sia-rigid"), oracle, EngineConfig(restart_delay_s=30.0))
            for _ in range(2)]
    assert np.all(np.isfinite(runs[0].finish))
    np.testing.assert_array_equal(runs[0].finish, runs[1].finish)
