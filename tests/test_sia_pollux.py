"""The Sia simulator's heterogeneity-unaware Pollux (``sia-pollux``): virtual nodes, the drop to
one GPU type, the mapping back to real nodes and its restart rule (hand-worked cases)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from goodput_helpers import random_rows, write_profile, write_workload
from reference_engine import reference_run
from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.errors import ConfigError
from sim.goodput.workload import read_goodput_workload
from sim.policies import get_policy
from sim.policies.sia_pollux import SiaPollux, VirtualNodes, drop_to_one_type


def _sia64():
    return cluster_from_groups("sia", [{"count": 6, "gpus": 4, "type": "t4"},
                                       {"count": 3, "gpus": 8, "type": "rtx2080ti"},
                                       {"count": 2, "gpus": 8, "type": "a100"}])


def test_virtual_nodes_follow_the_sia_simulators_cluster_order():
    c = _sia64()
    v = VirtualNodes(c.node_gpus, c.node_type, c.gpu_types)
    # aws (t4) nodes 0-5, then dgx-ext (a100) 9, 10, then rtx 6-8; 8-GPU nodes split in two
    assert v.node.tolist() == [0, 1, 2, 3, 4, 5, 9, 9, 10, 10, 6, 6, 7, 7, 8, 8]
    assert v.gpus.tolist() == [4] * 16
    bad = cluster_from_groups("odd", [{"count": 1, "gpus": 4, "type": "t4"}, {"count": 1, "gpus": 6, "type": "a100"}])
    with pytest.raises(ConfigError, match="multiples"):
        VirtualNodes(bad.node_gpus, bad.node_type, bad.gpu_types)


def test_drop_keeps_the_majority_type_and_breaks_ties_toward_the_stronger():
    vtype = np.array([0, 0, 1, 1, 2])             # t4, t4, a100, a100, rtx
    rank = {0: 4, 1: 0, 2: 3}                      # DROP_TIE_ORDER: a100 first, t4 last
    row = np.array([4, 1, 2, 0, 0])
    assert drop_to_one_type(row, vtype, rank).tolist() == [4, 1, 0, 0, 0]      # 5 t4 over 2 a100
    row = np.array([2, 0, 1, 1, 0])
    assert drop_to_one_type(row, vtype, rank).tolist() == [0, 0, 1, 1, 0]      # 2 : 2, a100 kept
    row = np.array([0, 0, 0, 3, 0])
    assert drop_to_one_type(row, vtype, rank).tolist() == [0, 0, 0, 3, 0]      # one type: unchanged
    # a three-way tie compares only the first two in order of first use (theirs): t4 vs a100
    row = np.array([1, 0, 1, 0, 1])
    assert drop_to_one_type(row, vtype, rank).tolist() == [0, 0, 1, 0, 0]


def _state(cluster, pairs):
    indptr = np.cumsum([0] + [len(p) for p in pairs]).astype(np.int64)
    flat = [x for p in pairs for x in p]
    return SimpleNamespace(cluster=cluster, active=np.arange(len(pairs)), pl_indptr=indptr,
                           pl_nodes=np.array([n for n, _ in flat], np.int32),
                           pl_counts=np.array([c for _, c in flat], np.int32))


def _pairs(plan, i):
    lo, hi = plan.indptr[i], plan.indptr[i + 1]
    return sorted(zip(plan.nodes[lo:hi].tolist(), plan.counts[lo:hi].tolist()))


def test_plan_maps_virtual_nodes_to_real_ones_and_restarts_only_on_a_new_tuple():
    c = cluster_from_groups("two", [{"count": 2, "gpus": 4, "type": "t4"}, {"count": 1, "gpus": 8, "type": "a100"}])
    pol = SiaPollux()
    pol.reset(2)
    pol.model = None
    order = np.array([0, 1])
    # vnodes: t4 0, t4 1, a100 2 (twice).  Job 0 on both a100 halves (one real node, 8 GPUs) and
    # one t4 GPU (dropped); job 1 on t4 node 1.
    x = np.array([[1, 0, 4, 4], [0, 3, 0, 0]])
    plan = pol.plan(_state(c, [[], []]), order, x)
    assert _pairs(plan, 0) == [(2, 8)] and _pairs(plan, 1) == [(1, 3)]
    assert pol.dropped_gpus == 1
    assert pol.vbase[0].tolist() == [0, 0, 4, 4]                   # the next round's base is the dropped one
    # next round: job 1 moves to t4 node 0 with the same tuple (3,): no restart, it keeps its GPUs
    x = np.array([[0, 0, 4, 4], [3, 0, 0, 0]])
    plan = pol.plan(_state(c, [[(2, 8)], [(1, 3)]]), order, x)
    assert _pairs(plan, 1) == [(1, 3)] and _pairs(plan, 0) == [(2, 8)]
    # job 1 grows to (4,): a restart, placed on its node in theirs
    x = np.array([[0, 0, 4, 4], [4, 0, 0, 0]])
    plan = pol.plan(_state(c, [[(2, 8)], [(1, 3)]]), order, x)
    assert _pairs(plan, 1) == [(0, 4)]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    d = tmp_path_factory.mktemp("goodput")
    write_profile(d / "profiles")
    wl = write_workload(d / "w.csv", random_rows(10, seed=7))
    return read_goodput_workload(wl, d / "profiles")


def test_a_heterogeneous_run_finishes_repeats_exactly_and_matches_the_reference_engine(toy):
    table, oracle = toy
    c = cluster_from_groups("mix", [{"count": 2, "gpus": 4, "type": "t4"}, {"count": 1, "gpus": 8, "type": "a100"}])
    jobs = job_specs(table, oracle)
    pol = lambda: get_policy("sia-pollux", population=12, generations=6)   # noqa: E731
    runs = [run_jobs(c, jobs, pol(), oracle, EngineConfig()) for _ in range(2)]
    assert np.isfinite(runs[0].finish).all()
    np.testing.assert_array_equal(runs[0].finish, runs[1].finish)
    np.testing.assert_array_equal(runs[0].restarts, runs[1].restarts)
    ref = reference_run(c, jobs, pol(), oracle, 60.0)
    np.testing.assert_allclose(runs[0].finish, ref["finish"], rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(runs[0].restarts, ref["restarts"])


def test_sia_pollux_rejects_a_bad_gpu_cap():
    with pytest.raises(ConfigError, match="max_gpus"):
        SiaPollux(max_gpus=0)
