"""The Gymnasium environment (sim.gym): Gymnasium's checker, seeded determinism, the reward's
meaning, agreement with the engine's FIFO, vector environments, illegal actions, the examples."""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from sim.engine import simulate  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.gym import ENV_ID, ClusterEnv, rollout  # noqa: E402
from sim.jobs import JobTable  # noqa: E402
from sim.policies import get_policy  # noqa: E402
from sim.presets import load_cluster  # noqa: E402
from sim.throughput import default_oracle  # noqa: E402
from sim.workload import generate_workload  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gym_agents.py"


class FirstFit:
    """The first legal action: the earliest queued job that fits (FIFO with backfill)."""

    def act(self, observation, info) -> int:
        return int(info["action_mask"].argmax())


class Seeded:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def act(self, observation, info) -> int:
        return int(self.rng.integers(len(info["action_mask"])))     # illegal actions too


def small_env(**kw) -> ClusterEnv:
    return ClusterEnv("sia-64", jobs=kw.pop("jobs", 40), load=kw.pop("load", 300.0), **kw)


def test_gymnasium_env_checker_passes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # not even a warning, the render-mode one aside
        warnings.filterwarnings("ignore", message=".*render")
        check_env(small_env())


def trajectory(seed: int):
    env = small_env()
    obs, info = env.reset(seed=seed)
    agent, out, over = Seeded(seed), [], False
    while not over:
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(info["action_mask"], env.action_masks())
        out.append((action, reward, obs["queue"].tobytes(), obs["cluster"].tobytes()))
        over = terminated or truncated
    return out


def test_one_seed_one_trajectory_and_seeds_differ():
    first = trajectory(7)
    assert first == trajectory(7)
    assert first != trajectory(8)


def test_return_is_minus_the_sum_of_completion_times_in_hours():
    env = small_env()
    ret, steps = rollout(env, Seeded(3), seed=3)
    res = env.job_results()
    assert steps > 40                                      # no-ops were taken too
    assert np.isfinite(res["finish"]).all()
    assert ret == pytest.approx(-(res["finish"] - env.jobs.arrival).sum() / 3600, rel=1e-9)


def test_first_fit_agent_is_the_engines_fifo_with_backfill_job_by_job():
    jobs = generate_workload(80, 300.0, 4, throughput=default_oracle())
    env = ClusterEnv("sia-64", jobs, queue_slots=200)
    ret, steps = rollout(env, FirstFit())
    assert steps == 80                                     # one start per decision, no no-op
    engine = simulate(load_cluster("sia-64"), jobs, get_policy("fifo", backfill=True), default_oracle())
    np.testing.assert_array_equal(env.job_results()["finish"], engine.finish)
    np.testing.assert_array_equal(env.job_results()["first_start"], engine.first_start)


def test_vector_environments_step_in_lockstep():
    envs = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode="sync", cluster="sia-64", jobs=20,
                        load=300.0)
    obs, info = envs.reset(seed=5)
    assert obs["queue"].shape == (3, 16, 5) and info["action_mask"].shape == (3, 17)
    for _ in range(10):
        obs, reward, terminated, truncated, info = envs.step(info["action_mask"].argmax(axis=1))
    assert reward.shape == (3,) and (reward <= 0).all()
    envs.close()


def one_node_env(arrivals) -> ClusterEnv:
    """8-GPU jobs of 100 s on one 8-GPU node: one runs at a time."""
    n = len(arrivals)
    jobs = JobTable.from_columns(arrival_s=arrivals, gpus=[8] * n, model=["A3C"] * n,
                                 duration_s=[100.0] * n)
    return ClusterEnv("uniform:nodes=1,gpus=8", jobs, queue_slots=2)


def test_a_no_op_runs_time_to_the_next_decision_point():
    env = one_node_env([0.0, 1.0])
    obs, info = env.reset()
    assert info["action_mask"].tolist() == [True, False, True]     # job 1 is yet to arrive
    obs, reward, *_, info = env.step(2)
    assert info["time_s"] == 1.0 and info["queued"] == 2 and reward == pytest.approx(-1 / 3600)


def test_illegal_actions_are_no_ops_unless_time_would_stop():
    env = one_node_env([0.0, 0.0, 0.0])                            # job 2 beyond the 2 slots
    obs, info = env.reset()
    assert info["action_mask"].tolist() == [True, True, False]     # no-op: time would stop
    obs, reward, *_, info = env.step(2)                            # so job 0 starts anyway
    assert info["time_s"] == 100.0 and info["queued"] == 2         # the next choice: at its end
    assert reward == pytest.approx(-3 * 100 / 3600)                # jobs in system x time
    obs, reward, *_, info = env.step(1)                            # job 2 before job 1
    assert info["time_s"] == 200.0 and info["action_mask"].tolist() == [True, False, False]
    obs, reward, terminated, _, info = env.step(5)                 # out of range: job 1 starts
    assert terminated and info["time_s"] == 300.0
    assert env.job_results()["first_start"].tolist() == [0.0, 200.0, 100.0]
    with pytest.raises(ConfigError, match="reset"):
        env.step(0)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="queue_slots"):
        ClusterEnv("sia-64", queue_slots=0)
    big = JobTable.from_columns(arrival_s=[0.0], gpus=[16], model=["A3C"], duration_s=[10.0])
    with pytest.raises(ConfigError, match="requests 16 GPUs"):
        ClusterEnv("uniform:nodes=1,gpus=8", big)


def test_example_heuristic_agent_beats_the_random_one():
    spec = importlib.util.spec_from_file_location("gym_agents_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jct = mod.main()
    assert 0 < jct["shortest-first"] < jct["random"]


def test_module_docstring_example_runs():
    import doctest

    import sim.gym
    assert doctest.testmod(sim.gym).failed == 0
