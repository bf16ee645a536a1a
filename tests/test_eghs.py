"""EGHS and its learning-unaware baseline on toy clusters (answers worked by hand)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.learning.dynamics import LearningSpec
from sim.policies import get_policy, list_policies
from sim.policies.eghs import _admit_fill

ONE_NODE = dict(gpus=(4,), types=(1,), speed=(1.0,))


def _elastic(arrival, demand, work, gmin, gmax, model=None):
    j = specs(arrival, demand, work, model, delay=0.0)
    return type(j)(**{**j.__dict__, "gpus_min": np.asarray(gmin, np.int32),
                      "gpus_max": np.asarray(gmax, np.int32)})


def test_registered_with_ablation_switches():
    pols = list_policies()
    assert "eghs" in pols and "eghs-unaware" in pols
    p = get_policy("eghs", micro=False)
    assert (p.micro, p.macro) == (False, True)
    assert (get_policy("eghs-unaware").micro, get_policy("eghs-unaware").macro) == (False, False)
    with pytest.raises(ConfigError):
        get_policy("eghs-unaware", micro=True)
    with pytest.raises(ConfigError):
        get_policy("eghs", ordering="random")
    with pytest.raises(ConfigError):
        get_policy("eghs", dynamics={"gamma": -1})


def test_water_filling_by_hand():
    # 6 GPUs, two admitted jobs at minimum 1, max 4, linear throughput (gain 1 per GPU):
    # ties go to the higher-ranked job: job 1 (ranked first) grows to 4, job 0 gets the rest
    thr = np.tile(np.arange(6, dtype=float), (2, 1))
    alloc = _admit_fill(np.array([1, 0]), np.zeros(2, bool), np.array([1, 1]), np.array([4, 4]),
                        np.zeros(2, np.int64), np.ones(2), np.inf, np.ones(2), thr, 6, np.ones(2))
    assert alloc.tolist() == [2, 4]
    # a dip at 2-3 GPUs (the LM table): the concave envelope jumps 1 -> 4 when it fits
    thr = np.array([[0, 1, 0.5, 0.6, 6, 6.5]])
    alloc = _admit_fill(np.array([0]), np.zeros(1, bool), np.array([1]), np.array([4]),
                        np.zeros(1, np.int64), np.ones(1), np.inf, np.ones(1), thr, 4, np.ones(1))
    assert alloc.tolist() == [4]
    alloc = _admit_fill(np.array([0]), np.zeros(1, bool), np.array([1]), np.array([4]),
                        np.zeros(1, np.int64), np.ones(1), np.inf, np.ones(1), thr, 3, np.ones(1))
    assert alloc.tolist() == [1]
    # admission: 2 GPUs, a running job (min 2) ranked below a waiting one (min 2) whose
    # utility reaches the running median: the waiting job displaces it
    thr = np.tile(np.arange(4, dtype=float), (2, 1))
    args = (np.array([1, 0]), np.array([True, False]), np.array([2, 2]), np.array([2, 2]),
            np.array([2, 0]))
    assert _admit_fill(*args, np.array([1.0, 1.0]), 1.0, np.ones(2), thr, 2, np.ones(2)).tolist() == [0, 2]
    # ... but not when its utility is below theta * median: the running job keeps its GPUs
    assert _admit_fill(*args, np.array([1.0, 0.5]), 1.0, np.ones(2), thr, 2, np.ones(2)).tolist() == [2, 0]


def test_baseline_is_srpt_with_elastic_quotas():
    # one node of 4 GPUs, LinearOracle (1 it/s per GPU), iteration jobs, no restart delay.
    # J0 (t=0, work 40, 1..4 GPUs) takes all 4 GPUs; J1 (t=1, work 8, 1..4) arrives: SRPT
    # ranks J1 first; both are at least 1: J1 gets 3 (ties to the higher rank), J0 shrinks to 1
    jobs = _elastic([0, 1], [2, 2], [40.0, 8.0], [1, 1], [4, 4])
    spec = LearningSpec.build(2, ["m0"], jobs.gpus_max, mode="iterations")
    res = run_jobs(small_cluster(**ONE_NODE), jobs, get_policy("eghs-unaware", learning=spec,
                                                               oracle=LinearOracle(),
                                                               restart_floor=1.0),
                   LinearOracle(), EngineConfig(round_s=0.0))
    # J0: 4 it/s for 1 s (4 done); J1 runs on 3 GPUs 1..1+8/3; J0 on 1 GPU meanwhile
    t1 = 1 + 8 / 3
    assert res.finish[1] == pytest.approx(t1)
    left = 40 - 4 - (8 / 3)
    assert res.finish[0] == pytest.approx(t1 + left / 4)


def test_micro_level_changes_time_to_accuracy_and_is_deterministic():
    jobs = _elastic([0, 0, 20], [2, 4, 2], [3000.0, 2000.0, 1500.0], [2, 4, 2], [4, 8, 4], [0, 1, 0])
    c = small_cluster(gpus=(4, 4, 4), types=(1, 1, 1), speed=(1.0, 0.8, 1.2))

    def run(name, **kw):
        spec = LearningSpec.build(3, ["m0", "m1"], jobs.gpus_max, quality=0.9, seed=5,
                                  epoch_samples=640.0, sigma_d=0.4)
        pol = get_policy(name, learning=spec, **kw)
        return pol, run_jobs(c, jobs, pol, LinearOracle(), EngineConfig(round_s=10.0))

    p1, a = run("eghs")
    _, b = run("eghs")
    np.testing.assert_array_equal(a.finish, b.finish)          # deterministic given seeds
    _, base = run("eghs-unaware")
    _, macro = run("eghs", micro=False)
    assert not np.allclose(a.finish, macro.finish)              # the micro level matters
    assert p1.learning.updates > 0
    # scales handed to the engine stay positive and finite
    assert np.all(np.isfinite(p1.learning.scale)) and np.all(p1.learning.scale > 0)
    assert np.all(np.isfinite(base.finish))


def test_decision_latency_at_scale_is_reasonable():
    """A coarse guard (the asv benchmark holds the 10 ms target): 1024 nodes, 2,000 jobs."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_eghs import build_state
    pol, states = build_state(n_nodes=1024, n_jobs=2000, n_states=3)
    pol.schedule(states[0])
    t = time.perf_counter()
    for s in states[1:]:
        pol.schedule(s)
    assert (time.perf_counter() - t) / 2 < 0.25
