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


def test_sia_batch_limits_cap_an_adaptive_batch_at_the_placements_largest(tmp_path):
    """The Sia simulator's ``update_local_bsz`` searches a job's own batch up to its placement's
    largest measured per-GPU batch (``get_max_local_bsz``), not the application's.  Placement 2
    (one node, 2 GPUs) is measured up to 4 per GPU here, the application up to 16: in epoch 2
    (var 4: large batches pay) the job takes 8 per GPU on (2,) without the limits, 4 with them;
    on (1, 1), measured up to 16, both take 8."""
    from sim.state import JobSpecs
    steps = dict(STEPS)
    steps["2"] = {4: (0.12, 0.02)}
    app = Application.load(write_profile(tmp_path, steps=steps))
    assert (app.max_local_bsz, app.max_local_bsz_at((2,))) == (16, 4.0)
    one = np.ones(1)
    jobs = JobSpecs(arrival=np.zeros(1), demand=np.array([2], np.int32), gpus_min=np.array([1], np.int32),
                    gpus_max=np.array([4], np.int32), model=np.zeros(1, np.int32), work=300 * one,
                    est_duration=one, priority=one, restart_delay=30 * one)
    picks = {}
    for limits in (False, True):
        m = JobModel(GoodputOracle((app,), job_batch=np.array([0])), jobs, adaptive=True, sia_batch_limits=limits)
        m.started[0], m.stat_batch[0], m.stat_epoch[0] = True, 8, 2
        picks[limits] = (m.config(0, 1, 2, None, (2,)), m.config(0, 2, 2, None, (1, 1)))
    assert picks[False] == ((8, 0), (8, 0))
    assert picks[True] == ((4, 0), (8, 0))


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


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(0.01, 4.0), sqr=st.floats(0.0, 2.0), var=st.floats(0.0, 2.0),
       gpus=st.lists(st.integers(1, 16), min_size=1, max_size=5), f32=st.booleans())
