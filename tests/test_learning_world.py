"""The learning simulator (sim.learning.world): units, masking, the information contract."""
from __future__ import annotations

import numpy as np
import pytest

from engine_helpers import LinearOracle, small_cluster, small_policy, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.learning.spec import LearningSpec
from sim.learning.world import LearningWorld
from sim.policies import get_policy
from sim.state import Plan, SchedState


def _world(jobs, **kw):
    spec = LearningSpec.build(len(jobs), ["m0", "m1"], jobs.gpus_max, quality=0.9,
                              local_batch=np.full(len(jobs), 32.0), **kw)
    w = LearningWorld(spec)
    w.start(jobs)
    return w


def _elastic(n=1, demand=4, gmax=8, work=100.0):
    j = specs([0.0] * n, [demand] * n, [work] * n)
    from dataclasses import replace
    return replace(j, gpus_min=np.ones(n, np.int32), gpus_max=np.full(n, gmax, np.int32))


def test_rate_is_efficiency_only_by_hand():
    # demand 4, b = 32: M0 = 128.  At 8 GPUs B = 256; with phi = 128 (set below),
    # EFF = (128 + 128) / (128 + 256) = 2/3: the rate scale is 2/3, not (8/4) * 2/3 = 4/3
    # (the oracle's rate at 8 GPUs already counts the extra GPUs)
    jobs = _elastic()
    w = _world(jobs)
    w.phi0[:] = 128.0
    w.phi_slope[:] = 0.0
    assert w.efficiency(np.array([0]), np.array([8]))[0] == pytest.approx(2 / 3)
    assert w.efficiency(np.array([0]), np.array([4]))[0] == pytest.approx(1.0)
    assert w.efficiency(np.array([0]), np.array([2]))[0] == pytest.approx(256 / 192)


def test_sampling_gain_by_hand():
    jobs = _elastic(gmax=2)
    w = _world(jobs)
    w.spec.difficulty[0, :2] = [1.0, 2.0]           # mean 1.5
    g = w.sampling_gain(np.array([0]), np.array([2]), np.array([[0.25, 0.75]]))
    assert g[0] == pytest.approx((0.25 + 1.5) / 1.5)   # 1.1667 < gain_cap 1.3
    g = w.sampling_gain(np.array([0]), np.array([2]), np.array([[0.75, 0.25]]))
    assert g[0] == 1.0                                 # never below 1: cannot slow a job


def _state(jobs, remaining, ngpu=(0,)):
    k = len(remaining)
    return SchedState(now=10.0, reasons=0, cluster=small_cluster(), jobs=jobs, active=np.arange(k),
                      ngpu=np.asarray(ngpu, np.int32), remaining=np.asarray(remaining, float),
                      attained_gpu_s=np.zeros(k), run_s=np.zeros(k), queued_since=np.zeros(k),
                      pl_indptr=np.zeros(k + 1, np.int64), pl_nodes=np.zeros(0, np.int32),
                      pl_counts=np.zeros(0, np.int32), oracle=LinearOracle())


def test_truth_is_masked_for_tta_jobs_only():
    jobs = _elastic(n=2)
    spec = LearningSpec.build(2, ["m0"], jobs.gpus_max, mode=np.array([1, 0]), quality=0.9)
    w = LearningWorld(spec)
    w.start(jobs)
    st = w.observe(_state(jobs, [60.0, 70.0], ngpu=(0, 0)))
    assert np.isnan(st.remaining[0]) and st.remaining[1] == 70.0
    assert np.isnan(st.jobs.work[0]) and st.jobs.work[1] == 100.0
    assert st.learning.budget[1] == 100.0 and st.learning.budget[0] >= 100.0
    clear = w.observe(_state(jobs, [60.0, 70.0], ngpu=(0, 0)), clairvoyant=True)
    assert clear.remaining[0] == 60.0


