"""Numba kernels for :mod:`sim.entropy` (the ``impl="numba"`` path).

Same rules and the same arithmetic as the C kernel ``csrc/sk_entropy.c``: per row,
``m = max z``, ``d = z - m``, ``k = #(d == 0)``, ``r = sum_{d<0} exp(d)``, ``t = sum d exp(d)``,
``H = log k + log1p(r / k) - t / (k + r)``, ``h = H / log C``.  float16/float32 rows use the
C kernel's float32 ``exp`` (magic-number rounding, Cody-Waite reduction, degree-5
minimax polynomial, 2^n added to the exponent bits through a bit-cast intrinsic), written
as straight-line scalar code so LLVM vectorizes the loops; float64 rows use ``math.exp``.

* C <= ``_LANE_MAXC`` (float32): rows are processed ``_LANES`` at a time, column-wise (a
  small transposed block ``buf[j, lane]`` on the stack), so every inner loop runs over the
  lanes of a block with no per-row horizontal work, and the finish (log, log1p) is a
  float32 vectorizable polynomial too, as in the C kernel's eight-rows-per-vector path.
  The block's lane state lives in stack arrays (``_stack``), which LLVM keeps in vector
  registers and knows cannot alias the logits.
* larger C: one row at a time, two passes (max; then exp, sums), float32 partial sums in
  ``_LANES`` accumulators (element j to lane j % _LANES: an order fixed in the source)
  flushed into float64 in lane order every 256 elements.  Pass 2 prefetches the next row
  (``llvm.prefetch``), so its pass 1 hits the cache while memory reads overlap the exp
  arithmetic, as in the C kernel.

Row maxima are integer maxima of order-preserving keys of the float bits (``_order_key``),
and the NaN test is an integer maximum of the magnitude bits: LLVM vectorizes integer max
reductions, while a float max reduction without the ``nnan`` flag stays scalar.

fastmath: the ``exp``/``log`` helpers are compiled with ``contract`` only (fused
multiply-add), never ``reassoc``, which could fold the magic-number rounding away.
The row loops add ``nsz`` but never ``reassoc``: with it LLVM picked the order of the
float32 sums, and a freshly compiled kernel gave other bits than the cached one (issue 17).
The sums are vectorized through explicit lanes instead, so results do not depend on the
compilation path.  The NaN test reads the bits, ties are exact compares, and no
``nnan``/``ninf``/``afn`` flag is used where a NaN or inf matters.

Determinism: rows are split into a fixed number of chunks that does not depend on the
thread count, every row is computed on its own (lanes never mix), and grouped sums are
added serially in row order, so results are identical on 1 and N threads.  The public
wrappers only take plain arrays; :mod:`sim.entropy` validates and converts inputs first.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.numpy_support import carray

__all__ = ["rows", "grouped"]

_F = np.float32
_LOG2E = _F(1.44269504088896341)
_MAGIC = _F(12582912.0)  # 1.5 * 2**23: x + magic rounds x to an integer held in the low bits
_C1 = _F(0.693359375)
_C2 = _F(-2.12194440e-4)
# degree-5 minimax polynomial of exp on [-ln2/2, ln2/2] (the C kernel's; rel. error 1.7e-7)
_Q5 = _F(8.2903061231e-3)
_Q4 = _F(4.1897976317e-2)
_Q3 = _F(1.6667636588e-1)
_Q2 = _F(4.9999149186e-1)
_Q1 = _F(9.9999970701e-1)
_ONE = _F(1.0)
_HALF = _F(0.5)
_ZERO = _F(0.0)
_LO = _F(-87.3)
_TWO112 = _F(2.0 ** 112)
_SQRTH = _F(0.707106781186547524)
_L = (_F(7.0376836292e-2), _F(-1.1514610310e-1), _F(1.1676998740e-1), _F(-1.2420140846e-1),
      _F(1.4249322787e-1), _F(-1.6668057665e-1), _F(2.0000714765e-1), _F(-2.4999993993e-1),
      _F(3.3333331174e-1))
_BLOCK = 256
_N_CHUNKS = 512  # fixed: chunking must not depend on the thread count
_LANES = 16      # rows per block in the small-C kernel (two AVX2 vectors)
_LANE_MAXC = 32  # the small-C kernel handles C <= this
_LINE = 16       # float32s per 64-byte cache line (prefetch step)
_LANE_BUF = _LANES * _LANE_MAXC  # the small-C kernel's transposed block (a literal size)

# Only value-safe flags: no nnan/ninf (NaN rows are detected), no afn (our own exp).
_FM = {"nsz", "contract"}
# exp/log helpers: fused multiply-add only (reassoc could undo the magic-number rounding)
_FM_EXP = {"contract"}


@intrinsic
def _f32_bits(typingctx, x):
    """The bits of a float32 as int32 (a bit cast LLVM can vectorize)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, x):
    """The float32 whose bits are the low 32 bits of the integer ``x`` (Numba widens
    int32 arithmetic to int64; the low 32 bits are the wrapped int32 result)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        if sig.args[0].bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif sig.args[0].bitwidth < 32:
            v = builder.sext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())
    return types.float32(x), codegen


_I32 = ir.IntType(32)
_INF_BITS = np.int32(0x7F800000)
_KEY_MIN = np.int32(-2147483648)


def _key_of_bits(builder, b):
    """b xor (sign ? 0x7FFFFFFF : 0): signed int order equals the float order (-0 < +0)."""
    return builder.xor(b, builder.lshr(builder.ashr(b, _I32(31)), _I32(1)))


@intrinsic
def _order_key(typingctx, x):
    """int32 key of a float32 whose signed order is the float order (NaNs sort outside
    +-inf; callers test NaN separately)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return _key_of_bits(builder, builder.bitcast(args[0], _I32))
    return types.int32(types.float32), codegen


