"""The sweep report (sim.sweep.report, a Jinja2 template): per-cluster pivot tables of policy x
load with ratios to the baseline and paired bootstrap intervals, fixed number formats, and the
ratio plot with shared axes."""
from __future__ import annotations

import re

import pytest

from sim.errors import ConfigError
from sim.stats import paired_ratio_ci
from sim.sweep import SweepStore, parse_spec, run_sweep
from sim.sweep.plots import plot_ratios, write_sweep_plots
from sim.sweep.report import cluster_tables, pick_baseline, ratio_rows
from sim.sweep.runners import SerialEngine

SPEC = {"name": "rep", "grid": {"policy": ["fifo", "srtf"], "nodes": [2, 3], "load": [0.6, 1.2],
                                "seed": [0, 1, 2]},
        "cluster": {"gpus_per_node": 4}, "workload": {"jobs": 20, "load_unit": "utilization"}}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "out"
    report = run_sweep(parse_spec(SPEC), out, engine=SerialEngine())
    assert report.failed == 0
    return out, SweepStore(out).summaries().to_pylist()


def test_ratios_pair_the_runs_of_one_seed(sweep):
    _, rows = sweep
    got = {(r["cluster"], r["load"], r["policy_label"]): r for r in ratio_rows(rows, "fifo", "avg_jct_s")}
    assert len(got) == 2 * 2 * 2
    sub = [r for r in rows if r["nodes"] == 2 and r["load"] == 1.2]
    by = {(r["policy_label"], r["seed"]): r["avg_jct_s"] for r in sub}
    want = paired_ratio_ci([by["srtf", s] for s in range(3)], [by["fifo", s] for s in range(3)])
    r = got[(sub[0]["cluster"], 1.2, "srtf")]
    assert (r["ratio"], r["low"], r["high"], r["n"]) == (want.ratio, want.low, want.high, 3)
    assert got[(sub[0]["cluster"], 1.2, "fifo")]["ratio"] == 1.0


def test_pivot_tables_per_cluster_with_fixed_formats(sweep):
    _, rows = sweep
    tables = cluster_tables(rows, "fifo")
    assert [t.title for t in tables] == ["2 nodes x 4 GPUs", "3 nodes x 4 GPUs"]
    t = tables[0]
    assert t.loads == [0.6, 1.2] and t.policies == ["fifo", "srtf"]
    mean, ratio = t.cells["avg_jct_s"]["srtf"][1.2]
    assert re.fullmatch(r"\d+\.\d\d", mean)
    assert re.fullmatch(r"\d\.\d\d \[\d\.\d\d, \d\.\d\d\]", ratio)
    assert t.cells["makespan_s"]["fifo"][0.6][1] == "1.00 [1.00, 1.00]"


def test_index_is_rendered_from_the_template_with_a_chosen_baseline(sweep):
    out, rows = sweep
    html = write_sweep_plots(out, baseline="srtf").read_text()
    assert "ratio to <b>srtf</b>" in html and html.count("<h3>") == 2
    assert "plots/ratio_vs_load.png" in html and "{{" not in html and "{%" not in html
    assert html.count("<th class=\"row\">average JCT (h)</th>") == 2
    with pytest.raises(ConfigError, match="baseline 'nope'"):
        write_sweep_plots(out, baseline="nope")
    assert pick_baseline(["srtf", "fifo"]) == "fifo" and pick_baseline(["sjf", "las"]) == "las"


def test_ratio_plot_shares_axes_and_draws_into_given_axes(sweep):
    _, rows = sweep
    fig = plot_ratios(rows, "fifo")
    axes = fig.axes
    assert len(axes) == 4                                        # 2 metrics x 2 clusters
    assert axes[0].get_shared_y_axes().joined(axes[0], axes[1])
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[2])
    from matplotlib.figure import Figure
    mine = Figure()
    grid = mine.subplots(2, 2, squeeze=False)
    assert plot_ratios(rows, "fifo", axes=grid) is mine
    assert grid[0][0].get_ylabel() == "avg JCT / fifo"
