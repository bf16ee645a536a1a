"""The Sia simulator's Pollux search (pymoo NSGA-II) on problems dumped by pollux_search_fidelity.py.

    python scalability/pollux_search_theirs.py SIA_SIMULATOR_DIR PROBLEMS.npz --seeds 0-15 [--rounds 2] --out theirs.jsonl

Runs in the Sia simulator's own environment (Python 3.11, numpy 1.23.5, pymoo 0.4.2.1;
docs/goodput-history.md, "The search against pymoo's"), not in ours: it imports nothing of
``sim``.  Each problem of the file is handed to the artifact's ``pollux_unaware.Problem`` (its
objectives, crossover, mutation and repair, unmodified) and solved as its ``PolluxPolicyUnaware.optimize`` does (pymoo's NSGA2,
population 100, 100 generations, seeded with the current allocation, the non-dominated member of
best power mean), once per seed given to ``numpy.random.seed`` (their simulator seeds nothing);
with ``--rounds 2`` (the default) the same problem is solved again from the first round's
non-dominated states, as their next round starts when no job came or went.

The problem's inputs are ours (speedup tables, current allocation, node GPUs, per-job GPU cap,
restart factors), set on ``Problem`` without its constructor, which builds them from their job
objects: a job's ``speedup_fn(nodes, replicas)`` reads its table, every replica takes one GPU,
and the restart factor is reached through their formula with no restarts and
``age = 30 f / (1 - f)``.  One JSON line per (problem, seed, round).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

RESTART_DELAY_S = 30.0      # their Problem._evaluate's delay


class _Job:
    """What their Problem reads of a job."""

    def __init__(self, table, factor, max_replicas):
        self.speedup_fn = lambda n, r: table[np.minimum(n, table.shape[0] - 1), np.minimum(r, table.shape[1] - 1)]
        self.num_restarts = 0
        self.age = factor * RESTART_DELAY_S / (1.0 - factor)
        self.max_replicas = int(max_replicas)
        self.min_replicas = 0


def table_problem(problem_cls, base_problem_cls, arrays: dict):
    """Their ``Problem`` on our arrays (see the module docstring)."""
    base = arrays["base"].astype(np.int64)
    cap = arrays["capacity"].astype(np.int64)
    jobs = [_Job(t, f, m) for t, f, m in zip(arrays["speedup"], arrays["restart_factor"], arrays["max_replicas"])]
    p = problem_cls.__new__(problem_cls)
    p.p_fairness = -1
    p._jobs, p._nodes, p._base_state = jobs, list(range(base.shape[1])), base
    p._job_resources = np.ones((base.shape[0], 1), np.int64)
    p._node_resources = cap[:, None]
    p._dominant_share = np.full(base.shape[0], 1.0 / cap.sum())
    p._max_replicas = np.broadcast_to(cap[None, :], base.shape).copy()
    base_problem_cls.__init__(p, n_var=base.size, n_obj=2, type_var=int)
    return p


def solve(problem, init: np.ndarray, modules) -> tuple[float, np.ndarray, np.ndarray]:
    """(power mean, allocation [J, N]) of their optimize's pick from the states ``init``
    [K, J, N], and the non-dominated states, which seed their next round."""
    minimize, nsga2, nds, crossover, mutation, repair = modules
    base = problem._base_state
    algorithm = nsga2(pop_size=100, sampling=init.reshape(init.shape[0], -1), crossover=crossover(),
                      mutation=mutation(), repair=repair())
    res = minimize(problem, algorithm, ("n_gen", 100))
    states = res.X.reshape(res.X.shape[0], *base.shape)
    front = nds().do(res.F, only_non_dominated_front=True)
    best = int(np.argmin(res.F[front][:, 0]))
    return float(-res.F[front][best, 0]), states[front][best], states


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi) + 1)) if hi else [int(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sia_dir", type=Path, help="the artifact's sia-simulator folder")
    ap.add_argument("problems", type=Path)
    ap.add_argument("--seeds", default="0-15", help="A-B or a comma list")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds per seed: the first from the current allocation, each next one "
                         "from the last round's non-dominated states (their _adapt_prev_states, "
                         "the same jobs and nodes)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    sys.path.insert(0, str(args.sia_dir))
    import pymoo.model.problem
    import pymoo.optimize
    from pollux_unaware import Crossover, Mutation, Problem, Repair
    from pymoo.algorithms.nsga2 import NSGA2
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting
    modules = (pymoo.optimize.minimize, NSGA2, NonDominatedSorting, Crossover, Mutation, Repair)
    data = np.load(args.problems)
    names = sorted({k.split("/")[0] for k in data.files})
    with open(args.out, "w") as out:
        for name in names:
            arrays = {k.split("/")[1]: data[k] for k in data.files if k.startswith(name + "/")}
            problem = table_problem(Problem, pymoo.model.problem.Problem, arrays)
            for seed in _seeds(args.seeds):
                np.random.seed(seed)
                init = problem._base_state[None]
                for round_ in range(1, args.rounds + 1):
                    t0 = time.process_time()
                    obj, x, init = solve(problem, init, modules)
                    out.write(json.dumps({"problem": name, "round": round_, "seed": seed, "objective": obj,
                                          "gpus": x.sum(axis=1).tolist(), "nodes": (x > 0).sum(axis=1).tolist(),
                                          "cpu_s": time.process_time() - t0}) + "\n")
                    out.flush()


if __name__ == "__main__":
    main()
