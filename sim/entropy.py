"""Batched normalized entropy of training logits, the signal of entropy-guided scheduling.

For one row of logits ``z`` (C classes) with ``p = softmax(z)``::

    h(z) = -(sum_c p_c log p_c) / log C        in [0, 1]

(algorithms.md section 2.2).  :func:`normalized_entropy` returns ``h`` per row as float64;
:func:`grouped_mean_entropy` returns the mean ``h`` per group id (worker, job, epoch) in
the same pass.  Three implementations give one answer (``impl=``):

``"c"``         the C kernel ``sk_entropy_rows`` (AVX2 when the CPU has it, OpenMP threads)
``"numba"``     the Numba kernel in :mod:`sim._entropy_numba` (parallel)
``"reference"`` plain numpy float64, slow, for checking

Inputs (never copied: the kernels read the caller's buffers through zero-copy views):

* a 2-D numpy array of float16/float32/float64 whose rows are contiguous (a row stride
  other than C, e.g. a column slice ``x[:, :C]``, is fine); an array whose elements are
  not contiguous within a row is copied once, with a :class:`EntropyCopyWarning`;
* a ``pyarrow`` FixedSizeListArray of float16/32/64, also sliced (non-zero offset), or a
  List/LargeListArray whose rows all have the same length;
* the ``arrow.fixed_shape_tensor`` extension type (each tensor's last axis holds the C
  classes; a tensor of shape (T, C) gives T rows);
* a ChunkedArray, or a RecordBatch / Table with ``column=`` (name or index; optional
  when there is a single column);
* a path (``str`` / ``os.PathLike``) of an Arrow IPC file or stream: the file is memory
  mapped and processed batch by batch, so files larger than memory work.

Rules (the same in every implementation, tested):

* C = 1: ``h = 0`` by convention (one class: nothing is uncertain; log C = 0);
* a null row gives NaN; a row holding a null value gives NaN;
* a row holding NaN or +inf gives NaN; a row of only -inf gives NaN;
* -inf entries are masked classes of probability 0 that still count in C;
* in the float16/float32 paths of the C and Numba kernels, classes more than 87.3 below
  the row maximum count as probability ~0 (this changes ``h`` by less than 1e-30);
* results are clamped to [0, 1];
* float16 and float32 rows are computed in float32 with float64 accumulation (relative
  error below 1e-5 against the float64 reference), float64 rows in float64;
* each row is computed on its own, so the result does not depend on ``threads``;
  group sums are added in row order, so grouped means do not depend on it either.

Bad input raises :class:`~sim.errors.TraceError` (the data: non-float or ragged lists,
C = 0, a group column of the wrong length, negative group ids, a file that is not
Arrow) or :class:`~sim.errors.ConfigError` (an argument: an unknown ``impl``).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from ._native import check, ffi, lib
from .errors import ConfigError, TraceError

__all__ = [
    "IMPLS",
    "EntropyCopyWarning",
    "normalized_entropy",
    "grouped_mean_entropy",
    "normalized_entropy_ipc",
    "grouped_mean_entropy_ipc",
    "iter_logit_blocks",
    "LogitBlock",
]

IMPLS = ("c", "numba", "reference")

_DTYPE_CODES = {
    np.dtype(np.float16): lib.SK_ENTROPY_F16,
    np.dtype(np.float32): lib.SK_ENTROPY_F32,
    np.dtype(np.float64): lib.SK_ENTROPY_F64,
}
_ARROW_FLOATS = {
    pa.float16(): np.dtype(np.float16),
    pa.float32(): np.dtype(np.float32),
    pa.float64(): np.dtype(np.float64),
}


class EntropyCopyWarning(UserWarning):
    """A numpy input had to be copied (its rows are not contiguous in memory)."""


@dataclass(frozen=True)
class LogitBlock:
    """A zero-copy view of ``n_rows`` rows of ``n_cols`` logits.

    ``flat`` is a 1-D view whose element ``i * row_stride + j`` is logit j of row i.
    ``validity`` is an Arrow validity bitmap (bit ``validity_offset + i``) or None.
    ``nan_rows`` marks extra rows to report as NaN (null values inside a row).
    """

    flat: np.ndarray
    n_rows: int
    n_cols: int
    row_stride: int
    validity: np.ndarray | None = None
    validity_offset: int = 0
    nan_rows: np.ndarray | None = None

    def valid_mask(self) -> np.ndarray:
        """Boolean mask of present rows."""
        if self.validity is None:
            mask = np.ones(self.n_rows, dtype=bool)
        else:
            bits = np.unpackbits(self.validity, bitorder="little")
            mask = bits[self.validity_offset:self.validity_offset + self.n_rows].astype(bool)
        if self.nan_rows is not None:
            mask = mask & ~self.nan_rows
        return mask

    def as_2d(self) -> np.ndarray:
        """The rows as a 2-D strided view (no copy)."""
        item = self.flat.itemsize
        return np.lib.stride_tricks.as_strided(
            self.flat, shape=(self.n_rows, self.n_cols),
            strides=(self.row_stride * item, item), writeable=False)


# ----------------------------------------------------------------- input handling

def _what(field: str | None) -> str:
    return f"logits column {field!r}" if field else "logits"


def _check_cols(n_cols: int, field: str | None, file: str | None) -> None:
    if n_cols < 1:
        raise TraceError(f"{_what(field)} have C = {n_cols} classes per row; need C >= 1",
                         file=file, field=field)


def _numpy_block(arr: np.ndarray, field: str | None = None) -> LogitBlock:
    if arr.dtype not in _DTYPE_CODES:
        raise TraceError(f"{_what(field)} must be float16, float32 or float64, "
                         f"not {arr.dtype}", field=field)
    if arr.ndim != 2:
        raise TraceError(f"{_what(field)} must be a 2-D (rows, classes) array, "
                         f"got shape {arr.shape}", field=field)
    n, c = arr.shape
    _check_cols(c, field, None)
    item = arr.itemsize
    inner_ok = n == 0 or c <= 1 or arr.strides[1] == item
    rows_ok = n <= 1 or (arr.strides[0] % item == 0 and arr.strides[0] >= c * item)
    if not (inner_ok and rows_ok):
        warnings.warn("logits rows are not contiguous in memory; copying them once",
                      EntropyCopyWarning, stacklevel=4)
        arr = np.ascontiguousarray(arr)
    stride = arr.strides[0] // item if n > 1 else c
    if n == 0:
        return LogitBlock(np.empty(0, arr.dtype), 0, c, c)
    # a 1-D view from the first element to the last one actually used
    span = (n - 1) * stride + c
    flat = np.lib.stride_tricks.as_strided(arr, shape=(span,), strides=(item,),
                                           writeable=False)
    return LogitBlock(flat, n, c, stride)


def _bitmap(buf: pa.Buffer | None) -> np.ndarray | None:
    if buf is None:
        return None
    return np.frombuffer(buf, dtype=np.uint8)


def _child_null_rows(child: pa.Array, start: int, n: int, c: int, stride: int) -> np.ndarray | None:
    """Rows (of a list array) that hold at least one null value."""
    if child.null_count == 0 or n == 0:
        return None
    bits = np.unpackbits(_bitmap(child.buffers()[0]), bitorder="little")
    off = child.offset + start
    idx = off + (np.arange(n)[:, None] * stride + np.arange(c)[None, :])
    return ~bits[idx].astype(bool).all(axis=1)


def _values_view(child: pa.Array, first: int, count: int, field: str | None,
                 file: str | None) -> np.ndarray:
    typ = child.type
    if typ not in _ARROW_FLOATS:
        raise TraceError(f"{_what(field)} must hold float16, float32 or float64 values, "
                         f"not {typ}", file=file, field=field)
    dt = _ARROW_FLOATS[typ]
    data = child.buffers()[1]
    start = child.offset + first
    if count == 0 or data is None:
        return np.empty(0, dt)
    return np.frombuffer(data, dtype=dt, count=count, offset=start * dt.itemsize)


def _arrow_block(arr: pa.Array, field: str | None = None, file: str | None = None) -> list[LogitBlock]:
    """Zero-copy LogitBlocks of one Arrow array (a chunk)."""
    if isinstance(arr, pa.ExtensionArray):
        ext = arr.type
        if getattr(ext, "extension_name", "") != "arrow.fixed_shape_tensor":
            raise TraceError(f"{_what(field)} have extension type {ext}; expected "
                             "arrow.fixed_shape_tensor", file=file, field=field)
        perm = ext.permutation
        if perm is not None and list(perm) != sorted(perm):
            raise TraceError(f"{_what(field)}: permuted fixed_shape_tensor layouts are not "
                             "supported", file=file, field=field)
        shape = list(ext.shape)
        if not shape:
            raise TraceError(f"{_what(field)}: fixed_shape_tensor of rank 0", file=file,
                             field=field)
        per = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        blocks = _arrow_block(arr.storage, field, file)
        if per == 1:
            return blocks
        # each tensor holds `per` rows of C = shape[-1]
        out = []
        c = shape[-1]
        _check_cols(c, field, file)
        for b in blocks:
            nan_rows = None
            valid = b.valid_mask()
            if not valid.all():
                nan_rows = np.repeat(~valid, per)
            out.append(LogitBlock(b.flat, b.n_rows * per, c, c, None, 0, nan_rows))
        return out

    typ = arr.type
    n = len(arr)
    if pa.types.is_fixed_size_list(typ):
        c = typ.list_size
        _check_cols(c, field, file)
        child = arr.values  # unsliced child; the parent's offset is in list units
        first = arr.offset * c
        flat = _values_view(child, first, n * c, field, file)
        nan_rows = _child_null_rows(child, first, n, c, c)
        return [LogitBlock(flat, n, c, c, _bitmap(arr.buffers()[0]), arr.offset, nan_rows)]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        offs_dt = np.int32 if pa.types.is_list(typ) else np.int64
        offsets = np.frombuffer(arr.buffers()[1], dtype=offs_dt, count=n + 1,
                                offset=arr.offset * np.dtype(offs_dt).itemsize)
        lengths = np.diff(offsets)
        if n == 0:
            raise TraceError(f"{_what(field)}: an empty variable-length list column has no "
                             "class count; use fixed_size_list", file=file, field=field)
        c = int(lengths[0])
        if not (lengths == c).all():
            bad = int(np.nonzero(lengths != c)[0][0])
            raise TraceError(f"{_what(field)} are ragged lists: row {bad} has {int(lengths[bad])} "
                             f"values, row 0 has {c}", file=file, row=bad, field=field)
        _check_cols(c, field, file)
        child = arr.values  # unsliced
        if child.type not in _ARROW_FLOATS:
            _values_view(child, 0, 0, field, file)  # raises the dtype error
        first = int(offsets[0])
        flat = _values_view(child, first, n * c, field, file)
        nan_rows = _child_null_rows(child, first, n, c, c)
        return [LogitBlock(flat, n, c, c, _bitmap(arr.buffers()[0]), arr.offset, nan_rows)]
    raise TraceError(f"{_what(field)} must be a fixed_size_list (or equal-length list) of "
                     f"floats, or arrow.fixed_shape_tensor; got {typ}", file=file, field=field)


def _select_column(obj, column, file: str | None = None):
    names = obj.schema.names
    if column is None:
        if len(names) != 1:
            raise ConfigError(f"pass column= to pick the logits among columns {names}")
        column = 0
    if isinstance(column, int):
        if not 0 <= column < len(names):
            raise ConfigError(f"column index {column} out of range for columns {names}")
        return obj.column(column), names[column]
    if column not in names:
        raise TraceError(f"no column {column!r}; columns are {names}", file=file, field=column)
    return obj.column(column), column


def _is_path(obj) -> bool:
    return isinstance(obj, (str, os.PathLike))


def _open_ipc(path):
    """A memory-mapped Arrow IPC file (or stream) reader yielding RecordBatches."""
    p = os.fspath(path)
    try:
        source = pa.memory_map(p, "r")
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"cannot open: {exc}", file=p) from exc
    try:
        reader = pa.ipc.open_file(source)
        return p, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        pass
    try:
        source.seek(0)
        reader = pa.ipc.open_stream(source)
        return p, iter(reader)
    except pa.ArrowInvalid as exc:
        raise TraceError(f"not an Arrow IPC file or stream ({exc})", file=p) from exc


def iter_logit_blocks(logits, column=None) -> Iterator[LogitBlock]:
    """Yield zero-copy :class:`LogitBlock` views of any supported input, in row order."""
    if isinstance(logits, np.ndarray):
        yield _numpy_block(logits)
        return
    if _is_path(logits):
        path, batches = _open_ipc(logits)
        for batch in batches:
            col, name = _select_column(batch, column, path)
            yield from _arrow_block(col, name, path)
        return
    if isinstance(logits, (pa.RecordBatch, pa.Table)):
        col, name = _select_column(logits, column)
        yield from iter_logit_blocks(col)
        return
    if isinstance(logits, pa.ChunkedArray):
        for chunk in logits.chunks:
            yield from _arrow_block(chunk)
        return
    if isinstance(logits, pa.Array):
        yield from _arrow_block(logits)
        return
    if hasattr(logits, "__array__") and not isinstance(logits, (list, tuple)):
        # e.g. a torch tensor on the CPU: numpy() shares its memory
        if hasattr(logits, "detach"):
            arr = logits.detach().cpu().numpy()
        else:
            arr = np.asarray(logits)
        yield _numpy_block(arr)
        return
    raise TraceError(f"logits of type {type(logits).__name__} are not supported; pass a 2-D "
                     "numpy array, a pyarrow array / ChunkedArray / RecordBatch / Table, or an "
                     "Arrow IPC path")


# ------------------------------------------------------------------ kernels

def _threads_arg(threads) -> int:
    if threads is None:
        return 0
    t = int(threads)
    if t < 1:
        raise ConfigError(f"threads must be >= 1 or None, got {threads}")
    return t


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ConfigError(f"impl must be one of {IMPLS}, got {impl!r}")


def _reference_rows(block: LogitBlock) -> np.ndarray:
    """Plain numpy float64, same rules; no flushing of tiny probabilities."""
    x = block.as_2d().astype(np.float64)
    n, c = x.shape
    out = np.full(n, np.nan)
    if n == 0:
        return out
    with np.errstate(all="ignore"):
        m = x.max(axis=1) if c else np.full(n, -np.inf)
        ok = ~np.isnan(x).any(axis=1) & np.isfinite(m)
        d = x - m[:, None]
        is_max = d == 0
        k = is_max.sum(axis=1).astype(np.float64)
        e = np.where(is_max | ~np.isfinite(d), 0.0, np.exp(d))
        r = e.sum(axis=1)
        t = np.where(e > 0, d * e, 0.0).sum(axis=1)
        h = np.log(np.maximum(k, 1)) + np.log1p(r / np.maximum(k, 1)) - t / (k + r)
        v = h / np.log(c) if c > 1 else np.zeros(n)
    v = np.clip(v, 0.0, 1.0)
    out[ok] = v[ok]
    return out


def _c_rows(block: LogitBlock, threads: int, out: np.ndarray) -> None:
    if block.n_rows == 0:
        return
    flat = block.flat
    src = flat.view(np.uint16) if flat.dtype == np.float16 else flat
    validity = ffi.from_buffer(block.validity) if block.validity is not None else ffi.NULL
    rc = lib.sk_entropy_rows(
        ffi.from_buffer(src), _DTYPE_CODES[flat.dtype], block.n_rows, block.n_cols,
        block.row_stride, validity, block.validity_offset, threads,
        ffi.cast("double *", ffi.from_buffer(out, require_writable=True)))
    check(rc, "sk_entropy_rows")


def _numba_rows(block: LogitBlock, threads: int, out: np.ndarray) -> None:
    from . import _entropy_numba as nb
    nb.rows(block.flat, block.n_rows, block.n_cols, block.row_stride, threads, out)
    if block.validity is not None:
        out[~block.valid_mask()] = np.nan


def _block_rows(block: LogitBlock, impl: str, threads: int) -> np.ndarray:
    if impl == "reference":
        out = _reference_rows(block)
    else:
        out = np.empty(block.n_rows, dtype=np.float64)
        if impl == "c":
            _c_rows(block, threads, out)
        else:
            _numba_rows(block, threads, out)
    if impl == "reference" and block.validity is not None:
        out[~block.valid_mask()] = np.nan
    if block.nan_rows is not None:
        out[block.nan_rows] = np.nan
    return out


# --------------------------------------------------------------- public API

def normalized_entropy(logits, impl: str = "c", threads: int | None = None,
                       column=None) -> np.ndarray:
    """Per-row normalized entropy of softmax(logits), float64 in [0, 1] (NaN: see module doc).

    ``logits``: any input listed in the module docstring.  ``impl``: "c", "numba" or
    "reference".  ``threads``: worker threads (None: all); results do not depend on it.
    ``column``: the logits column of a RecordBatch, Table or IPC file.
    """
    _check_impl(impl)
    nt = _threads_arg(threads)
    parts = [_block_rows(b, impl, nt) for b in iter_logit_blocks(logits, column)]
    if not parts:
        return np.empty(0, dtype=np.float64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def normalized_entropy_ipc(path, column=None, impl: str = "c",
                           threads: int | None = None) -> np.ndarray:
    """:func:`normalized_entropy` of a memory-mapped Arrow IPC file, batch by batch."""
    if not _is_path(path):
        raise ConfigError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return normalized_entropy(path, impl=impl, threads=threads, column=column)


def _groups_for(groups, logits, field_hint: str | None):
    """Yield int64 numpy arrays of group ids aligned with the logit blocks."""
    if isinstance(groups, str) and (isinstance(logits, (pa.RecordBatch, pa.Table))
                                    or _is_path(logits)):
        return None  # a column name, resolved per batch
    if isinstance(groups, (pa.Array, pa.ChunkedArray)):
        if groups.null_count:
            raise TraceError("groups hold null ids", field=field_hint)
        groups = groups.to_numpy(zero_copy_only=False)
    g = np.asarray(groups)
    if g.ndim != 1:
        raise TraceError(f"groups must be 1-D, got shape {g.shape}", field=field_hint)
    if g.size and not np.issubdtype(g.dtype, np.integer):
        raise TraceError(f"groups must be integer ids, not {g.dtype}", field=field_hint)
    return g.astype(np.int64, copy=False)


def _validate_group_ids(g: np.ndarray, file=None, field=None, row0: int = 0) -> None:
    if g.size and g.min() < 0:
        bad = int(np.nonzero(g < 0)[0][0])
        raise TraceError(f"group id {int(g[bad])} is negative; ids must be >= 0",
                         file=file, row=row0 + bad, field=field)


class _GroupAcc:
    """Sums and counts per group id, grown on demand; added in row order."""

    def __init__(self, n_groups: int | None):
        self.fixed = n_groups is not None
        n = int(n_groups) if n_groups is not None else 0
        if n < 0:
            raise ConfigError(f"n_groups must be >= 0, got {n_groups}")
        self.sums = np.zeros(n, dtype=np.float64)
        self.counts = np.zeros(n, dtype=np.int64)

    def ensure(self, g: np.ndarray, file=None, field=None, row0=0) -> None:
        if not g.size:
            return
        top = int(g.max())
        if top >= self.sums.size:
            if self.fixed:
                bad = int(np.nonzero(g >= self.sums.size)[0][0])
                raise TraceError(f"group id {top} >= n_groups = {self.sums.size}",
                                 file=file, row=row0 + bad, field=field)
            self.sums = np.concatenate([self.sums, np.zeros(top + 1 - self.sums.size)])
            self.counts = np.concatenate([self.counts,
                                          np.zeros(top + 1 - self.counts.size, np.int64)])

    def add_rows(self, values: np.ndarray, g: np.ndarray, present: np.ndarray) -> None:
        # np.add.at adds in index order: the result is the same on any thread count
        np.add.at(self.sums, g[present], values[present])
        np.add.at(self.counts, g[present], 1)


def _grouped_block(block: LogitBlock, g: np.ndarray, acc: _GroupAcc, impl: str,
                   threads: int) -> None:
    if impl == "c" and block.nan_rows is None and block.n_rows:
        flat = block.flat
        src = flat.view(np.uint16) if flat.dtype == np.float16 else flat
        validity = ffi.from_buffer(block.validity) if block.validity is not None else ffi.NULL
        scratch = np.empty(block.n_rows, dtype=np.float64)
        g = np.ascontiguousarray(g, dtype=np.int64)
        rc = lib.sk_entropy_grouped(
            ffi.from_buffer(src), _DTYPE_CODES[flat.dtype], block.n_rows, block.n_cols,
            block.row_stride, validity, block.validity_offset,
            ffi.cast("int64_t *", ffi.from_buffer(g)), acc.sums.size, threads,
            ffi.cast("double *", ffi.from_buffer(scratch, require_writable=True)),
            ffi.cast("double *", ffi.from_buffer(acc.sums, require_writable=True)),
            ffi.cast("int64_t *", ffi.from_buffer(acc.counts, require_writable=True)))
        check(rc, "sk_entropy_grouped")
        return
    if impl == "numba" and block.nan_rows is None and block.validity is None and block.n_rows:
        from . import _entropy_numba as nb
        nb.grouped(block.flat, block.n_rows, block.n_cols, block.row_stride, g, threads,
                   acc.sums, acc.counts)
        return
    values = _block_rows(block, impl, threads)
    present = block.valid_mask()
    acc.add_rows(values, g, present)


def grouped_mean_entropy(logits, groups, impl: str = "c", threads: int | None = None,
                         column=None, n_groups: int | None = None,
                         return_counts: bool = False):
    """Mean normalized entropy per group id, computed in the same pass as the rows.

    ``groups``: integer ids >= 0, one per row (numpy / pyarrow / list), or, when
    ``logits`` is a RecordBatch, Table or IPC path, the name of the id column.
    Returns ``means`` (float64, length ``n_groups`` or max id + 1; NaN for a group with
    no rows), and ``counts`` too with ``return_counts=True``.  Null logit rows are
    skipped; a row whose entropy is NaN (NaN/+inf logits) makes its group's mean NaN.
    """
    _check_impl(impl)
    nt = _threads_arg(threads)
    acc = _GroupAcc(n_groups)
    garr = _groups_for(groups, logits, None)
    if garr is None:  # a column name of a table / IPC file: read per batch
        if _is_path(logits):
            path, batches = _open_ipc(logits)
        else:
            path = None
            batches = logits.to_batches() if isinstance(logits, pa.Table) else [logits]
        row0 = 0
        for batch in batches:
            gcol, gname = _select_column(batch, groups, path)
            g = _groups_for(gcol, None, gname)
            _validate_group_ids(g, path, gname, row0)
            col, name = _select_column(batch, column, path)
            blocks = _arrow_block(col, name, path)
            g_off = 0
            for b in blocks:
                gb = g[g_off:g_off + b.n_rows]
                g_off += b.n_rows
                acc.ensure(gb, path, gname, row0)
                _grouped_block(b, gb, acc, impl, nt)
            row0 += batch.num_rows
    else:
        _validate_group_ids(garr)
        blocks = list(iter_logit_blocks(logits, column))
        total = sum(b.n_rows for b in blocks)
        if total != garr.size:
            raise TraceError(f"groups have {garr.size} ids but logits have {total} rows")
        acc.ensure(garr)
        off = 0
        for b in blocks:
            _grouped_block(b, garr[off:off + b.n_rows], acc, impl, nt)
            off += b.n_rows
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(acc.counts > 0, acc.sums / np.maximum(acc.counts, 1), np.nan)
    return (means, acc.counts) if return_counts else means


def grouped_mean_entropy_ipc(path, column=None, group_column: str = "group",
                             impl: str = "c", threads: int | None = None,
                             n_groups: int | None = None, return_counts: bool = False):
    """:func:`grouped_mean_entropy` over a memory-mapped Arrow IPC file, batch by batch."""
    if not _is_path(path):
        raise ConfigError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return grouped_mean_entropy(path, group_column, impl=impl, threads=threads,
                                column=column, n_groups=n_groups,
                                return_counts=return_counts)


def simd_level() -> int:
    """1 where the C kernel uses its AVX2 path on this CPU, else 0."""
    return int(lib.sk_entropy_simd_level())
