"""Measurement and learning-curve tables: documented Arrow schemas, read and written as Parquet.

Measurements (:data:`MEASUREMENT_SCHEMA`): one row per measured configuration of one model on
one GPU type.  Times are seconds, means over the timed steps.

================ ============== ======== ==========================================================
column           type           nullable meaning
================ ============== ======== ==========================================================
model            string         no       model / job type (``"bert"``, ``"ResNet-50 (batch size
                                         64)"``); the key the simulator's workloads use
gpu_type         string         no       GPU type, canonical form (``"t4"``, ``"v100"``,
                                         ``"a100"``, ``"rtx2080ti"``; lower case, no spaces,
                                         dashes or underscores)
server_id        string         yes      the server measured (Hops' server-entity layer); null =
                                         unknown / any server of the type
source           string         yes      provenance (``"pollux:bert/placements.csv"``,
                                         ``"sia:azure"``, ``"gavel:v100"``, ``"collect:..."``)
n_gpus           int32          no       GPUs (data-parallel replicas), >= 1
n_nodes          int32          no       servers they span, 1 <= n_nodes <= n_gpus
placement        list<int32>    yes      GPUs on each server (length n_nodes, sum n_gpus, each
                                         >= 1); null = only the counts are known
local_bsz        int32          no       per-GPU batch of one forward/backward pass, >= 1
step_time_s      float64        no       one optimizer step (iteration) including gradient
                                         synchronisation and update, > 0
sync_time_s      float64        yes      what synchronising adds: the step time minus that of a
                                         gradient-accumulation step (forward and backward
                                         without gradient synchronisation or optimizer update),
                                         0 <= sync_time_s <= step_time_s; it includes the
                                         update, as in Pollux's and Sia's profiles (on one GPU
                                         it is the update time)
data_time_s      float64        yes      waiting for the input pipeline, >= 0
forward_s        float64        yes      forward pass (with the loss), >= 0
backward_s       float64        yes      backward pass, >= 0
update_s         float64        yes      optimizer update, >= 0
step_time_std_s  float64        yes      standard deviation of step_time_s over the repeats
repeats          int32          yes      timed steps averaged, >= 1
================ ============== ======== ==========================================================

Learning curves (:data:`LEARNING_CURVE_SCHEMA`): one row per evaluated epoch of one training run.

================ ============== ======== ==========================================================
column           type           nullable meaning
================ ============== ======== ==========================================================
model            string         no       model
batch_size       int32          no       global batch size of the run, >= 1
epoch            int32          no       epoch index, >= 0
samples_seen     float64        no       training samples processed when evaluated, >= 0
metric           float64        no       validation metric (accuracy, or a loss-like metric)
metric_name      string         yes      what ``metric`` is (``"accuracy"``, ``"loss"``, ...)
mean_entropy     float64        yes      mean normalized entropy of the logits, in [0, 1]
                                         (sim.entropy: -sum p log p / log C per sample)
iteration        int64          yes      optimizer steps done
progress         float64        yes      Pollux's scale-invariant progress (samples in units of
                                         the initial batch, weighted by statistical efficiency)
grad_sqr         float64        yes      squared gradient norm estimate (Pollux)
grad_var         float64        yes      gradient variance estimate (Pollux)
source           string         yes      provenance
================ ============== ======== ==========================================================

Required input columns are the non-nullable ones; missing nullable columns become nulls and
unknown columns are dropped with a :class:`CalibrationWarning`.  Every rule above is checked on
every row; a violation is a :class:`~sim.errors.TraceError` naming the file, the 0-based row, the
field, and the model and GPU type of that row.  In CSV files ``placement`` is written ``"2|2"``.
Files written here carry the schema name and version, plus free-form trace information (hardware,
date, software versions) as JSON, in the Parquet key-value metadata.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..cluster import canonical_gpu_type
from ..errors import ConfigError, TraceError

__all__ = [
    "MEASUREMENT_SCHEMA", "LEARNING_CURVE_SCHEMA", "SCHEMA_VERSION", "CalibrationWarning",
    "validate_measurements", "validate_learning_curves", "measurements_from_rows",
    "learning_curves_from_rows", "read_measurements", "write_measurements",
    "read_learning_curves", "write_learning_curves", "read_trace_info", "parse_placement",
    "empty_measurements",
]

SCHEMA_VERSION = "1"


class CalibrationWarning(UserWarning):
    """A calibration input or fit that is usable but incomplete (names model and GPU type)."""


def _f(name: str, typ: pa.DataType, nullable: bool, doc: str) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={"doc": doc})


MEASUREMENT_SCHEMA = pa.schema([
    _f("model", pa.string(), False, "model / job type"),
    _f("gpu_type", pa.string(), False, "canonical GPU type"),
    _f("server_id", pa.string(), True, "server measured; null = unknown"),
    _f("source", pa.string(), True, "provenance"),
    _f("n_gpus", pa.int32(), False, "GPUs (replicas), >= 1"),
    _f("n_nodes", pa.int32(), False, "servers spanned, 1..n_gpus"),
    _f("placement", pa.list_(pa.int32()), True, "GPUs per server"),
    _f("local_bsz", pa.int32(), False, "per-GPU batch of one pass, >= 1"),
    _f("step_time_s", pa.float64(), False, "optimizer step incl. sync and update, s, > 0"),
    _f("sync_time_s", pa.float64(), True, "step time minus accumulation-step time, s"),
    _f("data_time_s", pa.float64(), True, "data loading wait, s"),
    _f("forward_s", pa.float64(), True, "forward pass, s"),
    _f("backward_s", pa.float64(), True, "backward pass, s"),
    _f("update_s", pa.float64(), True, "optimizer update, s"),
    _f("step_time_std_s", pa.float64(), True, "std of the step time over repeats, s"),
    _f("repeats", pa.int32(), True, "timed steps averaged"),
], metadata={"clustersim.schema": "measurements", "clustersim.schema_version": SCHEMA_VERSION})

LEARNING_CURVE_SCHEMA = pa.schema([
    _f("model", pa.string(), False, "model"),
    _f("batch_size", pa.int32(), False, "global batch size, >= 1"),
    _f("epoch", pa.int32(), False, "epoch, >= 0"),
    _f("samples_seen", pa.float64(), False, "training samples processed, >= 0"),
    _f("metric", pa.float64(), False, "validation metric"),
    _f("metric_name", pa.string(), True, "what metric is"),
    _f("mean_entropy", pa.float64(), True, "mean normalized entropy of the logits, [0, 1]"),
    _f("iteration", pa.int64(), True, "optimizer steps done"),
    _f("progress", pa.float64(), True, "Pollux scale-invariant progress"),
    _f("grad_sqr", pa.float64(), True, "squared gradient norm estimate"),
    _f("grad_var", pa.float64(), True, "gradient variance estimate"),
    _f("source", pa.string(), True, "provenance"),
], metadata={"clustersim.schema": "learning_curves", "clustersim.schema_version": SCHEMA_VERSION})

_TRACE_INFO_KEY = b"clustersim.trace_info"
_TIME_COLS = ("sync_time_s", "data_time_s", "forward_s", "backward_s", "update_s", "step_time_std_s")


# ----------------------------------------------------------------------------- helpers
def parse_placement(value, *, where: str = "placement") -> list[int] | None:
    """``[2, 2]``, ``"2|2"``, ``"2,2"`` or ``"2 2"`` -> ``[2, 2]``; None/"" -> None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        out = [int(v) for v in value]
    else:
        s = str(value).strip()
        if not s:
            return None
        parts = [p for p in re.split(r"[|,;\s+]+", s.strip("[]()")) if p]
        if not all(p.isdigit() for p in parts):
            raise ConfigError(f"{where}: {value!r} is not a '|'-separated list of GPU counts")
        out = [int(p) for p in parts]
    return out


