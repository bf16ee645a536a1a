"""The canonical job table: a documented Arrow schema, read and written as Parquet and CSV.

Columns (:data:`JOB_SCHEMA`; units are seconds):

================= ================ ========= =====================================================
column            type             nullable  meaning
================= ================ ========= =====================================================
job_id            int64            no        unique id (default: the input row number)
arrival_s         float64          no        submission time, >= 0
user              string           no        submitting user (default "")
vc                string           no        virtual cluster / tenant (default "")
gpus              int32            no        requested GPUs; for elastic jobs the preferred count
gpus_min          int32            no        fewest GPUs the job runs on (default: gpus, or
                                             min(gpus_allowed))
gpus_max          int32            no        most GPUs the job uses (default: gpus, or
                                             max(gpus_allowed))
gpus_allowed      list<int32>      yes       finite set of allowed counts (Hops' requirement set);
                                             null = any count in [gpus_min, gpus_max]
iterations        float64          yes       total work in iterations
duration_s        float64          yes       total work as run time on the reference GPU type
                                             (v100) at ``gpus`` GPUs, consolidated
model             string           no        model name, a key of the throughput table
batch_size        int32            no        global batch size; 0 = unknown (default 0)
priority          float64          no        priority weight (default 1.0)
budget_iterations float64          yes       the user's budget: the iterations the user asked for
                                             (in the unit of the job's work, see below); null = no
                                             budget.  Read by the learning simulator for
                                             time-to-accuracy jobs (sim.learning, docs/eghs.md)
================= ================ ========= =====================================================

Exactly one of ``iterations`` / ``duration_s`` is non-null in each row.  Required input columns:
``arrival_s``, ``gpus``, ``model`` and at least one of ``iterations`` / ``duration_s``; the others
get the defaults above.  Rules checked on every row (a violation is a :class:`TraceError` naming
the file, the 0-based data row of the input and the field): 0 <= arrival <= 1e10 s (the horizon,
:data:`sim.limits.MAX_TIME_S`); gpus >= 1;
1 <= gpus_min <= gpus <= gpus_max; allowed counts >= 1, inside [gpus_min, gpus_max] and containing
gpus; exactly one of iterations / duration_s; work > 0 and finite, duration_s <= 1e10 s; priority
finite and >= 0;
batch_size >= 0; budget_iterations null or > 0 and finite; job_id unique.  The table is then sorted
by (arrival_s, job_id).

The budget is what the user asked for, not the work the simulator runs: ``iterations`` /
``duration_s`` is the truth (for a time-to-accuracy job, the work to its target), and no rule ties
the budget to it, since a user may ask for more than the target needs (the usual case, and the only
one :func:`sim.learning.workload.learning_workload` generates) or for less.  Its unit is the
work's: iterations at the job's requested batch, i.e. the ``iterations`` column's unit, or for a
row with ``duration_s`` the iterations that duration makes at the reference rate
(:meth:`JobTable.work_iterations`).  Files written before the column existed (schema
``jobs/1``) read with every budget null.

In CSV files ``gpus_allowed`` is written as ``"1|2|4"`` (empty = null).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .errors import ConfigError, TraceError
from .fsio import CheckedUtf8, atomic_path
from .limits import MAX_TIME_S, fmt_num

__all__ = ["JOB_SCHEMA", "JobTable", "REQUIRED_COLUMNS"]

JOB_SCHEMA = pa.schema([
    pa.field("job_id", pa.int64(), nullable=False),
    pa.field("arrival_s", pa.float64(), nullable=False),
    pa.field("user", pa.string(), nullable=False),
    pa.field("vc", pa.string(), nullable=False),
    pa.field("gpus", pa.int32(), nullable=False),
    pa.field("gpus_min", pa.int32(), nullable=False),
    pa.field("gpus_max", pa.int32(), nullable=False),
    pa.field("gpus_allowed", pa.list_(pa.int32()), nullable=True),
    pa.field("iterations", pa.float64(), nullable=True),
    pa.field("duration_s", pa.float64(), nullable=True),
    pa.field("model", pa.string(), nullable=False),
    pa.field("batch_size", pa.int32(), nullable=False),
    pa.field("priority", pa.float64(), nullable=False),
    pa.field("budget_iterations", pa.float64(), nullable=True),
], metadata={"clustersim.schema": "jobs/2"})

REQUIRED_COLUMNS = ("arrival_s", "gpus", "model")


class JobTable:
    """A validated job table sorted by (arrival_s, job_id).

    Build with :meth:`from_table`, :meth:`read` or :func:`sim.workload.generate_workload`.
    ``skipped`` lists the TraceErrors of rows dropped under ``skip_invalid=True``.
    """

    def __init__(self, table: pa.Table, source: str = "<memory>", skipped=None):
        # Internal: ``table`` must already be validated and sorted (use from_table).
        self.table = table
        self.source = source
        self.skipped: list[TraceError] = list(skipped or [])
        self._np: dict[str, np.ndarray] = {}

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_table(cls, t: pa.Table, source: str = "<memory>", *, skip_invalid: bool = False,
                   require_sorted: bool = False) -> "JobTable":
        """Validate, fill defaults, cast to :data:`JOB_SCHEMA` and sort.

        With ``skip_invalid`` bad rows are dropped and recorded in ``skipped`` instead of raising.
        With ``require_sorted`` a row whose arrival is earlier than the previous row's is an error.
        """
        return cls(*_validate(t, source, skip_invalid=skip_invalid, require_sorted=require_sorted))

    @classmethod
    def from_columns(cls, source: str = "<memory>", **columns) -> "JobTable":
        """Convenience: ``JobTable.from_columns(arrival_s=[...], gpus=[...], model=[...], ...)``."""
        return cls.from_table(pa.table({k: (v if isinstance(v, (pa.Array, pa.ChunkedArray)) else
                                            pa.array(v.tolist() if isinstance(v, np.ndarray) and v.dtype == object
                                                     else v))
                                        for k, v in columns.items()}), source)

    @classmethod
    def read(cls, path, *, skip_invalid: bool = False, require_sorted: bool = False) -> "JobTable":
        """Read a Parquet (``.parquet``/``.pq``) or CSV (``.csv``) job table."""
        path = Path(path)
        src = str(path)
        if not path.exists():
            raise TraceError("job table not found", file=src)
        if path.is_dir():
            raise TraceError("is a directory, expected a job table file", file=src)
        ext = path.suffix.lower()
        not_utf8 = np.zeros(0, np.int64)          # data rows on lines that were not UTF-8 (CSV)
        try:
            if ext in (".parquet", ".pq"):
                t = pq.read_table(path)
            elif ext == ".csv":
                t, not_utf8 = _read_csv(path)
            else:
                raise TraceError(f"unknown job table format {ext!r} (use .parquet or .csv)", file=src)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
            raise TraceError(f"cannot read job table: {exc}", file=src) from None
        except UnicodeDecodeError as exc:
            raise TraceError(f"not UTF-8 text: {exc.reason} (a binary file?)", file=src) from None
        return cls(*_validate(t, src, skip_invalid=skip_invalid, require_sorted=require_sorted,
                              not_utf8=not_utf8))

    def write(self, path) -> None:
        """Write Parquet (``.parquet``/``.pq``) or CSV (``.csv``) by extension."""
        path = Path(path)
        ext = path.suffix.lower()
        if ext not in (".parquet", ".pq", ".csv"):
            raise ConfigError(f"cannot write job table to {path}: use a .parquet or .csv extension")
        with atomic_path(path) as tmp:
            if ext == ".csv":
                t = self.table
                allowed = t.column("gpus_allowed").to_pylist()
                s = pa.array(["" if a is None else "|".join(str(x) for x in a) for a in allowed], pa.string())
                t = t.set_column(t.schema.get_field_index("gpus_allowed"), "gpus_allowed", s)
                pacsv.write_csv(t, tmp)
            else:
                pq.write_table(self.table, tmp)

    def with_budgets(self, budget) -> "JobTable":
        """This table with ``budget_iterations`` set to ``budget`` (one value per job in table
        order; NaN: no budget), validated like any input."""
        b = np.asarray(budget, float)
        if b.shape != (len(self),):
            raise ConfigError(f"{self.source}: need one budget per job ({len(self)}), got shape {b.shape}")
        t = self.table
        col = pa.array(b, pa.float64(), mask=np.isnan(b))
        out = JobTable.from_table(t.set_column(t.schema.get_field_index("budget_iterations"),
                                               "budget_iterations", col), self.source)
        return JobTable(out.table, self.source, self.skipped)

    # ----------------------------------------------------------------- accessors
    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        return f"JobTable({len(self)} jobs from {self.source})"

    def _col(self, name: str, fill=None) -> np.ndarray:
        a = self._np.get(name)
        if a is None:
            col = self.table.column(name)
            if fill is not None:
                col = pc.fill_null(col, fill)
            a = col.to_numpy()
            a.setflags(write=False)
            self._np[name] = a
        return a

    @property
    def job_id(self) -> np.ndarray:
        return self._col("job_id")

    @property
    def arrival_s(self) -> np.ndarray:
        return self._col("arrival_s")

    @property
    def gpus(self) -> np.ndarray:
        return self._col("gpus")

    @property
    def gpus_min(self) -> np.ndarray:
        return self._col("gpus_min")

    @property
    def gpus_max(self) -> np.ndarray:
        return self._col("gpus_max")

    @property
    def iterations(self) -> np.ndarray:
        """float64, NaN where null."""
        return self._col("iterations", np.nan)

    @property
    def duration_s(self) -> np.ndarray:
        """float64, NaN where null."""
        return self._col("duration_s", np.nan)

    @property
    def priority(self) -> np.ndarray:
        return self._col("priority")

    @property
    def budget_iterations(self) -> np.ndarray:
        """float64, NaN where null (no budget)."""
        return self._col("budget_iterations", np.nan)

    @property
    def batch_size(self) -> np.ndarray:
        return self._col("batch_size")

    @property
    def models(self) -> np.ndarray:
        a = self._np.get("model")
        if a is None:
            a = np.array(self.table.column("model").to_pylist(), dtype=object)
            self._np["model"] = a
        return a

    @property
    def users(self) -> np.ndarray:
        return np.array(self.table.column("user").to_pylist(), dtype=object)

    @property
    def vcs(self) -> np.ndarray:
        return np.array(self.table.column("vc").to_pylist(), dtype=object)

    def gpus_allowed(self) -> list[tuple[int, ...] | None]:
        """Per job: the allowed GPU counts, or None when any count in [gpus_min, gpus_max] is."""
        return [None if a is None else tuple(a) for a in self.table.column("gpus_allowed").to_pylist()]

    def model_codes(self, model_names: Sequence[str]) -> np.ndarray:
        """int32 index of each job's model in ``model_names``; ConfigError on the first unknown."""
        names = list(model_names)
        dict_col = pc.dictionary_encode(self.table.column("model")).combine_chunks()
        uniq = dict_col.dictionary.to_pylist()
        pos = {m: i for i, m in enumerate(names)}
        lut = np.array([pos.get(m, -1) for m in uniq], dtype=np.int32)
        idx = dict_col.indices.to_numpy(zero_copy_only=False)
        codes = lut[idx] if len(idx) else np.zeros(0, np.int32)
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            r = int(bad[0])
            raise ConfigError(f"job table {self.source}: row {r} (job_id {int(self.job_id[r])}): unknown model "
                              f"{self.models[r]!r} (known: {', '.join(names)})")
        return codes.astype(np.int32)

    def work_iterations(self, oracle, model_idx: np.ndarray | None = None) -> np.ndarray:
        """Iterations of every job: ``iterations`` where given, else ``duration_s`` times the
        oracle's reference rate at the job's requested count."""
        if model_idx is None:
            model_idx = self.model_codes(oracle.models)
        it = self.iterations.copy()
        need = np.isnan(it)
        if need.any():
            it[need] = self.duration_s[need] * oracle.reference_rate(model_idx[need], self.gpus[need])
        return it

    def validate_against(self, cluster=None, model_names: Sequence[str] | None = None, *,
                         skip_invalid: bool = False, oracle=None, mixing: bool = False) -> "JobTable":
        """Check each job fits ``cluster`` (gpus_min <= total GPUs) and its model is known;
        with ``oracle`` (and ``cluster``) also that it can run: throughput > 0 on some GPU type
        of the cluster at its request, on a type with at least that many GPUs (``mixing``: the
        types it can run on together, for policies that mix types).

        Raises TraceError naming the row (0-based in this table) and field, or with
        ``skip_invalid`` returns a new JobTable without those rows (their errors appended to
        ``skipped``).
        """
        bad = np.zeros(len(self), dtype=bool)
        errors: list[TraceError] = []

        def flag(mask: np.ndarray, field, msg) -> None:
            for r in np.flatnonzero(mask & ~bad):
                e = TraceError(msg(r), file=self.source, row=int(r), field=field(r) if callable(field) else field)
                if not skip_invalid:
                    raise e
                errors.append(e)
            bad[:] |= mask

        if cluster is not None:
            total = cluster.total_gpus
            gmin, gpus = self.gpus_min, self.gpus
            flag(gmin > total, lambda r: "gpus" if gmin[r] == gpus[r] else "gpus_min",
                 lambda r: f"job needs at least {int(gmin[r])} GPUs, the cluster "
                           f"{cluster.name} has {total}")
        if model_names is not None:
            known = set(model_names)
            models = self.models
            flag(np.array([m not in known for m in models], dtype=bool), "model",
                 lambda r: f"unknown model {models[r]!r}")
        if oracle is not None and cluster is not None and len(self):
            self._flag_unrunnable(cluster, oracle, mixing, bad, flag)
        if not bad.any():
            return self
        errors.sort(key=lambda e: e.row)
        return JobTable(self.table.filter(pa.array(~bad)), self.source, self.skipped + errors)


    def _flag_unrunnable(self, cluster, oracle, mixing, bad, flag) -> None:
        """Rows no placement can run (see validate_against); rows flagged already are left."""
        known = np.array([m in set(oracle.models) for m in self.models], dtype=bool) & ~bad
        rows = np.flatnonzero(known)
        if rows.size == 0:
            return
        n_types = len(cluster.gpu_types)
        model = np.repeat(self.model_codes(oracle.models)[rows].astype(np.int64), n_types)
        gpus = self.gpus[rows].astype(np.int64)
        mask = np.tile(np.left_shift(np.int64(1), np.arange(n_types, dtype=np.int64)), rows.size)
        rates = np.asarray(oracle.rates(model, np.repeat(gpus, n_types), np.ones(model.size, np.int64),
                                        mask, np.ones(model.size), cluster.gpu_types), float)
        ok = (rates.reshape(rows.size, n_types) > 0)
        cap = ok * cluster.gpus_per_type()[None, :]
        room = cap.sum(axis=1) if mixing else cap.max(axis=1)
        bad_rows = np.zeros(len(self), dtype=bool)
        bad_rows[rows] = room < gpus
        zero = np.zeros(len(self), dtype=bool)
        zero[rows] = ~ok.any(axis=1)
        models = self.models
        flag(bad_rows & zero, "model",
             lambda r: f"model {models[r]!r} has throughput 0 on every GPU type of cluster {cluster.name}")
        flag(bad_rows & ~zero, "gpus",
             lambda r: f"job asks for {int(self.gpus[r])} GPUs, more than any GPU type of cluster "
                       f"{cluster.name} where model {models[r]!r} can run has")


