"""``clustersim run --workload generate --learning`` (issue 16): the EGHS experiment's workload,
elastic time-to-accuracy jobs with learning profiles and user budgets, run with the learning
simulator, so that EGHS and its fair twin compare on any seed from the command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sim.cli import main
from sim.engine import simulate
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


def test_learning_needs_a_generated_workload(tmp_path, capsys):
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,gpus,model,duration_s\n0,1,ResNet-18 (batch size 64),60\n")
    assert main(["run", "--workload", str(trace), "--learning", "--policy", "fifo", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--learning generates its workload" in err and "--workload generate" in err and "\n" not in err


@pytest.mark.parametrize("flag", [[], ["--learning"]])
def test_learning_flag_changes_the_workload(flag, capsys):
    assert main(["run", "--cluster", CLUSTER, "--jobs", "6", "--load", "30", "--policy", "fifo",
                 "--no-progress", *flag]) == 0
    text = capsys.readouterr().out
    assert ("learning: elastic time-to-accuracy" in text) == bool(flag)
