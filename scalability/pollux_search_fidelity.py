"""Our NSGA-II against the Sia simulator's (pymoo's) on the same search problems
(docs/goodput-history.md, "The search against pymoo's").

    python scalability/pollux_search_fidelity.py dump DIR --workload W.csv [--workload ...] [--jobs 10,20,30]
    python scalability/pollux_search_fidelity.py ours DIR [--seeds 0-15] [--rounds 2] [--survival stable|pymoo]
    python scalability/pollux_search_theirs.py SIA_SIMULATOR_DIR DIR/problems.npz --out DIR/theirs.jsonl
    python scalability/pollux_search_fidelity.py compare DIR [--survival stable|pymoo] [--out results.json]

``dump`` writes DIR/problems.npz: the ``sia-pollux`` search problems met along a ``search="dp"``
run of each Sia workload on ``sia-64`` (the first round with at least each of ``--jobs`` active jobs)
and the 100-job, 64-node Pollux decision of benchmarks/bench_goodput.py.  ``ours`` solves each
with :func:`sim.policies.pollux_search.nsga2` from the current allocation, once per seed, and
then again from that round's Pareto set (DIR/ours.jsonl; with ``--survival pymoo``, pymoo's
survival ties, DIR/ours_pymoo.jsonl); the third command does the same with their code, in their
environment.
``compare`` sets the two side by side per problem: the power mean reached (mean and range over
seeds, Welch's t), jobs left without GPUs, GPUs in use, and how far apart the two searches' mean
GPUs per job are (mean over jobs of the absolute difference) next to the same distance between
the two halves of their own seeds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from sim.api import simulate
from sim.policies import pollux_search
from sim.policies.pollux_search import PolluxProblem, nsga2

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("speedup", "base", "capacity", "max_replicas", "restart_factor")


class _Captured(Exception):
    """Every problem wanted was met: the run stops."""


def workload_problems(workload: Path, sizes: list[int]) -> dict[str, PolluxProblem]:
    """The first search problem with at least ``n`` active jobs, for each ``n`` in ``sizes``,
    along a ``sia-pollux`` dp run of ``workload`` on ``sia-64``."""
    got: dict[str, PolluxProblem] = {}
    solve = pollux_search.PolluxSearch.solve
    stem = f"{workload.parent.name}-{workload.stem.removeprefix('workload-')}"

    def capture(self, problem, ids, per_node):
        for n in sizes:
            if f"{stem}_j{n}" not in got and problem.base.shape[0] >= n:
                got[f"{stem}_j{n}"] = problem
        if len(got) == len(sizes):
            raise _Captured
        return solve(self, problem, ids, per_node)

    pollux_search.PolluxSearch.solve = capture
    try:
        simulate("sia-64", str(workload), "sia-pollux", search="dp")
    except _Captured:
        pass
    finally:
        pollux_search.PolluxSearch.solve = solve
    return got


def bench_problem() -> PolluxProblem:
    """The 100-job decision at 64 nodes of benchmarks/bench_goodput.py."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_goodput import build_state

    from sim.policies.pollux import attained_order
    policy, state, _ = build_state(search="nsga2")
    return policy.problem(state, attained_order(state))


def dump(out_dir: Path, workloads: list[Path], sizes: list[int]) -> None:
    problems = {"bench100": bench_problem()}
    for workload in workloads:
        problems.update(workload_problems(workload, sizes))
    arrays = {}
    for name, p in problems.items():
        if p.allowed is not None or not p.avoid_interference:
            raise SystemExit(f"{name}: their Problem has no allowed nodes and always avoids interference")
        arrays.update({f"{name}/{f}": getattr(p, f) for f in FIELDS})
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez(out_dir / "problems.npz", **arrays)
    for name, p in problems.items():
        print(f"{name}: {p.base.shape[0]} jobs, {p.base.shape[1]} nodes, {int(p.base.sum())} GPUs held")


def load_problems(path: Path) -> dict[str, PolluxProblem]:
    data = np.load(path)
    names = sorted({k.split("/")[0] for k in data.files})
    return {n: PolluxProblem(*(data[f"{n}/{f}"] for f in FIELDS)) for n in names}


def _ours_file(out_dir: Path, survival: str) -> Path:
    return out_dir / ("ours.jsonl" if survival == pollux_search.SURVIVAL else f"ours_{survival}.jsonl")


def ours(out_dir: Path, seeds: list[int], rounds: int, survival: str) -> None:
    """Each problem solved from its current allocation, then ``rounds - 1`` times more, each from
    the last round's Pareto set (what :class:`~sim.policies.pollux_search.PolluxSearch` seeds a
    round with when the jobs are the same)."""
    with open(_ours_file(out_dir, survival), "w") as out:
        for name, p in load_problems(out_dir / "problems.npz").items():
            for seed in seeds:
                rng, init = np.random.default_rng(seed), p.base[None].astype(np.int64)
                for round_ in range(1, rounds + 1):
                    t0 = time.process_time()
                    init, f = nsga2(p, init, rng, survival=survival)
                    best = int(np.argmin(f[:, 0]))
                    x = init[best]
                    out.write(json.dumps({"problem": name, "round": round_, "seed": seed,
                                          "objective": float(-f[best, 0]), "gpus": x.sum(axis=1).tolist(),
                                          "nodes": (x > 0).sum(axis=1).tolist(),
                                          "cpu_s": time.process_time() - t0}) + "\n")
                    out.flush()