# --------------------------------------------------------------------- CSV
def _read_csv(path: Path) -> tuple[pa.Table, np.ndarray]:
    """The table, and the data rows on lines that were not UTF-8 (their bad bytes read as U+FFFD;
    rows are lines - 2: the header is line 1)."""
    types = {"user": pa.string(), "vc": pa.string(), "model": pa.string(), "gpus_allowed": pa.string(),
             "iterations": pa.float64(), "duration_s": pa.float64(), "arrival_s": pa.float64(),
             "priority": pa.float64(), "budget_iterations": pa.float64()}
    with CheckedUtf8(path) as stream:
        t = pacsv.read_csv(stream, convert_options=pacsv.ConvertOptions(column_types=types,
                                                                        strings_can_be_null=False))
        not_utf8 = np.asarray(stream.bad_lines, np.int64) - 2
    if "gpus_allowed" in t.column_names:
        vals = t.column("gpus_allowed").to_pylist()
        out = []
        for r, v in enumerate(vals):
            v = (v or "").strip()
            if not v:
                out.append(None)
                continue
            try:
                out.append([int(x) for x in v.split("|")])
            except ValueError:
                raise TraceError(f"{v!r} is not a '|'-separated list of integers", file=str(path), row=r,
                                 field="gpus_allowed") from None
        t = t.set_column(t.schema.get_field_index("gpus_allowed"), "gpus_allowed",
                         pa.array(out, pa.list_(pa.int64())))
    return t, not_utf8


