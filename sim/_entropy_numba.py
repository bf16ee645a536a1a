"""Numba kernels for :mod:`sim.entropy` (the ``impl="numba"`` path).

Same rules and the same arithmetic as the C kernel ``csrc/sk_entropy.c``: per row,
``m = max z``, ``d = z - m``, ``k = #(d == 0)``, ``r = sum_{d<0} exp(d)``, ``t = sum d exp(d)``,
``H = log k + log1p(r / k) - t / (k + r)``, ``h = H / log C``.  float16/float32 rows use a
float32 Cephes-style polynomial ``exp`` (written so LLVM can vectorize it) with float32
partial sums flushed into float64 every 256 elements; float64 rows use ``math.exp``.

Determinism: rows are split into a fixed number of chunks that does not depend on the
thread count, every row is computed on its own, and grouped sums are added serially in
row order, so results are identical on 1 and N threads.  The public wrappers only take
plain arrays; :mod:`sim.entropy` validates and converts inputs first.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

__all__ = ["rows", "grouped"]

_F = np.float32
_LOG2E = _F(1.44269504088896341)
_C1 = _F(0.693359375)
_C2 = _F(-2.12194440e-4)
_P0 = _F(1.9875691500e-4)
_P1 = _F(1.3981999507e-3)
_P2 = _F(8.3334519073e-3)
_P3 = _F(4.1665795894e-2)
_P4 = _F(1.6666665459e-1)
_P5 = _F(5.0000001201e-1)
_ONE = _F(1.0)
_HALF = _F(0.5)
_ZERO = _F(0.0)
_LO = _F(-87.3)
_TWO112 = _F(2.0 ** 112)
_BLOCK = 256
_N_CHUNKS = 512  # fixed: chunking must not depend on the thread count

# Only value-safe flags: no nnan/ninf (NaN rows are detected), no afn (our own exp).
_FM = {"reassoc", "nsz", "contract"}


@njit(inline="always", fastmath=_FM)
def _finish(k, r, t, inv_logc):
    s = k + r
    h = (math.log(k) if k > 1.0 else 0.0) + math.log1p(r / k) - t / s
    v = h * inv_logc
    if v < 0.0:
        v = 0.0
    if v > 1.0:
        v = 1.0
    return v


@njit(inline="always", fastmath={"nnan", "nsz", "reassoc"})
def _max_and_nan_count(z, zi, c):
    """Row max (NaNs ignored) and the number of NaNs, read from the bits."""
    m = _F(-np.inf)
    nans = 0
    for j in range(c):
        v = z[j]
        m = v if v > m else m
        b = zi[j] & np.int32(0x7FFFFFFF)
        nans += 1 if b > np.int32(0x7F800000) else 0
    return m, nans


@njit(fastmath=_FM)
def _row_f32(z, c, inv_logc, ibuf, fview):
    """z: contiguous float32 row.  ibuf/fview: int32 scratch and its float32 view."""
    m, nans = _max_and_nan_count(z, z.view(np.int32), c)
    if nans > 0 or not math.isfinite(m):
        return np.nan
    if c == 1:
        return 0.0
    rd = 0.0
    td = 0.0
    k = 0
    j0 = 0
    while j0 < c:
        nb = min(_BLOCK, c - j0)
        zb = z[j0:j0 + nb]
        # exp(d) = p(x) * 2^n: write 2^n's bits, read them back as float32
        for j in range(nb):
            d = zb[j] - m
            dc = d if d > _LO else _LO
            n = np.int32(dc * _LOG2E - _HALF)
            ibuf[j] = (n + np.int32(127)) << np.int32(23)
        rf = _ZERO
        tf = _ZERO
        kb = 0
        for j in range(nb):
            d = zb[j] - m
            dc = d if d > _LO else _LO
            fx = _F(np.int32(dc * _LOG2E - _HALF))
            x = dc - fx * _C1
            x = x - fx * _C2
            p = _P0
            p = p * x + _P1
            p = p * x + _P2
            p = p * x + _P3
            p = p * x + _P4
            p = p * x + _P5
            p = p * (x * x) + (x + _ONE)
            e = p * fview[j]
            e = e if d < _ZERO else _ZERO
            rf += e
            tf += dc * e
            kb += 1 if d == _ZERO else 0
        rd += rf
        td += tf
        k += kb
        j0 += nb
    return _finish(float(k), rd, td, inv_logc)


@njit(fastmath=_FM)
def _half_row(h, c, zbuf, ibuf, fview):
    """float16 bits -> float32 into zbuf (exact, subnormals included)."""
    for j in range(c):
        hj = np.int32(h[j])
        em = hj & np.int32(0x7FFF)
        ibuf[j] = em << np.int32(13)
    for j in range(c):
        zbuf[j] = fview[j] * _TWO112
    for j in range(c):
        hj = np.int32(h[j])
        em = hj & np.int32(0x7FFF)
        v = zbuf[j]
        if em >= np.int32(0x7C00):
            v = np.inf if (em == np.int32(0x7C00)) else np.nan
        if hj & np.int32(0x8000):
            v = -v
        zbuf[j] = v


@njit(fastmath=_FM)
def _row_f64(z, c, inv_logc):
    m = -np.inf
    bad = False
    for j in range(c):
        v = z[j]
        if v != v:
            bad = True
        if v > m:
            m = v
    if bad or not math.isfinite(m):
        return np.nan
    if c == 1:
        return 0.0
    k = 0.0
    r = 0.0
    t = 0.0
    for j in range(c):
        d = z[j] - m
        if d == 0.0:
            k += 1.0
        elif d > -np.inf:
            e = math.exp(d)
            r += e
            t += d * e
    return _finish(k, r, t, inv_logc)


@njit(parallel=True, fastmath=_FM, cache=True)
def _rows_f32_kernel(flat, n, c, stride, out):
    inv_logc = 1.0 / math.log(c) if c > 1 else 0.0
    n_chunks = min(n, _N_CHUNKS)
    for ch in prange(n_chunks):
        lo = ch * n // n_chunks
        hi = (ch + 1) * n // n_chunks
        ibuf = np.empty(min(c, _BLOCK), np.int32)
        fview = ibuf.view(np.float32)
        for i in range(lo, hi):
            out[i] = _row_f32(flat[i * stride:i * stride + c], c, inv_logc, ibuf, fview)


@njit(parallel=True, fastmath=_FM, cache=True)
def _rows_f16_kernel(flat, n, c, stride, out):
    inv_logc = 1.0 / math.log(c) if c > 1 else 0.0
    n_chunks = min(n, _N_CHUNKS)
    for ch in prange(n_chunks):
        lo = ch * n // n_chunks
        hi = (ch + 1) * n // n_chunks
        ibuf = np.empty(max(c, _BLOCK), np.int32)
        fview = ibuf.view(np.float32)
        zbuf = np.empty(c, np.float32)
        for i in range(lo, hi):
            _half_row(flat[i * stride:i * stride + c], c, zbuf, ibuf, fview)
            out[i] = _row_f32(zbuf, c, inv_logc, ibuf, fview)


@njit(parallel=True, fastmath=_FM, cache=True)
def _rows_f64_kernel(flat, n, c, stride, out):
    inv_logc = 1.0 / math.log(c) if c > 1 else 0.0
    n_chunks = min(n, _N_CHUNKS)
    for ch in prange(n_chunks):
        lo = ch * n // n_chunks
        hi = (ch + 1) * n // n_chunks
        for i in range(lo, hi):
            out[i] = _row_f64(flat[i * stride:i * stride + c], c, inv_logc)


@njit(cache=True)
def _group_add(values, groups, sums, counts):
    for i in range(values.size):
        g = groups[i]
        sums[g] += values[i]
        counts[g] += 1


def _run(flat, n, c, stride, threads, out):
    if flat.dtype == np.float32:
        kernel, data = _rows_f32_kernel, flat
    elif flat.dtype == np.float16:
        kernel, data = _rows_f16_kernel, flat.view(np.uint16)
    elif flat.dtype == np.float64:
        kernel, data = _rows_f64_kernel, flat
    else:
        raise TypeError(f"unsupported dtype {flat.dtype}")
    limit = numba.config.NUMBA_NUM_THREADS
    prev = numba.get_num_threads()
    numba.set_num_threads(min(int(threads), limit) if threads else limit)
    try:
        kernel(data, n, c, stride, out)
    finally:
        numba.set_num_threads(prev)


def rows(flat: np.ndarray, n: int, c: int, stride: int, threads: int, out: np.ndarray) -> None:
    """out[i] = normalized entropy of row i of ``flat`` (validated by the caller)."""
    if n == 0:
        return
    _run(flat, n, c, stride, threads, out)


def grouped(flat: np.ndarray, n: int, c: int, stride: int, groups: np.ndarray, threads: int,
            sums: np.ndarray, counts: np.ndarray) -> None:
    """Add each row's entropy to ``sums[groups[i]]`` and 1 to ``counts``, in row order."""
    if n == 0:
        return
    values = np.empty(n, dtype=np.float64)
    _run(flat, n, c, stride, threads, values)
    _group_add(values, np.ascontiguousarray(groups, dtype=np.int64), sums, counts)
