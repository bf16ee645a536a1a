"""Placement kernels (Numba): turn per-job GPU counts into node placements.

Placements are CSR arrays aligned with a list of jobs: job i holds
``counts[indptr[i]:indptr[i+1]]`` GPUs on nodes ``nodes[indptr[i]:indptr[i+1]]``
(nodes strictly increasing).  Every kernel has a plain-Python twin in
tests/reference_placement.py that the property tests hold it to.

**One GPU type per job.**  A job's GPUs always come from one GPU type, among the types it
may use (``allowed``: a bit mask per job; the engine allows a type where the job's
throughput at its request is > 0, so no job is ever placed where it cannot run).  Mixing
types is a policy's explicit choice through its own placement (SMJP), never the placer's.

**Type choice** (:data:`TYPE_CHOICES`, ``EngineConfig.type_choice``): among the allowed
types with room, the one with the smallest key (ties: lowest type index), where "room" is
tiered: first the types whose free GPUs (after the jobs placed before it) hold the request,
then (preemptive selection only) the types whose budget does, that is, whose GPUs held by
lower-priority jobs would be preempted.  Keys, per job and type (:func:`type_keys`):

- ``first-fit`` (default): the index of the type's first node (cluster order; ``gavel-108``:
  v100, p100, k80): the old first fit by node order, restricted to one type;
- ``fastest``: minus the job's throughput on the type (Gavel's ``_perf`` variants);
- ``random``: a hash of (seed, job, decision time, type), uniform among the candidates and
  the same for the same seed (Gavel's agnostic policies draw a type among those with room).

Within the chosen type (``mode``):
- ``CONSOLIDATED`` (0): first fit on a single node of the type (lowest index with enough
  free GPUs); otherwise the fewest nodes of the type, most free GPUs first (ties: lowest index).
- ``SPREAD`` (1): one GPU per node round robin over the type's nodes with free GPUs, most
  free first (ties: lowest index), until the request is met.
"""
from __future__ import annotations

import numpy as np
from numba import njit

CONSOLIDATED = 0
SPREAD = 1
PLACEMENT_MODES = {"consolidated": CONSOLIDATED, "spread": SPREAD}
#: type choice rules (see the module docstring); the C kernel uses the same codes
TYPE_CHOICES = {"first-fit": 0, "fastest": 1, "random": 2}
DEFAULT_TYPE_CHOICE = "first-fit"

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 arrays (wrapping arithmetic; csrc/sk_native.c mix64)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def random_type_keys(seed: int, jobs: np.ndarray, now: float, n_types: int) -> np.ndarray:
    """float64 [len(jobs), n_types]: the ``random`` rule's keys, hash(seed, job, now, type)
    >> 11 (exact in a double)."""
    s = _splitmix64(np.array([int(seed) & 0xFFFFFFFFFFFFFFFF], np.uint64))
    h = _splitmix64(s ^ np.asarray(jobs, np.int64).astype(np.uint64))
    h = _splitmix64(h ^ np.array([now], np.float64).view(np.uint64))
    h = _splitmix64(h[:, None] ^ np.arange(n_types, dtype=np.uint64)[None, :])
    return (h >> np.uint64(11)).astype(np.float64)


def first_node_of_type(node_type: np.ndarray, n_types: int) -> np.ndarray:
    """float64 [n_types]: index of each type's first node (n_nodes if it has none)."""
    node_type = np.asarray(node_type)
    out = np.full(n_types, float(node_type.shape[0]))
    for t in range(n_types):
        hit = np.flatnonzero(node_type == t)
        if hit.size:
            out[t] = float(hit[0])
    return out


def type_keys(rule: str, node_type: np.ndarray, n_types: int, jobs: np.ndarray,
              rates: np.ndarray | None, now: float = 0.0, seed: int = 0) -> np.ndarray:
    """float64 [len(jobs), n_types]: the type choice keys of ``rule`` (smallest chosen).
    ``rates``: [len(jobs), n_types] throughputs (needed by ``fastest``)."""
    if rule not in TYPE_CHOICES:
        from .errors import ConfigError
        raise ConfigError(f"unknown type_choice {rule!r}; choose from {sorted(TYPE_CHOICES)}")
    n = np.asarray(jobs).shape[0]
    if rule == "fastest":
        return -np.asarray(rates, np.float64).reshape(n, n_types)
    if rule == "random":
        return random_type_keys(seed, jobs, now, n_types)
    return np.tile(first_node_of_type(node_type, n_types), (n, 1))


