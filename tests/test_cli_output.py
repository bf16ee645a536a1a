"""clustersim --version, run --format table|json|csv, and help texts that show defaults."""
from __future__ import annotations

import csv
import io
import json
import math

import pytest

import sim
from sim.cli import main
from sim.metrics import SUMMARY_KEYS

SMALL = ["run", "--cluster", "sia-64", "--jobs", "20", "--load", "4", "--seed", "3",
         "--no-progress", "--policy", "fifo,las"]
TIMING = {"wall_seconds", "mean_decision_ms", "p99_decision_ms"}


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"clustersim {sim.__version__}"


def _run(capsys, fmt):
    assert main(SMALL + ["--format", fmt]) == 0
    return capsys.readouterr()


def test_json_and_csv_are_the_same_summaries_with_only_data_on_stdout(capsys):
    js = _run(capsys, "json")
    assert "cluster: " in js.err and "cluster: " not in js.out
    doc = json.loads(js.out)
    assert list(doc) == ["fifo", "las"] and list(doc["fifo"]) == list(SUMMARY_KEYS)
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "csv").out)))
    assert [r["policy"] for r in rows] == ["fifo", "las"]
    for row in rows:
        for key in set(SUMMARY_KEYS) - TIMING:
            want = doc[row["policy"]][key]
            got = float(row[key])
            assert (want is None and math.isnan(got)) or got == pytest.approx(want, rel=1e-12), key


def test_table_is_the_default(capsys):
    text = _run(capsys, "table").out
    assert text.startswith("cluster: ") and "avg JCT h" in text
    assert main(SMALL) == 0
    assert capsys.readouterr().out == text


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "jobs to generate (default: 300)" in text and "(default: gavel-108)" in text
    assert "(default: table)" in text and "(default: None)" not in text and "(default: False)" not in text


NOISY_POLICY = '''
import os
from sim.policies import register
from sim.policies.queue import FIFO


@register
class NoisyFifo(FIFO):
    """FIFO that writes to file descriptor 1 from inside the run, as C solvers do."""
    name = "noisy-fifo"

    def order(self, state):
        os.write(1, b"solver noise\\n")
        return super().order(state)
'''


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_prints_from_inside_the_run_do_not_corrupt_machine_readable_output(tmp_path, fmt):
    import subprocess
    import sys
    path = tmp_path / "noisy.py"
    path.write_text(NOISY_POLICY)
    proc = subprocess.run([sys.executable, "-m", "sim.cli", "run", "--cluster", "uniform:nodes=2,gpus=4",
                           "--jobs", "8", "--no-progress", "--policy-file", str(path), "--policy", "noisy-fifo",
                           "--format", fmt], capture_output=True, text=True, check=True)
    assert "solver noise" in proc.stderr and "solver noise" not in proc.stdout
    if fmt == "json":
        assert set(json.loads(proc.stdout)) == {"noisy-fifo"}
    else:
        assert next(csv.reader(io.StringIO(proc.stdout)))[0] == "policy"
