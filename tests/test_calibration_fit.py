"""Fitting the Pollux/Sia and Hops step-time models; identifiability warnings on thin data."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from sim.calibration.fit import (HopsParams, Observations, PolluxParams, fit, fit_all, fit_hops, fit_pollux,
                                 group_observations, hops_iter_time, params_from_dict, pollux_iter_time)
from sim.calibration.schema import CalibrationWarning, measurements_from_rows
from sim.calibration.synthetic import EXAMPLE_HOPS, EXAMPLE_POLLUX, synthetic_measurements
from sim.errors import ConfigError


def obs_of(table):
    (key, obs), = group_observations(table).items()
    return obs


def test_pollux_formula_by_hand():
    p = PolluxParams(alpha_c=0.1, beta_c=0.01, alpha_n=0.3, beta_n=0.02, alpha_r=0.1, beta_r=0.01, gamma=2.0)
    # 1 GPU: network ~0, step = compute = 0.1 + 0.01 * 10 = 0.2
    assert p.step_time(10, 1, 1) == pytest.approx(0.2, rel=1e-6)
    # one node, 4 GPUs: network 0.1 + 0.01 * 2 = 0.12; (0.2^2 + 0.12^2)^(1/2)
    assert p.step_time(10, 1, 4) == pytest.approx(np.hypot(0.2, 0.12))
    # two nodes, 4 GPUs: network 0.3 + 0.02 * 2 = 0.34; with 3 accumulation steps add 3 * 0.2
    assert p.step_time(10, 2, 4, accum_steps=3) == pytest.approx(0.6 + np.hypot(0.2, 0.34))
    assert pollux_iter_time(p.as_array()[None, :], [10], [1], [4])[0] == pytest.approx(np.hypot(0.2, 0.12))


def test_pollux_server_contention_term_by_hand():
    p = PolluxParams(alpha_c=0.1, beta_c=0.01, alpha_n=0.3, beta_n=0.02, alpha_r=0.1, beta_r=0.01, gamma=2.0,
                     beta_l=0.05)
    # two nodes, 6 GPUs: network 0.3 + 0.02 * 4 = 0.38, plus 0.05 per GPU beyond the first on the
    # busiest server: 3+3 adds 0.10, 1+5 adds 0.20
    assert p.step_time(10, 2, 6, max_per_node=3) == pytest.approx(np.hypot(0.2, 0.48))
    assert p.step_time(10, 2, 6, max_per_node=5) == pytest.approx(np.hypot(0.2, 0.58))
    # without a placement list: an even spread (3+3)
    assert p.step_time(10, 2, 6) == pytest.approx(np.hypot(0.2, 0.48))
    # one GPU: no synchronisation at all
    assert p.step_time(10, 1, 1) == pytest.approx(0.2, rel=1e-6)
    # a 7-parameter array (older calib.toml) is Pollux's model
    assert pollux_iter_time(p.as_array()[:7], 10, 2, 6, 0, 5) == pytest.approx(np.hypot(0.2, 0.38))


def test_server_contention_is_recovered_from_spread_placements():
    truth = PolluxParams(**{**EXAMPLE_POLLUX.as_dict(), "beta_l": 0.03})
    placements = [(1,), (2,), (4,), (2, 2), (1, 3), (4, 4), (2, 6), (3, 3), (1, 5), (4, 4, 4), (2, 5, 5)]
    r = fit_pollux(obs_of(synthetic_measurements(truth, placements=placements)), emit_warnings=False)
    assert "beta_l" not in r.pinned
    assert r.params.beta_l == pytest.approx(0.03, rel=0.05)
    assert r.median_ape < 1.0
    # same counts, different spread: the fit tells them apart
    assert r.predict(32, 2, 6, 0, 5) > r.predict(32, 2, 6, 0, 3) * 1.05


def test_server_contention_pinned_without_spread_variety():
    placements = [(1,), (2,), (4,), (2, 2), (4, 4), (3, 3, 3)]
    with pytest.warns(CalibrationWarning, match="beta_l not identifiable: no placements with the same GPU"):
        r = fit_pollux(obs_of(synthetic_measurements(EXAMPLE_POLLUX, placements=placements)))
    assert r.params.beta_l == pytest.approx(0.0, abs=1e-6)


def test_params_without_beta_l_load_as_pollux_model():
    d = {k: v for k, v in EXAMPLE_POLLUX.as_dict().items() if k != "beta_l"}
    assert params_from_dict("pollux", d).beta_l == 0.0
    with pytest.raises(ConfigError, match="lack gamma"):
        params_from_dict("pollux", {k: v for k, v in d.items() if k != "gamma"})


def test_hops_formula_by_hand():
    h = HopsParams(a_c=0.06, b_c=0.0, r_b=2 / 3, u=0.01, a_d=0.05, b_d=0.0, w=0.002, c_link=0.08, c_net=0.3,
                   pattern=2, nonoverlap=0.2)
    # T_f = 0.02, T_b = 0.04, T_u = 0.01, T_d = 0.05; one node, K=4: T_c = 0.08 * 3/4 = 0.06
    # pattern 2: T_d + max(T_b + 0.2 T_c, T_c) + T_u + T_f + T_w = 0.05 + 0.06 + 0.01 + 0.02 + 0.002
    assert h.step_time(32, 1, 4) == pytest.approx(0.142)
    # pattern 1: max(T_d, max(..) + T_u) + T_f + T_w = max(0.05, 0.07) + 0.02 + 0.002
    assert hops_iter_time(h.as_array(), 32, 1, 4, pattern=1) == pytest.approx(0.092)
    # two nodes: T_c = c_net = 0.3 dominates the backward pass
    assert h.step_time(32, 2, 4) == pytest.approx(0.05 + 0.3 + 0.01 + 0.02 + 0.002)
    # accumulation step: no communication, wait or update
    assert h.accum_time(32, 2, 4) == pytest.approx(0.05 + 0.04 + 0.02)


def test_pollux_fit_recovers_synthetic_data():
    obs = obs_of(synthetic_measurements(EXAMPLE_POLLUX))
    r = fit_pollux(obs, emit_warnings=False)
    assert r.median_ape < 2.0 and r.p90_ape < 5.0      # Pollux's regularizers bias it slightly
    assert r.params.alpha_c == pytest.approx(EXAMPLE_POLLUX.alpha_c, rel=0.05)
    assert r.params.beta_c == pytest.approx(EXAMPLE_POLLUX.beta_c, rel=0.05)
    assert r.warnings == [] and r.pinned == {}
    assert r.local_bsz_range == (8, 128) and r.gpu_counts == (1, 2, 3, 4, 6, 8, 12)


def test_hops_fit_recovers_synthetic_data_with_components():
    obs = obs_of(synthetic_measurements(EXAMPLE_HOPS))
    r = fit_hops(obs, emit_warnings=False)
    assert r.median_ape < 0.01 and r.params.pattern == 2
    for name in EXAMPLE_HOPS.names:
        assert getattr(r.params, name) == pytest.approx(getattr(EXAMPLE_HOPS, name), rel=1e-3, abs=1e-6)


def test_hops_picks_the_pattern_of_the_data():
    p1 = HopsParams(**{**EXAMPLE_HOPS.as_dict(), "a_d": 0.05, "b_d": 0.002, "pattern": 1})
    r = fit_hops(obs_of(synthetic_measurements(p1)), emit_warnings=False)
    assert r.params.pattern == 1 and r.median_ape < 0.5


def test_noisy_fit_stays_close():
    t = synthetic_measurements(EXAMPLE_POLLUX, noise=0.03, seed=1)
    r = fit_pollux(obs_of(t), emit_warnings=False)
    truth = EXAMPLE_POLLUX.step_time(*(obs_of(t).local_bsz, obs_of(t).n_nodes, obs_of(t).n_gpus))
    assert np.median(np.abs(r.predict(obs_of(t).local_bsz, obs_of(t).n_nodes, obs_of(t).n_gpus) / truth - 1)) < 0.03


def test_single_point_pins_and_names_parameters():
    t = measurements_from_rows([dict(model="bert", gpu_type="t4", n_gpus=1, n_nodes=1, local_bsz=8,
                                     step_time_s=0.5, sync_time_s=0.01)])
    with pytest.warns(CalibrationWarning) as rec:
        r = fit_pollux(obs_of(t))
    msgs = [str(w.message) for w in rec]
    assert all(m.startswith("bert on t4 (pollux)") for m in msgs)
    assert any("alpha_c not identifiable: only one batch size (b=8)" in m for m in msgs)
    assert any("alpha_n, alpha_r, beta_n, beta_r, gamma not identifiable: no multi-GPU" in m for m in msgs)
    assert set(r.pinned) == {"alpha_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma", "beta_l"}
    # Pollux has no update term on one GPU: the fit splits the 1% between step and accumulation time
    assert r.predict(8, 1, 1) == pytest.approx(0.5, rel=0.02)
    # perfect scaling is assumed for multi-GPU placements (and said so)
    assert r.predict(8, 2, 8) == pytest.approx(r.predict(8, 1, 1), rel=1e-6)
    with pytest.warns(CalibrationWarning) as rec:
        h = fit_hops(obs_of(t))
    assert any("hops" in str(w.message) and "c_link, c_net, w not identifiable" in str(w.message) for w in rec)
    assert h.predict(8, 1, 1) == pytest.approx(0.5, rel=1e-3)


@pytest.mark.filterwarnings("ignore:.*beta_l not identifiable")
def test_single_node_data_sets_the_network_prior():
    t = synthetic_measurements(EXAMPLE_POLLUX, placements=[(1,), (2,), (3,), (4,)])
    with pytest.warns(CalibrationWarning, match=r"synthetic on v100 \(pollux\): alpha_n, beta_n not identifiable: "
                                                 r"no multi-node measurement"):
        r = fit_pollux(obs_of(t))
    assert r.params.alpha_n == pytest.approx(1.1 * r.params.alpha_r)
    assert r.params.beta_n == pytest.approx(1.1 * r.params.beta_r)


def test_hops_confounded_parameters_are_reported():
    # communication hidden behind the backward pass and a single multi-GPU placement: the exposed
    # part 0.2 c_net and the wait w add the same constant to every multi-GPU step
    p = HopsParams(**{**EXAMPLE_HOPS.as_dict(), "c_net": 0.01, "c_link": 0.005})
    t = synthetic_measurements(p, placements=[(1,), (1, 1)], components=False)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", CalibrationWarning)
        r = fit_hops(obs_of(t))
    msgs = [str(w.message) for w in rec]
    jac = [m for m in msgs if "cannot be separated" in m or "not determined" in m]
    assert any(" w " in m or "and w" in m for m in jac), msgs
    assert any("c_link not identifiable: no single-node multi-GPU" in m for m in msgs)
    assert r.median_ape < 1.0


def test_bad_input():
    with pytest.raises(ConfigError, match="no measurements"):
        fit_pollux(Observations.from_arrays("m", "t4", n_gpus=[], n_nodes=[], local_bsz=[], step=[]))
    obs = Observations.from_arrays("m", "t4", n_gpus=[1], n_nodes=[1], local_bsz=[4], step=[-1.0])
    with pytest.raises(ConfigError, match="m on t4: step time"):
        fit_pollux(obs)
    with pytest.raises(ConfigError, match="unknown model kind"):
        fit(obs, "optimus")


def test_fit_all_groups_by_model_and_gpu_type():
    import pyarrow as pa
    t = pa.concat_tables([synthetic_measurements(EXAMPLE_POLLUX, model="a", gpu_type="t4"),
                          synthetic_measurements(EXAMPLE_HOPS, model="b", gpu_type="a100")])
    fits = fit_all(t, emit_warnings=False)
    assert sorted(fits) == [("a", "t4", "hops"), ("a", "t4", "pollux"), ("b", "a100", "hops"), ("b", "a100", "pollux")]
    assert fits[("b", "a100", "hops")].median_ape < 0.01