def type_inputs(state) -> tuple[np.ndarray, np.ndarray]:
    """(allowed masks, type keys) of a SchedState's active jobs: allowed where the job's
    throughput on the type (``jobs.type_rates``, else ``state.type_throughputs``) is > 0,
    keys of ``state.type_choice`` (seed ``state.type_seed``)."""
    c = state.cluster
    n_types = len(c.gpu_types)
    table = getattr(state.jobs, "type_rates", None)
    if table is not None:
        rates = table[state.active]
    elif state.oracle is not None:
        rates = state.type_throughputs
    else:
        rates = np.ones((state.active.shape[0], n_types))
    keys = type_keys(state.type_choice, c.node_type, n_types, state.active, rates, state.now,
                     state.type_seed)
    return allowed_masks(rates), np.ascontiguousarray(keys, np.float64)


def type_room(state) -> np.ndarray:
    """int64 per active job: the GPUs of the largest type it may use (elastic policies size
    jobs within it, since a job never spans types)."""
    allowed, _ = type_inputs(state)
    c = state.cluster
    cap = np.bincount(c.node_type, weights=c.node_gpus, minlength=len(c.gpu_types)).astype(np.int64)
    bits = (allowed[:, None] >> np.arange(cap.size, dtype=np.int64)[None, :]) & 1
    return (bits * cap[None, :]).max(axis=1, initial=0)


def allowed_masks(rates: np.ndarray) -> np.ndarray:
    """int64 per job: bit t set where its throughput on type t is > 0."""
    rates = np.asarray(rates, np.float64)
    bits = np.left_shift(np.int64(1), np.arange(rates.shape[1], dtype=np.int64))
    return ((rates > 0) * bits[None, :]).sum(axis=1).astype(np.int64)


@njit(cache=True)
def choose_type(allowed, key, tfree, tbudget, want):
    """The type a job of ``want`` GPUs takes: allowed, room in ``tfree`` (tier 0) else in
    ``tbudget`` (tier 1); smallest key within the best tier, ties lowest type; -1 if none."""
    best = -1
    best_tier = 2
    for t in range(key.shape[0]):
        if (allowed >> t) & 1 == 0:
            continue
        if tfree[t] >= want:
            tier = 0
        elif tbudget[t] >= want:
            tier = 1
        else:
            continue
        if best < 0 or tier < best_tier or (tier == best_tier and key[t] < key[best]):
            best = t
            best_tier = tier
    return best


@njit(cache=True)
def _nodes_by_free(free, node_type, only_type):
    """Node indices with free GPUs (of one type if only_type >= 0), most free first."""
    n = free.shape[0]
    keys = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if free[i] > 0 and (only_type < 0 or node_type[i] == only_type):
            keys[m] = -np.int64(free[i]) * n + i
            m += 1
    keys = np.sort(keys[:m])
    out = np.empty(m, np.int64)
    for k in range(m):
        out[k] = keys[k] % n if keys[k] % n >= 0 else keys[k] % n + n
    return out


@njit(cache=True)
def _take(free, order, want, out_nodes, out_counts):
    """Take GPUs greedily from nodes in `order`; returns the number of entries."""
    need = want
    m = 0
    for k in range(order.shape[0]):
        if need == 0:
            break
        i = order[k]
        g = min(free[i], need)
        if g > 0:
            out_nodes[m] = i
            out_counts[m] = g
            need -= g
            m += 1
    return m


@njit(cache=True)
def _sort_entries(nodes, counts, m):
    idx = np.argsort(nodes[:m])
    return nodes[:m][idx].copy(), counts[:m][idx].copy()


@njit(cache=True)
def type_free(free, node_type, n_types):
    out = np.zeros(n_types, np.int64)
    for i in range(free.shape[0]):
        out[node_type[i]] += free[i]
    return out


@njit(cache=True)
def place_in_type(free, node_type, t, want, mode):
    """Place `want` GPUs of type `t` into `free` (updated in place).  Returns (nodes,
    counts), empty if the type lacks room."""
    empty = (np.empty(0, np.int32), np.empty(0, np.int32))
    if want <= 0 or t < 0:
        return empty
    room = 0
    for i in range(free.shape[0]):
        if node_type[i] == t:
            room += free[i]
    if room < want:
        return empty
    nodes = np.empty(want, np.int32)
    counts = np.empty(want, np.int32)
    if mode == SPREAD:
        order = _nodes_by_free(free, node_type, t)
        left = free.copy()
        taken = np.zeros(free.shape[0], np.int32)
        need = want
        while need > 0:
            for k in range(order.shape[0]):
                i = order[k]
                if need > 0 and left[i] > 0:
                    left[i] -= 1
                    taken[i] += 1
                    need -= 1
        m = 0
        for i in range(free.shape[0]):
            if taken[i] > 0:
                nodes[m] = i
                counts[m] = taken[i]
                free[i] -= taken[i]
                m += 1
        return nodes[:m].copy(), counts[:m].copy()
    for i in range(free.shape[0]):          # single node of the type, first fit
        if node_type[i] == t and free[i] >= want:
            free[i] -= want
            nodes[0] = i
            counts[0] = want
            return nodes[:1].copy(), counts[:1].copy()
    order = _nodes_by_free(free, node_type, t)
    m = _take(free, order, want, nodes, counts)
    for k in range(m):
        free[nodes[k]] -= counts[k]
    return _sort_entries(nodes, counts, m)


