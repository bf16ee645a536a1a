"""Measurement and learning-curve schemas: validation, Parquet/CSV IO, error messages."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.calibration.schema import (LEARNING_CURVE_SCHEMA, MEASUREMENT_SCHEMA, CalibrationWarning,
                                    learning_curves_from_rows, measurements_from_rows, parse_placement,
                                    read_learning_curves, read_measurements, read_trace_info,
                                    validate_measurements, write_learning_curves, write_measurements)
from sim.errors import ConfigError, TraceError


def row(**kw):
    base = dict(model="bert", gpu_type="v100", n_gpus=4, n_nodes=2, placement=[2, 2], local_bsz=16,
                step_time_s=0.5, sync_time_s=0.1)
    base.update(kw)
    return base


def test_rows_become_the_schema_with_canonical_gpu_types():
    t = measurements_from_rows([row(gpu_type="RTX 2080-Ti", forward_s=0.1, repeats=5)])
    assert t.schema.equals(MEASUREMENT_SCHEMA, check_metadata=False)
    r = t.to_pylist()[0]
    assert r["gpu_type"] == "rtx2080ti" and r["placement"] == [2, 2] and r["data_time_s"] is None


def test_parquet_round_trip_keeps_trace_info(tmp_path):
    t = measurements_from_rows([row(), row(n_gpus=1, n_nodes=1, placement=[1], sync_time_s=0.0)])
    p = write_measurements(t, tmp_path / "m.parquet", trace_info={"gpu": "H200", "torch": "2.13"})
    back = read_measurements(p)
    assert back.equals(t)
    assert read_trace_info(p) == {"gpu": "H200", "torch": "2.13"}
    assert pq.read_schema(p).metadata[b"clustersim.schema"] == b"measurements"


def test_csv_placements_are_bar_separated(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("model,gpu_type,n_gpus,n_nodes,placement,local_bsz,step_time_s\n"
                 "bert,t4,4,2,2|2,8,0.3\nbert,t4,2,1,,8,0.2\n")
    t = read_measurements(p)
    assert t.column("placement").to_pylist() == [[2, 2], None]


@pytest.mark.parametrize("bad,field,words", [
    (dict(step_time_s=0.0), "step_time_s", "not a finite time > 0"),
    (dict(step_time_s=-1.0), "step_time_s", "not a finite time > 0"),
    (dict(sync_time_s=-0.1), "sync_time_s", ">= 0"),
    (dict(sync_time_s=0.9), "sync_time_s", "exceeds step_time_s"),
    (dict(forward_s=float("inf")), "forward_s", "finite"),
    (dict(n_nodes=5), "n_nodes", "1..n_gpus"),
    (dict(local_bsz=0), "local_bsz", ">= 1"),
    (dict(placement=[1, 2]), "placement", "does not give"),
])
def test_bad_values_name_row_field_model_and_gpu_type(bad, field, words):
    with pytest.raises(TraceError) as e:
        measurements_from_rows([row(), row(**bad)], source="trace.parquet")
    msg = str(e.value)
    assert e.value.row == 1 and e.value.field == field and e.value.file == "trace.parquet"
    assert "model 'bert'" in msg and "GPU type 'v100'" in msg and words in msg


def test_missing_required_columns_are_listed():
    t = pa.table({"model": ["bert"], "gpu_type": ["t4"], "step_time_s": [0.1]})
    with pytest.raises(TraceError) as e:
        validate_measurements(t, "x.parquet")
    assert "n_gpus, n_nodes, local_bsz" in str(e.value) and e.value.file == "x.parquet"


def test_null_in_required_column_is_an_error():
    with pytest.raises(TraceError, match="required value is null"):
        measurements_from_rows([row(local_bsz=None)])


def test_unknown_columns_are_dropped_with_a_warning():
    t = measurements_from_rows([row()])
    with pytest.warns(CalibrationWarning, match="ignoring unknown measurement column"):
        out = validate_measurements(t.append_column("colour", pa.array(["red"])))
    assert out.column_names == MEASUREMENT_SCHEMA.names


def test_parse_placement_forms():
    assert parse_placement("2|2") == [2, 2] and parse_placement("[4, 4]") == [4, 4]
    assert parse_placement("") is None and parse_placement(None) is None
    with pytest.raises(ConfigError):
        parse_placement("2x2")


def test_learning_curves_round_trip_and_entropy_range(tmp_path):
    rows = [dict(model="mlp", batch_size=64, epoch=e, samples_seen=64.0 * 10 * (e + 1), metric=0.5 + 0.1 * e,
                 metric_name="accuracy", mean_entropy=0.9 - 0.1 * e) for e in range(3)]
    t = learning_curves_from_rows(rows)
    assert t.schema.equals(LEARNING_CURVE_SCHEMA, check_metadata=False)
    p = write_learning_curves(t, tmp_path / "lc.parquet")
    assert read_learning_curves(p).equals(t)
    with pytest.raises(TraceError, match="mean_entropy"):
        learning_curves_from_rows([dict(rows[0], mean_entropy=1.5)])
    with pytest.raises(TraceError, match="samples_seen"):
        learning_curves_from_rows([dict(rows[0], samples_seen=-1.0)])
