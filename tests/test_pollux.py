"""Pollux's objective and searches (sim.policies.pollux_search): hand-worked toy cases."""
from __future__ import annotations

import numpy as np
import pytest

from sim.policies.pollux_search import FITNESS_EPS, PolluxProblem, dp_search, nsga2


def _problem(base, speedups, factor, capacity=(4,), max_replicas=None):
    base = np.asarray(base, np.int64)
    j = base.shape[0]
    tab = np.zeros((j, 2, 5))
    for k, s in enumerate(speedups):          # s[r] at r = 0..4, one node
        tab[k, 1, :] = s
    cap = np.asarray(capacity, np.int64)
    mr = np.full(j, 4) if max_replicas is None else np.asarray(max_replicas)
    return PolluxProblem(tab, base, cap, mr, np.asarray(factor, float))


def test_power_mean_and_restart_penalty_by_hand():
    # one node of 4 GPUs, scale N / G = 1 / 4; job 0 holds 2 GPUs, job 1 none
    s0 = [0, 1.0, 1.8, 2.4, 2.8]
    s1 = [0, 1.0, 1.9, 2.7, 3.4]
    # restart factor of job 0: age 90 s, 1 restart, delay 30 s: (90 - 30) / (90 + 30) = 0.5
    p = _problem([[2], [0]], [s0, s1], [0.5, 1.0])
    keep = np.array([[[2], [2]]])              # job 0 keeps 2, job 1 gets 2 (it moved: factor 1)
    mean, util = p.values(keep)
    a, b = 1.8 / 4, 1.9 / 4
    assert mean[0] == pytest.approx(1 / (((a + FITNESS_EPS) ** -1 + (b + FITNESS_EPS) ** -1) / 2))
    assert util[0] == pytest.approx((1.8 + 1.9) / 4)
    moved = np.array([[[1], [3]]])             # job 0 shrinks to 1: its speedup is halved
    mean2, _ = p.values(moved)
    a2, b2 = 0.5 * 1.0 / 4, 2.7 / 4
    assert mean2[0] == pytest.approx(1 / (((a2 + FITNESS_EPS) ** -1 + (b2 + FITNESS_EPS) ** -1) / 2))
    assert mean[0] > mean2[0]


def test_two_job_optimum_known_by_hand():
    # nobody holds GPUs; job 0 scales linearly, job 1 not at all beyond 1 GPU:
    # the best split of 4 GPUs is 3 + 1 (sum of 1/s smallest: 1/(3/4) + 1/(1/4))
    s0 = [0, 1, 2, 3, 4]
    s1 = [0, 1, 1, 1, 1]
    p = _problem([[0], [0]], [s0, s1], [1.0, 1.0])
    x = dp_search(p, per_node=4)
    assert x[:, 0].tolist() == [3, 1]
    states, f = nsga2(p, p.base[None], np.random.default_rng(0), population=20, generations=20)
    best = states[np.argmin(f[:, 0])]
    assert best[:, 0].tolist() == [3, 1]
    assert -f[:, 0].min() == pytest.approx(p.values(x[None])[0][0])


def test_restart_penalty_keeps_a_young_job_in_place():
    # job 0 holds 2 GPUs and just restarted (factor 0): moving it kills its term, so it keeps 2
    s = [0, 1, 2, 3, 4]
    p = _problem([[2], [0]], [s, s], [0.0, 1.0])
    x = dp_search(p, per_node=4)
    assert x[0, 0] == 2 and x[1, 0] == 2


def test_repair_enforces_capacity_caps_and_one_distributed_job_per_node():
    tab = np.ones((2, 3, 9))
    p = PolluxProblem(tab, np.zeros((2, 2), np.int64), np.array([4, 4]), np.array([8, 3]), np.ones(2))
    bad = np.array([[[4, 4], [4, 4]]])
    fixed = p.repair(bad, np.random.default_rng(1))[0]
    assert (fixed.sum(axis=0) <= 4).all()
    assert fixed[1].sum() <= 3
    assert ((fixed > 0).sum(axis=1) > 1).sum() <= 1 or (fixed[:, 0] > 0).sum() <= 1


