"""sim.entropy on numpy inputs: C and Numba kernels against the plain-Python reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from entropy_reference import sk_entropy_grouped, sk_entropy_rows
from sim import entropy as E
from sim.errors import ConfigError, TraceError

KERNELS = ("c", "numba")
RTOL = 1e-5
ATOL = 1e-30  # float16/32 paths flush probabilities below ~1e-38 (documented)


def assert_matches(got, want, rtol=RTOL, atol=ATOL):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    ok = ~np.isnan(want)
    err = np.abs(got[ok] - want[ok])
    assert (err <= rtol * np.abs(want[ok]) + atol).all(), (got[ok], want[ok], err.max())


def logits_arrays(dtype, max_c=48, max_rows=12, bound=1e3):
    width = {np.float16: 16, np.float32: 32, np.float64: 64}[dtype]
    if dtype is np.float16:
        bound = min(bound, 6e4)
    shapes = st.tuples(st.integers(0, max_rows), st.integers(1, max_c))
    return shapes.flatmap(lambda s: hnp.arrays(
        dtype, s, elements=st.floats(-bound, bound, allow_nan=False, allow_infinity=False,
                                     width=width)))


SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@SETTINGS
@given(data=st.data())
def test_kernel_matches_reference(impl, dtype, data):
    x = data.draw(logits_arrays(dtype))
    scale = data.draw(st.sampled_from([1e-6, 1.0, 30.0]))
    if dtype is not np.float16:
        x = (x * scale).astype(dtype)
    assert_matches(E.normalized_entropy(x, impl=impl), sk_entropy_rows(x.tolist()))


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
@pytest.mark.parametrize("c", [1, 2, 3, 8, 10, 31, 32, 33, 1000, 4099])
def test_random_rows_each_width(impl, c):
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((19, c)) * 3).astype(np.float32)
    assert_matches(E.normalized_entropy(x, impl=impl), sk_entropy_rows(x.tolist()))


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
def test_edge_cases(impl):
    inf, nan = math.inf, math.nan
    rows = [
        [0.0, 0.0, 0.0],            # uniform: 1
        [5.0, 5.0, 5.0],            # uniform: 1
        [1e4, 0.0, 0.0],            # huge gap: ~0
        [1e-30, -1e-30, 0.0],       # tiny logits: ~1
        [3.0e38, -3.0e38, 0.0],     # extremes of float32
        [0.0, -inf, -inf],          # masked classes: 0
        [1.0, 2.0, -inf],           # masked class counts in C
        [-inf, -inf, -inf],         # nothing left: NaN
        [0.0, inf, 1.0],            # +inf: NaN
        [0.0, nan, 1.0],            # NaN: NaN
        [0.0, -100.0, -100.0],      # tiny but non-zero entropy
    ]
    for dtype in (np.float32, np.float64):
        x = np.array(rows, dtype=dtype)
        got = E.normalized_entropy(x, impl=impl)
        assert_matches(got, sk_entropy_rows(x.tolist()))
    got = E.normalized_entropy(np.array(rows, np.float64), impl=impl)
    assert got[0] == 1.0 and got[1] == 1.0
    assert got[5] == 0.0
    assert abs(got[6] - sk_entropy_rows([[1.0, 2.0, -inf]])[0]) < 1e-6
    assert np.isnan(got[7:10]).all()
    assert 0 < got[10] < 1e-40


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
def test_c1_is_zero_by_convention(impl):
    x = np.array([[3.0], [-7.5], [np.nan], [np.inf]], dtype=np.float32)
    got = E.normalized_entropy(x, impl=impl)
    assert got[:2].tolist() == [0.0, 0.0]
    assert np.isnan(got[2:]).all()


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
def test_empty_input(impl):
    for c in (1, 10):
        out = E.normalized_entropy(np.empty((0, c), np.float32), impl=impl)
        assert out.shape == (0,) and out.dtype == np.float64
    means, counts = E.grouped_mean_entropy(np.empty((0, 5), np.float32), np.empty(0, np.int64),
                                           impl=impl, return_counts=True)
    assert means.size == 0 and counts.size == 0


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("shape", [(4001, 10), (300, 700)])
def test_identical_on_1_and_n_threads(impl, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 4
    g = np.arange(shape[0]) % 7
    one = E.normalized_entropy(x, impl=impl, threads=1)
    many = E.normalized_entropy(x, impl=impl, threads=2)
    assert np.array_equal(one, many)
    assert np.array_equal(E.grouped_mean_entropy(x, g, impl=impl, threads=1),
                          E.grouped_mean_entropy(x, g, impl=impl, threads=4))


def test_c_and_numba_agree_closely():
    x = np.random.default_rng(2).standard_normal((500, 37)).astype(np.float32) * 5
    assert_matches(E.normalized_entropy(x, impl="numba"), E.normalized_entropy(x, impl="c"),
                   rtol=2e-6)


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
@SETTINGS
@given(data=st.data())
def test_grouped_matches_reference(impl, data):
    x = data.draw(logits_arrays(np.float32, max_c=20, max_rows=30, bound=50.0))
    n = x.shape[0]
    groups = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
                      dtype=np.int64)
    means, counts = E.grouped_mean_entropy(x, groups, impl=impl, n_groups=5, return_counts=True)
    assert_matches(means, sk_entropy_grouped(x.tolist(), groups.tolist(), 5))
    assert counts.tolist() == np.bincount(groups, minlength=5).tolist()


@pytest.mark.parametrize("impl", KERNELS)
def test_strided_rows_are_read_in_place(impl):
    base = np.random.default_rng(3).standard_normal((50, 40)).astype(np.float32)
    view = base[5:45:2, 3:33]            # row stride 80 elements, 30 classes
    assert_matches(E.normalized_entropy(view, impl=impl), sk_entropy_rows(view.tolist()))


def test_non_contiguous_rows_copy_with_warning():
    x = np.random.default_rng(4).standard_normal((6, 10)).astype(np.float32)
    with pytest.warns(E.EntropyCopyWarning):
        got = E.normalized_entropy(x[:, ::2])
    assert_matches(got, sk_entropy_rows(x[:, ::2].tolist()))


def test_torch_tensor_input():
    torch = pytest.importorskip("torch")
    t = torch.randn(20, 10, requires_grad=True)
    got = E.normalized_entropy(t)
    assert_matches(got, sk_entropy_rows(t.detach().numpy().tolist()))


# ------------------------------------------------------------------ bad input

def test_bad_inputs_name_the_problem():
    with pytest.raises(TraceError, match="float16, float32 or float64"):
        E.normalized_entropy(np.zeros((3, 4), dtype=np.int32))
    with pytest.raises(TraceError, match="2-D"):
        E.normalized_entropy(np.zeros(4, dtype=np.float32))
    with pytest.raises(TraceError, match="C = 0"):
        E.normalized_entropy(np.zeros((3, 0), dtype=np.float32))
    with pytest.raises(ConfigError, match="impl"):
        E.normalized_entropy(np.zeros((3, 4), np.float32), impl="cuda")
    with pytest.raises(ConfigError, match="threads"):
        E.normalized_entropy(np.zeros((3, 4), np.float32), threads=0)
    with pytest.raises(TraceError, match="not supported"):
        E.normalized_entropy([[1.0, 2.0]])


@pytest.mark.parametrize("impl", KERNELS + ("reference",))
def test_bad_groups(impl):
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(TraceError, match="4 rows"):
        E.grouped_mean_entropy(x, [0, 1, 2], impl=impl)
    with pytest.raises(TraceError, match="negative"):
        E.grouped_mean_entropy(x, [0, -1, 2, 0], impl=impl)
    with pytest.raises(TraceError, match="integer"):
        E.grouped_mean_entropy(x, [0.5, 1, 2, 0], impl=impl)
    with pytest.raises(TraceError, match="n_groups"):
        E.grouped_mean_entropy(x, [0, 1, 2, 3], impl=impl, n_groups=2)


def test_c_kernel_rejects_bad_arguments_without_crashing():
    from sim._native import ffi, lib
    out = np.empty(2)
    x = np.zeros(4, np.float32)
    pout = ffi.cast("double *", ffi.from_buffer(out))
    px = ffi.from_buffer(x)
    assert lib.sk_entropy_rows(px, 99, 2, 2, 2, ffi.NULL, 0, 1, pout) == lib.SK_ENTROPY_EDTYPE
    assert lib.sk_entropy_rows(px, lib.SK_ENTROPY_F32, 2, 0, 2, ffi.NULL, 0, 1, pout) == \
        lib.SK_ENTROPY_EINVAL
    assert lib.sk_entropy_rows(px, lib.SK_ENTROPY_F32, 2, 2, 1, ffi.NULL, 0, 1, pout) == \
        lib.SK_ENTROPY_EINVAL
    assert lib.sk_entropy_rows(ffi.NULL, lib.SK_ENTROPY_F32, 2, 2, 2, ffi.NULL, 0, 1, pout) == \
        lib.SK_ENTROPY_EINVAL
    g = np.array([0, 5], np.int64)
    sums = np.zeros(2)
    counts = np.zeros(2, np.int64)
    rc = lib.sk_entropy_grouped(px, lib.SK_ENTROPY_F32, 2, 2, 2, ffi.NULL, 0,
                                ffi.cast("int64_t *", ffi.from_buffer(g)), 2, 1,
                                pout, ffi.cast("double *", ffi.from_buffer(sums)),
                                ffi.cast("int64_t *", ffi.from_buffer(counts)))
    assert rc == lib.SK_ENTROPY_EGROUP
    assert sums.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("c", [2, 7, 10, 40, 1000])
def test_exp_range_of_the_float32_kernels(impl, c):
    """Rows [0, d, -inf, ...] with d over the whole range the float32 exp serves
    (-87.3 <= d <= 0): the cheap exp polynomial, the magic-number rounding and the 2^n
    exponent add hold 1e-5 everywhere (small-C lane paths and the row path)."""
    d = np.concatenate([-np.geomspace(1e-7, 87.0, 300), [-1e-30, -0.5, -0.34657, -0.34658]])
    x = np.full((d.size, c), -np.inf, np.float32)
    x[:, 0] = 0.0
    x[:, 1] = d
    want = sk_entropy_rows(x.tolist())
    assert_matches(E.normalized_entropy(x, impl=impl), want)
    # the same values spread over a full row, with ties with the maximum
    y = np.tile(np.linspace(-40.0, 0.0, c, dtype=np.float32), (3, 1))
    y[1, -2] = 0.0
    y[2] += 1e4
    assert_matches(E.normalized_entropy(y, impl=impl), sk_entropy_rows(y.tolist()))


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 33])
def test_row_blocks_with_dead_lanes(impl, n):
    """The small-C kernels work on blocks of rows (8 in C, 16 in Numba); a partial last
    block must neither read past the input nor leak values between rows."""
    for c in (3, 10, 32):
        x = (np.random.default_rng(n * 100 + c).standard_normal((n, c)) * 4).astype(np.float32)
        x[n // 2, c // 2] = np.nan
        got = E.normalized_entropy(x, impl=impl)
        assert_matches(got, sk_entropy_rows(x.tolist()))
        # a row's value does not depend on its neighbours
        for i in (0, n - 1):
            assert_matches(E.normalized_entropy(x[i:i + 1], impl=impl), got[i:i + 1], rtol=0, atol=0)
