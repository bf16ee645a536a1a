"""Pollux statistical efficiency and the fit of the noise scale."""
from __future__ import annotations

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.learning.stats_efficiency import (efficiency, fit_phi_linear, noise_scale, phi_at,
                                           progress_per_iteration, realized_efficiency)


def test_efficiency_formula():
    assert efficiency(128, 128, 1000.0) == pytest.approx(1.0)
    # (phi + M0) / (phi + M): 1128 / 1256
    assert efficiency(256, 128, 1000.0) == pytest.approx(1128 / 1256)
    assert efficiency(64, 128, 1000.0) > 1.0
    e = efficiency(np.array([128, 512, 4096]), 128, 500.0)
    assert np.all(np.diff(e) < 0)
    assert noise_scale(2.0, 6.0, 128) == pytest.approx(384.0)
    assert phi_at(10.0, 90.0, 0.5) == pytest.approx(55.0)
    with pytest.raises(ConfigError):
        efficiency(0, 128, 1.0)


def test_progress_per_iteration_is_one_at_the_request():
    assert progress_per_iteration(4, 4, 123.0, 256) == pytest.approx(1.0)
    # twice the GPUs: twice the samples, each worth EFF(2 M0)
    assert progress_per_iteration(8, 4, 256.0, 256) == pytest.approx(2 * (512 / 768))


def test_fit_recovers_a_known_noise_scale():
    M0, phi0, slope = 128.0, 300.0, 5000.0
    frac = np.tile(np.linspace(0.01, 1, 30), 3)
    B = np.repeat([512.0, 2048.0, 4096.0], 30)
    phi = phi0 + slope * frac
    eff = (phi + M0) / (phi + B)
    p0, s, rmse = fit_phi_linear(frac, eff, B, M0)
    assert p0 == pytest.approx(phi0, rel=1e-3) and s == pytest.approx(slope, rel=1e-3)
    assert rmse < 1e-6
    # realized efficiency of a synthetic run: progress advances EFF * B / M0 per iteration
    it = np.arange(0, 1000, 10.0)
    prog = np.cumsum(np.r_[0, np.full(99, 10 * 0.5 * 512 / M0)])
    mid, e = realized_efficiency(prog, it, 512, M0)
    np.testing.assert_allclose(e, 0.5)
