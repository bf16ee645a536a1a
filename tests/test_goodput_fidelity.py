"""Fidelity to the Pollux simulator (docs/goodput.md): avg JCT on workload-1 equal to the
artifact's committed results (every job's JCT is theirs since the whole-second epochs and the
allocation order; the issue asked for 5%) (petuum/adaptdl osdi21-artifact ``simulator/results-jobload/*-1.0/
summary.json``).  Needs the shared data; slow (about a minute per policy)."""
from __future__ import annotations

import pytest

from sim.engine import simulate
from sim.goodput.profiles import shared_profiles_dir
from sim.metrics import summary
from sim.policies import get_policy
from sim.presets import load_cluster

#: the artifact's avg JCT (s) on workloads/workload-1.csv
THEIRS = {"pollux-tiresias": 2473.65, "optimus": 4087.0625}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(THEIRS))
def test_avg_jct_is_theirs(name):
    root = shared_profiles_dir("pollux")
    if root is None:
        pytest.skip("shared data absent: set CLUSTERSIM_SHARED_DATA or provide ../shared/data")
    wl = root.parent.parent / "workloads" / "pollux" / "workloads" / "workload-1.csv"
    if not wl.exists():
        pytest.skip(f"{wl} absent")
    from sim.goodput.workload import read_goodput_workload
    table, oracle = read_goodput_workload(wl, root)
    res = simulate(load_cluster("pollux-64"), table, get_policy(name), oracle)
    assert summary(res)["avg_jct_s"] == pytest.approx(THEIRS[name], rel=1e-6)
