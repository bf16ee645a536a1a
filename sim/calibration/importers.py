"""Importers of public measurements into the measurement schema (:mod:`sim.calibration.schema`).

* **Gavel** throughput JSON (``simulation_throughputs.json``; stanford-futuredata/gavel, MIT):
  ``{gpu_type: {"('<job type>', k)": {"null": steps_per_s, ...}}}``.  One row per (GPU type, job
  type, k) with a non-zero isolated throughput.  The throughput of a k-GPU job counts the steps of
  all k workers (it grows about k-fold with k; read as one synchronous iteration per 1/rate seconds
  the iteration would be faster on 8 GPUs than the 1-GPU compute alone), so one synchronous
  iteration takes ``step_time_s = k / steps_per_s`` [I: our reading of the table], ``n_gpus = k``,
  ``local_bsz`` = the ``(batch size N)`` of the job type name (1 when the name has none).  A
  ``<type>_unconsolidated`` entry is the same type with its GPUs on different servers; we record it
  as ``n_nodes = k``, one GPU per server [I: Gavel does not say how many servers], and skip its
  k = 1 entries (the consolidated configuration).  Throughput 0 (did not fit in memory) is skipped
  with a warning.  No synchronisation or component times.
* **Pollux** profiles (petuum/adaptdl ``simulator/traces/<model>/``, Apache-2.0), measured on
  4-GPU T4 nodes: ``placements.csv`` (``placement`` as GPUs per node in digits, ``local_bsz``,
  ``step_time``, ``sync_time``) and ``scalability.csv`` (``num_nodes``, ``num_replicas`` instead of
  a placement).  In the Pollux/Sia simulators ``step_time`` is an optimizer step including
  synchronisation and ``step_time - sync_time`` a gradient-accumulation step, which is exactly the
  meaning of our ``step_time_s`` / ``sync_time_s``.  ``validation-<B>.csv`` become learning curves.
* **Sia** profiles (siasosp23/artifacts ``sia-simulator/traces/<model>/``; no license: read them
  at run time, never copy them): the same columns per cluster, ``placements-<cluster>.csv`` and
  ``scalability-<cluster>.csv``; clusters map to GPU types by :data:`SIA_CLUSTER_GPU`.  Rows of
  a scalability file that repeat a placements row exactly (the dgx-ext and quad files) are
  dropped.  ``gpt_pmp`` (pipeline/model parallel; its ``step_time`` is a per-stage forward time,
  smaller than ``sync_time``) does not fit the data-parallel schema and is refused.
  ``profiles/sia_seed/<model>.csv`` (``gpu_type, local_bsz, placement, step_time, sync_time``) is
  read by :func:`import_sia_seed`.

:func:`import_path` picks the importer from what a path holds.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import ConfigError, TraceError
from .schema import (CalibrationWarning, empty_measurements, learning_curves_from_rows,
                     measurements_from_rows, read_measurements)

__all__ = [
    "SIA_CLUSTER_GPU", "SIA_SEED_GPU", "POLLUX_GPU_TYPE", "PIPELINE_MODELS",
    "import_gavel", "import_pollux_profile", "import_sia_profile", "import_sia_seed",
    "import_pollux_learning_curves", "import_path", "import_paths",
]

#: Sia cluster name -> GPU type (Sia paper, SOSP'23; data/README.md).
SIA_CLUSTER_GPU: dict[str, str] = {
    "aws": "t4", "azure": "v100", "dgx": "a100", "dgx-ext": "a100",
    "quad": "quadrortx6000", "rtx": "rtx2080ti",
}
#: ``gpu_type`` values of the Sia seed profiles -> GPU type.
SIA_SEED_GPU: dict[str, str] = {**SIA_CLUSTER_GPU, "v100": "v100", "t4": "t4"}
#: The Pollux traces were measured on AWS g4dn.12xlarge (4x T4) nodes.
POLLUX_GPU_TYPE = "t4"
#: Profiles of pipeline/model-parallel jobs, which the data-parallel schema cannot hold.
PIPELINE_MODELS = frozenset({"gpt_pmp"})

_BATCH_RE = re.compile(r"\(batch size (\d+)\)", re.IGNORECASE)
_PROFILE_COLS = ("local_bsz", "step_time", "sync_time")


def _read_csv(path: Path, required: Sequence[str], string_cols: Sequence[str] = ()) -> pa.Table:
    if not path.exists():
        raise TraceError("file not found", file=str(path))
    try:
        t = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in string_cols}))
    except pa.ArrowInvalid as exc:
        raise TraceError(f"cannot read CSV: {exc}", file=str(path)) from None
    missing = [c for c in required if c not in t.column_names]
    if missing:
        raise TraceError(f"missing column(s) {', '.join(missing)} (found: {', '.join(t.column_names)})",
                         file=str(path), field=missing[0])
    return t


def _digits(p: str, path: Path, row: int) -> list[int]:
    s = str(p).strip()
    if not s.isdigit():
        raise TraceError(f"placement {p!r} is not GPUs per node written as digits", file=str(path),
                         row=row, field="placement")
    return [int(c) for c in s if c != "0"]


def _profile_rows(path: Path, model: str, gpu_type: str, source: str, *, placements: bool) -> pa.Table:
    if placements:
        t = _read_csv(path, ("placement",) + _PROFILE_COLS, string_cols=("placement",))
    else:
        t = _read_csv(path, ("num_nodes", "num_replicas") + _PROFILE_COLS)
    cols = t.to_pydict()
    rows = []
    for r in range(t.num_rows):
        row = dict(model=model, gpu_type=gpu_type, source=source, local_bsz=cols["local_bsz"][r],
                   step_time_s=cols["step_time"][r], sync_time_s=cols["sync_time"][r])
        if placements:
            pl = _digits(cols["placement"][r], path, r)
            row.update(placement=pl, n_nodes=len(pl), n_gpus=sum(pl))
        else:
            row.update(n_nodes=cols["num_nodes"][r], n_gpus=cols["num_replicas"][r])
        rows.append(row)
    if not rows:
        return empty_measurements()
    return measurements_from_rows(rows, source=str(path))


def _profile(model_dir: Path, placements: Path, scalability: Path | None, model: str,
             gpu_type: str, source: str) -> pa.Table:
    if model in PIPELINE_MODELS:
        raise ConfigError(f"{model_dir}: model {model!r} is pipeline/model parallel (its step_time is a "
                          f"per-stage forward time, not a data-parallel step); it does not fit the "
                          f"measurement schema")
    p = _profile_rows(placements, model, gpu_type, f"{source}/{placements.name}", placements=True)
    if scalability is None or not scalability.exists():
        return p
    s = _profile_rows(scalability, model, gpu_type, f"{source}/{scalability.name}", placements=False)
    seen = set(zip(p.column("n_nodes").to_pylist(), p.column("n_gpus").to_pylist(),
                   p.column("local_bsz").to_pylist(), p.column("step_time_s").to_pylist()))
    keep = [key not in seen for key in zip(s.column("n_nodes").to_pylist(), s.column("n_gpus").to_pylist(),
                                           s.column("local_bsz").to_pylist(),
                                           s.column("step_time_s").to_pylist())]
    return pa.concat_tables([p, s.filter(pa.array(keep, pa.bool_()))])


def import_pollux_profile(model_dir, *, gpu_type: str = POLLUX_GPU_TYPE, model: str | None = None) -> pa.Table:
    """``<model_dir>/placements.csv`` and ``scalability.csv`` of a Pollux trace -> measurements."""
    d = Path(model_dir)
    name = model or d.name
    return _profile(d, d / "placements.csv", d / "scalability.csv", name, gpu_type, f"pollux:{name}")


def import_sia_profile(model_dir, cluster: str, *, model: str | None = None,
                       gpu_type: str | None = None) -> pa.Table:
    """``placements-<cluster>.csv`` and ``scalability-<cluster>.csv`` of a Sia trace -> measurements."""
    d = Path(model_dir)
    name = model or d.name
    if gpu_type is None:
        if cluster not in SIA_CLUSTER_GPU:
            raise ConfigError(f"unknown Sia cluster {cluster!r} (known: {', '.join(SIA_CLUSTER_GPU)}); "
                              f"pass gpu_type=")
        gpu_type = SIA_CLUSTER_GPU[cluster]
    return _profile(d, d / f"placements-{cluster}.csv", d / f"scalability-{cluster}.csv", name,
                    gpu_type, f"sia:{cluster}:{name}")


def sia_clusters(model_dir) -> list[str]:
    """Cluster names of the ``placements-<cluster>.csv`` files in a Sia model directory."""
    return sorted(p.stem[len("placements-"):] for p in Path(model_dir).glob("placements-*.csv"))


def import_sia_seed(path, *, model: str | None = None) -> pa.Table:
    """A Sia seed profile (``gpu_type, local_bsz, placement, step_time, sync_time``) -> measurements."""
    path = Path(path)
    name = model or path.stem
    t = _read_csv(path, ("gpu_type", "placement") + _PROFILE_COLS, string_cols=("placement", "gpu_type"))
    cols = t.to_pydict()
    rows = []
    for r in range(t.num_rows):
        g = str(cols["gpu_type"][r])
        pl = _digits(cols["placement"][r], path, r)
        rows.append(dict(model=name, gpu_type=SIA_SEED_GPU.get(g, g), source=f"sia_seed:{name}:{g}",
                         placement=pl, n_nodes=len(pl), n_gpus=sum(pl), local_bsz=cols["local_bsz"][r],
                         step_time_s=cols["step_time"][r], sync_time_s=cols["sync_time"][r]))
    return measurements_from_rows(rows, source=str(path)) if rows else empty_measurements()


def import_gavel(path, *, by_family: bool = False) -> pa.Table:
    """Gavel's throughput JSON -> measurements (see the module docstring).

    ``by_family``: name models without the ``" (batch size N)"`` suffix, so that the batch sizes of
    one family are fitted together (the simulator's Gavel workloads use the full names).
    """
    path = Path(path)
    src = str(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError("file not found", file=src) from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"invalid JSON: {exc}", file=src) from None
    if not isinstance(doc, dict) or not doc:
        raise TraceError("expected an object of GPU types", file=src)
    if "throughputs" in doc and "format" in doc:        # the simulator's wrapped built-in format
        doc = doc["throughputs"]
    rows, zero = [], 0
    for raw_type, entries in doc.items():
        spread = raw_type.endswith("_unconsolidated")
        gtype = raw_type[: -len("_unconsolidated")] if spread else raw_type
        if not isinstance(entries, dict):
            raise TraceError(f"GPU type {raw_type!r}: expected an object of job types", file=src, field=raw_type)
        for key, val in entries.items():
            try:
                job, k = ast.literal_eval(key)
                k = int(k)
            except (ValueError, SyntaxError, TypeError):
                raise TraceError(f"job type key {key!r} is not \"('<model>', <scale factor>)\"",
                                 file=src, field=raw_type) from None
            rate = val.get("null") if isinstance(val, dict) else val
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not np.isfinite(rate) or rate < 0:
                raise TraceError(f"job type {key!r}: throughput {rate!r} is not a finite number >= 0",
                                 file=src, field=raw_type)
            if spread and k == 1:
                continue
            if rate == 0:
                zero += 1
                continue
            m = _BATCH_RE.search(job)
            bsz = int(m.group(1)) if m else 1
            name = _BATCH_RE.sub("", job).strip() if by_family else job
            rows.append(dict(model=name, gpu_type=gtype, source=f"gavel:{raw_type}", n_gpus=k,
                             n_nodes=k if spread else 1, placement=[1] * k if spread else [k],
                             local_bsz=bsz, step_time_s=k / rate))
    if zero:
        warnings.warn(CalibrationWarning(f"{src}: skipped {zero} Gavel entries with throughput 0 "
                                         f"(the job did not run there, e.g. out of memory)"), stacklevel=2)
    return measurements_from_rows(rows, source=src) if rows else empty_measurements()


def import_pollux_learning_curves(model_dir, *, model: str | None = None) -> pa.Table:
    """``validation-<B>.csv`` of a Pollux/Sia trace -> learning curves (one row per epoch)."""
    d = Path(model_dir)
    name = model or d.name
    rows = []
    for path in sorted(d.glob("validation-*.csv"), key=lambda p: int(p.stem.split("-")[-1])):
        batch = int(path.stem.split("-")[-1])
        t = _read_csv(path, ("progress", "iteration", "metric"))
        c = t.to_pydict()
        for r in range(t.num_rows):
            rows.append(dict(model=name, batch_size=batch, epoch=r,
                             samples_seen=float(c["iteration"][r]) * batch, metric=c["metric"][r],
                             iteration=c["iteration"][r], progress=c["progress"][r],
                             grad_sqr=c.get("grad_sqr", [None] * t.num_rows)[r],
                             grad_var=c.get("grad_var", [None] * t.num_rows)[r],
                             source=f"pollux:{name}/{path.name}"))
    if not rows:
        raise TraceError("no validation-<batch>.csv files", file=str(d))
    return learning_curves_from_rows(rows, source=str(d))


def _import_model_dir(d: Path) -> pa.Table | None:
    if d.name in PIPELINE_MODELS:
        warnings.warn(CalibrationWarning(f"{d}: skipping pipeline/model-parallel profile {d.name!r} "
                                         f"(not a data-parallel step-time trace)"), stacklevel=3)
        return empty_measurements()
    if (d / "placements.csv").exists():
        return import_pollux_profile(d)
    clusters = sia_clusters(d)
    if clusters:
        return pa.concat_tables([import_sia_profile(d, c) for c in clusters])
    return None


def import_path(path) -> pa.Table:
    """Measurements from one path, whatever it holds:

    * ``.parquet`` (or a ``.csv`` with our columns): read and validated;
    * ``.json``: Gavel throughputs;
    * a ``.csv`` with ``gpu_type, placement, step_time``: a Sia seed profile;
    * a directory with ``placements.csv`` (Pollux) or ``placements-<cluster>.csv`` (Sia): one model;
    * a directory of such directories (``profiles/pollux``, ``profiles/sia``), or of seed CSVs.
    """
    p = Path(path)
    if not p.exists():
        raise TraceError("not found", file=str(p))
    if p.is_dir():
        one = _import_model_dir(p)
        if one is not None:
            return one
        parts = [t for sub in sorted(x for x in p.iterdir() if x.is_dir())
                 if (t := _import_model_dir(sub)) is not None]
        if not parts:
            seeds = sorted(p.glob("*.csv"))
            parts = [import_path(s) for s in seeds]
        if not parts:
            raise TraceError("no Pollux/Sia profiles or measurement files here", file=str(p))
        return pa.concat_tables(parts)
    ext = p.suffix.lower()
    if ext == ".json":
        return import_gavel(p)
    if ext == ".csv":
        header = p.open().readline().strip().split(",")
        if {"gpu_type", "placement", "step_time"} <= set(header):
            return import_sia_seed(p)
        if {"placement", "step_time"} <= set(header) or {"num_replicas", "step_time"} <= set(header):
            raise TraceError("a single Pollux/Sia profile CSV: pass its model directory instead",
                             file=str(p))
    return read_measurements(p)


def import_paths(paths: Sequence) -> pa.Table:
    """:func:`import_path` of each path, concatenated."""
    tables = [import_path(p) for p in paths]
    return pa.concat_tables(tables) if tables else empty_measurements()
