"""Run one sweep cell: build its cluster and workload, simulate, summarize.

A cell's result depends only on its parameters (:attr:`Cell.params`): the workload comes from
``numpy.random.Generator(PCG64(seed))`` and the engine is deterministic.  Only the timing
columns (:data:`TIMING_COLUMNS`) differ between runs.

Loads (``load_unit``) of a generated workload:

* ``jobs_per_hour``: the Poisson arrival rate.
* ``jobs_per_hour_per_node``: rate = load x nodes, so bigger clusters get proportionally more.
* ``utilization``: offered load as a share of the cluster's GPUs, measured over the arrival
  window.  The rate r (jobs/s) solves  r x mean(GPUs x min(duration, n / r)) = load x total GPUs
  for the cell's own n jobs (durations on the reference GPU type): if no job waited, the GPUs
  busy at the end of the arrival window n / r would be about load x total GPUs.  As n grows this
  is the classic offered load r x mean(GPUs x duration) / GPUs; with few jobs and Gavel's
  heavy-tailed durations (days-long jobs) the classic rate leaves the cluster idle.  A load that
  no rate reaches (n x mean GPUs < load x total GPUs: too few jobs to fill the cluster even if
  all arrived at once) is an error.  The generator draws sizes and durations after the arrival
  gaps from the same stream and the gaps scale with the rate, so a seed gives the same jobs at
  every load (only arrivals stretch).

A trace cell replays a job table: ``jobs`` keeps its first N jobs; ``load`` (unit ``scale``)
divides every arrival time by the load (2 = arrivals twice as dense).
"""
from __future__ import annotations

import json
import os
import socket
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from .spec import Cell

__all__ = ["CellOutcome", "run_cell", "run_cell_safe", "build_workload", "TIMING_COLUMNS",
           "PARAM_COLUMNS"]

#: summary columns that measure the run rather than its result (they differ between runs)
TIMING_COLUMNS = ("wall_seconds", "mean_decision_ms", "p99_decision_ms", "cell_wall_s",
                  "finished_at", "host", "pid")

#: cell parameters copied into the summary row, in this order
PARAM_COLUMNS = ("policy", "policy_label", "policy_params", "cluster", "nodes", "total_gpus",
                 "workload", "trace", "jobs", "load", "load_unit", "sizes", "durations", "seed",
                 "round_s", "restart_delay_s")


@dataclass
class CellOutcome:
    """What a worker sends back: a summary row and per-job table, or the error."""

    cell_id: str
    label: str
    ok: bool
    row: dict | None = None
    jobs: pa.Table | None = None
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0


def _cluster(cell: Cell):
    from ..presets import load_cluster
    if "cluster" in cell.paths:
        return load_cluster(Path(cell.paths["cluster"]))
    return load_cluster(cell.params["cluster"])


def build_workload(cell: Cell, cluster, oracle):
    """The cell's job table, its arrival rate in jobs/hour (NaN for traces) and the oracle to
    run it with: ``oracle``, or for a raw trace (any format but the canonical job table) the
    replay oracle, under which its jobs run their recorded run times (sim.traces.read_workload)."""
    from ..jobs import JobTable
    from ..traces import read_workload
    from ..workload import generate_workload

    p = cell.params
    if p["workload"] == "trace":
        table, oracle = read_workload(cell.paths["trace"], cluster, format=p.get("trace_format"),
                                      oracle=None)
        t = table.table
        if p["jobs"] is not None and p["jobs"] < t.num_rows:
            t = t.slice(0, p["jobs"])
        if p["load"] is not None and p["load"] != 1.0:
            i = t.schema.get_field_index("arrival_s")
            arr = t.column(i).to_numpy() / p["load"]
            t = t.set_column(i, t.schema.field(i), pa.array(arr, pa.float64()))
        return JobTable(t, table.source), float("nan"), oracle
    n, load, seed = int(p["jobs"]), float(p["load"]), int(p["seed"])
    kw = dict(sizes=p["sizes"], durations=p["durations"], throughput=oracle)
    unit = p["load_unit"]
    if unit == "jobs_per_hour":
        rate = load
    elif unit == "jobs_per_hour_per_node":
        rate = load * cluster.n_nodes
    elif unit == "utilization":
        probe = generate_workload(n, 1.0, seed, **kw)
        rate = window_rate(probe.gpus, probe.duration_s, load * cluster.total_gpus) * 3600.0
    else:
        from ..errors import ConfigError
        raise ConfigError(f"unknown load unit {unit!r}")
    return generate_workload(n, rate, seed, **kw), rate, oracle


