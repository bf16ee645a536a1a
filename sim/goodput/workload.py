"""Pollux/Sia workload CSVs as Pollux-model jobs: the job table and its :class:`GoodputOracle`.

Each row (``name, time, application, num_replicas, batch_size``; :mod:`sim.traces.pollux`)
becomes a job of its application whose work is the application's target progress.  Checked
here, each error naming the job and the file: an application without a profile folder, and a
batch size outside the profile's validated range.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..errors import ConfigError, TraceError
from ..traces.pollux import read_pollux
from .oracle import POLLUX_RESTART_S, GoodputOracle
from .profiles import Application, shared_profiles_dir

__all__ = ["is_pollux_workload", "read_goodput_workload"]

_HEADER = {"time", "application", "num_replicas"}


def is_pollux_workload(path) -> bool:
    """Is ``path`` a CSV with the Pollux workload header?"""
    p = Path(path)
    if p.suffix.lower() != ".csv" or not p.exists():
        return False
    with open(p, newline="") as f:
        header = next(csv.reader(f), [])
    return _HEADER <= {h.strip() for h in header}


def _job_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _applications(rows, path: Path, root: Path) -> dict[str, Application]:
    apps: dict[str, Application] = {}
    for i, row in enumerate(rows):
        name = (row.get("application") or "").strip()
        if name in apps:
            continue
        if not (root / name).is_dir():
            raise TraceError(f"job {row.get('name') or i}: application {name!r} has no profile folder "
                             f"{root / name}", file=str(path), row=i + 2, field="application")
        apps[name] = Application.load(root / name)
    return apps


def read_goodput_workload(path, profiles=None, restart_s=POLLUX_RESTART_S):
    """(JobTable, GoodputOracle) of a Pollux workload CSV; ``profiles`` defaults to the shared
    ``profiles/pollux`` folder (see :func:`sim.goodput.profiles.shared_profiles_dir`)."""
    path = Path(path)
    root = Path(profiles) if profiles is not None else shared_profiles_dir("pollux")
    if root is None or not root.is_dir():
        raise ConfigError(f"workload {path}: a Pollux workload needs its profiles; none found (pass "
                          f"profiles=DIR or set CLUSTERSIM_SHARED_DATA)")
    rows = _job_rows(path)
    apps = _applications(rows, path, root)
    names = tuple(sorted(apps))
    table = read_pollux(path, iterations={a: apps[a].target_progress for a in names}).jobs
    row = np.asarray(table.job_id, np.int64)          # data row of each job in the file
    batch = np.asarray(table.table.column("batch_size").to_numpy(zero_copy_only=False), np.int64)
    for i in np.flatnonzero(batch > 0):
        r = rows[row[i]]
        try:
            apps[r["application"].strip()].check_batch(batch[i], job=str(r.get("name") or row[i]))
        except TraceError as exc:
            raise TraceError(f"{exc} (workload row {row[i] + 2})", file=str(path), field="batch_size") from None
    oracle = GoodputOracle(tuple(apps[a] for a in names), job_batch=batch, restart_s=restart_s)
    return table, oracle
