"""The learning-curve surrogate: shipped parameters, its identities, and the fit against
the real Pollux curves (validation; skipped without ../shared/data)."""
from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.learning.dynamics import entropy_curve
from sim.learning.surrogate import (DEFAULT_PROFILE, LearningSurrogate, fit_pollux, load_surrogate,
                                    profile_for_model)

POLLUX = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or
              Path(__file__).resolve().parents[2] / "shared" / "data") / "profiles" / "pollux"


def test_builtin_is_small_with_provenance():
    f = resources.files("sim").joinpath("data/learning_surrogate.json")
    doc = json.loads(f.read_text())
    assert len(f.read_bytes()) < 20_000          # fitted parameters only, not the data
    assert "Pollux" in doc["provenance"]["cite"] and "forms" in doc["provenance"]
    s = load_surrogate()
    assert set(s.names) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    for p in s.profiles:
        assert 0.1 <= p.kappa <= 5 and p.tau > 0 and p.phi0 > 0 and p.epoch_samples > 0
        assert p.curve_rmse < 0.2


def test_model_family_mapping():
    names = load_surrogate().names
    assert profile_for_model("ResNet-18 (batch size 64)", names) == "cifar10"
    assert profile_for_model("ResNet-50 (batch size 64)", names) == "imagenet"
    assert profile_for_model("LM (batch size 20)", names) == "deepspeech2"
    assert profile_for_model("imagenet", names) == "imagenet"
    assert profile_for_model("m0", names) == DEFAULT_PROFILE


def test_target_is_reached_at_P_q_and_entropy_gap_matches():
    s = load_surrogate()
    for p in s.profiles:
        for q in (0.5, 0.9, 0.97):
            Pq = p.progress_for_quality(q)
            np.testing.assert_allclose(p.metric_at(Pq), p.target_metric(q), rtol=1e-9, atol=1e-12)
            # entropy at x = 1 closes the same fraction q of its range
            H = entropy_curve(1.0, q, p.kappa, 0.95, 0.10)
            np.testing.assert_allclose((0.95 - H) / 0.85, q, rtol=1e-12)
    with pytest.raises(ConfigError):
        s["cifar10"].progress_for_quality(1.0)


def test_overrides_and_bad_files(tmp_path):
    s = load_surrogate()
    t = s.with_overrides(kappa=2.0)
    assert t["cifar10"].kappa == pytest.approx(2 * s["cifar10"].kappa)
    with pytest.raises(ConfigError):
        s.with_overrides(name=2)
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="not a learning surrogate"):
        load_surrogate(bad)
    ok = tmp_path / "y.json"
    ok.write_text(json.dumps(s.to_json()))
    assert load_surrogate(ok).names == s.names


@pytest.mark.skipif(not POLLUX.is_dir(), reason="shared data (profiles/pollux) not present")
def test_fit_reproduces_shipped_parameters():
    fresh = fit_pollux(POLLUX, models=["deepspeech2"])      # + cifar10 (the default profile)
    shipped = load_surrogate()
    for p in (shipped["cifar10"], shipped["deepspeech2"]):
        q = fresh[p.name]
        for f in ("kappa", "tau", "m_inf", "alpha_c", "beta_c"):
            assert getattr(q, f) == pytest.approx(getattr(p, f), rel=1e-3), (p.name, f)
    # the fitted curve tracks the real base-batch run
    import pyarrow.csv as pacsv
    d = pacsv.read_csv(POLLUX / "cifar10" / "validation-128.csv")
    P, m = d.column("progress").to_numpy(), d.column("metric").to_numpy()
    assert np.sqrt(np.mean((shipped["cifar10"].metric_at(P) - m) ** 2)) < 0.05
