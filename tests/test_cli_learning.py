"""``clustersim run --workload generate --learning`` (issue 16): the EGHS experiment's workload,
elastic time-to-accuracy jobs with learning profiles and user budgets, run with the learning
simulator, so that EGHS and its fair twin compare on any seed from the command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cli import main
from sim.engine import job_specs, simulate
from sim.learning.workload import LEARNING_MODELS, learning_world
from sim.metrics import summary
from sim.policies import get_policy
from sim.scenario import Scenario

CLUSTER = "uniform:nodes=4,gpus=8,type=v100"
LEARN = ["run", "--cluster", CLUSTER, "--workload", "generate", "--learning", "--jobs", "14",
         "--load", "30", "--no-progress", "--format", "json"]


def _json_run(capsys, *args) -> dict:
    assert main([*LEARN, *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_learning_workload_is_elastic_time_to_accuracy():
    cluster, table, oracle = Scenario(cluster=CLUSTER, jobs=14, load=30.0, seed=2, learning=True).build()
    g, lo, hi = table.gpus, table.gpus_min, table.gpus_max
    assert len(table) == 14 and set(table.table.column("model").to_pylist()) <= set(LEARNING_MODELS)
    np.testing.assert_array_equal(lo, np.maximum(1, g // 2))
    np.testing.assert_array_equal(hi, 2 * g)
    world = learning_world(table, oracle, seed=2)
    assert (world.spec.mode == 1).all()                              # every job time-to-accuracy
    assert (world.spec.budget_factor >= 1).all() and world.spec.budget_factor.std() > 0   # user budgets


def test_cli_compares_eghs_and_its_twin_with_the_learning_simulator(capsys):
    got = _json_run(capsys, "--policy", "eghs,eghs-unaware", "--seed", "2")
    assert set(got) == {"eghs", "eghs-unaware"}
    # the command line's numbers are the library's with a fresh learning world per policy
    cluster, table, oracle = Scenario(cluster=CLUSTER, jobs=14, load=30.0, seed=2, learning=True).build()
    for name in ("eghs", "eghs-unaware"):
        res = simulate(cluster, table, get_policy(name), oracle, learning=learning_world(table, oracle, 2))
        assert got[name]["avg_jct_s"] == summary(res)["avg_jct_s"]
        assert got[name]["makespan_s"] == summary(res)["makespan_s"]


def test_learning_runs_are_seeded(capsys):
    a = _json_run(capsys, "--policy", "eghs-unaware", "--seed", "5")["eghs-unaware"]
    b = _json_run(capsys, "--policy", "eghs-unaware", "--seed", "5")["eghs-unaware"]
    c = _json_run(capsys, "--policy", "eghs-unaware", "--seed", "6")["eghs-unaware"]
    assert a["avg_jct_s"] == b["avg_jct_s"] and a["avg_jct_s"] != c["avg_jct_s"]


def test_learning_budgets_are_a_job_table_column():
    # the generator writes budget_iterations = the drawn factor x the work, bit for bit what the
    # learning world computed before the column existed; the world takes them from the column
    cluster, table, oracle = Scenario(cluster=CLUSTER, jobs=14, load=30.0, seed=2, learning=True).build()
    world = learning_world(table, oracle, seed=2)
    jobs = job_specs(table, oracle)
    np.testing.assert_array_equal(table.budget_iterations, jobs.work * world.spec.budget_factor)
    assert (table.budget_iterations > jobs.work).all()
    world.start(jobs)
    np.testing.assert_array_equal(world.budget, table.budget_iterations)


def _job_file(tmp_path, ext=".csv", budgets=True):
    _, table, _ = Scenario(cluster=CLUSTER, jobs=14, load=30.0, seed=2, learning=True).build()
    if not budgets:
        table = table.with_budgets(np.full(len(table), np.nan))
    path = tmp_path / f"jobs{ext}"
    table.write(path)
    return path, table


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_learning_run_from_a_job_table_uses_its_budgets(tmp_path, capsys, ext):
    path, table = _job_file(tmp_path, ext)
    cluster, read, oracle = Scenario(cluster=CLUSTER, workload=str(path), seed=2, learning=True).build()
    world = learning_world(read, oracle, 2)
    world.start(job_specs(read, oracle))
    np.testing.assert_array_equal(world.budget, table.budget_iterations)
    # the file replays the generated run exactly: same jobs, same budgets, same seed
    from_file = json.loads(_cli_file(capsys, path, "--policy", "eghs-unaware", "--seed", "2"))
    generated = _json_run(capsys, "--policy", "eghs-unaware", "--seed", "2")
    assert from_file["eghs-unaware"]["avg_jct_s"] == generated["eghs-unaware"]["avg_jct_s"]
    assert from_file["eghs-unaware"]["makespan_s"] == generated["eghs-unaware"]["makespan_s"]


def test_a_job_table_without_budgets_draws_them(tmp_path):
    path, table = _job_file(tmp_path, budgets=False)
    _, read, oracle = Scenario(cluster=CLUSTER, workload=str(path), seed=2, learning=True).build()
    world = learning_world(read, oracle, 2)
    assert world.spec.budget is None
    world.start(job_specs(read, oracle))
    np.testing.assert_array_equal(world.budget, job_specs(read, oracle).work * world.spec.budget_factor)


def _cli_file(capsys, path, *args) -> str:
    assert main(["run", "--cluster", CLUSTER, "--workload", str(path), "--learning", "--no-progress",
                 "--format", "json", *args]) == 0
    return capsys.readouterr().out


def test_learning_needs_a_generated_workload_or_a_job_table(tmp_path, capsys):
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus\n0,60,1\n")
    assert main(["run", "--workload", str(trace), "--learning", "--policy", "fifo", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--learning runs time-to-accuracy jobs" in err and "--workload generate" in err
    assert "'philly'" in err and "\n" not in err
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,gpus,model,duration_s\n0,1,ResNet-18 (batch size 64),60\n")
    assert main(["run", "--workload", str(jobs), "--trace-format", "gavel", "--learning", "--policy",
                 "fifo", "--no-progress"]) == 2
    assert "(format 'gavel')" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [[], ["--learning"]])
def test_learning_flag_changes_the_workload(flag, capsys):
    assert main(["run", "--cluster", CLUSTER, "--jobs", "6", "--load", "30", "--policy", "fifo",
                 "--no-progress", *flag]) == 0
    text = capsys.readouterr().out
    assert ("learning: elastic time-to-accuracy" in text) == bool(flag)


def test_workload_line_counts_the_given_budgets(tmp_path, capsys):
    path, table = _job_file(tmp_path)
    table.with_budgets(np.where(np.arange(len(table)) < 5, table.budget_iterations, np.nan)).write(path)
    assert main(["run", "--cluster", CLUSTER, "--workload", str(path), "--learning", "--policy",
                 "eghs-unaware", "--no-progress"]) == 0
    assert f"user budgets from the table for 5 of {len(table)} jobs (the others drawn)" in \
        capsys.readouterr().out


def test_trace_convert_keeps_the_budgets(tmp_path, capsys):
    from sim.jobs import JobTable
    path, table = _job_file(tmp_path)
    out = tmp_path / "converted.parquet"
    assert main(["trace", "convert", str(path), "-o", str(out)]) == 0
    np.testing.assert_array_equal(JobTable.read(out).budget_iterations, table.budget_iterations)


def test_learning_run_names_the_policies_given_the_truth(capsys):
    """Oracle baselines (clairvoyant policies) see the true remaining work of time-to-accuracy
    jobs; the run says which, on stderr with --format json (stdout stays parseable)."""
    got = _json_run(capsys, "--policy", "srtf,fifo", "--seed", "1")
    assert set(got) == {"srtf", "fifo"}
    assert main([*LEARN, "--policy", "srtf,fifo", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "note: srtf read the true remaining work" in err and "fifo read" not in err
    assert main([*LEARN, "--policy", "fifo,eghs", "--seed", "1"]) == 0
    assert "note:" not in capsys.readouterr().err
