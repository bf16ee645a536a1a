"""Throughput oracle: hand-checkable rates from a tiny Gavel-format table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.errors import ConfigError
from sim.throughput import (BUILTIN_TABLES, DEFAULT_RESTART_DELAY_S, RELATIVE_SPEED, SCALING_EFFICIENCY, SPREAD_PENALTY,
                            TableThroughput, ThroughputOracle, restart_delay_s)

# Tiny fixture in Gavel's real format: {gpu_type: {"('<model>', k)": {"null": rate, pairs...}}}
GAVEL_FIXTURE = {
    "v100": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 10.0, "('A3C', 1)": [5.0, 3.0]},
        "('ResNet-50 (batch size 64)', 2)": {"null": 18.0},
        "('ResNet-50 (batch size 64)', 4)": {"null": 30.0},
        "('A3C', 1)": {"null": 7.0},
    },
    "p100": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 6.0},
        "('ResNet-50 (batch size 64)', 2)": {"null": 11.0},
        "('ResNet-50 (batch size 64)', 4)": {"null": 0.0},
        "('A3C', 1)": {"null": 5.0},
    },
    "v100_unconsolidated": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 10.0},
        "('ResNet-50 (batch size 64)', 2)": {"null": 12.0},
        "('ResNet-50 (batch size 64)', 4)": {"null": 20.0},
        "('A3C', 1)": {"null": 7.0},
    },
}


@pytest.fixture()
def oracle(tmp_path):
    p = tmp_path / "thr.json"
    p.write_text(json.dumps(GAVEL_FIXTURE))
    return TableThroughput.from_gavel_json(p)


R50 = "ResNet-50 (batch size 64)"


def test_loader_parses_gavel_format(oracle):
    assert isinstance(oracle, ThroughputOracle)
    assert oracle.models == ("A3C", R50)
    assert oracle.gpu_types == ("v100", "p100")
    assert oracle.reference_type == "v100"
    assert oracle.supported_counts(R50) == (1, 2, 4)
    assert oracle.supported_counts("A3C") == (1,)
    assert oracle.has_unconsolidated == (True, False)


def test_measured_and_slowest_worker(oracle):
    m = oracle.model_index(R50)
    ct = ("v100", "p100")
    r = oracle.rates([m, m, m, m], [1, 2, 2, 4], [1, 1, 1, 1], [1, 2, 3, 3], [1.0, 1.0, 1.0, 1.0], ct)
    # v100 k=1: 10; p100 k=2: 11; mixed k=2: min(18, 11) = 11; mixed k=4: p100 measured 0 -> 0
    assert r.tolist() == [10.0, 11.0, 11.0, 0.0]


def test_min_speed_and_cluster_type_order(oracle):
    m = oracle.model_index(R50)
    # the cluster lists p100 first: bit 0 = p100, bit 1 = v100
    r = oracle.rates([m, m], [2, 2], [1, 1], [0b10, 0b01], [0.5, 1.0], ("p100", "v100"))
    assert r.tolist() == [9.0, 11.0]


def test_spread_uses_unconsolidated_or_penalty(oracle):
    m = oracle.model_index(R50)
    r = oracle.rates([m, m], [2, 2], [2, 2], [1, 2], [1.0, 1.0], ("v100", "p100"))
    assert r[0] == 12.0  # measured v100_unconsolidated
    assert r[1] == pytest.approx(11.0 * SPREAD_PENALTY)  # p100 has no unconsolidated table


def test_interpolation_and_extrapolation(oracle):
    m = oracle.model_index(R50)
    ref = oracle.reference_rate([m, m, m], [3, 8, 6])
    assert ref[0] == pytest.approx(24.0)  # halfway between 18 (k=2) and 30 (k=4)
    # beyond K=4: r(k) = 30 * (1 + e * (k - 4) / 4)
    assert ref[1] == pytest.approx(30.0 * (1 + SCALING_EFFICIENCY * 4 / 4))
    assert ref[2] == pytest.approx(30.0 * (1 + SCALING_EFFICIENCY * 2 / 4))
    # p100: interpolating next to a measured 0 gives 0
    r = oracle.rates([m], [3], [1], [2], [1.0], ("v100", "p100"))
    assert r[0] == 0.0
    a = oracle.model_index("A3C")
    assert oracle.reference_rate([a], [2])[0] == pytest.approx(7.0 * (1 + SCALING_EFFICIENCY))


def test_relative_speed_for_missing_types(oracle):
    m = oracle.model_index(R50)
    r = oracle.rates([m, m], [1, 1], [1, 1], [1, 3], [1.0, 1.0], ("a100", "k80"))
    f_a100 = RELATIVE_SPEED["a100"] / RELATIVE_SPEED["v100"]
    f_k80 = RELATIVE_SPEED["k80"] / RELATIVE_SPEED["v100"]
    assert r[0] == pytest.approx(10.0 * f_a100)
    assert r[1] == pytest.approx(10.0 * min(f_a100, f_k80))
    with pytest.raises(ConfigError, match="mystery"):
        oracle.rates([m], [1], [1], [1], [1.0], ("mystery",))
    custom = TableThroughput(
        {"v100": {"x": {1: 4.0}}}, relative_speed={"v100": 1.0, "fastgpu": 2.0})
    assert custom.rates([0], [1], [1], [1], [1.0], ("fastgpu",))[0] == 8.0


def test_empty_placement_and_bad_inputs(oracle):
    m = oracle.model_index(R50)
    r = oracle.rates([m, m], [0, 2], [0, 1], [0, 0], [1.0, 1.0], ("v100", "p100"))
    assert r.tolist() == [0.0, 0.0]
    with pytest.raises(ConfigError):
        oracle.rates([5], [1], [1], [1], [1.0], ("v100",))
    with pytest.raises(ConfigError, match="bits"):
        oracle.rates([m], [1], [1], [0b100], [1.0], ("v100", "p100"))
    with pytest.raises(ConfigError, match="unknown model"):
        oracle.model_index("nope")


def test_vectorized_matches_scalar(oracle):
    rng = np.random.default_rng(0)
    n = 500
    m = rng.integers(0, 2, n)
    k = rng.integers(1, 12, n)
    nn = rng.integers(1, 3, n)
    mask = rng.integers(1, 4, n)
    sp = rng.uniform(0.5, 1.5, n)
    ct = ("v100", "p100")
    v = oracle.rates(m, k, nn, mask, sp, ct)
    s = [oracle.rates([m[i]], [k[i]], [nn[i]], [mask[i]], [sp[i]], ct)[0] for i in range(n)]
    assert np.allclose(v, s)


def test_loader_errors(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"v100": {"ResNet-50": {"null": 1.0}}}))
    with pytest.raises(ConfigError, match="job type key"):
        TableThroughput.from_gavel_json(p)
    p.write_text(json.dumps({"v100": {"('A', 1)": {"x": 1.0}}}))
    with pytest.raises(ConfigError, match="'null'"):
        TableThroughput.from_gavel_json(p)
    p.write_text(json.dumps({"v100": {"('A', 1)": {"null": -1.0}}}))
    with pytest.raises(ConfigError, match=str(p)):
        TableThroughput.from_gavel_json(p)
    p.write_text(json.dumps({"v100": {"('A', 1)": {"null": 1.0}}, "p100": {"('B', 1)": {"null": 1.0}}}))
    with pytest.raises(ConfigError, match="reference type"):
        TableThroughput.from_gavel_json(p)
    with pytest.raises(ConfigError, match="not found"):
        TableThroughput.from_gavel_json(tmp_path / "none.json")


def test_builtin_table_is_gavels_whole_table():
    o = TableThroughput.builtin()
    assert len(o.models) == 26 and o.gpu_types == ("v100", "p100", "k80")
    assert o.has_pairs and all(o.has_unconsolidated)
    # Gavel's only zeros: ResNet-50 at batch 128 on 2, 4, 8 K80s (out of memory)
    k = np.array([1, 2, 4, 8])
    m = np.repeat(np.arange(len(o.models)), k.size)
    rates = o.type_rates(m, np.tile(k, len(o.models)), ("v100", "p100", "k80"))
    zero = {(o.models[m[i]], int(np.tile(k, len(o.models))[i]), t)
            for i, t in zip(*np.nonzero(rates == 0))}
    assert zero == {("ResNet-50 (batch size 128)", g, 2) for g in (2, 4, 8)}
    # ResNet-50 (batch size 64) on 1 V100: Gavel's measured value
    i = o.model_index("ResNet-50 (batch size 64)")
    assert o.reference_rate([i], [1])[0] == pytest.approx(4.395, rel=1e-3)
    doc = json.loads((Path(sim.__file__).parent / "data" / BUILTIN_TABLES["gavel"]).read_text())
    assert "Permission is hereby granted" in "\n".join(doc["license_text"])


def test_pair_rates():
    o = TableThroughput.builtin()
    a, b = o.model_index("ResNet-18 (batch size 16)"), o.model_index("ResNet-18 (batch size 64)")
    r = o.pair_rates([a, a], [b, b], [1, 3], ("v100", "k80", "t4"))
    assert r.shape == (2, 3, 2)
    # Gavel's v100 entry of ('ResNet-18 (batch size 16)', 1), pair ('ResNet-18 (batch size 64)', 1)
    np.testing.assert_allclose(r[0, 0], [32.353384328946916, 24.093231895382736])
    assert np.isnan(r[0, 2]).all() and np.isnan(r[1]).all()    # t4 not measured; 3 GPUs neither
    assert not TableThroughput.builtin("excerpt").has_pairs
    with pytest.raises(ConfigError, match="unknown built-in"):
        TableThroughput.builtin("nope")


def test_pair_rates_bad_values(tmp_path):
    p = tmp_path / "pairs.json"
    p.write_text(json.dumps({"v100": {"('A', 1)": {"null": 1.0, "('A', 1)": [1.0]}}}))
    with pytest.raises(ConfigError, match="expected \\[rate, rate\\]"):
        TableThroughput.from_gavel_json(p)


def test_builtin_excerpt_table():
    o = TableThroughput.builtin("excerpt")
    assert 6 <= len(o.models) <= 8
    assert o.gpu_types == ("v100", "p100", "k80") and all(o.has_unconsolidated)
    ct = ("v100", "p100", "k80", "t4", "rtx2080ti", "a100", "gtx1080ti", "titanxp", "rtx3090")
    rates = o.type_rates(np.arange(len(o.models)), np.ones(len(o.models), int), ct)
    assert np.all(rates > 0)
    # ResNet-50 (batch size 64) on 1 V100: Gavel's measured value
    i = o.model_index("ResNet-50 (batch size 64)")
    assert o.reference_rate([i], [1])[0] == pytest.approx(4.395, rel=1e-3)
    for m in o.models:
        assert 1 in o.supported_counts(m)


def test_restart_delays():
    assert restart_delay_s("imagenet") == 250.0
    assert restart_delay_s("ResNet-50 (batch size 64)") == 250.0
    assert restart_delay_s("ResNet-18 (batch size 64)") == 30.0
    assert restart_delay_s("bert") == 120.0
    assert restart_delay_s("A3C") == DEFAULT_RESTART_DELAY_S
    o = TableThroughput.builtin()
    d = o.restart_delays_array()
    assert d.shape == (len(o.models),) and d[o.model_index("ResNet-50 (batch size 64)")] == 250.0


# ---- the Numba rates kernel agrees with the numpy formulation -------------------------
from hypothesis import given, settings, strategies as _st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(data=_st.data())
def test_rates_kernel_matches_numpy(data):
    from sim.throughput import TableThroughput
    oracle = TableThroughput.builtin()
    types = ("v100", "p100", "k80", "t4")
    n = data.draw(_st.integers(0, 12))
    m = np.array(data.draw(_st.lists(_st.integers(0, len(oracle.models) - 1), min_size=n, max_size=n)), np.int64)
    k = np.array(data.draw(_st.lists(_st.integers(0, 40), min_size=n, max_size=n)), np.int64)
    nn = np.array(data.draw(_st.lists(_st.integers(1, 6), min_size=n, max_size=n)), np.int64)
    mask = np.array(data.draw(_st.lists(_st.integers(1, 15), min_size=n, max_size=n)), np.int64)
    sp = np.array(data.draw(_st.lists(_st.sampled_from([0.5, 0.9, 1.0, 1.1]), min_size=n, max_size=n)))
    got = oracle.rates(m, k, nn, mask, sp, types)
    want = oracle.rates_numpy(m, k, nn, mask, sp, types)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_multi_server_gavel_mode_uses_the_consolidated_rate():
    """Gavel's simulator rates a job over several servers at its consolidated rate; ours uses
    the measured _unconsolidated rate (ResNet-50 at batch 128 on 4 K80s: 0 consolidated, 1.18
    spread in Gavel's table)."""
    import numpy as np
    from sim.errors import ConfigError
    from sim.throughput import TableThroughput
    ours, gavel = TableThroughput.builtin(), TableThroughput.builtin(multi_server="gavel")
    types = ("v100", "p100", "k80")
    m = np.arange(len(ours.models))
    for k in (2, 4, 8):
        cons = ours.type_rates(m, k, types)
        np.testing.assert_array_equal(gavel.type_rates(m, k, types, spread=True), cons)
        np.testing.assert_array_equal(gavel.type_rates(m, k, types), cons)
    r50 = ours.model_index("ResNet-50 (batch size 128)")
    assert ours.type_rates([r50], 4, types)[0, 2] == 0.0
    assert ours.type_rates([r50], 4, types, spread=True)[0, 2] > 1.0
    with pytest.raises(ConfigError, match="multi_server"):
        TableThroughput.builtin(multi_server="fast")
