"""The Sia simulator's heterogeneity-unaware Pollux (``sia-pollux``; siasosp23/artifacts
``sia-simulator/multi_simulator_unaware.py --policy=pollux``: ``ClusterUnaware`` with
``PolluxPolicyUnaware``), the Pollux that the Sia paper compares against on its heterogeneous
cluster.

It is ``pollux`` (the same speedups, power mean, restart penalty and NSGA-II or dp search) with
what their unaware cluster changes around it:

* **virtual nodes**: the search allocates over nodes of the smallest node size (4 GPUs on
  ``sia-64``): each node of ``k`` times that size is ``k`` virtual nodes, in the Sia simulator's
  cluster order (:data:`~sim.policies.sia.SOURCE_ORDER`: aws/T4, dgx-ext/A100, rtx), nodes in
  id order within a type.  Interference avoidance (one distributed job per node) holds per
  virtual node;
* **drop to one type**: an allocation over several GPU types keeps only its majority type's GPUs
  (ties between the two largest: the stronger type, :data:`DROP_TIE_ORDER`, their
  ``fix_allocations_by_dropping`` priorities); the dropped GPUs stay idle for the round, and the
  dropped allocation is the next round's base (restarts are charged against it);
* **one online model per job over all types** (their ``Job(h_unaware=True)``: the configurations
  run on every type in one profile, the first time for a key counts): speedups and batch sizes
  are predicted with it, with the reference type's application limits
  (:attr:`reference_type`, their ``applications["aws"]``); a job without a model has
  ``S = r / fair``;
* **GPU cap** ``min(max(2 x most GPUs profiled, 1), G_min, M_max / b_min)``, ``G_min`` the
  smallest type's GPU count (their ``max_num_replicas``, 16 on ``sia-64``);
* **restarts** as their ``Cluster.optimize_policy``: a job restarts when it starts or resumes,
  changes type, or changes its GPUs-per-node tuple on the real nodes (virtual nodes of one node
  merged, node ids sorted); moved with the same tuple it does not
  (:mod:`sim.policies.peer_placement` maps this onto the engine).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..errors import ConfigError
from ..state import Plan, SchedState
from .peer_placement import PeerKey, PeerPlacer
from .pollux import RESTART_PENALTY_S, Pollux
from .pollux_search import GENERATIONS, POPULATION, PREV_MATCH, SURVIVAL
from .registry import register
from .sia import SOURCE_ORDER

#: a tie between the two largest GPU types of an allocation keeps the earlier of these (the Sia
#: simulator's ``prio_order``: dgx-ext, azure, quad, rtx, aws); unlisted types after, by name
DROP_TIE_ORDER = ("a100", "v100", "rtx6000", "rtx2080ti", "t4")


class VirtualNodes:
    """The search's nodes: each real node split into nodes of the smallest node size."""

    def __init__(self, node_gpus: np.ndarray, node_type: np.ndarray, types: tuple[str, ...]):
        size = int(node_gpus.min())
        if size <= 0 or np.any(node_gpus % size):
            raise ConfigError(f"policy sia-pollux: node sizes {sorted(set(node_gpus.tolist()))} are not "
                              f"multiples of the smallest ({size} GPUs): no virtual nodes")
        ranks = {t: (SOURCE_ORDER.index(n) if n in SOURCE_ORDER else len(SOURCE_ORDER), t)
                 for t, n in enumerate(types)}
        order = sorted(range(node_gpus.shape[0]), key=lambda n: (ranks[int(node_type[n])], n))
        self.node = np.repeat(np.array(order, np.int64), node_gpus[order] // size)
        self.gpus = np.full(self.node.shape[0], size, np.int64)
        self.type = node_type[self.node].astype(np.int64)


def drop_to_one_type(row: np.ndarray, vtype: np.ndarray, tie_rank: dict[int, int]) -> np.ndarray:
    """The allocation ``row`` (GPUs per virtual node) with only its majority type's GPUs; a tie
    between the two largest (in order of first use) goes to the lower ``tie_rank``."""
    used = np.flatnonzero(row)
    counts = Counter()
    for v in used:                              # insertion order: first virtual node of each type
        counts[int(vtype[v])] += int(row[v])
    if len(counts) <= 1:
        return row
    (first, n1), (second, n2) = counts.most_common(2)
    keep = second if n1 == n2 and tie_rank[second] < tie_rank[first] else first
    return np.where(vtype == keep, row, 0)


@register
class SiaPollux(Pollux):
    name = "sia-pollux"
    description = ("the Sia simulator's heterogeneity-unaware Pollux: virtual 4-GPU nodes, mixed "
                   "allocations dropped to their majority type, one online model per job")
    observed_models = True
    observed_across_types = True
    sia_batch_limits = True       # the Sia simulator's job model (update_local_bsz, Job.step), as sia
    sia_batch_timing = True

    def __init__(self, placement: str = "consolidated", search: str = "nsga2", population: int = POPULATION,
                 generations: int = GENERATIONS, seed: int = 0, restart_penalty_s: float = RESTART_PENALTY_S,
                 avoid_interference: bool = True, max_gpus: int | None = None, prev_match: str = PREV_MATCH,
                 survival: str = SURVIVAL):
        super().__init__(placement, search, population, generations, seed, restart_penalty_s,
                         avoid_interference, prev_match=prev_match, survival=survival)
        if max_gpus is not None and int(max_gpus) < 1:
            raise ConfigError(f"policy {self.name}: max_gpus must be >= 1, got {max_gpus}")
        self.max_gpus = None if max_gpus is None else int(max_gpus)

    def params(self) -> dict:
        return {**super().params(), "max_gpus": self.max_gpus}

    def reset(self, n_jobs: int) -> None:
        super().reset(n_jobs)
        self.vnodes: VirtualNodes | None = None
        self.vbase: dict[int, np.ndarray] = {}     # job -> last round's dropped allocation
        self.placer = PeerPlacer(self.name)
        self.dropped_gpus = 0                     # GPUs the drop rule left idle, summed over rounds

    def _layout(self, state: SchedState) -> VirtualNodes:
        if self.vnodes is None:
            c = state.cluster
            self.vnodes = VirtualNodes(c.node_gpus.astype(np.int64), c.node_type, tuple(c.gpu_types))
            names = list(c.gpu_types)
            self.tie_rank = {t: (DROP_TIE_ORDER.index(n) if n in DROP_TIE_ORDER else len(DROP_TIE_ORDER), n)
                             for t, n in enumerate(names)}
            present = [n for n in SOURCE_ORDER if n in names]
            self.reference_type = present[0] if present else names[0]
        return self.vnodes

    # -- the problem, as theirs ---------------------------------------------------
    def job_app(self, job: int):
        m = self.model
        return m.oracle.app(m.oracle_model(int(job)), self.reference_type)

    def job_thetas(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = self.model
        fits = [m.observed.theta(int(j), None) for j in ids]
        fresh = np.array([f is None for f in fits], bool)
        # a job without a model gets r / fair (Pollux.speedups); the profile's model only fills its row
        theta = [m.oracle.model_theta(m.oracle_model(int(j)), self.reference_type) if f is None else f
                 for j, f in zip(ids, fits)]
        return np.array(theta, float).reshape(len(fits), -1), fresh

    def most_run(self, j: int) -> int:
        return self.model.observed.most_gpus(j)

    def gpu_cap(self, state: SchedState) -> int:
        if self.max_gpus is not None:
            return self.max_gpus
        c = state.cluster
        return int(min(c.node_gpus[c.node_type == t].sum() for t in np.unique(c.node_type)))

    def search_nodes(self, state: SchedState) -> np.ndarray:
        return self._layout(state).gpus

    def base_allocation(self, state: SchedState, order: np.ndarray) -> np.ndarray:
        v = self._layout(state)
        zero = np.zeros(v.node.shape[0], np.int64)
        return np.array([self.vbase.get(int(j), zero) for j in state.active[order]],
                        np.int64).reshape(order.shape[0], v.node.shape[0])

    # -- their repair and mapping -------------------------------------------------------
    def plan(self, state: SchedState, order: np.ndarray, x: np.ndarray) -> Plan:
        v = self._layout(state)
        ids = state.active
        keys: dict[int, PeerKey] = {}
        self.vbase = {}
        for row, i in enumerate(order):
            kept = drop_to_one_type(x[row], v.type, self.tie_rank)
            self.dropped_gpus += int(x[row].sum() - kept.sum())
            if kept.any():
                self.vbase[int(ids[i])] = kept
                nodes = np.repeat(v.node, kept)
                keys[int(i)] = (int(v.type[np.flatnonzero(kept)[0]]), tuple(sorted(nodes.tolist())))
        return self.placer.place(state, dict(sorted(keys.items())), self.model)
