"""Gavel's inputs end to end: ``clustersim run`` on a Gavel ``.trace``, with the built-in table
(Gavel's whole table), and clear errors for bad ones (issue 11, point 4)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.cli import main
from sim.scenario import Scenario
from sim.throughput import TableThroughput, default_oracle

TRACE = Path(__file__).resolve().parent / "fixtures" / "traces" / "gavel.trace"


def test_run_reads_a_gavel_trace(capsys):
    assert main(["run", "--workload", str(TRACE), "--policy", "gavel-max-min-fairness-perf,fifo",
                 "--format", "json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"gavel-max-min-fairness-perf", "fifo"}
    assert all(v["n_jobs"] == 3 for v in out.values())


def test_gavel_trace_runs_with_the_table_not_the_replay_oracle():
    cluster, jobs, oracle = Scenario(workload=str(TRACE)).build()
    assert oracle is default_oracle() and len(oracle.models) == 26
    # job 0: ResNet-18 (batch size 32), 5000 steps on one GPU, alone from t = 0 on a V100 (fifo)
    res = sim.simulate("gavel-108", str(TRACE), "fifo")
    rate = oracle.reference_rate([oracle.model_index("ResNet-18 (batch size 32)")], [1])[0]
    assert res.finish[0] - res.jobs.arrival[0] == pytest.approx(5000 / rate, rel=1e-9)


def test_trace_with_a_model_missing_from_the_table_names_the_job(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    bad.write_text("ResNet-18 (batch size 32)\tc\td\t--n\t1\t100\t1\t1\t-1\t0\n"
                   "Nonexistent (batch size 1)\tc\td\t--n\t1\t100\t1\t1\t-1\t5\n")
    assert main(["run", "--workload", str(bad), "--policy", "gavel-fifo", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "row 1 (job_id 1)" in err and "unknown model 'Nonexistent (batch size 1)'" in err


def test_builtin_oracle_runs_every_gavel_job_type():
    o = TableThroughput.builtin()
    k = np.array([1])
    assert np.all(o.reference_rate(np.arange(len(o.models)), np.repeat(k, len(o.models))) > 0)
