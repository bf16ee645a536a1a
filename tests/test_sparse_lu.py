"""sim.policies.sparse_lu held to a plain-Python LU with partial pivoting (the dense loop of
gavel_ipm._lu), bit for bit: the same pivots, factors and solves (up to the sign of a zero),
on matrices with ties, zeros, singular columns and non-finite values, given with explicit
zeros and repeated entries, and with buffers reused across matrices."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.policies import sparse_lu
from sim.policies.gavel_ipm import _lu


def reference_lu(rows):
    """Partial pivoting on lists of floats (the first largest |a| from the diagonal down);
    (pivot rows, factors) or None where a pivot is zero or not finite."""
    S = [list(map(float, r)) for r in rows]
    k = len(S)
    piv = list(range(k))
    for c in range(k):
        p = c
        for r in range(c + 1, k):
            if abs(S[r][c]) > abs(S[p][c]):
                p = r
        if not (abs(S[p][c]) > 0.0) or not math.isfinite(S[p][c]):
            return None
        S[c], S[p] = S[p], S[c]
        piv[c], piv[p] = piv[p], piv[c]
        for r in range(c + 1, k):
            f = S[r][c] / S[c][c]
            S[r][c] = f
            if f != 0.0:
                for j in range(c + 1, k):
                    S[r][j] -= f * S[c][j]
    return piv, S


def reference_solve(piv, S, b):
    k = len(b)
    x = [float(b[p]) for p in piv]
    for r in range(k):
        for j in range(r):
            x[r] -= S[r][j] * x[j]
    for r in range(k - 1, -1, -1):
        for j in range(r + 1, k):
            x[r] -= S[r][j] * x[j]
        x[r] /= S[r][r]
    return x


def csr(A, seed=0):
    """A's rows in CSR: its nonzeros, and (by seed) some explicit zeros of either sign and
    some entries given twice (first with another value: the last one counts)."""
    rng = np.random.default_rng(seed)
    indptr, indices, data = [0], [], []
    for row in A:
        for j, v in enumerate(row):
            if v != 0.0 or math.isnan(v) or (seed and rng.random() < 0.2):
                if seed and rng.random() < 0.2:
                    indices.append(j)
                    data.append(7.0)
                indices.append(j)
                data.append(v if v != 0.0 else rng.choice([0.0, -0.0]))
        indptr.append(len(indices))
    return (np.array(indptr, np.int64), np.array(indices, np.int64), np.array(data, float))


def factored(A, buffers=None, seed=0):
    work, factors = buffers or sparse_lu.buffers(len(A))
    sparse_lu.factor(*csr(A, seed), work, factors)
    return factors


def dense_factors(factors):
    """The factors as the dense loop leaves them (L below, U on and above the diagonal)."""
    perm, diag, start, mid, col, val, ok = factors
    k = perm.shape[0]
    S = np.zeros((k, k))
    for r in range(k):
        assert np.all(np.diff(col[start[r]:start[r + 1]]) > 0)        # columns rising
        assert np.all(col[start[r]:mid[r]] < r) and np.all(col[mid[r]:start[r + 1]] > r)
        S[r, col[start[r]:start[r + 1]]] = val[start[r]:start[r + 1]]
        S[r, r] = diag[r]
    return S


def same(a, b):
    """Bit for bit, NaN equal to NaN and a zero of either sign to zero."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def check(A, seed=0):
    ref = reference_lu(A)
    factors = factored(A, seed=seed)
    assert bool(factors[-1][0]) == (ref is not None)
    x = np.empty(len(A))
    rng = np.random.default_rng(seed)
    b = rng.normal(size=len(A)) * (rng.random(len(A)) < 0.8)    # signs, zeros
    b[rng.random(len(A)) < 0.2] = -0.0
    sparse_lu.solve(factors, b, x)
    if ref is None:
        assert np.all(np.isnan(x))
        return
    piv, S = ref
    assert list(factors[0]) == piv
    assert same(dense_factors(factors), S)
    assert same(x, reference_solve(piv, S, b))


