"""What the NSGA-II polish of our Pollux search buys, round by round (``pollux-learning``,
``search="dp"``; sim/policies/pollux_search.py).

Runs one EGHS-experiment workload (scalability/eghs_experiment.py) with the polish on and, at
every round, also computes the answer without it from the same random state (the generator is
restored afterwards, so the run is exactly the polished run).  Per round it records the power
mean of the DP's best candidate and of the polished answer, and the seconds each took.  Prints
one JSON object: rounds, rounds where the polish improved the objective, the mean and largest
relative improvement, and the share of the search's time the polish took::

    python scalability/pollux_polish.py main 64 0
    python scalability/pollux_polish.py contended 64 0 --out scalability/results/eghs2/polish
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eghs_experiment import WORKLOADS, make_cluster, make_workload  # noqa: E402

from sim.engine import EngineConfig, job_specs, run_jobs  # noqa: E402
from sim.learning.workload import learning_world  # noqa: E402
from sim.policies import get_policy  # noqa: E402
from sim.policies.pollux_search import POLISH, PolluxSearch, dp_search  # noqa: E402
from sim.throughput import TableThroughput  # noqa: E402


class RecordingSearch(PolluxSearch):
    """The dp search with the polish, recording the unpolished answer of the same round."""

    def __init__(self, base: PolluxSearch):
        super().__init__("pollux-learning", "dp", base.population, base.generations, base.seed, True)
        self.rounds: list[tuple[float, float, float, float]] = []

    def solve(self, problem, ids, per_node):
        state = self.rng.bit_generator.state
        t0 = time.perf_counter()
        plain = dp_search(problem, per_node, self.rng, (0, 0))
        t1 = time.perf_counter()
        self.rng.bit_generator.state = state
        out = dp_search(problem, per_node, self.rng, POLISH)
        t2 = time.perf_counter()
        v = problem.values(np.stack([plain, out]))[0]
        self.rounds.append((float(v[0]), float(v[1]), t1 - t0, t2 - t1))
        return out


def measure(workload: str, nodes: int, seed: int, duration_scale: float = 0.25) -> dict:
    oracle = TableThroughput.builtin()
    jpn, load = WORKLOADS[workload][nodes]
    wl = make_workload(nodes, seed, jpn, load, duration_scale, oracle)
    policy = get_policy("pollux-learning", search="dp")
    rec = RecordingSearch(policy.searcher)
    policy.searcher = rec
    res = run_jobs(make_cluster(nodes), job_specs(wl, oracle), policy, oracle, EngineConfig(round_s=60.0),
                   job_ids=wl.job_id, learning=learning_world(wl, oracle, seed, None))
    r = np.array(rec.rounds).reshape(-1, 4)
    gain = (r[:, 1] - r[:, 0]) / np.maximum(np.abs(r[:, 0]), 1e-300)
    better = gain > 0
    return {"workload": workload, "nodes": nodes, "seed": seed, "rounds": int(r.shape[0]),
            "rounds_improved": int(better.sum()), "rounds_worse": int((gain < 0).sum()),
            "mean_gain_when_improved": float(gain[better].mean()) if better.any() else 0.0,
            "max_gain": float(gain.max()) if gain.size else 0.0,
            "dp_only_s": float(r[:, 2].sum()), "with_polish_s": float(r[:, 3].sum()),
            "polish_share_of_search": float(1 - r[:, 2].sum() / r[:, 3].sum()) if r.size else 0.0,
            "avg_jct_s": float(np.mean(res.finish - res.jobs.arrival))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("nodes", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("--out", type=Path, help="also write <out>/<workload>_<nodes>_<seed>.json")
    a = ap.parse_args(argv)
    row = measure(a.workload, a.nodes, a.seed)
    print(json.dumps(row))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"{a.workload}_{a.nodes}_{a.seed}.json").write_text(json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
