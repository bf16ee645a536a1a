"""Trace readers on small fixtures in the real published formats (tests/fixtures/traces, made by us).

Each test works out the expected jobs by hand from the fixture rows.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.errors import ConfigError, TraceError
from sim.jobs import JOB_SCHEMA
from sim.traces import TRACE_MODEL, detect_format, read_trace
from sim.traces.acme import read_acme
from sim.traces.gavel import read_gavel
from sim.traces.helios import read_helios
from sim.traces.openb import read_openb_pods
from sim.traces.pai import read_pai
from sim.traces.philly import read_philly_log, read_philly_table
from sim.traces.pollux import read_pollux

FIX = Path(__file__).resolve().parent / "fixtures" / "traces"


def by_id(load):
    """{job_id: (arrival_s, gpus, duration_s)} of a load."""
    j = load.jobs
    return {int(i): (float(a), int(g), float(d)) for i, a, g, d in zip(j.job_id, j.arrival_s, j.gpus, j.duration_s)}


# ------------------------------------------------------------------ Philly
def test_philly_table_dst_aware_arrivals_and_schema():
    load = read_philly_table(FIX / "philly_jobs.csv")
    assert load.jobs.table.schema.equals(JOB_SCHEMA, check_metadata=False)
    got = by_id(load)
    assert got[0] == (0.0, 1, 100.0)
    assert got[2] == (300.0, 2, 60.0)
    assert got[1] == (600.0, 8, 3600.0)
    # 2017-11-05 01:30 PDT (the earlier of the two) -> 03:00 PST is 2.5 h of real time
    assert got[4][0] - got[3][0] == 9000.0
    assert load.report.adjusted["ambiguous_local_time"] == 1
    assert load.jobs.models.tolist() == [TRACE_MODEL] * 5
    assert load.jobs.vcs.tolist()[:3] == ["vcA", "vcA", "vcB"]
    assert load.trace_gpu_type == "p100" and load.calendar
    assert load.origin_label() == "2017-10-09 07:00:00 UTC"


def test_philly_table_naive_utc_choice():
    load = read_philly_table(FIX / "philly_jobs.csv", tz=None)
    got = by_id(load)
    assert got[4][0] - got[3][0] == 5400.0
    assert not load.report.adjusted


def test_philly_table_parquet_equals_csv(tmp_path):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    pq.write_table(pacsv.read_csv(FIX / "philly_jobs.csv"), tmp_path / "p.parquet")
    a, b = read_philly_table(FIX / "philly_jobs.csv"), read_trace(tmp_path / "p.parquet")
    assert a.jobs.table.equals(b.jobs.table)


def test_philly_vc_selection_is_counted():
    load = read_philly_table(FIX / "philly_jobs.csv", vcs=["vcB"])
    assert sorted(by_id(load)) == [1, 4]
    assert load.report.filtered["vc not selected"] == 3


def test_philly_log_defaults_follow_the_atc19_notebook():
    load = read_philly_log(FIX / "cluster_job_log.json")
    got = by_id(load)
    assert set(got) == {0, 1, 2}
    assert got[0] == (0.0, 2, 3600.0)            # first start -> last end; first attempt's GPUs
    assert got[1] == (3660.0, 8, 7200.0)         # GPUs summed over detail entries
    assert got[2] == (18060.0, 1, 30.0)
    f = load.report.filtered
    assert f["no attempts (never scheduled)"] == 1
    assert f["still running (last attempt has no end_time)"] == 1
    assert f["attempt without start/end time (logging error)"] == 1
    assert load.report.rows == 6 and load.report.jobs == 3
    ex = load.extra.to_pydict()
    assert ex["jobid"] == ["application_0001", "application_0002", "application_0003"]
    assert ex["status"] == ["Pass", "Killed", "Failed"]
    assert ex["attempts"] == [2, 1, 1]
    assert ex["queue_s"] == [60.0, 3600.0, 0.0]
    assert load.jobs.users.tolist() == ["u1", "u2", "u1"]


@pytest.mark.parametrize("attempts,gpus_from,dur0,g0", [
    ("sum", "first", 3000.0, 2), ("last", "first", 2400.0, 2), ("span", "max", 3600.0, 4),
    ("span", "last", 3600.0, 4)])
def test_philly_log_attempt_choices(attempts, gpus_from, dur0, g0):
    got = by_id(read_philly_log(FIX / "cluster_job_log.json", attempts=attempts, gpus_from=gpus_from))
    assert got[0][1:] == (g0, dur0)


def test_philly_log_status_filter_and_jsonl(tmp_path):
    import json
    load = read_philly_log(FIX / "cluster_job_log.json", statuses=["pass"])
    assert sorted(by_id(load)) == [0]
    assert load.report.filtered["status killed"] == 1 and load.report.filtered["status failed"] == 1
    jobs = json.loads((FIX / "cluster_job_log.json").read_text())
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(json.dumps(j) for j in jobs) + "\n")
    assert read_trace(p).jobs.table.equals(read_philly_log(FIX / "cluster_job_log.json").jobs.table)


def test_philly_log_missing_times_error_choice():
    with pytest.raises(TraceError) as e:
        read_philly_log(FIX / "cluster_job_log.json", missing_times="error")
    assert e.value.row == 5


# ------------------------------------------------------------------ Helios / Acme
def test_helios_cpu_jobs_zero_durations_and_extras():
    load = read_helios(FIX / "helios_cluster_log.csv")
    got = by_id(load)
    assert got == {0: (0.0, 1, 3600.0), 1: (600.0, 8, 600.0), 3: (1800.0, 16, 7200.0)}
    assert load.report.filtered == {"cpu_job (0 GPUs)": 1, "zero_duration": 1}
    assert load.extra.column("trace_job_id").to_pylist() == ["1001", "1002", "1004"]
    assert load.extra.column("queue_s").to_pylist() == [0.0, 600.0, 600.0]
    assert load.jobs.vcs.tolist() == ["vc1", "vc2", "vc1"]
    assert load.origin_label() == "2020-06-09 10:00:00 UTC"      # Asia/Shanghai = UTC+8
    assert load.trace_gpu_type == "v100"


def test_helios_statuses_and_error_choices():
    load = read_helios(FIX / "helios_cluster_log.csv", statuses=["COMPLETED"])
    assert sorted(by_id(load)) == [0]
    with pytest.raises(TraceError) as e:
        read_helios(FIX / "helios_cluster_log.csv", cpu_jobs="error")
    assert (e.value.row, e.value.field) == (2, "gpu_num") and "line 4" in str(e.value)
    with pytest.raises(TraceError) as e:
        read_helios(FIX / "helios_cluster_log.csv", cpu_jobs="drop", zero_duration="error")
    assert (e.value.row, e.value.field) == (4, "duration")


def test_acme_seren_offsets_and_type():
    load = read_acme(FIX / "acme_trace_seren.csv")
    got = by_id(load)
    assert got == {0: (0.0, 8, 120.0), 1: (300.0, 4, 3600.0), 3: (3600.0, 16, 3600.0)}
    assert load.origin_label() == "2023-03-02 02:00:00 UTC"
    assert load.extra.column("type").to_pylist() == ["Other", "Pretrain", "SFT"]
    assert load.trace_gpu_type == "a100"
    assert read_acme(FIX / "acme_trace_seren.csv", vc_from_type=True).jobs.vcs.tolist() == ["Other", "Pretrain", "SFT"]


def test_acme_kalos_extra_columns_and_empty_fields():
    load = read_acme(FIX / "acme_trace_kalos.csv")
    assert by_id(load) == {0: (0.0, 32, 7200.0), 1: (1800.0, 8, 60.0)}
    assert detect_format(FIX / "acme_trace_kalos.csv") == "acme"


# ------------------------------------------------------------------ PAI
def test_pai_jobs_from_task_and_job_tables():
    load = read_pai(FIX / "pai_task_table.csv", FIX / "pai_job_table.csv")
    got = by_id(load)
    assert got == {0: (0.0, 1, 990.0), 1: (100.0, 1, 3800.0), 2: (200.0, 1, 90.0)}
    ex = load.extra.to_pydict()
    assert ex["gpus_requested"] == [1.0, 1.0, 0.5]
    assert ex["trace_gpu_type"] == ["V100", "T4", "MISC"]
    assert ex["gpu_type"] == ["v100", "t4", "k80"]
    assert ex["status"] == ["Terminated", "Terminated", "Failed"]
    assert ex["queue_s"] == [10.0, 50.0, 0.0]
    r = load.report
    assert r.filtered["cpu_job (0 GPUs)"] == 1
    assert r.filtered["never ran (GPU task without start_time/end_time)"] == 1
    assert r.filtered["no task rows"] == 1
    assert r.adjusted["fractional_gpus_rounded_up"] == 1
    assert load.jobs.users.tolist() == ["userA", "userB", "userA"]


@pytest.mark.parametrize("fractional,expect", [
    ("instance_ceil", {0: 1, 1: 2, 2: 1}), ("drop", {0: 1, 1: 1})])
def test_pai_fractional_choices(fractional, expect):
    load = read_pai(FIX / "pai_task_table.csv", FIX / "pai_job_table.csv", fractional=fractional)
    assert {k: v[1] for k, v in by_id(load).items()} == expect


def test_pai_fractional_error_names_the_job_row():
    with pytest.raises(TraceError) as e:
        read_pai(FIX / "pai_task_table.csv", FIX / "pai_job_table.csv", fractional="error")
    assert e.value.row == 2 and "0.5" in str(e.value)


def test_pai_task_table_alone_and_with_header(tmp_path):
    load = read_pai(FIX / "pai_task_table.csv")
    got = by_id(load)                          # job_id = first task row; arrival = first task start
    assert got == {0: (0.0, 1, 990.0), 1: (90.0, 1, 3800.0), 3: (190.0, 1, 90.0)}
    assert any("no job table" in n for n in load.report.notes)
    from sim.traces.pai import PAI_TASK_COLUMNS
    p = tmp_path / "pai_task_table.csv"
    p.write_text(",".join(PAI_TASK_COLUMNS) + "\n" + (FIX / "pai_task_table.csv").read_text())
    assert read_trace(p).jobs.table.equals(load.jobs.table)


# ------------------------------------------------------------------ openb
def test_openb_pods_fractional_cpu_and_unscheduled():
    load = read_openb_pods(FIX / "openb_pod_list.csv")
    got = by_id(load)
    assert got == {0: (0.0, 1, 10000.0), 1: (100.0, 1, 550.0), 3: (300.0, 8, 2900.0), 5: (500.0, 2, 1000.0)}
    r = load.report
    assert r.filtered == {"cpu_job (0 GPUs)": 1, "never scheduled (no scheduled_time)": 1}
    assert r.adjusted["fractional_gpus_rounded_up"] == 1
    assert r.adjusted["gpu_spec ignored (no GPU-type constraint in the job table)"] == 2
    ex = load.extra.to_pydict()
    assert ex["gpu_share"] == [1.0, 0.46, 8.0, 2.0]
    assert ex["queue_s"] == [0.0, 50.0, 100.0, 0.0]
    assert ex["gpu_spec"][2] == "V100M16|V100M32"


def test_openb_choices():
    assert sorted(by_id(read_openb_pods(FIX / "openb_pod_list.csv", fractional="drop"))) == [0, 3, 5]
    assert sorted(by_id(read_openb_pods(FIX / "openb_pod_list.csv", statuses=["Succeeded"]))) == [1, 5]
    with pytest.raises(TraceError) as e:
        read_openb_pods(FIX / "openb_pod_list.csv", cpu_jobs="error")
    assert (e.value.row, e.value.field) == (2, "num_gpu")


def test_openb_packing_list_needs_a_duration(tmp_path):
    p = tmp_path / "openb_pod_list_multigpu50.csv"
    p.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-a,1000,1024,1,1000\npod-b,1000,1024,4,1000\n")
    with pytest.raises(TraceError, match="packing"):
        read_openb_pods(p)
    load = read_openb_pods(p, packing_duration_s=600)
    assert by_id(load) == {0: (0.0, 1, 600.0), 1: (0.0, 4, 600.0)}


# ------------------------------------------------------------------ Gavel / Pollux
def test_gavel_trace():
    load = read_gavel(FIX / "gavel.trace")
    j = load.jobs
    assert j.job_id.tolist() == [0, 1, 2]
    assert j.arrival_s.tolist() == [0.0, 120.5, 300.0]
    assert j.iterations.tolist() == [5000.0, 2000.0, 1000.0] and np.isnan(j.duration_s).all()
    assert j.gpus.tolist() == [1, 2, 1]
    assert j.models.tolist() == ["ResNet-18 (batch size 32)", "Transformer (batch size 64)", "LM (batch size 20)"]
    assert j.batch_size.tolist() == [32, 64, 20]
    assert j.priority.tolist() == [1.0, 1.0, 5.0]
    assert load.report.adjusted["SLO ignored (no SLO column in the job table)"] == 1


def test_pollux_work_sources():
    prof = read_pollux(FIX / "pollux_workload.csv", profiles=FIX / "pollux_profiles")
    assert prof.jobs.iterations.tolist() == [3000.0, 200000.0]
    assert prof.jobs.arrival_s.tolist() == [10.0, 40.0] and prof.jobs.gpus.tolist() == [2, 1]
    assert prof.jobs.batch_size.tolist() == [2048, 256]
    assert prof.jobs.models.tolist() == ["cifar10", "ncf"]
    mixed = read_pollux(FIX / "pollux_workload.csv", iterations={"cifar10": 10}, durations={"ncf": 60})
    assert mixed.jobs.iterations[0] == 10 and mixed.jobs.duration_s[1] == 60
    assert np.isnan(mixed.jobs.duration_s[0]) and np.isnan(mixed.jobs.iterations[1])
    with pytest.raises(TraceError, match="no run time"):
        read_pollux(FIX / "pollux_workload.csv")
    with pytest.raises(TraceError) as e:
        read_pollux(FIX / "pollux_workload.csv", iterations={"cifar10": 10})
    assert (e.value.row, e.value.field) == (1, "application")
    assert not read_pollux(FIX / "pollux_workload.csv", allow_missing_work=True).work_known


# ------------------------------------------------------------------ dispatch
@pytest.mark.parametrize("name,fmt", [
    ("philly_jobs.csv", "philly"), ("cluster_job_log.json", "philly-log"), ("helios_cluster_log.csv", "helios"),
    ("acme_trace_seren.csv", "acme"), ("openb_pod_list.csv", "openb"), ("gavel.trace", "gavel"),
    ("pollux_workload.csv", "pollux"), ("openb_node_list.csv", "openb-nodes"), ("spot_node_info.csv", "spot-nodes"),
    ("philly_machine_list.csv", "philly-machines")])
def test_detect_format(name, fmt):
    assert detect_format(FIX / name) == fmt


def test_read_trace_rejects_unknown_options_and_formats():
    with pytest.raises(ConfigError, match="unexpected keyword"):
        read_trace(FIX / "philly_jobs.csv", attempts="sum")
    with pytest.raises(ConfigError, match="unknown trace format"):
        read_trace(FIX / "philly_jobs.csv", "nope")
    with pytest.raises(ConfigError, match="node list"):
        read_trace(FIX / "openb_node_list.csv")
    with pytest.raises(ConfigError, match="fractional"):
        read_openb_pods(FIX / "openb_pod_list.csv", fractional="floor")


def test_detect_json_by_content(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text((FIX / "cluster_job_log.json").read_text())
    assert detect_format(p) == "philly-log"
