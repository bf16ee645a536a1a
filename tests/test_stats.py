"""sim.stats: paired bootstrap intervals of log-ratios, against a hand-computed case and a
brute-force bootstrap; grouped ratios as the sweeps and experiment scripts use them."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.stats import holm, paired_ratio_ci, paired_ratios


def test_ratio_is_the_geometric_mean_of_the_paired_ratios():
    ci = paired_ratio_ci([50.0, 200.0], [100.0, 100.0])
    assert ci.ratio == pytest.approx(1.0)                   # x0.5 and x2 cancel on the log scale
    assert ci.low <= 1.0 <= ci.high and ci.n == 2


def test_interval_is_positive_and_brackets_the_ratio_even_when_wide():
    ci = paired_ratio_ci([10.0, 300.0, 2.0, 90.0], [100.0, 100.0, 100.0, 100.0])
    assert 0 < ci.low < ci.ratio < ci.high                  # never below zero, unlike mean +- t s


def test_percentile_interval_matches_an_exhaustive_bootstrap():
    v, b = np.array([90.0, 80.0, 100.0, 85.0, 70.0]), np.array([100.0, 100.0, 110.0, 100.0, 90.0])
    logs = np.log(v / b)
    # every resample of 5 pairs with replacement, equally likely: the exact bootstrap distribution
    means = np.sort([logs[list(idx)].mean() for idx in itertools.product(range(5), repeat=5)])
    exact = np.exp(np.quantile(means, [0.025, 0.975]))
    ci = paired_ratio_ci(v, b, n_resamples=20000)
    assert ci.ratio == pytest.approx(math.exp(logs.mean()))
    # BCa moves the percentile bounds a little; both are close to the exact percentiles
    assert ci.low == pytest.approx(exact[0], rel=0.02) and ci.high == pytest.approx(exact[1], rel=0.02)


def test_degenerate_cases():
    one = paired_ratio_ci([2.0], [1.0])
    assert one.ratio == 2.0 and math.isnan(one.low) and one.label() == "2.00"
    same = paired_ratio_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert (same.ratio, same.low, same.high) == pytest.approx((2.0, 2.0, 2.0))
    assert same.label() == "2.00 [2.00, 2.00]" and same.change_pct == pytest.approx(100.0)
    bad = paired_ratio_ci([0.0, np.nan], [1.0, 1.0])
    assert bad.n == 0 and math.isnan(bad.ratio)
    with pytest.raises(ConfigError, match="one length"):
        paired_ratio_ci([1.0, 2.0], [1.0])


def test_same_seed_same_interval():
    args = ([90.0, 80.0, 100.0, 85.0], [100.0, 100.0, 110.0, 100.0])
    assert paired_ratio_ci(*args, seed=3) == paired_ratio_ci(*args, seed=3)


def test_grouped_ratios_pair_runs_by_seed_within_each_group():
    rows = [{"nodes": n, "seed": s, "policy": p,
             "jct": 100.0 * (1 + s) * (0.5 if p == "sjf" and n == 4 else 1.0)}
            for n in (2, 4) for s in range(3) for p in ("fifo", "sjf")]
    rows.append({"nodes": 2, "seed": 9, "policy": "sjf", "jct": 1.0})     # no fifo run to pair
    out = paired_ratios(rows, group=("nodes",), treatment="policy", baseline="fifo", metric="jct")
    got = {(r["nodes"], r["policy"]): (r["ratio"], r["n"]) for r in out}
    assert got == {(2, "fifo"): (1.0, 3), (2, "sjf"): (1.0, 3), (4, "fifo"): (1.0, 3),
                   (4, "sjf"): (pytest.approx(0.5), 3)}


def test_module_docstring_example_runs():
    import doctest

    import sim.stats
    assert doctest.testmod(sim.stats).failed == 0


def test_the_eghs_experiment_takes_its_intervals_from_sim_stats():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scalability" / "eghs_experiment.py"
    spec = importlib.util.spec_from_file_location("eghs_experiment_for_stats", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [{"workload": "main", "nodes": 64, "seed": s, "variant": v, "makespan_s": 10.0,
             "avg_jct_s": 100.0 * (s + 1) * (0.9 if v == "eghs" else 1.0)}
            for s in range(4) for v in ("eghs", mod.REFERENCE)]
    out = mod.ratios(rows)
    assert [(r["variant"], r["metric"]) for r in out][:2] == [("eghs", "avg_jct_s"), ("eghs", "makespan_s")]
    eghs = out[0]
    assert eghs["ratio_mean"] == pytest.approx(0.9) and eghs["n_seeds"] == 4
    assert (eghs["ci95_lo"], eghs["ci95_hi"]) == pytest.approx((0.9, 0.9))   # one ratio for all seeds


def test_holm_by_hand():
    # m = 4: 0.01 x 4, then max(0.04, 0.02 x 3), max(.., 0.03 x 2), max(.., 0.5 x 1)
    assert holm([0.5, 0.01, 0.03, 0.02]) == pytest.approx([0.5, 0.04, 0.06, 0.06])
    assert holm([]) == []
    got = holm([float("nan"), 0.2])                       # NaN: no test, not counted
    assert math.isnan(got[0]) and got[1] == pytest.approx(0.2)
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1, then monotone


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("inf")]])
def test_holm_refuses_what_is_not_a_p_value(bad):
    with pytest.raises(ConfigError, match="holm"):
        holm(bad)


def test_holm_against_brute_force():
    # the definition, p_(k) adjusted = max_{j <= k} min(1, (m - j + 1) p_(j)), on random sets
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 0.3, rng.integers(1, 9))
        srt = np.sort(p)
        m = p.size
        adj = [max(min(1.0, (m - j) * srt[j]) for j in range(k + 1)) for k in range(m)]
        want = np.empty(m)
        want[np.argsort(p, kind="stable")] = adj
        assert holm(p) == pytest.approx(want)
