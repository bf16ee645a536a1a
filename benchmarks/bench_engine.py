"""asv benchmarks of the engine: kernel events per second, end-to-end runs at 64, 256 and 1024
nodes, and policy decision latency.

Run: ``cd benchmarks && asv run --python=same`` (asv.conf.json).  The functions are plain
Python too: ``python benchmarks/bench_engine.py`` prints every figure once.

* :class:`KernelEvents`: a stream of 1-GPU jobs on a cluster big enough that none waits, driven
  through :func:`sim.engine.simulate` by a trivial policy (admit every queued job in id order);
  each job is two kernel events (arrival, completion).  ``track_events_per_second`` reports
  events / engine wall time.
* :class:`EndToEnd`: one sweep cell (workload generation, simulation, summary and per-job table)
  on uniform clusters of 64, 256 and 1024 nodes x 4 GPUs, 4 jobs per node, offered load 1.2:
  the headline sweep's cells (scalability/specs/headline.toml) at load 1.2.
* :class:`DecisionLatency`: one ``policy.schedule(state)`` call for every registered policy, on
  the decision point right after the last arrival of an end-to-end cell (64, 256 and 1024
  nodes), where the queue is longest.
"""
from __future__ import annotations

import time

import numpy as np

from sim.engine import EngineConfig, simulate
from sim.policies import get_policy, list_policies
from sim.policies.base import Policy, stable_order
from sim.throughput import TableThroughput
from sim.cluster import uniform_cluster
from sim.jobs import JobTable

NODES = [64, 256, 1024]


class _AdmitAll(Policy):
    """Trivial policy: every queued job in id order, backfilling, never preempting."""

    name = "admit-all"
    description = "benchmark only"

    def order(self, state):
        return np.flatnonzero(state.ngpu == 0)


def _stream(n: int, gap_s: float = 1.0, run_s: float = 600.0) -> JobTable:
    """n one-GPU jobs arriving every gap_s seconds, each running run_s on the reference GPU."""
    return JobTable.from_columns(arrival_s=np.arange(n) * gap_s, gpus=np.ones(n, np.int32),
                                 model=np.array(["ResNet-18 (batch size 64)"] * n, dtype=object),
                                 duration_s=np.full(n, run_s))


class KernelEvents:
    timeout = 300
    params = [[20_000]]
    param_names = ["jobs"]

    def setup(self, jobs):
        self.oracle = TableThroughput.builtin()
        self.cluster = uniform_cluster(256, 8)      # 2,048 GPUs; about 600 jobs run at once
        self.table = _stream(jobs)
        simulate(self.cluster, _stream(50), _AdmitAll(), self.oracle)   # load kernels

    def _run(self):
        return simulate(self.cluster, self.table, _AdmitAll(), self.oracle, EngineConfig(round_s=0))

    def time_kernel_stream(self, jobs):
        self._run()

    def track_events_per_second(self, jobs):
        res = self._run()
        return 2 * jobs / res.wall_seconds
    track_events_per_second.unit = "events/s"


def _cell(nodes: int, load: float = 1.2, policy: str = "fifo", seed: int = 0):
    from sim.sweep import parse_spec
    doc = {"name": "bench", "grid": {"policy": [policy], "nodes": [nodes], "load": [load],
                                     "seed": [seed]},
           "cluster": {"gpus_per_node": 4},
           "workload": {"jobs_per_node": 4, "load_unit": "utilization"}}
    return parse_spec(doc).cells[0]


class EndToEnd:
    timeout = 600
    params = [NODES, ["fifo", "tiresias"]]
    param_names = ["nodes", "policy"]

    def setup(self, nodes, policy):
        if policy not in list_policies():
            raise NotImplementedError(f"policy {policy} is not registered")
        from sim.sweep.cells import run_cell
        self.run_cell = run_cell
        self.cell = _cell(nodes, policy=policy)
        run_cell(_cell(4, policy=policy))           # load kernels

    def time_cell(self, nodes, policy):
        self.run_cell(self.cell)

    def track_engine_seconds(self, nodes, policy):
        return self.run_cell(self.cell)[0]["wall_seconds"]
    track_engine_seconds.unit = "s"


class _Stop(Exception):
    pass


class _Capture:
    """Wraps a policy; keeps the first decision state after the last arrival, then stops the run
    (with the headline's load the queue is longest when the arrivals end)."""

    def __init__(self, inner, last_arrival: float):
        self.inner = inner
        self.last_arrival = last_arrival
        self.state = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def schedule(self, state):
        if state.now >= self.last_arrival:
            self.state = state
            raise _Stop
        return self.inner.schedule(state)


def busiest_state(nodes: int, policy: str):
    """(fresh policy, SchedState) at the first decision point after a headline cell's last
    arrival, with the policy's own decisions up to there."""
    from sim.sweep.cells import _cluster, _oracle, build_workload
    cell = _cell(nodes, policy=policy)
    cluster, oracle = _cluster(cell), _oracle()
    table, _ = build_workload(cell, cluster, oracle)
    cap = _Capture(get_policy(policy), float(table.arrival_s.max()))
    try:
        simulate(cluster, table, cap, oracle)
    except _Stop:
        pass
    return get_policy(policy), cap.state


class DecisionLatency:
    timeout = 600
    params = [sorted(list_policies()), NODES]
    param_names = ["policy", "nodes"]

    def setup(self, policy, nodes):
        self.policy, self.state = busiest_state(nodes, policy)
        self.policy.schedule(self.state)

    def time_schedule(self, policy, nodes):
        self.policy.schedule(self.state)

    def track_active_jobs(self, policy, nodes):
        return len(self.state.active)
    track_active_jobs.unit = "jobs"


def _once() -> None:
    """Print every figure once (no asv)."""
    k = KernelEvents()
    k.setup(20_000)
    print(f"kernel: {k.track_events_per_second(20_000):,.0f} events/s (20,000 jobs, admit-all)")
    for policy in ("fifo", "tiresias"):
        for n in NODES:
            e = EndToEnd()
            try:
                e.setup(n, policy)
            except NotImplementedError:
                continue
            t = time.perf_counter()
            row = e.run_cell(e.cell)[0]
            print(f"end-to-end {policy:9s} {n:5d} nodes, {row['n_jobs']:5d} jobs: cell "
                  f"{time.perf_counter() - t:6.2f} s, engine {row['wall_seconds']:6.2f} s")
    for policy in sorted(list_policies()):
        for n in NODES:
            d = DecisionLatency()
            d.setup(policy, n)
            reps = 20
            t = time.perf_counter()
            for _ in range(reps):
                d.time_schedule(policy, n)
            print(f"decision {policy:9s} {n:5d} nodes, {len(d.state.active):5d} active jobs: "
                  f"{(time.perf_counter() - t) / reps * 1e3:7.2f} ms")


if __name__ == "__main__":
    _once()
