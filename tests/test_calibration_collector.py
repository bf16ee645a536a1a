"""``clustersim collect``: a reduced CPU run of the real collector (PyTorch, an optional extra)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from sim.calibration.collector import CollectConfig, gpu_type_name, require_torch
from sim.errors import ConfigError


@pytest.mark.parametrize("name,canon", [
    ("NVIDIA A100-SXM4-40GB", "a100"), ("NVIDIA H200", "h200"), ("Tesla V100-SXM2-16GB", "v100"),
    ("NVIDIA GeForce RTX 2080 Ti", "rtx2080ti"), ("Quadro RTX 6000", "quadrortx6000"),
    ("NVIDIA H100 80GB HBM3", "h100"), ("Tesla T4", "t4"),
])
def test_gpu_type_names(name, canon):
    assert gpu_type_name(name) == canon


def test_package_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import sim.calibration, sim.calibration.collector, sim.cli\n"
            "from sim.calibration.collector import require_torch\n"
            "try:\n    require_torch()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ConfigError" in out.stdout and "pip install 'clustersim[collect]'" in out.stdout


def test_config_validation():
    with pytest.raises(ConfigError, match="unknown model"):
        CollectConfig(models=("resnet",)).validate()
    with pytest.raises(ConfigError, match="batch sizes"):
        CollectConfig(batch_sizes=(0,)).validate()


def tiny(**kw):
    base = dict(models=("mlp",), batch_sizes=(2, 4), gpus=(1,), device="cpu", warmup=1, steps=2, dataset_size=32)
    base.update(kw)
    return CollectConfig(**base)


def test_collect_on_cpu_records_the_schema():
    pytest.importorskip("torch")
    from sim.calibration.collector import collect
    t = collect(tiny())
    rows = t.to_pylist()
    assert [r["local_bsz"] for r in rows] == [2, 4]
    for r in rows:
        assert r["gpu_type"] == "cpu" and r["n_gpus"] == 1 and r["placement"] == [1] and r["repeats"] == 2
        assert r["step_time_s"] > 0 and 0 <= r["sync_time_s"] <= r["step_time_s"]
        parts = r["data_time_s"] + r["forward_s"] + r["backward_s"] + r["update_s"]
        assert parts == pytest.approx(r["step_time_s"], rel=0.5)


def test_collect_command_writes_trace_and_learning_curves(tmp_path, capsys):
    pytest.importorskip("torch")
    from sim.calibration.schema import read_learning_curves, read_measurements, read_trace_info
    from sim.cli import main
    out, lc = tmp_path / "trace.parquet", tmp_path / "lc.parquet"
    rc = main(["collect", "-o", str(out), "--device", "cpu", "--models", "mlp", "--batch-sizes", "4",
               "--steps", "2", "--warmup", "1", "--learning-curves", str(lc), "--epochs", "1"])
    assert rc == 0 and "wrote 1 measurements" in capsys.readouterr().out
    assert read_measurements(out).num_rows == 1
    info = read_trace_info(out)
    assert info["torch"] and info["device"] == "cpu" and info["date_utc"] and "collect" in info["command"]
    curve = read_learning_curves(lc).to_pylist()
    assert len(curve) == 1 and 0.0 <= curve[0]["mean_entropy"] <= 1.0 and curve[0]["metric_name"] == "accuracy"


def test_collect_needs_cuda_when_asked():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    from sim.calibration.collector import collect
    with pytest.raises(ConfigError, match="no CUDA device"):
        collect(tiny(device="cuda"))


@pytest.mark.slow
def test_collect_two_processes_with_torch_distributed():
    pytest.importorskip("torch")
    from sim.calibration.collector import collect
    t = collect(tiny(gpus=(2,), batch_sizes=(4,)))
    r = t.to_pylist()[0]
    assert r["n_gpus"] == 2 and r["placement"] == [2] and r["sync_time_s"] >= 0