def test_budget_over_estimates_with_the_documented_distribution():
    spec = LearningSpec.build(20000, ["m0"], np.ones(20000), seed=3)
    assert spec.budget_factor.min() >= 1.0
    assert spec.budget_factor.mean() == pytest.approx(1.5, abs=0.02)


def test_observed_budgets_are_the_given_ones_by_hand():
    # two TTA jobs of work 100 and 40 whose users asked for 250 and 60 iterations: the policy
    # sees exactly those, not the spec's drawn factor x work
    jobs = specs([0.0, 0.0], [1, 2], [100.0, 40.0])
    w = _world(jobs, budget=np.array([250.0, 60.0]))
    assert w.spec.budget_factor is not None and not np.allclose(w.spec.budget_factor, [2.5, 1.5])
    st = w.observe(_state(jobs, [100.0, 40.0], ngpu=(0, 0)))
    np.testing.assert_array_equal(st.learning.budget, [250.0, 60.0])


def test_missing_budgets_fall_back_to_the_drawn_factor():
    jobs = specs([0.0, 0.0], [1, 1], [100.0, 40.0])
    drawn = _world(jobs, seed=4)
    w = _world(jobs, seed=4, budget=np.array([np.nan, 60.0]))
    np.testing.assert_array_equal(w.budget, [100.0 * drawn.spec.budget_factor[0], 60.0])
    np.testing.assert_array_equal(drawn.budget, jobs.work * drawn.spec.budget_factor)


def test_an_iteration_job_budget_is_its_work():
    jobs = specs([0.0, 0.0], [1, 1], [100.0, 40.0])
    spec = LearningSpec.build(2, ["m0"], jobs.gpus_max, mode=np.array([1, 0]), quality=0.9,
                              budget=np.array([np.nan, 40.0]))
    w = LearningWorld(spec)
    w.start(jobs)                                      # the work itself: consistent
    assert w.budget[1] == 40.0
    spec = LearningSpec.build(2, ["m0"], jobs.gpus_max, mode=np.array([1, 0]), quality=0.9,
                              budget=np.array([np.nan, 50.0]))
    with pytest.raises(ConfigError, match="row 1 of the job table runs a fixed number of iterations"):
        LearningWorld(spec).start(jobs)


@pytest.mark.parametrize("budget,match", [([1.0], "one value per job"), ([1.0, -1.0], "job 1"),
                                          ([np.inf, 1.0], "job 0")])
def test_given_budgets_are_checked(budget, match):
    with pytest.raises(ConfigError, match=match):
        LearningSpec.build(2, ["m0"], np.ones(2), budget=np.array(budget))


class _Spy:
    """Records whether a policy read the truth of a time-to-accuracy job."""

    def __init__(self, inner):
        self.inner = inner
        self.read = False

    def __getattr__(self, item):          # everything but schedule and read: the policy's own
        return getattr(self.inner, item)

    def schedule(self, state):
        return self.inner.schedule(_Guard(state, self))


class _Guard:
    """A SchedState look-alike whose ``remaining`` and ``jobs.work`` flag a read."""

    def __init__(self, state, spy):
        self._s, self._spy = state, spy

    def __getattr__(self, item):
        if item == "remaining":
            self._spy.read = True
        if item == "jobs":
            return _JobsGuard(self._s.jobs, self._spy)
        return getattr(self._s, item)


class _JobsGuard:
    def __init__(self, jobs, spy):
        self._j, self._spy = jobs, spy

    def __getattr__(self, item):
        if item in ("work", "est_duration"):
            self._spy.read = True
        return getattr(self._j, item)

    def __len__(self):
        return len(self._j)


