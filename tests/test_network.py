"""Cluster bandwidths in the rates of every policy (sim.network, docs/network.md): the ring
all-reduce over a placement's slowest link replaces the one the oracle's measurement holds."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from engine_helpers import LinearOracle, specs
from sim.cluster import DEFAULT_INTER_BW_GBPS, DEFAULT_INTRA_BW_GBPS, Cluster, uniform_cluster
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.network import COMM_SHARE_CAP, BandwidthWarning, NetworkRates, rate_oracle
from sim.policies import get_policy
from sim.throughput import TableThroughput

R50 = "ResNet-50 (batch size 64)"
R50_GRADIENT_BYTES = 25_557_032 * 4.0          # torchvision ResNet-50 parameters, fp32


def _rate(oracle, cluster, model, k, n_nodes, type_bit=1):
    m = np.array([oracle.model_index(model)])
    return float(rate_oracle(oracle, cluster).rates(m, np.array([k]), np.array([n_nodes]),
                                                    np.array([type_bit]), np.array([1.0]),
                                                    cluster.gpu_types)[0])


def test_default_bandwidths_leave_the_oracle_untouched():
    oracle = TableThroughput.builtin()
    assert rate_oracle(oracle, uniform_cluster(4, 8, "v100")) is oracle      # bit-identical rates


def test_hand_worked_spread_rate_on_a_slow_network():
    oracle = TableThroughput.builtin()
    measured = _rate(oracle, uniform_cluster(2, 4, "v100"), R50, 8, 2)
    # 8 GPUs over 2 nodes: one iteration is 8 per-GPU batches; the ring moves 2 * 7/8 * D bytes
    tau = 8 / measured
    ring_at_25 = 2 * 7 / 8 * R50_GRADIENT_BYTES / (25e9 / 8)              # 0.0572 s
    ring_at_5 = 2 * 7 / 8 * R50_GRADIENT_BYTES / (5e9 / 8)                # 0.286 s
    slow = _rate(oracle, uniform_cluster(2, 4, "v100", inter_bw_gbps=5.0), R50, 8, 2)
    assert slow == pytest.approx(8 / (tau - ring_at_25 + ring_at_5), rel=1e-12)
    assert slow < measured * 0.9
    fast = _rate(oracle, uniform_cluster(2, 4, "v100", inter_bw_gbps=1e9), R50, 8, 2)
    ring_at_1e9 = 2 * 7 / 8 * R50_GRADIENT_BYTES / (1e9 * 1e9 / 8)
    assert fast == pytest.approx(8 / (tau - ring_at_25 + ring_at_1e9), rel=1e-12) and fast > measured
    # the inter-node bandwidth does not touch a placement on one node, nor one GPU
    assert _rate(oracle, uniform_cluster(2, 4, "v100", inter_bw_gbps=5.0), R50, 4, 1) == \
        _rate(oracle, uniform_cluster(2, 4, "v100"), R50, 4, 1)
    assert _rate(oracle, uniform_cluster(2, 4, "v100", intra_bw_gbps=1.0), R50, 1, 1) == \
        _rate(oracle, uniform_cluster(2, 4, "v100"), R50, 1, 1)


def test_intra_node_link_and_the_communication_cap():
    oracle = LinearOracle()
    oracle.reference_bandwidth_gbps = (DEFAULT_INTRA_BW_GBPS, DEFAULT_INTER_BW_GBPS)
    oracle.type_speed = {"v100": 1.0}
    cluster = uniform_cluster(1, 8, "v100", intra_bw_gbps=DEFAULT_INTRA_BW_GBPS * 2)
    k, rate = 8, 8.0                     # LinearOracle: 1 per GPU -> tau = 1 s
    ring = 2 * 7 / 8 * 25_557_032 * 4.0 / (DEFAULT_INTRA_BW_GBPS * 1e9 / 8)   # default model size
    got = rate_oracle(oracle, cluster).rates(np.array([0]), np.array([k]), np.array([1]), np.array([1]),
                                             np.array([1.0]), cluster.gpu_types)
    assert got[0] == pytest.approx(k / (1.0 - ring / 2), rel=1e-12)
    # a measurement faster than its own ring term: at most COMM_SHARE_CAP of it is communication
    wrapped = NetworkRates(oracle, uniform_cluster(1, 8, "v100", intra_bw_gbps=1e12),
                           (DEFAULT_INTRA_BW_GBPS, DEFAULT_INTER_BW_GBPS))
    quick = wrapped._corrected(np.array([1e6]), np.array([8]), np.array([0]), np.array([1e12]),
                               np.array([DEFAULT_INTRA_BW_GBPS]))
    assert quick[0] == pytest.approx(1e6 / (1 - COMM_SHARE_CAP), rel=1e-3)


def test_a_link_of_bandwidth_zero_runs_nothing_across_it():
    oracle = TableThroughput.builtin()
    assert _rate(oracle, uniform_cluster(2, 4, "v100", inter_bw_gbps=0.0), R50, 8, 2) == 0.0


def test_slowest_link_is_the_slowest_gpu_type_used():
    oracle = TableThroughput.builtin()
    c = Cluster(name="mix", gpu_types=("v100", "p100"), node_gpus=np.array([4, 4], np.int32),
                node_type=np.array([0, 1], np.int32), node_speed=np.ones(2),
                intra_bw_gbps=np.full(2, DEFAULT_INTRA_BW_GBPS), inter_bw_gbps=np.array([100.0, 5.0]))
    both = _rate(oracle, c, R50, 8, 2, type_bit=3)
    only_slow = NetworkRates(oracle, c, oracle.reference_bandwidth_gbps)
    assert only_slow.slowest_link(np.array([8]), np.array([2]), np.array([3]))[0][0] == 5.0
    base = float(oracle.rates(np.array([oracle.model_index(R50)]), np.array([8]), np.array([2]),
                              np.array([3]), np.array([1.0]), c.gpu_types)[0])
    assert both < base


def test_bandwidths_must_follow_the_gpu_type():
    c = Cluster(name="split", gpu_types=("v100",), node_gpus=np.array([4, 4], np.int32),
                node_type=np.zeros(2, np.int32), node_speed=np.ones(2),
                intra_bw_gbps=np.full(2, DEFAULT_INTRA_BW_GBPS), inter_bw_gbps=np.array([25.0, 100.0]))
    with pytest.raises(ConfigError, match="one bandwidth per GPU type"):
        rate_oracle(TableThroughput.builtin(), c)


def test_an_oracle_that_does_not_read_bandwidths_warns():
    cluster = uniform_cluster(2, 4, "fast", inter_bw_gbps=5.0)
    oracle = LinearOracle()
    with pytest.warns(BandwidthWarning, match="change nothing"):
        assert rate_oracle(oracle, cluster) is oracle
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rate_oracle(oracle, uniform_cluster(2, 4, "fast"))               # defaults: nothing to say


def test_a_policy_rate_model_is_not_corrected_twice():
    """SMJP's rate model has the ring term itself: the engine hands it the oracle, unwrapped."""
    from sim.engine import _Run
    cluster = uniform_cluster(2, 4, "v100", inter_bw_gbps=5.0)
    oracle = TableThroughput.builtin()
    jobs = specs([0.0], [8], [100.0])
    run = _Run(cluster, jobs, get_policy("smjp"), oracle, EngineConfig())
    assert run.rates_from is oracle
    assert isinstance(_Run(cluster, jobs, get_policy("fifo"), oracle, EngineConfig()).rates_from, NetworkRates)