def empty_measurements() -> pa.Table:
    return MEASUREMENT_SCHEMA.empty_table()


def _complete(rows: Iterable[Mapping], schema: pa.Schema) -> pa.Table:
    names = schema.names
    cols: dict[str, list] = {n: [] for n in names}
    for r in rows:
        for n in names:
            v = r.get(n)
            if n == "placement" and v is not None:
                v = parse_placement(v)
            cols[n].append(v)
    return pa.table(cols, schema=_relaxed(schema))


def _relaxed(schema: pa.Schema) -> pa.Schema:
    """The schema with every field nullable (so that validation, not Arrow, reports nulls)."""
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)


def measurements_from_rows(rows: Iterable[Mapping], source: str = "<rows>") -> pa.Table:
    """Rows (dicts keyed by column name; absent nullable keys = null) -> validated table."""
    return validate_measurements(_complete(rows, MEASUREMENT_SCHEMA), source)


def learning_curves_from_rows(rows: Iterable[Mapping], source: str = "<rows>") -> pa.Table:
    return validate_learning_curves(_complete(rows, LEARNING_CURVE_SCHEMA), source)


def _conform(table: pa.Table, schema: pa.Schema, source: str, kind: str) -> pa.Table:
    """Check required columns, drop unknown ones, add missing nullable ones, cast types."""
    required = [f.name for f in schema if not f.nullable]
    missing = [n for n in required if n not in table.column_names]
    if missing:
        raise TraceError(f"{kind} table lacks required column(s) {', '.join(missing)} "
                         f"(required: {', '.join(required)})", file=source, field=missing[0])
    extra = [n for n in table.column_names if n not in schema.names]
    if extra:
        warnings.warn(CalibrationWarning(f"{source}: ignoring unknown {kind} column(s) "
                                         f"{', '.join(extra)}"), stacklevel=3)
    cols = []
    for f in schema:
        if f.name not in table.column_names:
            cols.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        if f.name == "placement" and not pa.types.is_list(col.type):
            vals = []
            for r, v in enumerate(col.to_pylist()):
                try:
                    vals.append(parse_placement(v))
                except ConfigError as exc:
                    raise TraceError(str(exc), file=source, row=r, field="placement") from None
            col = pa.array(vals, pa.list_(pa.int32()))
        elif f.name == "gpu_type" and col.type != pa.string() and not pa.types.is_dictionary(col.type):
            raise TraceError(f"expected strings, got {col.type}", file=source, field=f.name)
        try:
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            col = col.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TraceError(f"cannot convert to {f.type}: {exc}", file=source, field=f.name) from None
        cols.append(col)
    return pa.Table.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                 for c in cols], schema=_relaxed(schema))


