"""Numba kernels of the Pollux searches: our count DP (:func:`sim.policies.pollux_search.dp_search`)
and the deterministic parts of the authors' NSGA-II: its operators and its survival's ranks and
crowding distances (end of the module).

The DP chooses each job's GPU count minimising ``sum_j v[j, r_j]`` under the cluster's GPUs: a
knapsack over jobs in order, ``f_k[a] = min_r f_{k-1}[a - r] + v[k, r]`` (``f_0 = 0``: ``f[a]``
is the least cost within ``a`` GPUs), the first ``r`` of least cost kept as ``choice[k, a]``,
then a walk back from ``a = G``.  The kernel gives the same counts as the numpy version it
replaced (tests/reference_pollux_search.py holds it to that, bit for bit) and is cheaper in two
exact ways:

* only a job's finite entries are tried (``r`` above its cap costs ``inf`` and never wins;
  ``r = 0`` is always finite, so every ``a`` has a finite candidate);
* ``f_k`` is constant for ``a`` at or above the sum of the first ``k`` jobs' largest finite
  ``r`` (``top_k``): every candidate there reads the constant part of ``f_{k-1}``, so the table
  stops at ``min(G, top_k)`` and the walk back reads ``choice[k, min(a, top_k)]``.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def dp_counts(v: np.ndarray, g: int) -> np.ndarray:
    """GPUs per job (rows of ``v``, float64 ``[J, W + 1]``, ``v[j, r]`` the cost of ``r``
    GPUs, ``inf`` where ``r`` is not allowed; ``v[j, 0]`` finite) within ``g`` GPUs."""
    v = np.ascontiguousarray(v, np.float64)
    if v.shape[0] and not np.all(np.isfinite(v[:, 0])):
        raise ValueError("dp_counts: v[:, 0] must be finite (0 GPUs is always allowed)")
    if np.isnan(v).any():
        raise ValueError("dp_counts: v has NaN")
    return _dp_counts(v, int(g))


@njit(cache=True)
def _dp_counts(v, g):
    j, w = v.shape[0], v.shape[1]
    top = np.zeros(j, np.int64)           # min(g, sum of the first k + 1 jobs' largest finite r)
    acc = 0
    for k in range(j):
        last = 0
        for r in range(min(w, g + 1)):
            if v[k, r] < np.inf:
                last = r
        acc = min(g, acc + last)
        top[k] = acc
    f = np.zeros(g + 1)
    nf = np.zeros(g + 1)
    choice = np.zeros((j, g + 1), np.int32)
    rs = np.empty(w, np.int64)
    lo = 0                                  # f's constant part starts at lo
    for k in range(j):
        n = 0
        for r in range(min(w, g + 1)):
            if v[k, r] < np.inf:
                rs[n] = r
                n += 1
        hi = top[k]
        for a in range(hi + 1):
            best = np.inf
            bi = 0
            for q in range(n):
                r = rs[q]
                if r > a:
                    break
                c = f[min(a - r, lo)] + v[k, r]
                if c < best:
                    best = c
                    bi = r
            choice[k, a] = bi
            nf[a] = f[min(a - bi, lo)] + v[k, bi]
        for a in range(hi + 1):
            f[a] = nf[a]
        lo = hi
    counts = np.zeros(j, np.int64)
    a = g
    for k in range(j - 1, -1, -1):
        c = choice[k, min(a, top[k])]
        counts[k] = c
        a -= c
    return counts


# -- the authors' NSGA-II operators (sim.policies.pollux_search.PolluxProblem) ---------------------
# Each kernel does the deterministic part of one operator; the random draws stay with numpy's
# Generator in the caller, the same draws in the same order as the numpy expressions these
# replace (tests/reference_pollux_search.py holds both to that, bit for bit: the same states,
# the same generator state after).  States are int64 [P, J, N].

@njit(cache=True)
def _insertion_sort_by(key, idx):
    """``idx`` (positions into ``key``, increasing) reordered by increasing ``key``, ties in
    position order (a stable insertion sort, for the few entries of one job; keys without NaN):
    ``np.argsort``'s order wherever the keys are distinct, as the repair's uniform draws are."""
    for i in range(1, idx.shape[0]):
        v = idx[i]
        q = i
        while q > 0 and key[v] < key[idx[q - 1]]:
            idx[q] = idx[q - 1]
            q -= 1
        idx[q] = v


@njit(cache=True)
def repair_states(s, shuffle_u, max_replicas, capacity, max_nodes, avoid):
    """The repair, in place on ``s`` (a copy): one distributed job per node (``avoid``: once a
    node holds a second distributed job, that job's and every later job's GPUs there are
    dropped, as the numpy expression did), then per
    job, over its nodes in the order of ``argsort(shuffle_u[p, j])``, at most ``max_replicas[j]``
    GPUs and ``max_nodes`` nodes, then per node, over jobs in order, at most ``capacity[n]``."""
    P, J, N = s.shape
    taken = np.zeros(N, np.int64)
    nz = np.empty(N, np.int64)
    for p in range(P):
        if avoid:
            taken[:] = 0
            for j in range(J):
                spread = 0
                for n in range(N):
                    spread += s[p, j, n] != 0
                for n in range(N):
                    if spread > 1 and s[p, j, n] > 0:
                        taken[n] += 1
                    if taken[n] > 1:                # from the second distributed job on a node
                        s[p, j, n] = 0              # on, every later job's GPUs there go
        for j in range(J):
            # only a job's nonzero entries change its running sums, so they alone are visited,
            # in the order argsort(shuffle_u[p, j]) gives them (zeros stay zero)
            m = 0
            for n in range(N):
                if s[p, j, n] != 0:
                    nz[m] = n
                    m += 1
            _insertion_sort_by(shuffle_u[p, j], nz[:m])
            total = 0
            used = 0
            nodes = 0
            for q in range(m):
                n = nz[q]
                total += s[p, j, n]
                cap = min(total, max_replicas[j])
                out = cap - used
                used = cap
                if out > 0:
                    nodes += 1
                    if nodes > max_nodes:
                        out = 0
                else:
                    out = 0
                s[p, j, n] = out
        for n in range(N):
            total = 0
            used = 0
            for j in range(J):
                total += s[p, j, n]
                cap = min(total, capacity[n])
                s[p, j, n] = cap - used
                used = cap
    return s


@njit(cache=True)
def mutation_base(states, base, capacity, reset_u, zero_job_u, zero_u, reset_p, zero_job_p, zero_p):
    """The mutation before its last draws: (states with rows reset to ``base`` and entries
    zeroed, the probability of raising each entry)."""
    P, J, N = states.shape
    s = np.empty_like(states)
    prob = np.empty(states.shape)
    for p in range(P):
        for j in range(J):
            reset = reset_u[p, j] < reset_p
            pz = zero_p if zero_job_u[p, j] < zero_job_p else 0.0
            for n in range(N):
                v = base[j, n] if reset else states[p, j, n]
                s[p, j, n] = 0 if zero_u[p, j, n] < pz else v
        for n in range(N):
            free = capacity[n]
            for j in range(J):
                free -= s[p, j, n]
            fits = free >= 1
            have = 0
            for j in range(J):
                have += fits and s[p, j, n] > 0
            p1 = (1.0 if fits else 0.0) / max(float(J if fits else 0), 1.0)
            for j in range(J):
                p2 = (1.0 if (fits and s[p, j, n] > 0) else 0.0) / max(float(have), 1.0)
                prob[p, j, n] = p1 + p2 - p1 * p2
    return s, prob


@njit(cache=True)
def tournament_pick(a, b, u, crowd, f):
    """Binary tournament: domination, then crowding, then ``u < 0.5``."""
    out = np.empty(a.shape[0], np.int64)
    k = f.shape[1]
    for i in range(a.shape[0]):
        x, y = a[i], b[i]
        le = True
        lt = False
        ge = True
        gt = False
        for c in range(k):
            le = le and f[x, c] <= f[y, c]
            lt = lt or f[x, c] < f[y, c]
            ge = ge and f[y, c] <= f[x, c]
            gt = gt or f[y, c] < f[x, c]
        if le and lt:
            out[i] = x
        elif ge and gt:
            out[i] = y
        elif crowd[x] > crowd[y]:
            out[i] = x
        elif crowd[y] > crowd[x]:
            out[i] = y
        else:
            out[i] = x if u[i] < 0.5 else y
    return out


# -- NSGA-II's survival: non-domination ranks and crowding distances --------------------------------
@njit(cache=True)
def survival_keys(f, pymoo_crowding=False):
    """(rank, crowding) of each row of the objectives ``f`` [n, k] (minimised): the rank of its
    non-domination front (0 first; a row dominates another when no objective is larger and one is
    smaller), and its crowding distance within its front (inf at each objective's ends and in
    fronts of at most two rows; else the sum over objectives of the gap between its neighbours
    divided by the front's span, objectives in order).  The arithmetic of the numpy code it
    replaced (tests/reference_pollux_search.py), bit for bit.  ``pymoo_crowding``: pymoo 0.4.2.1's
    ``calc_crowding_distance`` instead (:func:`_crowding_pymoo`), each front's rows in the order
    pymoo's ``fast_non_dominated_sort`` lists them (:func:`_pymoo_front_order`)."""
    rank, fronts, dom = _domination_ranks(f)
    crowd = np.zeros(f.shape[0])
    if pymoo_crowding:
        order, starts = _pymoo_front_order(dom, fronts)
        for front in range(fronts):
            _crowding_pymoo(f, order[starts[front]:starts[front + 1]], crowd)
        return rank, crowd
    members = np.empty(f.shape[0], np.int64)
    for front in range(-1, fronts):                # -1: rows no front reached (none in practice)
        m = 0
        for a in range(f.shape[0]):
            if rank[a] == front:
                members[m] = a
                m += 1
        _crowding(f, members[:m], crowd)
    return rank, crowd


@njit(cache=True)
def _pymoo_front_order(dom, fronts):
    """(the rows front by front, where front ``r`` starts), ``dom[a, b]``: row ``a`` dominates
    row ``b``: front 0 in row order, each later front in the order its rows' last dominator is
    met, walking the previous front in its order and each row's dominated rows in row order
    (pymoo's ``fast_non_dominated_sort``)."""
    n = dom.shape[0]
    count = np.zeros(n, np.int64)
    for a in range(n):
        for b in range(n):
            count[b] += dom[a, b]
    order = np.empty(n, np.int64)
    starts = np.zeros(fronts + 1, np.int64)
    m = 0
    for a in range(n):
        if count[a] == 0:
            order[m] = a
            m += 1
    lo = 0
    for r in range(1, fronts + 1):
        starts[r] = m
        hi = m
        for q in range(lo, hi):
            a = order[q]
            for b in range(n):
                if dom[a, b]:
                    count[b] -= 1
                    if count[b] == 0:
                        order[m] = b
                        m += 1
        lo = hi
    return order, starts


@njit(cache=True)
def _domination_ranks(f):
    """(each row's front, the number of fronts, the domination matrix ``dom[a, b]``: row ``a``
    dominates row ``b``): fronts peeled off in turn, each the rows that no row left dominates."""
    n, k = f.shape
    dom = np.zeros((n, n), np.bool_)
    count = np.zeros(n, np.int64)                  # how many rows dominate each
    for a in range(n):
        for b in range(n):
            le = True
            lt = False
            for c in range(k):
                if not f[a, c] <= f[b, c]:
                    le = False
                if f[a, c] < f[b, c]:
                    lt = True
            if le and lt:
                dom[a, b] = True
                count[b] += 1
    rank = np.full(n, -1, np.int64)
    r = 0
    cur = count == 0
    while cur.any():
        for a in range(n):
            if cur[a]:
                rank[a] = r
                for b in range(n):
                    count[b] -= dom[a, b]
        for a in range(n):
            if rank[a] >= 0:
                count[a] = -1
        cur = count == 0
        r += 1
    return rank, r, dom


@njit(cache=True)
def _crowding(f, members, crowd):
    """The crowding distances of one front's rows ``members`` of ``f``, into ``crowd``."""
    m = members.shape[0]
    if m <= 2:
        for q in range(m):
            crowd[members[q]] = np.inf
        return
    for q in range(m):
        crowd[members[q]] = 0.0
    col = np.empty(m)
    for c in range(f.shape[1]):
        for q in range(m):
            col[q] = f[members[q], c]
        o = np.argsort(col, kind="mergesort")     # stable, NaN last: np.argsort(kind="stable")
        span = col[o[m - 1]] - col[o[0]]
        crowd[members[o[0]]] = np.inf
        crowd[members[o[m - 1]]] = np.inf
        if span > 0:
            for q in range(1, m - 1):
                crowd[members[o[q]]] += (col[o[q + 1]] - col[o[q - 1]]) / span


#: pymoo's ``find_duplicates`` threshold in ``calc_crowding_distance`` (Euclidean distance)
PYMOO_DUPLICATE_EPS = 1e-24


@njit(cache=True)
def _crowding_pymoo(f, members, crowd):
    """pymoo 0.4.2.1's crowding distances of one front's rows ``members`` of ``f``, into
    ``crowd``: every row of a front of at most two gets inf; a row within Euclidean distance
    :data:`PYMOO_DUPLICATE_EPS` of an earlier member gets 0 and is left out of the others'
    distances; for each objective, over the rest sorted (stable), ``(x - prev) / span +
    (next - x) / span`` with the ends' missing neighbour at -inf / +inf, a term that is NaN (a
    span of 0 or NaN) counting 0, summed over objectives in order and divided by their number."""
    m = members.shape[0]
    if m <= 2:
        for q in range(m):
            crowd[members[q]] = np.inf
        return
    k = f.shape[1]
    uniq = np.empty(m, np.int64)
    nu = 0
    for q in range(m):
        crowd[members[q]] = 0.0
        dup = False
        for p in range(q):
            d2 = 0.0
            for c in range(k):
                d = f[members[q], c] - f[members[p], c]
                d2 += d * d
            if np.sqrt(d2) < PYMOO_DUPLICATE_EPS:
                dup = True
                break
        if not dup:
            uniq[nu] = members[q]
            nu += 1
    total = np.zeros(nu)
    col = np.empty(nu)
    srt = np.empty(nu)
    for c in range(k):
        for q in range(nu):
            col[q] = f[uniq[q], c]
        o = np.argsort(col, kind="mergesort")
        for q in range(nu):
            srt[q] = col[o[q]]
        norm = np.max(srt) - np.min(srt)
        if norm == 0.0:
            norm = np.nan
        for q in range(nu):
            prev = srt[q - 1] if q > 0 else -np.inf
            nxt = srt[q + 1] if q < nu - 1 else np.inf
            to_last = (srt[q] - prev) / norm
            to_next = (nxt - srt[q]) / norm
            if np.isnan(to_last):
                to_last = 0.0
            if np.isnan(to_next):
                to_next = 0.0
            total[o[q]] += to_last + to_next
    for q in range(nu):
        crowd[uniq[q]] = total[q] / k
