"""Every ```python block of README.md and docs/*.md runs, in a folder holding the files it names."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def _calib_toml(folder: Path) -> None:
    from sim.calibration.fit import fit_all
    from sim.calibration.oracle import write_calibration
    from sim.calibration.schema import CalibrationWarning
    from sim.calibration.synthetic import EXAMPLE_POLLUX, synthetic_measurements

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        fits = fit_all(synthetic_measurements(EXAMPLE_POLLUX, model="a", gpu_type="t4"), ("pollux",))
    write_calibration(list(fits.values()), folder / "calib.toml")


def _philly_parquet(folder: Path) -> None:
    pq.write_table(pacsv.read_csv(TRACES / "philly_jobs.csv"), folder / "philly_jobs_pollux.parquet")


#: files the examples read, made small here
INPUTS = {"calib.toml": _calib_toml, "philly_jobs_pollux.parquet": _philly_parquet}

EXAMPLES = [pytest.param(code, id=f"{doc.name}-{i}")
            for doc in DOCS for i, code in enumerate(python_blocks(doc.read_text()))]


def test_the_docs_have_examples():
    assert len(EXAMPLES) >= 3 and "sim.compare(" in (ROOT / "README.md").read_text()
    assert python_blocks("x\n```python\na = 1\n```\n") == ["a = 1\n"]


@pytest.mark.parametrize("code", EXAMPLES)
def test_doc_example_runs(code, tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    monkeypatch.chdir(tmp_path)
    for name, make in INPUTS.items():
        if name in code:
            make(tmp_path)
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
