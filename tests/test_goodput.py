"""The Pollux job model and goodput (sim.goodput): hand-worked toy cases and bad input."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goodput_helpers import STEPS, write_profile, write_workload
from sim.engine import simulate
from sim.errors import TraceError
from sim.goodput.goodput import gain, optimize, speedup_tables, split_batch
from sim.goodput.jobmodel import JobModel
from sim.goodput.oracle import GoodputOracle
from sim.goodput.profiles import Application
from sim.goodput.workload import read_goodput_workload
from sim.policies import get_policy
from sim.presets import load_cluster
from sim.cluster import cluster_from_groups


@pytest.fixture
def profiles(tmp_path):
    write_profile(tmp_path / "profiles")
    return tmp_path / "profiles"


def test_profile_epochs_and_statistics(profiles):
    app = Application.load(profiles / "toy")
    assert app.init_batch_size == 8 and app.max_batch_size == 16
    assert app.min_local_bsz == 4 and app.max_local_bsz == 16 and app.max_epochs == 3
    np.testing.assert_allclose(app.epoch_progress, [0, 100, 200, 300])
    assert app.target_progress == 300
    sqr, var = app.grad_stats(12, 2)
    assert (sqr, var) == (1.0, 4.0)
    assert app.iterations(12, 0) == pytest.approx(90.0)        # halfway between 100 and 80
    assert app.step_times((2,), 8) == (0.20, 0.05)
    assert app.step_times((2,), 6) == pytest.approx((0.16, 0.035))
    assert app.step_times((2, 2), 8) == (0.30, 0.13)             # rotation of 22 is itself


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 4096), min_size=1, max_size=6, unique=True),
       batch=st.one_of(st.integers(0, 5000), st.floats(0, 5000, allow_nan=False)),
       epoch=st.integers(-3, 8), seed=st.integers(0, 2**31))
def test_one_batch_lookup_is_the_vector_lookup(profiles, sizes, batch, epoch, seed):
    # the scalar path of Application._at (one batch, one epoch) against its array path, to the
    # bit: batches below, above and at the validated sizes, epochs outside the table
    app = Application.load(profiles / "toy")
    sizes = np.sort(np.array(sizes, np.int64))
    table = np.random.default_rng(seed).uniform(-1, 1, (sizes.size, 5))
    app = dataclasses.replace(app, batch_sizes=sizes, _batch_floats=())
    one = app._at(table, batch, epoch)
    vec = app._at(table, np.array([batch], float), np.array([epoch]))[0]
    assert np.ndim(one) == 0 and one == vec


def test_gain_is_pollux_efficiency_times_scale():
    # sqr = var = 1, M0 = 8, M = 16: gain = (1 + 1) / (1 / 2 + 1) = 4 / 3
    assert gain(16, 8, 1.0, 1.0) == pytest.approx(4 / 3)
    assert gain(8, 8, 1.0, 3.0) == pytest.approx(1.0)


def test_split_batch_follows_pollux_rule():
    # 32 per GPU with at most 16 per step: 1 accumulation step of 16
    assert tuple(map(int, split_batch(32, 2, 8, 16))) == (16, 1)
    # one GPU above M0 takes at least one accumulation step
    assert tuple(map(int, split_batch(16, 1, 8, 16))) == (8, 1)


def _model(profiles, batch=16, adaptive=False):
    from sim.state import JobSpecs
    oracle = GoodputOracle((Application.load(profiles / "toy"),), job_batch=np.array([batch]))
    one = np.ones(1)
    jobs = JobSpecs(arrival=np.zeros(1), demand=np.array([2], np.int32), gpus_min=np.array([1], np.int32),
                    gpus_max=np.array([2], np.int32), model=np.zeros(1, np.int32), work=300 * one,
                    est_duration=one, priority=one, restart_delay=30 * one)
    return JobModel(oracle, jobs, adaptive)


def test_goodput_of_a_known_allocation(profiles):
    # batch 16 on 2 GPUs of one node: atomic 8, no accumulation, step 0.20 s; epoch 0 has
    # var = sqr = 1, so gain 4/3: 6.667 progress/s; epoch 2 (var 4): gain 5/3 -> 8.333/s
    m = _model(profiles)
    assert m.config(0, 1, 2) == (8, 0)
    rate, batch = m.measured_rate(0, (2,), 0)
    assert batch == 16 and rate == pytest.approx((4 / 3) / 0.20)
    assert m.measured_rate(0, (2,), 2)[0] == pytest.approx((5 / 3) / 0.20)
    # on 2 nodes (1 + 1): step 0.25 s
    assert m.measured_rate(0, (1, 1), 0)[0] == pytest.approx((4 / 3) / 0.25)


def test_job_finishes_when_weighted_progress_reaches_target(profiles, tmp_path):
    # one job, 2 GPUs, batch 16, epochs of 100 progress at 6.667, 7.5 and 8.333 per second:
    # 15 + 13.333 + 12 s, after the 30 s re-scale delay its first start pays (as in the authors'
    # simulator); each epoch in whole seconds as theirs (13.333 -> 13): 70 s; without the
    # first-start delay 40 s; without the rounding 70.333 s
    from sim.engine import EngineConfig
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 0, "toy", 2, 16)])
    table, oracle = read_goodput_workload(wl, profiles)
    cluster = cluster_from_groups("one", [{"count": 1, "gpus": 4, "type": "t4"}])
    res = simulate(cluster, table, get_policy("pollux-tiresias"), oracle)
    assert res.finish[0] == pytest.approx(30 + 15 + 13 + 12, rel=1e-9)
    assert res.restarts[0] == 0
    res = simulate(cluster, table, get_policy("pollux-tiresias"), oracle, EngineConfig(first_start_delay=False))
    assert res.finish[0] == pytest.approx(15 + 13 + 12, rel=1e-9)
    exact = get_policy("pollux-tiresias")
    exact.whole_second_epochs = False
    res = simulate(cluster, table, exact, oracle)
    assert res.finish[0] == pytest.approx(30 + 15 + 100 / 7.5 + 12, rel=1e-9)


def test_optimize_picks_the_best_batch(profiles):
    app = Application.load(profiles / "toy")
    theta = np.array([0.05, 0.0125, 0.1, 0.0, 0.02, 0.0, 1.0, 0.0])
    g, atomic, steps = optimize(theta, 1.0, 1.0, 8, 1, 2, 16, (4, 16))
    cands = np.geomspace(8, 16, 50)
    a, s = split_batch(cands / 2, 2, 8, 16)
    from sim.goodput.goodput import goodput
    best = goodput(theta, 1.0, 1.0, 8, 1, 2, a, s).max()
    assert g[0] == pytest.approx(best)
    tab = speedup_tables(theta[None], [1.0], [1.0], [8], [16], [4], [16], 2, [4], base=(1, 1))
    assert tab.shape == (1, 3, 5) and tab[0, 1, 1] == pytest.approx(1.0) and tab[0, 2, 1] == 0.0
    assert app is not None


# -- bad input ----------------------------------------------------------------
def test_application_without_profile_names_job_and_file(profiles, tmp_path):
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 0, "toy", 1, 8), ("bert-7", 5, "bert", 1, 12)])
    with pytest.raises(TraceError, match=r"bert-7.*'bert' has no profile folder") as e:
        read_goodput_workload(wl, profiles)
    assert str(wl) in str(e.value)


def test_batch_outside_profile_names_job_and_file(profiles, tmp_path):
    wl = write_workload(tmp_path / "w.csv", [("toy-0", 0, "toy", 1, 64)])
    with pytest.raises(TraceError, match=r"job toy-0: batch size 64 .* outside .*\[8, 16\]") as e:
        read_goodput_workload(wl, profiles)
    assert str(wl) in str(e.value)


def test_empty_profile_is_an_error_naming_the_file(tmp_path):
    d = write_profile(tmp_path)
    (d / "validation-16.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n")
    with pytest.raises(TraceError, match="validation-16.csv.*empty"):
        Application.load(d)


def test_non_monotone_profile_is_an_error_naming_the_file(tmp_path):
    d = write_profile(tmp_path, validation={8: [(100, 100), (90, 200), (300, 300)]})
    with pytest.raises(TraceError, match=r"validation-8.csv.*progress decreases"):
        Application.load(d)


def test_step_time_outside_measured_batches_is_an_error(profiles):
    app = Application.load(profiles / "toy")
    with pytest.raises(TraceError, match="placements.csv.*outside the measured range"):
        app.step_times((2,), 32)


def test_missing_placements_file(tmp_path):
    d = write_profile(tmp_path)
    (d / "placements.csv").unlink()
    with pytest.raises(TraceError, match="placements.csv.*missing"):
        Application.load(d)


def test_steps_fixture_is_consistent():
    assert all(st > sy for v in STEPS.values() for st, sy in v.values())