def test_dp_reaches_nsga2_value_on_random_problems():
    rng = np.random.default_rng(3)
    for _ in range(3):
        j, n = 6, 4
        r = np.arange(17)
        tab = np.zeros((j, n + 1, 17))
        for k in range(j):
            e = rng.uniform(0.3, 1.0)
            tab[k, 1:, 1:] = (r[1:] ** e)[None, :] * (0.9 ** np.arange(n))[:, None]
        p = PolluxProblem(tab, np.zeros((j, n), np.int64), np.full(n, 4), np.full(j, 16), np.ones(j))
        x = dp_search(p, per_node=4)
        _, f = nsga2(p, p.base[None], np.random.default_rng(0), population=30, generations=30)
        assert p.values(x[None])[0][0] >= 0.99 * -f[:, 0].min()



def test_polish_never_lowers_the_objective_and_can_be_switched_off():
    # the polished answer is the best of the DP's candidates and the polish's, so it is never
    # worse than the unpolished one drawn from the same random state; polish=False reaches it
    from sim.policies.pollux_search import POLISH, PolluxSearch
    rng = np.random.default_rng(5)
    j, n = 5, 3
    r = np.arange(9)
    tab = np.zeros((j, n + 1, 9))
    for k in range(j):
        tab[k, 1:, 1:] = (r[1:] ** rng.uniform(0.3, 1.0))[None, :] * (0.8 ** np.arange(n))[:, None]
    base = np.zeros((j, n), np.int64)
    base[0, 0], base[1, 1] = 3, 2
    p = PolluxProblem(tab, base, np.full(n, 4), np.full(j, 8), rng.uniform(0.2, 1.0, j))
    plain = dp_search(p, 4, np.random.default_rng(1), (0, 0))
    polished = dp_search(p, 4, np.random.default_rng(1), POLISH)
    v = p.values(np.stack([plain, polished]))[0]
    assert v[1] >= v[0]
    off = PolluxSearch("pollux", "dp", seed=1, polish=False)
    assert off.params()["polish"] is False
    np.testing.assert_array_equal(off.solve(p, np.arange(j), 4), plain)


def test_seeds_carry_last_rounds_rows_by_job_or_by_position():
    # last round's order (by attained service) was jobs 7, 3, 9; this round's is 3, 5, 7 (9 left,
    # 5 is new).  By job, 3 and 7 keep their rows; by position (the authors' _adapt_prev_states)
    # the first surviving job of last round's order (7) seeds the first of this round's (3)
    from sim.policies.pollux_search import PolluxSearch, prev_rows
    prev, cur = np.array([7, 3, 9]), np.array([3, 5, 7])
    dst, src = prev_rows(prev, cur, "job")
    assert dst.tolist() == [0, 2] and src.tolist() == [1, 0]
    dst, src = prev_rows(prev, cur, "position")
    assert dst.tolist() == [0, 2] and src.tolist() == [0, 1]
    rows = np.array([[[4, 0]], [[0, 2]], [[1, 1]]]).reshape(1, 3, 2)     # one Pareto member
    p = PolluxProblem(np.zeros((3, 2, 5)), np.zeros((3, 2), np.int64), np.full(2, 4), np.full(3, 4), np.ones(3))
    for match, want in (("job", [[0, 2], [0, 0], [4, 0]]), ("position", [[4, 0], [0, 0], [0, 2]])):
        s = PolluxSearch("pollux", "nsga2", prev_match=match)
        s.prev_states, s.prev_jobs = rows, prev
        np.testing.assert_array_equal(s._seed_states(cur, p)[0], want)
    with pytest.raises(Exception, match="prev_match"):
        PolluxSearch("pollux", "nsga2", prev_match="name")
    with pytest.raises(Exception, match="survival"):
        PolluxSearch("pollux", "nsga2", survival="random")


