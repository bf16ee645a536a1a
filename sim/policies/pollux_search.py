"""Pollux's allocation search (algorithms.md §5.5; petuum/adaptdl ``simulator/pollux.py``).

A candidate allocation is a matrix ``X[j, n]`` of GPUs of job ``j`` on node ``n``.  Its value
(:class:`PolluxProblem`) is the power mean, ``p`` = :data:`FITNESS_P` = -1, of the jobs' scaled
speedups ``S_j(nodes, GPUs) * N / G`` (``N`` nodes, ``G`` GPUs; the speedup table is relative to
the job's goodput at a fair share), each multiplied by the restart factor
``max(age - restarts * delay, 0) / (age + delay)`` when its row differs from the current
allocation; the second objective is the cluster utility ``sum_j S_j / (GPUs of the nodes in
use)``.

Two searches:

* :func:`nsga2`: the authors' genetic search - NSGA-II (binary tournament on domination then
  crowding, rank-and-crowding survival, duplicate elimination) with their operators: single-point
  crossover over jobs; mutation that resets a job to its current allocation (p 0.1), zeroes
  entries (p 0.1 of jobs, then 0.1 per entry) and raises entries on nodes with room; repair that
  keeps one distributed job per node (their interference avoidance; ``avoid_interference``),
  caps GPUs per job and nodes per job
  (:data:`MAX_NODES_PER_JOB`), and node capacity in job order.  Population and generations
  default to theirs (100, 100); the population is seeded with the previous round's Pareto set
  (rows carried over by position among the jobs still active, as theirs; ``prev_match="job"``
  matches them by job) or the current allocation; the answer is the Pareto member of best mean.
  ``survival="pymoo"`` breaks the survival's ties as pymoo 0.4.2.1 does (a repeated objective
  vector gets crowding 0, a zero-span objective adds nothing, equal crowding split at random);
  the default ``"stable"`` (ties by row order) is the rule every committed run was made with.
  The operators' arithmetic (repair, mutation's resets and probabilities, the tournament) and
  the survival's non-domination ranks and crowding distances run in Numba kernels
  (:mod:`.pollux_kernels`); the random draws stay with numpy's Generator, the same draws in the
  same order as the authors' numpy expressions.
* :func:`dp_search` (ours): the best GPU count per job by dynamic programming over jobs and
  GPUs (a knapsack: the power mean with ``p = -1`` is a sum of ``1 / (s + 1e-3)`` to minimise),
  each job either keeping its allocation or taking ``r`` GPUs packed on ``ceil(r / per_node)``
  nodes with its restart factor; then a placement (kept jobs stay, others fill whole free nodes
  first, then best fit, one distributed job per node) and, if placement had to shrink a job,
  the same with only sizes that tile nodes (1, 2, 4, 8, ... on 4-GPU nodes), then
  a short NSGA-II (:data:`POLISH`) seeded with those and the current allocation, which mends what
  the packing assumption misses (fragmented nodes).  The DP is exact on the counts, O(jobs x GPUs
  x GPU counts tried) in a Numba kernel (:mod:`.pollux_kernels`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .pollux_kernels import dp_counts, mutation_base, repair_states, survival_keys, tournament_pick

__all__ = ["PolluxProblem", "PolluxSearch", "nsga2", "dp_search", "restart_factor", "FITNESS_P", "FITNESS_EPS",
           "MAX_NODES_PER_JOB", "POPULATION", "GENERATIONS", "SEARCHES", "PREV_MATCHES", "PREV_MATCH",
           "SURVIVALS", "SURVIVAL", "prev_rows"]

FITNESS_P = -1.0          #: power-mean exponent (Pollux)
FITNESS_EPS = 1e-3        #: added to each scaled speedup before the power mean (Pollux)
MAX_NODES_PER_JOB = 16    #: the authors' repair: at most 16 nodes per job
POPULATION = 100          #: the authors' pop_size
GENERATIONS = 100         #: the authors' n_gen
MUTATE_RESET_P = 0.1      #: mutation: reset a job's row to the current allocation
MUTATE_ZERO_JOB_P = 0.1   #: mutation: pick a job whose entries may be zeroed ...
MUTATE_ZERO_P = 0.1       #: ... each with this probability
MAX_MATING_TRIES = 101    #: rounds of mating to find distinct offspring (pymoo's: it stops after the 101st)
CROSSOVER_P = 0.9         #: a mating crosses its parents with this probability, else copies them (pymoo 0.4.2.1)
POLISH = (20, 10)         #: our search: population and generations of the NSGA-II polish
SURVIVALS = ("stable", "pymoo")  #: NSGA-II's survival ties (:func:`_survive`)
SURVIVAL = "stable"       #: the default: every committed run was made with it
SEARCHES = ("nsga2", "dp")
#: how NSGA-II's seeds carry last round's Pareto set over to this round's rows: ``"position"``,
#: the authors' ``_adapt_prev_states`` in both artifacts (the k-th job of last round that is
#: still active gets the row of the k-th such job in this round's order, so rows move between
#: jobs when the attained-service order changes), or ``"job"`` (ours: each job its own row)
PREV_MATCHES = ("position", "job")
PREV_MATCH = "position"   #: the default: the authors' NSGA-II seeds as theirs do


def restart_factor(age: np.ndarray, restarts: np.ndarray, delay: float) -> np.ndarray:
    """Pollux's restart factor ``max(age - restarts delay, 0) / (age + delay)``."""
    return np.maximum(age - np.maximum(restarts, 0) * delay, 0.0) / (age + delay)


