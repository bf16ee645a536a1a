"""Checks against the real public data in ../shared/data (skipped when it is absent).

The data folder is found at ``<repo>/../shared/data`` or at ``$CLUSTERSIM_SHARED_DATA``.  Nothing
here is needed to run or install clustersim; these tests check our loaders and our built-in
excerpts against the real files (Gavel OSDI'20 throughputs, Philly ATC'19 machine list and job
distribution).
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from sim.presets import get_preset
from sim.throughput import TableThroughput
from sim.workload import philly_distribution

SHARED = Path(os.environ.get("CLUSTERSIM_SHARED_DATA") or
              Path(__file__).resolve().parents[2] / "shared" / "data")

pytestmark = pytest.mark.skipif(
    not SHARED.is_dir(),
    reason=f"shared data folder not found at {SHARED} (set CLUSTERSIM_SHARED_DATA to run these checks)")

GAVEL = SHARED / "throughputs" / "gavel"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present in the shared data folder")
    return path


@pytest.mark.parametrize("name", ["simulation_throughputs.json", "physical_cluster_throughputs.json"])
def test_real_gavel_file_loads(name):
    o = TableThroughput.from_gavel_json(_need(GAVEL / name))
    assert len(o.models) == 26
    assert set(o.gpu_types) == {"v100", "p100", "k80"}
    assert all(o.has_unconsolidated)
    distributed = [m for m in o.models if o.supported_counts(m) == (1, 2, 4, 8)]
    assert len(distributed) == 19
    assert sum(len(o.supported_counts(m)) for m in o.models) == 83
    # every placement has a finite, non-negative rate on the cluster types we ship
    ct = ("v100", "p100", "k80", "rtx3090")
    m = np.repeat(np.arange(len(o.models)), 16)
    k = np.tile(np.arange(1, 17), len(o.models))
    r = o.rates(m, k, np.where(k > 4, 2, 1), np.full(m.shape, 0b1111), np.ones(m.shape), ct)
    assert np.all(np.isfinite(r)) and np.all(r >= 0)


def test_builtin_excerpt_is_unchanged_gavel_values():
    raw = json.loads(_need(GAVEL / "simulation_throughputs.json").read_text())
    ours = json.loads((Path(__file__).resolve().parents[1] / "sim" / "data" / "builtin_throughputs.json")
                      .read_text())["throughputs"]
    n = 0
    for t, entries in ours.items():
        for key, val in entries.items():
            assert raw[t][key]["null"] == val["null"], (t, key)
            n += 1
    assert n > 0


def test_gavel_physical_traces_use_known_job_types():
    o = TableThroughput.from_gavel_json(_need(GAVEL / "simulation_throughputs.json"))
    traces = sorted(_need(SHARED / "traces" / "gavel_physical").glob("*.trace"))
    assert traces
    for p in traces:
        for line in p.read_text().splitlines():
            if not line.strip():
                continue
            cols = line.split("\t")
            assert len(cols) == 10, p
            assert int(cols[6]) in o.supported_counts(cols[0]), (p, cols[0], cols[6])


def test_philly_preset_matches_revised_machine_list():
    path = _need(SHARED / "traces" / "philly" / "philly_revised_machine_list.csv")
    with open(path) as f:
        counts = [int(r["number of GPUs"]) for r in csv.DictReader(f)]
    nonzero = sorted(c for c in counts if c > 0)
    c = get_preset("philly")
    assert sorted(c.node_gpus.tolist()) == nonzero
    assert c.total_gpus == sum(counts) == 3205
    assert counts.count(0) == 13


def test_builtin_philly_quantiles_match_source():
    path = _need(SHARED / "traces" / "philly" / "gavel_philly_job_distribution.csv")
    d = np.loadtxt(path, delimiter=",", skiprows=1)
    dist = philly_distribution()
    assert dist["doc"]["n_samples"] == d.shape[0]
    gs, cnt = np.unique(d[:, 1].astype(int), return_counts=True)
    assert gs.tolist() == dist["gpu_counts"].tolist()
    assert np.allclose(cnt / d.shape[0], dist["share"], atol=1e-6)
    for g in gs:
        q = np.quantile(d[d[:, 1] == g, 0], dist["p"])
        assert np.allclose(np.exp(dist["log_q"][int(g)]), q, rtol=1e-6, atol=0.06)
