"""sim/policies/gavel_ipm.py: the structured interior-point solver of Gavel's LPs, held to its
dense plain-Python reference (tests/reference_gavel_ipm.py) and to HiGHS's optimum."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from reference_gavel_ipm import solve_reference
from sim.policies import gavel_ipm
from sim.policies.gavel_lp import AllocationLP


@st.composite
def _problems(draw):
    """(kind, scale, capacity, a, need): a max-min, max-sum or feasibility problem."""
    n, m = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    scale = np.array(draw(st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0]), min_size=n, max_size=n)))
    capacity = np.array(draw(st.lists(st.sampled_from([1.0, 4.0, 8.0, 36.0]), min_size=m, max_size=m)))
    a = np.array(draw(st.lists(st.sampled_from([0.0, 0.4, 1.0, 2.5, 162.0]), min_size=n * m,
                               max_size=n * m))).reshape(n, m)
    need = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 2.0]), min_size=n, max_size=n)))
    return draw(st.sampled_from(["max-min", "max-sum", "feasible"])), scale, capacity, a, need


def _args(kind, scale, capacity, a, need):
    n, m = a.shape
    if kind == "max-min":
        return scale, capacity, np.zeros((n, m)), -1.0, a, 1.0, np.zeros(n), True
    if kind == "max-sum":
        return scale, capacity, -a, 0.0, None, 0.0, None, False
    return scale, capacity, np.zeros((n, m)), 0.0, a, 0.0, -need, False


def _highs_optimum(kind, scale, capacity, a, need):
    lp = AllocationLP(scale, capacity, "simplex")
    if kind == "max-min":
        return lp.max_min(a)[1]
    if kind == "max-sum":
        return float(np.sum(a * lp.max_sum(a)))
    return lp.feasible(a, need) is not None


@settings(max_examples=150, deadline=None)
@given(p=_problems())
def test_kernel_matches_its_reference_and_highs_optimum(p):
    kind, scale, capacity, a, need = p
    args = _args(*p)
    X, z, status, iters, _ = gavel_ipm.solve(*args)
    Xr, zr, status_r, iters_r = solve_reference(*args)
    want = _highs_optimum(*p)
    if status == gavel_ipm.OPTIMAL:
        # every optimal answer is a feasible optimum, whatever the reference did
        assert np.all(X >= 0) and np.all(X.sum(axis=1) <= 1 + 1e-7)
        assert np.all((scale[:, None] * X).sum(axis=0) <= capacity + 1e-6)
        if kind == "max-min":
            assert z == pytest.approx(want, rel=1e-6, abs=1e-7)
            assert np.all((a * X).sum(axis=1) >= z - 1e-6 * (1 + z))
        elif kind == "max-sum":
            assert float(np.sum(a * X)) == pytest.approx(want, rel=1e-6, abs=1e-7)
        else:
            assert want and np.all((a * X).sum(axis=1) >= need - 1e-6)
    elif kind == "feasible" and not want:
        return                                  # infeasible: no optimum to compare
    if status_r == gavel_ipm.OPTIMAL:
        # the same iteration from the same start: the same path, up to rounding in the
        # last step or two, where the normal equations' condition number passes 1e16 on
        # degenerate problems (the dense solve then loses more digits than the structured
        # one, and one of the two stops an iteration or two before the other)
        assert status == gavel_ipm.OPTIMAL and abs(iters - iters_r) <= 2
        np.testing.assert_allclose(X, Xr, atol=1e-6)
        assert z == pytest.approx(zr, abs=1e-6)


def test_two_jobs_two_types_by_hand():
    # job 0 runs at 1 on type 0 and 3 on type 1, job 1 the other way round; one GPU each:
    # each takes the type where it is fast, z = 3
    a = np.array([[1.0, 3.0], [3.0, 1.0]])
    X, z, status, *_ = gavel_ipm.solve(np.ones(2), np.ones(2), np.zeros((2, 2)), -1.0, a, 1.0,
                                       np.zeros(2), True)
    assert status == gavel_ipm.OPTIMAL and z == pytest.approx(3.0, rel=1e-8)
    np.testing.assert_allclose(X, [[0, 1], [1, 0]], atol=1e-7)


def test_interior_point_of_a_tied_optimum_is_the_symmetric_one():
    # two identical jobs on one type of one GPU: every split with x0 + x1 = 1 and
    # min(x0, x1) = 1/2 is optimal only at (1/2, 1/2); max-sum ties every split, and the
    # path from the symmetric start keeps the symmetry
    X, z, status, *_ = gavel_ipm.solve(np.ones(2), np.ones(1), np.zeros((2, 1)), -1.0,
                                       np.ones((2, 1)), 1.0, np.zeros(2), True)
    assert status == gavel_ipm.OPTIMAL and z == pytest.approx(0.5)
    X, _, status, *_ = gavel_ipm.solve(np.ones(2), np.ones(1), -np.ones((2, 1)), 0.0, None, 0.0,
                                       None, False)
    assert status == gavel_ipm.OPTIMAL and X[0, 0] == pytest.approx(X[1, 0]) == pytest.approx(0.5)


def test_a_job_that_cannot_run_anywhere_gives_zero():
    a = np.array([[1.0, 2.0], [0.0, 0.0]])
    X, z, status, *_ = gavel_ipm.solve(np.ones(2), np.ones(2), np.zeros((2, 2)), -1.0, a, 1.0,
                                       np.zeros(2), True)
    assert status == gavel_ipm.OPTIMAL and z == pytest.approx(0.0, abs=1e-7)


def test_an_infeasible_need_is_not_reported_optimal():
    # one GPU, a job that needs more than a whole GPU's worth of progress
    X, z, status, *_ = gavel_ipm.solve(np.ones(1), np.ones(1), np.zeros((1, 1)), 0.0,
                                       np.ones((1, 1)), 0.0, -np.array([2.0]), False)
    assert status != gavel_ipm.OPTIMAL
    assert AllocationLP(np.ones(1), np.ones(1)).feasible(np.ones((1, 1)), np.array([2.0])) is None


def test_nearly_singular_job_blocks_stay_exact():
    # ten jobs on 3 x 36 GPUs: near the optimum several jobs run on one type with both
    # rows tight; eliminating their blocks lost every digit before they were kept global
    rng = np.random.default_rng(1)
    rng.choice([1, 2, 4, 8], 5, p=[.7, .1, .15, .05]), rng.uniform(0.2, 3, (5, 3))
    scale = rng.choice([1, 2, 4, 8], 10, p=[.7, .1, .15, .05]).astype(float)
    a = rng.uniform(0.2, 3, (10, 3))
    args = (scale, np.full(3, 36.0), np.zeros((10, 3)), -1.0, a, 1.0, np.zeros(10), True)
    X, z, status, iters, size = gavel_ipm.solve(*args)
    Xr, zr, _, iters_r = solve_reference(*args)
    assert status == gavel_ipm.OPTIMAL and iters == iters_r and size > 4
    np.testing.assert_allclose(X, Xr, atol=1e-9)
    assert z == pytest.approx(AllocationLP(scale, np.full(3, 36.0), "simplex").max_min(a)[1], rel=1e-8)


def test_the_lp_that_stalls_highs_ipm_is_solved():
    from pathlib import Path
    d = np.load(Path(__file__).with_name("gavel_ipm_stall_lp.npz"))
    lp = AllocationLP(d["scale"], d["capacity"])
    x, z = lp.max_min(d["a"])
    _, z_simplex = AllocationLP(d["scale"], d["capacity"], "simplex").max_min(d["a"])
    assert lp.highs_fallbacks == 0 and z == pytest.approx(z_simplex, rel=1e-8)


def test_a_failed_structured_solve_goes_to_highs(monkeypatch):
    # ECOS's path (gavel_hsd) fails, then gavel_ipm: HiGHS solves it
    from sim.policies import gavel_hsd
    monkeypatch.setattr(gavel_hsd, "solve", lambda *args, **kw: (None, 0.0, gavel_hsd.NUMERICAL_TROUBLE, 3))
    monkeypatch.setattr(gavel_ipm, "solve", lambda *args, **kw: (None, 0.0, gavel_ipm.NUMERICAL_TROUBLE, 3, 0))
    lp = AllocationLP(np.array([1, 1]), np.array([1, 1]))
    x, z = lp.max_min(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert lp.ecos_path_fallbacks == 1 and lp.highs_fallbacks == 1 and z == pytest.approx(2.0)
