"""Sweep specs: a grid expands into cells with stable ids; bad specs fail before any cell runs."""
from __future__ import annotations

import textwrap

import pytest

from sim.errors import ConfigError, TraceError
from sim.jobs import JobTable
from sim.policies import list_policies
from sim.sweep.spec import load_spec, parse_spec

BASE = {
    "name": "t",
    "grid": {"policy": ["fifo", "sjf"], "nodes": [2, 4], "load": [0.5, 0.9], "seed": [0, 1]},
    "cluster": {"gpus_per_node": 4},
    "workload": {"jobs": 10, "load_unit": "utilization"},
}


def spec_with(**changes):
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for key, value in changes.items():
        table, _, field = key.partition("__")
        if field:
            doc.setdefault(table, {})
            if value is None:
                doc[table].pop(field, None)
            else:
                doc[table][field] = value
        elif value is None:
            doc.pop(table, None)
        else:
            doc[table] = value
    return doc


def test_grid_is_the_cartesian_product():
    spec = parse_spec(BASE)
    assert len(spec) == 2 * 2 * 2 * 2
    assert spec.policies == ("fifo", "sjf")
    c = spec.cells[0]
    assert c.params["cluster"] == "uniform:nodes=2,gpus=4,type=v100"
    assert c.params["nodes"] == 2 and c.params["total_gpus"] == 8
    assert c.params["policy_params"] == {"placement": "consolidated"}
    assert c.label == "fifo nodes=2 jobs=10 load=0.5 seed=0"


def test_cell_ids_are_stable_and_depend_only_on_parameters():
    a, b = parse_spec(BASE), parse_spec(spec_with(description="other words"))
    assert [c.id for c in a.cells] == [c.id for c in b.cells]
    assert a.fingerprint == b.fingerprint
    c = parse_spec(spec_with(grid__seed=[0, 1, 2]))
    assert {x.id for x in a.cells} < {x.id for x in c.cells}
    assert c.fingerprint != a.fingerprint


def test_all_policies_come_from_the_registry_at_run_time():
    spec = parse_spec(spec_with(grid__policy="all"))
    assert spec.policies == tuple(list_policies())
    ex = parse_spec(spec_with(grid__policy="all", exclude_policies=["fifo"]))
    assert "fifo" not in ex.policies and len(ex.policies) == len(spec.policies) - 1
    assert ex.fingerprint == spec.fingerprint    # the same sweep, grown or shrunk by policies


def test_policy_parameters_fixed_and_as_axes():
    spec = parse_spec(spec_with(grid__policy=["fifo"],
                                policy={"fifo": {"placement": "spread",
                                                 "grid": {"backfill": [False, True]}}}))
    labels = sorted({c.params["policy_label"] for c in spec.cells})
    assert labels == ["fifo[backfill=False]", "fifo[backfill=True]"]
    assert all(c.params["policy_params"]["placement"] == "spread" for c in spec.cells)
    assert len(spec) == 2 * 2 * 2 * 2


def test_jobs_per_node_and_clusters():
    spec = parse_spec(spec_with(workload__jobs=None, workload__jobs_per_node=3,
                                grid__nodes=None, grid__cluster=["gavel-108", "uniform:nodes=2,gpus=8"],
                                cluster=None))
    jobs = {c.params["cluster"]: c.params["jobs"] for c in spec.cells}
    assert jobs == {"gavel-108": 3 * 27, "uniform:nodes=2,gpus=8": 6}


@pytest.mark.parametrize("changes, match", [
    ({"grid__policy": ["fifo", "nosuch"]}, "unknown policy 'nosuch'"),
    ({"grid__nodes": None, "cluster": None, "grid__cluster": ["nosuch-preset"]},
     "unknown cluster 'nosuch-preset'"),
    ({"cluster__gpu_type": "tpu9"}, "tpu9"),
    ({"policy": {"fifo": {"speed": 3}}}, r"\[policy.fifo\].*speed"),
    ({"policy": {"fifo": {"grid": {"backfill": []}}}}, "empty grid"),
    ({"policy": {"las": {}}}, "not in the grid"),
    ({"grid__load": []}, "empty grid"),
    ({"grid": {}}, "empty grid"),
    ({"grid__nodes": None, "cluster": None}, "empty grid"),
    ({"grid__seeds": [1]}, "unknown key 'seeds'"),
    ({"workload__jobz": 3}, "unknown key 'jobz'"),
    ({"extra": 1}, "unknown key 'extra'"),
    ({"workload__load_unit": "furlongs"}, "furlongs"),
    ({"workload__jobs": None}, "number of jobs is missing"),
    ({"workload__jobs_per_node": 2}, "only one of"),
    ({"grid__load": [0.5, -1.0]}, "must be > 0"),
    ({"grid__load": [0.5, 0.5]}, "repeated"),
    ({"engine": {"placement": "diagonal"}}, "unknown placement"),
    ({"name": "has space"}, "name"),
    ({"grid__policy": "all", "exclude_policies": list(list_policies())}, "every policy is excluded"),
])
def test_bad_specs_are_config_errors(changes, match):
    with pytest.raises(ConfigError, match=match):
        parse_spec(spec_with(**changes), source="bad.toml")


def test_error_names_the_spec_file(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(textwrap.dedent("""
        name = "x"
        [grid]
        policy = ["fifo"]
        nodes = [2]
        load = [0.5]
        [workload]
        jobs = 5
        sizes = "huge"
    """))
    with pytest.raises(ConfigError, match=r"s\.toml: workload\.sizes: 'huge'"):
        load_spec(p)
    p.write_text("name = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_spec(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "missing.toml")


def test_trace_spec_resolves_relative_paths_and_checks_the_file(tmp_path):
    JobTable.from_columns(arrival_s=[0.0, 10.0], gpus=[1, 2], model=["A3C", "A3C"],
                          duration_s=[100.0, 50.0]).write(tmp_path / "jobs.csv")
    p = tmp_path / "s.toml"
    p.write_text('name = "tr"\n[grid]\npolicy = ["fifo"]\nnodes = [1]\nload = [1.0, 2.0]\n'
                 '[workload]\ntrace = "jobs.csv"\n')
    spec = load_spec(p)
    assert len(spec) == 2
    assert spec.cells[0].paths["trace"] == str((tmp_path / "jobs.csv").resolve())
    assert spec.cells[0].params["trace"] == "jobs.csv" and spec.cells[0].params["load_unit"] == "scale"
    (tmp_path / "jobs.csv").write_text("arrival_s,gpus,model,duration_s\n0,0,A3C,5\n")
    with pytest.raises(TraceError, match="row 0"):
        load_spec(p)
