"""Cluster model: presets, the uniform form, TOML files and their errors."""
from __future__ import annotations

import numpy as np
import pytest

from sim.cluster import Cluster, canonical_gpu_type, cluster_from_toml, cluster_to_toml, uniform_cluster
from sim.errors import ConfigError
from sim.presets import HOPS_RTX3090_SPEED, PRESETS, get_preset, list_presets, load_cluster


@pytest.mark.parametrize("name,total,by_type,n_nodes", [
    ("gavel-108", 108, {"v100": 36, "p100": 36, "k80": 36}, 27),
    ("sia-64", 64, {"t4": 24, "rtx2080ti": 24, "a100": 16}, 11),
    ("hops-512", 512, {"gtx1080ti": 128, "titanxp": 128, "rtx3090": 256}, 64),
    ("hops-64", 64, {"gtx1080ti": 16, "titanxp": 32, "rtx3090": 16}, 10),
    ("philly", 3205, None, 539),
])
def test_preset_gpu_totals(name, total, by_type, n_nodes):
    c = load_cluster(name)
    assert c.total_gpus == total
    assert c.n_nodes == n_nodes
    if by_type is not None:
        assert c.gpus_by_type() == by_type
    assert name in c.describe() and str(total) in c.describe()


def test_presets_listed_and_immutable():
    assert set(list_presets()) == set(PRESETS) == {"gavel-108", "pollux-64", "sia-64", "hops-512", "hops-64", "philly"}
    c = get_preset("gavel-108")
    with pytest.raises(ValueError):
        c.node_gpus[0] = 9
    with pytest.raises(ConfigError, match="unknown cluster preset"):
        get_preset("nope")


def test_hops_rtx3090_server_models_differ_by_hidden_speed_only():
    """The server models are told apart by node name; their speeds are hidden (all visible 1)."""
    from sim.hops.servers import hidden_server_speeds
    c = get_preset("hops-512")
    t = c.type_id("rtx3090")
    assert np.all(c.node_speed == 1.0)
    speeds = hidden_server_speeds(c)[c.node_type == t]
    assert sorted(np.unique(speeds)) == sorted(HOPS_RTX3090_SPEED.values())
    assert (speeds == HOPS_RTX3090_SPEED["sugon"]).sum() == 16
    assert (speeds == HOPS_RTX3090_SPEED["yk8100-10g"]).sum() == 8
    assert np.all(hidden_server_speeds(c)[c.node_type != t] == 1.0)


def test_philly_machine_mix():
    c = get_preset("philly")
    vals, counts = np.unique(c.node_gpus, return_counts=True)
    assert dict(zip(vals.tolist(), counts.tolist())) == {2: 3, 3: 1, 4: 271, 8: 264}


def test_uniform_spec():
    c = load_cluster("uniform:nodes=1024,gpus=8")
    assert c.total_gpus == 8192 and c.gpu_types == ("v100",)
    c = load_cluster("uniform:nodes=3,gpus=4,type=RTX 2080-Ti,speed=0.5")
    assert c.gpu_types == ("rtx2080ti",) and np.all(c.node_speed == 0.5) and c.total_gpus == 12
    for bad in ("uniform:nodes=2", "uniform:nodes=0,gpus=2", "uniform:nodes=x,gpus=2", "uniform:foo=1"):
        with pytest.raises(ConfigError):
            load_cluster(bad)
    with pytest.raises(ConfigError, match="unknown cluster"):
        load_cluster("no-such-cluster")


def test_canonical_gpu_type():
    assert canonical_gpu_type("V100") == "v100"
    assert canonical_gpu_type(" GTX 1080 Ti ") == "gtx1080ti"
    assert canonical_gpu_type("Titan_Xp") == "titanxp"


def test_toml_round_trip(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('''name = "mixed"
[[nodes]]
count = 2
gpus = 8
type = "A100"
speed = 1.2
intra_bw_gbps = 4800
name_prefix = "dgx-"
[[nodes]]
gpus = 4
type = "t4"
''')
    c = cluster_from_toml(p)
    assert c.name == "mixed" and c.n_nodes == 3 and c.total_gpus == 20
    assert c.gpu_types == ("a100", "t4")
    assert c.node_speed.tolist() == [1.2, 1.2, 1.0]
    assert c.intra_bw_gbps[0] == 4800.0
    assert c.node_names == ("dgx-0", "dgx-1", "node2")
    q = tmp_path / "c2.toml"
    q.write_text(cluster_to_toml(c))
    d = load_cluster(str(q))
    for f in ("node_gpus", "node_type", "node_speed", "intra_bw_gbps", "inter_bw_gbps"):
        assert np.array_equal(getattr(c, f), getattr(d, f)), f
    assert d.gpu_types == c.gpu_types and d.name == c.name
    for preset in PRESETS:
        e = get_preset(preset)
        q.write_text(cluster_to_toml(e))
        f = cluster_from_toml(q)
        assert f.total_gpus == e.total_gpus and np.array_equal(f.node_speed, e.node_speed)
        assert f.node_names == e.node_names


@pytest.mark.parametrize("body,needle", [
    ('name = "x"\n[[nodes]]\ncount = 2\ntype = "v100"\n', "entry 0: missing field 'gpus'"),
    ('[[nodes]]\ngpus = 4\ntype = "v100"\n[[nodes]]\ngpus = 0\ntype = "k80"\n', "entry 1: field 'gpus' must be > 0"),
    ('[[nodes]]\ngpus = 4\n', "entry 0: missing field 'type'"),
    ('[[nodes]]\ngpus = 4\ntype = "v100"\nspeed = -1\n', "field 'speed' must be > 0"),
    ('[[nodes]]\ngpus = 4\ntype = "v100"\ncolour = "red"\n', "unknown field(s) colour"),
    ('[[nodes]]\ngpus = 2.5\ntype = "v100"\n', "field 'gpus' must be an integer"),
    ('name = "x"\n', "missing field 'nodes'"),
    ('nodes = [\n', "invalid TOML"),
])
def test_toml_errors_name_file_and_field(tmp_path, body, needle):
    p = tmp_path / "bad.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as ei:
        cluster_from_toml(p)
    assert str(p) in str(ei.value)
    assert needle in str(ei.value)


def test_missing_toml_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_cluster(str(tmp_path / "none.toml"))


def test_cluster_validation():
    with pytest.raises(ConfigError, match="GPUs"):
        Cluster("x", ("v100",), np.array([0]), np.array([0]), np.ones(1), np.ones(1), np.ones(1))
    with pytest.raises(ConfigError, match="type id"):
        Cluster("x", ("v100",), np.array([1]), np.array([1]), np.ones(1), np.ones(1), np.ones(1))
    with pytest.raises(ConfigError, match="entries"):
        Cluster("x", ("v100",), np.array([1, 2]), np.array([0]), np.ones(2), np.ones(2), np.ones(2))
    c = uniform_cluster(2, 4, "k80")
    assert c.node_gpus.dtype == np.int32 and c.node_speed.dtype == np.float64
    assert c.gpus_per_type().tolist() == [8]
    with pytest.raises(ConfigError):
        c.type_id("v100")


def test_pollux_64_is_the_pollux_testbed():
    c = get_preset("pollux-64")
    assert c.n_nodes == 16 and c.total_gpus == 64 and set(c.node_gpus.tolist()) == {4}
    assert c.gpu_types == ("t4",)
