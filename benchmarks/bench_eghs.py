"""asv: EGHS decision latency (policy tier).  One scheduling round at 1024 nodes (8 GPUs
each) with 2,000 active jobs; target <= 10 ms per round.

The SchedStates are built directly (no engine): a Gavel-like mix of 2,000 elastic jobs
(Gavel sizes and durations, gpus_min = gpus // 2, gpus_max = 2 gpus), half of the GPUs
initially busy.  A warm-up policy then runs a chain of rounds 60 s apart, each state carrying
the previous plan and the progress made at its rates; the timed policy replays that chain,
so it sees steady-state rounds (jobs produce entropy samples, most placements are kept).
"""
from __future__ import annotations

import numpy as np

from sim.cluster import uniform_cluster
from sim.placement import greedy_place
from sim.policies import get_policy
from sim.state import ROUND, JobSpecs, SchedState
from sim.throughput import TableThroughput

MODELS = ("ResNet-18 (batch size 64)", "ResNet-50 (batch size 64)", "Transformer (batch size 64)",
          "LM (batch size 20)")


def build_state(n_nodes: int = 1024, n_jobs: int = 2000, n_states: int = 8, variant: str = "eghs",
                seed: int = 0):
    """(policy, [SchedState]) for n_jobs active jobs on n_nodes x 8 GPUs."""
    from sim.learning.spec import LearningSpec
    from sim.learning.world import LearningWorld

    rng = np.random.default_rng(seed)
    oracle = TableThroughput.builtin()
    cluster = uniform_cluster(n_nodes, 8)
    names = list(oracle.models)
    model = np.array([names.index(m) for m in MODELS])[rng.integers(0, len(MODELS), n_jobs)]
    demand = rng.choice([1, 2, 4, 8], size=n_jobs, p=[0.7, 0.1, 0.15, 0.05]).astype(np.int32)
    arrival = np.sort(rng.uniform(0, 3600, n_jobs))
    ref = oracle.reference_rate(model, demand)
    work = ref * 60 * 10 ** rng.uniform(1.5, 3, n_jobs) * 0.25
    jobs = JobSpecs(arrival=arrival, demand=demand, gpus_min=np.maximum(1, demand // 2).astype(np.int32),
                    gpus_max=(2 * demand).astype(np.int32), model=model.astype(np.int32),
                    work=work, est_duration=work / ref, priority=np.ones(n_jobs),
                    restart_delay=np.full(n_jobs, 30.0))
    # a valid current placement: about half of the jobs (by GPU budget) running at their demand
    order = rng.permutation(n_jobs)
    want = demand.copy()
    empty = (np.zeros(n_jobs + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    indptr, nodes, counts = greedy_place(order.astype(np.int64), want, *empty, cluster.node_gpus,
                                         cluster.node_type, 1, 0, True, False,
                                         np.ones(n_jobs, np.int64), np.zeros((n_jobs, 1)))
    lens = np.diff(indptr)
    ngpu = np.bincount(np.repeat(np.arange(n_jobs), lens), weights=counts, minlength=n_jobs).astype(np.int32)
    half = ngpu.cumsum() > cluster.total_gpus // 2
    keep = ~half
    # drop the placements of the jobs beyond half of the GPUs
    lens2 = np.where(keep, lens, 0)
    ip2 = np.zeros(n_jobs + 1, np.int64)
    np.cumsum(lens2, out=ip2[1:])
    take = np.repeat(keep, lens)
    nodes, counts = nodes[take], counts[take]
    ngpu = np.where(keep, ngpu, 0).astype(np.int32)
    spec = LearningSpec.build(n_jobs, names, jobs.gpus_max, quality=(0.9, 0.97), seed=seed)
    name = "eghs" if variant == "eghs" else "eghs-unaware"
    world = LearningWorld(spec)
    world.start(jobs)

    def make():
        return get_policy(name)

    # a chain of rounds 60 s apart: each state carries the previous round's plan (placements,
    # GPUs) and the progress made at the planned rates, so the timed rounds see a steady state
    warm = make()
    now, remaining, ip, nd, ct = 3600.0, work.copy(), ip2, nodes, counts
    attained = np.zeros(n_jobs)
    states = []
    for s in range(n_states):
        st = SchedState(now=now, reasons=ROUND, cluster=cluster, jobs=jobs,
                        active=np.arange(n_jobs, dtype=np.int64), ngpu=ngpu, remaining=remaining,
                        attained_gpu_s=attained.copy(), run_s=attained / np.maximum(ngpu, 1),
                        queued_since=np.where(ngpu > 0, np.nan, arrival), pl_indptr=ip,
                        pl_nodes=nd, pl_counts=ct, oracle=oracle)
        st = world.observe(st)                  # what the policy sees (truth masked)
        states.append(st)
        plan = world.settle(st, warm.schedule(st))
        lens = np.diff(plan.indptr)
        ngpu = np.bincount(np.repeat(np.arange(n_jobs), lens), weights=plan.counts,
                           minlength=n_jobs).astype(np.int32)
        rate = oracle.reference_rate(model, ngpu) * plan.rate_scale
        remaining = np.maximum(remaining - rate * 60.0, 1.0)
        attained = attained + ngpu * 60.0
        ip, nd, ct = plan.indptr, plan.nodes, plan.counts
        now += 60.0
    return make(), states


class EGHSDecision:
    params = (["eghs", "eghs-unaware"],)
    param_names = ["variant"]
    timeout = 300

    def setup(self, variant):
        self.pol, self.states = build_state(variant=variant)
        self.pol.schedule(self.states[0])       # allocate per-run state, compile
        self.i = 0

    def time_schedule_round(self, variant):
        # rounds in order; wrapping around restarts the run (time goes back: state reset)
        self.i = (self.i + 1) % len(self.states)
        self.pol.schedule(self.states[self.i])


if __name__ == "__main__":
    import time
    for v in ("eghs", "eghs-unaware"):
        pol, states = build_state(variant=v, n_states=12)
        pol.schedule(states[0])
        ts = []
        for st in states[1:]:
            t = time.perf_counter()
            pol.schedule(st)
            ts.append(time.perf_counter() - t)
        print(f"{v}: one round at 1024 nodes / 2000 jobs: median {1e3 * np.median(ts):.2f} ms, "
              f"max {1e3 * max(ts):.2f} ms, micro updates {pol.micro_updates}")
