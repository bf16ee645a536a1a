"""Importers: Gavel JSON, Pollux and Sia profile CSVs, Sia seeds, Pollux learning curves.

Every fixture is written by the test in the upstream formats (data/README.md)."""
from __future__ import annotations

import json
import warnings

import pytest

from sim.calibration.importers import (import_gavel, import_path, import_pollux_learning_curves,
                                       import_pollux_profile, import_sia_profile, import_sia_seed)
from sim.calibration.schema import CalibrationWarning
from sim.errors import ConfigError, TraceError


def write(p, text):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


@pytest.fixture()
def pollux_dir(tmp_path):
    d = tmp_path / "pollux" / "bert"
    write(d / "placements.csv", "placement,local_bsz,step_time,sync_time\n"
                                "1,4,0.45,0.013\n1,8,0.70,0.013\n22,4,0.90,0.40\n1111,8,1.20,0.55\n")
    write(d / "scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
                                 "6,6,4,1.49,1.09\n2,4,4,0.90,0.40\n")           # 2nd row repeats '22'
    write(d / "validation-12.csv", "progress,iteration,metric,grad_sqr,grad_var\n10.0,10,80.0,1.0,2.0\n"
                                   "20.0,20,85.0,1.0,2.0\n")
    write(d / "validation-48.csv", "progress,iteration,metric,grad_sqr,grad_var\n10.0,3,79.0,1.0,2.0\n")
    return d


def test_pollux_profile_rows(pollux_dir):
    t = import_pollux_profile(pollux_dir)
    rows = t.to_pylist()
    assert len(rows) == 5                                    # the duplicate scalability row is dropped
    assert {r["gpu_type"] for r in rows} == {"t4"} and {r["model"] for r in rows} == {"bert"}
    r22 = rows[2]
    assert (r22["placement"], r22["n_nodes"], r22["n_gpus"], r22["local_bsz"]) == ([2, 2], 2, 4, 4)
    assert r22["step_time_s"] == 0.90 and r22["sync_time_s"] == 0.40
    assert rows[3]["placement"] == [1, 1, 1, 1] and rows[3]["n_nodes"] == 4
    scal = rows[4]
    assert scal["placement"] is None and (scal["n_nodes"], scal["n_gpus"]) == (6, 6)


def test_sia_profile_maps_cluster_to_gpu_type_and_reads_any_column_order(tmp_path):
    d = tmp_path / "sia" / "imagenet"
    write(d / "placements-azure.csv", "local_bsz,step_time,sync_time,placement\n20,0.157,0.001,1\n20,0.35,0.1,8\n")
    write(d / "scalability-azure.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas\n20,0.3,0.1,3,4\n")
    write(d / "placements-dgx-ext.csv", "local_bsz,placement,step_time,sync_time\n20,1,0.08,0.001\n")
    t = import_sia_profile(d, "azure")
    assert set(t.column("gpu_type").to_pylist()) == {"v100"} and t.num_rows == 3
    assert t.column("source")[0].as_py().startswith("sia:azure")
    both = import_path(d)
    assert sorted(set(both.column("gpu_type").to_pylist())) == ["a100", "v100"]
    with pytest.raises(ConfigError, match="unknown Sia cluster"):
        import_sia_profile(d, "mars")


def test_pipeline_parallel_profile_is_refused_and_skipped_in_folders(tmp_path):
    d = tmp_path / "sia" / "gpt_pmp"
    write(d / "placements-rtx.csv", "local_bsz,step_time,sync_time,placement\n1,0.099,0.3275,8\n")
    with pytest.raises(ConfigError, match="pipeline/model parallel"):
        import_sia_profile(d, "rtx")
    write(tmp_path / "sia" / "ncf" / "placements-rtx.csv", "local_bsz,step_time,sync_time,placement\n32,0.01,0.001,1\n")
    with pytest.warns(CalibrationWarning, match="skipping pipeline"):
        t = import_path(tmp_path / "sia")
    assert t.column("model").to_pylist() == ["ncf"]