@njit(cache=True)
def place_one(free, node_type, n_types, want, mode, allowed, key):
    """Place `want` GPUs into `free` (updated in place) on one type: the type
    :func:`choose_type` picks on the free GPUs (``allowed`` bit mask, ``key`` per type).
    Returns (nodes, counts), empty if no allowed type has room."""
    if want <= 0:
        return np.empty(0, np.int32), np.empty(0, np.int32)
    tf = type_free(free, node_type, n_types)
    t = choose_type(allowed, key, tf, tf, want)
    return place_in_type(free, node_type, t, want, mode)


@njit(cache=True)
def _current(cur_indptr, cur_nodes, cur_counts, node_type, n):
    """Per listed job: GPUs held and their type (-1: none, or more than one type)."""
    cur_n = np.zeros(n, np.int64)
    cur_t = np.full(n, -1, np.int64)
    for i in range(n):
        for k in range(cur_indptr[i], cur_indptr[i + 1]):
            cur_n[i] += cur_counts[k]
            t = node_type[cur_nodes[k]]
            if k == cur_indptr[i]:
                cur_t[i] = t
            elif cur_t[i] != t:
                cur_t[i] = -1
    return cur_n, cur_t


@njit(cache=True)
def _select(order, want, cur_n, cur_t, tcap, tfree, allowed, keys, blocking):
    """Preemptive selection in priority order with per-type budgets: a running job whose
    size is unchanged is selected on its own type while that type's budget holds it (it
    keeps its GPUs); any other job, and a running one whose type is taken by jobs ahead of
    it (it moves), takes the type choose_type picks (room now first, then budget)."""
    n = want.shape[0]
    selected = np.zeros(n, np.bool_)
    sel_type = np.full(n, -1, np.int64)
    budget = tcap.copy()
    free_w = tfree.copy()
    for k in range(order.shape[0]):
        i = order[k]
        if want[i] <= 0 or selected[i]:     # not a candidate, or a repeat
            continue
        if cur_n[i] > 0 and cur_n[i] == want[i] and cur_t[i] >= 0 and budget[cur_t[i]] >= want[i]:
            t = cur_t[i]
        else:
            t = choose_type(allowed[i], keys[i], free_w, budget, want[i])
            if t >= 0:
                free_w[t] -= want[i]
        if t < 0:
            if blocking:
                break
            continue
        selected[i] = True
        sel_type[i] = t
        budget[t] -= want[i]
    return selected, sel_type