def test_optimize_memo_answers_what_optimize_answers(scale, sqr, var, gpus, f32):
    """The memo's answer is optimize's, bit for bit, on the first call and on a repeat; arguments
    equal in value but not in type (an int for a float) are a different key, never a wrong hit."""
    from sim.goodput.goodput import OptimizeMemo
    memo = OptimizeMemo(size=2)
    theta = np.array([0.05, 0.0125, 0.1, 0.001, 0.02, 0.001, 1.2, 0.0]) * scale
    r = np.array(gpus)
    n = -(-r // 4)
    args = (theta, sqr, var, 8, n, r, 512, (4, 64))
    want = optimize(*args, float32_batches=f32)
    for _ in range(2):
        got = memo(*args, float32_batches=f32)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
            assert not a.flags.writeable
    assert (memo.hits, memo.misses) == (1, 1)
    memo(theta, sqr, var, 8, n.astype(float), r, 512, (4, 64), float32_batches=f32)
    memo(theta * 2, sqr, var, 8, n, r, 512, (4, 64), float32_batches=f32)
    assert (memo.hits, memo.misses, len(memo._answers)) == (1, 3, 2)


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


#: (M0, b_min, b_max, cap, sha256[:16] of the candidate atomic batches and accumulation steps as
#: int64 bytes) of the Sia simulator's ``GoodputFunction.optimize`` with float32 GPU counts
#: [1, 2, 3, 4, 8, 12, 16, 20, 24, 32, 40, 48, 64], computed with numpy 1.23.5 (its stack) by a
#: script that repeats their lines (docs/goodput-history.md, "Three porting differences", item 3); 60
#: draws of a seeded generator.
SIA_FLOAT32_CANDIDATES = [
    [64, 16, 256, 777, "f5d10cdff756b136"], [8, 2, 32, 777, "1749b4b598595ba5"],
    [16, 4, 128, 512, "cfb2da3283e00270"], [16, 64, 128, 512, "8716c587414bc2c3"],
    [128, 16, 16, 128, "124ccdeb732cc0a9"], [256, 50, 1600, 1600, "e48641051769961b"],
    [192, 4, 16, 3200, "74a7166fd183082b"], [8, 4, 4, 512, "56c5905d9be7e506"],
    [256, 2, 8, 512, "c118d43990822b12"], [256, 2, 16, 320, "2749679e3392b65c"],
    [8, 50, 50, 320, "783272b4b6a83cd6"], [64, 16, 16, 777, "8a12920d5b3b3131"],
    [192, 100, 100, 3200, "49bf98380ffdba5d"], [32, 16, 512, 320, "09b59a403de8da71"],
    [192, 2, 4, 777, "502f1b2ce84a3914"], [32, 16, 32, 128, "60b97a7fbb4b72fc"],
    [32, 32, 128, 3200, "283ac0fe19903226"], [32, 32, 512, 777, "9457892fafd06f74"],
    [32, 1, 16, 1600, "bed625830ca5240a"], [256, 16, 64, 256, "b9d2158aef4483b3"],
    [64, 32, 512, 4096, "9ea1bdb507606311"], [16, 32, 512, 320, "8ee76f887868abcb"],
    [32, 64, 512, 1600, "56f856889023b51a"], [128, 16, 512, 3200, "2bc7bae7735a8b3f"],
    [8, 2, 16, 4096, "05a90532781be177"], [8, 50, 800, 3200, "f7dcd9aff0118c87"],
    [256, 2, 16, 4096, "7c5a4cd6b6483dc1"], [32, 2, 8, 64, "b7b562e06c38e4f5"],
    [16, 64, 1024, 4096, "bebd9f64768c5282"], [192, 64, 128, 512, "eb779e51cc222d9c"],
    [128, 4, 128, 128, "2bd332ec0cdf30bc"], [192, 32, 64, 3200, "afb0e566285af816"],
    [32, 64, 2048, 320, "fba0d956c0e23eac"], [64, 2, 32, 2048, "fbd33e5a3120b1d3"],
    [192, 64, 2048, 777, "cdd7a8a671288389"], [256, 2, 2, 512, "0c0e06a3ea310512"],
    [32, 100, 1600, 512, "ba22b85e5c7bed79"], [128, 32, 1024, 128, "53f20ed7706914de"],
    [64, 50, 200, 777, "f62311c38f6069ed"], [256, 64, 256, 4096, "0f28370f37417e9a"],
    [8, 32, 64, 320, "52662a5d7c97e42a"], [128, 50, 1600, 320, "f8b4686c5ebac834"],
    [256, 64, 128, 256, "097b6ee97c67937b"], [192, 64, 256, 192, "a5a2812a671270eb"],
    [16, 8, 128, 384, "9013a4faf890c838"], [8, 50, 800, 128, "d37713ad08080b0d"],
    [64, 8, 64, 64, "c8227149fb5e418d"], [128, 4, 32, 512, "ec83d297551ce202"],
    [128, 1, 4, 2048, "8465da4c21860e22"], [192, 8, 8, 3200, "4faebab18313cf95"],
    [64, 32, 32, 512, "45924943ba8863e6"], [256, 64, 128, 2048, "e8fb7a94c41d4a73"],
    [8, 64, 128, 384, "8cc5fbd4db2870bc"], [256, 16, 512, 256, "2ddd01f235386873"],
    [192, 100, 100, 320, "709b7494a0cfcc6a"], [16, 4, 8, 64, "d59f809466aea130"],
    [256, 4, 128, 3200, "a9b93ad8b07db470"], [16, 50, 800, 128, "d37713ad08080b0d"],
    [8, 8, 8, 512, "eaadabf0b0c14ec5"], [64, 32, 256, 512, "bb9d7a9c73a0587b"],
]


def test_float32_candidates_are_the_sia_simulators_bit_for_bit():
    import hashlib
    from sim.goodput.goodput import float32_candidates
    r = np.array([1, 2, 3, 4, 8, 12, 16, 20, 24, 32, 40, 48, 64], float)
    differ = 0
    for init, lo_b, hi_b, cap, digest in SIA_FLOAT32_CANDIDATES:
        atomic, steps = float32_candidates(r, init, lo_b, hi_b, cap)
        assert hashlib.sha256(atomic.tobytes() + steps.tobytes()).hexdigest()[:16] == digest
        b64 = np.geomspace(np.maximum(init, lo_b * r), cap, 50)
        differ += not np.array_equal(split_batch(b64 / r, r, init, hi_b)[0], atomic)
    assert differ > 0                         # the float64 candidates differ on some


def test_float32_candidates_score_a_batch_above_an_exact_cap():
    # yolov3-like: 16 GPUs, b_min 4, cap 64 = 4 x 16.  numpy 1.23 in float32 draws the inner
    # candidates as 64.00001, a per-GPU batch of 4.0000005, which rounds up to 5 (global 80);
    # the endpoints stay 64 (per-GPU 4).  In float64 every candidate is per-GPU 4.
    from sim.goodput.goodput import float32_candidates
    atomic, steps = float32_candidates(np.array([16.0]), 8, 4, 16, 64)
    assert atomic[0, 0] == atomic[-1, 0] == 4 and (atomic[1:-1, 0] == 5).all() and (steps == 0).all()
