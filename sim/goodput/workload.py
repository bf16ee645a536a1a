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
from .sia_profiles import SIA_RESTART_S, SIA_SLOWDOWNS, load_sia_applications

__all__ = ["is_pollux_workload", "read_goodput_workload", "profile_kind", "PROFILE_KINDS"]

_HEADER = {"time", "application", "num_replicas"}


def is_pollux_workload(path) -> bool:
    """Is ``path`` a CSV with the Pollux workload header?"""
    p = Path(path)
    if p.suffix.lower() != ".csv" or not p.exists():
        return False
    with open(p, newline="", errors="replace") as f:      # only the header matters here
        header = next(csv.reader(f), [])
    return _HEADER <= {h.strip() for h in header}


def _job_rows(path: Path) -> list[dict]:
    """The rows as text; bytes that are not UTF-8 read as U+FFFD (the Pollux reader that builds
    the job table names their line)."""
    with open(path, newline="", errors="replace") as f:
        return list(csv.DictReader(f))


def _check_folders(rows, path: Path, root: Path) -> None:
    for i, row in enumerate(rows):
        name = (row.get("application") or "").strip()
        if not (root / name).is_dir():
            raise TraceError(f"job {row.get('name') or i}: application {name!r} has no profile folder "
                             f"{root / name}", file=str(path), row=i + 2, field="application")


def _applications(rows, path: Path, root: Path) -> dict[str, Application]:
    _check_folders(rows, path, root)
    names = sorted({(r.get("application") or "").strip() for r in rows})
    return {n: Application.load(root / n) for n in names}


PROFILE_KINDS = ("pollux", "sia")   #: the shared profile sets a goodput workload can run with


def profile_kind(path) -> str:
    """``"sia"`` for a workload under a ``sia`` folder (``workloads/sia/saturn/...``), else
    ``"pollux"``: which shared profiles it runs with."""
    return "sia" if "sia" in Path(path).resolve().parts else "pollux"


def read_goodput_workload(path, profiles=None, restart_s=None, kind: str | None = None,
                          interference: float = 0.0):
    """(JobTable, GoodputOracle) of a Pollux or Sia workload CSV.  ``kind`` (default
    :func:`profile_kind`): ``"pollux"`` (one profile per application, restart 30 s) or ``"sia"``
    (per-GPU-type profiles, :mod:`sim.goodput.sia_profiles`: Sia's restart delays and calibration
    slowdowns); ``profiles`` defaults to the shared ``profiles/<kind>`` folder; ``interference``:
    :attr:`GoodputOracle.interference`."""
    path = Path(path)
    kind = kind or profile_kind(path)
    if kind not in PROFILE_KINDS:
        raise ConfigError(f"workload {path}: profile kind must be 'pollux' or 'sia', got {kind!r}")
    root = Path(profiles) if profiles is not None else shared_profiles_dir(kind)
    if root is None or not root.is_dir():
        raise ConfigError(f"workload {path}: a {kind} workload needs its profiles; none found (pass "
                          f"profiles=DIR or set CLUSTERSIM_SHARED_DATA)")
    rows = _job_rows(path)
    if kind == "sia":
        _check_folders(rows, path, root)
        names = tuple(sorted({(r.get("application") or "").strip() for r in rows}))
        ref, typed = load_sia_applications(root, names)
        apps = dict(zip(names, ref))
        extra = {"typed": typed, "slowdown": SIA_SLOWDOWNS}
        restart_s = SIA_RESTART_S if restart_s is None else restart_s
    else:
        apps = _applications(rows, path, root)
        names = tuple(sorted(apps))
        extra = {}
        restart_s = POLLUX_RESTART_S if restart_s is None else restart_s
    table = read_pollux(path, iterations={a: apps[a].target_progress for a in names}).jobs
    row = np.asarray(table.job_id, np.int64)          # data row of each job in the file
    batch = np.asarray(table.table.column("batch_size").to_numpy(zero_copy_only=False), np.int64)
    for i in np.flatnonzero(batch > 0):
        r = rows[row[i]]
        try:
            apps[r["application"].strip()].check_batch(batch[i], job=str(r.get("name") or row[i]))
        except TraceError as exc:
            raise TraceError(f"{exc} (workload row {row[i] + 2})", file=str(path), field="batch_size") from None
    oracle = GoodputOracle(tuple(apps[a] for a in names), job_batch=batch, restart_s=restart_s,
                           interference=interference, **extra)
    return table, oracle