def window_rate(gpus, duration_s, busy_gpus: float) -> float:
    """Arrival rate r (jobs/s) with r x mean(gpus x min(duration, n / r)) = busy_gpus.

    The left side, mean(gpus x min(r x duration, n)), grows with r (piecewise linear), so the
    root is found exactly on the segment between sorted breakpoints n / duration.
    """
    from ..errors import ConfigError

    g = np.asarray(gpus, float)
    d = np.asarray(duration_s, float)
    n = g.size
    target = busy_gpus * n          # sum(g x min(r d, n)) = busy x n
    if not n or g.sum() * n <= target:
        raise ConfigError(f"utilization load: {n} jobs of {g.mean() if n else 0:.2f} GPUs on "
                          f"average cannot keep {busy_gpus:g} GPUs busy; use more jobs per cell "
                          f"or a lower load")
    # breakpoints r_i = n / d_i: for r >= r_i job i contributes g_i n, below it g_i r d_i
    order = np.argsort(n / d)
    r_b, g_s, d_s = (n / d)[order], g[order], d[order]
    capped = np.concatenate([[0.0], np.cumsum(g_s * n)])          # jobs with r_i <= r
    linear = np.concatenate([[0.0], np.cumsum((g_s * d_s)[::-1])])[::-1]   # jobs with r_i > r
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(linear > 0, (target - capped) / linear, np.inf)
    lo = np.concatenate([[0.0], r_b])
    hi = np.concatenate([r_b, [np.inf]])
    ok = np.flatnonzero((lo <= r) & (r <= hi))          # segment k: the first k jobs capped
    if ok.size:
        return float(r[ok[0]])
    raise AssertionError("unreachable: the target is below the maximum")


def run_cell(cell: Cell) -> tuple[dict, pa.Table]:
    """Simulate one cell; returns its summary row and per-job results table."""
    from ..engine import EngineConfig, simulate
    from ..metrics import jobs_table, summary
    from ..policies import get_policy
    from ..throughput import default_oracle

    t0 = time.perf_counter()
    p = cell.params
    cluster = _cluster(cell)
    table, rate, oracle = build_workload(cell, cluster, default_oracle())
    policy = get_policy(p["policy"], **p["policy_params"])
    config = EngineConfig(round_s=p["round_s"], restart_delay_s=p["restart_delay_s"])
    result = simulate(cluster, table, policy, oracle, config)
    metrics = summary(result)
    jobs = jobs_table(result)
    row = {"cell_id": cell.id, "label": cell.label}
    for k in PARAM_COLUMNS:
        row[k] = json.dumps(p[k], sort_keys=True) if k == "policy_params" else p[k]
    row["jobs"] = int(len(table))
    row["rate_jobs_per_hour"] = rate
    for k, v in metrics.items():
        if k not in row:
            row[k] = v
    row["cell_wall_s"] = time.perf_counter() - t0
    row["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    row["host"] = socket.gethostname()
    row["pid"] = os.getpid()
    return row, jobs


def run_cell_safe(cell: Cell) -> CellOutcome:
    """:func:`run_cell` with any exception turned into a failed outcome (errors are data)."""
    t0 = time.perf_counter()
    try:
        row, jobs = run_cell(cell)
    except Exception as exc:  # noqa: BLE001  (a failed cell is recorded, the sweep goes on)
        return CellOutcome(cell.id, cell.label, False, error=f"{type(exc).__name__}: {exc}",
                           traceback=traceback.format_exc(), wall_s=time.perf_counter() - t0)
    return CellOutcome(cell.id, cell.label, True, row=row, jobs=jobs,
                       wall_s=time.perf_counter() - t0)
