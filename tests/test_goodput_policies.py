"""Policies of Pollux-model workloads (pollux, optimus, pollux-tiresias) on the toy profile: runs
finish, the C engine agrees with the reference engine job by job, and hand-worked decisions."""
from __future__ import annotations

import numpy as np
import pytest

from goodput_helpers import random_rows, write_profile, write_workload
from reference_engine import reference_run
from sim.cluster import cluster_from_groups
from sim.engine import EngineConfig, job_specs, run_jobs
from sim.errors import ConfigError
from sim.goodput.workload import read_goodput_workload
from sim.policies import get_policy, list_policies

GOODPUT = sorted(p for p in list_policies()
                 if getattr(type(get_policy(p)), "workload_kind", None) == "goodput")
SMALL = {"pollux": {"population": 12, "generations": 6}, "sia-pollux": {"population": 12, "generations": 6}}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    d = tmp_path_factory.mktemp("goodput")
    write_profile(d / "profiles")
    wl = write_workload(d / "w.csv", random_rows(12, seed=4))
    return read_goodput_workload(wl, d / "profiles")


def _cluster():
    return cluster_from_groups("two", [{"count": 2, "gpus": 4, "type": "t4"}])


def test_the_family_is_registered():
    assert {"pollux", "optimus", "pollux-tiresias"} <= set(GOODPUT)


