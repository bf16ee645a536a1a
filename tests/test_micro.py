"""sim.micro: stable weights, sharding, fixed-budget batches, bounded LR."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import ConfigError
from sim.micro import MicroConfig, MicroController, allocate_integers, project_box_simplex


def test_first_epoch_by_hand():
    # K = 4: w_min = 0.125, w_max = 0.5, rate limit 0.0625 from uniform 0.25
    ctl = MicroController(4, 64, 0.1)
    c = ctl.update([0.8, 0.4, 0.4, 0.4])
    assert np.allclose(c.ubar, [0.8, 0.4, 0.4, 0.4])
    # raw weights 0.4, 0.2, 0.2, 0.2 -> rate limit caps worker 0 at 0.3125
    assert np.allclose(c.weights, [0.3125, 0.22916667, 0.22916667, 0.22916667])
    assert c.batch_sizes.sum() == 64 and c.batch_sizes[0] == 20
    assert c.lr == 0.1  # no previous job uncertainty yet


def test_ema_and_lr_modulation_bounds():
    ctl = MicroController(2, 10, 1.0, MicroConfig(beta_u=0.5, delta_eta=0.2))
    ctl.update([0.5, 0.5])
    c = ctl.update([1.0, 1.0])
    assert np.allclose(c.ubar, [0.75, 0.75])
    assert c.lr == pytest.approx(1.2)  # +50% clipped to +20%
    c = ctl.update([0.7, 0.7])
    assert c.lr == pytest.approx(1.0 + (0.725 - 0.75) / 0.75)


@settings(max_examples=80, deadline=None)
@given(K=st.integers(1, 9), B=st.integers(9, 300),
       us=st.lists(st.lists(st.floats(0, 1), min_size=9, max_size=9), min_size=1, max_size=6))
def test_weights_and_batches_hold_their_constraints(K, B, us):
    ctl = MicroController(K, B, 0.1, MicroConfig(b_min=1))
    lo, hi, rl = ctl.config.bounds(K)
    prev = ctl.weights.copy()
    for u in us:
        c = ctl.update(np.array(u[:K]))
        w = c.weights
        assert w.sum() == pytest.approx(1.0, abs=1e-9)
        assert (w >= lo - 1e-9).all() and (w <= hi + 1e-9).all()
        assert (np.abs(w - prev) <= rl + 1e-9).all()
        assert c.batch_sizes.sum() == B and (c.batch_sizes >= 1).all()
        assert 0.8 * 0.1 - 1e-12 <= c.lr <= 1.2 * 0.1 + 1e-12
        prev = w


def test_memory_caps_and_ceilings():
    cfg = MicroConfig(b_min=2, b_max=30, mem_cap=(10, 40, 40, 40))
    ctl = MicroController(4, 80, 0.1, cfg)
    for _ in range(10):
        c = ctl.update([1.0, 0.1, 0.1, 0.1])
    assert c.batch_sizes.sum() == 80
    assert c.batch_sizes[0] <= 10 and (c.batch_sizes <= 30).all() and (c.batch_sizes >= 2).all()


def test_allocate_integers_largest_remainder():
    assert allocate_integers(np.array([1, 1, 1]), 10, 0, 10).tolist() == [4, 3, 3]
    assert allocate_integers(np.array([0.5, 0.3, 0.2]), 7, 0, 7).tolist() == [4, 2, 1]
    assert allocate_integers(np.array([1.0, 0, 0]), 9, 2, 9).tolist() == [5, 2, 2]
    with pytest.raises(ConfigError, match="cannot split"):
        allocate_integers(np.array([1, 1]), 10, 0, 4)


def test_projection():
    w = project_box_simplex(np.array([0.9, 0.05, 0.05]), 0.1, 0.6)
    assert np.allclose(w, [0.6, 0.2, 0.2])


def test_sharding_is_deterministic_and_a_partition():
    ctl = MicroController(3, 30, 0.1, seed=7)
    ctl.update([0.9, 0.3, 0.3])
    a = ctl.shards(100, epoch=2)
    b = MicroController(3, 30, 0.1, seed=7)
    b.update([0.9, 0.3, 0.3])
    assert all(np.array_equal(x, y) for x, y in zip(a, b.shards(100, epoch=2)))
    assert not np.array_equal(a[0], ctl.shards(100, epoch=3)[0])
    allidx = np.sort(np.concatenate(a))
    assert np.array_equal(allidx, np.arange(100))
    assert len(a[0]) > len(a[1])  # more data for the more uncertain worker
    uni = ctl.with_config(shard_mode="uniform")
    uni.update([0.9, 0.3, 0.3])
    assert [len(s) for s in uni.shards(100)] == [34, 33, 33]


def test_disabled_is_the_uniform_baseline():
    ctl = MicroController(4, 64, 0.1, MicroConfig(enabled=False))
    for u in ([0.9, 0.1, 0.1, 0.1], [0.2, 0.9, 0.1, 0.5]):
        c = ctl.update(u)
        assert np.allclose(c.weights, 0.25) and c.batch_sizes.tolist() == [16] * 4
        assert c.lr == 0.1
    assert [len(s) for s in ctl.shards(10)] == [3, 3, 2, 2]


def test_softmax_weight_map():
    ctl = MicroController(2, 10, 0.1, MicroConfig(weight_map="softmax", T_w=0.1, rate_limit=1.0,
                                                  w_min=0.0, w_max=1.0))
    c = ctl.update([0.6, 0.5])
    e = np.exp([6.0, 5.0])
    assert np.allclose(c.weights, e / e.sum())


def test_observe_from_logits_numpy_and_torch():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((40, 10)).astype(np.float32)
    logits[:20] *= 5  # workers 0 confident, 1 not
    owner = np.repeat([0, 1], 20)
    ctl = MicroController(3, 12, 0.1)
    u = ctl.observe(logits, owner)
    assert u[0] < u[1] and np.isnan(u[2])
    c = ctl.update(u)  # a worker with no rows keeps a finite estimate
    assert np.isfinite(c.weights).all() and c.batch_sizes.sum() == 12
    torch = pytest.importorskip("torch")
    u2 = ctl.observe(torch.from_numpy(logits), torch.from_numpy(owner))
    assert np.allclose(u, u2, equal_nan=True)
    c = ctl.update(torch.tensor([0.5, 0.5, 0.5]))
    assert c.weights.shape == (3,)


@pytest.mark.parametrize("kw,msg", [
    (dict(beta_u=1.0), "beta_u"), (dict(gamma=0), "gamma"), (dict(weight_map="x"), "weight_map"),
    (dict(shard_mode="x"), "shard_mode"), (dict(w_min=0.5), "w_min"), (dict(w_max=0.1), "w_max"),
    (dict(delta_eta=1.5), "delta_eta"), (dict(b_min=20), "b_min"), (dict(mem_cap=(1, 2)), "mem_cap"),
    (dict(b_max=5), "ceilings"), (dict(rate_limit=0), "rate_limit"),
])
def test_bad_config_names_the_knob(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        MicroController(4, 64, 0.1, MicroConfig(**kw))


def test_bad_update_input():
    ctl = MicroController(3, 9, 0.1)
    with pytest.raises(ConfigError, match="3 workers"):
        ctl.update([0.1, 0.2])
    with pytest.raises(ConfigError, match="n_workers"):
        MicroController(0, 9, 0.1)
