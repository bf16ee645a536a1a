"""The ECOS-path solver of Gavel's feasibility LP (sim/policies/gavel_hsd.py): against its
plain reference (tests/reference_gavel_hsd.py), against ECOS's own points, and in
AllocationLP."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from reference_gavel_hsd import solve_reference
from sim.policies import gavel_hsd
from sim.policies.gavel_lp import AllocationLP

FIXTURE = Path(__file__).parent / "fixtures" / "gavel_ecos_feasibility.npz"


@st.composite
def feasible_problems(draw):
    n, m = draw(st.integers(1, 7)), draw(st.integers(1, 3))
    scale = np.array(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n)), float)
    capacity = np.array(draw(st.lists(st.integers(1, 12), min_size=m, max_size=m)), float)
    a = np.array(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5, 40.0, 160.0]),
                               min_size=n * m, max_size=n * m))).reshape(n, m)
    a[:, 0] = np.maximum(a[:, 0], 0.5)                    # every job can run somewhere
    # a feasible point: each type shared out by scale, rows capped at 1
    x0 = capacity[None, :] / n / scale[:, None]
    x0 = x0 / np.maximum(x0.sum(axis=1), 1.0)[:, None]
    frac = np.array(draw(st.lists(st.sampled_from([0.05, 0.5, 0.9, 0.99]), min_size=n, max_size=n)))
    return scale, capacity, a, frac * (a * x0).sum(axis=1)


@settings(max_examples=60, deadline=None)
@given(feasible_problems())
def test_kernel_matches_its_reference(p):
    X, status, it = gavel_hsd.solve_feasibility(*p)
    Xr, status_r, it_r = solve_reference(*p)
    assert (status, it) == (status_r, it_r) and status == gavel_hsd.OPTIMAL
    np.testing.assert_allclose(X, Xr, atol=1e-7)
    scale, capacity, a, need = p
    tol = 1e-7
    assert np.all(X >= -tol) and np.all(X.sum(axis=1) <= 1 + tol)
    assert np.all((scale[:, None] * X).sum(axis=0) <= capacity + tol)
    assert np.all((a * X).sum(axis=1) >= need - tol * np.maximum(need, 1))


def test_the_points_ecos_returns_on_gavels_lps():
    # three of Gavel's min-total-duration LPs (t500, 9-19 jobs) with the x ECOS 2.0.10 returned
    # through cvxpy 1.6.7: the same iteration count and x within 3e-4 (the HiGHS and Mehrotra
    # interior points differ from it by 0.1-0.4)
    d = np.load(FIXTURE)
    for j in range(3):
        X, status, it = gavel_hsd.solve_feasibility(d[f"scale{j}"], d[f"capacity{j}"], d[f"a{j}"],
                                                    d[f"need{j}"])
        assert status == gavel_hsd.OPTIMAL and it == int(d[f"iterations{j}"])
        assert np.abs(X - d[f"x_ecos{j}"]).max() < 3e-4


def test_two_identical_jobs_share_evenly():
    X, status, _ = gavel_hsd.solve_feasibility([1, 1], [1.0], np.ones((2, 1)), [0.2, 0.2])
    assert status == gavel_hsd.OPTIMAL
    assert X[0, 0] == pytest.approx(X[1, 0], abs=1e-9) and 0.2 < X[0, 0] < 0.5


def test_an_infeasible_need_is_reported():
    p = ([1, 1], [1.0], np.ones((2, 1)), [0.7, 0.7])
    X, status, _ = gavel_hsd.solve_feasibility(*p)
    assert status == gavel_hsd.INFEASIBLE and solve_reference(*p)[1] == gavel_hsd.INFEASIBLE


def test_no_jobs():
    X, status, _ = gavel_hsd.solve_feasibility(np.zeros(0), [4.0, 2.0], np.zeros((0, 2)), np.zeros(0))
    assert X.shape == (0, 2) and status == gavel_hsd.OPTIMAL


def test_allocation_lp_takes_the_ecos_path_and_falls_back(monkeypatch):
    d = np.load(FIXTURE)
    lp = AllocationLP(d["scale0"], d["capacity0"])
    X = lp.feasible(d["a0"], d["need0"])
    assert lp.ecos_path_fallbacks == 0
    np.testing.assert_allclose(X, np.clip(d["x_ecos0"], 0, 1), atol=3e-4)
    monkeypatch.setattr(gavel_hsd, "solve_feasibility",
                        lambda *a, **k: (np.zeros((9, 3)), gavel_hsd.NUMERICAL_TROUBLE, 0))
    lp2 = AllocationLP(d["scale0"], d["capacity0"])
    X2 = lp2.feasible(d["a0"], d["need0"])
    assert lp2.ecos_path_fallbacks == 1 and np.all((d["a0"] * X2).sum(axis=1) >= d["need0"] * (1 - 1e-6))


@settings(max_examples=30, deadline=None)
@given(feasible_problems(), st.integers(0, 2**31))
def test_job_blocks_and_woodbury_solve_the_normal_equations(p, seed):
    # the factorization alone (no refinement): G' W^-2 G dx = r against a dense solve
    from reference_gavel_hsd import dense_rows, equilibrate
    scale, capacity, a, need = p
    n, m = a.shape
    E = gavel_hsd._equilibrate(np.asarray(scale, float), a)
    G, _, _ = equilibrate(dense_rows(scale, capacity, a, need)[0])
    rng = np.random.default_rng(seed)
    w2 = 10.0 ** rng.uniform(-3, 3, G.shape[0])
    r = rng.normal(size=(n, m))
    Lb, Y, Ls = np.zeros((n, m, m)), np.zeros((n, m, m)), np.zeros((m, m))
    assert gavel_hsd._factor(E[:4], w2, Lb, Y, Ls)
    dx = np.empty((n, m))
    gavel_hsd._normal_solve(E[:4], Lb, Y, Ls, r, dx)
    want = np.linalg.solve(G.T @ (G / w2[:, None]), r.ravel())
    np.testing.assert_allclose(dx.ravel(), want, rtol=1e-7, atol=1e-9 * np.abs(want).max())
