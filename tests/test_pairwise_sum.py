"""sim.pairwise_sum against its plain-Python reference and against NumPy's own sums."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_pairwise_sum import pairwise_sum_reference
from sim.pairwise_sum import pairwise_sum

VALUES = st.one_of(st.floats(-1e6, 1e6, allow_nan=False),
                   st.sampled_from([0.0, -0.0, 1e-300, 1e300, -1e300, 0.1, 1.0 / 3.0]))


def _same(x: float, y: float) -> bool:
    return x == y or (np.isnan(x) and np.isnan(y))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(VALUES, max_size=300), data=st.data())
def test_kernel_matches_reference_and_numpy(values, data):
    a = np.array(values, float)
    lo = data.draw(st.integers(0, a.size))
    n = a.size - lo
    got = pairwise_sum(a, lo, n)
    assert _same(got, pairwise_sum_reference(a, lo, n))
    assert _same(got, float(a[lo:].sum()))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_rows_of_a_matrix_sum_as_numpy_sums_them(m, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, m)) * np.exp(rng.uniform(-30, 30, (4, m)))
    want = a.sum(axis=1)
    flat = a.ravel()
    for i in range(4):
        assert pairwise_sum(flat, i * m, m) == want[i]


def test_long_runs_split_as_numpy_splits_them():
    rng = np.random.default_rng(7)
    for n in (129, 256, 257, 1000, 4097):
        a = rng.standard_normal(n) * np.exp(rng.uniform(-30, 30, n))
        assert pairwise_sum(a, 0, n) == a.sum() == pairwise_sum_reference(a, 0, n)
