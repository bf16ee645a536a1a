"""Engine placements from a peer simulator's placement (the Sia simulator's ``sia`` and ``gavel``).

The Sia simulator places each job as a list of node ids, one per GPU, in the order its placer
took them.  A job restarts there (``Cluster.optimize_policy`` -> ``Job.reallocate``) when it
changes GPU type, starts or resumes, or when its GPUs-per-node tuple (:func:`node_shape`)
changes; a job that keeps its type and tuple on other nodes does not.  Our engine restarts a
job whenever its (node, GPUs) pairs change, so :class:`PeerPlacer` builds the engine placement
from theirs: jobs that do not restart keep their engine GPUs, the others get their nodes in
theirs if free there, else the same GPUs per node on best-fitting nodes of the type, else
(``shape_misses``, rare) the most free nodes' GPUs.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..errors import SimError
from ..state import Plan, SchedState
from .goodput_base import csr_plan, current_pairs

#: a job's placement in the peer: (GPU type, node id of each GPU in the peer's order)
PeerKey = tuple[int, tuple[int, ...]]


def node_shape(nodes: tuple[int, ...]) -> tuple[int, ...]:
    """GPUs per node in the peer's order, consecutive GPUs on one node grouped (theirs)."""
    out: list[int] = []
    for k, n in enumerate(nodes):
        if k and n == nodes[k - 1]:
            out[-1] += 1
        else:
            out.append(1)
    return tuple(out)


def peer_restarts(new: PeerKey, old: PeerKey | None) -> bool:
    """Does a job moving from peer placement ``old`` (None: it had none) to ``new`` restart?"""
    if new == old:
        return False
    return old is None or old[0] != new[0] or node_shape(old[1]) != node_shape(new[1])


class PeerPlacer:
    """Turns peer placements into engine plans, counting where the engine could not follow."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.shape_misses = 0     # a restarting job's GPUs per node fit nowhere on its type
        self.missed_restarts = 0  # a restarting job landed on exactly its current engine GPUs
        self.keys: dict[int, PeerKey] = {}   # job id -> its placement in the peer last round

    def place(self, state: SchedState, keys: dict[int, PeerKey], model=None) -> Plan:
        """:meth:`plan` for this round's peer placements ``keys`` (active index -> key, placed in
        that order), each job's restart judged against its key of the last call."""
        ids = state.active
        restart = np.zeros(ids.shape[0], bool)
        for i, key in keys.items():
            restart[i] = peer_restarts(key, self.keys.get(int(ids[i])))
        self.keys = {int(ids[i]): key for i, key in keys.items()}
        return self.plan(state, list(keys), keys, restart, model)

    def plan(self, state: SchedState, picks: list[int], keys: dict[int, PeerKey],
             restart: np.ndarray, model=None) -> Plan:
        """The engine plan: active jobs ``picks`` (indices into ``state.active``) placed as
        ``keys[i]`` in the peer; ``restart[i]`` says whether job ``i`` restarts there.  A
        restarting job's tuple in the peer's order goes to ``model`` (a JobModel:
        ``note_allocation_order``), whose step times read the profile row of that order."""
        per_job: list[list[tuple[int, int]]] = [[] for _ in range(state.active.shape[0])]
        free = state.cluster.node_gpus.astype(np.int64).copy()
        for i in picks:
            if not restart[i]:
                per_job[i] = current_pairs(state, i)
                for n, g in per_job[i]:
                    free[n] -= g
        for i in picks:
            if restart[i]:
                t, nodes = keys[i]
                per_job[i] = self._fit(state, t, sorted(Counter(nodes).items()), free)
                shape = node_shape(nodes)
                if model is not None and sorted(g for _, g in per_job[i]) == sorted(shape):
                    model.note_allocation_order(int(state.active[i]), shape)
                if per_job[i] == current_pairs(state, i):
                    self.missed_restarts += 1
        return csr_plan(per_job)

    def _fit(self, state: SchedState, t: int, want: list[tuple[int, int]],
             free: np.ndarray) -> list[tuple[int, int]]:
        """Their (node, GPUs) if free, else the same GPUs per node on best-fitting nodes of type
        ``t``, else (``shape_misses``) the most free nodes' GPUs; ``free`` is updated."""
        if all(free[n] >= g for n, g in want):
            out = want
        else:
            nodes = np.flatnonzero(state.cluster.node_type == t)
            out = best_fit(nodes, [g for _, g in want], free.copy())
            if out is None:
                self.shape_misses += 1
                out = self._most_free(nodes, sum(g for _, g in want), free.copy())
        for n, g in out:
            free[n] -= g
        return sorted(out)

    def _most_free(self, nodes: np.ndarray, want: int, free: np.ndarray) -> list[tuple[int, int]]:
        out: dict[int, int] = {}
        for n in sorted(nodes, key=lambda n: (-free[n], n)):
            take = min(int(free[n]), want)
            if take > 0:
                out[int(n)] = take
                want -= take
            if want == 0:
                return list(out.items())
        raise SimError(f"policy {self.policy}: {want} GPUs of a type's allocation found no free GPU")


def best_fit(nodes: np.ndarray, counts: list[int], free: np.ndarray) -> list[tuple[int, int]] | None:
    """Each count (largest first) on the node of ``nodes`` with the fewest free GPUs that holds
    it, a node used once; None if some count fits nowhere."""
    out, used = [], set()
    for g in sorted(counts, reverse=True):
        fits = [n for n in nodes if free[n] >= g and int(n) not in used]
        if not fits:
            return None
        n = int(min(fits, key=lambda n: (free[n], n)))
        used.add(n)
        free[n] -= g
        out.append((n, g))
    return out
