"""Workload generator: determinism, arrival rate, size mix, duration law, model choice."""
from __future__ import annotations

import numpy as np
import pytest

from sim.errors import ConfigError, TraceError
from sim.throughput import TableThroughput
from sim.workload import GAVEL_SIZE_MIX, HOPS_GPU_COUNTS, HOPS_SIZE_CLASSES, generate_workload, philly_distribution


def test_deterministic():
    a = generate_workload(2000, 20.0, 7)
    b = generate_workload(2000, 20.0, 7)
    c = generate_workload(2000, 20.0, 8)
    assert a.table.equals(b.table)
    assert not a.table.equals(c.table)
    a = generate_workload(500, 20.0, 3, sizes="philly", durations="philly", work="iterations")
    b = generate_workload(500, 20.0, 3, sizes="philly", durations="philly", work="iterations")
    assert a.table.equals(b.table)


def test_arrival_rate_and_gavel_size_mix():
    n, load = 100_000, 12.0
    j = generate_workload(n, load, 1)
    assert j.arrival_s[0] == 0.0 and np.all(np.diff(j.arrival_s) >= 0)
    rate = (n - 1) / (j.arrival_s[-1] / 3600.0)
    assert rate == pytest.approx(load, rel=0.02)
    gaps = np.diff(j.arrival_s)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.03)  # exponential: CV = 1
    for count, p in GAVEL_SIZE_MIX:
        assert np.mean(j.gpus == count) == pytest.approx(p, abs=0.01)
    assert np.all(j.gpus_min == j.gpus) and np.all(j.gpus_max == j.gpus)


def test_gavel_duration_law():
    j = generate_workload(50_000, 10.0, 2)
    logm = np.log10(j.duration_s / 60.0)
    assert logm.min() >= 1.5 and logm.max() <= 4.0
    assert np.mean(logm >= 3.0) == pytest.approx(0.2 + 0.8 * 0.0, abs=0.01)
    assert np.all(np.isnan(j.iterations))
    short = logm[logm < 3.0]
    assert np.mean(short) == pytest.approx(2.25, abs=0.02)  # U(1.5, 3) mean


def test_hops_size_class_law():
    """GPU-duration (GPUs x run time): each class a quarter of the jobs, log-uniform inside it
    (so the mean of log GPU-hours in a class is the mean of its log bounds), the GPU counts
    still Gavel's, and the same seed the same table."""
    j = generate_workload(40_000, 10.0, 5, durations="hops")
    gpu_h = j.gpus * j.duration_s / 3600.0
    lo, hi = HOPS_SIZE_CLASSES[0][1], HOPS_SIZE_CLASSES[-1][2]
    assert gpu_h.min() >= lo and gpu_h.max() <= hi
    for _, a, b in HOPS_SIZE_CLASSES:
        sel = (gpu_h >= a) & (gpu_h < b)
        assert np.mean(sel) == pytest.approx(0.25, abs=0.01)
        assert np.mean(np.log(gpu_h[sel])) == pytest.approx((np.log(a) + np.log(b)) / 2, abs=0.02)
    for count, p in GAVEL_SIZE_MIX:
        assert np.mean(j.gpus == count) == pytest.approx(p, abs=0.01)
    assert generate_workload(300, 10.0, 5, durations="hops").table.equals(
        generate_workload(300, 10.0, 5, durations="hops").table)
    with pytest.raises(ConfigError, match="'gavel', 'philly' or 'hops'"):
        generate_workload(3, 10.0, 5, durations="paper")


def test_models_support_count():
    o = TableThroughput.builtin()
    j = generate_workload(5000, 10.0, 4, throughput=o)
    codes = j.model_codes(o.models)
    for c, g in zip(codes, j.gpus):
        assert int(g) in o.supported_counts(c)
    multi = {o.models[c] for c, g in zip(codes, j.gpus) if g > 1}
    # Gavel's 19 distributed job types, less ResNet-50 at batch 128 (0 on 2-8 K80s)
    assert "A3C" not in multi and len(multi) == 18
    assert "ResNet-50 (batch size 128)" not in multi
    # every eligible model appears with about equal frequency among 1-GPU jobs
    one = codes[j.gpus == 1]
    freq = np.bincount(one, minlength=len(o.models)) / one.size
    assert np.allclose(freq, 1 / len(o.models), atol=0.03)


