"""Throughput models fitted online on what a job ran (sim.goodput.observed; Sia's fit_perf_params)."""
from __future__ import annotations

import numpy as np
import pytest

from goodput_helpers import write_profile
from sim.calibration.models import pollux_iter_time
from sim.goodput.observed import ObservedProfiles, fit_observed


def _fit(rows):
    return fit_observed(*np.array(rows, float).T)


def test_one_run_pins_half_the_compute_time_and_predicts_linear_scaling():
    # one 1-GPU run at batch 8, step 0.4 s, sync 0: alpha_c = 0.4 / 2 = 0.2, so beta_c = 0.2 / 8;
    # no multi-GPU run: network terms 1e-8 (inter-node 1.1x by the prior): 2 GPUs cost nothing more
    x = _fit([[1, 1, 8, 0.4, 0.0]])
    assert x[0] == pytest.approx(0.2) and x[1] == pytest.approx(0.025, rel=1e-4)
    assert max(x[2:6]) <= 1.1e-8 + 1e-15 and x[7] == 0.0
    step1, step2 = pollux_iter_time(x, 8, np.array([1, 1]), np.array([1, 2]))
    assert step2 == pytest.approx(step1, rel=1e-6)


def test_without_a_multi_node_run_the_prior_sets_inter_node_above_intra_node():
    # two batches on 2 GPUs of one node: alpha_r is fitted, beta_n = beta_r pinned (never > 2 GPUs)
    x = _fit([[1, 2, 4, 0.12, 0.02], [1, 2, 8, 0.20, 0.05]])
    assert x[4] > 1e-4
    assert x[2] == pytest.approx(1.1 * x[4])
    assert x[3] == pytest.approx(1.1e-8) and x[5] == pytest.approx(1e-8)


@pytest.mark.parametrize("rows, theirs", [
    # inputs and parameters from the Sia simulator's goodput.fit_perf_params (autograd gradient)
    ([[4, 7, 16, 1.1516880542039871, 0.626691234588623], [3, 7, 6, 1.1986816078424454, 0.7863558654785157]],
     [0.3447227642, 0.01126710285, 0.1500312438, 0.1156333729, 1e-08, 1e-08, 1.022710916]),
    ([[2, 2, 4, 0.43972116708755493, 0.2087431678771973], [2, 9, 6, 0.9834681451320648, 0.6713040885925292],
      [1, 8, 12, 0.8432824313640594, 0.4093744144439697]],
     [0.1551500192, 0.02339463437, 0.1909843535, 0.07099729184, 0.1086036044, 0.04980052293, 1.0]),
    ([[2, 13, 115, 0.1955847442150116, 0.015112767949700357], [1, 6, 81, 0.177757129073143, 0.016183040261268614],
      [2, 8, 462, 0.5437161326408386, 0.0690931840017438], [2, 10, 57, 0.1429208368062973, 0.009032255977392196],
      [2, 10, 800, 0.8804029673337936, 0.12009683275967835], [2, 8, 81, 0.17399200797080994, 0.015724927745759485],
      [2, 13, 115, 0.19337627291679382, 0.013908544063568114], [2, 16, 81, 0.1823589950799942, 0.020813376367092132]],
     [0.08430382069, 0.0008895618703, 0.01494184311, 0.001626116611, 0.02359844006, 0.004287376313, 1.295896369]),
])
def test_fit_predicts_what_the_authors_fit_predicts(rows, theirs):
    x = _fit(rows)
    nodes, gpus, bsz = np.array([1, 1, 1, 2, 2, 4]), np.array([1, 2, 4, 8, 8, 16]), np.array([4, 8, 16, 8, 32, 16])
    ours = pollux_iter_time(x, bsz, nodes, gpus)
    ref = pollux_iter_time(np.append(theirs, 0.0), bsz, nodes, gpus)
    np.testing.assert_allclose(ours, ref, rtol=1e-5)


def test_profiles_refit_on_new_configurations_only():
    p = ObservedProfiles()
    assert p.theta(0, "t4") is None and p.most_gpus(0) == 0
    p.record(0, "t4", 1, 1, 8, 0.4, 0.0)
    first = p.theta(0, "t4")
    p.record(0, "t4", 1, 1, 8, 0.5, 0.0)                 # same configuration: the first data stays
    assert p.count(0, "t4") == 1 and p.theta(0, "t4") is first
    p.record(0, "t4", 1, 2, 8, 0.45, 0.05)
    assert p.count(0, "t4") == 2 and p.most_gpus(0) == 2
    assert p.theta(0, "a100") is None and p.theta(1, "t4") is None


def _observed_model(tmp_path, **options):
    from sim.goodput.jobmodel import JobModel
    from sim.goodput.oracle import GoodputOracle
    from sim.goodput.profiles import Application
    from sim.state import JobSpecs
    write_profile(tmp_path / "profiles")
    oracle = GoodputOracle((Application.load(tmp_path / "profiles" / "toy"),), job_batch=np.array([16]))
    one = np.ones(1)
    jobs = JobSpecs(arrival=np.zeros(1), demand=np.array([2], np.int32), gpus_min=np.array([1], np.int32),
                    gpus_max=np.array([2], np.int32), model=np.zeros(1, np.int32), work=300 * one,
                    est_duration=one, priority=one, restart_delay=30 * one)
    return JobModel(oracle, jobs, adaptive=True, observed=True, **options)