def _cli_avg_jct(inter: str) -> float:
    res = subprocess.run([sys.executable, "-m", "sim.cli", "run", "--cluster",
                          f"uniform:nodes=4,gpus=4,type=v100,inter={inter}", "--jobs", "30", "--load", "20",
                          "--policy", "fifo", "--placement", "spread", "--format", "json", "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["fifo"]["avg_jct_s"]


def test_cli_bandwidths_change_the_result():
    """Issue 17: inter = 0.5 and 1e9 gave the same results; now a slow network is slower."""
    slow, default, fast = (_cli_avg_jct(x) for x in ("0.5", "25", "1e9"))
    assert slow > default > fast


def test_cli_says_in_one_line_when_nothing_reads_the_bandwidths(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,gpus,model,duration_s\n0,8,trace,600\n10,2,trace,60\n")
    res = subprocess.run([sys.executable, "-m", "sim.cli", "run", "--cluster", "uniform:nodes=2,gpus=4,inter=5",
                          "--workload", str(jobs), "--throughputs", "replay", "--policy", "fifo",
                          "--no-progress", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    said = [line for line in res.stderr.splitlines() if "bandwidth" in line]   # json: info on stderr
    assert len(said) == 1 and said[0].startswith("clustersim: warning: "), res.stderr
    assert "does not read bandwidths" in said[0] and "Warning" not in res.stderr
    assert json.loads(res.stdout)["fifo"]["makespan_s"] == pytest.approx(660.0)   # 600 s, then 60 s
