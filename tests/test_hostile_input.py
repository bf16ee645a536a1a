"""Issue 17: what a hostile user can type or feed gives a clear error (or a counted skip), never
a silent wrong result, a hang, a traceback or an orphan process; results do not depend on how
the entropy kernels were compiled."""
from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.engine import EngineConfig, simulate
from sim.errors import ConfigError, SimError, TraceError
from sim.jobs import JobTable
from sim.limits import MAX_TIME_S, MIN_ROUND_S, fmt_num
from sim.policies import get_policy
from sim.throughput import TableThroughput
from sim.traces import JOB_FORMATS, NODE_FORMATS, read_nodes, read_trace

SMALL = ["run", "--cluster", "uniform:nodes=2,gpus=4", "--jobs", "4", "--no-progress", "--policy", "fifo"]


def cli(*args, timeout=120, **kw) -> subprocess.CompletedProcess:
    """The command as a user runs it: a separate process."""
    return subprocess.run([sys.executable, "-m", "sim.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kw)


def one_line_error(res: subprocess.CompletedProcess, code: int = 2, *, contains: str = "") -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.startswith("clustersim: error: ") and "\n" not in err, err
    assert contains in err, err
    return err


def job_csv(path: Path, rows: list[str], header: str = "arrival_s,gpus,model,duration_s") -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


# -------------------------------------------------------------------- 1. numeric ranges
@pytest.mark.parametrize("row, field", [("1e300,1,resnet18,60", "arrival_s"),
                                        ("0,1,resnet18,1e300", "duration_s"),
                                        ("inf,1,resnet18,60", "arrival_s")])
def test_job_table_values_past_the_horizon_are_errors(tmp_path, row, field):
    path = job_csv(tmp_path / "jobs.csv", ["0,1,resnet18,60", row])
    with pytest.raises(TraceError) as exc:
        JobTable.read(path)
    assert (exc.value.file, exc.value.row, exc.value.field) == (str(path), 1, field)
    assert "np.float64" not in str(exc.value)
    # and --skip-invalid drops (and records) the row instead
    kept = JobTable.read(path, skip_invalid=True)
    assert len(kept) == 1 and [e.field for e in kept.skipped] == [field]


def test_engine_rejects_job_specs_past_the_horizon():
    from sim.cluster import uniform_cluster
    from sim.engine import job_specs, run_jobs

    oracle = TableThroughput.builtin()
    table = JobTable.from_columns(arrival_s=[0.0], gpus=[1], model=["ResNet-18 (batch size 64)"], iterations=[1e30])
    with pytest.raises(ConfigError, match="horizon"):
        run_jobs(uniform_cluster(1, 1), job_specs(table, oracle), get_policy("fifo"), oracle,
                 EngineConfig())


@pytest.mark.parametrize("args, text", [
    (["--load", "1e-300"], "load (jobs per hour) must be in"),
    (["--load", "nan"], "load (jobs per hour) must be in"),
    (["--load", "1e-5", "--jobs", "100000"], "past the horizon"),
    (["--seed", "-1"], "--seed must be an integer in [0, 2**63 - 1], got -1"),
    (["--round", "1e-9"], "must be 0 (no periodic rounds) or in [1, 1e+10] s, got 1e-09"),
    (["--round", "inf"], "round_s"),
    (["--restart-delay", "-5"], "restart_delay_s"),
])
def test_run_rejects_out_of_range_numbers(capsys, args, text):
    assert main(SMALL + args) == 2
    err = capsys.readouterr().err
    assert text in err and err.count("\n") == 1


def test_round_period_bounds_hold_in_the_api_and_sweep_specs(tmp_path):
    for bad in (1e-9, 0.5, -1.0, float("nan"), 1e11):
        with pytest.raises(ConfigError):
            EngineConfig(round_s=bad)
    assert EngineConfig(round_s=0).round_s == 0.0 and EngineConfig(round_s=MIN_ROUND_S).round_s == 1.0
    from sim.sweep.spec import load_spec
    spec = tmp_path / "s.toml"
    spec.write_text('name = "x"\n[grid]\npolicy = ["fifo"]\nnodes = [2]\nload = [1.0]\n'
                    '[workload]\njobs = 4\n[engine]\nround_s = 1e-9\n')
    with pytest.raises(ConfigError, match=r"engine\.round_s.*1e-09"):
        load_spec(spec)


def test_uniform_cluster_duplicate_key_is_an_error(capsys):
    assert main(["run", "--cluster", "uniform:nodes=4,gpus=8,nodes=2", "--jobs", "2"]) == 2
    assert "key 'nodes' is given twice" in capsys.readouterr().err


# -------------------------------------------------------------------- long-run guard
def _decisions(arrival, duration, round_s, policy="fifo"):
    from sim.cluster import uniform_cluster
    oracle = TableThroughput.builtin()
    table = JobTable.from_columns(arrival_s=arrival, gpus=[1] * len(arrival), model=["ResNet-18 (batch size 64)"] * len(arrival),
                                  duration_s=duration)
    res = simulate(uniform_cluster(1, 1), table, get_policy(policy), oracle, EngineConfig(round_s=round_s))
    return res.decisions + res.skipped_decisions, float(np.max(res.finish))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0, MAX_TIME_S * 0.99), st.floats(1, 400)), min_size=1, max_size=6),
       st.sampled_from([MIN_ROUND_S, 7.5, 60.0]))
