"""Plots are written under fixed names as non-empty PNG files."""
from __future__ import annotations

import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.plots import plot_timeline, policy_dirname, write_plots
from sim.policies import get_policy

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results():
    jobs = specs([0.0, 0.0, 5.0, 30.0], [4, 2, 4, 1], [400.0, 800.0, 100.0, 50.0])
    return {name: run_jobs(small_cluster(), jobs, get_policy(name), LinearOracle(), EngineConfig())
            for name in ("fifo", "sjf")}


def test_write_plots_fixed_names(results, tmp_path):
    paths = write_plots(results, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "jct_cdf.png", "fifo/timeline.png", "sjf/timeline.png"]
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 1000


def test_timeline_of_one_run(results, tmp_path):
    fig = plot_timeline(results["fifo"], tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)
    assert [ax.get_ylabel() for ax in fig.axes] == ["queued jobs", "GPU utilization (%)"]


def test_plots_draw_into_given_axes_and_return_their_figure(results, tmp_path):
    from matplotlib.figure import Figure

    from sim.plots import plot_jct_cdf
    fig = Figure()
    ax_cdf, ax_q, ax_u = fig.subplots(3, 1)
    assert plot_jct_cdf(results, ax=ax_cdf) is fig
    assert [line.get_label() for line in ax_cdf.get_lines()] == ["fifo", "sjf"]
    assert plot_timeline(results["sjf"], tmp_path / "two.png", ax=(ax_q, ax_u)) is fig
    assert ax_q.get_lines() and ax_u.get_ylabel() == "GPU utilization (%)"
    assert (tmp_path / "two.png").read_bytes().startswith(PNG)
    with pytest.raises(ConfigError, match="2 Axes"):
        plot_timeline(results["sjf"], ax=(ax_q,))


def test_policy_dirname_and_errors(tmp_path):
    assert policy_dirname("tiresias(q=2)") == "tiresias_q_2_"
    with pytest.raises(ConfigError):
        write_plots({}, tmp_path)


def test_binned_step_keeps_mean_and_range():
    import numpy as np
    from sim.plots import _bin_step
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    v = np.array([0.0, 2.0, 4.0, 6.0, 0.0])   # the last point only closes the series
    edges, mean, lo, hi = _bin_step(t, v, 2)
    np.testing.assert_allclose(edges, [0, 2, 4])
    np.testing.assert_allclose(mean, [1.0, 5.0])
    np.testing.assert_allclose(lo, [0.0, 4.0])
    np.testing.assert_allclose(hi, [4.0, 6.0])  # the value at the edge is included (plot bound)