def _brute_counts_objective(p: PolluxProblem, per_node: int) -> float:
    """Plain reference of the DP's optimum: min over every count vector within the capacity of
    sum_j v_j(r_j), v = 1 / (scaled speedup + eps), packed on ceil(r / per_node) nodes and
    restarted, or kept at the current allocation without the restart factor."""
    import itertools
    g = int(p.capacity.sum())
    base_r = p.base.sum(axis=1)
    base_n = np.count_nonzero(p.base, axis=1)
    nmax, rmax = p.speedup.shape[1] - 1, p.speedup.shape[2] - 1

    def value(j, r):
        v = np.inf
        if r <= p.max_replicas[j]:
            s = p.speedup[j, min(-(-r // per_node), nmax), min(r, rmax)] * p.scale * p.restart_factor[j]
            v = 1.0 / (s + FITNESS_EPS)
        if r == base_r[j]:
            s = p.speedup[j, min(base_n[j], nmax), min(r, rmax)] * p.scale
            v = min(v, 1.0 / (s + FITNESS_EPS))
        return v

    best = np.inf
    for counts in itertools.product(range(g + 1), repeat=p.base.shape[0]):
        if sum(counts) <= g:
            best = min(best, sum(value(j, r) for j, r in enumerate(counts)))
    return best


def test_dp_counts_reach_the_brute_force_optimum():
    """The DP's columns stop at max(cap, GPUs held) (sim.policies.pollux_search._dp_counts); its
    objective is the exhaustive optimum on random small problems, caps below and above the
    cluster, jobs holding more than their cap included."""
    from hypothesis import given, settings, strategies as st

    from sim.policies.pollux_search import _dp_counts, _job_values

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, 10_000))
    def check(seed):
        rng = np.random.default_rng(seed)
        j, per_node = int(rng.integers(1, 4)), 2
        capacity = np.full(int(rng.integers(1, 3)), per_node, np.int64)
        g = int(capacity.sum())
        tab = np.zeros((j, 3, g + 1))
        tab[:, 1:, 1:] = np.sort(rng.random((j, 2, g)), axis=2) * 3
        base = np.zeros((j, capacity.shape[0]), np.int64)
        free = capacity.copy()
        for k in range(j):
            n = int(rng.integers(capacity.shape[0]))
            base[k, n] = int(rng.integers(0, free[n] + 1))
            free[n] -= base[k, n]
        cap = rng.integers(0, g + 2, j)
        p = PolluxProblem(tab, base, capacity, cap, rng.random(j))
        counts, _ = _dp_counts(p, per_node)
        v = _job_values(p, per_node, g)
        base_r, base_n = base.sum(axis=1), np.count_nonzero(base, axis=1)
        keep = 1.0 / (tab[np.arange(j), np.minimum(base_n, 2), base_r] * p.scale + FITNESS_EPS)
        got = sum(min(v[k, r], keep[k]) if r == base_r[k] else v[k, r] for k, r in enumerate(counts))
        assert counts.sum() <= g
        assert got == pytest.approx(_brute_counts_objective(p, per_node), rel=1e-12)

    check()


def test_allowed_nodes_hold_in_repair_and_in_the_dp_placement():
    # two nodes of 4 GPUs; job 0 may use node 1 only (its GPU type), job 1 both
    tab = np.zeros((2, 3, 9))
    tab[:, 1, 1:5] = [1, 2, 3, 4]
    tab[:, 2, 2:9] = np.arange(2, 9) * 0.9
    allowed = np.array([[False, True], [True, True]])
    p = PolluxProblem(tab, np.zeros((2, 2), np.int64), np.array([4, 4]), np.array([4, 4]), np.ones(2), allowed)
    fixed = p.repair(np.array([[[3, 1], [0, 2]]]), np.random.default_rng(0))[0]
    assert fixed[0, 0] == 0 and fixed[0, 1] == 1
    x = dp_search(p, per_node=4, rng=np.random.default_rng(1))
    assert x[0, 0] == 0 and x[0].sum() > 0
    states, _ = nsga2(p, p.base[None], np.random.default_rng(2), population=10, generations=5)
    assert np.all(states[:, 0, 0] == 0)


# -- the count DP kernel agrees with its plain-Python reference --------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from reference_pollux_search import dp_counts_reference  # noqa: E402
from sim.policies.pollux_kernels import dp_counts  # noqa: E402

_COSTS = [0.1, 1 / 3, 0.5, 1.0, 2.0, 1000.0, np.inf]


@st.composite
def _dp_inputs(draw):
    g = draw(st.integers(0, 24))
    w = draw(st.integers(0, g))
    j = draw(st.integers(0, 7))
    v = np.array(draw(st.lists(st.sampled_from(_COSTS), min_size=j * (w + 1), max_size=j * (w + 1))),
                 float).reshape(j, w + 1)
    if j:
        v[:, 0] = np.array(draw(st.lists(st.sampled_from(_COSTS[:-1]), min_size=j, max_size=j)))
        # most rows as in the search: finite up to a cap, inf above it, one finite entry past it
        for k in range(j):
            if draw(st.booleans()):
                cap = draw(st.integers(0, w))
                v[k, cap + 1:] = np.inf
                if draw(st.booleans()) and w:
                    v[k, draw(st.integers(1, w))] = draw(st.sampled_from(_COSTS[:-1]))
    return v, g


@settings(max_examples=300, deadline=None)
@given(d=_dp_inputs())
def test_dp_counts_kernel_matches_reference(d):
    v, g = d
    got = dp_counts(v, g)
    np.testing.assert_array_equal(got, dp_counts_reference(v, g))
    assert got.sum() <= g


def test_dp_counts_kernel_rejects_a_row_without_a_finite_zero():
    with pytest.raises(ValueError, match="v\\[:, 0\\]"):
        dp_counts(np.array([[np.inf, 1.0]]), 4)


# -- the NSGA-II operator kernels agree with the numpy expressions they replaced -------------------
from reference_pollux_search import mutate_reference, repair_reference, tournament_reference  # noqa: E402
from sim.policies.pollux_kernels import repair_states  # noqa: E402
from sim.policies.pollux_search import MAX_NODES_PER_JOB, _tournament  # noqa: E402


@st.composite
def _operator_inputs(draw):
    """A problem (nodes of 1-8 GPUs, caps 0-20 GPUs, some jobs limited to some nodes) and states
    [P, J, N] of 0-9 GPUs per entry: over capacity, spread over many nodes, or empty."""
    p, j, n = draw(st.integers(1, 6)), draw(st.integers(0, 6)), draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    capacity = rng.integers(1, 9, n)
    base = np.minimum(rng.integers(0, 3, (j, n)) * (rng.random((j, n)) < 0.3), capacity[None])
    allowed = rng.random((j, n)) < 0.8 if draw(st.booleans()) else None
    problem = PolluxProblem(np.zeros((j, 2, 2)), base, capacity, rng.integers(0, 21, j), np.ones(j),
                            allowed=allowed, avoid_interference=draw(st.booleans()))
    states = rng.integers(0, 10, (p, j, n)) * (rng.random((p, j, n)) < draw(st.sampled_from([0.1, 0.5, 1.0])))
    return problem, states, seed


def _same_draws(a: np.random.Generator, b: np.random.Generator) -> bool:
    return a.bit_generator.state == b.bit_generator.state


@settings(max_examples=200, deadline=None)
@given(d=_operator_inputs())
def test_repair_and_mutation_kernels_match_the_numpy_operators(d):
    """The same states, bit for bit, and the same generator state after (the same draws): jobs
    with no room (0 replicas), more than MAX_NODES_PER_JOB nodes, nodes over capacity, interference
    avoidance on and off, node masks."""
    problem, states, seed = d
    got_rng, want_rng = np.random.default_rng(seed), np.random.default_rng(seed)
    got, want = problem.repair(states, got_rng), repair_reference(problem, states, want_rng, MAX_NODES_PER_JOB)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert _same_draws(got_rng, want_rng)
    got, want = problem.mutate(states, got_rng), mutate_reference(problem, states, want_rng)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert _same_draws(got_rng, want_rng)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.integers(1, 12), n=st.integers(1, 30),
       levels=st.integers(1, 4))
