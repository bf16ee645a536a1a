"""sim.lbfgsb drives scipy's L-BFGS-B routine itself: it must return minimize's x, bit for bit."""
import numpy as np
from hypothesis import given, settings, strategies as st
from scipy.optimize import Bounds, minimize

from sim import lbfgsb as mod


def _minimize(fun, x0, lo, hi, tol, args=()):
    return minimize(fun, x0, args=args, method="L-BFGS-B", jac=True,
                    bounds=Bounds(lo, hi, keep_feasible=True), tol=tol).x


def _rosenbrock_like(x, scale):
    """A curved, badly scaled objective with its gradient."""
    d = x[1:] - x[:-1] ** 2
    f = float(scale * np.sum(d ** 2) + np.sum((1.0 - x[:-1]) ** 2))
    g = np.zeros_like(x)
    g[1:] += 2 * scale * d
    g[:-1] += -4 * scale * d * x[:-1] - 2 * (1.0 - x[:-1])
    return f, g


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 2 ** 31 - 1), scale=st.floats(0.1, 100.0),
       tol=st.sampled_from([1e-5, 1e-8, 1e-3]))
def test_lbfgsb_is_minimizes_answer_bit_for_bit(n, seed, scale, tol):
    """Bounds of every kind (none, lower only, both, pinned lo = hi, upper only), a start
    outside them (clipped first), the objective above."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 5, n)
    lo = np.where(np.isin(kind, (1, 2, 3)), rng.uniform(-2, 0.5, n), -np.inf)
    hi = np.where(kind == 2, lo + rng.uniform(0.1, 3, n), np.inf)
    hi = np.where(kind == 3, lo, hi)
    hi = np.where(kind == 4, rng.uniform(-1, 2, n), hi)
    x0 = rng.uniform(-3, 3, n)
    got = mod.lbfgsb(_rosenbrock_like, x0, lo, hi, tol, args=(scale,))
    want = _minimize(_rosenbrock_like, x0, lo, hi, tol, args=(scale,))
    assert mod._direct                       # the self-check passed on this scipy
    np.testing.assert_array_equal(got, want)


def test_the_online_fit_gives_minimizes_parameters():
    """The 7-parameter fit of the job models (sim.goodput.observed), through both drivers."""
    from sim.goodput import observed
    nodes, gpus = np.array([1.0, 1, 2, 1]), np.array([1.0, 2, 4, 4])
    bsz, step = np.array([32.0, 32, 64, 16]), np.array([0.21, 0.25, 0.43, 0.12])
    sync = np.array([0.0, 0.04, 0.15, 0.05])
    args = (nodes, gpus, bsz, np.log(step - sync), np.log(step))
    lo, hi, x0 = observed._LOWER, observed._UPPER, observed._START
    got = mod.lbfgsb(observed._objective, x0, lo, hi, observed.FIT_TOL, args=args)
    np.testing.assert_array_equal(got, _minimize(observed._objective, x0, lo, hi, observed.FIT_TOL, args))


def test_a_failed_self_check_falls_back_to_minimize(monkeypatch):
    monkeypatch.setattr(mod, "_direct", False)
    monkeypatch.setattr(mod, "_drive", lambda *a: (_ for _ in ()).throw(AssertionError("not used")))
    x = mod.lbfgsb(_rosenbrock_like, np.array([0.5, 0.5]), np.array([0.0, 0.0]), np.array([2.0, 2.0]),
                   1e-8, args=(1.0,))
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-3)


def test_bad_bounds_are_refused_as_minimize_refuses_them():
    import pytest
    for lo, hi in (([1.0, 0.0], [0.0, 1.0]), ([np.nan, 0.0], [1.0, 1.0])):
        with pytest.raises(ValueError):
            mod.lbfgsb(_rosenbrock_like, np.zeros(2), np.array(lo), np.array(hi), 1e-8, args=(1.0,))
