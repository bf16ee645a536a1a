"""The project's first real-GPU trace (one H200, calibration/; docs/calibration.md section 5):
it reads under the measurement schema, and its fits give the errors the docs report."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from sim.calibration.report import validate
from sim.calibration.schema import read_learning_curves, read_measurements, read_trace_info

ROOT = Path(__file__).resolve().parents[1] / "calibration"
TRACE = ROOT / "traces" / "h200-vm-20261204.parquet"
CURVES = ROOT / "curves" / "h200-vm-20261204.parquet"

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason=f"{TRACE} is not in this checkout")


def test_h200_trace_reads_and_records_its_hardware():
    t = read_measurements(TRACE)
    assert t.num_rows == 18
    assert set(t.column("gpu_type").to_pylist()) == {"h200"}
    assert set(t.column("n_gpus").to_pylist()) == {1}
    info = read_trace_info(TRACE)
    assert "H200" in str(info) and "2.11.0" in str(info)
    assert read_learning_curves(CURVES).num_rows == 30


def test_h200_fits_give_the_documented_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, summary, _ = validate(read_measurements(TRACE), source=str(TRACE))
    got = {(r["model"], r["kind"]): r for r in summary.to_pylist()}
    # docs/calibration.md: held-out batch sizes, median APE % (one GPU: no held-out placement)
    documented = {("cnn", "pollux"): 2.4, ("mlp", "pollux"): 11.1, ("transformer", "pollux"): 11.9,
                  ("cnn", "hops"): 5.3, ("mlp", "hops"): 6.4, ("transformer", "hops"): 12.0}
    for key, med in documented.items():
        assert got[key]["median_ape_batch"] == pytest.approx(med, abs=0.05), key
        assert got[key]["meets_target"] is None, key


def test_h200_trace_with_loader_workers_gives_the_documented_errors():
    path = ROOT / "traces" / "h200-vm-20261204-w8.parquet"
    t = read_measurements(path)
    assert t.num_rows == 27 and set(t.column("n_gpus").to_pylist()) == {1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, summary, _ = validate(t, source=str(path))
    got = {(r["model"], r["kind"]): r for r in summary.to_pylist()}
    # docs/calibration.md: held-out batch sizes (3 of 9), median APE %
    documented = {("cnn", "pollux"): 5.2, ("mlp", "pollux"): 16.5, ("transformer", "pollux"): 5.6,
                  ("cnn", "hops"): 7.5, ("mlp", "hops"): 11.0, ("transformer", "hops"): 5.7}
    for key, med in documented.items():
        assert got[key]["median_ape_batch"] == pytest.approx(med, abs=0.05), key
