"""gavel-gandiva and Gavel's packing round mechanism (sim/policies/gavel_packing.py), by hand."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_helpers import LinearOracle, small_cluster, specs
from sim.engine import EngineConfig, run_jobs
from sim.errors import ConfigError
from sim.policies import get_policy


def _run(gpus, work, demand=None, oracle=None):
    cluster = small_cluster(gpus=(gpus,), types=(0,), speed=(1.0,))
    n = len(work)
    jobs = specs([0.0] * n, demand or [1] * n, work, [0] * n, delay=0.0)
    policy = get_policy("gavel-gandiva")
    res = run_jobs(cluster, jobs, policy, oracle or LinearOracle(), EngineConfig(round_s=0.0))
    return res, policy


def test_pair_by_hand():
    # two 1-GPU jobs (work 700 and 900), one fast GPU (2 it/s alone; paired: 1.4 and 1.0 it/s,
    # LinearOracle.pair_rates).  2 GPUs asked of 1: Gandiva pairs them, X = 1 for the pair.
    # Round 1 (0-360 s): 504 and 360 iterations.  Round 2: job 0's last 196 iterations end at
    # 500, job 1's 360 at 720, so the pair's micro-task ends at 720 and job 0 is recorded then
    # (Gavel's latest timestamp of a pair).  At 720 job 1 is alone: no packing, it runs its
    # last 180 iterations at 2 it/s on its own (a restart: it leaves the shared GPU), ends at
    # 810.  GPU-seconds: half a GPU each while paired.
    res, policy = _run(1, [700.0, 900.0])
    np.testing.assert_allclose(res.finish, [720.0, 810.0])
    np.testing.assert_allclose(res.gpu_seconds, [360.0, 450.0])
    assert list(res.restarts) == [0, 1]
    assert policy.pairs_run == 2 and policy.rounds == 3


def test_no_packing_when_jobs_fit():
    # 2 GPUs for two 1-GPU jobs: Gavel's isolated split, nobody shares
    res, policy = _run(2, [700.0, 900.0])
    assert policy.pairs_run == 0
    np.testing.assert_allclose(res.finish, [350.0, 450.0])


def test_pairs_only_of_equal_scale_factors():
    # a 2-GPU and a 1-GPU job on 2 GPUs with a third 1-GPU job: 4 GPUs asked, packing on; the
    # only pair Gandiva can form is of the two 1-GPU jobs
    res, policy = _run(2, [700.0, 900.0, 800.0], demand=[2, 1, 1])
    assert np.all(np.isfinite(res.finish))
    assert policy.pairs_seen == {(1, 2)}


def test_needs_a_table_with_pairs():
    class NoPairs(LinearOracle):
        pair_rates = None

    with pytest.raises(ConfigError, match="co-location pairs"):
        _run(1, [700.0, 900.0], oracle=NoPairs())


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_pick_kernel_matches_reference(data):
    """The greedy pick over combinations, kernel against the Python loop it replaced: pairs
    sharing a job, entries that cannot run on a type, scale factors that do not fit, a type
    that runs out, no entry."""
    from reference_gavel_rounds import pick_combinations_reference
    from sim.policies.gavel_kernels import pick_combinations
    n_jobs, m = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 3))
    singles = [(j, -1) for j in range(n_jobs)]
    pairs = [(a, b) for a in range(n_jobs) for b in range(a + 1, n_jobs)]
    members = np.array(data.draw(st.lists(st.sampled_from(singles + pairs) if pairs else
                                          st.sampled_from(singles), max_size=12, unique=True)),
                       np.int64).reshape(-1, 2)
    e = members.shape[0]
    low = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 2.0]), min_size=e * m,
                                      max_size=e * m))).reshape(e, m)
    scale = np.array(data.draw(st.lists(st.sampled_from([1, 2, 4]), min_size=e, max_size=e)), np.int64)
    left = np.array(data.draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)), np.int64)
    queues = np.array([data.draw(st.permutations(range(e))) for _ in range(m)], np.int64).reshape(m, e)
    got = pick_combinations(queues, low, scale, members, left, n_jobs)
    want = pick_combinations_reference(queues, low, scale, members, left, n_jobs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