@pytest.mark.parametrize("name", ["eghs", "eghs-unaware"])
def test_policies_never_read_the_truth_of_tta_jobs(name):
    jobs = _elastic(n=3, demand=2, gmax=4)
    spec = LearningSpec.build(3, ["m0", "m1"], jobs.gpus_max, quality=0.9)
    spy = _Spy(get_policy(name))
    res = run_jobs(small_cluster(), jobs, spy, LinearOracle(), EngineConfig(round_s=30.0),
                   learning=LearningWorld(spec))
    assert np.all(np.isfinite(res.finish))
    assert not spy.read, f"{name} read remaining/work of a time-to-accuracy job"


def _learning_policies():
    """Every registered policy that runs on clustersim's own workloads (not only on Pollux-model
    ones, which have no learning simulator)."""
    from sim.policies import list_policies
    return [n for n in sorted(list_policies()) if getattr(get_policy(n), "workload_kind", None) != "goodput"]


@pytest.mark.parametrize("name", _learning_policies())
def test_only_clairvoyant_policies_read_the_truth_of_tta_jobs(name):
    """The information contract for every policy (issue 16): a policy that reads ``remaining``,
    ``jobs.work`` or ``jobs.est_duration`` of a time-to-accuracy job must say so
    (``clairvoyant``: it is then given the truth); any other policy never reads them, so it
    never decides on the NaNs a learning run masks them with."""
    jobs = _elastic(n=4, demand=2, gmax=4)
    spec = LearningSpec.build(4, ["m0", "m1"], jobs.gpus_max, quality=0.9)
    policy = small_policy(name)
    spy = _Spy(policy)
    res = run_jobs(small_cluster(), jobs, spy, LinearOracle(), EngineConfig(round_s=30.0),
                   learning=LearningWorld(spec))
    assert np.all(np.isfinite(res.finish))
    assert policy.clairvoyant or not spy.read, f"{name} read the truth without saying so"


def test_the_spy_catches_a_clairvoyant_policy():
    jobs = _elastic(n=2, demand=2, gmax=4)
    spec = LearningSpec.build(2, ["m0", "m1"], jobs.gpus_max, quality=0.9)
    spy = _Spy(get_policy("eghs-unaware-oracle"))
    run_jobs(small_cluster(), jobs, spy, LinearOracle(), EngineConfig(round_s=30.0),
             learning=LearningWorld(spec))
    assert spy.read


def test_plan_rate_scale_is_the_truth_times_the_policys():
    jobs = _elastic()
    w = _world(jobs)
    st = w.observe(_state(jobs, [100.0]))
    plan = Plan(np.array([0, 1]), np.array([0], np.int32), np.array([4], np.int32),
                rate_scale=np.array([0.5]))
    out = w.settle(st, plan)
    assert out.rate_scale[0] == pytest.approx(0.5)      # at demand EFF = 1, G = 1


def test_micro_sampling_never_lowers_a_rate_and_keeps_equal_shards():
    """Issue 16, micro level: shards and batches stay equal (the plan's placement, hence the
    oracle's step, is untouched); the sampling tilt only changes which partitions samples come
    from, so with any sampling shares every job's rate scale is >= the one without."""
    from dataclasses import replace
    jobs = _elastic(n=3, demand=2, gmax=4)
    w = _world(jobs, sigma_d=0.5)
    state = _state(jobs, [100.0, 100.0, 100.0], ngpu=(4, 4, 2))
    plan = Plan(np.array([0, 1, 2, 3], np.int64), np.array([0, 1, 2], np.int32), np.array([4, 4, 2], np.int32))
    base = w.settle(state, plan).rate_scale
    rng = np.random.default_rng(0)
    lifted = 0
    for _ in range(50):
        shares = rng.dirichlet(np.full(w.spec.k_cap, 0.5), size=3)
        got = w.settle(state, replace(plan, sampling=shares))
        assert (got.rate_scale >= base).all()
        lifted += int((got.rate_scale > base).any())
        for key in ("indptr", "nodes", "counts"):
            np.testing.assert_array_equal(getattr(got, key), getattr(plan, key))
    assert lifted > 0                       # the tilt toward harder partitions does gain