def test_models_restriction_and_errors():
    j = generate_workload(300, 10.0, 1, models=["ResNet-50 (batch size 64)"])
    assert set(j.models) == {"ResNet-50 (batch size 64)"}
    assert set(j.batch_size.tolist()) == {64}
    with pytest.raises(ConfigError, match="unknown model"):
        generate_workload(10, 10.0, 1, models=["nope"])
    with pytest.raises(ConfigError, match="supports 2"):
        generate_workload(200, 10.0, 1, models=["A3C"])
    with pytest.raises(ConfigError):
        generate_workload(10, 0.0, 1)
    with pytest.raises(ConfigError):
        generate_workload(10, 1.0, 1, sizes="alibaba")
    assert len(generate_workload(0, 1.0, 1)) == 0
    assert set(generate_workload(100, 1.0, 1, sizes="single").gpus.tolist()) == {1}


def test_hops_sizes_draw_powers_of_two_up_to_16_uniformly():
    a = generate_workload(5000, 100.0, 4, sizes="hops", durations="hops")
    counts = np.bincount(np.asarray(a.gpus), minlength=17)
    assert set(np.flatnonzero(counts).tolist()) == set(HOPS_GPU_COUNTS)
    share = counts[list(HOPS_GPU_COUNTS)] / len(a)
    assert np.all(np.abs(share - 0.2) < 0.03)          # uniform: 5000 draws, sd 0.006
    b = generate_workload(5000, 100.0, 4, sizes="hops", durations="hops")
    assert a.table.equals(b.table)
    # the size classes' GPU-durations hold whatever the count: run time x count in [0.1, 100] h
    gpu_h = np.asarray(a.gpus) * np.asarray(a.table.column("duration_s")) / 3600
    assert gpu_h.min() >= 0.1 - 1e-9 and gpu_h.max() <= 100 + 1e-9


def test_iterations_mode_matches_reference_rate():
    o = TableThroughput.builtin()
    a = generate_workload(200, 10.0, 5, work="iterations")
    b = generate_workload(200, 10.0, 5)
    assert np.all(np.isnan(a.duration_s))
    codes = b.model_codes(o.models)
    assert np.allclose(a.iterations, b.duration_s * o.reference_rate(codes, b.gpus))


def test_philly_mix_matches_builtin_table():
    d = philly_distribution()
    j = generate_workload(60_000, 30.0, 11, sizes="philly", durations="philly")
    for g, share in zip(d["gpu_counts"], d["share"]):
        assert np.mean(j.gpus == g) == pytest.approx(share, abs=0.01)
    one = j.duration_s[j.gpus == 1]
    q = dict(zip(d["p"].round(4).tolist(), np.exp(d["log_q"][1])))
    assert np.median(one) == pytest.approx(q[0.5], rel=0.05)
    assert one.min() >= np.exp(d["log_q"][1][0]) - 1e-6


def test_philly_samples_file(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("duration_s,num_gpus\n100,1\n200,2\n400,4\n")
    j = generate_workload(3000, 10.0, 1, sizes="philly", durations="philly", philly_samples=p)
    pairs = set(zip(j.duration_s.tolist(), j.gpus.tolist()))
    assert pairs == {(100.0, 1), (200.0, 2), (400.0, 4)}
    j = generate_workload(300, 10.0, 1, sizes="gavel", durations="philly", philly_samples=p)
    assert np.all(j.duration_s[j.gpus == 1] == 100.0)
    p.write_text("duration_s,num_gpus\n100,1\n-5,2\n")
    with pytest.raises(TraceError) as ei:
        generate_workload(10, 10.0, 1, sizes="philly", durations="philly", philly_samples=p)
    assert (ei.value.row, ei.value.field) == (1, "duration_s")


def test_priorities_and_users():
    j = generate_workload(20_000, 10.0, 1, high_priority_fraction=0.2, n_users=4)
    assert np.mean(j.priority == 5.0) == pytest.approx(0.2, abs=0.01)
    assert set(j.users) == {"u0", "u1", "u2", "u3"}


def test_gavel_model_law_with_runnable_only_off():
    # Gavel's generate_job: multi-GPU jobs uniform over its 19 distributed job types
    o = TableThroughput.builtin()
    j = generate_workload(5000, 10.0, 4, throughput=o, runnable_only=False)
    codes = j.model_codes(o.models)
    multi = codes[j.gpus > 1]
    assert {o.models[c] for c in multi} >= {"ResNet-50 (batch size 128)"}
    freq = np.bincount(multi, minlength=len(o.models))[np.unique(multi)] / multi.size
    assert len(freq) == 19 and np.allclose(freq, 1 / 19, atol=0.02)


def test_excerpt_table_reproduces_earlier_workloads():
    # the 8-model excerpt has no zero rate: runnable_only changes nothing there
    o = TableThroughput.builtin("excerpt")
    a = generate_workload(300, 6.0, 0, throughput=o)
    b = generate_workload(300, 6.0, 0, throughput=o, runnable_only=False)
    assert a.table.equals(b.table) and len(set(a.table.column("model").to_pylist())) == 8
