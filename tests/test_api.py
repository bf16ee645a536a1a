"""The notebook API (sim.simulate, sim.compare), SimResult.to_pandas / repr, sim.__version__."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.engine import simulate as engine_simulate
from sim.errors import ConfigError
from sim.metrics import SUMMARY_KEYS, jobs_table, summary
from sim.policies import get_policy
from sim.presets import get_preset
from sim.throughput import TableThroughput
from sim.workload import generate_workload

pd = pytest.importorskip("pandas")
ROOT = Path(__file__).resolve().parent.parent
TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"


def test_notebook_three_lines_from_import_to_a_dataframe():
    import sim
    table = sim.compare("sia-64", "generate", ["fifo", "srtf", "tiresias"], jobs=25, load=30)
    assert list(table["policy"]) == ["fifo", "srtf", "tiresias"]
    assert list(table.columns) == ["policy", "seed", *SUMMARY_KEYS]
    assert (table["n_jobs"] == 25).all() and (table["avg_jct_s"] > 0).all()


def test_compare_rows_are_the_summaries_of_explicit_runs():
    oracle = TableThroughput.builtin()
    table = sim.compare("gavel-108", "generate", ["fifo", "las"], seeds=[0, 3], jobs=20, load=40)
    assert list(zip(table["policy"], table["seed"])) == [("fifo", 0), ("las", 0), ("fifo", 3), ("las", 3)]
    for seed in (0, 3):
        jobs = generate_workload(20, 40, seed, throughput=oracle)
        expect = summary(engine_simulate(get_preset("gavel-108"), jobs, get_policy("las"), oracle))
        row = table[(table.policy == "las") & (table.seed == seed)].iloc[0]
        assert row["avg_jct_s"] == expect["avg_jct_s"] and row["makespan_s"] == expect["makespan_s"]
    assert table[table.seed == 0]["avg_jct_s"].iloc[0] != table[table.seed == 3]["avg_jct_s"].iloc[0]


def test_compare_a_job_table_object_and_file_alike(tmp_path):
    jobs = generate_workload(15, 30, 1)
    path = tmp_path / "jobs.parquet"
    jobs.write(path)
    by_object = sim.compare("gavel-108", jobs, ["fifo", "sjf"])
    by_file = sim.compare("gavel-108", str(path), ["fifo", "sjf"])
    assert by_object["seed"].isna().all()
    cols = ["policy", "avg_jct_s", "makespan_s", "utilization"]
    assert by_object[cols].equals(by_file[cols])
    with pytest.raises(ConfigError, match="generate"):
        sim.compare("gavel-108", jobs, ["fifo"], seeds=[0, 1])


def test_compare_reads_any_trace_format_and_replays_recorded_times():
    table = sim.compare("uniform:nodes=4,gpus=8", TRACES / "philly_jobs.csv", ["fifo"])
    assert table["n_jobs"].iloc[0] > 0 and np.isfinite(table["avg_jct_s"].iloc[0])


def test_simulate_by_names_matches_the_explicit_engine_call():
    oracle = TableThroughput.builtin()
    jobs = generate_workload(30, 20, 0, throughput=oracle)
    by_name = sim.simulate("gavel-108", jobs, "tiresias")
    explicit = engine_simulate(get_preset("gavel-108"), jobs, get_policy("tiresias"), oracle)
    assert np.array_equal(by_name.finish, explicit.finish)
    spread = sim.simulate(get_preset("gavel-108"), jobs, "fifo", placement="spread")
    assert spread.policy == "fifo"


def test_a_policy_instance_is_copied_for_each_run():
    policy = get_policy("tiresias")
    jobs = generate_workload(20, 30, 2)
    first = sim.simulate("gavel-108", jobs, policy)
    again = sim.simulate("gavel-108", jobs, policy)
    assert np.array_equal(first.finish, again.finish)
    with pytest.raises(ConfigError, match="policy name"):
        sim.simulate("gavel-108", jobs, policy, placement="spread")
    with pytest.raises(ConfigError, match="not int"):
        sim.simulate("gavel-108", jobs, 3)


def test_to_pandas_is_the_per_job_table_and_the_repr_is_short():
    jobs = generate_workload(200, 50, 0)
    res = sim.simulate("gavel-108", jobs, "fifo")
    df = res.to_pandas()
    assert df.equals(jobs_table(res).to_pandas()) and len(df) == 200
    text = repr(res)
    assert len(text) < 200 and "'fifo'" in text and "gavel-108" in text and "200 jobs" in text
    jct = float(np.mean(res.finish - res.jobs.arrival))
    assert f"avg JCT {jct:,.0f} s" in text


def test_missing_pandas_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"pip install 'clustersim\[pandas\]'"):
        sim.compare("gavel-108", "generate", ["fifo"], jobs=5)


def test_version_is_the_projects(tmp_path):
    from sim._version import pyproject_version

    assert sim.__version__ == pyproject_version(ROOT / "pyproject.toml") != "0+unknown"
    (tmp_path / "p.toml").write_text('[tool.x]\nversion = "9"\n[project]\nname = "a"\nversion = "1.2"\n')
    assert pyproject_version(tmp_path / "p.toml") == "1.2"
    assert pyproject_version(tmp_path / "none.toml") == "0+unknown"


def test_import_sim_stays_light():
    code = "import sys, sim; print(sorted(m for m in ('sim.engine', 'numba', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_api_module_examples_run():
    import doctest

    import sim.api

    failed, tried = doctest.testmod(sim.api)
    assert tried and not failed


def test_simulate_reads_a_pollux_workload_as_the_cli_does(tmp_path, monkeypatch):
    # a Pollux-format CSV runs on its goodput profiles from sim.simulate too (not only the CLI)
    from goodput_helpers import random_rows, write_profile, write_workload

    from sim.goodput.workload import read_goodput_workload

    write_profile(tmp_path / "data" / "profiles" / "pollux")
    monkeypatch.setenv("CLUSTERSIM_SHARED_DATA", str(tmp_path / "data"))
    wl = write_workload(tmp_path / "w.csv", random_rows(6, 3))
    got = sim.simulate("pollux-64", wl, "pollux-tiresias")
    table, oracle = read_goodput_workload(wl)
    want = engine_simulate(get_preset("pollux-64"), table, get_policy("pollux-tiresias"), oracle)
    assert np.array_equal(got.finish, want.finish)
