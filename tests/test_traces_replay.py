"""Node lists -> clusters, the replay oracle (recorded run times kept), fitting jobs to a
cluster, and the ``clustersim trace`` command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main
from sim.cluster import uniform_cluster
from sim.engine import simulate
from sim.errors import ConfigError, TraceError
from sim.policies import get_policy
from sim.presets import get_preset
from sim.traces import fit_to_cluster, read_nodes, read_trace, replay, replay_oracle
from sim.traces.nodes import read_openb_nodes, read_pai_machines, read_philly_machines, read_spot_nodes

FIX = Path(__file__).resolve().parent / "fixtures" / "traces"


# ------------------------------------------------------------------ node lists
def test_openb_nodes_type_mapping_and_cpu_nodes():
    load = read_openb_nodes(FIX / "openb_node_list.csv")
    c = load.cluster
    assert c.n_nodes == 5 and c.total_gpus == 30
    assert c.gpus_by_type() == {"p100": 2, "v100": 16, "t4": 4, "g2": 8}
    assert c.node_names == ("node-1", "node-2", "node-3", "node-4", "node-5")
    assert load.report.filtered == {"CPU-only node (0 GPUs)": 1}
    kept = read_openb_nodes(FIX / "openb_node_list.csv", gpu_type_map={"V100M16": "v100m16", "V100M32": "v100m32",
                                                                       "P100": "p100", "T4": "t4", "G2": "g2"})
    assert kept.cluster.gpus_by_type()["v100m16"] == 8


def test_pai_machines_headerless_and_spot_and_philly():
    c = read_pai_machines(FIX / "pai_machine_spec.csv").cluster
    assert c.gpus_by_type() == {"t4": 2, "p100": 2, "v100": 8, "k80": 8}
    s = read_spot_nodes(FIX / "spot_node_info.csv").cluster
    assert s.gpus_by_type() == {"a10": 1, "series1": 4, "a100": 8, "h800": 8, "a800": 8, "series2": 8}
    assert s.node_names[0] == "node0"
    p = read_philly_machines(FIX / "philly_machine_list.csv")
    assert sorted(p.cluster.node_gpus.tolist()) == [2, 3, 4, 8]
    assert p.report.filtered["CPU-only node (0 GPUs)"] == 1
    assert p.cluster.gpu_types == (get_preset("philly").gpu_types[0],)


def test_unmapped_gpu_type_is_noted(tmp_path):
    p = tmp_path / "nodes.csv"
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,4,Z9\n")
    load = read_nodes(p)
    assert load.cluster.gpu_types == ("z9",)
    assert any("'Z9' is not in the mapping table" in n for n in load.report.notes)


# ------------------------------------------------------------------ replay oracle
def test_replay_oracle_keeps_recorded_run_times():
    load = read_trace(FIX / "philly_jobs.csv")
    cluster = uniform_cluster(4, 8, "p100")          # 32 GPUs: nothing queues
    res = simulate(cluster, load.jobs, get_policy("fifo"), replay_oracle(cluster, reference_type="p100"))
    jct = res.finish - res.jobs.arrival
    assert np.allclose(jct, load.jobs.duration_s)


def test_replay_oracle_spans_servers_without_penalty_and_speeds():
    o = replay_oracle(["p100", "v100"])
    m = np.zeros(3, np.intp)
    r = o.rates(m, np.array([1, 8, 16]), np.array([1, 2, 4]), np.array([1, 3, 2]), np.ones(3), ("p100", "v100"))
    assert r.tolist() == [1.0, 8.0, 16.0]
    rel = replay_oracle(["p100", "v100"], reference_type="p100", speeds="relative")
    r = rel.rates(m[:1], np.array([2]), np.array([1]), np.array([2]), np.ones(1), ("p100", "v100"))
    assert r[0] == pytest.approx(2 * 15.7 / 9.3)
    with pytest.raises(ConfigError, match="relative speed"):
        replay_oracle(["g2"], speeds="relative")
    with pytest.raises(ConfigError):
        replay_oracle(["p100"], speeds="fast")


def test_fit_to_cluster_error_or_counted_skip():
    load = read_trace(FIX / "philly_jobs.csv")
    small = uniform_cluster(1, 4, "p100")
    with pytest.raises(TraceError) as e:
        fit_to_cluster(load, small)
    assert e.value.row == 1 and "8 GPUs" in str(e.value) and e.value.field == "gpus"
    jobs = fit_to_cluster(load, small, too_big="skip")
    assert len(jobs) == 4 and 1 not in jobs.job_id.tolist()
    assert load.report.filtered["more GPUs than the cluster has (4)"] == 1
    pods = read_trace(FIX / "openb_pod_list.csv")
    two_nodes = uniform_cluster(2, 4, "t4")
    assert len(fit_to_cluster(pods, two_nodes)) == 4
    assert len(fit_to_cluster(pods, two_nodes, per_node=True, too_big="skip")) == 3


def test_replay_runs_policies_on_a_trace():
    load = read_trace(FIX / "helios_cluster_log.csv")
    out = replay(load, uniform_cluster(2, 8, "v100"), ["fifo", "srtf"])
    assert set(out) == {"fifo", "srtf"}
    for res, s in out.values():
        assert s["n_jobs"] == 3 and s["sim_wall_s"] >= 0
        assert np.all(res.finish - res.jobs.arrival >= load.jobs.duration_s - 1e-6)


# ------------------------------------------------------------------ CLI
def test_cli_stats_prints_counts_and_quantiles(capsys):
    assert main(["trace", "stats", str(FIX / "openb_pod_list.csv")]) == 0
    out = capsys.readouterr().out
    assert "6 rows read, 4 jobs kept" in out
    assert "cpu_job (0 GPUs)" in out and "never scheduled" in out and "fractional_gpus_rounded_up" in out
    assert "GPUs per job: min 1, p10 1, p50 1.5, p90 6.2" in out
    assert "run time:" in out


def test_cli_stats_json_and_node_lists(capsys):
    assert main(["trace", "stats", str(FIX / "philly_jobs.csv"), "--json", "--tz", "none"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["jobs"] == 5 and doc["gpus_quantiles"]["max"] == 8.0
    assert doc["first_arrival"] == "2017-10-09 00:00:00 UTC"
    assert doc["duration_quantiles_s"]["p50"] == 60.0
    assert main(["trace", "stats", str(FIX / "spot_node_info.csv")]) == 0
    out = capsys.readouterr().out
    assert "6 nodes, 37 GPUs" in out


def test_cli_bad_input_exit_code_and_skip_invalid(tmp_path, capsys):
    lines = (FIX / "philly_jobs.csv").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace("3600.0", "-1")
    p = tmp_path / "philly.csv"
    p.write_text("".join(lines))
    assert main(["trace", "stats", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"file {p}, row 1, field 'duration'" in err
    assert main(["trace", "stats", str(p), "--skip-invalid"]) == 0
    out = capsys.readouterr().out
    assert "1 skipped as invalid" in out and "negative_duration" in out


def test_cli_convert_and_options(tmp_path, capsys):
    out = tmp_path / "jobs.parquet"
    extra = tmp_path / "extra.parquet"
    assert main(["trace", "convert", str(FIX / "pai_task_table.csv"), "--job-table", str(FIX / "pai_job_table.csv"),
                 "--fractional", "instance_ceil", "-o", str(out), "--extra", str(extra)]) == 0
    from sim.jobs import JobTable
    jt = JobTable.read(out)
    assert jt.gpus.tolist() == [1, 2, 1]
    import pyarrow.parquet as pq
    assert pq.read_table(extra).column("gpu_type").to_pylist() == ["v100", "t4", "k80"]
    assert main(["trace", "convert", str(FIX / "cluster_job_log.json"), "-O", "attempts=\"sum\"", "-o",
                 str(tmp_path / "j.csv")]) == 0
    assert JobTable.read(tmp_path / "j.csv").duration_s.tolist() == [3000.0, 7200.0, 30.0]
    assert main(["trace", "convert", str(FIX / "openb_node_list.csv"), "-o", str(tmp_path / "c.toml")]) == 0
    from sim.presets import load_cluster
    assert load_cluster(str(tmp_path / "c.toml")).total_gpus == 30
    assert main(["trace", "stats", str(FIX / "philly_jobs.csv"), "-O", "bogus=1"]) == 2
    capsys.readouterr()
    assert main(["trace", "formats"]) == 0
    assert "philly-log" in capsys.readouterr().out
