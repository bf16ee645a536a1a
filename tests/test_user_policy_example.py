"""The documented user-policy example runs and behaves as its docstring says."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_policy.py"


def _load():
    spec = importlib.util.spec_from_file_location("user_policy_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_runs_and_compares():
    summaries = _load().main()
    assert set(summaries) == {"fifo", "smallest-first"}
    assert all(np.isfinite(s["avg_jct_s"]) for s in summaries.values())


def test_smallest_first_starts_small_job_before_earlier_big_one():
    mod = _load()
    # one 4-GPU node busy until t=10; then a 4-GPU job (t=1) and a 1-GPU job (t=2) wait
    cluster = small_cluster(gpus=(4,), types=(0,), speed=(1.0,))
    jobs = specs(arrival=[0.0, 1.0, 2.0], demand=[4, 4, 1], work=[80.0, 8.0, 2.0])
    res = run_jobs(cluster, jobs, mod.SmallestFirst(), LinearOracle(), EngineConfig())
    # job 0: 4 GPUs x speed 2 -> 8/s, done at 10; then job 2 (1 GPU) starts first
    assert res.finish[0] == 10.0
    assert res.first_start[2] == 10.0
    assert res.first_start[1] == 11.0   # job 2 runs 2/(1*2)=1 s, then job 1
