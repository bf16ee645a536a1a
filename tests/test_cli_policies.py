"""The CLI's policy options and trace workloads: --policy-file, --param, the
``clustersim.policies`` entry points, and every trace format as a run or sweep workload."""
from __future__ import annotations

import json
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from sim.cli import main
from sim.engine import simulate
from sim.errors import ConfigError
from sim.metrics import summary
from sim.policies import get_policy, list_policies, load_policy_file, registry
from sim.presets import load_cluster
from sim.sweep import SweepStore, parse_spec, run_sweep
from sim.sweep.runners import SerialEngine
from sim.throughput import TableThroughput
from sim.workload import generate_workload

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "user_policy.py"
TRACES = ROOT / "tests" / "fixtures" / "traces"
# a contended workload: jobs wait, so the order of the queue matters
BUSY = ["run", "--cluster", "sia-64", "--jobs", "40", "--load", "300", "--seed", "0",
        "--no-progress", "--format", "json"]
COMPARED = ("avg_jct_s", "avg_wait_s", "makespan_s", "p99_jct_s")


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Policies registered by a test (files, plugins) are gone after it: other tests list the
    registry."""
    list_policies()                     # the built-in and installed ones, in the real registry
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def run_json(capsys, *args) -> dict:
    assert main(BUSY + list(args)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def expected(name: str, **params) -> dict:
    oracle = TableThroughput.builtin()
    jobs = generate_workload(40, 300, 0, throughput=oracle)
    return summary(simulate(load_cluster("sia-64"), jobs, get_policy(name, **params), oracle))


def same(got: dict, want: dict) -> bool:
    return all(got[k] == pytest.approx(want[k], rel=1e-12) for k in COMPARED)


def test_policy_file_runs_the_example_policy_from_the_command_line(capsys):
    out = run_json(capsys, "--policy-file", str(EXAMPLE), "--policy", "fifo,smallest-first")
    assert set(out) == {"fifo", "smallest-first"}
    assert same(out["smallest-first"], expected("smallest-first"))
    assert not same(out["smallest-first"], out["fifo"])      # another order, other results


def test_policy_file_is_listed_and_loading_it_twice_is_harmless(capsys):
    assert main(["policies", "--policy-file", str(EXAMPLE)]) == 0
    assert "smallest-first" in capsys.readouterr().out
    load_policy_file(EXAMPLE)
    assert "smallest-first" in list_policies()


@pytest.mark.parametrize("text, message", [
    ("def broken(:\n", "policy file"),
    (None, "does not exist"),
])
def test_bad_policy_file_is_a_one_line_error(tmp_path, capsys, text, message):
    path = tmp_path / "p.py"
    if text is not None:
        path.write_text(text)
    assert main(BUSY + ["--policy-file", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_param_sets_policy_parameters_as_the_api_does(capsys):
    default = run_json(capsys, "--policy", "tiresias")["tiresias"]
    changed = run_json(capsys, "--policy", "tiresias", "--param", "tiresias.thresholds=[100,200]")
    assert same(changed["tiresias"], expected("tiresias", thresholds=[100, 200]))
    assert not same(changed["tiresias"], default)
    backfill = run_json(capsys, "--policy", "fifo", "--param", "fifo.backfill=true")["fifo"]
    plain = expected("fifo")
    assert same(backfill, expected("fifo", backfill=True))
    assert backfill["avg_wait_s"] < plain["avg_wait_s"]       # later small jobs start early


@pytest.mark.parametrize("param, message", [
    ("sjf.backfill=true", "not among the policies run"),
    ("fifo.no_such_knob=1", "bad parameters"),
    ("fifo-backfill", "use POLICY.KEY=VALUE"),
    ("fifo.backfill", "use KEY=VALUE"),
])
def test_bad_param_fails_before_anything_runs(param, message, capsys):
    assert main(BUSY + ["--policy", "fifo", "--param", param]) == 2
    assert message in capsys.readouterr().err


def test_param_values_are_json_when_they_parse_else_text():
    from sim.commands._options import parse_policy_params
    got = parse_policy_params(["tiresias.thresholds=[100,200]", "fifo.placement=spread",
                               "tiresias.promote-knob=0.5"])
    assert got == {"tiresias": {"thresholds": [100, 200], "promote_knob": 0.5},
                   "fifo": {"placement": "spread"}}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed distribution with two clustersim.policies entry points and a broken one."""
    pkg = tmp_path / "clustersim_test_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import numpy as np
        from sim.policies import Policy, register

        class Newest(Policy):          # registered by the entry point that names the class
            name = "plugin-newest"
            description = "latest arrival first (test plugin)"
            def order(self, state):
                q = np.flatnonzero(state.ngpu == 0)
                return q[np.argsort(-state.jobs.arrival[state.active[q]], kind="stable")]
    """))
    (pkg / "more.py").write_text(textwrap.dedent("""
        from sim.policies import register
        from clustersim_test_plugin import Newest

        @register                      # registered by importing the module
        class Newest2(Newest):
            name = "plugin-newest-2"
    """))
    dist = tmp_path / "clustersim_test_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clustersim-test-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[clustersim.policies]\nnewest = clustersim_test_plugin:Newest\n"
        "more = clustersim_test_plugin.more\nbroken = clustersim_test_plugin.nowhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_discovered", False)
    yield
    for mod in ("clustersim_test_plugin", "clustersim_test_plugin.more"):
        sys.modules.pop(mod, None)


def test_installed_entry_points_add_policies(plugin, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = list_policies()
    assert {"plugin-newest", "plugin-newest-2", "fifo"} <= set(names)
    assert any("broken" in str(w.message) and w.category is registry.PluginWarning for w in caught)
    out = run_json(capsys, "--policy", "fifo,plugin-newest")
    assert not same(out["plugin-newest"], out["fifo"])


def test_run_workload_reads_raw_traces_and_replays_recorded_times(capsys):
    args = ["run", "--cluster", "uniform:nodes=4,gpus=8", "--policy", "fifo", "--no-progress",
            "--format", "json", "--workload"]
    assert main(args + [str(TRACES / "philly_jobs.csv")]) == 0
    detected = json.loads(capsys.readouterr().out)["fifo"]
    assert main(args + [str(TRACES / "philly_jobs.csv"), "--trace-format", "philly"]) == 0
    forced = json.loads(capsys.readouterr().out)["fifo"]
    assert detected["n_jobs"] > 0 and detected == {**forced, **{k: detected[k] for k in
                                                               ("wall_seconds", "mean_decision_ms",
                                                                "p99_decision_ms")}}
    assert main(args + [str(TRACES / "helios_cluster_log.csv")]) == 0
    assert json.loads(capsys.readouterr().out)["fifo"]["n_jobs"] > 0
    assert main(args + [str(TRACES / "gavel.trace")]) == 0       # iterations of Gavel's models
    assert json.loads(capsys.readouterr().out)["fifo"]["n_jobs"] > 0
    assert main(args + [str(TRACES / "philly_jobs.csv"), "--trace-format", "gavel"]) == 2
    assert "not a Gavel trace" in capsys.readouterr().err


def test_sweep_replays_a_raw_trace_with_a_forced_format(tmp_path):
    doc = {"name": "raw", "grid": {"policy": ["fifo"], "nodes": [4], "load": [1.0, 2.0]},
           "cluster": {"gpus_per_node": 8},
           "workload": {"trace": str(TRACES / "philly_jobs.csv"), "trace_format": "philly"}}
    spec = parse_spec(doc)
    assert all(c.params["trace_format"] == "philly" for c in spec.cells)
    report = run_sweep(spec, tmp_path / "o", engine=SerialEngine())
    assert (report.done, report.failed) == (2, 0)
    rows = SweepStore(tmp_path / "o").summaries().to_pylist()
    assert all(r["n_jobs"] > 0 for r in rows)
    without = parse_spec({**doc, "workload": {"trace": doc["workload"]["trace"]}})
    assert "trace_format" not in without.cells[0].params        # earlier sweeps keep their ids
    with pytest.raises(ConfigError, match="trace_format"):
        parse_spec({**doc, "workload": {**doc["workload"], "trace_format": "nope"}})
