"""A user-written policy in plain Python: smallest GPU request first.

Run it with ``python examples/user_policy.py``.  A policy subclasses
``sim.policies.Policy`` and overrides any of the three steps:

- ``order(state)``: indices into ``state.active``, highest priority first;
  jobs left out wait (this is also where admission control goes);
- ``allocate(state, order)``: GPUs per active job (default: the request);
- ``place(state, order, want)``: node placements (default: the built-in greedy
  placer with ``self.placement`` = "consolidated" or "spread").

``@register`` makes it available by name to ``get_policy`` and to the CLI of
any program that imports the module.  Plain Python is fine for a policy you are
trying out; the built-in policies use numpy/Numba so that no Python code runs
per job.
"""
from __future__ import annotations

import numpy as np

from sim.engine import simulate
from sim.metrics import compare_table, summary
from sim.policies import Policy, get_policy, register
from sim.presets import load_cluster
from sim.throughput import TableThroughput
from sim.workload import generate_workload


@register
class SmallestFirst(Policy):
    name = "smallest-first"
    description = "smallest GPU request first, ties by arrival; non-preemptive; backfills"

    def order(self, state):
        # a plain Python loop is allowed in a user policy
        queued = [i for i in range(len(state.active)) if state.ngpu[i] == 0]
        queued.sort(key=lambda i: (state.jobs.demand[state.active[i]],
                                   state.jobs.arrival[state.active[i]]))
        return np.asarray(queued, dtype=np.int64)


def main() -> dict:
    cluster = load_cluster("sia-64")
    oracle = TableThroughput.builtin()
    jobs = generate_workload(60, 4.0, seed=1, throughput=oracle)
    summaries = {name: summary(simulate(cluster, jobs, get_policy(name), oracle))
                 for name in ("fifo", "smallest-first")}
    print(compare_table(summaries))
    return summaries


if __name__ == "__main__":
    main()
