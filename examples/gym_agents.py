"""Two agents in the Gymnasium environment (sim.gym): random and shortest-job-first.

Run it with ``python examples/gym_agents.py`` (needs ``pip install 'clustersim[gym]'``).  Both
choose among the legal actions of ``info["action_mask"]``; the heuristic starts the visible job
with the shortest estimated run time that fits, the random agent any legal action (the no-op
included).  The return is minus the sum of job completion times in hours (sim/gym.py), so the
average JCT is ``-return / jobs``.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

import sim.gym  # noqa: F401  (registers clustersim/Cluster-v0)
from sim.gym import rollout

JOBS = 300


class RandomAgent:
    """A uniformly random legal action."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def act(self, observation, info) -> int:
        return int(self.rng.choice(np.flatnonzero(info["action_mask"])))


class ShortestFirstAgent:
    """The fitting job with the shortest estimated run time; the no-op when none fits."""

    def act(self, observation, info) -> int:
        legal = info["action_mask"][:-1]
        if not legal.any():
            return legal.shape[0]
        hours = np.where(legal, observation["queue"][:, 2], np.inf)
        return int(np.argmin(hours))


def main(seed: int = 0) -> dict:
    env = gym.make("clustersim/Cluster-v0", cluster="sia-64", jobs=JOBS, load=60.0)
    out = {}
    for name, agent in (("random", RandomAgent(seed)), ("shortest-first", ShortestFirstAgent())):
        ret, steps = rollout(env, agent, seed=seed)
        out[name] = -ret / JOBS
        print(f"{name:15s} avg JCT {out[name]:8.2f} h  ({steps} decisions)")
    return out


if __name__ == "__main__":
    main()
