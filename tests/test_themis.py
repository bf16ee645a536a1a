"""Themis (sim/policies/themis.py): finish-time fairness, leases, partial-allocation auctions."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, specs
from sim.cluster import Cluster
from sim.engine import EngineConfig, simulate
from sim.errors import ConfigError
from sim.metrics import summary
from sim.policies import get_policy
from sim.policies.themis_kernels import auction
from sim.presets import load_cluster
from sim.state import SchedState
from sim.throughput import default_oracle
from sim.workload import generate_workload


def _cluster(gpus):
    n = len(gpus)
    return Cluster(name="toy", gpu_types=("slow",), node_gpus=np.asarray(gpus, np.int32),
                   node_type=np.zeros(n, np.int32), node_speed=np.ones(n),
                   intra_bw_gbps=np.full(n, 100.0), inter_bw_gbps=np.full(n, 10.0))


def _state(cluster, jobs, now, running, remaining):
    """running: {job id: node} (one GPU each); every job of ``jobs`` active."""
    active = np.arange(len(jobs), dtype=np.int64)
    lens = [1 if j in running else 0 for j in active]
    return SchedState(now=now, reasons=1, cluster=cluster, jobs=jobs, active=active,
                      ngpu=np.asarray(lens, np.int32), remaining=np.asarray(remaining, float),
                      attained_gpu_s=np.zeros(active.size), run_s=np.zeros(active.size),
                      queued_since=np.zeros(active.size),
                      pl_indptr=np.r_[0, np.cumsum(lens)].astype(np.int64),
                      pl_nodes=np.asarray([running[j] for j in active if j in running], np.int32),
                      pl_counts=np.ones(len(running), np.int32), oracle=LinearOracle())


def _placed(plan):
    return {i: int(plan.nodes[plan.indptr[i]]) for i in range(plan.indptr.size - 1)
            if plan.indptr[i + 1] > plan.indptr[i]}


def test_auction_and_partial_allocation_by_hand():
    # one GPU, two bidders with gains 2 and 1: the first wins; without it the second would
    # have won (gain 1), so the winner's share is exp(0 - 1)
    gain, demand, free = np.array([[2.0], [1.0]]), np.array([1, 1]), np.array([1])
    won, share = auction(gain, demand, free)
    assert won.tolist() == [0, -1]
    assert share == pytest.approx([math.exp(-1.0), 1.0])
    # two types: the larger gain takes its type first, the other bidder the other type
    won, _ = auction(np.array([[3.0, 1.0], [2.5, 2.0]]), np.array([1, 1]), np.array([1, 1]))
    assert won.tolist() == [0, 1]


def test_two_jobs_one_gpu_by_hand():
    # one GPU at 1 it/s, A and B at t=0 with 1200 iterations each: N = 2, isolated rate 0.5,
    # T_id = 2400 s.  rho_none = (600 + 2400) / 2400 = 1.25, rho_run = 1200 / 2400 = 0.5 for
    # both; f = 0: both bid, A wins the tie (by id).  Without A, B would gain log 2.5, so A's
    # share is 1 / 2.5: a lease of 240 s.  At t = 240 (A: 960 left): rho_none A = (240 + 600
    # + 1920) / 2400 = 1.15, rho_run A = 1200 / 2400 = 0.5; B: 1.35 and 0.6.  A's gain log 2.3
    # beats B's log 2.25: A keeps its GPU for 600 / 2.25 s.
    cluster, jobs = _cluster([1]), specs([0.0, 0.0], [1, 1], [1200.0, 1200.0], delay=0.0)
    pol = get_policy("themis", fairness_knob=0.0)
    p = pol.schedule(_state(cluster, jobs, 0.0, {}, [1200.0, 1200.0]))
    assert _placed(p) == {0: 0} and p.wakeup == pytest.approx(240.0)
    p = pol.schedule(_state(cluster, jobs, 240.0, {0: 0}, [960.0, 1200.0]))
    assert _placed(p) == {0: 0} and p.wakeup == pytest.approx(240.0 + 600.0 / 2.25)


def test_default_knob_one_bidder_and_leftovers():
    # two GPUs, three one-GPU jobs, f = 0.8: ceil(0.2 * 3) = 1 bidder (the worst rho; all
    # tie, so job 0), alone in its auction: share 1, a 600 s lease.  The GPU left over goes to
    # the next job by rho (job 1), work-conserving; job 2 waits.
    cluster, jobs = _cluster([2]), specs([0.0] * 3, [1] * 3, [1000.0] * 3, delay=0.0)
    pol = get_policy("themis")
    p = pol.schedule(_state(cluster, jobs, 0.0, {}, [1000.0] * 3))
    assert set(_placed(p)) == {0, 1} and p.wakeup == pytest.approx(600.0)
    # at t = 100 (an arrival, say) both leases hold: nothing moves
    p = pol.schedule(_state(cluster, jobs, 100.0, {0: 0, 1: 0}, [900.0, 900.0, 1000.0]))
    assert set(_placed(p)) == {0, 1}


def test_runs_gavel_trace_to_completion_and_is_fairer_than_fifo():
    cluster = load_cluster("gavel-108")
    jobs = generate_workload(120, 20.0, 3)
    res = {n: summary(simulate(cluster, jobs, get_policy(n), default_oracle()))
           for n in ("themis", "fifo")}
    assert res["themis"]["n_jobs"] == 120 and np.isfinite(res["themis"]["avg_jct_s"])
    assert res["themis"]["max_rho"] <= res["fifo"]["max_rho"]


def test_bad_parameters():
    for kw in ({"lease_s": 0}, {"lease_s": "x"}, {"fairness_knob": 1.0}, {"fairness_knob": -0.1}):
        with pytest.raises(ConfigError, match="themis"):
            get_policy("themis", **kw)
    assert get_policy("themis").params() == {"placement": "consolidated", "lease_s": 600.0,
                                             "fairness_knob": 0.8}


# -- the kernels against the numpy code they replaced (tests/reference_themis.py) ------------
@st.composite
def _decision(draw):
    """A cluster of 1-3 types, active jobs with rates (some 0), a placement (some jobs held)."""
    m = draw(st.integers(1, 3))
    node_type = np.array(draw(st.lists(st.integers(0, m - 1), min_size=m, max_size=8)) + list(range(m)),
                         np.int64)
    node_gpus = np.array(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=node_type.size,
                                       max_size=node_type.size)), np.int64)
    n = draw(st.integers(1, 9))
    demand = np.array(draw(st.lists(st.sampled_from([1, 1, 2, 4]), min_size=n, max_size=n)), np.int64)
    thr = np.array(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 1.0, 2.5, 7.0]), min_size=n * m,
                                 max_size=n * m))).reshape(n, m)
    free = node_gpus.copy()
    indptr, nodes, counts = [0], [], []
    for i in range(n):                     # jobs that fit where they draw run there
        v = draw(st.integers(-1, node_type.size - 1))
        if v >= 0 and free[v] >= demand[i]:
            free[v] -= demand[i]
            nodes.append(v)
            counts.append(int(demand[i]))
        indptr.append(len(nodes))
    held = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))) & (np.diff(indptr) > 0)
    return (m, node_type, node_gpus, demand, thr, np.array(indptr, np.int64),
            np.array(nodes, np.int32), np.array(counts, np.int32), held)


@settings(max_examples=150, deadline=None)
@given(d=_decision(), data=st.data())
def test_themis_kernels_match_reference(d, data):
    """Every kernel of a Themis decision against the numpy code it replaced, bit for bit:
    rho (zero rates, remaining 0 or negative), free GPUs per type, the auction with its
    partial fractions (NaN and non-positive gains, ties), the decision with its leftovers
    (more bidders than contenders, none held) and the placement."""
    from reference_themis import (auction_reference, decide_reference, free_per_type_reference,
                                  place_reference, rhos_reference)
    from sim.policies import themis_kernels as k
    m, node_type, node_gpus, demand, thr, indptr, nodes, counts, held = d
    n = demand.size
    capacity = np.bincount(node_type, weights=node_gpus, minlength=m).astype(np.int64)
    work = np.array(data.draw(st.lists(st.sampled_from([10.0, 1e3, 5e5]), min_size=n, max_size=n)))
    remaining = work * np.array(data.draw(st.lists(st.sampled_from([1.0, 0.5, 0.0, -0.1]), min_size=n,
                                                   max_size=n)))
    since = np.array(data.draw(st.lists(st.sampled_from([0.0, 12.5, 3600.0]), min_size=n, max_size=n)))
    with np.errstate(divide="ignore", invalid="ignore"):
        got, want = (k.rhos(thr, demand, capacity, work, since, remaining, 600.0),
                     rhos_reference(thr, demand, capacity, work, since, remaining, 600.0))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    free = k.free_per_type(capacity, held, indptr, nodes, counts, node_type)
    np.testing.assert_array_equal(free, free_per_type_reference(capacity, held, indptr, nodes,
                                                                counts, node_type))
    gain = np.array(data.draw(st.lists(st.sampled_from([np.nan, -1.0, 0.0, 0.2, 0.7, 0.7, 1.5]),
                                       min_size=n * m, max_size=n * m))).reshape(n, m)
    won, share = k.auction(gain, demand, free)
    won_ref, share_ref = auction_reference(gain, demand, free)
    np.testing.assert_array_equal(won, won_ref)
    np.testing.assert_array_equal(share, share_ref)
    rank = np.array(data.draw(st.permutations(list(np.flatnonzero(~held)))), np.int64)
    bidders = data.draw(st.integers(1, n + 1))             # may exceed the contenders
    log_none = np.log(np.array(data.draw(st.lists(st.sampled_from([1.0, 1.25, 3.0, 40.0]),
                                                  min_size=n, max_size=n))))
    log_type = log_none[:, None] - gain                    # the gains above, rates 0 aside
    chosen, lease = k.decide(rank, bidders, log_none, log_type, thr, demand, free, 600.0)
    chosen_ref, lease_ref = decide_reference(rank, bidders, log_none, log_type, thr, demand, free, 600.0)
    np.testing.assert_array_equal(chosen, chosen_ref)
    np.testing.assert_array_equal(lease, lease_ref)
    got = k.place(held, chosen, demand, indptr, nodes, counts, node_type, node_gpus)
    want = place_reference(held, chosen, demand, indptr, nodes, counts, node_type, node_gpus)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


def test_runs_agree_job_by_job_with_the_numpy_decision(monkeypatch):
    """A whole run with the kernels and one with the numpy code they replaced: every job
    starts and finishes at the same second (the engine's job-by-job check)."""
    import reference_themis as ref
    from sim.policies import themis as themis_module
    cluster, oracle = load_cluster("gavel-108"), default_oracle()
    jobs = generate_workload(80, 12.0, 5, throughput=oracle, runnable_only=False)
    fast = simulate(cluster, jobs, get_policy("themis"), oracle, EngineConfig(restart_delay_s=0.0))

    monkeypatch.setattr(themis_module, "contenders", ref.contenders_reference)
    monkeypatch.setattr(themis_module, "decide_and_place", ref.decide_and_place_reference)
    slow = simulate(cluster, jobs, get_policy("themis"), oracle, EngineConfig(restart_delay_s=0.0))
    np.testing.assert_array_equal(fast.first_start, slow.first_start)
    np.testing.assert_array_equal(fast.finish, slow.finish)
    assert np.isfinite(fast.finish).all()


@settings(max_examples=120, deadline=None)
@given(d=_decision(), data=st.data())
def test_fused_decision_kernels_match_reference(d, data):
    """The two calls a decision makes (before and after the bids' logarithms) against the
    numpy code of Themis.schedule, bit for bit: leases running or expired, rho ties and
    zero rates, the lease ends written back, the plan grouped by job and the wakeup."""
    from reference_themis import contenders_reference, decide_and_place_reference
    from sim.policies import themis_kernels as k
    m, node_type, node_gpus, demand, thr, indptr, nodes, counts, held = d
    n = demand.size
    running = np.diff(indptr) > 0
    now = data.draw(st.sampled_from([0.0, 600.0, 3600.0]))
    lease_end = np.array(data.draw(st.lists(st.sampled_from([-np.inf, 0.0, now, now + 1.0, now + 600.0]),
                                            min_size=n, max_size=n)))
    capacity = np.bincount(node_type, weights=node_gpus, minlength=m).astype(np.int64)
    work = np.array(data.draw(st.lists(st.sampled_from([10.0, 1e3]), min_size=n, max_size=n)))
    remaining = work * np.array(data.draw(st.lists(st.sampled_from([1.0, 0.5, 0.0]), min_size=n, max_size=n)))
    since = np.array(data.draw(st.lists(st.sampled_from([0.0, 12.5, 3600.0]), min_size=n, max_size=n)))
    args = (running, lease_end, now, thr, demand, capacity, work, since, remaining, 600.0, indptr,
            nodes, counts, node_type)
    with np.errstate(divide="ignore", invalid="ignore"):
        got, want = k.contenders(*args), contenders_reference(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    held_now, free, rank, rho_none, rho_type = got
    bidders = data.draw(st.integers(1, n + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = (np.log(rho_none), np.log(rho_type))
    ends = [lease_end.copy(), lease_end.copy()]
    rest = (thr, demand, free, 600.0, held_now, indptr, nodes, counts, node_type, node_gpus)
    got = k.decide_and_place(rank, bidders, *logs, *rest, ends[0], now)
    want = decide_and_place_reference(rank, bidders, *logs, *rest, ends[1], now)
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(g, w)
    assert got[3] == want[3] or (np.isnan(got[3]) and np.isnan(want[3]))
    np.testing.assert_array_equal(ends[0], ends[1])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 200))
def test_contenders_rank_many_ties_as_lexsort(seed, n):
    """Many contenders with tied and NaN rho (zero rates everywhere): the ranking is
    lexsort's, stable by position, NaN last (a non-stable sort shows from 17 entries on)."""
    from reference_themis import contenders_reference
    from sim.policies import themis_kernels as k
    rng = np.random.default_rng(seed)
    m = 2
    node_type = np.array([0, 1], np.int64)             # two 8-GPU servers, one a type
    thr = rng.choice([0.0, 1.0, 2.0], size=(n, m))
    demand = np.ones(n, np.int64)
    work = rng.choice([100.0, 1000.0], size=n)
    args = (np.zeros(n, bool), np.full(n, -np.inf), 50.0, thr, demand, np.array([8, 8]), work,
            rng.choice([0.0, 10.0], size=n), work.copy(), 600.0, np.zeros(n + 1, np.int64),
            np.zeros(0, np.int32), np.zeros(0, np.int32), node_type)
    with np.errstate(divide="ignore", invalid="ignore"):
        got, want = k.contenders(*args), contenders_reference(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
