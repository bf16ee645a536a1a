"""Network interference of Pollux-model jobs (the Pollux simulator's ``--interference``) and
Pollux's interference avoidance: hand-worked cases, a plain-Python reference, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from goodput_helpers import random_rows, write_profile, write_workload
from sim.cluster import cluster_from_groups
from sim.engine import simulate
from sim.errors import ConfigError
from sim.goodput.jobmodel import interfered_jobs
from sim.goodput.oracle import GoodputOracle
from sim.goodput.profiles import Application
from sim.goodput.workload import read_goodput_workload
from sim.policies.goodput_base import GoodputPolicy, csr_plan
from sim.policies.pollux_search import PolluxProblem, dp_search
from sim.scenario import Scenario


def reference_interfered(per_job: list[list[tuple[int, int]]]) -> list[bool]:
    """The authors' rule, written as their loop: nodes used by two or more distributed jobs,
    then every distributed job with a GPU on one of them."""
    sets = [{n for n, c in p if c > 0} for p in per_job]
    crowded = {n for s in sets for n in s if sum(len(o) > 1 and n in o for o in sets) > 1}
    return [len(s) > 1 and bool(s & crowded) for s in sets]


def _csr(per_job):
    plan = csr_plan(per_job)
    return plan.indptr, plan.nodes, plan.counts


def test_interfered_jobs_by_hand():
    # job 0 on nodes 0,1; job 1 on 1,2 (both distributed, share node 1); job 2 on node 1 only
    # (not distributed: neither slowed nor counted); job 3 on 3,4 alone
    per_job = [[(0, 2), (1, 2)], [(1, 1), (2, 1)], [(1, 1)], [(3, 2), (4, 2)]]
    assert interfered_jobs(*_csr(per_job)).tolist() == [True, True, False, False]
    assert interfered_jobs(*_csr([[(0, 1), (0, 1)]])).tolist() == [False]   # one node, twice
    assert interfered_jobs(*_csr([[], [(0, 0), (1, 3)]])).tolist() == [False, False]
    assert interfered_jobs(np.zeros(1, np.int64), [], []).shape == (0,)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=4), max_size=6))
def test_interfered_jobs_matches_the_reference(per_job):
    assert interfered_jobs(*_csr(per_job)).tolist() == reference_interfered(per_job)


class _Fixed(GoodputPolicy):
    """Places job i on ``layout[i]`` from the first round on; epochs in exact time (the rates
    are what these tests check, not the authors' whole-second rounding)."""
    name = "fixed-layout"
    whole_second_epochs = False

    def __init__(self, layout):
        super().__init__()
        self.layout = layout

    def decide(self, state, epochs):
        return csr_plan([self.layout[int(j)] for j in state.active])


@pytest.fixture
def two_jobs(tmp_path):
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 0, "toy", 2, 16), ("toy-1", 0, "toy", 2, 16)])
    return wl, profiles, cluster_from_groups("four", [{"count": 4, "gpus": 2, "type": "t4"}])


@pytest.mark.parametrize("x", [0.25, 0.5])
def test_two_distributed_jobs_on_a_shared_node_run_at_one_minus_x(two_jobs, x):
    # each job: batch 16 on 1 + 1 GPUs, step 0.25 s; epochs of 100 progress at gains 4/3, 3/2,
    # 5/3: alone 100 * 0.25 * (3/4 + 2/3 + 3/5) = 50.4167 s, after the 30 s first-start delay
    wl, profiles, cluster = two_jobs
    alone = 100 * 0.25 * (3 / 4 + 2 / 3 + 3 / 5)
    shared = [[(0, 1), (1, 1)], [(1, 1), (2, 1)]]
    apart = [[(0, 1), (1, 1)], [(2, 1), (3, 1)]]
    for layout, slowed in ((shared, True), (apart, False)):
        table, oracle = read_goodput_workload(wl, profiles, interference=x)
        res = simulate(cluster, table, _Fixed(layout), oracle)
        want = 30 + (alone / (1 - x) if slowed else alone)
        np.testing.assert_allclose(res.finish, [want, want], rtol=1e-9)
    table, oracle = read_goodput_workload(wl, profiles)                 # default 0: none
    np.testing.assert_allclose(simulate(cluster, table, _Fixed(shared), oracle).finish, 30 + alone, rtol=1e-9)


