"""Sweeps: a grid of simulations (policies x clusters x loads x seeds) run as cells.

* :mod:`sim.sweep.spec` parses and validates a TOML sweep spec into cells.
* :mod:`sim.sweep.cells` runs one cell; its result depends only on the cell's parameters.
* :mod:`sim.sweep.store` keeps the results as a Parquet dataset partitioned by cell (resumable).
* :mod:`sim.sweep.runners` runs cells on a local process pool or a Dask cluster.
* :mod:`sim.sweep.plots` draws PNG plots from a sweep folder.
* :mod:`sim.sweep.report` renders DIR/index.html from a Jinja2 template: pivot tables of
  policy x load per cluster with ratios to a baseline and their confidence intervals.

``clustersim sweep SPEC --out DIR`` (sim/commands/sweep.py) ties them together; see
scalability/specs/README.md for the spec format.
"""
from __future__ import annotations

from .spec import Cell, SweepSpec, load_spec, parse_spec
from .runners import SweepReport, run_sweep
from .store import SweepStore

__all__ = ["Cell", "SweepSpec", "load_spec", "parse_spec", "run_sweep", "SweepReport", "SweepStore"]
