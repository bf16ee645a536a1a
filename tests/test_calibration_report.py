"""Hold-out validation, summaries, plot and the ``clustersim calibrate`` command."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sim.calibration.fit import group_observations
from sim.calibration.report import (diagnostics, holdout_split, markdown_table, misses_table,
                                    plot_predicted_vs_measured, summarize, validate, diagnostics_table)
from sim.calibration.schema import write_measurements
from sim.calibration.synthetic import EXAMPLE_HOPS, EXAMPLE_POLLUX, synthetic_measurements
from sim.cli import main


@pytest.fixture(scope="module")
def table():
    return pa.concat_tables([synthetic_measurements(EXAMPLE_POLLUX, model="a", gpu_type="t4", noise=0.02),
                             synthetic_measurements(EXAMPLE_HOPS, model="b", gpu_type="a100", noise=0.02)])


def test_holdout_split_is_deterministic_and_keeps_what_a_fit_needs(table):
    obs = group_observations(table)[("a", "t4")]
    hp, hb = holdout_split(obs)
    # 12 placements; the 1-GPU one trains; the 11 others sorted by (GPUs, servers, name):
    # 2, 1|1, 3, 4, 1|3, 2|2, 1|1|1|1, 2|2|2, 4|4, 4|4|4, 3|3|3|3 -- the 2nd, 5th, 8th, 11th are held out
    held = sorted({k for k, h in zip(obs.placement_key, hp) if h})
    assert held == ["1|1", "1|3", "2|2|2", "3|3|3|3"]
    # batch sizes 8, 16, 32, 64, 128: 16 is held out (never the smallest or largest)
    assert set(obs.local_bsz[hb]) == {16}
    assert not hp[obs.n_gpus == 1].any()
    hp2, hb2 = holdout_split(obs)
    assert (hp == hp2).all() and (hb == hb2).all()


def test_validate_on_synthetic_data_meets_the_target(table):
    errors, summary, notes = validate(table)
    assert set(errors.column("split").to_pylist()) == {"train", "placement", "batch", "placement+batch"}
    rows = {(r["model"], r["kind"]): r for r in summary.to_pylist()}
    assert rows[("a", "pollux")]["median_ape_placement"] < 4.0
    assert rows[("b", "hops")]["median_ape_placement"] < 4.0
    assert all(r["meets_target"] for r in rows.values() if r["kind"] == {"a": "pollux", "b": "hops"}[r["model"]])
    assert rows[("a", "pollux")]["n_train"] + rows[("a", "pollux")]["n_heldout"] == 60
    md = markdown_table(summary)
    assert md.splitlines()[0].startswith("| model | GPU type |") and "| a | t4 |" in md
    assert summarize(errors).num_rows == summary.num_rows


def test_diagnostics_by_hand():
    rows = []
    for pl, step in (([2, 2], 1.0), ([1, 3], 1.5), ([4], 0.8)):        # same (multi-node?, K, b) for the first two
        rows.append(dict(model="m", gpu_type="t4", n_gpus=4, n_nodes=len(pl), placement=pl, local_bsz=8,
                         step_time_s=step))
    for b, step in ((8, 0.5), (16, 0.4), (32, 0.9)):                    # a drop as the batch grows
        rows.append(dict(model="m", gpu_type="t4", n_gpus=1, n_nodes=1, placement=[1], local_bsz=b, step_time_s=step))
    from sim.calibration.schema import measurements_from_rows
    obs = group_observations(measurements_from_rows(rows))[("m", "t4")]
    d = diagnostics(obs)
    # multi-node K=4 b=8: group median 1.25 -> 25% and 16.7% of the measured times; others alone (0%)
    assert d["shape_floor_med"] == 0.0
    assert d["shape_floor_p90"] == pytest.approx(np.percentile([25.0, 100 / 6, 0, 0, 0, 0], 90))
    assert d["nonmonotone_pct"] == pytest.approx(50.0)            # 1 drop of 2 consecutive pairs
    assert d["linear_1gpu_med"] > 0


def test_plot_and_misses(tmp_path, table):
    errors, summary, _ = validate(table, ("pollux",))
    fig = plot_predicted_vs_measured(errors, tmp_path / "pvm.png")
    assert (tmp_path / "pvm.png").stat().st_size > 5000
    panels = [a for a in fig.axes if a.get_title()]
    from matplotlib.figure import Figure
    mine = Figure()
    grid = mine.subplots(1, len(panels), squeeze=False)
    assert plot_predicted_vs_measured(errors, ax=grid) is mine
    assert [a.get_title() for a in grid.ravel()] == [a.get_title() for a in panels]
    diag = diagnostics_table(table)
    text = misses_table(summary, diag)
    assert text.startswith("| model | GPU type | kind |")


def test_calibrate_command(tmp_path, table, capsys):
    src = write_measurements(table, tmp_path / "m.parquet")
    out = tmp_path / "calib.toml"
    assert main(["calibrate", str(src), "-o", str(out), "--holdout", "--kind", "pollux"]) == 0
    text = capsys.readouterr().out
    assert "median APE %" in text and "hold-out step-time error" in text and out.exists()
    from sim.calibration.oracle import CalibratedThroughput
    o = CalibratedThroughput.from_toml(out)
    assert o.models == ("a", "b")


def test_calibrate_command_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,gpu_type,n_gpus,n_nodes,local_bsz,step_time_s\nbert,t4,1,1,8,-0.5\n")
    assert main(["calibrate", str(bad), "-o", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert "row 0" in err and "step_time_s" in err and "model 'bert', GPU type 't4'" in err
    missing = tmp_path / "missing.csv"
    missing.write_text("model,gpu_type,step_time_s\nbert,t4,0.5\n")
    assert main(["calibrate", str(missing), "-o", str(tmp_path / "c.toml")]) == 2
    assert "lacks required column(s) n_gpus, n_nodes, local_bsz" in capsys.readouterr().err


def test_calibrate_command_warns_on_thin_data(tmp_path, capsys):
    one = tmp_path / "one.csv"
    one.write_text("model,gpu_type,n_gpus,n_nodes,local_bsz,step_time_s,sync_time_s\nbert,t4,1,1,8,0.5,0.01\n")
    assert main(["calibrate", str(one), "-o", str(tmp_path / "c.toml"), "--kind", "pollux"]) == 0
    err = capsys.readouterr().err
    assert "warning: bert on t4 (pollux): alpha_c not identifiable" in err


def test_a_one_gpu_trace_has_no_placement_verdict(table):
    # a trace of one GPU (as `clustersim collect` on a one-GPU machine): its only placement
    # trains, so there is no held-out placement and no verdict, neither met nor missed
    one = table.filter(pa.compute.equal(table.column("n_gpus"), 1))
    _, summary, _ = validate(one)
    rows = summary.to_pylist()
    assert rows and all(r["n_heldout_placement"] == 0 and r["meets_target"] is None for r in rows)
    md = markdown_table(summary)
    assert "(no held-out placement)" in md and "✗" not in md
    assert len(misses_table(summary, diagnostics_table(one)).splitlines()) == 2    # header only