def _problem(avoid: bool, base=None, factor=(1.0, 1.0)) -> PolluxProblem:
    # two jobs on two 2-GPU nodes; both are worth most on 1 + 1 GPUs (2 nodes)
    tab = np.zeros((2, 3, 3))
    tab[:, 1, 1], tab[:, 1, 2], tab[:, 2, 2] = 1.0, 1.2, 2.0
    base = np.zeros((2, 2), np.int64) if base is None else np.asarray(base, np.int64)
    return PolluxProblem(tab, base, np.array([2, 2]), np.array([2, 2]), np.asarray(factor, float),
                         avoid_interference=avoid)


def test_avoidance_keeps_one_distributed_job_per_node():
    both = np.array([[[1, 1], [1, 1]]])
    rng = np.random.default_rng(0)
    fixed = _problem(True).repair(both, rng)[0]
    assert np.count_nonzero(fixed[1]) <= 1                  # the later job loses the shared node
    assert (_problem(False).repair(both, rng)[0] == both[0]).all()
    # job 0 holds 1 + 1 and moving it costs (restart factor 0.01): job 1 can only have the
    # other GPU of each node, which avoidance forbids
    for avoid in (True, False):
        p = _problem(avoid, base=[[1, 1], [0, 0]], factor=(0.01, 1.0))
        x = dp_search(p, per_node=2, rng=np.random.default_rng(1), polish=(0, 0))
        assert (x[0] == [1, 1]).all()
        assert (x[1] == ([0, 0] if avoid else [1, 1])).all()


# -- bad input ----------------------------------------------------------------
@pytest.mark.parametrize("x", [-0.1, 1.0, 2.0])
def test_interference_outside_0_1_is_an_error(tmp_path, x):
    app = Application.load(write_profile(tmp_path))
    with pytest.raises(ConfigError, match="interference must be in"):
        GoodputOracle((app,), job_batch=np.array([16]), interference=x)


def test_interference_needs_a_goodput_workload():
    with pytest.raises(ConfigError, match="--interference applies to Pollux/Sia workloads"):
        Scenario(workload="generate", interference=0.25)


# -- which profiles a goodput workload runs with ------------------------------------------------------
def _toy_under_sia(tmp_path, monkeypatch):
    """A toy workload in a folder named sia, the toy profile as the shared Pollux profiles."""
    write_profile(tmp_path / "data" / "profiles" / "pollux")
    monkeypatch.setenv("CLUSTERSIM_SHARED_DATA", str(tmp_path / "data"))
    (tmp_path / "sia").mkdir()
    return write_workload(tmp_path / "sia" / "w.csv", random_rows(6, 0))


def test_goodput_profiles_option_overrides_the_folder_rule(tmp_path, monkeypatch, capsys):
    from sim.cli import main
    wl = _toy_under_sia(tmp_path, monkeypatch)
    assert Scenario(workload=str(wl)).goodput_profiles_chosen() == ("sia", "a folder named sia in its path")
    sc = Scenario(cluster="uniform:nodes=2,gpus=4,type=t4", workload=str(wl), policies=("pollux-tiresias",),
                  goodput_profiles="pollux")
    assert sc.goodput_profiles_chosen() == ("pollux", "--goodput-profiles")
    _, table, oracle = sc.build()
    assert len(table) == 6 and oracle.models == ("toy",) and not oracle.typed
    assert main(["run", "--cluster", "uniform:nodes=2,gpus=4,type=t4", "--workload", str(wl), "--policy",
                 "pollux-tiresias", "--goodput-profiles", "pollux", "--no-progress"]) == 0
    assert f"workload: 6 jobs ({wl}, pollux profiles: --goodput-profiles)" in capsys.readouterr().out


def test_goodput_profiles_option_is_checked(tmp_path, monkeypatch):
    wl = _toy_under_sia(tmp_path, monkeypatch)
    with pytest.raises(ConfigError, match="--goodput-profiles must be one of pollux, sia"):
        Scenario(workload=str(wl), goodput_profiles="t4")
    with pytest.raises(ConfigError, match="--goodput-profiles applies to Pollux/Sia workloads"):
        Scenario(workload="generate", goodput_profiles="pollux")
