"""Pollux's scheduler on throughput-table workloads and in learning runs
(sim.policies.pollux_learning): hand-worked speedups, GPU ranges, determinism."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.learning.spec import LearningSpec
from sim.learning.world import LearningWorld
from sim.policies import get_policy


def _jobs(n, demand, gmin, gmax, work=200.0):
    j = specs([0.0] * n, [demand] * n, [work] * n)
    return replace(j, gpus_min=np.full(n, gmin, np.int32), gpus_max=np.full(n, gmax, np.int32),
                   model=np.array([0, 1] * (n // 2) + [0] * (n % 2), np.int32))


def _state(jobs, noise_scale=None, local_batch=32.0):
    """Just what the speedup tables read: the oracle, the cluster, the jobs, the observation."""
    n = len(jobs)
    obs = None if noise_scale is None else SimpleNamespace(
        noise_scale=np.asarray(noise_scale, float), local_batch=np.full(n, local_batch))
    return SimpleNamespace(oracle=LinearOracle(), cluster=small_cluster(), jobs=jobs,
                           active=np.arange(n), learning=obs)


def test_speedups_by_hand():
    # small_cluster: nodes of 4, 4, 2 GPUs (G = 10); two jobs: fair share ceil(10 / 2) = 5 GPUs.
    # LinearOracle on the first type ("fast", x2): rate(r, n) = 2 r (x 0.8 if n > 1) (x 0.5 model 1).
    # Job 0: demand 2, b = 32 (M0 = 64), phi = 64: EFF(B) = 128 / (64 + B).
    # Base (1 node, 5 GPUs): rate 10, EFF(160) = 4/7 -> 40/7.
    jobs = _jobs(2, demand=2, gmin=1, gmax=8)
    p = get_policy("pollux-learning")
    st = _state(jobs, noise_scale=[64.0, 64.0])
    tab = p.speedups(st, np.arange(2), n_nodes=4, width=6, fair=5)
    base = 40 / 7
    assert tab[0, 1, 2] == pytest.approx(4 * 1.0 / base)                # 2 GPUs: rate 4, EFF(64) = 1
    assert tab[0, 2, 4] == pytest.approx(6.4 * (2 / 3) / base)          # 4 on 2 nodes: 8 x 0.8, EFF 2/3
    assert tab[0, 1, 5] == 0.0                                          # 5 GPUs do not fit on a node of 4
    assert tab[0, 3, 2] == 0.0 and tab[0, 0, 0] == 0.0                  # more nodes than GPUs; none
    assert tab[1, 1, 2] == pytest.approx(tab[0, 1, 2])                  # model 1 halves base and rate alike
    # without a learning world: throughput only
    thr = p.speedups(_state(jobs), np.arange(2), n_nodes=4, width=6, fair=5)
    assert thr[0, 2, 4] == pytest.approx(6.4 / 10)


def test_gpu_range_and_fresh_jobs_in_the_problem():
    jobs = _jobs(2, demand=4, gmin=2, gmax=6)
    p = get_policy("pollux-learning")
    p._ensure(SimpleNamespace(jobs=jobs, oracle=LinearOracle()))
    # a job that has not run: growth cap = its minimum (not the authors' 1, which it could not use)
    assert p.max_replicas(np.arange(2)).tolist() == [2, 2]
    p.max_seen[:] = [2, 4]
    assert p.max_replicas(np.arange(2)).tolist() == [4, 6]             # 2 x seen, capped at gpus_max


class _Recorder:
    """Records the GPUs each plan gives each active job."""

    def __init__(self, inner):
        self.inner, self.sizes = inner, []

    def __getattr__(self, item):
        return getattr(self.inner, item)

    def schedule(self, state):
        plan = self.inner.schedule(state)
        lens = np.diff(plan.indptr)
        per = np.bincount(np.repeat(np.arange(lens.size), lens), weights=plan.counts, minlength=lens.size)
        self.sizes.append((state.active.copy(), per))
        return plan


def _learning_run(search, seed=0):
    jobs = _jobs(6, demand=2, gmin=2, gmax=4, work=300.0)
    jobs = replace(jobs, arrival=np.array([0.0, 0.0, 30.0, 60.0, 200.0, 400.0]))
    spec = LearningSpec.build(6, ["m0", "m1"], jobs.gpus_max, quality=0.9)
    rec = _Recorder(get_policy("pollux-learning", search=search, population=12, generations=6, seed=seed))
    res = run_jobs(small_cluster(), jobs, rec, LinearOracle(), EngineConfig(), learning=LearningWorld(spec))
    return jobs, rec, res


@pytest.mark.parametrize("search", ["nsga2", "dp"])
def test_learning_run_finishes_within_gpu_ranges_and_repeats(search):
    jobs, rec, res = _learning_run(search)
    assert np.all(np.isfinite(res.finish))
    assert sum(int((per > 0).sum()) for _, per in rec.sizes) > 0
    for active, per in rec.sizes:
        held = per[per > 0]
        ids = active[per > 0]
        assert np.all(held >= jobs.gpus_min[ids]) and np.all(held <= jobs.gpus_max[ids])
    # the restart factor's counts are the engine's restarts
    assert np.array_equal(rec.inner.restarts, res.restarts)
    _, _, again = _learning_run(search)
    assert np.array_equal(res.finish, again.finish)
    assert np.array_equal(res.restarts, again.restarts)


def test_bad_parameters_are_named():
    with pytest.raises(ConfigError, match="pollux-learning: search"):
        get_policy("pollux-learning", search="greedy")
    with pytest.raises(ConfigError, match="restart_penalty_s"):
        get_policy("pollux-learning", restart_penalty_s=-1.0)
