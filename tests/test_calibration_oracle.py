"""calib.toml round trip and the calibrated throughput oracle (rates by hand; a real simulate run)."""
from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest

from sim.calibration.fit import FitResult, PolluxParams, fit_all
from sim.calibration.oracle import CalibratedThroughput, calibration_toml, read_calibration, write_calibration
from sim.calibration.schema import CalibrationWarning
from sim.calibration.synthetic import EXAMPLE_HOPS, EXAMPLE_POLLUX, synthetic_measurements
from sim.errors import ConfigError
from sim.throughput import RELATIVE_SPEED, ThroughputOracle

P_T4 = PolluxParams(alpha_c=0.1, beta_c=0.01, alpha_n=0.3, beta_n=0.02, alpha_r=0.1, beta_r=0.01, gamma=1.0)
P_V100 = PolluxParams(alpha_c=0.05, beta_c=0.005, alpha_n=0.3, beta_n=0.02, alpha_r=0.1, beta_r=0.01, gamma=1.0)


def fr(model, gpu, params, kind="pollux", bmax=64, median=16, counts=(1, 2, 4, 8), ape=1.0):
    return FitResult(kind, model, gpu, params, 10, median_ape=ape, p90_ape=2 * ape, local_bsz_range=(8, bmax),
                     local_bsz_median=median, gpu_counts=counts, max_nodes=2)


@pytest.fixture()
def fits():
    return [fr("bert", "t4", P_T4), fr("bert", "v100", P_V100), fr("cifar10", "t4", P_T4, median=32),
            fr("bert", "t4", EXAMPLE_HOPS, kind="hops", ape=0.5)]


def test_toml_round_trip(tmp_path, fits):
    p = write_calibration(fits, tmp_path / "calib.toml", sources=["a.parquet"])
    back = read_calibration(p)
    assert len(back) == 4
    by = {(f.model, f.gpu_type, f.kind): f for f in back}
    assert by[("bert", "t4", "pollux")].params == P_T4
    assert by[("bert", "t4", "hops")].params == EXAMPLE_HOPS
    assert by[("cifar10", "t4", "pollux")].local_bsz_median == 32
    assert by[("bert", "v100", "pollux")].gpu_counts == (1, 2, 4, 8)
    assert 'model = "bert"' in calibration_toml(fits)


@pytest.mark.parametrize("text,words", [
    ("[calibration]\nformat = \"other\"\n", "format must be"),
    ("[calibration]\nformat = \"clustersim-calibration\"\n", "no [[fit]]"),
    ("[calibration]\nformat = \"clustersim-calibration\"\n[[fit]]\nmodel = \"m\"\ngpu_type = \"t4\"\n"
     "kind = \"pollux\"\nparams = { alpha_c = 1.0 }\n", "lack"),
    ("[calibration]\nformat = \"clustersim-calibration\"\n[[fit]]\nmodel = \"m\"\ngpu_type = \"t4\"\n"
     "kind = \"pollux\"\nparams = { alpha_c = 1.0, beta_c = 1.0, alpha_n = 1.0, beta_n = 1.0, alpha_r = 1.0, "
     "beta_r = 1.0, gamma = 20.0 }\n", "gamma must be in"),
    ("not toml [", "invalid TOML"),
])
def test_bad_calibration_files(tmp_path, text, words):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=words.replace("[", r"\[")):
        read_calibration(p)


def test_rates_by_hand(fits):
    o = CalibratedThroughput(fits)
    assert isinstance(o, ThroughputOracle)
    assert o.models == ("bert", "cifar10") and o.gpu_types == ("t4", "v100") and o.reference_type == "t4"
    types = ("t4", "v100")
    # bert at its median batch 16 on 4 GPUs of one t4 node: compute 0.1 + 0.16, network 0.1 + 0.02
    r = o.rates([0], [4], [1], [0b01], [1.0], types)
    assert r[0] == pytest.approx(1 / (0.26 + 0.12))
    # the same on v100: compute 0.05 + 0.08
    assert o.rates([0], [4], [1], [0b10], [1.0], types)[0] == pytest.approx(1 / (0.13 + 0.12))
    # both types: the slowest (t4) wins; a slow server scales it
    assert o.rates([0], [4], [2], [0b11], [0.5], types)[0] == pytest.approx(0.5 / (0.26 + 0.34))
    # no GPUs, rate 0
    assert o.rates([0], [0], [1], [1], [1.0], types)[0] == 0.0
    assert o.reference_rate([0, 0], [1, 4]) == pytest.approx([1 / (0.26 + 1e-8), 1 / 0.38], rel=1e-6)
    assert o.supported_counts("bert") == (1, 2, 4, 8)
    assert o.restart_delay_s("bert") == 120.0
    with pytest.raises(ConfigError, match="unknown model"):
        o.model_index("gpt")