def test_runs_stop_within_a_bounded_number_of_events(jobs, round_s):
    """Any accepted input: decision points <= 2 per job (arrival, completion) plus one per
    round while jobs are active; rounds are >= 1 s and none fire in idle gaps, so even arrivals
    at the horizon add no events.  (Non-preemptive FIFO: a preemptive policy whose round is
    shorter than the restart delay can thrash without progress; see the issue 17 report.)"""
    arrival = [a for a, _ in jobs]
    duration = [d for _, d in jobs]
    n, total = _decisions(arrival, duration, round_s)
    # one GPU: busy time <= the sum of run times (times the slowest type's slowdown, < 10)
    assert n <= 3 * len(jobs) + 10 * sum(duration) / round_s + 2


@pytest.mark.parametrize("native", [True, False])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(0, 600), st.floats(1, 400)), min_size=2, max_size=5),
       st.sampled_from([MIN_ROUND_S, 7.5]))
def test_las_cannot_thrash_when_rounds_are_shorter_than_restarts(native, jobs, round_s):
    """LAS with rounds far shorter than the restart delay (ResNet-50: 250 s): GPU-seconds grow
    during a restart, so without its lease two jobs would swap at every round forever.  With
    the lease every stint but a job's last makes >= min_run_s (60 s) of progress."""
    from sim.cluster import uniform_cluster
    table = JobTable.from_columns(arrival_s=[a for a, _ in jobs], gpus=[1] * len(jobs),
                                  model=["ResNet-50 (batch size 64)"] * len(jobs),
                                  duration_s=[d for _, d in jobs])
    res = simulate(uniform_cluster(1, 1), table, get_policy("las"), TableThroughput.builtin(),
                   EngineConfig(round_s=round_s, native=native))
    assert np.all(np.isfinite(res.finish))
    assert res.restarts.sum() <= sum(d for _, d in jobs) / 60.0 + len(jobs)


