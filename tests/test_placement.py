"""The Numba placement kernels agree with the plain-Python references, and keep their promises."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reference_placement as ref
from sim.placement import (CONSOLIDATED, SPREAD, TYPE_CHOICES, changed_jobs, greedy_place,
                           place_one, placement_summary, random_type_keys, type_keys)


def SETTINGS(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODES = st.sampled_from([CONSOLIDATED, SPREAD])


# -- strategies ----------------------------------------------------------------
@st.composite
def clusters(draw):
    n = draw(st.integers(1, 12))
    n_types = draw(st.integers(1, 3))
    cap = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    types = draw(st.lists(st.integers(0, n_types - 1), min_size=n, max_size=n))
    speed = draw(st.lists(st.sampled_from([0.5, 0.75, 1.0, 1.25]), min_size=n, max_size=n))
    return (np.array(cap, np.int32), np.array(types, np.int32), n_types, np.array(speed, float))


@st.composite
def scenarios(draw):
    """A cluster, active jobs with valid current placements, wants and an order."""
    cap, types, n_types, speed = draw(clusters())
    n_jobs = draw(st.integers(0, 10))
    owners = draw(st.lists(st.integers(-1, n_jobs - 1), min_size=int(cap.sum()),
                           max_size=int(cap.sum())))
    current = [dict() for _ in range(n_jobs)]
    slot = 0
    for node, g in enumerate(cap):          # GPU slot -> owning job (-1: free)
        for _ in range(g):
            j = owners[slot]
            slot += 1
            if j >= 0:
                current[j][node] = current[j].get(node, 0) + 1
    current = [sorted(p.items()) for p in current]
    want = []
    for p in current:
        w = draw(st.one_of(st.none(), st.integers(-1, 12)))
        size = sum(c for _, c in p)
        want.append(size if w is None and size > 0 else (1 if w is None else w))
    perm = draw(st.permutations(range(n_jobs)))
    order = list(perm[:draw(st.integers(0, n_jobs))])
    full = (1 << n_types) - 1                # allowed types: mostly all, some jobs fewer
    allowed = draw(st.lists(st.one_of(st.just(full), st.integers(0, full)), min_size=n_jobs,
                            max_size=n_jobs))
    keys = draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.0, -3.5]), min_size=n_types,
                                  max_size=n_types), min_size=n_jobs, max_size=n_jobs))
    return dict(cap=cap, types=types, n_types=n_types, speed=speed, current=current,
                want=want, order=order, mode=draw(MODES), preemptive=draw(st.booleans()),
                blocking=draw(st.booleans()), allowed=allowed, keys=keys)


def _typed(s):
    """allowed masks and keys of a scenario (default: every type, keys by type index)."""
    n, t = len(s["want"]), s["n_types"]
    allowed = s.get("allowed", [(1 << t) - 1] * n)
    keys = s.get("keys", [list(range(t))] * n)
    return (np.array(allowed, np.int64).reshape(n), np.array(keys, float).reshape(n, t))


def run_kernel(s):
    indptr, nodes, counts = ref.to_csr(s["current"])
    out = greedy_place(np.array(s["order"], np.int64), np.array(s["want"], np.int32),
                       indptr, nodes, counts, s["cap"], s["types"], s["n_types"], s["mode"],
                       s["preemptive"], s["blocking"], *_typed(s))
    return ref.to_lists(*out), out


def run_reference(s):
    allowed, keys = _typed(s)
    return ref.greedy_place(s["order"], s["want"], s["current"], [int(c) for c in s["cap"]],
                            [int(t) for t in s["types"]], s["n_types"], s["mode"],
                            s["preemptive"], s["blocking"], allowed.tolist(), keys.tolist())


def call_place_one(free, types, n_types, want, mode, allowed=None, key=None):
    allowed = (1 << n_types) - 1 if allowed is None else allowed
    key = np.arange(n_types, dtype=float) if key is None else np.asarray(key, float)
    nodes, counts = place_one(free, types, n_types, want, mode, allowed, key)
    return [(int(a), int(b)) for a, b in zip(nodes, counts)]


# -- kernels == references -------------------------------------------------------
@SETTINGS(100)
@given(c=clusters(), data=st.data(), want=st.integers(-1, 40), mode=MODES)
def test_place_one_matches_reference(c, data, want, mode):
    cap, types, n_types, _ = c
    used = data.draw(st.lists(st.integers(0, 8), min_size=len(cap), max_size=len(cap)))
    allowed = data.draw(st.integers(0, (1 << n_types) - 1))
    key = data.draw(st.lists(st.sampled_from([0.0, 1.0, -2.0]), min_size=n_types, max_size=n_types))
    free = np.maximum(cap - np.array(used, np.int32), 0).astype(np.int32)
    ref_free = [int(f) for f in free]
    expected = ref.place_one(ref_free, [int(t) for t in types], n_types, want, mode, allowed, key)
    got = call_place_one(free, types, n_types, want, mode, allowed, key)
    assert got == expected
    assert free.tolist() == ref_free


@SETTINGS(120)
@given(s=scenarios())
def test_greedy_place_matches_reference(s):
    got, _ = run_kernel(s)
    assert got == run_reference(s)


@SETTINGS(50)
@given(s=scenarios())
def test_placement_summary_matches_reference(s):
    pl, types, speed = s["current"], s["types"], s["speed"]
    ngpu, n_nodes, mask, min_speed = placement_summary(*ref.to_csr(pl), types, speed)
    got = list(zip(ngpu.tolist(), n_nodes.tolist(), mask.tolist(), min_speed.tolist()))
    assert got == ref.placement_summary(pl, types, speed)


@SETTINGS(50)
@given(s=scenarios(), data=st.data())
def test_changed_jobs_matches_reference(s, data):
    a = s["current"]
    b = []
    for p in a:
        how = data.draw(st.sampled_from(["same", "empty", "count", "node", "extra"]))
        p = list(p)
        if how == "empty":
            p = []
        elif how == "count" and p:
            p[0] = (p[0][0], p[0][1] + 1)
        elif how == "node" and p:
            p[-1] = (p[-1][0] + 1, p[-1][1])
        elif how == "extra":
            p = p + [(p[-1][0] + 1 if p else 0, 1)]
        b.append(p)
    got = changed_jobs(*ref.to_csr(a), *ref.to_csr(b)).tolist()
    assert got == ref.changed_jobs(a, b)


# -- invariants ------------------------------------------------------------------
@SETTINGS(80)
@given(s=scenarios())
def test_greedy_place_invariants(s):
    got, (indptr, nodes, counts) = run_kernel(s)
    assert indptr[0] == 0 and np.all(np.diff(indptr) >= 0)
    used = np.zeros_like(s["cap"])
    for i, p in enumerate(got):
        ns = [n for n, _ in p]
        assert ns == sorted(set(ns)), "nodes strictly increasing"
        assert all(c > 0 for _, c in p)
        for n, c in p:
            used[n] += c
        cur, size = s["current"][i], sum(c for _, c in s["current"][i])
        new_size = sum(c for _, c in p)
        if not s["preemptive"] and size > 0:
            assert p == cur, "non-preemptive never moves a running job"
        one_type = len({int(s["types"][n]) for n, _ in cur}) == 1
        if size > 0 and new_size == size and one_type:
            assert p == cur, "a kept placement is unchanged (a mixed one is re-placed on one type)"
        if p and p != cur:
            assert i in s["order"] and new_size == s["want"][i], "placed jobs get exactly want"
    assert np.all(used <= s["cap"]), "node capacity"


# -- edge cases ------------------------------------------------------------------
def _free(*g):
    return np.array(g, np.int32)


@pytest.mark.parametrize("mode", [CONSOLIDATED, SPREAD])
def test_place_one_edge_cases(mode):
    types = np.zeros(3, np.int32)
    free = _free(2, 0, 3)
    assert call_place_one(free, types, 1, 0, mode) == [] and free.tolist() == [2, 0, 3]
    assert call_place_one(free, types, 1, -2, mode) == [] and free.tolist() == [2, 0, 3]
    assert call_place_one(free, types, 1, 6, mode) == [] and free.tolist() == [2, 0, 3]
    full = _free(0, 0, 0)
    assert call_place_one(full, types, 1, 1, mode) == []
    single = _free(5)
    assert call_place_one(single, types[:1], 1, 5, mode) == [(0, 5)] and single.tolist() == [0]


def test_greedy_place_empty_order():
    s = dict(cap=_free(4, 4), types=_free(0, 0), n_types=1, speed=np.ones(2),
             current=[[(0, 2)], [], [(0, 1), (1, 3)]], want=[2, 1, 4], order=[], mode=0,
             blocking=False)
    assert run_kernel({**s, "preemptive": False})[0] == [[(0, 2)], [], [(0, 1), (1, 3)]]
    assert run_kernel({**s, "preemptive": True})[0] == [[], [], []]


def test_greedy_place_no_jobs():
    s = dict(cap=_free(4), types=_free(0), n_types=1, speed=np.ones(1), current=[], want=[],
             order=[], mode=0, blocking=True, preemptive=True)
    got, (indptr, nodes, counts) = run_kernel(s)
    assert got == [] and indptr.tolist() == [0] and nodes.size == 0


def test_greedy_place_all_nodes_full_non_preemptive():
    s = dict(cap=_free(2, 2), types=_free(0, 1), n_types=2, speed=np.ones(2),
             current=[[(0, 2)], [(1, 2)], []], want=[2, 2, 1], order=[2], mode=0,
             preemptive=False, blocking=True)
    assert run_kernel(s)[0] == [[(0, 2)], [(1, 2)], []]


def test_greedy_place_duplicates_in_order_count_once():
    s = dict(cap=_free(2, 2), types=_free(0, 0), n_types=1, speed=np.ones(2),
             current=[[], []], want=[2, 2], order=[0, 0, 0, 1], mode=0, preemptive=True,
             blocking=True)
    assert run_kernel(s)[0] == run_reference(s) == [[(0, 2)], [(1, 2)]]


# -- hand-worked toys --------------------------------------------------------------
def test_consolidated_first_fit_takes_node_0_when_it_fits():
    free = _free(4, 8, 8)
    assert call_place_one(free, _free(0, 0, 0), 1, 3, CONSOLIDATED) == [(0, 3)]
    assert free.tolist() == [1, 8, 8]
    assert call_place_one(free, _free(0, 0, 0), 1, 3, CONSOLIDATED) == [(1, 3)]


def test_consolidated_six_gpus_span_two_nodes_of_one_type():
    # node 0: 4 x type 0; nodes 1, 2: 4 x type 1.  Type 1 has 8 free >= 6.
    free = _free(4, 4, 4)
    assert call_place_one(free, _free(0, 1, 1), 2, 6, CONSOLIDATED) == [(1, 4), (2, 2)]
    assert free.tolist() == [4, 0, 2]


def test_consolidated_never_mixes_types():
    free = _free(3, 2, 1)                     # types 0, 1, 1: no type has 5 -> no placement
    assert call_place_one(free, _free(0, 1, 1), 2, 5, CONSOLIDATED) == []
    assert free.tolist() == [3, 2, 1]
    assert call_place_one(free, _free(0, 1, 1), 2, 3, CONSOLIDATED) == [(0, 3)]


def test_spread_round_robin_most_free_first():
    free = _free(1, 3, 2)
    # order by free: node 1, node 2, node 0; passes: 1,2,0 then 1,2 then 1
    assert call_place_one(free, _free(0, 0, 0), 1, 5, SPREAD) == [(0, 1), (1, 2), (2, 2)]
    assert free.tolist() == [0, 1, 0]


def test_fifo_blocking_vs_backfill_toy():
    s = dict(cap=_free(4), types=_free(0), n_types=1, speed=np.ones(1),
             current=[[(0, 2)], [], []], want=[2, 4, 1], order=[1, 2], mode=0,
             preemptive=False)
    assert run_kernel({**s, "blocking": True})[0] == [[(0, 2)], [], []]
    assert run_kernel({**s, "blocking": False})[0] == [[(0, 2)], [], [(0, 1)]]


def test_preemptive_selects_by_count_and_keeps_unchanged_running_jobs():
    # 2 nodes x 4.  Priority: job 2 (4 GPUs, new), job 0 (2, running on node 1), job 1 (4).
    s = dict(cap=_free(4, 4), types=_free(0, 0), n_types=1, speed=np.ones(2),
             current=[[(1, 2)], [(0, 4)], []], want=[2, 4, 4], order=[2, 0, 1], mode=0,
             preemptive=True, blocking=False)
    # selected: 2 (4) and 0 (2); job 1 is preempted; job 0 keeps node 1; job 2 takes node 0
    assert run_kernel(s)[0] == [[(1, 2)], [], [(0, 4)]]


# -- GPU types: never a zero-throughput type, never mixed, the choice rule ---------------
@SETTINGS(120)
@given(s=scenarios())
def test_greedy_place_one_allowed_type_per_job(s):
    got, _ = run_kernel(s)
    allowed, _ = _typed(s)
    for i, p in enumerate(got):
        kinds = {int(s["types"][n]) for n, _ in p}
        if p and p != s["current"][i]:          # (a kept placement is the caller's)
            assert len(kinds) == 1, "a job's GPUs come from one type"
            assert all((allowed[i] >> t) & 1 for t in kinds), "placed on a type it may use"


def test_type_rule_toy_first_fit_fastest_random():
    # node 0: 2 x type 0 (v100 say), node 1: 4 x type 1; a 2-GPU job, 3x faster on type 1
    cap, types = _free(2, 4), _free(0, 1)
    rates = np.array([[1.0, 3.0]])
    first = type_keys("first-fit", types, 2, np.array([0]), rates)[0]
    fast = type_keys("fastest", types, 2, np.array([0]), rates)[0]
    assert call_place_one(cap.copy(), types, 2, 2, CONSOLIDATED, 3, first) == [(0, 2)]
    assert call_place_one(cap.copy(), types, 2, 2, CONSOLIDATED, 3, fast) == [(1, 2)]
    # the job cannot run on type 1: it takes type 0 whatever the rule, or waits
    assert call_place_one(cap.copy(), types, 2, 2, CONSOLIDATED, 1, fast) == [(0, 2)]
    assert call_place_one(_free(0, 4), types, 2, 2, CONSOLIDATED, 1, fast) == []
    # random: both types are drawn over jobs and times, the same for the same seed
    picks = [call_place_one(cap.copy(), types, 2, 2, CONSOLIDATED, 3, k)[0][0]
             for k in random_type_keys(7, np.arange(40), 360.0, 2)]
    assert set(picks) == {0, 1}
    again = [call_place_one(cap.copy(), types, 2, 2, CONSOLIDATED, 3, k)[0][0]
             for k in random_type_keys(7, np.arange(40), 360.0, 2)]
    assert picks == again


def test_preemptive_new_job_prefers_free_type_over_preempting():
    # types 0 and 1, one 2-GPU node each; job 0 (low priority) runs on type 0.  A new,
    # higher-priority 2-GPU job takes the free type 1 (tier 0) even though type 0 comes
    # first: nobody is preempted.  With type 1 barred for job 1 it takes type 0 (tier 1) and
    # job 0 moves to type 1 (free); with type 1 barred for job 0 too, job 0 is preempted.
    s = dict(cap=_free(2, 2), types=_free(0, 1), n_types=2, speed=np.ones(2),
             current=[[(0, 2)], []], want=[2, 2], order=[1, 0], mode=0, preemptive=True,
             blocking=False, allowed=[3, 3], keys=[[0.0, 1.0], [0.0, 1.0]])
    assert run_kernel(s)[0] == run_reference(s) == [[(0, 2)], [(1, 2)]]
    s = {**s, "allowed": [3, 1]}
    assert run_kernel(s)[0] == run_reference(s) == [[(1, 2)], [(0, 2)]]
    s = {**s, "allowed": [1, 1]}
    assert run_kernel(s)[0] == run_reference(s) == [[], [(0, 2)]]


@SETTINGS(40)
@given(seed=st.integers(0, 2**63 - 1), now=st.floats(0, 1e9), n_types=st.integers(1, 4))
def test_random_keys_deterministic_and_distinct(seed, now, n_types):
    jobs = np.arange(16)
    a = random_type_keys(seed, jobs, now, n_types)
    assert np.array_equal(a, random_type_keys(seed, jobs, now, n_types))
    assert a.shape == (16, n_types) and np.all(a >= 0) and np.all(a < 2.0 ** 53)
    assert set(TYPE_CHOICES) == {"first-fit", "fastest", "random"}