@pytest.mark.parametrize("name", GOODPUT)
def test_engine_matches_reference(name, toy):
    table, oracle = toy
    jobs = job_specs(table, oracle)
    cluster = _cluster()
    params = SMALL.get(name, {})
    res = run_jobs(cluster, jobs, get_policy(name, **params), oracle, EngineConfig())
    ref = reference_run(cluster, jobs, get_policy(name, **params), oracle, get_policy(name).round_s or 0.0)
    assert np.isfinite(res.finish).all()
    np.testing.assert_allclose(res.finish, ref["finish"], rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(res.restarts, ref["restarts"])


@pytest.mark.parametrize("name", GOODPUT)
def test_decisions_between_rounds_take_the_kept_placement_shortcut_with_the_same_run(name, toy, monkeypatch):
    """Between rounds a goodput policy keeps every job where it is; the job model then reads each
    job's allocation and GPU types from when it last moved instead of comparing placements.  The
    run is the same, bit for bit, with the shortcut off."""
    import sim.goodput.jobmodel as jobmodel
    table, oracle = toy
    jobs = job_specs(table, oracle)
    params = SMALL.get(name, {})
    taken = []
    keeps = jobmodel._keeps_placement

    def counted(state, plan):
        taken.append(keeps(state, plan))
        return taken[-1]

    monkeypatch.setattr(jobmodel, "_keeps_placement", counted)
    fast = run_jobs(_cluster(), jobs, get_policy(name, **params), oracle, EngineConfig())
    monkeypatch.setattr(jobmodel, "_keeps_placement", lambda state, plan: False)
    full = run_jobs(_cluster(), jobs, get_policy(name, **params), oracle, EngineConfig())
    assert any(taken) and not all(taken)
    np.testing.assert_array_equal(fast.finish, full.finish)
    np.testing.assert_array_equal(fast.restarts, full.restarts)


def test_pollux_dp_search_runs(toy):
    table, oracle = toy
    res = run_jobs(_cluster(), job_specs(table, oracle), get_policy("pollux", search="dp"), oracle,
                   EngineConfig())
    assert np.isfinite(res.finish).all()


def test_goodput_policy_needs_a_goodput_oracle():
    from engine_helpers import LinearOracle, small_cluster, specs
    jobs = specs(np.zeros(1), [1], [10.0], [0])
    with pytest.raises(ConfigError, match="Pollux-model workload"):
        run_jobs(small_cluster(), jobs, get_policy("optimus"), LinearOracle(), EngineConfig())


def test_pollux_tiresias_runs_in_queue_order_without_blocking(tmp_path):
    # 4 GPUs; A (4 GPUs) runs, B (2) waits, C (1) waits: nothing fits until A ends;
    # then B and C run side by side
    write_profile(tmp_path / "p")
    wl = write_workload(tmp_path / "w.csv", [("a", 0, "toy", 4, 16), ("b", 1, "toy", 2, 16),
                                            ("c", 2, "toy", 1, 8)])
    table, oracle = read_goodput_workload(wl, tmp_path / "p")
    cluster = cluster_from_groups("one", [{"count": 1, "gpus": 4, "type": "t4"}])
    res = run_jobs(cluster, job_specs(table, oracle), get_policy("pollux-tiresias"), oracle, EngineConfig())
    assert res.first_start[0] == 0.0
    assert res.first_start[1] == res.first_start[2] > res.first_start[0]
    assert res.first_start[1] >= res.finish[0]
    assert res.first_start[1] % 60.0 == 0.0          # decided at a round


def test_optimus_gives_the_spare_gpu_to_the_largest_marginal_gain(tmp_path):
    # one node of 4 GPUs, two jobs arriving together; each gets 1 GPU, the other 2 go one at a time
    write_profile(tmp_path / "p")
    wl = write_workload(tmp_path / "w.csv", [("a", 0, "toy", 1, 16), ("b", 0, "toy", 1, 8)])
    table, oracle = read_goodput_workload(wl, tmp_path / "p")
    cluster = cluster_from_groups("one", [{"count": 1, "gpus": 4, "type": "t4"}])
    pol = get_policy("optimus")
    res = run_jobs(cluster, job_specs(table, oracle), pol, oracle, EngineConfig())
    # job b (batch 8) can use at most 8 // 4 = 2 GPUs, job a (16) at most 4
    assert np.isfinite(res.finish).all()
    assert pol.max_replicas(0) == 4 and pol.max_replicas(1) == 2


def test_run_reads_a_pollux_workload_with_its_profiles(tmp_path, monkeypatch):
    # the clustersim run path: a Pollux CSV, profiles found through CLUSTERSIM_SHARED_DATA
    write_profile(tmp_path / "data" / "profiles" / "pollux")
    wl = write_workload(tmp_path / "w.csv", random_rows(5, seed=1))
    monkeypatch.setenv("CLUSTERSIM_SHARED_DATA", str(tmp_path / "data"))
    from sim.scenario import Scenario
    sc = Scenario(cluster="pollux-64", workload=str(wl), policies=("pollux-tiresias", "optimus"))
    results = sc.run()
    assert all(np.isfinite(r.finish).all() for r in results.values())
    assert sc.build()[0].total_gpus == 64


def test_rounded_epoch_end_by_hand():
    from sim.goodput.jobmodel import rounded_epoch_end
    # 10.4 s of epoch left at rate 1 from 100 s, step ending at 160: ends at 110 (rounded down)
    assert rounded_epoch_end(100.0, 10.4, 1.0, 160.0) == 110.0
    # halves go to even, as Python's round: 10.5 -> 10, 11.5 -> 12
    assert rounded_epoch_end(100.0, 21.0, 2.0, 160.0) == 110.0
    assert rounded_epoch_end(100.0, 23.0, 2.0, 160.0) == 112.0
    # an epoch that ends exactly at the step's end still crosses in it; one past it does not
    assert rounded_epoch_end(100.0, 60.0, 1.0, 160.0) == 160.0
    assert np.isnan(rounded_epoch_end(100.0, 60.2, 1.0, 160.0))
    # a restart delay running past the step's end: nothing crosses in this step
    assert np.isnan(rounded_epoch_end(170.0, 1.0, 1.0, 160.0))
    # under half a second: the authors' 0 s
    assert rounded_epoch_end(100.0, 0.3, 1.0, 160.0) == 100.0


@pytest.mark.parametrize("name", ["pollux-tiresias", "optimus"])
def test_whole_second_epochs_land_on_whole_seconds(name, toy):
    # integer arrivals, 30-s restart delays, rounds at multiples of 60 s: with the authors'
    # rounding every epoch end, and so every finish, is a whole second; without it, not
    table, oracle = toy
    jobs = job_specs(table, oracle)
    finishes = {}
    for on in (True, False):
        pol = get_policy(name)
        pol.whole_second_epochs = on
        res = run_jobs(_cluster(), jobs, pol, oracle, EngineConfig())
        assert np.isfinite(res.finish).all()
        finishes[on] = res.finish
    np.testing.assert_allclose(finishes[True], np.round(finishes[True]), atol=1e-6)
    assert np.abs(finishes[False] - np.round(finishes[False])).max() > 1e-3
    assert not np.array_equal(finishes[True], finishes[False])


def test_a_placement_reads_the_profile_row_of_its_allocation_order():
    # the authors' Tiresias and Optimus take the most free node first; their allocation list
    # keeps that order and the profile row is its smallest rotation: 4,4,2,2 -> 2244, where
    # the same GPUs listed by node (2,4,2,4) would read row 2424
    from sim.goodput.profiles import _canonical_placement
    from sim.policies.goodput_base import most_free_placement
    free = np.array([2, 4, 2, 4])
    pairs = most_free_placement(free, 12)
    assert pairs == [(1, 4), (3, 4), (0, 2), (2, 2)] and free.sum() == 0
    assert _canonical_placement([c for _, c in pairs]) == 2244
    assert _canonical_placement([2, 4, 2, 4]) == 2424
