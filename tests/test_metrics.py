"""Metrics on tiny runs whose answers are worked out by hand (LinearOracle, FIFO)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim import metrics
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.policies import get_policy


def _run(cluster, jobs, policy="fifo"):
    return run_jobs(cluster, jobs, get_policy(policy), LinearOracle(), EngineConfig())


def _one_node():
    return small_cluster(gpus=(4,), types=(0,), speed=(1.0,))


@pytest.fixture(scope="module")
def back_to_back():
    """Two 4-GPU jobs at t=0 on one 4-GPU fast node (rate 8/s): job 0 runs [0, 50],
    job 1 waits 50 s and runs [50, 150]."""
    return _run(_one_node(), specs([0.0, 0.0], [4, 4], [400.0, 800.0]))


@pytest.fixture(scope="module")
def blocked():
    """Job 0 (2 GPUs, rate 4/s) runs [0, 100]; job 1 (4 GPUs) arrives at 10 and waits with
    2 GPUs idle until 100, then runs [100, 150] at rate 8/s."""
    return _run(_one_node(), specs([0.0, 10.0], [2, 4], [400.0, 400.0]))


# -- per-job table ---------------------------------------------------------------------------

def test_jobs_table_hand_values(back_to_back):
    t = metrics.jobs_table(back_to_back, LinearOracle.models).to_pydict()
    assert t["job_id"] == [0, 1]
    assert t["first_start_s"] == [0.0, 50.0]
    assert t["finish_s"] == [50.0, 150.0]
    assert t["jct_s"] == [50.0, 150.0]
    assert t["queueing_delay_s"] == [0.0, 50.0]
    assert t["gpu_seconds"] == [200.0, 400.0]
    assert t["run_seconds"] == [50.0, 100.0]
    assert t["restarts"] == [0, 0]
    assert t["gpus_requested"] == [4, 4]
    assert t["gpu_types_used"] == ["fast", "fast"]
    assert t["model"] == [0, 0]
    assert t["model_name"] == ["m0", "m0"]
    assert t["est_duration_s"] == [100.0, 200.0]


def test_jobs_table_decodes_type_masks_and_unknown_model_names():
    # 4 GPUs on the fast node; 1 GPU on a slow node
    r = _run(small_cluster(), specs([0.0, 0.0], [4, 1], [800.0, 100.0]))
    assert r.model_names == LinearOracle.models      # the engine records the oracle's names
    assert r.gpu_types_used.tolist() == [1, 2]
    r.gpu_types_used[0] = 3                           # as a job that ran on both types in turn
    r.model_names = None                              # a result without names
    t = metrics.jobs_table(r)
    assert t.column("gpu_types_used").to_pylist() == ["fast|slow", "slow"]
    assert t.column("model_name").null_count == 2
    assert t.schema.equals(metrics.RESULT_SCHEMA, check_metadata=True)


def test_parquet_round_trip(back_to_back, tmp_path):
    path = metrics.write_jobs(back_to_back, tmp_path / "fifo" / "jobs.parquet", LinearOracle.models)
    back = pq.read_table(path)
    assert back.equals(metrics.jobs_table(back_to_back, LinearOracle.models))
    assert back.schema.metadata[b"clustersim.schema"] == b"results/1"


# -- summary ---------------------------------------------------------------------------------

def test_summary_hand_values(back_to_back):
    s = metrics.summary(back_to_back)
    assert tuple(s) == metrics.SUMMARY_KEYS
    assert s["n_jobs"] == 2 and s["total_gpus"] == 4
    assert s["avg_jct_s"] == 100.0 and s["median_jct_s"] == 100.0
    assert s["p99_jct_s"] == pytest.approx(50 + 0.99 * 100)      # numpy linear percentile
    assert s["makespan_s"] == 150.0
    assert s["avg_wait_s"] == 25.0
    assert s["utilization"] == 1.0                                # 600 GPU-s / (4 x 150)
    # LR = wait / run_seconds: 0/50 and 50/100
    assert s["max_latency_ratio"] == 0.5 and s["mean_latency_ratio"] == 0.25
    # rho: job 0 shares [0, 50] with job 1 -> N = 2, T_id = 100 * max(1, 2*4/4) = 200, rho = 0.25;
    # job 1: N = (2*50 + 1*100) / 150 = 4/3, T_id = 200 * 4/3, rho = 150 / 266.7 = 0.5625
    assert s["max_rho"] == pytest.approx(0.5625)
    assert s["mean_rho"] == pytest.approx((0.25 + 0.5625) / 2)
    assert s["frac_rho_gt_1"] == 0.0
    # slowdowns 50/100, 150/200 -> Jain = 1.25^2 / (2 * (0.25 + 0.5625))
    assert s["jain_slowdown"] == pytest.approx(1.25 ** 2 / (2 * 0.8125))
    assert s["frag_idle_gpus"] == 0.0
    assert s["frag_fgd_gpus"] == 0.0                              # the node is full at both decisions
    assert s["decisions"] == back_to_back.decisions == 2
    assert s["mean_decision_ms"] >= 0 and s["wall_seconds"] >= 0


def test_summary_idle_gpus_while_waiting(blocked):
    s = metrics.summary(blocked)
    assert list(blocked.finish) == [100.0, 150.0]
    assert s["frag_idle_gpus"] == 2.0          # only the decision at t=10 had a waiting job
    assert s["avg_wait_s"] == 45.0             # (0 + 90) / 2
    assert s["max_latency_ratio"] == pytest.approx(90 / 50)
    assert s["utilization"] == pytest.approx((2 * 100 + 4 * 50) / (4 * 150))


def test_equal_slowdowns_give_jain_one_and_partial_utilization():
    # job 0: 2 GPUs, est 100 s, runs 50 s on the fast node; job 1 arrives at 100, same slowdown
    r = _run(_one_node(), specs([0.0, 100.0], [2, 4], [200.0, 400.0]))
    s = metrics.summary(r)
    assert list(r.finish) == [50.0, 150.0]
    assert s["jain_slowdown"] == pytest.approx(1.0)
    assert s["avg_slowdown"] == pytest.approx(0.5)
    assert s["utilization"] == pytest.approx((2 * 50 + 4 * 50) / (4 * 150))
    assert s["avg_wait_s"] == 0.0 and s["max_latency_ratio"] == 0.0
    # alone in the cluster: N = 1, T_id = est -> rho = 0.5 for both
    assert s["max_rho"] == pytest.approx(0.5) and s["mean_rho"] == pytest.approx(0.5)


def test_empty_workload_is_a_clear_error():
    r = _run(_one_node(), specs([], [], []))
    with pytest.raises(ConfigError, match="empty workload"):
        metrics.summary(r)
    with pytest.raises(ConfigError, match="empty workload"):
        metrics.jobs_table(r)


def test_mean_active_jobs_sweep_line():
    # A(t): [0,10) 1, [10,20) 2, [20,30) 1 (job 0 leaves at 20), job 2 alone on [40, 50]
    a = np.array([0.0, 10.0, 40.0])
    f = np.array([20.0, 30.0, 50.0])
    np.testing.assert_allclose(metrics.mean_active_jobs(a, f), [1.5, 1.5, 1.0])


def test_jain_index_is_nan_safe():
    assert metrics.jain_index([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert metrics.jain_index([1.0, 0.0]) == pytest.approx(0.5)
    assert metrics.jain_index([1.0, np.nan, 1.0]) == pytest.approx(1.0)
    assert math.isnan(metrics.jain_index([]))


# -- FGD ----------------------------------------------------------------------------------

def _fgd_naive(free, ntype, hist):
    """Reference: FGD's per-(node, shape) rule with whole GPUs, as loops."""
    p = np.asarray(hist, float)
    p = p / p.sum()
    if p.ndim == 1:
        p = np.tile(p / 1.0, (max(ntype) + 1, 1)) / (max(ntype) + 1)
        shared = True
    else:
        shared = False
    total = 0.0
    for n, (c, t) in enumerate(zip(free, ntype)):
        for st in range(p.shape[0]):
            for m in range(p.shape[1]):
                w = p[st, m]
                if w == 0:
                    continue
                access = shared or st == t
                hosted = access and m <= c
                total += 0.0 if hosted else w * c
    return total


