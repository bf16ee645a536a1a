"""Reduced-size version of examples/train_digits.py: training stays correct with the controller."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parent.parent


def load_example():
    spec = importlib.util.spec_from_file_location("train_digits", ROOT / "examples" / "train_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_controller_keeps_accuracy_and_logs_to_arrow(tmp_path):
    td = load_example()
    data = td.load_digits_split(0)
    acc_off, rows_off = td.run(0, False, epochs=8, data=data)
    acc_on, rows_on = td.run(0, True, epochs=8, data=data)
    assert acc_off > 0.85
    assert acc_on >= acc_off - 0.02  # the full example (40 epochs, 3 seeds) holds 1 pp
    on = [r for r in rows_on if r["epoch"] == 7]
    assert sum(r["batch"] for r in on) == 64
    # the noisiest worker (3) has become the most uncertain and holds more weight than the
    # clean one (0)
    assert on[3]["ubar"] > on[0]["ubar"]
    assert on[3]["weight"] > on[0]["weight"] and on[3]["shard"] > on[0]["shard"]
    assert {r["batch"] for r in rows_off} == {16}
    path = tmp_path / "log.arrow"
    td.write_log(rows_off + rows_on, path)
    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    assert table.num_rows == 2 * 8 * 4
    assert {"entropy", "weight", "batch", "lr", "test_acc"} <= set(table.schema.names)
    assert np.isfinite(np.asarray(table["entropy"])).all()