values = st.one_of(st.integers(-3, 3).map(float),                      # ties and zeros
                   st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
                   st.sampled_from([1e-300, -1e-300, 1e300, 5e-324]))


@st.composite
def sparse_matrices(draw, finite=True):
    k = draw(st.integers(1, 14))
    density = draw(st.floats(0.05, 1.0))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    A = np.where(rng.random((k, k)) < density, 1.0, 0.0)
    for i, j in zip(*np.nonzero(A)):
        A[i, j] = draw(values)
    if not finite and draw(st.booleans()):
        A[draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1))] = draw(
            st.sampled_from([np.inf, -np.inf, np.nan]))
    return A.tolist()


@settings(max_examples=300, deadline=None)
@given(sparse_matrices(), st.integers(0, 2**31))
def test_factors_and_solves_are_the_dense_loops(A, seed):
    check(A, seed)


@settings(max_examples=100, deadline=None)
@given(sparse_matrices(finite=False), st.integers(0, 2**31))
def test_non_finite_values_give_the_dense_loops_result(A, seed):
    check(A, seed)


@settings(max_examples=60, deadline=None)
@given(sparse_matrices(finite=False), st.integers(0, 2**31))
def test_buffers_are_reused_across_matrices(A, seed):
    # a second matrix of the same size factored in the first one's buffers (the first one
    # perhaps non-finite: factored densely, or singular: stopped early)
    k = len(A)
    B = np.random.default_rng(seed).normal(size=(k, k))
    B[B < 0.3] = 0.0
    buffers = sparse_lu.buffers(k)
    factored(A, buffers)
    again, fresh = factored(B.tolist(), buffers), factored(B.tolist())
    assert bool(again[-1][0]) == bool(fresh[-1][0]) == (reference_lu(B.tolist()) is not None)
    if fresh[-1][0]:
        assert same(dense_factors(again), dense_factors(fresh))
        assert list(again[0]) == list(fresh[0])
        b, x1, x2 = np.arange(1.0, k + 1.0), np.empty(k), np.empty(k)
        sparse_lu.solve(again, b, x1)
        sparse_lu.solve(fresh, b, x2)
        assert same(x1, x2)


def test_the_augmented_kkt_shape_is_factored_like_the_dense_loop():
    # [0 G'; -G W^2] with a zero (1,1) block, as in gavel_hsd's rescue; against gavel_ipm._lu
    rng = np.random.default_rng(3)
    G = np.where(rng.random((9, 5)) < 0.4, rng.normal(size=(9, 5)), 0.0)
    G[np.arange(5), np.arange(5)] = -1.0
    K = np.block([[np.zeros((5, 5)), G.T], [-G, np.diag(rng.uniform(0.01, 100, 9))]])
    check(K.tolist())
    S = K.copy()
    piv = _lu(S)
    factors = factored(K.tolist())
    assert list(piv) == list(factors[0]) and same(dense_factors(factors), S)


@pytest.mark.parametrize("A, ok", [
    ([[0.0, 1.0], [0.0, 2.0]], False),          # a zero column: the dense loop's failure
    ([[0.0, 1.0], [1.0, 0.0]], True),           # a swap
    ([[2.0, 2.0], [2.0, 2.0]], False),          # singular after one step
    ([[np.nan, 1.0], [1.0, 1.0]], False),       # a NaN pivot candidate: the dense loop fails
    ([[5.0]], True),
])
def test_small_cases(A, ok):
    assert bool(factored(A)[-1][0]) == ok
    check(A)


def test_an_empty_matrix():
    # factored (gavel_ipm._lu returns no pivots for it, which its callers read as failure;
    # gavel_hsd never factors an empty system)
    factors = factored([])
    assert factors[-1][0]
    x = np.empty(0)
    sparse_lu.solve(factors, np.empty(0), x)
