"""The C engine agrees with the plain-Python reference job by job, for every policy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_helpers import (NETWORK_BANDWIDTHS, BarredOracle, LinearOracle, NetworkOracle, runnable,
                            small_cluster, small_policy, specs)
from reference_engine import reference_run
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.policies import get_policy, list_policies

#: policies of Pollux-model workloads need a GoodputOracle: tests/test_goodput_policies.py
#: holds them to the reference engine on such workloads
POLICIES = sorted(p for p in list_policies()
                  if getattr(type(get_policy(p)), "workload_kind", None) != "goodput")
#: policies that solve an ILP every round run fewer examples (test_few_examples_match_reference)
FEW_EXAMPLES = {"hops"}


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 7.0, 30.0, 120.0]), min_size=n, max_size=n))
    arrival = np.cumsum(gaps)
    demand = draw(st.lists(st.sampled_from([1, 1, 2, 3, 4, 8]), min_size=n, max_size=n))
    work = draw(st.lists(st.sampled_from([1.0, 10.0, 60.0, 100.0, 333.3, 1000.0]), min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return specs(arrival, demand, work, model, delay=draw(st.sampled_from([0.0, 5.0])))


def _fit_one_type(name, jobs, cluster, oracle):
    """Jobs never span GPU types unless the policy mixes them (its own rate model): cut the
    drawn requests to the largest type each job can run on (engine_helpers.runnable)."""
    return runnable(jobs, cluster, oracle, getattr(get_policy(name), "rate_model", None) is not None)


def _compare(c, r):
    for key in ("first_start", "finish", "gpu_seconds"):
        np.testing.assert_allclose(c[key], r[key], rtol=1e-9, atol=1e-9, err_msg=key)
    np.testing.assert_array_equal(c["restarts"], r["restarts"])


@pytest.mark.parametrize("name", [p for p in POLICIES if p not in FEW_EXAMPLES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]),
       barred=st.booleans(), type_choice=st.sampled_from(["first-fit", "fastest", "random"]))
def test_engine_matches_reference(name, jobs, round_s, placement, barred, type_choice):
    check_against_reference(name, jobs, round_s, placement, barred, type_choice)


#: EngineConfig.first_start_delay: native (fifo, las), preemptive Python (tiresias, native off via
#: its restarts), round-based (gavel), elastic (eghs-unaware)
FIRST_START_POLICIES = ["fifo", "las", "tiresias", "gavel-max-min-fairness-perf", "eghs-unaware"]


@pytest.mark.parametrize("name", FIRST_START_POLICIES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([0.0, 30.0]))
def test_engine_matches_reference_with_first_start_delay(name, jobs, round_s):
    check_against_reference(name, jobs, round_s, "consolidated", first_start_delay=True)


@pytest.mark.parametrize("name", ["fifo", "las", "tiresias", "gavel-max-min-fairness-perf", "sia-rigid"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([7.0, 30.0]),
       origin=st.sampled_from([0.0, 3.5, 1e4]))
def test_engine_matches_reference_with_round_origin(name, jobs, round_s, origin):
    check_against_reference(name, jobs, round_s, "consolidated", round_origin=origin)


def test_round_origin_by_hand():
    # arrival at 100 s, 60 s rounds: phased from the arrival the first round is at
    # 100; from 0 (the Pollux simulator's), at 120; an origin past the arrival still counts
    # back whole periods (1,000 + k 60: 100 is one of them)
    jobs = specs([100.0, 100.0], [1, 1], [100.0, 100.0], [0, 0])
    for origin, first in ((None, 100.0), (0.0, 120.0), (1000.0, 100.0), (1010.0, 110.0)):
        res = run_jobs(small_cluster(), jobs, get_policy("sia-rigid"),       # decides at rounds only
                       LinearOracle(), EngineConfig(round_s=60.0, round_origin=origin))
        assert res.first_start.min() == pytest.approx(first), origin
    with pytest.raises(ConfigError, match="round_origin"):
        EngineConfig(round_origin=-1.0)


def test_first_start_delay_by_hand():
    # one 1-GPU job, work 100 on the first node's GPUs (rate 2 there, LinearOracle), delay 5:
    # finishes at 55 with the option, at 50 without; no restart is counted either way
    jobs = specs([0.0], [1], [100.0], [0], delay=5.0)
    for on, end in ((True, 55.0), (False, 50.0)):
        res = run_jobs(small_cluster(), jobs, get_policy("fifo"), LinearOracle(),
                       EngineConfig(first_start_delay=on))
        assert res.finish[0] == pytest.approx(end) and res.first_start[0] == 0.0
        assert res.restarts[0] == 0


#: the network term (sim.network) on clusters whose bandwidths differ from the oracle's
#: reference: a native policy, a preemptive one, an elastic one with defragmentation, a round-based one
NETWORK_POLICIES = ["fifo", "tiresias", "eghs-unaware", "gavel-max-min-fairness-perf"]


@pytest.mark.parametrize("name", NETWORK_POLICIES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_engine_matches_reference_with_network_term(name, jobs, round_s, placement):
    check_against_reference(name, jobs, round_s, placement,
                            cluster=small_cluster(bandwidths=NETWORK_BANDWIDTHS), oracle=NetworkOracle())


@pytest.mark.parametrize("name", sorted(FEW_EXAMPLES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([0.0, 30.0]),
       placement=st.sampled_from(["consolidated", "spread"]))
def test_few_examples_match_reference(name, jobs, round_s, placement):
    check_against_reference(name, jobs, round_s, placement)


def check_against_reference(name, jobs, round_s, placement, barred=False, type_choice="first-fit",
                            cluster=None, oracle=None, first_start_delay=False, round_origin=None):
    cluster = small_cluster() if cluster is None else cluster
    # the gavel-* policies and themis choose types themselves (their own tests bar types)
    barred = barred and not getattr(get_policy(name), "single_type_jobs", False)
    if oracle is None:
        oracle = BarredOracle() if barred else LinearOracle()
    jobs = _fit_one_type(name, jobs, cluster, oracle)
    if round_s == 0.0 and get_policy(name).triggers == 0:
        round_s = 30.0              # a policy that decides at rounds only (sia-rigid) needs them
    res = run_jobs(cluster, jobs, small_policy(name, placement=placement), oracle,
                   EngineConfig(round_s=round_s, type_choice=type_choice, type_seed=5,
                                first_start_delay=first_start_delay, round_origin=round_origin))
    ref = reference_run(cluster, jobs, small_policy(name, placement=placement), oracle, round_s,
                        type_choice, 5, first_start_delay, round_origin)
    _compare({"first_start": res.first_start, "finish": res.finish,
              "gpu_seconds": res.gpu_seconds, "restarts": res.restarts}, ref)


class _ScaledSRTF:
    """SRTF whose rates change over time without placement changes (rate_scale),
    woken by timers: exercises rate-only updates in both engines."""

    def __init__(self):
        from sim.policies import get_policy as _gp
        self.inner = _gp("srtf")
        self.name = "scaled-srtf"
        self.triggers = self.inner.triggers
        self.round_s = None

    def schedule(self, state):
        from sim.state import Plan
        plan = self.inner.schedule(state)
        phase = int(state.now // 40.0) % 3
        scale = 0.5 + 0.25 * ((state.active + phase) % 3)
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup=state.now + 40.0, rate_scale=scale)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads())
def test_rate_scale_changes_match_reference(jobs):
    cluster = small_cluster()
    oracle = LinearOracle()
    jobs = runnable(jobs, cluster, oracle)
    res = run_jobs(cluster, jobs, _ScaledSRTF(), oracle, EngineConfig(round_s=0.0))
    ref = reference_run(cluster, jobs, _ScaledSRTF(), oracle, 0.0)
    _compare({"first_start": res.first_start, "finish": res.finish,
              "gpu_seconds": res.gpu_seconds, "restarts": res.restarts}, ref)


class _Pairing:
    """Space sharing (Plan.shared) in both engines: every other 50 s, jobs of equal demand
    are paired on one set of GPUs at a co-located rate (0.6) and a job without a partner is
    shared alone (it keeps all its GPUs); in between every placement is exclusive.  Sharing
    turns on and off on the same GPUs, partners finish alone, and jobs move."""

    name = "pairing"
    round_s = None

    def __init__(self):
        from sim.state import ARRIVAL, COMPLETION
        self.triggers = ARRIVAL | COMPLETION
        self.seen = []              # (time, free GPUs per node) at each decision

    def schedule(self, state):
        from sim.state import Plan
        c = state.cluster
        self.seen.append((state.now, state.node_free.tolist()))
        free = np.asarray(c.node_gpus, np.int64).copy()
        k = len(state.active)
        demand = np.minimum(state.jobs.demand[state.active], free.max())
        share = int(state.now // 50.0) % 2 == 0
        place, shared = [None] * k, np.zeros(k, np.bool_)
        pending = list(range(k))
        while pending:
            a = pending.pop(0)
            d = int(demand[a])
            node = next((n for n in range(c.n_nodes) if free[n] >= d), None)
            if node is None:
                continue
            free[node] -= d
            group = [a]
            partner = next((b for b in pending if demand[b] == d), None) if share else None
            if partner is not None:
                pending.remove(partner)
                group.append(partner)
            for j in group:
                place[j], shared[j] = (node, d), share
        lens = np.array([0 if p is None else 1 for p in place], np.int64)
        indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        nodes = np.array([p[0] for p in place if p is not None], np.int32)
        counts = np.array([p[1] for p in place if p is not None], np.int32)
        return Plan(indptr, nodes, counts, wakeup=state.now + 50.0,
                    rate_scale=np.where(shared, 0.6, 1.0), shared=shared)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads())
def test_shared_placements_match_reference(jobs):
    cluster = small_cluster()
    oracle = LinearOracle()
    jobs = runnable(jobs, cluster, oracle)
    ours, theirs = _Pairing(), _Pairing()
    res = run_jobs(cluster, jobs, ours, oracle, EngineConfig(round_s=0.0))
    ref = reference_run(cluster, jobs, theirs, oracle, 0.0)
    _compare({"first_start": res.first_start, "finish": res.finish,
              "gpu_seconds": res.gpu_seconds, "restarts": res.restarts}, ref)
    assert ours.seen == theirs.seen            # the GPUs shared placements take, node by node
    # a shared job is charged half of each GPU: the cluster's busy GPU-seconds add up
    assert res.gpu_seconds.sum() == pytest.approx(float(np.sum(ref["gpu_seconds"])))


def test_shared_placement_by_hand():
    # two 2-GPU jobs (work 60 and 120) arrive at 0 on a 4-GPU node: paired at rate 0.6 x 2 x 2
    # (LinearOracle on the fast type) = 2.4 they end at 25 and 50; GPU-seconds 2 x 0.5 x 25 and
    # 2 x 0.5 x 25 + the second's lone shared run (25 to 50): 25 more
    cluster = small_cluster(gpus=(4,), types=(0,), speed=(1.0,))
    jobs = specs([0.0, 0.0], [2, 2], [60.0, 120.0], [0, 0], delay=0.0)
    res = run_jobs(cluster, jobs, _Pairing(), LinearOracle(), EngineConfig(round_s=0.0))
    np.testing.assert_allclose(res.finish, [25.0, 50.0])
    np.testing.assert_allclose(res.gpu_seconds, [25.0, 50.0])
    assert list(res.restarts) == [0, 0]


def test_shared_flags_must_be_bools_per_job():
    class _BadFlags(_Pairing):
        def schedule(self, state):
            plan = super().schedule(state)
            return replace(plan, shared=plan.shared.astype(np.int8))

    from dataclasses import replace
    from sim.errors import SimError
    jobs = specs([0.0, 0.0], [2, 2], [60.0, 120.0], [0, 0], delay=0.0)
    with pytest.raises(SimError, match="shared must be a bool array"):
        run_jobs(small_cluster(), jobs, _BadFlags(), LinearOracle(), EngineConfig(round_s=0.0))


class _BadScale(_ScaledSRTF):
    """SRTF whose rate scale turns invalid (``bad``) at its second decision."""

    def __init__(self, bad):
        super().__init__()
        self.bad, self.calls = bad, 0

    def schedule(self, state):
        from sim.state import Plan
        plan = super().schedule(state)
        self.calls += 1
        scale = plan.rate_scale.copy()
        if self.calls > 1 and scale.size:
            scale[-1] = self.bad
        return Plan(plan.indptr, plan.nodes, plan.counts, wakeup=plan.wakeup, rate_scale=scale)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf, np.nan])
def test_invalid_rate_scale_stops_the_run(bad):
    from sim.errors import SimError
    jobs = specs([0.0, 5.0, 10.0], [1, 1, 1], [100.0, 100.0, 100.0])
    with pytest.raises(SimError, match="rate_scale must be finite and > 0"):
        run_jobs(small_cluster(), jobs, _BadScale(bad), LinearOracle(), EngineConfig(round_s=0.0))