def _np(table: pa.Table, name: str, dtype=float) -> np.ndarray:
    """A column as numpy: float64 with NaN for nulls, or ``dtype`` with 0 for nulls."""
    col = table.column(name)
    if dtype is float:
        col = pc.cast(col, pa.float64()).fill_null(np.nan)
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    return np.asarray(col.fill_null(0).to_numpy(zero_copy_only=False), dtype=dtype)


def _who(table: pa.Table, r: int) -> str:
    model = table.column("model")[r].as_py()
    gpu = table.column("gpu_type")[r].as_py() if "gpu_type" in table.column_names else None
    return f"model {model!r}" + (f", GPU type {gpu!r}" if gpu is not None else "")


def _check(table: pa.Table, bad: np.ndarray, source: str, field: str, what: str, values=None) -> None:
    idx = np.flatnonzero(bad)
    if idx.size:
        r = int(idx[0])
        shown = "" if values is None else f" = {np.asarray(values)[r].item()!r}"
        more = f" ({idx.size} such rows)" if idx.size > 1 else ""
        raise TraceError(f"{_who(table, r)}: {field}{shown} {what}{more}", file=source, row=r, field=field)


def _check_required_nulls(table: pa.Table, schema: pa.Schema, source: str) -> None:
    for f in schema:
        if not f.nullable and table.column(f.name).null_count:
            r = int(np.flatnonzero(table.column(f.name).is_null().to_numpy(zero_copy_only=False))[0])
            who = ""
            if f.name != "model" and table.column("model")[r].is_valid:
                who = f"model {table.column('model')[r].as_py()!r}: "
            raise TraceError(f"{who}required value is null", file=source, row=r, field=f.name)


def validate_measurements(table: pa.Table, source: str = "<memory>") -> pa.Table:
    """Check every rule of :data:`MEASUREMENT_SCHEMA`; return the table in exactly that schema."""
    t = _conform(table, MEASUREMENT_SCHEMA, source, "measurement")
    _check_required_nulls(t, MEASUREMENT_SCHEMA, source)
    models = t.column("model").to_pylist()
    for r, m in enumerate(models):
        if not m.strip():
            raise TraceError("empty model name", file=source, row=r, field="model")
    # canonical GPU types
    raw = t.column("gpu_type")
    uniq = pc.unique(raw).to_pylist()
    canon = {}
    for u in uniq:
        try:
            canon[u] = canonical_gpu_type(u)
        except ConfigError:
            r = raw.to_pylist().index(u)
            raise TraceError(f"model {models[r]!r}: GPU type {u!r} is empty", file=source, row=r,
                             field="gpu_type") from None
    if any(k != v for k, v in canon.items()):
        t = t.set_column(t.schema.get_field_index("gpu_type"), t.schema.field("gpu_type"),
                         pa.array([canon[v] for v in raw.to_pylist()], pa.string()))
    k = _np(t, "n_gpus", np.int64)
    n = _np(t, "n_nodes", np.int64)
    b = _np(t, "local_bsz", np.int64)
    _check(t, k < 1, source, "n_gpus", "is not >= 1", k)
    _check(t, (n < 1) | (n > k), source, "n_nodes", "is not in 1..n_gpus", n)
    _check(t, b < 1, source, "local_bsz", "is not >= 1", b)
    step = _np(t, "step_time_s")
    _check(t, ~(step > 0) | ~np.isfinite(step), source, "step_time_s", "is not a finite time > 0", step)
    for c in _TIME_COLS:
        v = _np(t, c)
        present = ~np.isnan(v)
        _check(t, present & (~np.isfinite(v) | (v < 0)), source, c, "is not a finite time >= 0", v)
    sync = _np(t, "sync_time_s")
    _check(t, ~np.isnan(sync) & (sync > step * (1 + 1e-9)), source, "sync_time_s",
           "exceeds step_time_s (sync time is part of the step)", sync)
    rep = t.column("repeats")
    if rep.null_count < t.num_rows:
        rv = _np(t, "repeats")
        _check(t, ~np.isnan(rv) & (rv < 1), source, "repeats", "is not >= 1", rv)
    pl = t.column("placement")
    if pl.null_count < t.num_rows:
        for r, p in enumerate(pl.to_pylist()):
            if p is None:
                continue
            if len(p) != n[r] or sum(p) != k[r] or min(p, default=0) < 1:
                raise TraceError(f"{_who(t, r)}: placement {p} does not give n_nodes={n[r]} servers "
                                 f"holding n_gpus={k[r]} GPUs (each >= 1)", file=source, row=r,
                                 field="placement")
    return t.cast(MEASUREMENT_SCHEMA)


