"""Canonical job table: schema, defaults, validation errors, Parquet/CSV round trips."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cluster import uniform_cluster
from sim.errors import ConfigError, TraceError
from sim.jobs import JOB_SCHEMA, JobTable
from sim.throughput import TableThroughput


def _table(**over):
    cols = {
        "arrival_s": [0.0, 10.0, 5.0],
        "gpus": [1, 4, 2],
        "model": ["a", "b", "a"],
        "duration_s": [100.0, None, 50.0],
        "iterations": [None, 1000.0, None],
    }
    cols.update(over)
    return pa.table(cols)


def test_defaults_sorting_and_accessors():
    j = JobTable.from_table(_table())
    assert j.table.schema.equals(JOB_SCHEMA, check_metadata=False)
    assert len(j) == 3
    assert j.arrival_s.tolist() == [0.0, 5.0, 10.0]
    assert j.job_id.tolist() == [0, 2, 1]
    assert j.gpus.tolist() == [1, 2, 4] and j.gpus.dtype == np.int32
    assert j.gpus_min.tolist() == [1, 2, 4] and j.gpus_max.tolist() == [1, 2, 4]
    assert np.isnan(j.iterations[0]) and j.iterations[2] == 1000.0
    assert j.duration_s[1] == 50.0 and np.isnan(j.duration_s[2])
    assert j.priority.tolist() == [1.0] * 3 and j.batch_size.tolist() == [0] * 3
    assert j.models.tolist() == ["a", "a", "b"]
    assert j.model_codes(["b", "a"]).tolist() == [1, 1, 0]


def test_ties_break_by_job_id():
    j = JobTable.from_table(_table(arrival_s=[1.0, 1.0, 1.0], job_id=[7, 3, 5]))
    assert j.job_id.tolist() == [3, 5, 7]


def test_model_codes_unknown_names_row():
    j = JobTable.from_table(_table())
    with pytest.raises(ConfigError, match=r"row 2 \(job_id 1\).*'b'"):
        j.model_codes(["a"])


def test_elastic_and_allowed_sets():
    j = JobTable.from_table(_table(gpus=[2, 4, 2], gpus_allowed=[[1, 2, 4], None, [2]]))
    assert j.gpus_min.tolist() == [1, 2, 4] and j.gpus_max.tolist() == [4, 2, 4]
    assert j.gpus_allowed() == [(1, 2, 4), (2,), None]
    j = JobTable.from_table(_table(gpus_min=[1, 1, 1], gpus_max=[8, 8, 8]))
    assert j.gpus_max.tolist() == [8, 8, 8]


@pytest.mark.parametrize("over,row,field", [
    ({"arrival_s": [0.0, -1.0, 1.0]}, 1, "arrival_s"),
    ({"arrival_s": [0.0, 1.0, float("nan")]}, 2, "arrival_s"),
    ({"gpus": [1, 0, 1]}, 1, "gpus"),
    ({"gpus_min": [1, 1, 3]}, 2, "gpus_min"),
    ({"gpus_max": [1, 2, 1]}, 1, "gpus_max"),
    ({"duration_s": [100.0, 5.0, 50.0]}, 1, "duration_s"),              # both given
    ({"iterations": [None, None, None]}, 1, "iterations"),              # neither given
    ({"duration_s": [100.0, None, -5.0]}, 2, "duration_s"),
    ({"duration_s": [float("nan"), None, 5.0]}, 0, "duration_s"),
    ({"iterations": [None, 0.0, None]}, 1, "iterations"),
    ({"priority": [1.0, float("inf"), 1.0]}, 1, "priority"),
    ({"job_id": [1, 2, 1]}, 2, "job_id"),
    ({"gpus_allowed": [None, [1, 2], None]}, 1, "gpus_allowed"),       # gpus=4 not allowed
    ({"model": ["a", "", "a"]}, 1, "model"),
    ({"gpus": [1, 2**40, 1]}, 1, "gpus"),                                # int32 overflow
])
def test_validation_errors_name_row_and_field(over, row, field):
    with pytest.raises(TraceError) as ei:
        JobTable.from_table(_table(**over), source="trace.parquet")
    e = ei.value
    assert (e.file, e.row, e.field) == ("trace.parquet", row, field), str(e)
    assert "trace.parquet" in str(e) and f"row {row}" in str(e) and field in str(e)


def test_missing_and_unknown_columns():
    with pytest.raises(TraceError, match="'gpus'"):
        JobTable.from_table(pa.table({"arrival_s": [0.0], "model": ["a"], "duration_s": [1.0]}))
    with pytest.raises(TraceError, match="iterations"):
        JobTable.from_table(pa.table({"arrival_s": [0.0], "gpus": [1], "model": ["a"]}))
    with pytest.raises(TraceError, match="colour"):
        JobTable.from_table(_table(colour=["r", "g", "b"]))


def test_skip_invalid_and_require_sorted():
    j = JobTable.from_table(_table(gpus=[1, 0, -2]), skip_invalid=True)
    assert len(j) == 1 and [e.row for e in j.skipped] == [1, 2]
    assert all(e.field == "gpus" for e in j.skipped)
    with pytest.raises(TraceError, match="not sorted") as ei:
        JobTable.from_table(_table(), require_sorted=True)
    assert ei.value.row == 2


def test_validate_against_cluster_and_models():
    j = JobTable.from_table(_table(gpus=[1, 16, 2]))
    c = uniform_cluster(2, 4)
    with pytest.raises(TraceError) as ei:
        j.validate_against(c)
    assert ei.value.row == 2 and ei.value.field == "gpus"
    k = j.validate_against(c, ["a"], skip_invalid=True)
    assert len(k) == 2 and len(k.skipped) == 1
    with pytest.raises(TraceError, match="unknown model 'b'"):
        j.validate_against(None, ["a"])


@pytest.mark.parametrize("ext", [".parquet", ".csv"])
def test_round_trip(tmp_path, ext):
    j = JobTable.from_table(_table(gpus=[2, 4, 2], gpus_allowed=[[1, 2], None, [2, 4]],
                                   user=["x", "y", ""], vc=["v1", "v2", "v1"], priority=[1.0, 5.0, 1.0],
                                   batch_size=[32, 64, 0]))
    p = tmp_path / f"jobs{ext}"
    j.write(p)
    k = JobTable.read(p)
    assert k.table.equals(j.table)
    assert k.source == str(p)


def test_csv_errors_name_file(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("arrival_s,gpus,model,duration_s,gpus_allowed\n0,1,a,10,\n1,2,a,-3,1|2\n")
    with pytest.raises(TraceError) as ei:
        JobTable.read(p)
    assert (ei.value.file, ei.value.row, ei.value.field) == (str(p), 1, "duration_s")
    p.write_text("arrival_s,gpus,model,duration_s,gpus_allowed\n0,1,a,10,1|x\n")
    with pytest.raises(TraceError, match="gpus_allowed"):
        JobTable.read(p)
    with pytest.raises(TraceError, match="not found"):
        JobTable.read(tmp_path / "none.csv")
    q = tmp_path / "jobs.txt"
    q.write_text("x")
    with pytest.raises(TraceError, match="format"):
        JobTable.read(q)


def test_work_iterations():
    o = TableThroughput.builtin()
    m = "ResNet-50 (batch size 64)"
    j = JobTable.from_table(_table(model=[m, m, m], gpus=[1, 1, 2]))
    it = j.work_iterations(o)
    i = o.model_index(m)
    assert it[0] == pytest.approx(100.0 * o.reference_rate([i], [1])[0])
    assert it[1] == pytest.approx(50.0 * o.reference_rate([i], [2])[0])
    assert it[2] == 1000.0


def test_first_bad_row_is_reported():
    # row 2 fails an early check (arrival), row 0 a later one (work): row 0 is reported
    with pytest.raises(TraceError) as ei:
        JobTable.from_table(_table(arrival_s=[0.0, 1.0, -1.0], duration_s=[-1.0, None, 50.0]))
    assert (ei.value.row, ei.value.field) == (0, "duration_s")
    with pytest.raises(TraceError, match="null inside"):
        JobTable.from_table(_table(gpus_allowed=[[1], [4, None], None]))


# --------------------------------------------------------------------- user budgets
def test_budget_column_is_optional_and_null_by_default():
    j = JobTable.from_table(_table())
    assert j.table.column("budget_iterations").null_count == 3
    assert np.isnan(j.budget_iterations).all()
    k = JobTable.from_table(_table(budget_iterations=[150.0, None, 80.0]))
    # sorted by arrival like every column: rows (0, 2, 1) of the input
    np.testing.assert_array_equal(k.budget_iterations, [150.0, 80.0, np.nan])


@pytest.mark.parametrize("ext", [".parquet", ".csv"])
def test_budget_round_trip(tmp_path, ext):
    j = JobTable.from_table(_table(budget_iterations=[150.5, None, 1e-3], gpus_allowed=[[1], None, [2]]))
    p = tmp_path / f"jobs{ext}"
    j.write(p)
    k = JobTable.read(p)
    assert k.table.equals(j.table)
    np.testing.assert_array_equal(k.budget_iterations, [150.5, 1e-3, np.nan])


@pytest.mark.parametrize("bad", [0.0, -5.0, float("nan"), float("inf")])
def test_bad_budget_names_row_and_field(bad):
    with pytest.raises(TraceError) as ei:
        JobTable.from_table(_table(budget_iterations=[10.0, 20.0, bad]), source="t.parquet")
    assert (ei.value.file, ei.value.row, ei.value.field) == ("t.parquet", 2, "budget_iterations")
    assert "budget_iterations" in str(ei.value) and "row 2" in str(ei.value)


def test_bad_budget_in_a_csv_names_file_row_and_field(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("arrival_s,gpus,model,iterations,budget_iterations\n0,1,a,10,12\n1,1,a,10,\n2,1,a,10,-1\n")
    with pytest.raises(TraceError) as ei:
        JobTable.read(p)
    assert (ei.value.file, ei.value.row, ei.value.field) == (str(p), 2, "budget_iterations")
    p.write_text("arrival_s,gpus,model,iterations,budget_iterations\n0,1,a,10,lots\n")
    with pytest.raises(TraceError) as ei:
        JobTable.read(p)
    assert ei.value.file == str(p) and "lots" in str(ei.value)
    # skip_invalid drops the bad row and says why, like any other field
    p.write_text("arrival_s,gpus,model,iterations,budget_iterations\n0,1,a,10,12\n2,1,a,10,0\n")
    k = JobTable.read(p, skip_invalid=True)
    assert len(k) == 1 and [(e.row, e.field) for e in k.skipped] == [(1, "budget_iterations")]


def test_budget_below_the_work_is_allowed():
    # the user's ask, not the truth: a budget under the work to the target is kept as given
    j = JobTable.from_table(_table(budget_iterations=[1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(j.budget_iterations, [1.0, 3.0, 2.0])


def test_files_without_the_budget_column_still_read(tmp_path):
    pq_path = tmp_path / "old.parquet"
    pq.write_table(JobTable.from_table(_table()).table.drop(["budget_iterations"]), pq_path)
    assert "budget_iterations" not in pq.read_schema(pq_path).names
    csv_path = tmp_path / "old.csv"
    csv_path.write_text("arrival_s,gpus,model,duration_s\n0,1,a,10\n5,2,b,20\n")
    for p in (pq_path, csv_path):
        k = JobTable.read(p)
        assert k.table.schema.equals(JOB_SCHEMA, check_metadata=False)
        assert k.table.column("budget_iterations").null_count == len(k) > 0


def test_with_budgets_sets_the_column_in_table_order():
    j = JobTable.from_table(_table(), source="src")
    k = j.with_budgets([7.0, np.nan, 9.0])
    np.testing.assert_array_equal(k.budget_iterations, [7.0, np.nan, 9.0])
    assert k.job_id.tolist() == j.job_id.tolist() and k.source == "src"
    with pytest.raises(ConfigError, match="one budget per job"):
        j.with_budgets([1.0, 2.0])
    with pytest.raises(TraceError) as ei:
        j.with_budgets([1.0, -2.0, 3.0])
    assert (ei.value.row, ei.value.field) == (1, "budget_iterations")


_budgets = st.lists(st.one_of(st.none(), st.floats(min_value=1e-300, max_value=1e300, allow_nan=False,
                                                   allow_infinity=False).filter(lambda x: x > 0)),
                    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budgets=_budgets)
def test_budget_round_trip_property(tmp_path, budgets):
    n = len(budgets)
    j = JobTable.from_table(pa.table({"arrival_s": [float(i) for i in range(n)], "gpus": [1] * n,
                                      "model": ["a"] * n, "iterations": [10.0] * n,
                                      "budget_iterations": pa.array(budgets, pa.float64())}))
    for ext in (".parquet", ".csv"):
        p = tmp_path / f"jobs{ext}"
        j.write(p)
        assert JobTable.read(p).table.column("budget_iterations").to_pylist() == budgets