def test_projection_to_types_without_a_fit(fits):
    o = CalibratedThroughput(fits)
    # cifar10 has no v100 fit: bert's v100/t4 one-GPU rate ratio at bert's batch carries over
    ratio = (1 / (0.05 + 0.005 * 16)) / (1 / (0.1 + 0.01 * 16))
    t4 = o.rates([1], [2], [1], [1], [1.0], ("t4",))[0]
    assert o.rates([1], [2], [1], [1], [1.0], ("v100",))[0] == pytest.approx(t4 * ratio)
    # a type nobody measured: relative peak speed against the model's base type
    h100 = o.rates([0], [1], [1], [1], [1.0], ("h100",))[0]
    base = o.rates([0], [1], [1], [1], [1.0], ("t4",))[0]
    assert h100 == pytest.approx(base * RELATIVE_SPEED["h100"] / RELATIVE_SPEED["t4"])
    with pytest.raises(ConfigError, match="neither calibrated"):
        o.rates([0], [1], [1], [1], [1.0], ("tpu",))


def test_large_batches_accumulate_gradients(fits):
    o = CalibratedThroughput(fits, local_bsz={"bert": 100})
    # b=100 > 64 measured: one accumulation step of 50 samples, then a synchronising one
    tc = 0.1 + 0.01 * 50
    assert o.step_time("bert", "t4", 4)[()] == pytest.approx(tc + tc + 0.12)
    assert o.step_time("bert", "t4", 1, local_bsz=8)[()] == pytest.approx(0.18, rel=1e-6)


def test_kind_selection(fits):
    hops = CalibratedThroughput(fits, kind="hops")
    assert hops.models == ("bert",)
    assert hops.step_time("bert", "t4", 4, 1)[()] == pytest.approx(EXAMPLE_HOPS.step_time(16, 1, 4))
    best = CalibratedThroughput(fits, kind="best")
    assert best.step_time("bert", "t4", 4)[()] == pytest.approx(EXAMPLE_HOPS.step_time(16, 1, 4))
    assert best.step_time("cifar10", "t4", 4)[()] == pytest.approx(P_T4.step_time(32, 1, 4))
    with pytest.raises(ConfigError, match="unknown model kind"):
        CalibratedThroughput(fits, kind="optimus")


def test_gavel_names_set_the_batch():
    o = CalibratedThroughput([fr("ResNet-50 (batch size 64)", "v100", P_V100, median=8)])
    assert o.step_time("ResNet-50 (batch size 64)", "v100", 1)[()] == pytest.approx(0.05 + 0.005 * 64, rel=1e-6)


def test_simulate_with_a_calibrated_oracle(tmp_path):
    from sim.presets import load_cluster
    from sim.engine import simulate
    from sim.policies import get_policy
    from sim.workload import generate_workload

    t = pa.concat_tables([synthetic_measurements(EXAMPLE_POLLUX, model="a", gpu_type="v100"),
                          synthetic_measurements(EXAMPLE_HOPS, model="b", gpu_type="v100")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        fits = fit_all(t, ("pollux",))
    path = write_calibration(list(fits.values()), tmp_path / "calib.toml")
    oracle = CalibratedThroughput.from_toml(path)
    jobs = generate_workload(30, 20.0, seed=0, throughput=oracle)
    res = simulate(load_cluster("uniform:nodes=4,gpus=4,type=v100"), jobs, get_policy("fifo"), oracle)
    assert np.all(np.isfinite(res.finish)) and np.all(res.finish > res.first_start)
    # a 1-GPU job runs exactly its duration (reference type = cluster type)
    one = np.flatnonzero(np.asarray(jobs.gpus) == 1)
    assert one.size
    j = int(one[0])
    assert res.run_seconds[j] == pytest.approx(float(jobs.duration_s[j]), rel=1e-6)
