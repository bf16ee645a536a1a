"""LU with partial pivoting over a sparse matrix's nonzeros (Numba): the factors of the dense
elimination (:func:`sim.policies.gavel_ipm._lu`), bit for bit, at the cost of the nonzeros (the
triangular solves too, up to the sign of a zero result: the dense loop's ``-0.0 - 0 * x``
can give ``+0.0``).

gavel_hsd's dense rescue factors the augmented system ``[0 G'; -G W^2]`` once an iteration: at
46 jobs a 325 x 325 matrix with 1,000 nonzeros whose factors keep 6,000 of 105,000 entries.
This elimination works on those entries only and takes the same steps in the same order:

- column c's pivot is the row, among those not yet pivoted, with the largest ``|a|``; on ties
  the lowest position (the dense loop's first maximum), positions being swapped as the dense
  loop swaps rows (here a permutation, the rows stay where they are);
- each remaining row with an entry in column c gets ``f = a / pivot`` and subtracts ``f``
  times the pivot row, entry by entry, in the order of c.

An entry the dense loop would update with a zero (``f == 0`` or a zero in the pivot row) is
left alone: subtracting zero changes no finite number (at most the sign of a zero, which no
later step reads).  Where a value is or becomes infinite or NaN that no longer holds, and the
matrix is factored densely instead, so the factors are the dense loop's whatever the input.

The factors come out as in the dense loop: ``perm`` (position -> input row, the dense loop's
pivot rows), the diagonal of U, and the nonzeros of L (below the diagonal) and U (above it) by
positions, columns rising (the order of the triangular solves' sums).  Plain-Python reference and property
test: tests/test_sparse_lu.py.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .gavel_ipm import _lu, _lu_solve


@njit(cache=True, error_model="numpy")
def buffers(size):
    """Work space for :func:`factor` on ``size x size`` matrices, and room for the factors.

    Work: the values by input rows, whether an entry is listed, each row's listed columns and
    their count, each column's listed rows and their count, each input row's position, the
    factors' entries as found (row, column, value) and a second set for sorting them.
    Factors: perm, the diagonal of U, each position's first entry and first entry of U
    (``start``, ``mid``: L's entries of position r are ``start[r]:mid[r]``, U's
    ``mid[r]:start[r + 1]``, columns rising), their columns and values, and whether the
    factoring succeeded."""
    nnz = size * size
    work = (np.zeros((size, size)), np.zeros((size, size), np.bool_),
            np.empty((size, size), np.int32), np.zeros(size, np.int64),
            np.empty((size, size), np.int32), np.zeros(size, np.int64),
            np.empty(size, np.int64),
            np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz),
            np.empty(nnz, np.int64), np.empty(nnz, np.int64), np.empty(nnz))
    factors = (np.arange(size), np.zeros(size), np.zeros(size + 1, np.int64),
               np.zeros(size, np.int64), np.empty(nnz, np.int64), np.empty(nnz),
               np.zeros(1, np.bool_))
    return work, factors


@njit(cache=True, error_model="numpy")
def _list(listed, rows, rcount, cols, ccount, r, j):
    """Add entry (r, j) to row r's and column j's lists, once."""
    if not listed[r, j]:
        listed[r, j] = True
        rows[r, rcount[r]] = j
        rcount[r] += 1
        cols[j, ccount[j]] = r
        ccount[j] += 1


@njit(cache=True, error_model="numpy")
def _load(indptr, indices, data, work):
    """Clear the previous matrix's entries and load this one (rows by CSR)."""
    V, listed, rows, rcount, cols, ccount, pos = work[:7]
    size = pos.shape[0]
    for r in range(size):
        for k in range(rcount[r]):
            V[r, rows[r, k]] = 0.0
            listed[r, rows[r, k]] = False
        rcount[r] = 0
        ccount[r] = 0
        pos[r] = r
    for r in range(size):
        for q in range(indptr[r], indptr[r + 1]):
            V[r, indices[q]] = data[q]
            _list(listed, rows, rcount, cols, ccount, r, indices[q])


@njit(cache=True, error_model="numpy")
def _pivot(V, cols, ccount, pos, c):
    """Column c's pivot row among rows at positions >= c: the largest |a|, the lowest
    position on ties; -1 where every such entry is zero (or not a number)."""
    p, best, at = -1, 0.0, 0
    for k in range(ccount[c]):
        r = cols[c, k]
        if pos[r] < c:
            continue
        a = abs(V[r, c])
        if a > best or (a == best and a > 0.0 and pos[r] < at):
            p, best, at = r, a, pos[r]
    return p


@njit(cache=True, error_model="numpy")
def _eliminate(work, c, p, found):
    """Subtract multiples of pivot row p from every row below it with an entry in column c,
    recording U's entries of row p and L's of column c (as (input row, column, value));
    returns the number of entries recorded."""
    V, listed, rows, rcount, cols, ccount, pos, er, ec, ev = work[:10]
    first = found
    for kk in range(rcount[p]):              # U's row: the pivot row right of c
        j = rows[p, kk]
        if j > c and V[p, j] != 0.0:
            er[found], ec[found], ev[found] = p, j, V[p, j]
            found += 1
    last = found
    d = V[p, c]
    for k in range(ccount[c]):
        r = cols[c, k]
        if pos[r] <= c:
            continue
        f = V[r, c] / d
        V[r, c] = f
        if f == 0.0:
            continue
        er[found], ec[found], ev[found] = r, c, f
        found += 1
        for t in range(first, last):
            j = ec[t]
            v = V[r, j]
            if v == 0.0 and not listed[r, j]:  # a nonzero entry is listed
                _list(listed, rows, rcount, cols, ccount, r, j)
            V[r, j] = v - f * ev[t]
    return found