@intrinsic
def _key_value(typingctx, k):
    """The float32 of an ``_order_key`` (the map is its own inverse)."""
    if k != types.int32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(_key_of_bits(builder, args[0]), ir.FloatType())
    return types.float32(types.int32), codegen


@intrinsic
def _abs_bits(typingctx, x):
    """The magnitude bits of a float32: > _INF_BITS iff NaN, == _INF_BITS iff +-inf."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.and_(builder.bitcast(args[0], _I32), _I32(0x7FFFFFFF))
    return types.int32(types.float32), codegen


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to fetch the cache line holding ``arr[idx]`` (read, keep in all levels).
    A hint only: it never faults, so an index past the end is harmless."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [ptr, _I32(0), _I32(3), _I32(1)])
        return context.get_dummy_value()
    return types.void(arr, idx), codegen


@intrinsic
def _stack(typingctx, size, dtype):
    """Pointer to ``size`` (a compile-time constant) uninitialized items of ``dtype`` on
    the stack of the calling function; wrap it with ``carray``.  Unlike ``np.empty`` it
    costs nothing per call and LLVM may keep it in registers."""
    if not isinstance(size, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    n = size.literal_value
    item = dtype.instance_type

    def codegen(context, builder, sig, args):
        return cgutils.alloca_once(builder, context.get_data_type(item), size=n)
    return types.CPointer(item)(size, dtype), codegen


@njit(fastmath=_FM_EXP)
def _exp32(x):
    """exp(x) for float32 x in [-87.3, 0] (the C kernel's ske_exp8, one lane)."""
    t = x * _LOG2E + _MAGIC
    fx = t - _MAGIC
    r = x - fx * _C1
    r = r - fx * _C2
    p = _Q5
    p = p * r + _Q4
    p = p * r + _Q3
    p = p * r + _Q2
    p = p * r + _Q1
    p = p * r + _ONE
    return _bits_f32(_f32_bits(p) + (_f32_bits(t) << np.int32(23)))


@njit(fastmath=_FM_EXP)
def _log32(x):
    """log(x) for finite float32 x >= 1 (Cephes logf; the C kernel's ske_log8, one lane)."""
    xi = _f32_bits(x)
    e = _F(np.int32((xi >> np.int32(23)) - np.int32(126)))  # int32 -> float32: vectorizes
    m = _bits_f32((xi & np.int32(0x007FFFFF)) | np.int32(0x3F000000))
    small = m < _SQRTH
    e = e - _ONE if small else e
    m = (m + m if small else m) - _ONE
    z = m * m
    y = _L[0]
    y = y * m + _L[1]
    y = y * m + _L[2]
    y = y * m + _L[3]
    y = y * m + _L[4]
    y = y * m + _L[5]
    y = y * m + _L[6]
    y = y * m + _L[7]
    y = y * m + _L[8]
    y = (y * m) * z
    y = e * _C2 + y
    y = y - z * _HALF
    return e * _C1 + (m + y)


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


@njit(inline="always", fastmath=_FM)
def _max_and_bad(z, c):
    """Row max and whether the row holds a NaN, as integer max reductions (vectorized)."""
    mk = _KEY_MIN
    ab = np.int32(0)
    for j in range(c):
        v = z[j]
        key = _order_key(v)
        mk = key if key > mk else mk
        a = _abs_bits(v)
        ab = a if a > ab else ab
    return _key_value(mk), ab > _INF_BITS


@njit(inline="always", fastmath=_FM)
def _terms(v, m):
    """One element's share of the row sums: (exp(d), d exp(d), 1 if a tie with the max)."""
    d = v - m
    w = _F(d < _ZERO)  # 0 for ties with the max (d == 0), else 1: a multiply, not a
    dc = d if d > _LO else _LO  # branch, so LLVM keeps the loops vectorized
    e = _exp32(dc) * w
    return e, dc * e, _ONE - w


@njit(inline="always", fastmath=_FM)
def _block_sums(zb, nb, m, r, t, k):
    """Add the terms of ``zb[:nb]`` into the ``_LANES`` accumulators r, t, k: element j goes
    to lane j % _LANES, each lane adds in element order.  A fixed order that LLVM vectorizes
    across the lanes without reassociating anything."""
    full = nb - nb % _LANES
    for j0 in range(0, full, _LANES):
        for l in range(_LANES):
            e, te, tie = _terms(zb[j0 + l], m)
            r[l] += e
            t[l] += te
            k[l] += tie
    for l in range(nb - full):
        e, te, tie = _terms(zb[full + l], m)
        r[l] += e
        t[l] += te
        k[l] += tie


@njit(fastmath=_FM)
def _row_f32(flat, base, c, nxt, inv_logc):
    """Row ``flat[base:base + c]`` (contiguous float32).  While summing, prefetch the row
    at ``nxt`` (none if ``nxt < 0``), whose pass 1 then reads from the cache."""
    z = flat[base:base + c]
    m, bad = _max_and_bad(z, c)
    if bad or not math.isfinite(m):
        return np.nan
    if c == 1:
        return 0.0
    r = carray(_stack(_LANES, np.float32), _LANES)
    t = carray(_stack(_LANES, np.float32), _LANES)
    k = carray(_stack(_LANES, np.float32), _LANES)  # ties, exact in float32 (<= 16 per lane)
    rd = 0.0
    td = 0.0
    kd = 0.0
    j0 = 0
    while j0 < c:
        nb = min(_BLOCK, c - j0)
        if nxt >= 0:
            for q in range(0, nb, _LINE):
                _prefetch(flat, nxt + j0 + q)
        for l in range(_LANES):
            r[l] = _ZERO
            t[l] = _ZERO
            k[l] = _ZERO
        _block_sums(z[j0:j0 + nb], nb, m, r, t, k)  # a slice: indices provably >= 0
        for l in range(_LANES):  # flush into float64 in lane order
            rd += float(r[l])
            td += float(t[l])
            kd += float(k[l])
        j0 += nb
    return _finish(kd, rd, td, inv_logc)


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


@njit(fastmath=_FM, inline="always")  # inlined: the stack arrays live in the caller
def _lanes_f32(flat, i0, nb, c, stride, inv_logc, out):
    """Rows i0 .. i0+nb-1 (nb <= _LANES), one per lane, column-wise.  Dead lanes re-read
    row i0 and are dropped.  Every lane's arithmetic depends only on its own row."""
    buf = carray(_stack(_LANE_BUF, np.float32), _LANE_BUF)
    row = carray(_stack(_LANES, np.int64), _LANES)
    mk = carray(_stack(_LANES, np.int32), _LANES)
    ab = carray(_stack(_LANES, np.int32), _LANES)
    m = carray(_stack(_LANES, np.float32), _LANES)
    r = carray(_stack(_LANES, np.float32), _LANES)
    t = carray(_stack(_LANES, np.float32), _LANES)
    k = carray(_stack(_LANES, np.float32), _LANES)
    hv = carray(_stack(_LANES, np.float32), _LANES)
    for l in range(_LANES):
        row[l] = (i0 + (l if l < nb else 0)) * stride
        mk[l] = _KEY_MIN
        ab[l] = np.int32(0)
        r[l] = _ZERO
        t[l] = _ZERO
        k[l] = _ZERO
    for j in range(c):  # transpose into buf while taking the max and the NaN test
        for l in range(_LANES):
            v = flat[row[l] + j]
            buf[j * _LANES + l] = v
            key = _order_key(v)
            mk[l] = key if key > mk[l] else mk[l]
            a = _abs_bits(v)
            ab[l] = a if a > ab[l] else ab[l]
    for l in range(_LANES):
        m[l] = _key_value(mk[l])
    for j in range(c):
        for l in range(_LANES):
            e, te, tie = _terms(buf[j * _LANES + l], m[l])
            r[l] += e
            t[l] += te
            k[l] += tie
    _lanes_finish(k, r, t, hv)
    for l in range(nb):  # branch-free: a NaN anywhere, or an infinite max, gives NaN
        v = float(hv[l]) * inv_logc  # c == 1: H = 0 and inv_logc = 0
        v = v if v < 1.0 else 1.0
        good = (ab[l] < _INF_BITS) | ((ab[l] == _INF_BITS) & (_abs_bits(m[l]) < _INF_BITS))
        out[i0 + l] = v if good else np.nan


@njit(fastmath=_FM_EXP)
def _recip32(x):
    """1 / x for normal float32 x > 0: a bit-trick seed and three Newton steps (relative
    error ~1e-7).  Division-free, because LLVM declines to vectorize loops with fdiv."""
    y = _bits_f32(np.int32(0x7EF311C3) - _f32_bits(x))
    y = y * (_F(2.0) - x * y)
    y = y * (_F(2.0) - x * y)
    y = y * (_F(2.0) - x * y)
    return y


@njit(fastmath=_FM_EXP)
def _lanes_finish(k, r, t, hf):
    """hf[l] = H (float32, >= 0) from (k, r, t) of each lane: H = log(k + r) - t / (k + r),
    where for k = 1 the log is log1p(r) by Goldberg's trick (one log per row).
    Branch-free over all lanes and with a run-time trip count (a constant 16 gets fully
    unrolled and then not vectorized), so LLVM vectorizes it; ``contract`` only, as
    reassoc could fold (1 + q) - 1 into q and undo the trick."""
    for l in range(k.size):
        kf = k[l] if k[l] > _ONE else _ONE  # bad lanes may have k = 0 (dropped later)
        s = kf + r[l]
        lg = _log32(s)
        # k = 1: log1p(r) = log(s) * r / (s - 1) (Goldberg), exact for tiny entropies;
        # k >= 2: H >= log 2, so log(k + r) in one log loses nothing that matters
        sm1 = s - _ONE
        nz = sm1 != _ZERO
        l1p = lg * r[l] * _recip32(sm1 if nz else _ONE)
        l1p = l1p if nz else r[l]  # 1 + r rounds to 1: log1p(r) = r
        l1 = l1p if kf == _ONE else lg
        h = l1 - t[l] * _recip32(s)
        hf[l] = h if h > _ZERO else _ZERO


@njit(parallel=True, fastmath=_FM, cache=True)
def _rows_f32_lanes_kernel(flat, n, c, stride, out):
    inv_logc = 1.0 / math.log(c) if c > 1 else 0.0
    n_blocks = (n + _LANES - 1) // _LANES
    n_chunks = min(n_blocks, _N_CHUNKS)
    for ch in prange(n_chunks):
        b_lo = ch * n_blocks // n_chunks
        b_hi = (ch + 1) * n_blocks // n_chunks
        for b in range(b_lo, b_hi):
            i0 = b * _LANES
            _lanes_f32(flat, i0, min(_LANES, n - i0), c, stride, inv_logc, out)


@njit(parallel=True, fastmath=_FM, cache=True)
def _rows_f32_kernel(flat, n, c, stride, out):
    inv_logc = 1.0 / math.log(c) if c > 1 else 0.0
    n_chunks = min(n, _N_CHUNKS)
    for ch in prange(n_chunks):
        lo = ch * n // n_chunks
        hi = (ch + 1) * n // n_chunks
        for i in range(lo, hi):
            out[i] = _row_f32(flat, i * stride, c, (i + 1) * stride if i + 1 < hi else -1,
                              inv_logc)


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
            out[i] = _row_f32(zbuf, 0, c, -1, inv_logc)


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
        kernel = _rows_f32_lanes_kernel if c <= _LANE_MAXC else _rows_f32_kernel
        data = flat
    elif flat.dtype == np.float16:
        kernel, data = _rows_f16_kernel, flat.view(np.uint16)
    elif flat.dtype == np.float64:
        kernel, data = _rows_f64_kernel, flat
    else:
        raise TypeError(f"unsupported dtype {flat.dtype}")
    limit = numba.config.NUMBA_NUM_THREADS
    prev = numba.get_num_threads()
    numba.set_num_threads(min(int(threads), limit) if threads else limit)
    # hand the fixed chunks out one at a time (dynamic), so a thread that a loaded machine
    # deschedules does not hold the others up; which thread computes a row never matters
    prev_chunk = numba.set_parallel_chunksize(1)
    try:
        kernel(data, n, c, stride, out)
    finally:
        numba.set_parallel_chunksize(prev_chunk)
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
