"""Running sweeps: the local pool and Dask give the same results; sweeps resume after a kill or
an interruption; failed cells are recorded and the sweep goes on; another sweep's folder is
refused; the CLI writes plots and an HTML index."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.jobs import JobTable
from sim.sweep import SweepStore, load_spec, parse_spec, run_sweep
from sim.sweep.cells import TIMING_COLUMNS, run_cell_safe
from sim.sweep.plots import PLOT_FILES
from sim.sweep.runners import SerialEngine

SMALL = {
    "name": "small",
    "grid": {"policy": ["fifo", "srtf"], "nodes": [2], "load": [0.6, 1.2], "seed": [0, 1]},
    "cluster": {"gpus_per_node": 4},
    "workload": {"jobs": 30, "load_unit": "utilization"},
}


def results(out) -> tuple[list, dict]:
    """(summary rows without timing columns, NaN as a string; {cell: jobs table})"""
    store = SweepStore(out)
    t = store.summaries()
    rows = [{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()
             if k not in TIMING_COLUMNS} for r in t.to_pylist()]
    jobs = {c: pq.read_table(Path(out) / "jobs" / f"cell={c}" / "part-0.parquet")
            for c in store.finished_ids()}
    return rows, jobs


@pytest.fixture(scope="module")
def pool_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pool") / "out"
    report = run_sweep(parse_spec(SMALL), out, workers=2)
    return out, report


def test_pool_runs_every_cell_into_a_partitioned_dataset(pool_run):
    out, report = pool_run
    assert (report.total, report.done, report.failed, report.skipped) == (8, 8, 0, 0)
    import pyarrow.dataset as ds
    jobs = ds.dataset(out / "jobs", format="parquet", partitioning="hive").to_table()
    assert jobs.num_rows == 8 * 30 and len(set(jobs.column("cell").to_pylist())) == 8
    summ = SweepStore(out).summaries()
    assert summ.num_rows == 8
    assert set(summ.column("policy").to_pylist()) == {"fifo", "srtf"}
    assert all(n == 30 for n in summ.column("n_jobs").to_pylist())


def test_same_results_in_process_and_on_the_pool(pool_run, tmp_path):
    run_sweep(parse_spec(SMALL), tmp_path / "serial", engine=SerialEngine())
    a_rows, a_jobs = results(pool_run[0])
    b_rows, b_jobs = results(tmp_path / "serial")
    assert a_rows == b_rows
    assert a_jobs.keys() == b_jobs.keys()
    assert all(a_jobs[c].equals(b_jobs[c]) for c in a_jobs)


def test_same_results_on_a_dask_local_cluster(pool_run, tmp_path):
    pytest.importorskip("distributed")
    part = dict(SMALL, name="part", grid=dict(SMALL["grid"], seed=[1]))   # 4 of the 8 cells
    report = run_sweep(parse_spec(part), tmp_path / "dask", workers=2, dask="local")
    assert report.engine.startswith("dask LocalCluster")
    assert (report.done, report.failed) == (4, 0), report.failures
    a_rows, a_jobs = results(pool_run[0])
    b_rows, b_jobs = results(tmp_path / "dask")
    assert b_rows == [r for r in a_rows if r["cell_id"] in b_jobs]
    assert all(b_jobs[c].equals(a_jobs[c]) for c in b_jobs)


class Interrupted(Exception):
    pass


def test_interrupted_sweep_resumes_and_loses_nothing(pool_run, tmp_path):
    seen = []

    def stop_after_five(cell, outcome):
        seen.append(cell.id)
        if len(seen) == 5:
            raise Interrupted

    spec = parse_spec(SMALL)
    with pytest.raises(Interrupted):
        run_sweep(spec, tmp_path / "o", engine=SerialEngine(), on_outcome=stop_after_five)
    assert SweepStore(tmp_path / "o").finished_ids() == set(seen)
    again = run_sweep(spec, tmp_path / "o", engine=SerialEngine())
    assert (again.skipped, again.done) == (5, 3)
    assert results(tmp_path / "o")[0] == results(pool_run[0])[0]
    nothing = run_sweep(spec, tmp_path / "o", engine=SerialEngine())
    assert (nothing.skipped, nothing.done, nothing.engine) == (8, 0, "nothing to run")


def test_failed_cell_is_recorded_with_its_error_and_retried(tmp_path):
    JobTable.from_columns(arrival_s=[0.0, 5.0, 9.0], gpus=[1, 8, 2], model=["A3C"] * 3,
                          duration_s=[100.0, 50.0, 70.0]).write(tmp_path / "jobs.csv")
    doc = {"name": "tr", "grid": {"policy": ["fifo", "sjf"], "nodes": [1, 2], "load": [1.0]},
           "cluster": {"gpus_per_node": 4}, "workload": {"trace": "jobs.csv"}}
    spec = parse_spec(doc, base_dir=tmp_path)
    report = run_sweep(spec, tmp_path / "o", engine=SerialEngine())
    assert (report.done, report.failed) == (2, 2)      # 8-GPU job on a 4-GPU cluster
    fails = SweepStore(tmp_path / "o").failures().to_pylist()
    assert {f["nodes"] for f in fails} == {1}
    assert all("requests 8 GPUs" in f["error"] and "Traceback" in f["traceback"] for f in fails)
    again = run_sweep(spec, tmp_path / "o", engine=SerialEngine())
    assert (again.skipped, again.done, again.failed) == (2, 0, 2)


def test_another_sweeps_folder_is_refused_before_any_cell_runs(pool_run, tmp_path):
    out = pool_run[0]
    other = dict(SMALL, grid=dict(SMALL["grid"], seed=[7]))
    calls = []
    with pytest.raises(ConfigError, match=r"holds the results of another sweep .*spec\.grid\.seed"):
        run_sweep(parse_spec(other), out, engine=SerialEngine(), on_outcome=lambda c, o: calls.append(c))
    assert calls == []
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and holds no sweep"):
        run_sweep(parse_spec(SMALL), tmp_path / "x", engine=SerialEngine())


def test_cell_errors_are_data():
    cell = parse_spec(SMALL).cells[0]
    bad = type(cell)(cell.id, dict(cell.params, policy="nosuch"), cell.label)
    out = run_cell_safe(bad)
    assert not out.ok and "unknown policy 'nosuch'" in out.error


def test_cli_sweep_writes_plots_and_index(pool_run, tmp_path, capsys):
    spec = tmp_path / "small.toml"
    spec.write_text('name = "small"\n[grid]\npolicy = ["fifo", "srtf"]\nnodes = [2]\n'
                    'load = [0.6, 1.2]\nseed = [0, 1]\n[cluster]\ngpus_per_node = 4\n'
                    '[workload]\njobs = 30\nload_unit = "utilization"\n')
    # the same spec written as TOML resumes the folder the fixture filled: nothing to run
    assert main(["sweep", str(spec), "--out", str(pool_run[0]), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "8 already done, 0 done now" in text
    index = (pool_run[0] / "index.html").read_text()
    for name in PLOT_FILES:
        assert (pool_run[0] / "plots" / name).read_bytes().startswith(b"\x89PNG")
        assert f"plots/{name}" in index
    assert (pool_run[0] / "summary.csv").exists()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "new"), "--dry-run"]) == 0
    assert "8 to run" in capsys.readouterr().out


def test_killed_sweep_resumes(tmp_path):
    spec = tmp_path / "k.toml"
    spec.write_text('name = "k"\n[grid]\npolicy = ["fifo"]\nnodes = [2]\nload = [0.8]\n'
                    'seed = [0, 1, 2, 3, 4, 5, 6, 7]\n[cluster]\ngpus_per_node = 4\n'
                    '[workload]\njobs = 200\nload_unit = "utilization"\n')
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "sim.cli", "sweep", str(spec), "--out", str(out), "--workers", "1",
           "--no-plots", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list((out / "summary").glob("cell=*/part-0.parquet")):
            assert proc.poll() is None and time.monotonic() < deadline, "sweep ended too early"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = SweepStore(out).finished_ids()
    assert 1 <= len(kept) < 8
    report = run_sweep(load_spec(spec), out, engine=SerialEngine())
    assert report.skipped == len(kept) and report.done == 8 - len(kept)
    assert not list(out.glob("*/cell=*/.*.tmp"))


def test_engine_choice_and_bad_arguments(capsys):
    from sim.sweep.runners import PoolEngine, make_engine
    assert isinstance(make_engine(3), PoolEngine) and make_engine(3).workers == 3
    with pytest.raises(ConfigError, match="tcp://HOST:PORT or 'local'"):
        make_engine(dask="somewhere")
    assert main(["sweep", "x.toml", "--out", "o", "--workers", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    assert main(["sweep", "missing.toml", "--out", "o"]) == 2
    assert "sweep spec missing.toml does not exist" in capsys.readouterr().err
