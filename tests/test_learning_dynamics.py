"""Learning dynamics: the batched Numba micro controller against sim.micro, the straggler
and efficiency factors worked by hand, and time-to-accuracy completion."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.learning._kernels import rate_factors
from sim.learning.dynamics import DynamicsConfig, LearningSpec, LearningState, micro_update_batch
from sim.learning.world import LearningWorld
from sim.micro import MicroConfig, MicroController
from sim.policies import get_policy


@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 8), lb=st.integers(1, 64), seed=st.integers(0, 10_000),
       epochs=st.integers(1, 6), enabled=st.booleans())
def test_numba_micro_matches_python_controller(K, lb, seed, epochs, enabled):
    rng = np.random.default_rng(seed)
    B = K * lb
    cfg = DynamicsConfig()
    ref = MicroController(K, B, 0.1, MicroConfig(enabled=enabled))
    kc = 8
    ubar, w = np.zeros((1, kc)), np.zeros((1, kc))
    w[0, :K] = 1.0 / K
    b = np.zeros((1, kc), np.int64)
    b[0, :K] = lb
    has = np.zeros(1, bool)
    prev = np.array([np.nan])
    for _ in range(epochs):
        u = rng.uniform(0, 1, size=K)
        ctl = ref.update(u)
        U, f, _ = micro_update_batch([0], u[None, :], ubar, has, w, b, [K], [B], cfg, enabled, prev)
        prev = U
        np.testing.assert_allclose(w[0, :K], ctl.weights, atol=1e-9)
        # integer batches: the same largest-remainder rule; a remainder tie may break the
        # other way when the projections differ in the last bit (sums are added in another order)
        assert b[0, :K].sum() == ctl.batch_sizes.sum() == B
        assert np.abs(b[0, :K] - ctl.batch_sizes).max() <= 1
        assert U[0] == pytest.approx(ctl.job_uncertainty, abs=1e-9)
        assert 0.1 * f[0] == pytest.approx(ctl.lr, abs=1e-9)


def _factors(k, b, w, diff, speeds, alpha, beta, sync, tta, phi=1e9, demand=None, shard=True, cap=1.3):
    n_nodes = len(speeds)
    nodes = np.arange(n_nodes, dtype=np.int32)
    counts = np.array([k // n_nodes] * n_nodes, np.int32)
    lb = sum(b) / k
    W = np.zeros((1, 8))
    W[0, :k] = w
    Bm = np.zeros((1, 8), np.int64)
    Bm[0, :k] = b
    D = np.ones((1, 8))
    D[0, :k] = diff
    scale, spw = np.empty(1), np.empty(1)
    demand = k if demand is None else demand
    rate_factors(np.array([0]), np.array([k]), np.array([0, n_nodes]), nodes, counts,
                  np.array(speeds, float), W, Bm, D, np.array([alpha]), np.array([beta]),
                  np.array([sync]), np.array([sync]), np.array([float(k * lb)]),
                  np.array([float(demand * lb)]), np.array([float(demand)]), np.array([phi]),
                  np.array([tta]), shard, cap, np.array([1.0]), scale, spw)
    return scale[0], spw[0]


def test_straggler_factor_by_hand():
    # 2 workers on one node at speed 1, t(b) = b s, no sync: uniform batches 32/32 -> 1
    assert _factors(2, [32, 32], [0.5, 0.5], [1, 1], [1.0], 0.0, 1.0, 0.0, False)[0] == pytest.approx(1)
    # batches 48/16 with shards 3/4, 1/4: step 48 instead of 32, same steps -> 2/3
    assert _factors(2, [48, 16], [0.75, 0.25], [1, 1], [1.0], 0.0, 1.0, 0.0, False)[0] == \
        pytest.approx(32 / 48)
    # with sync 16 s per step: (32 + 16) / (48 + 16)
    assert _factors(2, [48, 16], [0.75, 0.25], [1, 1], [1.0], 0.0, 1.0, 16.0, False)[0] == \
        pytest.approx(48 / 64)
    # unequal GPUs (speeds 1.5 and 0.5 on two nodes): the uniform step is set by the slow one
    # (32 / 0.5 = 64); giving it 16 samples: max(48/1.5, 16/0.5) = 32 -> twice as fast
    assert _factors(2, [48, 16], [0.75, 0.25], [1, 1], [1.5, 0.5], 0.0, 1.0, 0.0, False)[0] == \
        pytest.approx(2.0)
    # uniform batches but uneven shards: the big shard needs 1.5x the steps
    assert _factors(2, [32, 32], [0.75, 0.25], [1, 1], [1.0], 0.0, 1.0, 0.0, False)[0] == \
        pytest.approx(1 / 1.5)


def test_tta_gain_and_efficiency_by_hand():
    # TTA, k = demand, balanced: G = (0.75*1.2 + 0.25*0.8) / 1.0 = 1.1
    s, spw = _factors(2, [48, 16], [0.75, 0.25], [1.2, 0.8], [1.0], 1.0, 0.0, 0.0, True)
    assert s == pytest.approx(1.1)
    # twice the GPUs at phi = 64, M0 = 64 (2 x 32), B = 128: (4/2) * 128/192, uniform
    s, spw = _factors(4, [32] * 4, [0.25] * 4, [1] * 4, [1.0], 1.0, 0.0, 0.0, True, phi=64.0,
                      demand=2)
    assert s == pytest.approx(2 * 128 / 192)
    assert spw == pytest.approx(64 / (128 / 192))


def _tiny_spec(n, mode="tta", **kw):
    return LearningSpec.build(n, ["m0", "m1"], np.full(n, 8), mode=mode, quality=0.9, seed=3,
                              epoch_samples=320.0, **kw)


def test_tta_jobs_end_at_the_target_metric():
    jobs = specs([0, 0, 5], [2, 2, 1], [400.0, 100.0, 50.0], [0, 1, 0])
    spec = _tiny_spec(3)
    pol = get_policy("eghs")
    res = run_jobs(small_cluster(), jobs, pol, LinearOracle(), EngineConfig(round_s=10.0),
                   learning=LearningWorld(spec))
    L = LearningState(spec, jobs, DynamicsConfig(), False)
    ids = np.arange(3)
    assert np.all(np.isfinite(res.finish)) and pol.micro_updates > 0
    # done = work: x = 1, where the surrogate metric is the target
    np.testing.assert_allclose(L.metric(ids, np.ones(3)), spec.target_metric(jobs.model), rtol=1e-9)
    assert np.all(L.metric(ids, np.full(3, 0.5)) != spec.target_metric(jobs.model))


def test_iteration_jobs_ignore_efficiency():
    jobs = specs([0], [2], [100.0])
    jobs = type(jobs)(**{**jobs.__dict__, "gpus_max": np.array([4], np.int32)})
    c = small_cluster(gpus=(4,), types=(1,), speed=(1.0,))
    r_it = run_jobs(c, jobs, get_policy("eghs-unaware"), LinearOracle(), EngineConfig(round_s=0.0),
                    learning=LearningWorld(_tiny_spec(1, mode="iterations")))
    r_tta = run_jobs(c, jobs, get_policy("eghs-unaware"), LinearOracle(), EngineConfig(round_s=5.0),
                     learning=LearningWorld(_tiny_spec(1, mode="tta")))
    # water-filling gives the job all 4 GPUs: 4 steps/s, so 100 steps take 25 s; a TTA job at
    # twice the requested GPUs makes EFF(2 M0) in (0.5, 1) reference steps per step (the
    # oracle's rate already counts the GPUs; EFF grows with the noise scale every 5 s round)
    assert r_it.finish[0] == pytest.approx(25.0)
    assert 25.0 < r_tta.finish[0] < 50.0


def test_spec_validation():
    with pytest.raises(ConfigError):
        LearningSpec.build(2, ["m0"], [1, 1], mode="bogus")
    with pytest.raises(ConfigError):
        LearningSpec.build(2, ["m0"], [1, 1], quality=1.5)
    with pytest.raises(ConfigError, match="unknown learning-dynamics"):
        DynamicsConfig.from_params({"nope": 1})
    with pytest.raises(ConfigError):
        DynamicsConfig.from_params({"H0": 0.1, "H_inf": 0.5})
    jobs = specs([0], [2], [10.0])
    with pytest.raises(ConfigError, match="learning spec has 3 jobs"):
        LearningState(_tiny_spec(3), jobs, DynamicsConfig(), True)