def test_a_configuration_counts_once_it_has_trained_past_its_restart_delay(tmp_path):
    m = _observed_model(tmp_path)
    m.started[0] = True
    # no model on the type yet: the first batch is max(M0, r b_min) = 8, 4 per GPU on 2 GPUs
    assert m.batch_model(0) is None and m.config(0, 1, 2) == (4, 0)
    m.resume_at[0] = 90.0                                  # placed at 60 s, restart delay 30 s
    m._note_running({0: (None, 1, 2, 4, 0.12, 0.02)}, 60.0)
    m._record_runs(90.0)                                   # still restoring at 90 s: nothing ran
    assert m.batch_model(0) is None
    m._record_runs(120.0)                                  # trained from 90 to 120 s
    np.testing.assert_allclose(m.batch_model(0), fit_observed([1], [2], [4], [0.12], [0.02]))
    assert m.observed.most_gpus(0) == 2


def test_with_batch_at_segments_a_job_keeps_its_configuration_until_a_segment_begins(tmp_path):
    """The Sia simulator re-picks a job's batch only after an epoch crossing, at a step's end and on
    a move (``Job.step``, ``reallocate``).  Here the job's first observation (4 per GPU on 2 GPUs)
    makes its model predict near-linear scaling, so it picks 8 per GPU (global 16); a second
    observation shows 8 per GPU is slow (0.6 s a step).  Between rounds it keeps 8 per GPU; when a
    segment begins it re-picks 4 per GPU (global 8) with the refitted model."""
    m = _observed_model(tmp_path, batch_at_segments=True)
    m.started[0] = True
    m.stat_batch[0], m.stat_epoch[0] = 16, 2
    m.observed.record(0, None, 1, 2, 4, 0.12, 0.02)
    first = m._segment_rate(0, (2,), 2, (None,), True)
    assert first[1] == 16 and first[3][3] == 8
    m.observed.record(0, None, 1, 2, 8, 0.60, 0.05)
    assert m._segment_rate(0, (2,), 2, (None,), False) is first
    again = m._segment_rate(0, (2,), 2, (None,), True)
    assert again[1] == 8 and again[3][3] == 4
    assert again == m._rate_and_scale(0, (2,), 2, (None,))
    free = _observed_model(tmp_path, batch_at_segments=False)
    free.started[0] = True
    free.stat_batch[0], free.stat_epoch[0] = 16, 2
    free.observed.record(0, None, 1, 2, 4, 0.12, 0.02)
    free.observed.record(0, None, 1, 2, 8, 0.60, 0.05)
    assert free._segment_rate(0, (2,), 2, (None,), False)[1] == 8


# -- the fit's Numba kernel against its numpy reference ------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from reference_observed_fit import fit_terms_reference  # noqa: E402
from sim.goodput.observed_kernels import fit_terms  # noqa: E402


def _numpy_math_is_libm() -> bool:
    """numpy's float64 log and power give the C library's bits (no AVX-512 versions)."""
    import math
    probe = np.geomspace(1e-9, 1e9, 257) * 1.0000001
    return (all(np.log(probe) == [math.log(v) for v in probe])
            and all(probe ** 1.37 == [math.pow(v, 1.37) for v in probe]))


_positive = st.floats(1e-8, 50.0)


@st.composite
def _fit_points(draw):
    n = draw(st.integers(1, 12))
    nodes = np.array(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), float)
    gpus = nodes * np.array(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), float)
    bsz = np.array(draw(st.lists(st.integers(1, 512), min_size=n, max_size=n)), float)
    logs = st.lists(st.floats(-8.0, 3.0), min_size=n, max_size=n)
    return nodes, gpus, bsz, np.array(draw(logs)), np.array(draw(logs))


@settings(max_examples=300, deadline=None)
@given(x6=st.lists(_positive, min_size=6, max_size=6),
       g=st.one_of(st.just(1.0), st.just(10.0), st.floats(1.0, 10.0)),
       points=_fit_points())
def test_fit_terms_kernel_matches_the_numpy_reference(x6, g, points):
    """Every per-point term with the reference's bits where numpy's log and power are libm's; else
    (numpy's AVX-512 versions, a few ULP apart, and errors that are differences of logs) within
    1e-13, relative or absolute, and the gamma derivative within 1e-12: it is a difference of two
    nearly equal terms when the network term vanishes (one GPU), so there only an absolute bound
    means anything.  Edge cases one GPU (no network term), two GPUs
    (retrogression at its floor), gamma at both bounds."""
    x = np.array(x6 + [g])
    got = fit_terms(x, x[6] ** 2, *points)
    want = fit_terms_reference(x, *points)
    exact = _numpy_math_is_libm()
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape
        if exact:
            np.testing.assert_array_equal(a, b)
        elif k == 3:                                  # derr2: its gamma row only by an absolute bound
            np.testing.assert_allclose(a[:6], b[:6], rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(a[6], b[6], rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
