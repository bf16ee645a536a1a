"""plan_changes agrees with changed_jobs + placement_summary (its plain-array twin)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.placement import changed_jobs, placement_summary
from sim.plan_diff import plan_changes


@st.composite
def csr(draw, n, n_nodes):
    indptr = [0]
    nodes, counts = [], []
    for _ in range(n):
        chosen = sorted(draw(st.sets(st.integers(0, n_nodes - 1), max_size=3)))
        nodes += chosen
        counts += [draw(st.integers(1, 4)) for _ in chosen]
        indptr.append(len(nodes))
    return np.array(indptr, np.int64), np.array(nodes, np.int32), np.array(counts, np.int32)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_plan_changes_matches_twin(data):
    n = data.draw(st.integers(0, 8))
    n_nodes = data.draw(st.integers(1, 5))
    old = data.draw(csr(n, n_nodes))
    new = data.draw(st.one_of(st.just(old), csr(n, n_nodes)))
    force = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    node_type = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n_nodes, max_size=n_nodes)), np.int32)
    speed = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 1.2]), min_size=n_nodes,
                                        max_size=n_nodes)))
    idx, ip, nodes, counts, ngpu, nn, mask, ms = plan_changes(*old, *new, force, node_type, speed)
    placed = np.diff(new[0]) > 0
    want = np.flatnonzero(changed_jobs(*old, *new) | (force & placed))
    np.testing.assert_array_equal(idx, want)
    for j, i in enumerate(want):
        lo, hi = new[0][i], new[0][i + 1]
        np.testing.assert_array_equal(nodes[ip[j]:ip[j + 1]], new[1][lo:hi])
        np.testing.assert_array_equal(counts[ip[j]:ip[j + 1]], new[2][lo:hi])
    ref = placement_summary(ip, nodes, counts, node_type, speed)
    for got, exp in zip((ngpu, nn, mask, ms), ref):
        np.testing.assert_array_equal(got, exp)