def test_missing_profile_column_names_file_and_field(tmp_path):
    d = tmp_path / "bert"
    write(d / "placements.csv", "placement,local_bsz,step_time\n1,4,0.45\n")
    with pytest.raises(TraceError) as e:
        import_pollux_profile(d)
    assert e.value.field == "sync_time" and e.value.file.endswith("placements.csv")


def test_non_positive_profile_time_names_model_and_gpu_type(tmp_path):
    d = tmp_path / "bert"
    write(d / "placements.csv", "placement,local_bsz,step_time,sync_time\n1,4,0.45,0.01\n2,4,0.0,0.0\n")
    with pytest.raises(TraceError) as e:
        import_pollux_profile(d)
    assert e.value.row == 1 and "model 'bert', GPU type 't4'" in str(e.value)


def test_sia_seed(tmp_path):
    p = write(tmp_path / "bert.csv", "gpu_type,local_bsz,placement,step_time,sync_time\n"
                                     "dgx,48,1,0.34,0.003\nrtx,12,1,0.44,0.006\nquad,24,1,0.64,0.006\n")
    t = import_path(p)
    assert t.column("gpu_type").to_pylist() == ["a100", "rtx2080ti", "quadrortx6000"]
    assert import_sia_seed(p).equals(t)


GAVEL = {
    "v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 10.0, "('A3C', 1)": [5.0, 3.0]},
             "('ResNet-50 (batch size 64)', 4)": {"null": 32.0},
             "('A3C', 1)": {"null": 7.0}},
    "k80": {"('ResNet-50 (batch size 64)', 1)": {"null": 2.0},
            "('ResNet-50 (batch size 64)', 4)": {"null": 0.0}},
    "v100_unconsolidated": {"('ResNet-50 (batch size 64)', 1)": {"null": 10.0},
                            "('ResNet-50 (batch size 64)', 4)": {"null": 20.0}},
}


def test_gavel_json(tmp_path):
    p = write(tmp_path / "thr.json", json.dumps(GAVEL))
    with pytest.warns(CalibrationWarning, match="skipped 1 Gavel entries with throughput 0"):
        t = import_gavel(p)
    rows = {(r["model"], r["gpu_type"], r["n_gpus"], r["n_nodes"]): r for r in t.to_pylist()}
    assert len(rows) == 5                        # k80 x4 (rate 0) and unconsolidated k=1 skipped
    r = rows[("ResNet-50 (batch size 64)", "v100", 4, 1)]
    assert r["step_time_s"] == pytest.approx(4 / 32.0) and r["local_bsz"] == 64 and r["placement"] == [4]
    spread = rows[("ResNet-50 (batch size 64)", "v100", 4, 4)]
    assert spread["placement"] == [1, 1, 1, 1] and spread["step_time_s"] == pytest.approx(4 / 20.0)
    assert rows[("A3C", "v100", 1, 1)]["local_bsz"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        fam = import_gavel(p, by_family=True)
    assert "ResNet-50" in fam.column("model").to_pylist()


def test_gavel_bad_key_and_value(tmp_path):
    with pytest.raises(TraceError, match="job type key"):
        import_gavel(write(tmp_path / "a.json", json.dumps({"v100": {"ResNet": {"null": 1.0}}})))
    with pytest.raises(TraceError, match="not a finite number"):
        import_gavel(write(tmp_path / "b.json", json.dumps({"v100": {"('A3C', 1)": {"null": -1}}})))


def test_pollux_learning_curves(pollux_dir):
    lc = import_pollux_learning_curves(pollux_dir)
    rows = lc.to_pylist()
    assert [(r["batch_size"], r["epoch"]) for r in rows] == [(12, 0), (12, 1), (48, 0)]
    assert rows[1]["samples_seen"] == 20 * 12 and rows[2]["samples_seen"] == 3 * 48
    assert rows[0]["progress"] == 10.0 and rows[0]["mean_entropy"] is None


def test_import_path_dispatch_and_errors(tmp_path, pollux_dir):
    assert import_path(pollux_dir.parent).num_rows == 5
    with pytest.raises(TraceError, match="not found"):
        import_path(tmp_path / "nope")
    with pytest.raises(TraceError, match="pass its model directory"):
        import_path(pollux_dir / "placements.csv")
