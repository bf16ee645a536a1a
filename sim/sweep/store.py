"""A sweep's output folder: a Parquet dataset partitioned by cell, appended cell by cell.

Layout (``cell=<id>`` folders are Hive partitions; ``pyarrow.dataset.dataset(DIR / "jobs",
partitioning="hive")`` reads every cell's jobs with a ``cell`` column)::

    DIR/sweep.json                          manifest: sweep name, spec fingerprint, spec
    DIR/summary/cell=<id>/part-0.parquet    one row: the cell's parameters and summary metrics
    DIR/jobs/cell=<id>/part-0.parquet       per-job results (sim.metrics.RESULT_SCHEMA)
    DIR/failed/cell=<id>/part-0.parquet     one row: parameters, error, traceback

A cell is finished when its summary file exists.  Every file is written to a hidden temporary
name and renamed into place, jobs before summary, so a killed sweep leaves no partial cell;
running it again skips the finished cells.  A cell that fails is recorded under failed/ and
retried on the next run; when it succeeds its failure record is removed.

Opening a folder that holds another sweep (a different spec fingerprint), or a non-empty folder
without a manifest, is a :class:`~sim.errors.ConfigError`.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ConfigError
from .cells import PARAM_COLUMNS, CellOutcome
from .spec import Cell, SweepSpec

__all__ = ["SweepStore", "MANIFEST"]

MANIFEST = "sweep.json"
_PART = "part-0.parquet"

_PARAM_TYPES = {
    "cell_id": pa.string(), "label": pa.string(), "policy": pa.string(),
    "policy_label": pa.string(), "policy_params": pa.string(), "cluster": pa.string(),
    "nodes": pa.int64(), "total_gpus": pa.int64(), "workload": pa.string(), "trace": pa.string(),
    "jobs": pa.int64(), "load": pa.float64(), "load_unit": pa.string(), "sizes": pa.string(),
    "durations": pa.string(), "seed": pa.int64(), "round_s": pa.float64(),
    "restart_delay_s": pa.float64(), "finished_at": pa.string(), "host": pa.string(),
    "pid": pa.int64(), "n_jobs": pa.int64(), "decisions": pa.int64(),
    "error": pa.string(), "traceback": pa.string(),
}


def _row_table(row: dict) -> pa.Table:
    """One row with stable types: known columns as listed, other numbers float64."""
    fields, arrays = [], []
    for k, v in row.items():
        typ = _PARAM_TYPES.get(k)
        if typ is None:
            typ = pa.float64() if isinstance(v, (int, float)) or v is None else pa.string()
            if typ == pa.float64() and v is not None:
                v = float(v)
        if typ == pa.float64() and v is None:
            v = math.nan
        fields.append(pa.field(k, typ))
        arrays.append(pa.array([v], typ))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


class SweepStore:
    """Reads and appends one sweep output folder."""

    def __init__(self, root):
        self.root = Path(root)

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, root, spec: SweepSpec) -> "SweepStore":
        """Open (creating) ``root`` for ``spec``; refuses a folder of another sweep."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise ConfigError(f"output {root} exists and is not a folder")
        manifest = root / MANIFEST
        if manifest.exists():
            try:
                doc = json.loads(manifest.read_text())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"output folder {root}: unreadable {MANIFEST}: {exc}") from None
            if doc.get("fingerprint") != spec.fingerprint:
                raise ConfigError(
                    f"output folder {root} holds the results of another sweep "
                    f"({doc.get('name')!r} from {doc.get('source')}, fingerprint "
                    f"{doc.get('fingerprint')}); this spec ({spec.name!r}, fingerprint "
                    f"{spec.fingerprint}) differs: {_first_difference(doc.get('spec'), spec.normalized)}."
                    f" Choose another --out folder")
        elif root.exists() and any(not p.name.startswith(".") for p in root.iterdir()):
            raise ConfigError(f"output folder {root} is not empty and holds no sweep ({MANIFEST} "
                              f"missing); choose an empty or new folder")
        root.mkdir(parents=True, exist_ok=True)
        store = cls(root)
        if not manifest.exists():
            store._write_json(manifest, {
                "name": spec.name, "description": spec.description, "source": spec.source,
                "fingerprint": spec.fingerprint, "spec": spec.normalized,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        store._clean_temporaries()
        return store

    def manifest(self) -> dict:
        return json.loads((self.root / MANIFEST).read_text())

    def _write_json(self, path: Path, doc: dict) -> None:
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
        os.replace(tmp, path)

    def _clean_temporaries(self) -> None:
        for kind in ("summary", "jobs", "failed"):
            d = self.root / kind
            if d.is_dir():
                for tmp in d.glob("cell=*/.*.tmp"):
                    tmp.unlink(missing_ok=True)

    # -- state -----------------------------------------------------------------------------
    def _ids(self, kind: str) -> set[str]:
        d = self.root / kind
        if not d.is_dir():
            return set()
        return {p.parent.name[len("cell="):] for p in d.glob(f"cell=*/{_PART}")}

    def finished_ids(self) -> set[str]:
        return self._ids("summary")

    def failed_ids(self) -> set[str]:
        return self._ids("failed") - self.finished_ids()

    def _path(self, kind: str, cid: str) -> Path:
        return self.root / kind / f"cell={cid}" / _PART

    def _write(self, kind: str, cid: str, table: pa.Table) -> None:
        path = self._path(kind, cid)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)

    # -- appending -------------------------------------------------------------------------
    def record(self, cell: Cell, outcome: CellOutcome) -> None:
        if outcome.ok:
            self._write("jobs", cell.id, outcome.jobs)
            self._write("summary", cell.id, _row_table(outcome.row))
            shutil.rmtree(self.root / "failed" / f"cell={cell.id}", ignore_errors=True)
        else:
            row = {"cell_id": cell.id, "label": cell.label}
            for k in PARAM_COLUMNS:
                v = cell.params[k]
                row[k] = json.dumps(v, sort_keys=True) if k == "policy_params" else v
            row.update(error=outcome.error or "", traceback=outcome.traceback or "",
                       cell_wall_s=outcome.wall_s,
                       finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            self._write("failed", cell.id, _row_table(row))

    # -- reading ---------------------------------------------------------------------------
    def _read_all(self, kind: str, ids=None) -> pa.Table | None:
        ids = sorted(self._ids(kind) if ids is None else ids)
        tables = [pq.read_table(self._path(kind, i)) for i in ids]
        if not tables:
            return None
        return pa.concat_tables(tables, promote_options="permissive")

    def summaries(self) -> pa.Table | None:
        """Every finished cell's summary row (sorted by cell id), or None."""
        return self._read_all("summary")

    def failures(self) -> pa.Table | None:
        """The failed cells that have not succeeded since, or None."""
        return self._read_all("failed", self.failed_ids())

    def jobs(self, cell_ids=None, columns=None) -> pa.Table | None:
        """Per-job results of the given (default: all finished) cells with a ``cell`` column."""
        ids = sorted(self.finished_ids() if cell_ids is None else cell_ids)
        tables = []
        for i in ids:
            t = pq.read_table(self._path("jobs", i), columns=columns)
            tables.append(t.append_column("cell", pa.array([i] * t.num_rows, pa.string())))
        return pa.concat_tables(tables) if tables else None


def _first_difference(old, new, where: str = "spec") -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if old.get(k) != new.get(k):
                return _first_difference(old.get(k), new.get(k), f"{where}.{k}")
        return f"{where} is the same"
    return f"{where} was {json.dumps(old)}, now {json.dumps(new)}"
