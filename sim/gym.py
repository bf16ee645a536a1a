"""A Gymnasium environment over the C event kernel: at each decision point an agent chooses
which queued job starts next (``pip install 'clustersim[gym]'``).

>>> import gymnasium as gym, sim.gym
>>> env = gym.make("clustersim/Cluster-v0", cluster="sia-64", jobs=30, load=200.0)
>>> obs, info = env.reset(seed=0)
>>> sorted(obs), obs["queue"].shape, info["action_mask"].shape
(['cluster', 'queue'], (16, 5), (17,))

**Decision point**: a moment (an arrival or a completion, as the kernel reports them) at which
at least one of the first ``queue_slots`` queued jobs (in arrival order) fits in the free GPUs (of one GPU type
it may use: jobs never span types nor run where their throughput is 0).
Moments without a choice are run through inside the kernel's loop, never shown to the agent.

**Action** ``a`` in ``Discrete(queue_slots + 1)``: ``a < queue_slots`` starts the job in queue
slot ``a`` on free GPUs (placed as the built-in placer places one job, ``placement``) and runs to
completion (non-preemptive); the agent is asked again at the same time while another visible job
fits.  ``a == queue_slots`` is a no-op: time runs to the next decision point.  ``info
["action_mask"]`` (and :meth:`ClusterEnv.action_masks`) marks the legal actions; an illegal one
(an empty slot, a job that does not fit) counts as the no-op, except where the no-op is illegal
itself (nothing runs and nothing will arrive: time would stop) and the first fitting job starts.

**Observation** (``Dict``, float32, fixed sizes): ``queue`` (``queue_slots`` x 5: present, GPUs
requested, estimated run time in hours on the reference GPU, hours waited so far, fits now) and
``cluster`` (free GPU fraction, free fraction per GPU type, largest free block on one node as a
fraction of the largest node, jobs queued, jobs running).

**Reward**: minus the jobs in the system (queued or running) integrated over the simulated time
since the previous step, in job-hours.  An episode's return is therefore minus the sum of all
jobs' completion times in hours: maximizing it minimizes the average JCT.

**Episode**: one workload from first arrival until every job finished (``terminated``);
``max_steps`` truncates.  ``workload="generate"`` draws a new workload at each reset from the
environment's seeded generator, so one seed gives one trajectory; a JobTable or a trace file is
replayed as given (:func:`sim.traces.read_workload`).

The environment drives one :class:`sim.engine._Kernel` per episode directly (step, apply,
node_free): a step costs a placement, a cached rate and the kernel calls, not a policy round
trip (benchmarks/bench_gym.py measures steps per second).
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Protocol

import numpy as np
from numba import njit

from ._native import lib
from ._optional import require
from .cluster import Cluster
from .engine import _Kernel, _validate, job_specs, type_rate_table
from .errors import ConfigError
from .jobs import JobTable
from .network import rate_oracle
from .placement import PLACEMENT_MODES, allowed_masks, first_node_of_type, place_one
from .presets import load_cluster
from .scenario import DEFAULT_LOAD
from .state import ARRIVAL, COMPLETION
from .throughput import default_oracle
from .workload import generate_workload

gymnasium = require("gymnasium", "gym")
spaces = gymnasium.spaces

__all__ = ["ClusterEnv", "Agent", "rollout", "ENV_ID", "QUEUE_FEATURES"]

ENV_ID = "clustersim/Cluster-v0"
QUEUE_FEATURES = ("present", "gpus", "est_hours", "wait_hours", "fits")
_H = 3600.0
_SEED_LIMIT = 2**63 - 1
_HIGH = 1e12       # bound of every feature (hours within sim.limits.MAX_TIME_S, counts of jobs)


class ClusterEnv(gymnasium.Env):
    """Which queued job starts next; see the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, cluster: Cluster | str = "sia-64",
                 workload: JobTable | str | os.PathLike = "generate", *, jobs: int = 200,
                 load: float = DEFAULT_LOAD, sizes: str = "gavel", durations: str = "gavel",
                 queue_slots: int = 16, placement: str = "consolidated", oracle=None,
                 max_steps: int | None = None):
        if queue_slots < 1:
            raise ConfigError(f"queue_slots must be >= 1, got {queue_slots}")
        if placement not in PLACEMENT_MODES:
            raise ConfigError(f"placement {placement!r}: choose from {sorted(PLACEMENT_MODES)}")
        self.cluster = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
        self.slots, self.mode, self.max_steps = int(queue_slots), PLACEMENT_MODES[placement], max_steps
        self._generator = dict(n=int(jobs), load=float(load), sizes=sizes, durations=durations)
        self._fixed, self.oracle = self._fixed_workload(workload, oracle)
        c = self.cluster
        self._type_bit = np.left_shift(1, c.node_type.astype(np.int64))
        self._types = len(c.gpu_types)
        self._type_total = np.bincount(c.node_type, weights=c.node_gpus, minlength=self._types)
        self._largest_node, self._total_gpus = int(c.node_gpus.max()), int(c.total_gpus)
        self._rates: dict = {}           # placement summary -> rate; one oracle, kept across episodes
        self._rate_oracle = rate_oracle(self.oracle, c)    # the engine's network term (sim.network)
        self.action_space = spaces.Discrete(self.slots + 1)
        self.observation_space = spaces.Dict({
            "queue": spaces.Box(0.0, _HIGH, (self.slots, len(QUEUE_FEATURES)), np.float32),
            "cluster": spaces.Box(0.0, _HIGH, (4 + self._types,), np.float32)})

    def _fixed_workload(self, workload, oracle):
        """(JobSpecs or None when generated, oracle)."""
        if isinstance(workload, str) and workload == "generate":
            return None, oracle or default_oracle()
        if isinstance(workload, JobTable):
            table, oracle = workload, oracle or default_oracle()
        else:
            from .traces import read_workload
            table, oracle = read_workload(workload, self.cluster, oracle=oracle)
        return self._specs(table, oracle), oracle

    def _specs(self, table: JobTable, oracle):
        specs = job_specs(table, oracle)
        if len(specs) == 0:
            raise ConfigError("the workload has no jobs")
        specs = replace(specs, type_rates=type_rate_table(self.cluster, specs, oracle))
        _validate(self.cluster, specs, oracle)       # the engine's checks: sizes, work, times
        return specs

    # -- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        specs = self._fixed if self._fixed is not None else self._specs(self._generate(), self.oracle)
        self.jobs = specs
        self._demand, self._model = specs.demand.tolist(), specs.model.tolist()
        self._allowed = allowed_masks(specs.type_rates)     # first fit over the types it can use
        self._type_key = first_node_of_type(self.cluster.node_type, self._types)
        self._static = np.column_stack([np.ones(len(specs)), specs.demand,
                                        specs.est_duration / _H]).astype(np.float32)
        self._kernel = _Kernel(self.cluster, specs, 0.0, ARRIVAL | COMPLETION)
        self._free = self.cluster.node_gpus.astype(np.int32)     # per node, at decision points
        self._free_total, self._queue = self._total_gpus, []
        self._type_free = np.bincount(self.cluster.node_type, weights=self.cluster.node_gpus,
                                      minlength=self._types).astype(np.int64).tolist()
        self._job_type = [0] * len(specs)
        self._in_system, self._arrived, self._now, self._area = 0, 0, float(specs.arrival.min()), 0.0
        self._done, self._steps = False, 0
        self._advance()
        obs = self._observation()
        return obs, self._info(obs)

    def step(self, action):
        if self._done:
            raise ConfigError("the episode is over: call reset()")
        started = self._start(int(action)) or \
            (not self._noop_legal() and self._start(self._first_fitting()))
        if not started or not self._fits():
            self._advance()
        self._steps += 1
        reward, self._area = -self._area / _H, 0.0
        truncated = self.max_steps is not None and self._steps >= self.max_steps and not self._done
        obs = self._observation()
        return obs, reward, self._done, truncated, self._info(obs)

    def action_masks(self) -> np.ndarray:
        """Legal actions: queue slots whose job fits now, then the no-op (bool, slots + 1)."""
        mask = np.zeros(self.slots + 1, np.bool_)
        for i, j in enumerate(self._queue[:self.slots]):
            mask[i] = self._can_start(j)
        mask[self.slots] = self._noop_legal() or self._done
        return mask

    # -- the kernel loop -------------------------------------------------------------------
    def _advance(self) -> None:
        """Run the kernel to the next decision point (a visible queued job fits) or the end."""
        k = self._kernel
        while True:
            status = k.step()
            b = k.batch
            self._area += self._in_system * (b.now - self._now)
            self._now = b.now
            if b.n_arrived:
                self._queue.extend(k.arrived[:b.n_arrived].tolist())
                self._arrived += b.n_arrived
            if b.n_completed:
                d = self._demand
                for j in k.completed[:b.n_completed].tolist():
                    self._free_total += d[j]
                    self._type_free[self._job_type[j]] += d[j]
            self._in_system += b.n_arrived - b.n_completed
            if status == lib.SK_DONE:
                self._done = True
                return
            if self._fits():
                self._free[:] = k.node_free()
                return

    def _can_start(self, j: int) -> bool:
        """Job j fits now: some GPU type it may use has that many free GPUs."""
        want, allowed = self._demand[j], int(self._allowed[j])
        return any((allowed >> t) & 1 and free >= want for t, free in enumerate(self._type_free))

    def _fits(self) -> bool:
        return any(self._can_start(j) for j in self._queue[:self.slots])

    def _first_fitting(self) -> int:
        return next(i for i, j in enumerate(self._queue[:self.slots]) if self._can_start(j))

    def _noop_legal(self) -> bool:
        """Something will still happen: a job runs or one is yet to arrive."""
        return self._in_system > len(self._queue) or self._arrived < len(self._demand)

    def _start(self, slot: int) -> bool:
        """Start the job in ``slot`` if there is one and it fits; False otherwise."""
        if not 0 <= slot < min(self.slots, len(self._queue)):
            return False
        j = self._queue[slot]
        want = self._demand[j]
        if want > self._free_total:
            return False
        c = self.cluster
        nodes, counts = place_one(self._free, c.node_type, self._types, want, self.mode,
                                  self._allowed[j], self._type_key)
        if nodes.shape[0] == 0:           # no GPU type it can use has room
            return False
        self._job_type[j] = int(c.node_type[nodes[0]])
        self._type_free[self._job_type[j]] -= want
        rate = self._rate(j, want, nodes)
        self._kernel.apply(np.array([j], np.int64), np.array([0, nodes.shape[0]], np.int64),
                           nodes, counts, np.array([rate]))
        del self._queue[slot]
        self._free_total -= want
        return True

    def _rate(self, j: int, want: int, nodes: np.ndarray) -> float:
        """The oracle's rate of job ``j`` on ``nodes``, cached by placement summary."""
        if nodes.shape[0] == 1:           # most placements: one node, no reductions
            mask, speed = int(self._type_bit[nodes[0]]), float(self.cluster.node_speed[nodes[0]])
        else:
            mask = int(np.bitwise_or.reduce(self._type_bit[nodes]))
            speed = float(self.cluster.node_speed[nodes].min())
        key = (self._model[j], want, nodes.shape[0], mask, speed)
        rate = self._rates.get(key)
        if rate is None:
            rate = float(self._rate_oracle.rates(
                np.array([key[0]], np.int64), np.array([want], np.int64),
                np.array([key[2]], np.int64), np.array([mask], np.int64), np.array([speed]),
                self.cluster.gpu_types)[0])
            if not rate > 0:
                raise ConfigError(f"job {j} cannot run on GPU types of mask {mask} (rate 0)")
            self._rates[key] = rate
        return rate

    # -- what the agent sees ---------------------------------------------------------------
    def _observation(self) -> dict:
        n = len(self._queue)
        scalars = np.array([self.slots, self._now, self._free_total, self._total_gpus,
                            self._largest_node, n, self._in_system - n])
        visible = self._queue[:self.slots]
        fits = np.array([self._can_start(j) for j in visible], np.bool_)
        q, cl = _observe(np.asarray(visible, np.int64), fits, self._static,
                         self.jobs.arrival, self._free, self.cluster.node_type, self._type_total,
                         scalars)
        return {"queue": q, "cluster": cl}

    def _info(self, obs: dict) -> dict:
        mask = np.empty(self.slots + 1, np.bool_)
        mask[:-1] = obs["queue"][:, 4] > 0                   # the "fits" feature
        mask[-1] = self._noop_legal() or self._done
        return {"action_mask": mask, "time_s": self._now, "queued": len(self._queue),
                "arrived": self._arrived}

    # -- helpers for agents and tests ------------------------------------------------------
    def queued_jobs(self) -> np.ndarray:
        """Job ids (rows of the workload) in the visible queue slots, in slot order."""
        return np.asarray(self._queue[:self.slots], np.int64)

    def job_results(self) -> dict:
        """Per-job ``first_start``, ``finish``, ... of the episode (sim.engine's kernel results)."""
        return self._kernel.results()

    def _generate(self) -> JobTable:
        g = self._generator
        seed = int(self.np_random.integers(_SEED_LIMIT))
        return generate_workload(g["n"], g["load"], seed, sizes=g["sizes"],
                                 durations=g["durations"], throughput=self.oracle)


