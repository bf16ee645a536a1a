"""Shared machinery of the trace readers: streaming CSV/JSON input, per-row checks with skip
counts, time parsing, and the final step that turns normalized columns into a
:class:`~sim.jobs.JobTable`.

Conventions every reader follows:

* **Rows.**  ``row`` in a :class:`~sim.errors.TraceError` is the 0-based data row of the input
  file (the header line is not a row; for a JSON job log, the index of the job in the list), the
  same convention as :mod:`sim.jobs`.  CSV messages also give the physical ``line`` number.
* **Nothing is dropped silently.**  A row is either kept, *skipped* (invalid input, only with
  ``skip_invalid=True``; otherwise the first invalid row raises) or *filtered* (a documented
  mapping choice such as ``statuses=`` or ``cpu_jobs="drop"``).  Rows kept but changed by a
  mapping choice (fractional GPUs rounded up, an ambiguous local time) are counted as *adjusted*.
  :class:`TraceReport` holds all three counters by reason, with the first example of each.
* **Job ids.**  ``job_id`` is the 0-based data row of the job in the input (the job table for
  PAI), so simulated results join back to the raw file; the trace's own id is kept in
  :attr:`TraceLoad.extra`.
* **Streaming.**  Files are read in blocks (``pyarrow.csv.open_csv``, ``ParquetFile.iter_batches``,
  an incremental JSON decoder); only the normalized numeric columns of the kept rows are held.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..errors import ConfigError, TraceError
from ..fsio import CheckedUtf8
from ..jobs import JobTable
from ..limits import MAX_TIME_S, clip, fmt_num

__all__ = [
    "TraceReport",
    "TraceLoad",
    "RowCheck",
    "TRACE_MODEL",
    "FRACTIONAL_POLICIES",
    "csv_batches",
    "parquet_batches",
    "json_records",
    "to_number",
    "to_time",
    "build_load",
    "example_limit",
]

#: Model name given to trace jobs that carry no model (see :func:`sim.traces.replay_oracle`).
TRACE_MODEL = "trace"

#: How a fractional GPU request (openb ``gpu_milli``, PAI ``plan_gpu``) becomes whole GPUs:
#: ``ceil`` rounds up (a 0.5-GPU pod holds 1 GPU: the engine allocates whole GPUs); ``drop``
#: filters the job out (counted); ``error`` treats it as invalid input.
FRACTIONAL_POLICIES = ("ceil", "drop", "error")

#: Rows remembered per reason in a report (the counts are always complete).
example_limit = 10

_CSV_BLOCK = 1 << 22          # 4 MiB per CSV block
_JSON_CHUNK = 1 << 20         # 1 MiB per JSON read


# --------------------------------------------------------------------------------- report
@dataclass
class TraceReport:
    """What happened to every input row of one trace file.

    ``rows`` is the number of data rows read (JSON: jobs).  ``skipped``, ``filtered`` and
    ``adjusted`` count rows by reason; ``examples`` holds the first message per reason and
    ``example_rows`` up to :data:`example_limit` row numbers per reason.
    """

    source: str
    format: str
    rows: int = 0
    jobs: int = 0
    skipped: Counter = field(default_factory=Counter)
    filtered: Counter = field(default_factory=Counter)
    adjusted: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)
    example_rows: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    unit: str = "jobs"

    def _remember(self, kind: str, reason: str, rows: Sequence[int], message: str | None) -> None:
        key = f"{kind}:{reason}"
        if message is not None and key not in self.examples:
            self.examples[key] = message
        lst = self.example_rows.setdefault(key, [])
        if len(lst) < example_limit:
            lst.extend(int(r) for r in rows[: example_limit - len(lst)])

    def skip(self, reason: str, rows: Sequence[int], message: str | None = None) -> None:
        if len(rows):
            self.skipped[reason] += len(rows)
            self._remember("skipped", reason, rows, message)

    def filter(self, reason: str, rows: Sequence[int], message: str | None = None) -> None:
        if len(rows):
            self.filtered[reason] += len(rows)
            self._remember("filtered", reason, rows, message)

    def adjust(self, reason: str, rows: Sequence[int], message: str | None = None) -> None:
        if len(rows):
            self.adjusted[reason] += len(rows)
            self._remember("adjusted", reason, rows, message)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @property
    def n_skipped(self) -> int:
        return int(sum(self.skipped.values()))

    @property
    def n_filtered(self) -> int:
        return int(sum(self.filtered.values()))

    def lines(self) -> list[str]:
        """Human-readable lines: rows read, jobs kept, every counter with its first example."""
        out = [f"{self.source} ({self.format}): {self.rows} rows read, {self.jobs} {self.unit} kept, "
               f"{self.n_skipped} skipped as invalid, {self.n_filtered} filtered by mapping choices"]
        for kind, counter in (("skipped", self.skipped), ("filtered", self.filtered),
                              ("adjusted", self.adjusted)):
            for reason, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
                key = f"{kind}:{reason}"
                rows = self.example_rows.get(key, [])
                ex = self.examples.get(key)
                tail = f"; rows {', '.join(map(str, rows))}{' ...' if n > len(rows) else ''}" if rows else ""
                out.append(f"  {kind:8s} {n:>9d}  {reason}{tail}")
                if ex:
                    out.append(f"  {'':8s} {'':>9s}  e.g. {ex}")
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict:
        return {"source": self.source, "format": self.format, "rows": self.rows, self.unit: self.jobs,
                "skipped": dict(self.skipped), "filtered": dict(self.filtered),
                "adjusted": dict(self.adjusted), "examples": dict(self.examples),
                "example_rows": {k: list(v) for k, v in self.example_rows.items()},
                "notes": list(self.notes)}


@dataclass(eq=False)
class TraceLoad:
    """A trace normalized to the canonical job table.

    Attributes:
        jobs: the :class:`~sim.jobs.JobTable` (``job_id`` = data row of the job in the input).
        report: the :class:`TraceReport` of the read.
        extra: one row per job of ``jobs`` (same order) with ``job_id`` and format-specific
            columns the canonical schema has no place for: the trace's own id, status, the
            recorded queueing delay, the GPU type the job ran on, constraints that were ignored.
        origin_s: the trace-clock time of ``arrival_s == 0`` (POSIX seconds, UTC, for traces
            with calendar times; the trace's own clock otherwise).
        calendar: True if ``origin_s`` is a POSIX time.
        trace_gpu_type: the GPU type the recorded run times refer to (None: several/unknown);
            :func:`sim.traces.replay_oracle` uses it.
        work_known: False if the format carries no run time and a placeholder was used
            (only readers called with ``allow_missing_work=True`` do that).
    """

    jobs: JobTable
    report: TraceReport
    extra: pa.Table
    origin_s: float = 0.0
    calendar: bool = False
    trace_gpu_type: str | None = None
    work_known: bool = True

    def origin_label(self) -> str:
        if self.calendar:
            import datetime as _dt
            return _dt.datetime.fromtimestamp(self.origin_s, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"trace clock t={self.origin_s:g} s"

    def __len__(self) -> int:
        return len(self.jobs)

    def __repr__(self) -> str:
        return f"TraceLoad({len(self.jobs)} jobs from {self.report.source}, format {self.report.format})"


# --------------------------------------------------------------------------------- row checks
class RowCheck:
    """Checks on one block of rows.

    ``rows`` are the global data-row numbers of the block.  :meth:`flag` marks invalid rows
    (first error raised at :meth:`done` unless ``skip_invalid``); :meth:`drop` filters rows by a
    mapping choice; :meth:`done` returns the mask of kept rows.
    """

    def __init__(self, report: TraceReport, rows: np.ndarray, skip_invalid: bool,
                 line_offset: int | None = None):
        self.report = report
        self.rows = np.asarray(rows, np.int64)
        self.n = self.rows.shape[0]
        self.skip_invalid = skip_invalid
        self.line_offset = line_offset
        self.bad = np.zeros(self.n, bool)
        self.dropped = np.zeros(self.n, bool)
        self._errors: list[TraceError] = []

    def where(self, i: int) -> str:
        if self.line_offset is None:
            return ""
        return f" (line {int(self.rows[i]) + self.line_offset})"

    def error(self, i: int, field: str, message: str) -> TraceError:
        return TraceError(message + self.where(i), file=self.report.source, row=int(self.rows[i]), field=field)

    def flag(self, mask, reason: str, field: str, message: Callable[[int], str]) -> None:
        """Rows where ``mask`` holds are invalid input: ``reason`` for the counts, ``field`` and
        ``message(i)`` (i = index in this block) for the error."""
        m = np.asarray(mask, bool) & ~self.bad & ~self.dropped
        if not m.any():
            return
        idx = np.flatnonzero(m)
        first = self.error(int(idx[0]), field, message(int(idx[0])))
        if self.skip_invalid:
            self.report.skip(reason, self.rows[idx], str(first))
        else:
            self._errors.append(first)
        self.bad |= m

    def drop(self, mask, reason: str, message: Callable[[int], str] | None = None) -> None:
        """Rows where ``mask`` holds are filtered out by a mapping choice (counted)."""
        m = self._count(mask, reason, message, self.report.filter)
        if m is not None:
            self.dropped |= m

    def adjust(self, mask, reason: str, message: Callable[[int], str] | None = None) -> None:
        """Rows where ``mask`` holds are kept but changed by a mapping choice (counted)."""
        self._count(mask, reason, message, self.report.adjust)

    def _count(self, mask, reason, message, record):
        """Record the still-valid rows of ``mask`` under ``reason``; returns them, or None."""
        m = np.asarray(mask, bool) & ~self.bad & ~self.dropped
        if not m.any():
            return None
        idx = np.flatnonzero(m)
        ex = None
        if message is not None:
            ex = f"row {int(self.rows[idx[0]])}{self.where(int(idx[0]))}: {message(int(idx[0]))}"
        record(reason, self.rows[idx], ex)
        return m

    @property
    def ok(self) -> np.ndarray:
        """Rows neither invalid nor filtered so far."""
        return ~self.bad & ~self.dropped

    def raise_first(self) -> None:
        if self._errors:
            raise min(self._errors, key=lambda e: e.row)

    def done(self) -> np.ndarray:
        self.raise_first()
        return self.ok


# --------------------------------------------------------------------------------- CSV input
def _check_file(path) -> Path:
    p = Path(path)
    if not p.exists():
        raise TraceError("file not found", file=str(p))
    if p.is_dir():
        raise TraceError("is a directory, expected a file", file=str(p))
    if p.stat().st_size == 0:
        raise TraceError("empty file", file=str(p))
    return p


def _drop_bad_text(stream: CheckedUtf8, batch: pa.RecordBatch, rows: np.ndarray, line_offset: int,
                   report: TraceReport, skip_invalid: bool):
    """Rows of ``batch`` on lines that were not UTF-8: raise for the first, or skip and count
    them (reason ``not_utf8``).  Returns the batch and its rows without them."""
    if not stream.bad_lines:
        return batch, rows
    bad = np.isin(rows + line_offset, np.asarray(stream.bad_lines, np.int64))
    if not bad.any():
        return batch, rows
    first = int(rows[bad][0])
    err = TraceError(f"not UTF-8 text: invalid bytes (line {first + line_offset})", file=report.source,
                     row=first)
    if not skip_invalid:
        raise err
    report.skip("not_utf8", rows[bad], str(err))
    return batch.filter(pa.array(~bad)), rows[~bad]


def _sniff_delimiter(line: str, expected: str) -> str | None:
    counts = {d: line.count(d) for d in (",", ";", "\t", "|") if d != expected}
    best = max(counts, key=counts.get)
    return best if counts[best] > 0 else None


def read_header(path: Path, delimiter: str = ",") -> list[str]:
    """The column names in the first line of a CSV file (quotes honoured)."""
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
        first = f.readline()
    if not first.strip():
        raise TraceError("the first line (header) is empty", file=str(path), field=None)
    return next(csv.reader(io.StringIO(first), delimiter=delimiter))


def csv_batches(path, *, fmt_name: str, report: TraceReport, required: Sequence[str],
                optional: Sequence[str] = (), column_names: Sequence[str] | None = None,
                delimiter: str = ",", quoting: bool = True, skip_invalid: bool = False,
                block_size: int = _CSV_BLOCK) -> Iterator[tuple[dict, np.ndarray, int]]:
    """Stream a CSV file in blocks of string columns.

    Yields ``(columns, rows, line_offset)``: ``columns`` maps each required column and each
    optional column present to a ``pa.Array`` of strings (empty field = null); ``rows`` are the
    0-based data rows of the block; physical line = row + line_offset.  A header-less format
    passes ``column_names``.  Rows with the wrong number of fields raise (or are skipped with
    reason ``malformed_row``).
    """
    path = _check_file(path)
    src = str(path)
    header = column_names is None
    if header:
        names = read_header(path, delimiter)
        missing = [c for c in required if c not in names]
        if missing:
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                first = f.readline()
            hint = ""
            other = _sniff_delimiter(first, delimiter)
            if len(names) == 1 and other is not None:
                hint = (f"; the header has a single column - wrong delimiter? the file seems to use "
                        f"{other!r}, the {fmt_name} format uses {delimiter!r}")
            raise TraceError(f"not a {fmt_name} file: missing column(s) {', '.join(missing)} "
                             f"(header: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}){hint}",
                             file=src, row=None, field=missing[0])
        line_offset = 2
    else:
        names = list(column_names)
        with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
            first = f.readline()
        got = len(next(csv.reader(io.StringIO(first), delimiter=delimiter))) if quoting else len(first.rstrip("\r\n").split(delimiter))
        if got != len(names):
            other = _sniff_delimiter(first, delimiter)
            hint = f"; wrong delimiter? the file seems to use {other!r}" if got == 1 and other else ""
            raise TraceError(f"not a {fmt_name} file: the first line has {got} field(s), the format has "
                             f"{len(names)} ({', '.join(names)}){hint} (line 1)", file=src, row=0)
        line_offset = 1
    wanted = [c for c in list(required) + list(optional) if c in names]
    wanted = list(dict.fromkeys(wanted))

    malformed: list[int] = []          # data rows of malformed lines, in order

    def on_invalid(row) -> str:
        r = (row.number - line_offset) if row.number is not None else -1
        malformed.append(r)
        if skip_invalid:
            return "skip"
        return "error"

    ropt = pacsv.ReadOptions(use_threads=False, block_size=block_size,
                             column_names=None if header else names, autogenerate_column_names=False)
    popt = pacsv.ParseOptions(delimiter=delimiter, quote_char='"' if quoting else False,
                              invalid_row_handler=on_invalid, newlines_in_values=False)
    copt = pacsv.ConvertOptions(column_types={c: pa.string() for c in names}, include_columns=wanted,
                                strings_can_be_null=True, null_values=[""], quoted_strings_can_be_null=True)

    def fail(exc: Exception):
        msg = str(exc)
        if malformed and not skip_invalid:
            r = malformed[-1]
            m = re.search(r"Expected (\d+) columns, got (\d+)", msg)
            what = (f"expected {m.group(1)} fields, got {m.group(2)}" if m else msg)
            trunc = " - truncated file?" if m and int(m.group(2)) < int(m.group(1)) else ""
            raise TraceError(f"malformed row: {what}{trunc} (line {r + line_offset})", file=src, row=r,
                             field=None) from None
        if "UTF8" in msg or "utf8" in msg.lower():
            raise TraceError(f"not a text file or not UTF-8: {msg}", file=src) from None
        raise TraceError(f"cannot parse as {fmt_name}: {msg}", file=src) from None

    stream = CheckedUtf8(path, _CSV_BLOCK)
    try:
        yield from _csv_blocks(stream, ropt, popt, copt, fail, malformed, report, skip_invalid,
                               line_offset, wanted, src)
    finally:
        stream.close()


def _csv_blocks(stream, ropt, popt, copt, fail, malformed, report, skip_invalid, line_offset,
                wanted, src):
    """The block loop of :func:`csv_batches` (``malformed`` fills as pyarrow reads)."""
    seen_valid = 0
    reported = 0
    try:
        reader = pacsv.open_csv(stream, read_options=ropt, parse_options=popt, convert_options=copt)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        fail(exc)
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            fail(exc)
        # record skipped malformed rows once
        if skip_invalid and len(malformed) > reported:
            new = malformed[reported:]
            report.skip("malformed_row", new, f"file {src}, row {new[0]}: malformed row: wrong number of "
                                              f"fields (line {new[0] + line_offset})")
            reported = len(malformed)
        n = batch.num_rows
        if n == 0:
            continue
        v = np.arange(seen_valid, seen_valid + n, dtype=np.int64)
        if malformed:
            s = np.asarray(sorted(malformed), np.int64)
            s_adj = s - np.arange(s.size)
            v = v + np.searchsorted(s_adj, v, side="right")
        seen_valid += n
        report.rows += n
        batch, v = _drop_bad_text(stream, batch, v, line_offset, report, skip_invalid)
        cols = {c: batch.column(c) for c in wanted}
        yield cols, v, line_offset
    if skip_invalid and len(malformed) > reported:
        new = malformed[reported:]
        report.skip("malformed_row", new, f"file {src}, row {new[0]}: malformed row: wrong number of fields "
                                          f"(line {new[0] + line_offset})")
    report.rows += len(malformed) if skip_invalid else 0


def parquet_batches(path, *, fmt_name: str, report: TraceReport, required: Sequence[str],
                    optional: Sequence[str] = (), batch_size: int = 65536) -> Iterator[tuple[dict, np.ndarray, None]]:
    """Stream a Parquet file in record batches; yields ``(columns, rows, None)`` like
    :func:`csv_batches` (columns keep their Parquet types)."""
    path = _check_file(path)
    src = str(path)
    try:
        f = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"not a readable Parquet file (truncated?): {exc}", file=src) from None
    names = f.schema_arrow.names
    missing = [c for c in required if c not in names]
    if missing:
        raise TraceError(f"not a {fmt_name} file: missing column(s) {', '.join(missing)} "
                         f"(columns: {', '.join(names)})", file=src, field=missing[0])
    wanted = list(dict.fromkeys(c for c in list(required) + list(optional) if c in names))
    start = 0
    try:
        for batch in f.iter_batches(batch_size=batch_size, columns=wanted):
            n = batch.num_rows
            rows = np.arange(start, start + n, dtype=np.int64)
            start += n
            report.rows += n
            yield {c: batch.column(c) for c in wanted}, rows, None
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"cannot read Parquet data after row {start} (truncated?): {exc}", file=src,
                         row=start) from None


# --------------------------------------------------------------------------------- JSON input
#: Bytes that are not UTF-8 are decoded as lone surrogates (``surrogateescape``): the JSON decoder
#: takes them as ordinary characters inside strings, so one bad element is found, named by its line
#: and key, and skippable, instead of failing the whole file.
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _shown(key: str) -> str:
    """A JSON key as text that prints: bytes that were not UTF-8 as ``\\xNN``."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _bad_text_field(value, path: str = "") -> str | None:
    """The key path (``attempts[0].start_time``) of the first string, key or value, in a decoded JSON
    value that holds bytes that were not UTF-8; None if there is none."""
    if isinstance(value, str):
        return (path or "<value>") if _NOT_UTF8.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{_shown(key)}" if path else _shown(key)
            if _NOT_UTF8.search(key):
                return sub
            found = _bad_text_field(item, sub)
            if found is not None:
                return found
    elif isinstance(value, list):
        for k, item in enumerate(value):
            found = _bad_text_field(item, f"{path}[{k}]")
            if found is not None:
                return found
    return None


class _JsonText:
    """The text of a JSON file read in chunks: ``buf`` holds the unread part (plus what
    :meth:`trim` has not dropped yet), ``line_at(pos)`` the physical line of a position in it."""

    def __init__(self, f, chunk: int):
        self._f, self._chunk = f, chunk
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.buf = ""
        self.eof = False
        self._first_line = 1            # physical line of buf[0]

    def more(self) -> bool:
        if self.eof:
            return False
        raw = self._f.read(self._chunk)
        self.buf += self._utf8.decode(raw, final=not raw)
        self.eof = not raw
        return bool(raw)

    def trim(self, pos: int) -> int:
        """Drop ``buf[:pos]``; returns the new position of ``pos`` (0)."""
        self._first_line += self.buf.count("\n", 0, pos)
        self.buf = self.buf[pos:]
        return 0

    def line_at(self, pos: int) -> int:
        return self._first_line + self.buf.count("\n", 0, pos)

    def not_utf8(self, start: int, end: int) -> int | None:
        """Line of the first byte that was not UTF-8 in ``buf[start:end]``, or None."""
        m = _NOT_UTF8.search(self.buf, start, end)
        return None if m is None else self.line_at(m.start())


def json_records(path, *, report: TraceReport, skip_invalid: bool = False,
                 chunk: int = _JSON_CHUNK) -> Iterator[tuple[int, object]]:
    """Stream the elements of a top-level JSON array (or of a JSON-lines file), one at a time.

    Yields ``(index, value)``.  Never holds more than one element plus one chunk of text.  A
    file that ends inside an element or before the closing ``]`` is a truncated file
    (TraceError naming the element index).  An element with bytes that are not UTF-8 is invalid
    input named by element (row), line and key (field): with ``skip_invalid`` it is skipped and
    counted (reason ``not_utf8``), not yielded; such bytes outside any string are an error.
    """
    path = _check_file(path)
    src = str(path)
    dec = json.JSONDecoder()
    ws = re.compile(r"[\s,]*")
    with open(path, "rb") as f:
        text = _JsonText(f, chunk)
        text.more()
        pos = ws.match(text.buf, 0).end()
        while pos >= len(text.buf) and text.more():
            pos = ws.match(text.buf, pos).end()
        if pos >= len(text.buf):
            raise TraceError("no JSON content", file=src)
        array = text.buf[pos] == "["
        if array:
            pos += 1
        idx = 0
        while True:
            pos = ws.match(text.buf, pos).end()
            while pos >= len(text.buf):
                if not text.more():
                    if array:
                        raise TraceError(f"truncated file: the JSON array is not closed with ']' after "
                                         f"{idx} element(s)", file=src, row=idx)
                    return
                pos = ws.match(text.buf, pos).end()
            if array and text.buf[pos] == "]":
                _check_array_end(text, pos, src, idx)
                return
            obj, end = _json_element(text, dec, pos, src, idx)
            report.rows += 1
            if _utf8_element_ok(text, obj, pos, end, src, idx, report, skip_invalid):
                yield idx, obj
            idx += 1
            pos = text.trim(end) if end > chunk else end     # keep the buffer small


def _check_array_end(text: _JsonText, pos: int, src: str, idx: int) -> None:
    rest = text.buf[pos + 1:].strip()
    if rest or (text.more() and text.buf[pos + 1:].strip()):
        line = text.not_utf8(pos + 1, len(text.buf))
        what = f"not UTF-8 text: invalid bytes (line {line})" if line else "unexpected content"
        raise TraceError(f"{what} after the closing ']'", file=src, row=idx)


def _json_element(text: _JsonText, dec: json.JSONDecoder, pos: int, src: str, idx: int):
    """Decode the element starting at ``text.buf[pos]``, reading more text as needed; returns
    ``(value, end)``."""
    while True:
        try:
            obj, end = dec.raw_decode(text.buf, pos)
        except json.JSONDecodeError as exc:
            if text.more():
                continue
            line = text.not_utf8(pos, exc.pos + 1)
            if line is not None:
                raise TraceError(f"not UTF-8 text: invalid bytes outside a string (line {line})",
                                 file=src, row=idx) from None
            if exc.pos >= len(text.buf.rstrip()) - 1 or exc.msg.startswith("Unterminated"):
                raise TraceError(f"truncated file: JSON element {idx} is incomplete ({exc.msg})",
                                 file=src, row=idx) from None
            raise TraceError(f"invalid JSON in element {idx}: {exc.msg} at character "
                             f"{exc.pos - pos} of the element (line {text.line_at(exc.pos)})",
                             file=src, row=idx) from None
        # a number at the buffer's end may continue in the next chunk
        if end >= len(text.buf) and not text.eof and text.more():
            continue
        return obj, end


def _utf8_element_ok(text: _JsonText, obj, pos: int, end: int, src: str, idx: int,
                     report: TraceReport, skip_invalid: bool) -> bool:
    """False (counted as skipped) if element ``idx`` held bytes that were not UTF-8 and
    ``skip_invalid``; raises if it did and not ``skip_invalid``; True if it did not."""
    line = text.not_utf8(pos, end)
    if line is None:
        return True
    err = TraceError(f"not UTF-8 text: invalid bytes (line {line})", file=src, row=idx,
                     field=_bad_text_field(obj))
    if not skip_invalid:
        raise err
    report.skip("not_utf8", [idx], str(err))
    return False


# --------------------------------------------------------------------------------- conversions
_NUM_RE = r"^\s*[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|nan|NaN|inf|Inf|infinity|Infinity)\s*$"


def to_number(arr: pa.Array, chk: RowCheck, field: str, *, required: bool = True,
              integer: bool = False, what: str = "number") -> np.ndarray:
    """float64 values of a column (NaN where missing or invalid); flags missing values
    (``missing_value``), unparseable text (``bad_number``) and, with ``integer``, non-integers
    (``not_integer``)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    null = arr.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        try:
            vals = pc.cast(arr, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            ok = pc.fill_null(pc.match_substring_regex(arr, _NUM_RE), True).to_numpy(zero_copy_only=False)
            bad = ~ok & ~null
            texts = arr
            chk.flag(bad, "bad_number", field, lambda i: f"{texts[i].as_py()!r} is not a {what}")
            vals = pc.cast(pc.if_else(pa.array(bad), pa.scalar(None, arr.type), arr), pa.float64())
            null = null | bad
    elif pa.types.is_null(arr.type):
        vals = pa.nulls(len(arr), pa.float64())
    else:
        try:
            vals = pc.cast(arr, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise TraceError(f"column of type {arr.type} is not numeric", file=chk.report.source,
                             field=field) from None
    out = pc.fill_null(vals, np.nan).to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    if required:
        chk.flag(null, "missing_value", field, lambda i: "missing value")
    # NaN text ("nan") is a missing optional value but never a valid required one; inf never is
    chk.flag(~null & (~np.isfinite(out) if required else np.isinf(out)), "bad_number", field,
             lambda i: f"{fmt_num(out[i])} is not a finite {what}")
    if integer:
        frac = np.isfinite(out) & (out != np.floor(out))
        chk.flag(frac, "not_integer", field, lambda i: f"{fmt_num(out[i])} is not an integer")
    return out


#: formats tried for calendar timestamps, in order
TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M")


@lru_cache(maxsize=64)
def check_tz(tz: str | None) -> None:
    """ConfigError unless ``tz`` is None or a time zone of the IANA database."""
    if tz is None:
        return
    import zoneinfo
    try:
        zoneinfo.ZoneInfo(str(tz))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError(f"unknown time zone {clip(repr(tz))}: give an IANA name such as "
                          f"America/Los_Angeles, or 'none' for UTC") from None


def to_time(arr: pa.Array, chk: RowCheck, field: str, *, tz: str | None, required: bool = True,
            allow_none_text: bool = False) -> np.ndarray:
    """POSIX seconds (float64; NaN where missing) of a column of calendar timestamps.

    Timestamps with a UTC offset (``2023-03-01 00:18:22+08:00``) are exact.  Naive ones are
    local times in ``tz`` (an IANA name, e.g. ``America/Los_Angeles``); ``tz=None`` reads them as
    UTC (no daylight-saving shifts).  Local times that occur twice (the hour repeated when
    daylight saving ends) take the earlier instant and count as adjusted
    (``ambiguous_local_time``); local times that do not exist (the hour skipped when it
    starts) are moved forward and counted (``nonexistent_local_time``).  Unparseable text is
    invalid (``unparseable_time``).
    """
    check_tz(tz)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type):
        ts = arr
        if ts.type.tz is None and tz:
            ts = pc.assume_timezone(ts, tz, ambiguous="earliest", nonexistent="earliest")
        secs = pc.cast(pc.cast(ts, pa.timestamp("s", tz=ts.type.tz)), pa.int64())
        out = pc.fill_null(pc.cast(secs, pa.float64()), np.nan).to_numpy(zero_copy_only=False).copy()
        if required:
            chk.flag(np.isnan(out), "missing_value", field, lambda i: "missing timestamp")
        return out
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise TraceError(f"column of type {arr.type} is not a timestamp", file=chk.report.source, field=field)
    arr = pc.utf8_trim_whitespace(arr)
    if allow_none_text:
        arr = pc.if_else(pc.fill_null(pc.equal(arr, "None"), False), pa.scalar(None, arr.type), arr)
    null_in = arr.is_null().to_numpy(zero_copy_only=False)
    n = len(arr)
    out = np.full(n, np.nan)
    todo = ~null_in
    has_tz = pc.fill_null(pc.match_substring_regex(arr, r"([+-]\d\d:?\d\d|Z)\s*$"), False).to_numpy(zero_copy_only=False)
    # offset-aware
    if (has_tz & todo).any():
        for fmt in ("%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M:%S%z"):
            sel = has_tz & todo & np.isnan(out)
            if not sel.any():
                break
            sub = pc.filter(arr, pa.array(sel))
            parsed = pc.strptime(pc.replace_substring_regex(sub, r"Z$", "+0000"), format=fmt, unit="s",
                                 error_is_null=True)
            vals = pc.fill_null(pc.cast(pc.cast(parsed, pa.int64()), pa.float64()), np.nan).to_numpy(zero_copy_only=False)
            out[np.flatnonzero(sel)] = vals
    # naive
    naive = todo & ~has_tz
    if naive.any():
        parsed_any = np.zeros(n, bool)
        for fmt in TIME_FORMATS:
            sel = naive & ~parsed_any
            if not sel.any():
                break
            idx = np.flatnonzero(sel)
            sub = pc.filter(arr, pa.array(sel))
            parsed = pc.strptime(sub, format=fmt, unit="s", error_is_null=True)
            ok = parsed.is_valid().to_numpy(zero_copy_only=False)
            if not ok.any():
                continue
            if tz:
                early = pc.assume_timezone(parsed, tz, ambiguous="earliest", nonexistent="earliest")
                late = pc.assume_timezone(parsed, tz, ambiguous="latest", nonexistent="latest")
                e = pc.fill_null(pc.cast(pc.cast(early, pa.timestamp("s", tz="UTC")), pa.int64()), 0).to_numpy(zero_copy_only=False)
                l_ = pc.fill_null(pc.cast(pc.cast(late, pa.timestamp("s", tz="UTC")), pa.int64()), 0).to_numpy(zero_copy_only=False)
                diff = l_ - e
                amb, nonex = diff >= 1800, (diff > 0) & (diff < 1800)
                for flagged, reason, text in (
                        (amb, "ambiguous_local_time", "occurs twice in {tz} (daylight saving ends); the earlier instant is used"),
                        (nonex, "nonexistent_local_time", "does not exist in {tz} (daylight saving starts); the end of the gap is used")):
                    if flagged.any():
                        mask = np.zeros(n, bool)
                        mask[idx[flagged]] = True
                        chk.adjust(mask, reason, lambda i, text=text: f"{field} {arr[i].as_py()} " + text.format(tz=tz))
                parsed = pc.if_else(pa.array(nonex), late, early)
            vals = pc.fill_null(pc.cast(pc.cast(parsed, pa.timestamp("s", tz="UTC") if tz else pa.timestamp("s")), pa.int64()), 0).to_numpy(zero_copy_only=False)
            out[idx[ok]] = vals[ok].astype(np.float64)
            parsed_any[idx[ok]] = True
    bad = todo & np.isnan(out)
    texts = arr
    chk.flag(bad, "unparseable_time", field, lambda i: f"cannot parse {texts[i].as_py()!r} as a date and time")
    if required:
        chk.flag(null_in, "missing_value", field, lambda i: "missing timestamp")
    return out


def strings(arr, fill: str = "") -> pa.Array:
    """A string column with nulls replaced by ``fill`` (non-string columns are cast)."""
    if arr is None:
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    return pc.cast(pc.fill_null(arr, fill), pa.string())


def lower_set(values: Iterable[str] | None) -> set[str] | None:
    return None if values is None else {str(v).strip().lower() for v in values}


def status_filter(chk: RowCheck, status: pa.Array, keep: Iterable[str] | None, *, field: str = "status") -> None:
    """Filter rows whose status (case-insensitive) is not in ``keep`` (None keeps all)."""
    ks = lower_set(keep)
    if ks is None:
        return
    st = pc.utf8_lower(strings(status))
    vals = st.to_numpy(zero_copy_only=False)
    uniq = np.unique(vals[chk.ok]) if chk.ok.any() else []
    for u in uniq:
        if u not in ks:
            raw = u or "<empty>"
            chk.drop(vals == u, f"status {raw}", lambda i, u=u: f"{field} is {u!r} (kept: {', '.join(sorted(ks))})")


# --------------------------------------------------------------------------------- final table
def build_load(parts: list[dict], report: TraceReport, *, skip_invalid: bool,
               fractional: str = "ceil", origin: str | float = "first", calendar: bool = False,
               model: str = TRACE_MODEL, trace_gpu_type: str | None = None,
               work_known: bool = True, line_offset: int | None = None,
               arrival_field: str = "arrival", work_field: str = "duration_s") -> TraceLoad:
    """Assemble the kept rows of every block into a :class:`TraceLoad`.

    Each part maps normalized column names to arrays of equal length: ``job_id`` (int64, the
    data row), ``submit`` (float64, trace clock seconds), ``gpus`` (float64, may be
    fractional), one of ``duration_s`` / ``iterations`` (float64), optional ``user``, ``vc``,
    ``model``, ``batch_size``, ``priority``, and extra columns named ``x_<name>``.

    ``fractional`` applies to non-integer ``gpus`` (see :data:`FRACTIONAL_POLICIES`); ``origin``
    is ``"first"`` (the first kept arrival becomes 0), ``"trace"`` (keep the trace clock) or a
    number (that trace-clock time becomes 0; earlier arrivals are invalid).  Arrivals and run
    times past the horizon (:data:`sim.limits.MAX_TIME_S`) are invalid (``beyond_horizon``);
    ``arrival_field`` and ``work_field`` name the input fields they came from in messages.
    """
    if fractional not in FRACTIONAL_POLICIES:
        raise ConfigError(f"fractional={fractional!r}: choose one of {', '.join(FRACTIONAL_POLICIES)}")
    parts = [p for p in parts if len(p["job_id"])]
    keys = set()
    for p in parts:
        keys |= set(p)

    def cat(name, typ):
        arrs = []
        for p in parts:
            v = p.get(name)
            n = len(p["job_id"])
            if v is None:
                arrs.append(pa.nulls(n, typ))
            elif isinstance(v, np.ndarray):
                arrs.append(pa.array(v, typ, from_pandas=v.dtype.kind == "f"))   # NaN -> null
            else:
                arrs.append(pc.cast(v, typ))
        return pa.concat_arrays(arrs) if arrs else pa.array([], typ)

    job_id = cat("job_id", pa.int64()).to_numpy(zero_copy_only=False)
    n = job_id.size
    submit = cat("submit", pa.float64()).to_numpy(zero_copy_only=False).astype(float)
    gpus_f = cat("gpus", pa.float64()).to_numpy(zero_copy_only=False).astype(float)
    chk = RowCheck(report, job_id, skip_invalid, line_offset)
    # fractional GPUs
    frac = np.isfinite(gpus_f) & (gpus_f != np.floor(gpus_f))
    if frac.any():
        if fractional == "ceil":
            chk.adjust(frac, "fractional_gpus_rounded_up",
                       lambda i: f"{gpus_f[i]:g} GPUs -> {math.ceil(gpus_f[i])} (whole GPUs)")
        elif fractional == "drop":
            chk.drop(frac, "fractional_gpus", lambda i: f"requests {gpus_f[i]:g} GPUs (fractional='drop')")
        else:
            chk.flag(frac, "fractional_gpus", "gpus", lambda i: f"requests {gpus_f[i]:g} GPUs, not a whole "
                                                             f"number (fractional='error')")
    gpus = np.ceil(gpus_f)
    # origin
    ok = chk.ok
    if isinstance(origin, str):
        if origin == "first":
            t0 = float(np.min(submit[ok])) if ok.any() else 0.0
        elif origin == "trace":
            t0 = 0.0
        else:
            raise ConfigError(f"origin={origin!r}: use 'first', 'trace' or a number")
    else:
        t0 = float(origin)
    arrival = submit - t0
    chk.flag(np.isnan(arrival), "bad_number", arrival_field, lambda i: "arrival time is not a number")
    chk.flag(arrival < 0, "arrival_before_origin", arrival_field,
             lambda i: f"arrives at {arrival[i]:g} s, before the origin {t0:g} s")
    _beyond_horizon(chk, arrival, arrival_field, "arrives at")
    if "duration_s" in keys:
        _beyond_horizon(chk, cat("duration_s", pa.float64()).to_numpy(zero_copy_only=False),
                        work_field, "runs for")
    keep = chk.done()

    def sel(a):
        return a[keep] if isinstance(a, np.ndarray) else pc.filter(a, pa.array(keep))

    cols: dict[str, object] = {"job_id": job_id[keep], "arrival_s": arrival[keep],
                               "gpus": gpus[keep].astype(np.int32)}
    if "duration_s" in keys:
        cols["duration_s"] = sel(cat("duration_s", pa.float64()))
    if "iterations" in keys:
        cols["iterations"] = sel(cat("iterations", pa.float64()))
    for name in ("user", "vc"):
        if name in keys:
            cols[name] = sel(pc.fill_null(cat(name, pa.string()), ""))
    cols["model"] = sel(pc.fill_null(cat("model", pa.string()), model)) if "model" in keys else \
        pa.array([model] * int(keep.sum()), pa.string())
    if "batch_size" in keys:
        cols["batch_size"] = sel(pc.fill_null(cat("batch_size", pa.int32()), 0))
    if "priority" in keys:
        cols["priority"] = sel(pc.fill_null(cat("priority", pa.float64()), 1.0))
    t = pa.table(cols)
    extra_cols = {"job_id": t.column("job_id")}
    for k in sorted(x for x in keys if x.startswith("x_")):
        vals = []
        typ = None
        for p in parts:
            v = p.get(k)
            if v is not None:
                typ = (pa.from_numpy_dtype(v.dtype) if isinstance(v, np.ndarray) else v.type)
                break
        extra_cols[k[2:]] = sel(cat(k, typ))
    extra = pa.table(extra_cols)
    # sort by (arrival, job_id) so the JobTable keeps this order and extra stays aligned
    if t.num_rows > 1:
        idx = pc.sort_indices(t, sort_keys=[("arrival_s", "ascending"), ("job_id", "ascending")])
        t, extra = t.take(idx), extra.take(idx)
    try:
        jobs = JobTable.from_table(t, report.source)
    except TraceError as exc:   # a reader let an invalid row through: name the input row
        r = exc.row
        jid = int(t.column("job_id")[r].as_py()) if r is not None and r < t.num_rows else None
        raise TraceError(exc.message, file=report.source, row=jid, field=exc.field) from None
    report.jobs = len(jobs)
    return TraceLoad(jobs=jobs, report=report, extra=extra.combine_chunks(), origin_s=t0, calendar=calendar,
                     trace_gpu_type=trace_gpu_type, work_known=work_known)


def _beyond_horizon(chk: RowCheck, seconds: np.ndarray, field: str, verb: str) -> None:
    chk.flag(np.isfinite(seconds) & (seconds > MAX_TIME_S), "beyond_horizon", field,
             lambda i: f"{verb} {fmt_num(seconds[i])} s, beyond the horizon of {fmt_num(MAX_TIME_S)} s")


def positive_work(chk: RowCheck, dur: np.ndarray, field: str, *, zero: str = "drop") -> None:
    """Shared checks of a recorded run time: negative or non-finite = invalid; zero per
    ``zero`` (``drop``: filtered, counted; ``error``: invalid)."""
    chk.flag(np.isfinite(dur) & (dur < 0), "negative_duration", field, lambda i: f"negative run time {dur[i]:g} s")
    chk.flag(np.isinf(dur), "bad_number", field, lambda i: f"run time {fmt_num(dur[i])} is not finite")
    if zero == "drop":
        chk.drop(dur == 0, "zero_duration", lambda i: "run time 0 s (zero_duration='drop')")
    elif zero == "error":
        chk.flag(dur == 0, "zero_duration", field, lambda i: "run time 0 s")
    else:
        raise ConfigError(f"zero_duration={zero!r}: use 'drop' or 'error'")


def gpu_count_checks(chk: RowCheck, gpus: np.ndarray, field: str, *, cpu_jobs: str = "drop",
                     allow_fraction: bool = False) -> None:
    """Negative GPU counts are invalid; zero GPUs (a CPU job) per ``cpu_jobs``:
    ``drop`` (filtered, counted) or ``error`` (invalid: GPUs are required)."""
    chk.flag(np.isfinite(gpus) & (gpus < 0), "negative_gpus", field, lambda i: f"negative GPU count {gpus[i]:g}")
    if not allow_fraction:
        chk.flag(np.isfinite(gpus) & (gpus != np.floor(gpus)), "not_integer", field,
                 lambda i: f"GPU count {gpus[i]:g} is not an integer")
    if cpu_jobs == "drop":
        chk.drop(gpus == 0, "cpu_job (0 GPUs)", lambda i: "requests 0 GPUs (cpu_jobs='drop')")
    elif cpu_jobs == "error":
        chk.flag(gpus == 0, "zero_gpus", field, lambda i: "requests 0 GPUs; a GPU job needs at least 1")
    else:
        raise ConfigError(f"cpu_jobs={cpu_jobs!r}: use 'drop' or 'error'")
