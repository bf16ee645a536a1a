"""The trace readers against the real files in ../shared/data/traces (skipped when absent).

Every number asserted here is a value ../shared/data/README.md states for the file (row counts,
node and GPU totals, ranges), or follows from its stated schema (gpu_time = duration x
num_gpus, the week file's date range).  The folder is found at ``<repo>/../shared/data`` or at
``$CLUSTERSIM_SHARED_DATA``.  Nothing here is needed to install or run clustersim.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from sim.presets import get_preset
from sim.traces import read_nodes, read_trace

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
TRACES = SHARED / "traces"

pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"shared trace folder not found at {TRACES} (set CLUSTERSIM_SHARED_DATA to run these checks)")


def need(rel: str) -> Path:
    p = TRACES / rel
    if not p.exists():
        pytest.skip(f"{p} not present in the shared data folder")
    return p


def rows(path: Path) -> int:
    return pacsv.read_csv(path).num_rows


# ------------------------------------------------------------------ philly/
def test_philly_pollux_table():
    p = need("philly/philly_jobs_pollux.parquet")
    load = read_trace(p)
    assert load.report.format == "philly"
    assert load.report.rows == 82_247 and len(load.jobs) == 82_247
    assert load.report.n_skipped == 0 and load.report.n_filtered == 0
    assert len(set(load.jobs.vcs.tolist())) == 15
    t = pq.read_table(p)
    assert np.allclose(t["gpu_time"].to_numpy(), t["duration"].to_numpy() * t["num_gpus"].to_numpy())
    assert np.array_equal(np.sort(load.jobs.duration_s), np.sort(t["duration"].to_numpy()))
    # Aug-Dec 2017 (the flattened table starts in September)
    assert load.origin_label().startswith("2017-09-04")
    assert load.jobs.arrival_s.max() / 86400 < 120


def test_philly_week_file_is_the_stated_week_sorted():
    load = read_trace(need("philly/philly_jobs_pollux_week_2017-10-09.csv"), tz=None)
    assert len(load.jobs) == 12_751 and load.report.n_skipped == 0
    assert load.origin_label() >= "2017-10-09 00:00:00"
    assert load.jobs.arrival_s.max() < 7 * 86400
    assert np.all(np.diff(load.jobs.job_id) > 0)          # file order == arrival order: sorted


def test_philly_runtime_and_distribution_files():
    assert rows(need("philly/philly_task_runtime_from_alibaba.csv")) == 83_154
    d = pacsv.read_csv(need("philly/gavel_philly_job_distribution.csv"))
    assert d.num_rows == 33_192
    assert set(pc.unique(d["num_gpus"]).to_pylist()) == {1, 2, 4, 8}


def test_philly_revised_machine_list_matches_the_preset():
    load = read_nodes(need("philly/philly_revised_machine_list.csv"))
    c = load.cluster
    assert load.report.rows == 552 and load.report.filtered["CPU-only node (0 GPUs)"] == 13
    assert c.total_gpus == 3_205
    counts = dict(zip(*np.unique(c.node_gpus, return_counts=True)))
    assert counts == {4: 271, 8: 264, 2: 3, 3: 1}
    assert sorted(c.node_gpus.tolist()) == sorted(get_preset("philly").node_gpus.tolist())


def test_philly_vc_nodes_and_node_sequence():
    vc = pacsv.read_csv(need("philly/philly_vc_nodes.csv"))
    assert vc.num_rows == 11 and pc.sum(vc["node num"]).as_py() == 352
    seq = pacsv.read_csv(need("philly/philly_node_sequence.csv"))
    assert seq.num_rows == 105_644
    tot = seq["total"].to_numpy()
    assert np.median(tot) == 420 and tot.max() == 552


# ------------------------------------------------------------------ alibaba_openb_2023/
def test_openb_nodes():
    allc = read_nodes(need("alibaba_openb_2023/openb_node_list_all_node.csv"))
    gpu = read_nodes(need("alibaba_openb_2023/openb_node_list_gpu_node.csv"))
    assert allc.report.rows == 1_523 and allc.cluster.n_nodes == 1_213
    assert allc.cluster.total_gpus == gpu.cluster.total_gpus == 6_212
    assert gpu.report.rows == 1_213 and gpu.report.n_filtered == 0
    assert set(np.unique(allc.cluster.node_gpus).tolist()) <= {1, 2, 4, 8}
    assert set(allc.cluster.gpu_types) <= {"g1", "g2", "g3", "p100", "t4", "v100", "a10"}


@pytest.mark.parametrize("name", ["openb_pod_list_default.csv", "openb_pod_list_gpuspec33.csv"])
def test_openb_pods(name):
    p = need(f"alibaba_openb_2023/{name}")
    raw = pacsv.read_csv(p)
    assert raw.num_rows == 8_152
    never = raw["scheduled_time"].null_count
    assert never == 897
    cpu = pc.sum(pc.equal(raw["num_gpu"], 0)).as_py()
    cpu_never = pc.sum(pc.and_(pc.equal(raw["num_gpu"], 0), raw["scheduled_time"].is_null())).as_py()
    load = read_trace(p)
    r = load.report
    assert r.rows == 8_152 and r.n_skipped == 0
    assert r.filtered["cpu_job (0 GPUs)"] == cpu
    assert r.filtered["never scheduled (no scheduled_time)"] == never - cpu_never
    assert len(load.jobs) == 8_152 - cpu - (never - cpu_never)
    assert load.jobs.gpus.max() == 8 and load.jobs.gpus.min() >= 1
    assert load.jobs.arrival_s.max() / 86400 == pytest.approx(149, abs=1)        # ~149 days
    share = load.extra.column("gpu_share").to_numpy()
    assert share.min() >= 0.05 - 1e-12                                          # gpu_milli 50..1000
    spec = r.adjusted.get("gpu_spec ignored (no GPU-type constraint in the job table)", 0)
    if name.endswith("gpuspec33.csv"):
        with_spec = pc.sum(pc.not_equal(pc.fill_null(raw["gpu_spec"], ""), "")).as_py()
        assert with_spec == 2_388
        assert 0 < spec <= with_spec
    else:
        assert spec == 0


def test_openb_multigpu50_has_no_times():
    p = need("alibaba_openb_2023/openb_pod_list_multigpu50.csv")
    from sim.errors import TraceError
    with pytest.raises(TraceError, match="no time columns"):
        read_trace(p)
    load = read_trace(p, packing_duration_s=3600)
    assert load.report.rows == 9_061


# ------------------------------------------------------------------ alibaba_pai_2020/, alibaba_spot_2026/
def test_pai_machine_spec():
    load = read_nodes(need("alibaba_pai_2020/pai_machine_spec.csv"))
    assert load.report.rows == 1_897
    assert load.cluster.n_nodes == 1_814 and load.cluster.total_gpus == 6_742
    assert set(load.cluster.gpu_types) == {"t4", "k80", "p100", "v100"}


def test_pai_headers_list_the_columns_our_reader_uses():
    from sim.traces.pai import PAI_JOB_COLUMNS, PAI_TASK_COLUMNS
    text = need("alibaba_pai_2020/pai_table_headers.txt").read_text()
    heads = dict(line.split(": ", 1) for line in text.strip().splitlines())
    assert len(heads) == 7
    assert tuple(heads["pai_task_table"].split(",")) == PAI_TASK_COLUMNS
    assert tuple(heads["pai_job_table"].split(",")) == PAI_JOB_COLUMNS
    assert heads["pai_machine_spec"].split(",") == ["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"]


@pytest.mark.parametrize("k,n", [(1, 3_000), (2, 2_402), (3, 2_489), (4, 21_829)])
def test_pai_minibatch_files(k, n):
    assert rows(need(f"alibaba_pai_2020/minibatch_job_{k}_norm.csv")) == n


def test_pai_minibatch_cov():
    assert rows(need("alibaba_pai_2020/minibatch_coefficient_variation.csv")) == 100


def test_spot_2026_nodes():
    load = read_nodes(need("alibaba_spot_2026/node_info_df.csv"))
    assert load.cluster.n_nodes == 4_278 and load.cluster.total_gpus == 10_412
    assert set(np.unique(load.cluster.node_gpus).tolist()) == {1, 4, 8}
    assert {"a10", "a100", "a800", "h800", "series1", "series2"} == set(load.cluster.gpu_types)


# ------------------------------------------------------------------ helios/, acme/, tiresias/
def test_helios_files():
    s = pacsv.read_csv(need("helios/helios_cluster_summary.csv"))
    assert s.num_rows == 5
    assert s["id"].to_pylist() == ["Venus", "Earth", "Saturn", "Uranus", "total"]
    assert s["job_num"].to_pylist()[-1] == 3_362_981
    d = pacsv.read_csv(need("helios/earth_vc_gpu_number_daily.csv"))
    assert d.num_rows == 181
    tot = d["total"].to_numpy()
    assert tot.min() == 784 and tot.max() == 1_232
    seq = pq.read_table(need("helios/earth_vc_sequence_2020-05.parquet"), columns=["vc"])
    assert seq.num_rows == 714_240 and len(pc.unique(seq["vc"])) == 16


def test_acme_summary():
    s = pacsv.read_csv(need("acme/acme_cluster_summary.csv"))
    assert s.num_rows == 5
    assert s["id"].to_pylist()[:2] == ["Seren", "Kalos"]


def test_tiresias_gpu_time_sample():
    d = pacsv.read_csv(need("tiresias/tiresias_yarn_gput10000.csv"))["duration"].to_numpy()
    assert d.size == 9_999 and d.min() == 121 and d.max() == pytest.approx(53.3e6, rel=0.01)
    assert np.all(np.diff(d) >= 0)


# ------------------------------------------------------------------ gavel_physical/, workloads/
def test_gavel_physical_traces():
    files = sorted(need("gavel_physical").glob("*.trace"))
    assert len(files) == 8
    for f in files:
        load = read_trace(f)
        assert load.report.format == "gavel" and load.report.n_skipped == 0
        assert len(load.jobs) == load.report.rows > 0
        assert set(np.unique(load.jobs.gpus).tolist()) <= {1, 2, 4, 8}


@pytest.mark.parametrize("name", ["pollux_workload_sample.csv", "sia_philly_workload_sample.csv"])
def test_pollux_workloads_with_profiles(name):
    p = SHARED / "workloads" / name
    prof = SHARED / "profiles" / "pollux"
    if not p.exists() or not prof.is_dir():
        pytest.skip(f"{p} or {prof} not present")
    load = read_trace(p, profiles=prof, skip_invalid=True)
    assert load.report.format == "pollux" and load.report.rows == len(load.jobs) + load.report.n_skipped
    assert set(load.jobs.models.tolist()) <= {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert np.all(load.jobs.iterations > 0)
