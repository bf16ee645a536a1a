"""Logits traces: the synthetic generator follows its curve; a trace drives EGHS; bad traces
give errors that name the job and the epoch."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.entropy import grouped_mean_entropy
from sim.errors import TraceError
from sim.learning.dynamics import LearningSpec
from sim.learning.logits_trace import LogitsTrace, logits_for_entropy, synthetic_logits_trace
from sim.learning.world import LearningWorld
from sim.policies import get_policy


def _curve(e):
    return 0.9 * np.exp(-0.3 * e) + 0.05


def test_logits_for_entropy_hits_targets():
    from sim.entropy import normalized_entropy
    t = np.array([0.01, 0.2, 0.5, 0.9, 0.999])
    x = logits_for_entropy(t, 10, np.random.default_rng(0))
    np.testing.assert_allclose(normalized_entropy(x), t, atol=1e-4)


def test_synthetic_trace_follows_curve_and_difficulty(tmp_path):
    p = synthetic_logits_trace(tmp_path / "t.arrow", ["m0"], 6, 4, 10, _curve, rows_per_worker=40,
                               sigma_d=0.2, seed=1)
    tr = LogitsTrace(p)
    t = tr.table
    g = t.column("epoch").to_numpy() * 4 + t.column("worker").to_numpy()
    means = grouped_mean_entropy(t.column("logits"), g).reshape(6, 4)
    d = (means / _curve(np.arange(6))[:, None])[1:]     # epoch 0 (H = 0.95) clips at 1
    # one difficulty per worker, constant over epochs, log-normal around 1
    np.testing.assert_allclose(d, np.broadcast_to(d[0], d.shape), rtol=2e-3)
    assert np.ptp(d[0]) > 0.05
    assert tr.n_epochs == {"m0": 6}


def _run_with_trace(path, jobs, n_models=2):
    tr = LogitsTrace(path)
    spec = LearningSpec.build(len(jobs), [f"m{i}" for i in range(n_models)], jobs.gpus_max,
                              quality=0.9, trace=tr, epoch_samples=320.0)
    pol = get_policy("eghs")
    return pol, run_jobs(small_cluster(), jobs, pol, LinearOracle(), EngineConfig(round_s=10.0),
                         learning=LearningWorld(spec))


def test_trace_drives_the_micro_level(tmp_path):
    p = synthetic_logits_trace(tmp_path / "t.arrow", ["m0", "m1"], 80, 3, 5, _curve,
                               rows_per_worker=4, seed=2)
    jobs = specs([0, 3], [2, 3], [150.0, 100.0], [0, 1])
    pol, res = _run_with_trace(p, jobs)
    assert np.all(np.isfinite(res.finish)) and pol.micro_updates > 0
    # the controller's job uncertainty is a weighted mean of trace entropies
    assert np.all((pol._U[:2] > 0) & (pol._U[:2] < 1))


def test_missing_model_names_the_job(tmp_path):
    p = synthetic_logits_trace(tmp_path / "t.arrow", ["m0"], 50, 2, 5, _curve, rows_per_worker=2)
    jobs = specs([0, 1], [1, 1], [50.0, 50.0], [0, 1])
    with pytest.raises(TraceError, match=r"job 1, epoch 0: model 'm1' is not in the logits trace"):
        _run_with_trace(p, jobs)


def test_jobs_beyond_the_trace_read_its_last_epoch(tmp_path):
    p = synthetic_logits_trace(tmp_path / "t.arrow", ["m0", "m1"], 2, 2, 5, _curve, rows_per_worker=2)
    jobs = specs([0], [1], [5000.0], [0])
    pol, res = _run_with_trace(p, jobs)
    assert np.isfinite(res.finish[0]) and pol.micro_updates > 0


def _write(path, rows):
    schema = pa.schema([("model", pa.string()), ("epoch", pa.int32()), ("worker", pa.int32()),
                        ("logits", pa.list_(pa.float32()))])
    t = pa.table({"model": [r[0] for r in rows], "epoch": [r[1] for r in rows],
                  "worker": [r[2] for r in rows], "logits": [r[3] for r in rows]}, schema=schema)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, schema) as w:
        w.write_table(t)
    return path


def test_class_count_change_names_job_and_epoch(tmp_path):
    rows = [("m0", e, w, [0.1 * e, 0.0, 0.3]) for e in range(3) for w in range(2)]
    rows += [("m0", e, w, [0.1, 0.2, 0.3, 0.0]) for e in range(3, 500) for w in range(2)]
    p = _write(tmp_path / "c.arrow", rows)
    jobs = specs([0], [1], [3000.0], [0])
    with pytest.raises(TraceError, match=r"job 0, epoch [3-9]: the class count changed from 3 to 4"):
        _run_with_trace(p, jobs, n_models=1)


def test_nan_entropy_names_job_and_epoch(tmp_path):
    rows = [("m0", e, w, [0.5, 0.0, float("nan") if e >= 1 and w == 1 else 0.2])
            for e in range(500) for w in range(2)]
    p = _write(tmp_path / "n.arrow", rows)
    jobs = specs([0], [2], [3000.0], [0])
    with pytest.raises(TraceError, match=r"job 0, epoch [1-9]\d*: entropy is NaN for worker 1"):
        _run_with_trace(p, jobs, n_models=1)


def test_bad_files(tmp_path):
    f = tmp_path / "x.arrow"
    f.write_bytes(b"not arrow")
    with pytest.raises(TraceError, match="not an Arrow IPC"):
        LogitsTrace(f)
    schema = pa.schema([("model", pa.string()), ("epoch", pa.int32())])
    with pa.OSFile(str(tmp_path / "y.arrow"), "wb") as s, pa.ipc.new_file(s, schema) as w:
        w.write_table(pa.table({"model": ["a"], "epoch": [0]}, schema=schema))
    with pytest.raises(TraceError, match="lacks column"):
        LogitsTrace(tmp_path / "y.arrow")