# --------------------------------------------------------------------- validation
def _cast(col: pa.ChunkedArray, typ: pa.DataType, field: str, source: str) -> pa.ChunkedArray:
    if col.type == typ:
        return col
    if pa.types.is_null(col.type):
        return pa.chunked_array([pa.nulls(len(col), typ)])
    try:
        return col.cast(typ)  # safe cast: overflow and lossy float->int raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        # find the first offending row for a helpful message
        vals = col.to_pylist()
        for r, v in enumerate(vals):
            try:
                pa.array([v]).cast(typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                raise TraceError(f"value {v!r} is not a valid {typ}", file=source, row=r, field=field) from None
        raise TraceError(f"column of type {col.type} cannot be read as {typ}: {exc}", file=source,
                         field=field) from None


def _text_field(t: pa.Table, row: int) -> str | None:
    """The first string column whose value in ``row`` holds U+FFFD (bytes that were not UTF-8)."""
    for name in t.column_names:
        if pa.types.is_string(t.schema.field(name).type):
            value = t.column(name)[row].as_py()
            if value is not None and "\ufffd" in value:
                return name
    return None


def _validate(t: pa.Table, source: str, *, skip_invalid: bool, require_sorted: bool,
              not_utf8: np.ndarray | None = None):
    if not isinstance(t, pa.Table):
        raise ConfigError(f"{source}: expected a pyarrow Table, got {type(t).__name__}")
    names = set(t.column_names)
    unknown = names - set(JOB_SCHEMA.names)
    if unknown:
        raise TraceError(f"unknown column(s) {', '.join(sorted(unknown))} (schema: {', '.join(JOB_SCHEMA.names)})",
                         file=source, field=sorted(unknown)[0])
    for c in REQUIRED_COLUMNS:
        if c not in names:
            raise TraceError("missing required column", file=source, field=c)
    if "iterations" not in names and "duration_s" not in names:
        raise TraceError("missing work column: need 'iterations' or 'duration_s'", file=source,
                         field="iterations")
    n = t.num_rows
    cols: dict[str, pa.ChunkedArray] = {}
    for f in JOB_SCHEMA:
        if f.name in names:
            cols[f.name] = _cast(t.column(f.name), f.type, f.name, source)
    # null user/vc become ""; a null model is reported below
    for c in ("user", "vc"):
        cols[c] = pc.fill_null(cols[c], "") if c in cols else pa.chunked_array([pa.array([""] * n, pa.string())])
    if "job_id" not in cols:
        cols["job_id"] = pa.chunked_array([pa.array(np.arange(n, dtype=np.int64))])
    if "batch_size" not in cols:
        cols["batch_size"] = pa.chunked_array([pa.array(np.zeros(n, np.int32))])
    if "priority" not in cols:
        cols["priority"] = pa.chunked_array([pa.array(np.ones(n))])
    for c in ("iterations", "duration_s", "budget_iterations"):
        if c not in cols:
            cols[c] = pa.chunked_array([pa.nulls(n, pa.float64())])
    if "gpus_allowed" not in cols:
        cols["gpus_allowed"] = pa.chunked_array([pa.nulls(n, pa.list_(pa.int32()))])

    bad = np.zeros(n, dtype=bool)
    errors: list[TraceError] = []

    def flag(mask: np.ndarray, field: str, msg) -> None:
        # Collect errors (only the first row per check unless skipping); the lowest row wins.
        mask = mask & ~bad
        if not mask.any():
            return
        rows = np.flatnonzero(mask) if skip_invalid else np.flatnonzero(mask)[:1]
        for r in rows:
            errors.append(TraceError(msg(int(r)), file=source, row=int(r), field=field))
        bad[:] |= mask

    def isnull(c: str) -> np.ndarray:
        return cols[c].is_null().to_numpy(zero_copy_only=False)

    def num(c: str, fill) -> np.ndarray:
        return pc.fill_null(cols[c], fill).to_numpy()

    # rows on lines that were not UTF-8 (CSV): named by line and field, skippable
    for r in (not_utf8 if not_utf8 is not None else ()):
        flag(np.arange(n) == r, _text_field(t, int(r)),
             lambda r: f"not UTF-8 text: invalid bytes (line {r + 2})")
    # nulls in non-nullable columns
    for c in ("job_id", "arrival_s", "gpus", "model", "batch_size", "priority", "gpus_min", "gpus_max"):
        if c in cols and cols[c].null_count:
            flag(isnull(c), c, lambda r: "missing value")
    arrival = num("arrival_s", 0.0)
    flag(np.isnan(arrival), "arrival_s", lambda r: "arrival is NaN")
    flag(~np.isfinite(arrival) | (arrival < 0), "arrival_s",
         lambda r: f"arrival {fmt_num(arrival[r])} is negative or infinite")
    flag(arrival > MAX_TIME_S, "arrival_s",
         lambda r: f"arrival {fmt_num(arrival[r])} s is beyond the horizon of {fmt_num(MAX_TIME_S)} s")
    if require_sorted and n > 1:
        dec = np.zeros(n, dtype=bool)
        dec[1:] = arrival[1:] < arrival[:-1]
        flag(dec, "arrival_s", lambda r: f"arrivals are not sorted: {fmt_num(arrival[r])} after "
                                           f"{fmt_num(arrival[r - 1])}")
    gpus = num("gpus", 1)
    flag(gpus < 1, "gpus", lambda r: f"requests {int(gpus[r])} GPUs (must be >= 1)")

    # gpus_allowed: flatten once
    ga = cols["gpus_allowed"].combine_chunks()
    ga_null = ga.is_null().to_numpy(zero_copy_only=False)
    lens = pc.fill_null(pc.list_value_length(ga), 0).to_numpy().astype(np.int64)
    flat_arr = pc.list_flatten(ga)
    if flat_arr.null_count:
        r = int(np.repeat(np.arange(n), lens)[np.flatnonzero(flat_arr.is_null().to_numpy(zero_copy_only=False))[0]])
        raise TraceError("null inside the list of allowed GPU counts", file=source, row=r, field="gpus_allowed")
    flat = flat_arr.to_numpy(zero_copy_only=False).astype(np.int64)
    has_list = ~ga_null & (lens > 0)
    flag(~ga_null & (lens == 0), "gpus_allowed", lambda r: "empty list of allowed GPU counts (use null)")
    row_of = np.repeat(np.arange(n), lens)
    amin = np.full(n, np.iinfo(np.int64).max)
    amax = np.full(n, np.iinfo(np.int64).min)
    if flat.size:
        np.minimum.at(amin, row_of, flat)
        np.maximum.at(amax, row_of, flat)
    flag(has_list & (amin < 1), "gpus_allowed", lambda r: f"allowed GPU count {int(amin[r])} (must be >= 1)")
    if flat.size:
        hit = np.zeros(n, dtype=bool)
        np.logical_or.at(hit, row_of, flat == gpus[row_of])
        flag(has_list & ~hit, "gpus_allowed", lambda r: f"gpus {int(gpus[r])} is not one of the allowed counts")
    if "gpus_min" in cols:
        gmin = num("gpus_min", 1)
    else:
        gmin = np.where(has_list, amin, gpus)
    if "gpus_max" in cols:
        gmax = num("gpus_max", 1)
    else:
        gmax = np.where(has_list, amax, gpus)
    flag(gmin < 1, "gpus_min", lambda r: f"gpus_min {int(gmin[r])} (must be >= 1)")
    flag(gmin > gpus, "gpus_min", lambda r: f"gpus_min {int(gmin[r])} > gpus {int(gpus[r])}")
    flag(gpus > gmax, "gpus_max", lambda r: f"gpus {int(gpus[r])} > gpus_max {int(gmax[r])}")
    flag(has_list & ((amin < gmin) | (amax > gmax)), "gpus_allowed",
         lambda r: f"allowed counts must lie in [gpus_min, gpus_max] = [{int(gmin[r])}, {int(gmax[r])}]")

    # work
    it_null, du_null = isnull("iterations"), isnull("duration_s")
    it, du = num("iterations", 1.0), num("duration_s", 1.0)
    flag(it_null & du_null, "iterations", lambda r: "neither iterations nor duration_s is given")
    flag(~it_null & ~du_null, "duration_s", lambda r: "both iterations and duration_s are given (give one)")
    flag(np.isnan(it), "iterations", lambda r: "iterations is NaN")
    flag(np.isnan(du), "duration_s", lambda r: "duration_s is NaN")
    flag(~(it > 0) | ~np.isfinite(it), "iterations", lambda r: f"iterations {fmt_num(it[r])} must be > 0 and finite")
    flag(~(du > 0) | ~np.isfinite(du), "duration_s", lambda r: f"duration_s {fmt_num(du[r])} must be > 0 and finite")
    flag(du > MAX_TIME_S, "duration_s",
         lambda r: f"duration_s {fmt_num(du[r])} s is beyond the horizon of {fmt_num(MAX_TIME_S)} s")
    prio = num("priority", 1.0)
    flag(~np.isfinite(prio) | (prio < 0), "priority", lambda r: f"priority {fmt_num(prio[r])} must be finite and >= 0")
    budget = num("budget_iterations", 1.0)
    flag(~(budget > 0) | ~np.isfinite(budget), "budget_iterations",
         lambda r: f"budget_iterations {fmt_num(budget[r])} must be > 0 and finite (or empty: no budget)")
    bs = num("batch_size", 0)
    flag(bs < 0, "batch_size", lambda r: f"batch size {int(bs[r])} must be >= 0")
    model_empty = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(cols["model"]), ""), True).to_numpy(zero_copy_only=False)
    flag(model_empty, "model", lambda r: "empty model name")
    jid = num("job_id", 0)
    if n > 1:
        order = np.argsort(jid, kind="stable")
        dup = np.zeros(n, dtype=bool)
        dup[order[1:]] = jid[order[1:]] == jid[order[:-1]]
        flag(dup, "job_id", lambda r: f"duplicate job_id {int(jid[r])}")

    if errors and not skip_invalid:
        raise min(errors, key=lambda e: e.row)
    cols["gpus_min"] = pa.chunked_array([pa.array(gmin.astype(np.int32))])
    cols["gpus_max"] = pa.chunked_array([pa.array(gmax.astype(np.int32))])
    table = pa.table({f.name: cols[f.name] for f in JOB_SCHEMA})
    if bad.any():
        table = table.filter(pa.array(~bad))
    table = table.cast(JOB_SCHEMA)
    if table.num_rows > 1:
        idx = pc.sort_indices(table, sort_keys=[("arrival_s", "ascending"), ("job_id", "ascending")])
        a = np.asarray(idx)
        if not np.array_equal(a, np.arange(len(a))):
            table = table.take(idx)
    table = table.combine_chunks()
    errors.sort(key=lambda e: e.row)
    return table, source, errors