def _runs(path: Path) -> dict[str, list[dict]]:
    """(problem, round) -> its runs, one a seed, under the name ``problem`` or ``problem, round k``."""
    out: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        key = rec["problem"] if rec.get("round", 1) == 1 else f"{rec['problem']}, round {rec['round']}"
        out.setdefault(key, []).append(rec)
    return out


def _gpu_distance(a: list[dict], b: list[dict]) -> float:
    """Mean over jobs of |mean GPUs in ``a`` - mean GPUs in ``b``|."""
    return float(np.abs(np.mean([r["gpus"] for r in a], axis=0) - np.mean([r["gpus"] for r in b], axis=0)).mean())


def _welch(a: list[float], b: list[float]) -> float:
    """Welch's p; 1.0 where every value is the same up to rounding (the solvers' sums of one
    allocation's terms differ in the last bits)."""
    values = a + b
    if max(values) - min(values) <= 1e-12 * max(abs(v) for v in values):
        return 1.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def compare_row(name: str, mine: list[dict], theirs: list[dict]) -> dict:
    om, ot = [r["objective"] for r in mine], [r["objective"] for r in theirs]
    half = len(theirs) // 2
    return {"problem": name, "jobs": len(mine[0]["gpus"]), "runs": [len(mine), len(theirs)],
            "objective_mean": [statistics.fmean(om), statistics.fmean(ot)],
            "objective_range": [[min(om), max(om)], [min(ot), max(ot)]],
            "welch_p": _welch(om, ot),
            "jobs_without_gpus": [statistics.fmean(r["gpus"].count(0) for r in runs) for runs in (mine, theirs)],
            "gpus_in_use": [statistics.fmean(sum(r["gpus"]) for r in runs) for runs in (mine, theirs)],
            "gpu_distance": _gpu_distance(mine, theirs),
            "gpu_distance_their_halves": _gpu_distance(theirs[:half], theirs[half:]) if half else None,
            "cpu_s": [statistics.fmean(r["cpu_s"] for r in runs) for runs in (mine, theirs)]}


def compare(out_dir: Path, survival: str, out: Path | None) -> None:
    mine, theirs = _runs(_ours_file(out_dir, survival)), _runs(out_dir / "theirs.jsonl")
    rows = [compare_row(n, mine[n], theirs[n]) for n in sorted(mine) if n in theirs]
    print("| problem | jobs | runs ours / theirs | power mean ours | theirs | Welch p | jobs without GPUs "
          "ours / theirs | GPUs in use | GPU distance (their halves) | CPU-s ours / theirs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        (a, b), (ra, rb) = r["objective_mean"], r["objective_range"]
        halves = "-" if r["gpu_distance_their_halves"] is None else f"{r['gpu_distance_their_halves']:.3f}"
        print(f"| {r['problem']} | {r['jobs']} | {r['runs'][0]} / {r['runs'][1]} | {a:.5f} [{ra[0]:.5f}, {ra[1]:.5f}] "
              f"| {b:.5f} [{rb[0]:.5f}, {rb[1]:.5f}] | {r['welch_p']:.2f} | {r['jobs_without_gpus'][0]:.1f} / "
              f"{r['jobs_without_gpus'][1]:.1f} | {r['gpus_in_use'][0]:.1f} / {r['gpus_in_use'][1]:.1f} | "
              f"{r['gpu_distance']:.3f} ({halves}) | {r['cpu_s'][0]:.2f} / {r['cpu_s'][1]:.2f} |")
    if out:
        out.write_text(json.dumps({"about": __doc__.splitlines()[0], "rows": rows}, indent=1) + "\n")


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi) + 1)) if hi else [int(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dir", type=Path)
    d.add_argument("--workload", type=Path, action="append", default=[],
                   help="a Sia workload CSV (under a folder named sia); repeatable")
    d.add_argument("--jobs", default="10,20,30")
    o = sub.add_parser("ours")
    o.add_argument("dir", type=Path)
    o.add_argument("--seeds", default="0-15", help="A-B or a comma list")
    o.add_argument("--rounds", type=int, default=2, help="rounds per seed, each from the last one's Pareto set")
    c = sub.add_parser("compare")
    c.add_argument("dir", type=Path)
    for sp in (o, c):
        sp.add_argument("--survival", default=pollux_search.SURVIVAL, choices=pollux_search.SURVIVALS,
                        help="NSGA-II's survival ties (pollux_search._survive)")
    c.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.step == "dump":
        if not args.workload:
            raise SystemExit("dump needs --workload (a Sia workload CSV)")
        dump(args.dir, args.workload, [int(x) for x in args.jobs.split(",")])
    elif args.step == "ours":
        ours(args.dir, _seeds(args.seeds), args.rounds, args.survival)
    else:
        compare(args.dir, args.survival, args.out)


if __name__ == "__main__":
    main()