@njit(cache=True)
def greedy_place(order, want, cur_indptr, cur_nodes, cur_counts, node_cap, node_type,
                 n_types, mode, preemptive, blocking, allowed, keys):
    """Recompute the placement of all active jobs.

    order: candidate job indices (into the active list), highest priority first.
    want: GPUs each active job should get (0: not a candidate now).
    cur_*: current placement CSR aligned with the active list.
    allowed: int64 per active job, bit mask of the GPU types it may use.
    keys: float64 [n_active, n_types], type choice keys (smallest first; see the module).
    Non-preemptive: running jobs keep their placement; the others are placed in order,
    each on the type choose_type picks on the GPUs left.  Preemptive: the jobs selected
    in priority order with per-type budgets (_select) get GPUs; selected running jobs
    whose size and type are unchanged keep their placement, selected ones on another type
    move, other running jobs are preempted.
    blocking: stop at the first candidate that cannot be placed (strict order).
    A job listed more than once in `order` counts at its first position only.
    Returns the new CSR (indptr, nodes, counts) aligned with the active list.
    """
    n = want.shape[0]
    free = node_cap.astype(np.int32).copy()
    cur_n, cur_t = _current(cur_indptr, cur_nodes, cur_counts, node_type, n)
    tcap = type_free(free, node_type, n_types)
    keep = np.zeros(n, np.bool_)
    selected = np.zeros(n, np.bool_)
    sel_type = np.full(n, -1, np.int64)
    if preemptive:
        tnow = tcap.copy()
        for i in range(n):
            if cur_t[i] >= 0:
                tnow[cur_t[i]] -= cur_n[i]
            else:
                for k in range(cur_indptr[i], cur_indptr[i + 1]):
                    tnow[node_type[cur_nodes[k]]] -= cur_counts[k]
        selected, sel_type = _select(order, want, cur_n, cur_t, tcap, tnow, allowed, keys, blocking)
        for i in range(n):
            keep[i] = (selected[i] and cur_n[i] > 0 and cur_n[i] == want[i] and cur_t[i] >= 0
                       and sel_type[i] == cur_t[i])
    else:
        for i in range(n):
            keep[i] = cur_n[i] > 0
        for k in range(order.shape[0]):
            selected[order[k]] = True
    for i in range(n):
        if keep[i]:
            for k in range(cur_indptr[i], cur_indptr[i + 1]):
                free[cur_nodes[k]] -= cur_counts[k]
    cap_entries = cur_nodes.shape[0]
    for i in range(n):
        cap_entries += max(want[i], 0)
    out_nodes = np.empty(cap_entries, np.int32)
    out_counts = np.empty(cap_entries, np.int32)
    starts = np.full(n, -1, np.int64)
    lens = np.zeros(n, np.int64)
    m = 0
    for i in range(n):
        if keep[i]:
            starts[i] = m
            for k in range(cur_indptr[i], cur_indptr[i + 1]):
                out_nodes[m] = cur_nodes[k]
                out_counts[m] = cur_counts[k]
                m += 1
            lens[i] = cur_indptr[i + 1] - cur_indptr[i]
    tf = type_free(free, node_type, n_types)
    for k in range(order.shape[0]):
        i = order[k]
        if keep[i] or not selected[i] or want[i] <= 0 or lens[i] > 0:   # lens: placed already
            continue
        t = sel_type[i] if preemptive else choose_type(allowed[i], keys[i], tf, tf, want[i])
        nodes, counts = place_in_type(free, node_type, t, want[i], mode)
        if nodes.shape[0] == 0:
            if blocking:
                break
            continue
        tf[t] -= want[i]
        starts[i] = m
        lens[i] = nodes.shape[0]
        for e in range(nodes.shape[0]):
            out_nodes[m] = nodes[e]
            out_counts[m] = counts[e]
            m += 1
    indptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        indptr[i + 1] = indptr[i] + lens[i]
    res_nodes = np.empty(indptr[n], np.int32)
    res_counts = np.empty(indptr[n], np.int32)
    for i in range(n):
        for e in range(lens[i]):
            res_nodes[indptr[i] + e] = out_nodes[starts[i] + e]
            res_counts[indptr[i] + e] = out_counts[starts[i] + e]
    return indptr, res_nodes, res_counts


@njit(cache=True)
def placement_summary(indptr, nodes, counts, node_type, node_speed):
    """Per job: GPUs, nodes spanned, bit mask of GPU types used, slowest server speed."""
    n = indptr.shape[0] - 1
    ngpu = np.zeros(n, np.int64)
    n_nodes = np.zeros(n, np.int64)
    type_mask = np.zeros(n, np.int64)
    min_speed = np.ones(n, np.float64)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo:
            min_speed[i] = np.inf
        for k in range(lo, hi):
            node = nodes[k]
            ngpu[i] += counts[k]
            n_nodes[i] += 1
            type_mask[i] |= np.int64(1) << np.int64(node_type[node])
            if node_speed[node] < min_speed[i]:
                min_speed[i] = node_speed[node]
    return ngpu, n_nodes, type_mask, min_speed


@njit(cache=True)
def changed_jobs(a_indptr, a_nodes, a_counts, b_indptr, b_nodes, b_counts):
    """True where placement a differs from placement b (CSR aligned with the same jobs)."""
    n = a_indptr.shape[0] - 1
    out = np.zeros(n, np.bool_)
    for i in range(n):
        la = a_indptr[i + 1] - a_indptr[i]
        lb = b_indptr[i + 1] - b_indptr[i]
        if la != lb:
            out[i] = True
            continue
        for k in range(la):
            if (a_nodes[a_indptr[i] + k] != b_nodes[b_indptr[i] + k]
                    or a_counts[a_indptr[i] + k] != b_counts[b_indptr[i] + k]):
                out[i] = True
                break
    return out


def restarted_jobs(state, indptr, nodes, counts, after) -> np.ndarray:
    """True for each active job that a new placement (CSR aligned with ``state.active``;
    ``after``: its GPUs per job) restarts: it holds GPUs now, still holds some, and they moved."""
    moved = changed_jobs(state.pl_indptr, state.pl_nodes, state.pl_counts, indptr, nodes, counts)
    return moved & (state.ngpu > 0) & (after > 0)


def csr_rows(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, flat indices) of CSR rows ``rows`` (-1: an empty row), in the given order."""
    rows = np.asarray(rows, np.int64)
    lens = np.where(rows >= 0, np.diff(indptr)[np.maximum(rows, 0)], 0)
    starts = np.concatenate([[0], np.cumsum(lens)])
    flat = np.repeat(indptr[np.maximum(rows, 0)], lens) + np.arange(starts[-1]) - np.repeat(starts[:-1], lens)
    return lens, flat