@njit(cache=True, error_model="numpy")
def _finite(work):
    """Whether every listed value is finite."""
    V, rows, rcount = work[0], work[2], work[3]
    for r in range(rcount.shape[0]):
        for k in range(rcount[r]):
            if not np.isfinite(V[r, rows[r, k]]):
                return False
    return True


@njit(cache=True, error_model="numpy")
def factor(indptr, indices, data, work, factors):
    """Factor the square matrix given by rows in CSR (``indptr``, ``indices``, ``data``; an
    entry given twice keeps its last value) into ``factors``; ``factors[-1][0]`` False where a
    pivot is zero or not finite (the dense loop's failure)."""
    V, cols, ccount, pos = work[0], work[4], work[5], work[6]
    perm, diag, ok = factors[0], factors[1], factors[6]
    size = pos.shape[0]
    for r in range(size):
        perm[r] = r
    _load(indptr, indices, data, work)
    found = 0
    for c in range(size):
        p = _pivot(V, cols, ccount, pos, c)
        if p < 0:
            if not _finite(work):
                return _dense(indptr, indices, data, factors)
            ok[0] = False
            return
        here = perm[c]                       # the dense loop's row swap, as a permutation
        perm[c], perm[pos[p]] = p, here
        pos[here], pos[p] = pos[p], c
        diag[c] = V[p, c]
        found = _eliminate(work, c, p, found)
    # every value ever computed is still in V (a non-finite one stays non-finite), so this
    # finds any step that may have gone otherwise than the dense loop's
    if not _finite(work):
        return _dense(indptr, indices, data, factors)
    _arrange(work, factors, found)
    ok[0] = True


@njit(cache=True, error_model="numpy")
def _arrange(work, factors, found):
    """The recorded entries by positions, columns rising (two stable counting sorts: by
    column, then by the row's position)."""
    pos, er, ec, ev, tr, tc, tv = work[6:]
    perm, diag, start, mid, col, val, ok = factors
    size = pos.shape[0]
    count = np.zeros(size + 1, np.int64)
    for q in range(found):
        count[ec[q] + 1] += 1
    for k in range(size):
        count[k + 1] += count[k]
    for q in range(found):
        at = count[ec[q]]
        count[ec[q]] += 1
        tr[at], tc[at], tv[at] = pos[er[q]], ec[q], ev[q]
    start[:] = 0
    for q in range(found):
        start[tr[q] + 1] += 1
    for k in range(size):
        start[k + 1] += start[k]
    fill = start[:size].copy()
    for k in range(size):
        mid[k] = start[k]
    for q in range(found):
        r = tr[q]
        at = fill[r]
        fill[r] += 1
        col[at], val[at] = tc[q], tv[q]
        if tc[q] < r:
            mid[r] += 1


@njit(cache=True, error_model="numpy")
def _dense(indptr, indices, data, factors):
    """The dense loop itself, for matrices with values that are or become non-finite."""
    perm, diag, start, mid, col, val, ok = factors
    size = perm.shape[0]
    S = _to_dense(indptr, indices, data, size)
    p = _lu(S)
    ok[0] = p.shape[0] > 0
    if not ok[0]:
        return
    perm[:] = p
    q = 0
    for r in range(size):
        start[r] = q
        for j in range(r):
            if S[r, j] != 0.0:
                col[q], val[q] = j, S[r, j]
                q += 1
        mid[r] = q
        diag[r] = S[r, r]
        for j in range(r + 1, size):
            if S[r, j] != 0.0:
                col[q], val[q] = j, S[r, j]
                q += 1
    start[size] = q


@njit(cache=True, error_model="numpy")
def solve(factors, b, x):
    """x = A^-1 b by the factors: the dense loop's triangular solves (gavel_ipm's
    ``_lu_solve``) over the nonzeros, in the same order; NaN where the factoring failed.  A
    skipped zero entry changes no finite sum; where a value is or becomes non-finite (it then
    stays so), the solves are redone over every entry, zeros included."""
    perm, diag, start, mid, col, val, ok = factors
    size = perm.shape[0]
    if not ok[0]:
        x[:] = np.nan
        return
    for r in range(size):
        x[r] = b[perm[r]]
    for r in range(size):
        for q in range(start[r], mid[r]):
            x[r] -= val[q] * x[col[q]]
    for r in range(size - 1, -1, -1):
        for q in range(mid[r], start[r + 1]):
            x[r] -= val[q] * x[col[q]]
        x[r] /= diag[r]
    for r in range(size):
        if not np.isfinite(x[r]):
            return _dense_solve(factors, b, x)


@njit(cache=True, error_model="numpy")
def _dense_solve(factors, b, x):
    perm, diag, start, mid, col, val, ok = factors
    size = perm.shape[0]
    S = _to_dense(start, col, val, size)
    for r in range(size):
        S[r, r] = diag[r]
    x[:] = _lu_solve(S, perm, b)


@njit(cache=True, error_model="numpy")
def _to_dense(indptr, indices, data, size):
    """The size x size matrix of rows given in CSR (an entry given twice: its last value)."""
    S = np.zeros((size, size))
    for r in range(size):
        for q in range(indptr[r], indptr[r + 1]):
            S[r, indices[q]] = data[q]
    return S
