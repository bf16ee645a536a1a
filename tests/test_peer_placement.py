"""sim.policies.peer_placement: the Sia simulator's restart rule and its engine placements,
worked by hand."""
from types import SimpleNamespace

import numpy as np

from sim.cluster import cluster_from_groups
from sim.policies.peer_placement import PeerPlacer, node_shape, peer_restarts


def _state(pairs):
    """Active jobs 0..n-1 with current (node, GPUs) on three 4-GPU t4 nodes."""
    indptr = np.cumsum([0] + [len(p) for p in pairs]).astype(np.int64)
    flat = [x for p in pairs for x in p]
    return SimpleNamespace(cluster=cluster_from_groups("toy", [{"count": 3, "gpus": 4, "type": "t4"}]),
                           active=np.arange(len(pairs)),
                           pl_indptr=indptr, pl_nodes=np.array([n for n, _ in flat], np.int32),
                           pl_counts=np.array([c for _, c in flat], np.int32))


def _pairs(plan, i):
    lo, hi = plan.indptr[i], plan.indptr[i + 1]
    return list(zip(plan.nodes[lo:hi].tolist(), plan.counts[lo:hi].tolist()))


class _Notes:
    def __init__(self):
        self.seen = {}

    def note_allocation_order(self, job, counts):
        self.seen[job] = counts


def test_shape_and_restart_rule():
    assert node_shape((2, 2, 0, 1, 1, 1)) == (2, 1, 3)
    assert not peer_restarts((0, (1, 1)), (0, (1, 1)))
    assert not peer_restarts((0, (2, 2)), (0, (1, 1)))        # other node, same tuple
    assert peer_restarts((0, (1, 1)), None)                    # starts or resumes
    assert peer_restarts((1, (1, 1)), (0, (1, 1)))             # other type
    assert peer_restarts((0, (0, 1, 1)), (0, (1, 1, 0)))       # (1, 2) vs (2, 1): order counts


def test_kept_jobs_keep_engine_gpus_restarting_ones_take_theirs_or_the_best_fit():
    # Job 0 keeps (no restart) its engine GPUs on node 2, though theirs is now on node 0.
    # Job 1 restarts onto theirs, node 0 x 2 + node 1 x 2 (free in ours).  Job 2 restarts onto
    # node 2 x 4 in theirs, but node 2 holds job 0: the same tuple (4,) fits nowhere whole (node
    # 0 and 1 have 2 free each) -> the most free nodes' GPUs, a shape miss.
    placer, notes = PeerPlacer("toy"), _Notes()
    state = _state([[(2, 2)], [], []])
    keys = {0: (0, (0, 0)), 1: (0, (0, 0, 1, 1)), 2: (0, (2, 2, 2, 2))}
    plan = placer.plan(state, [0, 1, 2], keys, np.array([False, True, True]), notes)
    assert _pairs(plan, 0) == [(2, 2)]
    assert _pairs(plan, 1) == [(0, 2), (1, 2)]
    assert _pairs(plan, 2) == [(0, 2), (1, 2)] and placer.shape_misses == 1
    # job 1's tuple in their order is noted; job 2's engine GPUs are not its tuple: no note
    assert notes.seen == {1: (2, 2)}


def test_best_fit_keeps_the_tuple_on_the_fullest_node_that_holds_it():
    # theirs: job 1 on node 0 x 2; node 0 is taken by job 0 (kept, 4 GPUs); nodes 1 (1 used by
    # job 2, kept) and 2 (empty) both hold 2: the fuller one, node 1, is chosen.
    placer = PeerPlacer("toy")
    state = _state([[(0, 4)], [], [(1, 1)]])
    keys = {0: (0, (0,) * 4), 1: (0, (0, 0)), 2: (0, (1,))}
    plan = placer.plan(state, [0, 1, 2], keys, np.array([False, True, False]))
    assert _pairs(plan, 1) == [(1, 2)] and placer.shape_misses == 0