def test_fgd_hand_cases():
    # half 1-GPU tasks, half 4-GPU tasks; free 4 hosts both, free 2 and 1 only the 1-GPU task
    hist = [0, 0.5, 0, 0, 0.5]
    assert metrics.fgd_fragmentation([4, 2, 0, 1], [0, 0, 0, 0], hist) == pytest.approx(2 * 0.5 + 1 * 0.5)
    # unnormalized counts give the same answer
    assert metrics.fgd_fragmentation([4, 2, 0, 1], [0, 0, 0, 0], [0, 3, 0, 0, 3]) == pytest.approx(1.5)
    # a free count above the largest task shape is never fragment
    assert metrics.fgd_fragmentation([8], [0], hist) == 0.0
    # typed shapes: every task needs a 1-GPU slot of type 0 -> a type-1 node's free GPUs are all fragment
    assert metrics.fgd_fragmentation([2, 2], [0, 1], [[0, 1, 0], [0, 0, 0]]) == 2.0
    assert metrics.fgd_fragmentation([], [], hist) == 0.0


def test_fgd_matches_loop_reference():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 12))
        ntype = rng.integers(0, 3, n)
        free = rng.integers(0, 9, n)
        hist2 = rng.integers(0, 4, (3, 9)).astype(float)
        hist2[0, 1] += 1
        assert metrics.fgd_fragmentation(free, ntype, hist2) == pytest.approx(_fgd_naive(free, ntype, hist2))
        hist1 = rng.integers(0, 4, 9).astype(float)
        hist1[2] += 1
        ntype0 = np.zeros(n, int)
        assert metrics.fgd_fragmentation(free, ntype0, hist1) == pytest.approx(_fgd_naive(free, ntype0, hist1))