def test_tournament_kernel_matches_the_numpy_tournament(seed, size, n, levels):
    """Ties everywhere (objectives and crowding drawn from a few levels, inf crowding)."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, levels, (size, 2)).astype(float)
    crowd = np.where(rng.random(size) < 0.3, np.inf, rng.integers(0, levels, size).astype(float))
    rank = np.zeros(size, np.int64)
    got_rng, want_rng = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    np.testing.assert_array_equal(_tournament(rank, crowd, f, n, got_rng),
                                  tournament_reference(rank, crowd, f, n, want_rng))
    assert _same_draws(got_rng, want_rng)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.integers(1, 12), rounds=st.integers(1, 4))
def test_tournament_competitors_are_whole_permutations(seed, size, rounds):
    """pymoo's TournamentSelection: ``size * rounds`` tournaments take two competitors each from
    concatenated permutations, so every member competes exactly ``2 * rounds`` times (with
    drawing with replacement some would sit out); all-equal objectives and crowding, so the
    winner of each pair is the coin's."""
    f, crowd, rank = np.zeros((size, 2)), np.zeros(size), np.zeros(size, np.int64)
    rng = np.random.default_rng(seed)
    perm = np.concatenate([rng.permutation(size) for _ in range(2 * rounds)])
    u = rng.random(size * rounds)
    want = np.where(u < 0.5, perm[0::2], perm[1::2])
    np.testing.assert_array_equal(_tournament(rank, crowd, f, size * rounds, np.random.default_rng(seed)), want)
    assert np.bincount(perm, minlength=size).tolist() == [2 * rounds] * size


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), max_nodes=st.integers(0, 5), avoid=st.booleans())
def test_repair_kernel_caps_nodes_per_job_as_the_numpy_repair(seed, max_nodes, avoid):
    """The node cap reached (MAX_NODES_PER_JOB = 16 rarely binds in the operator test): a small
    cap, many one-GPU entries, replica caps from -2 (nothing) to 60, nodes of 0-8 GPUs, 1-40 nodes."""
    rng = np.random.default_rng(seed)
    p, j, n = rng.integers(1, 4), rng.integers(0, 6), rng.integers(1, 41)
    capacity = rng.integers(0, 9, n)
    capacity[0] = max(capacity[0], 1)                 # the problem's scale needs some GPUs
    problem = PolluxProblem(np.zeros((j, 2, 2)), np.zeros((j, n), np.int64), capacity,
                            rng.integers(-2, 61, j), np.ones(j), avoid_interference=avoid)
    states = rng.integers(0, 3, (p, j, n))
    shuffle_rng = np.random.default_rng(seed + 1)
    got = repair_states(states.copy(), shuffle_rng.random(states.shape), problem.max_replicas,
                        capacity, max_nodes, avoid)
    want = repair_reference(problem, states, np.random.default_rng(seed + 1), max_nodes)
    np.testing.assert_array_equal(got, want)
    assert (np.count_nonzero(got, axis=2) <= max(max_nodes, 0)).all()