@njit(cache=True)
def _observe(ids, fits, static, arrival, free, node_type, type_total, scalars):
    """The observation's two arrays (see the module docstring), in one pass.  ``scalars``:
    slots, now, free GPUs, total GPUs, GPUs of the largest node, jobs queued, jobs running
    (one array: fewer arguments to type at each call)."""
    slots, now, free_total, total_gpus, largest_node, queued, running = (
        int(scalars[0]), scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6])
    q = np.zeros((slots, 5), np.float32)
    for i in range(ids.shape[0]):
        j = ids[i]
        q[i, 0], q[i, 1], q[i, 2] = static[j, 0], static[j, 1], static[j, 2]
        q[i, 3] = (now - arrival[j]) / 3600.0
        q[i, 4] = 1.0 if fits[i] else 0.0
    k = type_total.shape[0]
    cl = np.zeros(4 + k, np.float32)
    largest = 0
    for n in range(free.shape[0]):
        cl[1 + node_type[n]] += free[n]
        largest = max(largest, free[n])
    for t in range(k):
        cl[1 + t] /= max(type_total[t], 1.0)
    cl[0] = free_total / total_gpus
    cl[1 + k] = largest / largest_node
    cl[2 + k] = queued
    cl[3 + k] = running
    return q, cl


class Agent(Protocol):
    """What :func:`rollout` drives: an action from an observation and its info."""

    def act(self, observation: dict, info: dict) -> int: ...


def rollout(env, agent: Agent, seed: int | None = None) -> tuple[float, int]:
    """One episode of ``agent`` in ``env``: (return, steps)."""
    obs, info = env.reset(seed=seed)
    total, steps, over = 0.0, 0, False
    while not over:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        total, steps, over = total + reward, steps + 1, terminated or truncated
    return total, steps


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:ClusterEnv")
