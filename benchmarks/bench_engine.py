"""asv benchmarks of the engine: kernel events per second, end-to-end runs at 64, 256 and 1024
nodes, and policy decision latency.

Run: ``cd benchmarks && asv run --python=same`` (asv.conf.json).  The functions are plain
Python too: ``python benchmarks/bench_engine.py`` prints every figure once.

* :class:`KernelEvents`: a stream of 1-GPU jobs (one a second, 600 s each) on a cluster big
  enough that none waits for long, driven through :func:`sim.engine.simulate` by a trivial
  policy (admit every queued job in id order) that decides every 600 s only, so the C kernel
  runs the arrivals and completions between rounds by itself.  ``track_events_per_second``:
  (arrivals + completions + rounds) / engine wall time.
* :class:`EngineDecisions`: the same policy deciding at every arrival and completion (the
  Python round trip per decision), in decisions per second.
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

from sim.engine import simulate
from sim.policies import get_policy, list_policies
from sim.policies.base import Policy
from sim.state import ARRIVAL, COMPLETION
from sim.throughput import TableThroughput
from sim.cluster import uniform_cluster
from sim.jobs import JobTable

NODES = [64, 256, 1024]


class _AdmitAll(Policy):
    """Trivial policy: every queued job in id order, backfilling, never preempting.  Decides only
    at rounds (no decision per arrival or completion), so the kernel runs the events between
    rounds without returning to Python."""

    name = "admit-all"
    description = "benchmark only"
    triggers = 0
    round_s = 600.0

    def order(self, state):
        return np.flatnonzero(state.ngpu == 0)


class _AdmitAllEvents(_AdmitAll):
    """The same, deciding at every arrival and completion (one Python round trip per event)."""

    triggers = ARRIVAL | COMPLETION
    round_s = None


def _stream(n: int, gap_s: float = 1.0, run_s: float = 600.0) -> JobTable:
    """n one-GPU jobs arriving every gap_s seconds, each running run_s on the reference GPU."""
    return JobTable.from_columns(arrival_s=np.arange(n) * gap_s, gpus=np.ones(n, np.int32),
                                 model=np.array(["ResNet-18 (batch size 64)"] * n, dtype=object),
                                 duration_s=np.full(n, run_s))


class KernelEvents:
    timeout = 300
    params = [[20_000, 200_000]]
    param_names = ["jobs"]

    def setup(self, jobs):
        self.oracle = TableThroughput.builtin()
        self.cluster = uniform_cluster(256, 8)      # 2,048 GPUs; about 600 jobs run at once
        self.table = _stream(jobs)
        simulate(self.cluster, _stream(50), _AdmitAll(), self.oracle)   # load kernels

    def time_kernel_stream(self, jobs):
        simulate(self.cluster, self.table, _AdmitAll(), self.oracle)

    def track_events_per_second(self, jobs):
        """arrivals + completions + rounds per second of engine wall time, deciding at rounds"""
        res = simulate(self.cluster, self.table, _AdmitAll(), self.oracle)
        return (2 * jobs + res.decisions) / res.wall_seconds
    track_events_per_second.unit = "events/s"


class EngineDecisions:
    """The admit-all stream deciding at every arrival and completion: one Python round trip
    (snapshot, policy, plan diff, apply) per decision."""

    timeout = 300

    def setup(self):
        self.oracle = TableThroughput.builtin()
        self.cluster = uniform_cluster(256, 8)
        self.table = _stream(20_000)
        simulate(self.cluster, _stream(50), _AdmitAllEvents(), self.oracle)

    def track_decisions_per_second(self):
        res = simulate(self.cluster, self.table, _AdmitAllEvents(), self.oracle)
        return res.decisions / res.wall_seconds
    track_decisions_per_second.unit = "decisions/s"


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


class ContendedNative:
    """A contended run (20,000 jobs on 256 x 8 GPUs at 300 jobs/h: jobs wait) decided inside the
    C kernel (sim.native) and by the Python policy at every decision, in the same process:
    ``track_speedup`` is the ratio of the two wall times (issue 18)."""

    timeout = 900
    params = [["fifo", "srtf", "tiresias"]]
    param_names = ["policy"]

    def setup(self, policy):
        from sim.engine import EngineConfig
        self.oracle = TableThroughput.builtin()
        self.cluster = uniform_cluster(256, 8)
        from sim.workload import generate_workload
        self.table = generate_workload(20_000, 300.0, 0, throughput=self.oracle)
        self.native, self.python = EngineConfig(native=True), EngineConfig(native=False)
        simulate(self.cluster, self.table, get_policy(policy), self.oracle, self.native)

    def time_native(self, policy):
        simulate(self.cluster, self.table, get_policy(policy), self.oracle, self.native)

    def track_speedup(self, policy):
        """Python-path wall time / native wall time, measured back to back."""
        a = simulate(self.cluster, self.table, get_policy(policy), self.oracle, self.native)
        b = simulate(self.cluster, self.table, get_policy(policy), self.oracle, self.python)
        return b.wall_seconds / a.wall_seconds
    track_speedup.unit = "x"


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
    from sim.sweep.cells import _cluster, build_workload
    from sim.throughput import default_oracle
    cell = _cell(nodes, policy=policy)
    cluster, oracle = _cluster(cell), default_oracle()
    table, _, oracle = build_workload(cell, cluster, oracle)
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
    for n in (20_000, 200_000):
        k.setup(n)
        print(f"kernel: {k.track_events_per_second(n):,.0f} events/s ({n:,} jobs, admit-all, "
              f"600 s rounds)")
    d = EngineDecisions()
    d.setup()
    print(f"engine: {d.track_decisions_per_second():,.0f} decisions/s (20,000 jobs, "
          f"admit-all at every event)")
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