# -- NSGA-II's survival keys (ranks and crowding) agree with the numpy code they replaced ----------
from reference_pollux_search import survival_keys_reference  # noqa: E402
from sim.policies.pollux_kernels import survival_keys  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(0, 40), k=st.integers(1, 3),
       levels=st.sampled_from([2, 5, 0]), specials=st.floats(0.0, 0.3))
def test_survival_keys_kernel_matches_the_numpy_ranks_and_crowding(seed, n, k, levels, specials):
    """Bit for bit: ties (objectives from a few levels, or continuous with ``levels=0``), fronts of
    one, two and many rows, -0.0 beside 0.0, and +-inf and NaN entries (a NaN row is in no
    domination relation; NumPy sorts NaN last)."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, levels, (n, k)).astype(float) if levels else rng.normal(size=(n, k))
    f[rng.random((n, k)) < specials / 3] = -0.0
    for value in (np.inf, -np.inf, np.nan):
        f[rng.random((n, k)) < specials / 6] = value
    rank, crowd = survival_keys(f)
    want_rank, want_crowd = survival_keys_reference(f)
    np.testing.assert_array_equal(rank, want_rank)
    np.testing.assert_array_equal(crowd, want_crowd)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(0, 40), k=st.integers(1, 3),
       levels=st.sampled_from([2, 3, 0]), specials=st.floats(0.0, 0.3))
def test_pymoo_crowding_kernel_matches_its_reference(seed, n, k, levels, specials):
    """``survival_keys(f, pymoo_crowding=True)`` against pymoo 0.4.2.1's fronts and crowding
    written out (tests/reference_pollux_search.py; that reference gave pymoo's own
    ``calc_crowding_distance`` bit for bit on 19,310 random fronts, and the fronts, ranks and
    crowding of pymoo's ``RankAndCrowdingSurvival`` on 3,000 random populations, docs/goodput.md):
    repeated rows (few levels), zero-span objectives, -0.0, +-inf and NaN, bit for bit."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, levels, (n, k)).astype(float) if levels else rng.normal(size=(n, k))
    f[rng.random((n, k)) < specials / 3] = -0.0
    for value in (np.inf, -np.inf, np.nan):
        f[rng.random((n, k)) < specials / 6] = value
    rank, crowd = survival_keys(f, True)
    with np.errstate(invalid="ignore"):
        want_rank, want_crowd = survival_keys_reference(f, pymoo_crowding=True)
    np.testing.assert_array_equal(rank, want_rank)
    np.testing.assert_array_equal(crowd, want_crowd)


def test_pymoo_crowding_zeroes_repeats_and_flat_objectives():
    """A repeated objective vector gets 0 (the first keeps its distance): (0, 3), (1, 1), (1, 1),
    (3, 0) gives the middle row ((1 - 0) / 3 + (3 - 1) / 3) x 2 objectives / 2 = 1, where the
    stable rule splits the repeat by position.  A front of one vector three times has span 0 in
    every objective: pymoo gives every row 0 (its ends too), the stable rule inf at the ends."""
    f = np.array([[0.0, 3.0], [1.0, 1.0], [1.0, 1.0], [3.0, 0.0]])
    rank, crowd = survival_keys(f, True)
    assert rank.tolist() == [0, 0, 0, 0]
    assert crowd.tolist() == [np.inf, 1.0, 0.0, np.inf]
    _, stable = survival_keys(f)
    assert stable[1] != stable[2]
    same = np.array([[2.0, 2.0]] * 3)
    assert survival_keys(same, True)[1].tolist() == [0.0, 0.0, 0.0]
    assert survival_keys(same)[1].tolist() == [np.inf, 0.0, np.inf]


def test_survive_pymoo_splits_equal_crowding_at_random():
    """Six rows of one front on a line, four survive: the two ends (crowding inf) always, and two
    of the four inner rows, whose crowding ties.  The stable rule keeps the lowest rows; pymoo's
    draws the pair (every one of the six pairs over 40 seeds), the same for one seed."""
    from sim.policies.pollux_search import _survive
    x = np.arange(6.0)
    f = np.column_stack([x, 5.0 - x])
    keep, _, _ = _survive(f, 4)
    assert keep.tolist() == [0, 5, 1, 2]
    picks = {tuple(sorted(_survive(f, 4, "pymoo", np.random.default_rng(s))[0].tolist())) for s in range(40)}
    assert all(p[0] == 0 and p[-1] == 5 for p in picks) and len(picks) == 6
    a = _survive(f, 4, "pymoo", np.random.default_rng(7))[0]
    np.testing.assert_array_equal(a, _survive(f, 4, "pymoo", np.random.default_rng(7))[0])


def test_survival_keys_on_a_known_front():
    """Two fronts: (0, 3), (1, 1), (3, 0) and (2, 2) dominated by (1, 1); the middle row of the
    first front has crowding (3 - 0) / 3 + (3 - 0) / 3 = 2."""
    f = np.array([[0.0, 3.0], [1.0, 1.0], [3.0, 0.0], [2.0, 2.0]])
    rank, crowd = survival_keys(f)
    assert rank.tolist() == [0, 0, 0, 1]
    assert crowd.tolist() == [np.inf, 2.0, np.inf, np.inf]


def test_row_keys_are_each_states_bytes():
    """NSGA-II's duplicate test keys: one state's ``tobytes()``, also for views and empty shapes."""
    from sim.policies.pollux_search import _row_keys
    for shape in [(3, 2, 4), (0, 2, 4), (2, 0, 4), (4, 3, 0), (1, 1, 1)]:
        a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        for view in (a, a[:, ::-1], a[::2]):
            assert _row_keys(view) == [row.tobytes() for row in view]