def test_fgd_bad_input():
    with pytest.raises(ConfigError):
        metrics.fgd_fragmentation([1, -1], [0, 0], [0, 1])
    with pytest.raises(ConfigError):
        metrics.fgd_fragmentation([1, 1], [0], [0, 1])
    with pytest.raises(ConfigError):
        metrics.fgd_fragmentation([1], [0], [0, 0])


def test_request_histogram_splits_multi_node_jobs():
    # 8-GPU nodes: 16 -> two 8-GPU tasks; 1, 3, 4, 8 -> one task each; 6 tasks in all
    h = metrics.request_histogram([1, 4, 8, 16, 3], 8)
    expect = np.zeros(9)
    expect[[1, 3, 4]] = 1 / 6
    expect[8] = 3 / 6
    np.testing.assert_allclose(h, expect)


def test_fgd_tracker_and_summary_use_recorded_data(back_to_back):
    c = small_cluster()
    tr = metrics.FGDTracker(c, np.array([1, 4]))
    # 3 GPUs used on node 0 (free 1), node 1 empty (free 4), node 2 (2 GPUs) free 2
    v = tr.value(np.array([0]), np.array([3]))
    assert v == pytest.approx(metrics.fgd_fragmentation([1, 4, 2], c.node_type, [0, 1, 0, 0, 1]))
    assert v == pytest.approx(1 * 0.5 + 2 * 0.5)
    tr.record(np.array([0]), np.array([3]))
    tr.record(np.array([], int), np.array([], int))
    np.testing.assert_allclose(tr.values(), [1.5, 1.0])  # empty cluster: the 2-GPU node cannot host 4
    # summary averages fragmentation["fgd"] over decision points, or derives it from node_free
    r = dataclasses.replace(back_to_back, fragmentation={"fgd": np.array([1.0, 3.0]),
                                                         "idle_gpus_while_waiting": np.array([])})
    assert metrics.summary(r)["frag_fgd_gpus"] == 2.0
    # workload of 4-GPU jobs on one 4-GPU node: free 0 -> 0, free 2 -> 2
    r = dataclasses.replace(back_to_back, fragmentation={"node_free": np.array([[0], [2]])})
    assert metrics.summary(r)["frag_fgd_gpus"] == 1.0


# -- comparison table ----------------------------------------------------------------------

def test_compare_table_fixed_width(back_to_back, blocked):
    s1, s2 = metrics.summary(back_to_back), metrics.summary(blocked)
    text = metrics.compare_table({"fifo": s1, "a-long-policy-name": s2})
    lines = text.splitlines()
    assert len(lines) == 4
    assert len({len(line) for line in lines}) == 1
    assert lines[0].split()[:3] == ["policy", "avg", "JCT"]
    assert lines[2].startswith("fifo ")
    assert "100.0" in lines[2]                      # utilization %
    assert lines[2].rstrip().endswith("0.0")        # FGD: the node is full at every decision
    with pytest.raises(ConfigError):
        metrics.compare_table({})
