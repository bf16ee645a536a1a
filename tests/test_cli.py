"""The clustersim command: run (default and general form), presets, policies, errors."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from sim.cli import main

SMALL = ["run", "--cluster", "sia-64", "--jobs", "25", "--load", "4", "--seed", "3",
         "--no-progress"]


def test_run_writes_summary_jobs_and_plots(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(SMALL + ["--policy", "fifo,srtf", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fifo" in text and "srtf" in text and "avg JCT h" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"fifo", "srtf"}
    for metrics in summary.values():
        for key in ("avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s", "utilization"):
            assert isinstance(metrics[key], float) and metrics[key] >= 0
    jobs = pq.read_table(out / "fifo" / "jobs.parquet")
    assert jobs.num_rows == 25
    assert (out / "jct_cdf.png").stat().st_size > 1000
    assert (out / "fifo" / "timeline.png").stat().st_size > 1000


def test_same_seed_same_summary(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(SMALL + ["--policy", "tiresias", "--out", str(a)]) == 0
    assert main(SMALL + ["--policy", "tiresias", "--out", str(b)]) == 0
    sa = json.loads((a / "summary.json").read_text())["tiresias"]
    sb = json.loads((b / "summary.json").read_text())["tiresias"]
    timing = {"wall_seconds", "mean_decision_ms", "p99_decision_ms"}
    assert {k: v for k, v in sa.items() if k not in timing} == \
        {k: v for k, v in sb.items() if k not in timing}


def test_listings(capsys):
    assert main(["presets"]) == 0
    assert "gavel-108" in capsys.readouterr().out
    assert main(["policies"]) == 0
    names = capsys.readouterr().out
    assert all(n in names for n in ("fifo", "sjf", "srtf", "las", "tiresias"))


@pytest.mark.parametrize("args, message", [
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--cluster", "no-such-preset"], "no-such-preset"),
    (["--workload", "/nonexistent/jobs.parquet"], "does not exist"),
])
def test_bad_input_is_a_clear_error(args, message, capsys):
    assert main(SMALL + args) == 2
    assert message in capsys.readouterr().err


def test_job_larger_than_cluster_is_rejected(capsys):
    assert main(["run", "--cluster", "uniform:nodes=1,gpus=2,type=v100", "--jobs", "40",
                 "--policy", "fifo", "--no-progress"]) == 2
    err = capsys.readouterr().err       # a TraceError naming the row and field
    assert "row 3, field 'gpus': job needs at least 4 GPUs" in err


def _k80_table(tmp_path):
    """Two jobs on a K80-only cluster; ResNet-50 at batch 128 on 4 GPUs cannot run on K80s."""
    path = tmp_path / "jobs.csv"
    path.write_text("arrival_s,gpus,model,duration_s\n"
                    "0,1,ResNet-18 (batch size 64),600\n"
                    '0,4,"ResNet-50 (batch size 128)",600\n')
    return ["run", "--cluster", "uniform:nodes=2,gpus=4,type=k80", "--workload", str(path),
            "--policy", "fifo", "--no-progress"]


def test_job_that_cannot_run_anywhere_is_an_error_or_skipped(tmp_path, capsys):
    args = _k80_table(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "jobs.csv" in err and "row 1, field 'model'" in err and "throughput 0 on every GPU type" in err
    assert main(args + ["--skip-invalid"]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 invalid jobs" in out and "workload: 1 jobs" in out


def test_type_choice_option(capsys):
    for rule in ("first-fit", "fastest", "random"):
        assert main(["run", "--cluster", "gavel-108", "--jobs", "20", "--load", "20", "--no-progress",
                     "--policy", "srtf", "--type-choice", rule, "--multi-server-rate", "gavel"]) == 0
    with pytest.raises(SystemExit):
        main(["run", "--type-choice", "slowest", "--no-progress"])
    assert "invalid choice: 'slowest'" in capsys.readouterr().err


def test_command_table_matches_the_modules():
    """Every module in sim.commands is in COMMANDS, and each registers exactly its commands."""
    import argparse
    import importlib
    import pkgutil

    from sim import commands
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")}
    assert modules == {module for module, _ in commands.COMMANDS.values()}
    for module in modules:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"sim.commands.{module}").register(sub)
        assert set(sub.choices) == {n for n, (m, _) in commands.COMMANDS.items() if m == module}


def test_help_lists_every_command_without_importing_them():
    import subprocess
    import sys

    from sim import commands
    code = ("import sys\nfrom sim.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('sim.commands.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for name in commands.COMMANDS:
        assert name in out
    assert out.strip().splitlines()[-1] == "[]"


def test_a_command_gets_its_own_options_and_help(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--cluster" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["run", "--no-such-option"])
    assert exc.value.code == 2 and "--no-such-option" in capsys.readouterr().err