@dataclass
class PolluxProblem:
    """One round's search problem; see the module docstring."""

    speedup: np.ndarray       # [J, Nmax + 1, Rmax + 1] speedup tables (0 at 0 GPUs)
    base: np.ndarray          # [J, N] current allocation
    capacity: np.ndarray      # [N] GPUs per node
    max_replicas: np.ndarray  # [J]
    restart_factor: np.ndarray  # [J]
    #: [J, N] nodes each job may use (GPU types it can run on), or None: every node
    allowed: np.ndarray | None = None
    #: the authors' interference avoidance: at most one distributed job per node (False: their
    #: Fig. 8c variant with the repair's lines 387-390 commented out)
    avoid_interference: bool = True

    def __post_init__(self):
        self.scale = self.base.shape[1] / float(self.capacity.sum())
        self.jidx = np.arange(self.base.shape[0])
        self._base = np.ascontiguousarray(self.base, np.int64)             # the kernels' inputs
        self._capacity = np.ascontiguousarray(self.capacity, np.int64)
        self._max_replicas = np.ascontiguousarray(self.max_replicas, np.int64)

    def speedups(self, states: np.ndarray) -> np.ndarray:
        n = np.minimum(np.count_nonzero(states, axis=2), self.speedup.shape[1] - 1)
        r = np.minimum(states.sum(axis=2), self.speedup.shape[2] - 1)
        return self.speedup[self.jidx[None, :], n, r]

    def values(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(power mean, cluster utility) of each state ``[P, J, N]``."""
        sp = self.speedups(states)
        scaled = sp * self.scale
        moved = np.any(states != self.base[None], axis=2)
        scaled = scaled * np.where(moved, self.restart_factor[None, :], 1.0)
        if states.shape[1] == 0:
            return np.zeros(states.shape[0]), np.zeros(states.shape[0])
        mean = np.mean((scaled + FITNESS_EPS) ** FITNESS_P, axis=1) ** (1.0 / FITNESS_P)
        in_use = (np.any(states > 0, axis=1) * self.capacity[None]).sum(axis=1)
        util = np.where(in_use > 0, sp.sum(axis=1) / np.maximum(in_use, 1), 0.0)
        return mean, util

    # -- the authors' operators ----------------------------------------------
    def repair(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        s = states.copy() if self.allowed is None else np.where(self.allowed[None], states, 0)
        shuffle = rng.random(s.shape)
        return repair_states(np.ascontiguousarray(s, np.int64), shuffle, self._max_replicas,
                             self._capacity, MAX_NODES_PER_JOB, self.avoid_interference)

    def mutate(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p, j, _ = states.shape
        reset, zero_job = rng.random((p, j)), rng.random((p, j))
        s, prob = mutation_base(np.ascontiguousarray(states, np.int64), self._base, self._capacity, reset,
                                zero_job, rng.random(states.shape), MUTATE_RESET_P, MUTATE_ZERO_JOB_P,
                                MUTATE_ZERO_P)
        m = rng.random(s.shape) < prob
        high = np.broadcast_to(self.capacity[None, None, :] + 1, s.shape)
        r = rng.integers(np.minimum(s, high - 1), high)
        return np.where(m, r, s)

    def crossover(self, a: np.ndarray, b: np.ndarray, rng: np.random.Generator):
        cut = np.arange(a.shape[1])[None, :] < rng.integers(a.shape[1], size=(a.shape[0], 1))
        return np.where(cut[:, :, None], b, a), np.where(cut[:, :, None], a, b)


# -- NSGA-II -----------------------------------------------------------------
def _survive(f: np.ndarray, size: int, survival: str = SURVIVAL,
             rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``size`` survivors of the rows of ``f`` (rank first, then crowding, descending) and
    their keys.  ``survival`` (:data:`SURVIVALS`): ``"stable"`` breaks equal crowding in the
    front that does not fit whole by row order; ``"pymoo"`` is pymoo 0.4.2.1's
    ``RankAndCrowdingSurvival``: its crowding distances (a repeated objective vector gets 0, a
    zero-span objective adds nothing, not even at its ends) and equal crowding split at random
    (``rng``)."""
    pymoo = survival == "pymoo"
    rank, crowd = survival_keys(np.ascontiguousarray(f, np.float64), pymoo)
    if not pymoo:
        order = np.lexsort((-crowd, rank))[:size]
        return order, rank[order], crowd[order]
    whole = np.flatnonzero(np.cumsum(np.bincount(rank)) <= size).size  # fronts that fit whole
    order = np.flatnonzero(rank < whole)
    split = np.flatnonzero(rank == whole)
    if order.size < size and split.size:
        shuffled = split[rng.permutation(split.size)]
        best = shuffled[np.argsort(-crowd[shuffled], kind="stable")]
        order = np.concatenate([order, best[:size - order.size]])
    return order, rank[order], crowd[order]


def _tournament(rank, crowd, f, n: int, rng) -> np.ndarray:
    """``n`` binary-tournament winners, as pymoo 0.4.2.1's ``TournamentSelection``: the
    competitors are consecutive pairs of random permutations of the population, concatenated (so
    every member competes about equally often)."""
    m = rank.shape[0]
    perm = np.concatenate([rng.permutation(m) for _ in range(-(-2 * n // m))])[:2 * n]
    return tournament_pick(perm[0::2], perm[1::2], rng.random(n), crowd, f)


def _mate(problem: PolluxProblem, pop, rank, crowd, f, n_pairs: int, rng) -> np.ndarray:
    """``2 n_pairs`` offspring, mutated and repaired: parents paired in winning order, crossed
    with probability :data:`CROSSOVER_P`, else copied (pymoo's ``Mating`` and ``Crossover``)."""
    win = _tournament(rank, crowd, f, 2 * n_pairs, rng)
    pa, pb = win[0::2], win[1::2]
    c1, c2 = problem.crossover(pop[pa], pop[pb], rng)
    copy = rng.random(n_pairs) >= CROSSOVER_P
    c1[copy], c2[copy] = pop[pa[copy]], pop[pb[copy]]
    return problem.repair(problem.mutate(np.concatenate([c1, c2]), rng), rng)


def _objectives(problem: PolluxProblem, states: np.ndarray) -> np.ndarray:
    mean, util = problem.values(states)
    return np.column_stack([-mean, -util])


def _row_keys(states: np.ndarray) -> list[bytes]:
    """Each state's bytes (its ``tobytes()``), sliced from one copy of the whole array."""
    flat = np.ascontiguousarray(states).tobytes()
    w = states[0].nbytes if states.shape[0] else 0
    return [flat[i * w:(i + 1) * w] for i in range(states.shape[0])]


def _unique_new(cand: np.ndarray, seen: set) -> list[int]:
    out = []
    for i, key in enumerate(_row_keys(cand)):
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def nsga2(problem: PolluxProblem, init: np.ndarray, rng: np.random.Generator,
          population: int = POPULATION, generations: int = GENERATIONS, survival: str = SURVIVAL):
    """The authors' NSGA-II (pymoo 0.4.2.1's, with their operators); returns (Pareto states
    [K, J, N], their objectives [K, 2]).  Offspring that repeat the population or each other are
    dropped and re-mated, up to :data:`MAX_MATING_TRIES` times a generation; a generation without
    any new offspring ends the search (pymoo's forced termination).  ``survival``: how equal
    crowding is broken (:func:`_survive`)."""
    pop = problem.repair(init, rng)
    pop = pop[_unique_new(pop, set())]
    f = _objectives(problem, pop)
    keep, rank, crowd = _survive(f, population, survival, rng)
    pop, f = pop[keep], f[keep]
    for _ in range(generations - 1):
        kids = []
        n_kids = 0
        seen = set(_row_keys(pop))
        for _try in range(MAX_MATING_TRIES):
            cand = _mate(problem, pop, rank, crowd, f, -(-(population - n_kids) // 2), rng)
            new = cand[_unique_new(cand, seen)]
            kids.append(new)
            n_kids += new.shape[0]
            if n_kids >= population:
                break
        if n_kids == 0:
            break
        off = np.concatenate(kids)[:population]
        merged = np.concatenate([pop, off])
        fm = np.concatenate([f, _objectives(problem, off)])
        keep, rank, crowd = _survive(fm, population, survival, rng)
        pop, f = merged[keep], fm[keep]
    best = rank == 0
    return pop[best], f[best]


# -- our search ----------------------------------------------------------------
def _job_values(problem: PolluxProblem, per_node: int, budget: int) -> np.ndarray:
    """v[j, r]: 1 / (scaled speedup + eps) of job j with r GPUs packed and restarted."""
    r = np.arange(budget + 1)
    n = np.minimum(-(-r // per_node), problem.speedup.shape[1] - 1)
    rr = np.minimum(r, problem.speedup.shape[2] - 1)
    sp = problem.speedup[:, n, rr] * problem.scale * problem.restart_factor[:, None]
    sp = np.where(r[None, :] <= problem.max_replicas[:, None], sp, -1.0)
    return np.where(sp >= 0, 1.0 / (np.maximum(sp, 0.0) + FITNESS_EPS), np.inf)


def _dp_counts(problem: PolluxProblem, per_node: int, packable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """GPUs per job (and whether it keeps its allocation) minimising sum 1/(s + eps); with
    ``packable``, new allocations only of sizes that tile nodes (divisors and multiples of
    ``per_node``), so that the placement never has to split a job."""
    g = int(problem.capacity.sum())
    base_r = problem.base.sum(axis=1)
    # no job takes more than max(its cap, what it holds): the DP's columns stop there
    width = min(g, int(max(problem.max_replicas.max(initial=0), base_r.max(initial=0))))
    v = _job_values(problem, per_node, width)                              # [J, width + 1]
    if packable:
        r = np.arange(width + 1)
        tiles = (r == 0) | ((r <= per_node) & (per_node % np.maximum(r, 1) == 0)) | (r % per_node == 0)
        v[:, ~tiles] = np.inf
    base_n = np.count_nonzero(problem.base, axis=1)
    keep_v = 1.0 / (problem.speedup[problem.jidx, np.minimum(base_n, problem.speedup.shape[1] - 1),
                                    np.minimum(base_r, problem.speedup.shape[2] - 1)] * problem.scale
                    + FITNESS_EPS)
    keep_better = keep_v <= v[problem.jidx, base_r]
    v[problem.jidx, base_r] = np.minimum(v[problem.jidx, base_r], keep_v)
    counts = dp_counts(v, g)
    keep = (counts == base_r) & keep_better
    return counts, keep


def _place(problem: PolluxProblem, counts: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """A placement of the counts: kept jobs stay, the others (largest first) fill whole free nodes,
    then the best-fitting node, at most one distributed job per node (unless the problem does not
    avoid interference); shrinks what does not fit."""
    x = np.where(keep[:, None], problem.base, 0)
    free = problem.capacity - x.sum(axis=0)
    dist_on = np.any(x[np.count_nonzero(x, axis=1) > 1] > 0, axis=0) & problem.avoid_interference
    allowed = problem.allowed
    for k in np.argsort(-counts, kind="stable"):
        need = int(counts[k]) if not keep[k] else 0
        if need <= 0:
            continue
        usable = free if allowed is None else np.where(allowed[k], free, 0)
        fit = np.flatnonzero(usable >= need)
        if fit.size:
            node = fit[np.argmin(free[fit])]
            x[k, node], free[node] = need, free[node] - need
            continue
        ok = np.flatnonzero((usable > 0) & ~dist_on)
        ok = ok[np.argsort(-free[ok], kind="stable")][:MAX_NODES_PER_JOB]
        take = np.minimum(free[ok], np.maximum(need - np.concatenate([[0], np.cumsum(free[ok])[:-1]]), 0))
        take = take[take > 0]
        nodes = ok[:take.shape[0]]
        x[k, nodes] = take
        free[nodes] -= take
        if nodes.shape[0] > 1 and problem.avoid_interference:
            dist_on[nodes] = True
    return x


def dp_search(problem: PolluxProblem, per_node: int, rng: np.random.Generator | None = None,
              polish: tuple[int, int] = POLISH, survival: str = SURVIVAL) -> np.ndarray:
    """Our search (module docstring); returns one state [J, N].  The DP's answer, its placement
    and the current allocation seed a short NSGA-II (``polish`` = (population, generations);
    (0, 0) skips it) that repairs what the packing assumption missed."""
    rng = rng if rng is not None else np.random.default_rng(0)
    xs = [_place(problem, *_dp_counts(problem, per_node, packable)) for packable in (False, True)]
    cands = np.stack(xs + [problem.repair(problem.base[None], rng)[0]])
    if polish[0] > 0 and polish[1] > 0:
        states, _ = nsga2(problem, cands, rng, polish[0], polish[1], survival)
        cands = np.concatenate([cands, states])
    return cands[int(np.argmax(problem.values(cands)[0]))]


class PolluxSearch:
    """One run's allocation search: ``search`` (:data:`SEARCHES`), its parameters, its random
    generator (seeded with ``seed`` at :meth:`reset`) and NSGA-II's memory of the last round's
    Pareto set.  ``polish=False`` skips the dp search's NSGA-II polish: the DP's placements and
    the current allocation only (on the EGHS workloads at 64 nodes, seed 0, the polish raised
    the objective in 3 of 2,582 and 3 of 2,145 rounds, main and contended, by 0.46% and 1.8% on
    average where it did, and was 98% of the search's time: scalability/pollux_polish.py,
    docs/eghs.md section 4).  Shared by the policies that run Pollux's round (``pollux``,
    ``pollux-learning``)."""

    def __init__(self, policy: str, search: str = "nsga2", population: int = POPULATION,
                 generations: int = GENERATIONS, seed: int = 0, polish: bool = True, prev_match: str = PREV_MATCH,
                 survival: str = SURVIVAL):
        if search not in SEARCHES:
            raise ConfigError(f"policy {policy}: search must be one of {SEARCHES}, got {search!r}")
        if prev_match not in PREV_MATCHES:
            raise ConfigError(f"policy {policy}: prev_match must be one of {PREV_MATCHES}, got {prev_match!r}")
        if survival not in SURVIVALS:
            raise ConfigError(f"policy {policy}: survival must be one of {SURVIVALS}, got {survival!r}")
        self.survival = survival
        self.search, self.population, self.generations = search, int(population), int(generations)
        self.seed, self.polish, self.prev_match = int(seed), bool(polish), prev_match
        self.reset()

    def params(self) -> dict:
        return {"search": self.search, "population": self.population, "generations": self.generations,
                "seed": self.seed, "polish": self.polish, "prev_match": self.prev_match,
                "survival": self.survival}

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.prev_states: np.ndarray | None = None    # [K, J_prev, N] last Pareto set
        self.prev_jobs = np.zeros(0, np.int64)

    def solve(self, problem: PolluxProblem, ids: np.ndarray, per_node: int) -> np.ndarray:
        """The chosen allocation ``[J, N]`` of the jobs ``ids`` (the problem's rows)."""
        if self.search == "dp":
            return dp_search(problem, per_node, self.rng, POLISH if self.polish else (0, 0), self.survival)
        states, f = nsga2(problem, self._seed_states(ids, problem), self.rng, self.population,
                          self.generations, self.survival)
        self.prev_states, self.prev_jobs = states, ids
        return states[int(np.argmin(f[:, 0]))]

    def _seed_states(self, ids: np.ndarray, problem: PolluxProblem) -> np.ndarray:
        """The previous Pareto set with rows carried over by :attr:`prev_match` (new jobs
        empty), or, in the first round, the current allocation (the authors'
        ``_adapt_prev_states``)."""
        if self.prev_states is None:
            return problem.base[None].copy()
        out = np.zeros((self.prev_states.shape[0], *problem.base.shape), np.int64)
        dst, src = prev_rows(self.prev_jobs, ids, self.prev_match)
        out[:, dst] = self.prev_states[:, src]
        return out


def prev_rows(prev_ids: np.ndarray, ids: np.ndarray, match: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows of ``ids``, rows of ``prev_ids``) that seed each other: the jobs in both, paired by
    job (``match="job"``) or by rank among them in each order (``"position"``, the authors')."""
    prev = np.asarray(prev_ids, np.int64)
    cur = np.asarray(ids, np.int64)
    dst = np.flatnonzero(np.isin(cur, prev))
    if match == "position":
        return dst, np.flatnonzero(np.isin(prev, cur))
    where = {int(j): k for k, j in enumerate(prev)}
    return dst, np.array([where[int(j)] for j in cur[dst]], np.int64)


def current_allocation(state, order: np.ndarray) -> np.ndarray:
    """``[J, N]`` GPUs of the active jobs ``order`` (rows in that order) on each node now."""
    base = np.zeros((order.shape[0], state.cluster.node_gpus.shape[0]), np.int64)
    for row, i in enumerate(order):
        s = slice(int(state.pl_indptr[i]), int(state.pl_indptr[i + 1]))
        np.add.at(base[row], state.pl_nodes[s], state.pl_counts[s])
    return base


def allocation_pairs(x: np.ndarray, order: np.ndarray) -> list[list[tuple[int, int]]]:
    """Each active job's (node, GPUs) pairs from an allocation ``x`` whose rows are ``order``."""
    per_job: list[list[tuple[int, int]]] = [[] for _ in range(order.shape[0])]
    for row, i in enumerate(order):
        nz = np.flatnonzero(x[row])
        per_job[i] = [(int(n), int(x[row, n])) for n in nz]
    return per_job