def validate_learning_curves(table: pa.Table, source: str = "<memory>") -> pa.Table:
    """Check every rule of :data:`LEARNING_CURVE_SCHEMA`; return the table in that schema."""
    t = _conform(table, LEARNING_CURVE_SCHEMA, source, "learning-curve")
    _check_required_nulls(t, LEARNING_CURVE_SCHEMA, source)
    bs = _np(t, "batch_size", np.int64)
    _check(t, bs < 1, source, "batch_size", "is not >= 1", bs)
    ep = _np(t, "epoch", np.int64)
    _check(t, ep < 0, source, "epoch", "is not >= 0", ep)
    s = _np(t, "samples_seen")
    _check(t, ~np.isfinite(s) | (s < 0), source, "samples_seen", "is not a finite count >= 0", s)
    m = _np(t, "metric")
    _check(t, ~np.isfinite(m), source, "metric", "is not finite", m)
    h = _np(t, "mean_entropy")
    _check(t, ~np.isnan(h) & ~((h >= 0) & (h <= 1)), source, "mean_entropy", "is not in [0, 1]", h)
    return t.cast(LEARNING_CURVE_SCHEMA)


# ----------------------------------------------------------------------------- file IO
def _read_any(path: Path, schema: pa.Schema) -> pa.Table:
    src = str(path)
    if not path.exists():
        raise TraceError("file not found", file=src)
    ext = path.suffix.lower()
    try:
        if ext in (".parquet", ".pq"):
            return pq.read_table(path)
        if ext == ".csv":
            types = {f.name: (pa.string() if f.name == "placement" else f.type) for f in schema
                     if not pa.types.is_list(f.type) or f.name == "placement"}
            return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                column_types=types, strings_can_be_null=True))
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"cannot read: {exc}", file=src) from None
    raise TraceError(f"unknown format {ext!r} (use .parquet or .csv)", file=src)


def read_measurements(paths: str | Path | Sequence[str | Path]) -> pa.Table:
    """Read and validate one or several measurement files (Parquet, or CSV with our columns)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    tables = [validate_measurements(_read_any(Path(p), MEASUREMENT_SCHEMA), str(p)) for p in paths]
    if not tables:
        return empty_measurements()
    return pa.concat_tables(tables)


def read_learning_curves(paths: str | Path | Sequence[str | Path]) -> pa.Table:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    tables = [validate_learning_curves(_read_any(Path(p), LEARNING_CURVE_SCHEMA), str(p)) for p in paths]
    return pa.concat_tables(tables) if tables else LEARNING_CURVE_SCHEMA.empty_table()


def _write(table: pa.Table, schema: pa.Schema, path, trace_info: Mapping | None) -> Path:
    path = Path(path)
    meta = dict(schema.metadata or {})
    if trace_info:
        meta[_TRACE_INFO_KEY] = json.dumps(dict(trace_info), sort_keys=True, default=str).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")
    return path


def write_measurements(table: pa.Table, path, trace_info: Mapping | None = None,
                       source: str = "<memory>") -> Path:
    """Validate and write a measurement table as Parquet (zstd); ``trace_info`` -> metadata."""
    return _write(validate_measurements(table, source), MEASUREMENT_SCHEMA, path, trace_info)


def write_learning_curves(table: pa.Table, path, trace_info: Mapping | None = None,
                          source: str = "<memory>") -> Path:
    return _write(validate_learning_curves(table, source), LEARNING_CURVE_SCHEMA, path, trace_info)


def read_trace_info(path) -> dict:
    """The free-form trace information (hardware, date, versions) stored with a Parquet file."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(_TRACE_INFO_KEY)
    return json.loads(raw) if raw else {}