# -------------------------------------------------------------------- 3. one error boundary
def test_out_onto_an_existing_file_or_an_uncreatable_folder(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    one_line_error(cli(*SMALL, "--out", f), contains="exists and is not a folder")
    one_line_error(cli(*SMALL, "--out", "/proc/clustersim-test/out"), contains="cannot create the folder")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_into_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        one_line_error(cli(*SMALL, "--out", ro / "sub"), contains="cannot create the folder")
    finally:
        ro.chmod(0o755)


def test_a_full_disk_loses_only_the_policy_in_flight(tmp_path, monkeypatch, capsys):
    import sim.metrics as metrics
    real = metrics.write_jobs
    calls = []

    def write_jobs(res, path, *a, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(res, path, *a, **kw)

    monkeypatch.setattr(metrics, "write_jobs", write_jobs)
    out = tmp_path / "out"
    assert main(SMALL[:-1] + ["fifo,srtf", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("clustersim: error: No space left on device") and err.count("\n") == 1
    assert json.loads((out / "summary.json").read_text()).keys() == {"fifo"}
    assert (out / "fifo" / "jobs.parquet").stat().st_size > 0
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]      # no temp file left behind


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    from sim.fsio import atomic_path
    target = tmp_path / "summary.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk")
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("kind", ["cluster", "throughputs-json", "calibration"])
def test_binary_input_files(tmp_path, kind):
    name = {"cluster": "c.toml", "throughputs-json": "t.json", "calibration": "calib.toml"}[kind]
    f = tmp_path / name
    f.write_bytes(bytes(range(256)) * 4)
    opt = ["--cluster", f] if kind == "cluster" else ["--throughputs", f]
    one_line_error(cli("run", "--jobs", "2", "--policy", "fifo", *opt), contains="not UTF-8 text")


def test_directories_where_files_are_expected(tmp_path):
    d = tmp_path / "x.parquet"
    d.mkdir()
    one_line_error(cli(*SMALL[:-2], "--workload", d), contains="is a directory")
    one_line_error(cli("run", "--cluster", tmp_path, "--jobs", "2"), contains="is a directory")
    one_line_error(cli("trace", "stats", d), contains="directory")


def test_trace_convert_into_a_missing_folder_and_unknown_time_zone(tmp_path):
    src = job_csv(tmp_path / "jobs.csv", ["0,1,resnet18,60"])
    one_line_error(cli("trace", "convert", src, "-o", tmp_path / "missing" / "x.parquet"),
                   contains="does not exist")
    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus\n2017-10-09 00:00:00,60,1\n")
    one_line_error(cli("trace", "stats", philly, "--tz", "Mars/Olympus"),
                   contains="unknown time zone 'Mars/Olympus'")


def test_raw_philly_table_as_workload_is_replayed(tmp_path, capsys):
    # issue 11: run reads every format the trace readers know (recorded run times replayed)
    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus\n2017-10-09 00:00:00,60,1\n")
    assert main(["run", "--workload", str(philly), "--policy", "fifo", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["fifo"]["avg_jct_s"] == pytest.approx(60.0)


def test_ctrl_c_and_numba_systemerror_become_one_line_exit_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    def numba_noise(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("<greedy_place> returned a result with an exception set")

    for fn in (interrupted, numba_noise):
        monkeypatch.setattr(sys.modules["sim.cli"], "_parser", _parser_calling(fn))
        assert main(["presets"]) == 130
        assert capsys.readouterr().err == "clustersim: error: interrupted\n"


def _parser_calling(fn):
    import argparse

    def parser(argv):
        p = argparse.ArgumentParser()
        p.add_argument("cmd")
        p.set_defaults(func=fn)
        return p
    return parser


def _default_sigint() -> None:
    """In the child before exec: SIGINT at its default, as in a terminal.  A process started in
    the background by a shell without job control (``cmd &``, as CI may run the suite) ignores
    SIGINT, every child inherits that, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_during_a_run_exits_130_without_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "run", "--cluster", "uniform:nodes=64,gpus=8",
                             "--jobs", "200000", "--load", "2000", "--policy", "tiresias,las,srtf,sjf,fifo,tiresias,las",
                             "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "SystemError" not in err
    assert err.strip().splitlines()[-1] == "clustersim: error: interrupted"


def test_closed_output_pipe_exits_quietly(tmp_path):
    src = job_csv(tmp_path / "jobs.csv", ["0,1,resnet18,60"])
    r, w = os.pipe()
    os.close(r)
    try:
        res = subprocess.run([sys.executable, "-m", "sim.cli", "trace", "stats", str(src)], stdout=w,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert res.returncode == 0 and res.stderr == ""


def test_huge_bad_input_is_not_echoed_whole(capsys):
    key = "k" * 400_000
    assert main(["run", "--cluster", f"uniform:nodes=1,gpus=1,{key}=1", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert len(err) < 3000 and "characters left out" in err


# -------------------------------------------------------------------- 4. --skip-invalid
NAN_CASES = {
    "pollux": ("w.csv", "name,time,application,num_replicas,batch_size\n"
                        "a,0,bert,1,64\nb,nan,bert,1,64\nc,5,bert,1,64\n", "time",
               {"iterations": {"bert": 100}}),
    "philly": ("p.csv", "timestamp,duration,num_gpus\n2017-10-09 00:00:00,60,1\n"
                        "2017-10-09 00:01:00,nan,1\n2017-10-09 00:02:00,60,1\n", "duration", {}),
    "gavel": ("g.trace", "ResNet-18 (batch size 64)\tc\td\t-n\tFalse\t100\t1\t1\t-1\t0\n"
                         "ResNet-18 (batch size 64)\tc\td\t-n\tFalse\t100\t1\t1\t-1\tnan\n"
                         "ResNet-18 (batch size 64)\tc\td\t-n\tFalse\tnan\t1\t1\t-1\t3\n", "arrival_time", {}),
}


@pytest.mark.parametrize("fmt", sorted(NAN_CASES))
def test_nan_rows_are_named_once_and_skippable(tmp_path, fmt):
    name, text, field, opts = NAN_CASES[fmt]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError) as exc:
        read_trace(path, fmt, **opts)
    msg = str(exc.value)
    assert (exc.value.row, exc.value.field) == (1, field)
    assert msg.count("file ") == 1 and msg.count("row ") == 1, msg
    load = read_trace(path, fmt, skip_invalid=True, **opts)
    assert load.report.n_skipped == 3 - len(load.jobs) >= 1
    assert set(load.report.skipped) == {"bad_number"}


def test_non_utf8_rows_name_the_line_and_are_skippable(tmp_path):
    p = tmp_path / "w.csv"
    p.write_bytes(b"name,time,application,num_replicas,batch_size\na,0,bert,1,64\nb\xff\xfe,1,bert,1,64\n")
    one_line_error(cli("trace", "stats", p, "--format", "pollux"),
                   contains="row 1: not UTF-8 text: invalid bytes (line 3)")
    with p.open("ab") as f:
        f.write(b"c,2,bert\n")                   # a malformed row too: both counted by reason
    res = cli("trace", "stats", p, "--format", "pollux", "--skip-invalid")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "not_utf8; rows 1" in res.stdout and "malformed_row; rows 2" in res.stdout


FIX = Path(__file__).resolve().parent / "fixtures" / "traces"


def _log_with_bad_bytes(tmp_path: Path) -> Path:
    """The Philly job-log fixture with one byte that is not UTF-8 in job 1 (line 13)."""
    raw = (FIX / "cluster_job_log.json").read_bytes()
    assert raw.count(b'"ip": "m3"') == 1 and raw[: raw.index(b'"ip": "m3"')].count(b"\n") == 12
    p = tmp_path / "log.json"
    p.write_bytes(raw.replace(b'"ip": "m3"', b'"ip": "m3\xff"'))
    return p


def test_non_utf8_json_names_line_and_field_and_is_skippable(tmp_path):
    p = _log_with_bad_bytes(tmp_path)
    with pytest.raises(TraceError) as exc:
        read_trace(p, "philly-log")
    assert (exc.value.file, exc.value.row, exc.value.field) == (str(p), 1, "attempts[0].detail[0].ip")
    assert exc.value.message == "not UTF-8 text: invalid bytes (line 13)"
    whole = read_trace(FIX / "cluster_job_log.json", "philly-log")
    load = read_trace(p, "philly-log", skip_invalid=True)
    assert 1 in whole.jobs.job_id.tolist()
    assert load.jobs.job_id.tolist() == [j for j in whole.jobs.job_id.tolist() if j != 1]
    assert load.report.skipped == {"not_utf8": 1} and load.report.rows == whole.report.rows
    assert load.report.example_rows["skipped:not_utf8"] == [1]


def test_non_utf8_json_through_the_cli(tmp_path):
    p = _log_with_bad_bytes(tmp_path)
    one_line_error(cli("trace", "stats", p, "--format", "philly-log"),
                   contains="row 1, field 'attempts[0].detail[0].ip': not UTF-8 text: invalid bytes (line 13)")
    res = cli("trace", "stats", p, "--format", "philly-log", "--skip-invalid")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "not_utf8; rows 1" in res.stdout


def test_non_utf8_json_lines_counts_lines_across_chunks(tmp_path):
    from sim.traces.common import TraceReport, json_records
    lines = [b'{"jobid": "j%d", "user": "u"}' % k for k in range(60)]
    lines[39] = b'{"jobid": "j39", "us\xc3er": "u"}'            # a truncated 2-byte sequence, in a key
    p = tmp_path / "log.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(TraceError) as exc:
        list(json_records(p, report=TraceReport(str(p), "t"), chunk=64))   # many chunks, trimmed buffer
    assert (exc.value.row, exc.value.field, exc.value.message) == (39, "us\\xc3er",
                                                                    "not UTF-8 text: invalid bytes (line 40)")
    report = TraceReport(str(p), "t")
    kept = [k for k, _ in json_records(p, report=report, skip_invalid=True, chunk=64)]
    assert kept == [k for k in range(60) if k != 39]
    assert report.rows == 60 and report.skipped == {"not_utf8": 1}


def test_non_utf8_job_table_rows_name_line_and_field_and_are_skippable(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_bytes(b"arrival_s,gpus,model,duration_s\n0,1,ResNet-18 (batch size 64),60\n"
                  b"1,1,Res\xffNet,60\n2,1,ResNet-18 (batch size 64),30\n")
    with pytest.raises(TraceError) as exc:
        JobTable.read(p)
    assert (exc.value.file, exc.value.row, exc.value.field) == (str(p), 1, "model")
    assert exc.value.message == "not UTF-8 text: invalid bytes (line 3)"
    kept = JobTable.read(p, skip_invalid=True)
    assert kept.job_id.tolist() == [0, 2] and [e.row for e in kept.skipped] == [1]
    one_line_error(cli("run", "--workload", p, "--policy", "fifo", "--no-progress"),
                   contains="row 1, field 'model': not UTF-8 text: invalid bytes (line 3)")
    res = cli("trace", "stats", p, "--format", "jobs", "--skip-invalid")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "not_utf8; rows 1" in res.stdout


def test_non_utf8_json_outside_a_string_is_an_error_even_when_skipping(tmp_path):
    p = tmp_path / "log.json"
    p.write_bytes(b'[{"jobid": "a"},\n {"jobid": "b"}\xff]\n')
    with pytest.raises(TraceError, match=r"invalid bytes outside a string \(line 2\)"):
        read_trace(p, "philly-log", skip_invalid=True)


# hypothesis: random bytes and random rows to every reader raise only the project's errors
_EXT = {"philly-log": ".json", "gavel": ".trace"}
_COLUMNS = {"philly": "timestamp,duration,num_gpus,gpu_time,cluster",
            "helios": "job_id,vc,gpu_num,cpu_num,state,submit_time,start_time,end_time,duration",
            "pai": "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type",
            "openb": "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                     "deletion_time,scheduled_time",
            "acme": "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,"
                    "duration,queue",
            "pollux": "name,time,application,num_replicas,batch_size",
            "jobs": "job_id,arrival_s,gpus,model,duration_s,iterations,priority,gpus_allowed,budget_iterations",
            "openb-nodes": "sn,cpu_milli,memory_mib,gpu,model",
            "pai-machines": "machine,gpu_type,cap_cpu,cap_mem,cap_gpu",
            "spot-nodes": "gpu_model,gpu_capacity_num,cpu_num,node_name",
            "philly-machines": ",machineId,number of GPUs"}
_CELLS = st.sampled_from(["", "nan", "NaN", "inf", "-inf", "-1", "0", "1", "8", "1e300", "1e-300", "2.5",
                          "x", "None", "2017-10-09 00:00:00", "2023-03-01 00:18:22+08:00", "bert",
                          "V100", "Pass", "Failed", "1|2", "\"", "é", "18446744073709551616"])
_ALL_FORMATS = sorted(JOB_FORMATS) + sorted(NODE_FORMATS)


def _read_any(path: Path, fmt: str, skip: bool):
    if fmt in NODE_FORMATS:
        return read_nodes(path, fmt)
    opts = {"skip_invalid": skip}
    if fmt == "pollux":
        opts["allow_missing_work"] = True
    return read_trace(path, fmt, **opts)


def _only_project_errors(path: Path, fmt: str, skip: bool) -> None:
    try:
        _read_any(path, fmt, skip)
    except SimError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(_ALL_FORMATS), data=st.binary(max_size=300), skip=st.booleans())
def test_random_bytes_raise_only_project_errors(tmp_path, fmt, data, skip):
    path = tmp_path / f"t{_EXT.get(fmt, '.csv')}"
    path.write_bytes(data)
    _only_project_errors(path, fmt, skip)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(_COLUMNS) + ["gavel", "philly-log"]), data=st.data(), skip=st.booleans())
def test_random_rows_raise_only_project_errors(tmp_path, fmt, data, skip):
    if fmt == "gavel":
        rows = data.draw(st.lists(st.lists(_CELLS, min_size=10, max_size=10), max_size=4))
        text = "".join("\t".join(r) + "\n" for r in rows)
    elif fmt == "philly-log":
        jobs = data.draw(st.lists(st.fixed_dictionaries({
            "status": _CELLS, "vc": _CELLS, "jobid": _CELLS, "submitted_time": _CELLS, "user": _CELLS,
            "attempts": st.lists(st.fixed_dictionaries({"start_time": _CELLS, "end_time": _CELLS,
                                                         "detail": st.lists(st.fixed_dictionaries(
                                                             {"ip": _CELLS, "gpus": st.lists(_CELLS, max_size=3)}),
                                                             max_size=2)}), max_size=2)}), max_size=3))
        text = json.dumps(jobs)
    else:
        header = _COLUMNS[fmt]
        width = len(header.split(","))
        rows = data.draw(st.lists(st.lists(_CELLS, min_size=width - 1, max_size=width + 1), max_size=4))
        text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    path = tmp_path / f"t{_EXT.get(fmt, '.csv')}"
    path.write_text(text)
    _only_project_errors(path, fmt, skip)


# -------------------------------------------------------------------- 5. Dask and orphans
def _fake_server(kind: str):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if kind == "banner":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            threading.Timer(10, conn.close).start()

    threading.Thread(target=loop, daemon=True).start()
    return srv


@pytest.mark.parametrize("kind, text", [("http", "sent no Dask handshake within 1 s"),
                                        ("banner", "is not a Dask scheduler")])
def test_dask_address_that_is_not_a_scheduler_fails_fast(kind, text):
    from sim.sweep.runners import check_dask_handshake
    srv = _fake_server(kind)
    try:
        t0 = time.monotonic()
        with pytest.raises(ConfigError, match=text):
            check_dask_handshake(f"tcp://127.0.0.1:{srv.getsockname()[1]}", 1.0)
        assert time.monotonic() - t0 < 5
    finally:
        srv.close()


def test_dask_engine_checks_the_handshake_first(monkeypatch):
    pytest.importorskip("distributed")
    import sim.sweep.runners as runners
    monkeypatch.setattr(runners, "HANDSHAKE_TIMEOUT_S", 1.0)
    srv = _fake_server("http")
    try:
        with pytest.raises(ConfigError, match="no Dask handshake"):
            with runners.DaskEngine(f"tcp://127.0.0.1:{srv.getsockname()[1]}"):
                pass
    finally:
        srv.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_pool_workers_die_with_a_killed_parent(tmp_path):
    script = textwrap.dedent("""
        import os, sys, time
        from sim.sweep.runners import PoolEngine
        with PoolEngine(1) as eng:
            pid = eng._ex.submit(os.getpid).result()
            eng._ex.submit(time.sleep, 60)
            print(pid, flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.1)
    assert not _alive(worker), "the pool worker outlived its killed parent"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


# -------------------------------------------------------------------- 6. entropy bits
_ENTROPY_SCRIPT = textwrap.dedent("""
    import hashlib, numpy as np
    from sim.entropy import normalized_entropy
    rng = np.random.default_rng(0)
    out = []
    for c in (20, 1000):
        x = (rng.standard_normal((2000, c)) * 3).astype(np.float32)
        out.append(hashlib.sha256(normalized_entropy(x, impl="numba", threads=1).tobytes()).hexdigest())
    print(" ".join(out))
""")


def test_entropy_bits_do_not_depend_on_the_numba_cache(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    cold = subprocess.run([sys.executable, "-c", _ENTROPY_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert cold.returncode == 0, cold.stderr
    assert any((tmp_path / "numba-cache").rglob("*.nbi")), "the cold run wrote no cache"
    warm = subprocess.run([sys.executable, "-c", _ENTROPY_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert warm.returncode == 0, warm.stderr
    assert cold.stdout == warm.stdout


# -------------------------------------------------------------------- 7. minor
def test_numbers_are_printed_plainly():
    assert [fmt_num(v) for v in (np.float64("inf"), np.float64(1e300), 3.0, 0.1, np.int64(7))] == \
        ["inf", "1e+300", "3", "0.1", "7"]


def test_trace_stats_of_one_arrival_prints_no_nan_rate(tmp_path, capsys):
    src = job_csv(tmp_path / "jobs.csv", ["0,1,resnet18,60"])
    assert main(["trace", "stats", str(src)]) == 0
    assert "nan" not in capsys.readouterr().out
    assert main(["trace", "stats", str(src), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["arrivals_per_hour"] is None


def test_a_policy_that_never_places_a_job_stops_with_a_stall_error():
    """A round-driven policy that places nothing on an idle cluster would run its rounds to the
    horizon: the engine stops it after STALL_DECISIONS idle decisions, naming the policy."""
    from engine_helpers import LinearOracle, small_cluster, specs
    from sim.engine import STALL_DECISIONS, run_jobs
    from sim.policies.base import Policy
    from sim.state import Plan

    class Never(Policy):
        name, description, round_s = "never", "places nothing", 60.0

        def schedule(self, state):
            return Plan(np.zeros(state.active.size + 1, np.int64), np.zeros(0, np.int32),
                        np.zeros(0, np.int32))

    jobs = specs([0.0, 5.0], [1, 2], [100.0, 100.0])
    with pytest.raises(SimError, match=rf"policy never left 2 jobs queued .* {STALL_DECISIONS:,} decisions"):
        run_jobs(small_cluster(), jobs, Never(), LinearOracle(), EngineConfig(round_s=60.0))
