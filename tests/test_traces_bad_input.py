"""Bad input: a TraceError naming the file, row and field; with skip_invalid, counts by reason.

Broken files are made from the fixtures in tests/fixtures/traces.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from sim.errors import TraceError
from sim.traces import read_nodes, read_trace
from sim.traces.helios import read_helios
from sim.traces.pai import read_pai
from sim.traces.philly import read_philly_log, read_philly_table

FIX = Path(__file__).resolve().parent / "fixtures" / "traces"


def _write(tmp_path, name, text) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _lines(name):
    return (FIX / name).read_text().splitlines(keepends=True)


def test_truncated_csv_names_the_last_row(tmp_path):
    text = (FIX / "helios_cluster_log.csv").read_text()
    p = _write(tmp_path, "cluster_log.csv", text[: text.rindex(",2020-06-09 18:45:00,")])
    with pytest.raises(TraceError) as e:
        read_helios(p)
    assert e.value.file == str(p) and e.value.row == 4
    assert "truncated" in str(e.value) and "line 6" in str(e.value)
    load = read_helios(p, skip_invalid=True)
    assert load.report.skipped["malformed_row"] == 1
    assert load.report.rows == 5
    assert sorted(load.jobs.job_id.tolist()) == [0, 1, 3]


def test_malformed_row_in_the_middle_keeps_row_numbers(tmp_path):
    lines = _lines("philly_jobs.csv")
    lines[2] = "2017-10-09 00:10:00,3600.0\n"           # data row 1 lost fields
    p = _write(tmp_path, "philly.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert e.value.row == 1 and "expected 5 fields, got 2" in str(e.value)
    load = read_philly_table(p, skip_invalid=True)
    assert sorted(load.jobs.job_id.tolist()) == [0, 2, 3, 4]       # later rows keep their numbers
    assert load.report.example_rows["skipped:malformed_row"] == [1]


def test_wrong_delimiter_is_explained(tmp_path):
    p = _write(tmp_path, "philly.csv", (FIX / "philly_jobs.csv").read_text().replace(",", ";"))
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert "wrong delimiter" in str(e.value) and "';'" in str(e.value)
    assert e.value.field == "timestamp"
    p = _write(tmp_path, "g.trace", (FIX / "gavel.trace").read_text().replace("\t", ","))
    with pytest.raises(TraceError, match="wrong delimiter"):
        read_trace(p, "gavel")


def test_unparseable_timestamp(tmp_path):
    lines = _lines("philly_jobs.csv")
    lines[3] = lines[3].replace("2017-10-09 00:05:00", "2017-13-45 99:00:00")
    p = _write(tmp_path, "philly.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert (e.value.file, e.value.row, e.value.field) == (str(p), 2, "timestamp")
    assert "2017-13-45 99:00:00" in str(e.value)
    load = read_philly_table(p, skip_invalid=True)
    assert load.report.skipped == {"unparseable_time": 1} and len(load.jobs) == 4


def test_negative_duration_and_zero_gpus(tmp_path):
    lines = _lines("philly_jobs.csv")
    lines[1] = "2017-10-09 00:00:00,-100.0,1,-100.0,vcA\n"
    lines[4] = "2017-11-05 01:30:00,10.0,0,0.0,vcA\n"
    p = _write(tmp_path, "philly.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert (e.value.row, e.value.field) == (0, "duration") and "negative" in str(e.value)
    load = read_philly_table(p, skip_invalid=True)
    assert load.report.skipped == {"negative_duration": 1, "zero_gpus": 1}
    assert load.report.n_skipped == 2 and len(load.jobs) == 3
    text = "\n".join(load.report.lines())
    assert "negative_duration" in text and "zero_gpus" in text and "rows 3" in text


def test_bad_numbers_and_missing_values(tmp_path):
    lines = _lines("helios_cluster_log.csv")
    lines[1] = lines[1].replace(",1,4,1,COMPLETED", ",one,4,1,COMPLETED")
    lines[2] = lines[2].replace("2020-06-09 18:10:00,", ",", 1)
    p = _write(tmp_path, "cluster_log.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_helios(p)
    assert (e.value.row, e.value.field) == (0, "gpu_num") and "'one' is not a GPU count" in str(e.value)
    load = read_helios(p, skip_invalid=True)
    assert load.report.skipped == {"bad_number": 1, "missing_value": 1}


def test_missing_columns_and_empty_file(tmp_path):
    p = _write(tmp_path, "x.csv", "timestamp,num_gpus\n2017-10-09 00:00:00,1\n")
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert e.value.field == "duration" and "missing column" in str(e.value)
    with pytest.raises(TraceError, match="empty file"):
        read_philly_table(_write(tmp_path, "e.csv", ""))
    with pytest.raises(TraceError, match="not found"):
        read_philly_table(tmp_path / "nope.csv")


def test_truncated_json_log(tmp_path):
    text = (FIX / "cluster_job_log.json").read_text()
    cut = text.index('"application_0003"')
    p = _write(tmp_path, "cluster_job_log.json", text[:cut])
    with pytest.raises(TraceError) as e:
        read_philly_log(p)
    assert e.value.row == 2 and "truncated" in str(e.value)
    p = _write(tmp_path, "cluster_job_log2.json", text.rstrip().rstrip("]"))
    with pytest.raises(TraceError) as e:
        read_philly_log(p)
    assert "not closed" in str(e.value) and e.value.row == 6


def test_invalid_json_element(tmp_path):
    text = (FIX / "cluster_job_log.json").read_text()
    p = _write(tmp_path, "log.json", text.replace('"status": "Killed",', '"status" "Killed",'))
    with pytest.raises(TraceError) as e:
        read_philly_log(p)
    assert e.value.row == 1 and "invalid JSON" in str(e.value)


def test_philly_log_bad_attempt_time_and_shape(tmp_path):
    text = (FIX / "cluster_job_log.json").read_text()
    p = _write(tmp_path, "log.json", text.replace('"2017-10-07 05:00:00"', '"yesterday"'))
    with pytest.raises(TraceError) as e:
        read_philly_log(p)
    assert e.value.row == 1 and "yesterday" in str(e.value)
    load = read_philly_log(p, skip_invalid=True)
    assert load.report.skipped == {"unparseable_time": 1} and 1 not in load.jobs.job_id.tolist()
    p = _write(tmp_path, "log2.json", text.replace('"attempts": []', '"attempts": 3'))
    with pytest.raises(TraceError) as e:
        read_philly_log(p)
    assert (e.value.row, e.value.field) == (3, "attempts")


def test_truncated_parquet(tmp_path):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    p = tmp_path / "philly.parquet"
    pq.write_table(pacsv.read_csv(FIX / "philly_jobs.csv"), p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError) as e:
        read_philly_table(p)
    assert e.value.file == str(p) and "Parquet" in str(e.value)


def test_pai_invalid_task_row_invalidates_its_job(tmp_path):
    lines = _lines("pai_task_table.csv")
    lines[2] = lines[2].replace(",2.0,", ",two,")              # j2's worker
    p = _write(tmp_path, "pai_task_table.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_pai(p, FIX / "pai_job_table.csv")
    assert (e.value.file, e.value.row, e.value.field) == (str(p), 2, "inst_num")
    load = read_pai(p, FIX / "pai_job_table.csv", skip_invalid=True)
    assert load.report.skipped["task row: bad_number"] == 1
    assert load.report.skipped["invalid task row"] == 1
    assert sorted(load.jobs.job_id.tolist()) == [0, 2]


def test_pai_non_finite_task_rows_are_skipped_without_warnings(tmp_path):
    lines = _lines("pai_task_table.csv")
    lines[0] = lines[0].replace(",100.0,V100", ",-inf,V100")    # j1: plan_gpu -inf
    lines[4] = lines[4].replace(",1.0,Terminated", ",inf,Terminated")   # j4: inf x 0 GPUs
    p = _write(tmp_path, "pai_task_table.csv", "".join(lines))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # no RuntimeWarning from NaN/inf arithmetic
        load = read_pai(p, FIX / "pai_job_table.csv", skip_invalid=True)
    assert load.report.skipped == {"task row: bad_number": 2, "invalid task row": 2}
    assert load.report.example_rows["skipped:invalid task row"] == [0, 3]      # j1 and j4
    assert sorted(load.jobs.job_id.tolist()) == [1, 2]


def test_pai_duplicate_job_and_task_ending_before_start(tmp_path):
    p = _write(tmp_path, "pai_job_table.csv", (FIX / "pai_job_table.csv").read_text() + "j1,i9,userZ,Terminated,1.0,2.0\n")
    with pytest.raises(TraceError) as e:
        read_pai(FIX / "pai_task_table.csv", p)
    assert e.value.row == 6 and e.value.field == "job_name"
    lines = _lines("pai_task_table.csv")
    lines[0] = lines[0].replace("1010.0,2000.0", "2000.0,1010.0")
    p = _write(tmp_path, "pai_task_table.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_pai(p, FIX / "pai_job_table.csv")
    assert (e.value.row, e.value.field) == (0, "end_time")


def test_node_list_errors(tmp_path):
    lines = _lines("openb_node_list.csv")
    lines[2] = lines[2].replace(",2,P100", ",2,")
    p = _write(tmp_path, "openb_node_list.csv", "".join(lines))
    with pytest.raises(TraceError) as e:
        read_nodes(p)
    assert (e.value.row, e.value.field) == (1, "model")
    c = read_nodes(p, skip_invalid=True)
    assert c.report.skipped == {"missing_value": 1} and c.cluster.n_nodes == 4
