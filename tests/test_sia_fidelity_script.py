"""scalability/sia_fidelity.py's averaging over our seeds and their draws."""
import importlib.util
import json
import math
from pathlib import Path

import pytest


def _script():
    path = Path(__file__).resolve().parents[1] / "scalability" / "sia_fidelity.py"
    spec = importlib.util.spec_from_file_location("sia_fidelity_for_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _their_log(directory: Path, stem: str, jcts: list[float]) -> None:
    # the Sia simulator's --output: JSON lines, the last record holding every job's times
    directory.mkdir(parents=True, exist_ok=True)
    jobs = [{"submission_time": 10.0 * i, "completion_time": 10.0 * i + j} for i, j in enumerate(jcts)]
    (directory / f"{stem}.log").write_text(json.dumps({"submitted_jobs": []}) + "\n"
                                           + json.dumps({"submitted_jobs": jobs}) + "\n")


def test_their_draws_are_averaged_and_a_missing_draw_is_skipped(tmp_path):
    mod = _script()
    _their_log(tmp_path / "draw1", "workload-1", [100.0, 300.0])      # avg 200, makespan 310
    _their_log(tmp_path / "draw2", "workload-1", [200.0, 400.0])      # avg 300, makespan 410
    dirs = [str(tmp_path / "draw1"), str(tmp_path / "draw2"), str(tmp_path / "absent")]
    mean, draws = mod.theirs_over_draws(Path("saturn/workload-1.csv"), dirs)
    assert [d["avg_jct_s"] for d in draws] == [200.0, 300.0]
    assert mean["avg_jct_s"] == 250.0 and mean["makespan_s"] == 360.0
    assert (mean["avg_jct_min_s"], mean["avg_jct_max_s"], mean["runs"]) == (200.0, 300.0, 2)
    one, _ = mod.theirs_over_draws(Path("saturn/workload-1.csv"), dirs[:1])
    assert one["avg_jct_s"] == 200.0 and "runs" not in one
    assert mod.theirs_over_draws(Path("saturn/workload-2.csv"), dirs) == (None, [])


def test_an_unfinished_run_of_theirs_is_refused(tmp_path):
    mod = _script()
    d = tmp_path / "d"
    d.mkdir()
    (d / "w.log").write_text(json.dumps({"submitted_jobs": [
        {"submission_time": 0.0, "completion_time": None}]}) + "\n")
    with pytest.raises(ValueError, match="unfinished"):
        mod.theirs_over_draws(Path("w.csv"), [str(d)])


def test_ratio_over_workloads_is_the_geometric_mean_of_the_per_workload_ratios():
    mod = _script()
    rows = [{"policy": "p", "ours": {"avg_jct_s": o}, "theirs": {"avg_jct_s": t}}
            for o, t in [(110.0, 100.0), (90.0, 100.0), (100.0, 100.0)]]
    rows.append({"policy": "p", "ours": {"avg_jct_s": 500.0}})          # no run of theirs: left out
    rows.append({"policy": "q", "ours": {"avg_jct_s": 1.0}, "theirs": {"avg_jct_s": 2.0}})
    ci = mod.ratio_over_workloads(rows, "p")
    assert ci.n == 3
    assert ci.ratio == pytest.approx(math.exp((math.log(1.1) + math.log(0.9)) / 3))
    assert ci.low <= ci.ratio <= ci.high


def test_ours_over_seeds_runs_once_per_seed_and_averages(monkeypatch):
    mod = _script()
    calls = []

    def fake(workload, policy, **params):
        calls.append(params)
        return {"avg_jct_s": 100.0 + params.get("seed", 50), "makespan_s": 1000.0, "jobs": 3, "cpu_s": 1.0}
    monkeypatch.setattr(mod, "our_metrics", fake)
    mean, runs = mod.ours_over_seeds(Path("w.csv"), "sia-pollux", {"search": "dp"}, [0, 2])
    assert calls == [{"search": "dp", "seed": 0}, {"search": "dp", "seed": 2}]
    assert mean["avg_jct_s"] == 101.0 and mean["runs"] == 2 and [r["seed"] for r in runs] == [0, 2]
    single, none = mod.ours_over_seeds(Path("w.csv"), "sia-pollux", {"search": "dp"}, [])
    assert none == [] and calls[-1] == {"search": "dp"} and single["avg_jct_s"] == 150.0
