"""Node-level repair of a packed placement: jobs re-inserted at their best placement.

The market and the pairwise-swap local search (sim.smjp.market) work on classes of identical
nodes and on categories that use every free worker.  They cannot see that a job is much faster
on *one* node (intra-node all-reduce) than spread over several, nor reach that node when it
takes several coordinated moves: giving the job fewer workers than its category did, or taking
a node another job holds a part of.  The repair works on the packed node placement ``x``
[S, N] and judges every move by the exact completion times (integer shares, node-level
all-reduce, sim.smjp.latency):

* **re-insert one job**: take job i out and put it back at its best placement on the workers
  left free (:func:`best_placement`), with fewer workers than before if that is faster;
* **re-insert a conflicting pair** (a, b): b shares a node with a, or holds a node of one of
  a's candidate placements on the empty cluster, and a is slower than that candidate.  Both
  are taken out; for each candidate of a that takes a node b held, b is put back at its best
  placement on what is left; the best pair wins.  This is the whole-node conflict: a needs
  the node b sits on, b has to move (or shrink) for it.

A move is kept when it lowers the score ``avg JCT x (1 + beta_f (1 - Jain(slowdowns)))``; at
most ``passes`` sweeps (every job, then every conflicting pair) while some move is kept.

A job's candidate placements, every worker count ``k`` in ``[kmin, kmax]`` tried and each
costed exactly:

* **one node** per class (nodes alike to every job): the best ``k`` on one node of the class,
  on the node of that class with the fewest free workers that holds them (best fit);
* **spread** per distinct inter-node bandwidth ``bw``: the ``k`` fastest free workers (nodes
  by falling throughput, fewest free workers first among equals) over the nodes of inter-node
  bandwidth >= ``bw``.

Its best placement is the best candidate.  Everything runs in Numba on sparse candidates (a
list of nodes and counts); one-node costs come from a table per job, class and free count.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .instance import Instance
from .latency import GBIT_BYTES

__all__ = ["best_placement", "repair", "repair_context", "exact_jcts", "placement_jct"]


@njit(cache=True)
def _share(total, rho_e, wsum):
    """(whole samples, remainder) of one worker's proportional share (largest_remainder)."""
    share = total * rho_e / wsum
    base = np.floor(share + 1e-9)
    return base, share - base


@njit(cache=True)
def _compute_time(P, rho_i, nodes, counts, m, integer):
    """Compute seconds of one iteration on ``m`` entries (nodes ascending): continuous
    ``P / sum rho`` or, with ``integer``, the slowest whole-sample share (largest remainder,
    ties to the first worker: sim.smjp.latency.largest_remainder).  Allocation-free: an
    entry gets an extra sample when fewer than ``left`` workers rank before it."""
    if not integer:
        rsum = 0.0
        for e in range(m):
            rsum += counts[e] * rho_i[nodes[e]]
        return P / rsum if rsum > 0 else np.inf
    total = np.rint(P)
    wsum = 0.0
    for e in range(m):
        for _ in range(counts[e]):
            wsum += rho_i[nodes[e]]
    if wsum <= 0:
        return np.inf
    given = 0.0
    for e in range(m):
        given += counts[e] * _share(total, rho_i[nodes[e]], wsum)[0]
    left = np.rint(total - given)
    out = 0.0
    for e in range(m):
        base, frac = _share(total, rho_i[nodes[e]], wsum)
        before = 0
        for f in range(m):
            ff = _share(total, rho_i[nodes[f]], wsum)[1]
            if ff > frac or (ff == frac and f < e):
                before += counts[f]
        out = max(out, (base + (1.0 if before < left else 0.0)) / rho_i[nodes[e]])
    return out


#: the evaluation context ``ev`` of the kernels, one tuple (built by :func:`repair_context`)
EV_FIELDS = ("of_node", "n_classes", "rho", "kmin", "kmax", "P", "grad", "T", "wait", "intra",
             "inter", "integer", "denom", "beta_f", "bws", "order")


@njit(cache=True)
def _job_jct(i, nodes, counts, m, ev):
    """Exact completion time of job i on ``m`` entries (nodes ascending; inf: none, or a
    worker it cannot use): sim.smjp.latency.placement_times."""
    rho, P, grad, T, wait, intra, inter, integer = ev[2], ev[5], ev[6], ev[7], ev[8], ev[9], ev[10], ev[11]
    n = 0
    r = np.inf
    for e in range(m):
        if rho[i, nodes[e]] <= 0:
            return np.inf
        n += counts[e]
        r = min(r, inter[nodes[e]])
    if n == 0:
        return np.inf
    if m == 1:
        r = intra[nodes[0]]
    comm = 0.0
    if n > 1:
        comm = 2.0 * (n - 1.0) / n * grad[i] / r if r > 0 else np.inf
    return wait[i] + T[i] * (_compute_time(P[i], rho[i], nodes, counts, m, integer) + comm)


@njit(cache=True)
def _one_node_table(ev, cap):
    """Best one-node placement of each job on each class with at most ``u`` free workers on
    the node: (JCT [S, C, U+1], workers [S, C, U+1]) over ``kmin_i <= k <= min(kmax_i, u)``
    (inf, 0: none), U the largest free count of a node.  The nodes of a class are alike."""
    of_node, C, kmin, kmax = ev[0], ev[1], ev[3], ev[4]
    S, U = kmin.shape[0], max(cap.max(), 0)
    best = np.full((S, C, U + 1), np.inf)
    arg = np.zeros((S, C, U + 1), np.int64)
    seen = np.zeros(C, np.bool_)
    nodes, counts = np.empty(1, np.int64), np.empty(1, np.int64)
    for n in range(of_node.shape[0]):
        c = of_node[n]
        if seen[c]:
            continue
        seen[c] = True
        nodes[0] = n
        for i in range(S):
            for u in range(1, U + 1):
                best[i, c, u], arg[i, c, u] = best[i, c, u - 1], arg[i, c, u - 1]
                if kmin[i] <= u <= kmax[i]:
                    counts[0] = u
                    t = _job_jct(i, nodes, counts, 1, ev)
                    if t < best[i, c, u]:
                        best[i, c, u], arg[i, c, u] = t, u
    return best, arg


@njit(cache=True)
def _one_node(i, free, c, ev, ws, nodes, counts):
    """Best one-node placement of job i on class ``c`` (the best count, on the tightest node
    of the class that holds it): JCT written with its entry to nodes/counts, or inf."""
    of_node, rho = ev[0], ev[2]
    table, arg = ws[6], ws[7]
    most = -1
    for n in range(free.shape[0]):
        if of_node[n] == c and free[n] > 0 and rho[i, n] > 0 and (most < 0 or free[n] > free[most]):
            most = n
    if most < 0 or not np.isfinite(table[i, c, free[most]]):
        return np.inf
    k = arg[i, c, free[most]]
    nodes[0], counts[0] = most, k
    for n in range(free.shape[0]):
        if of_node[n] == c and rho[i, n] > 0 and k <= free[n] < free[nodes[0]]:
            nodes[0] = n
    return table[i, c, free[most]]


@njit(cache=True)
def _fastest_nodes(i, free, bw, ev, seq):
    """Nodes of inter-node bandwidth >= ``bw`` with free workers job i can use, in job i's
    order (fastest first, fewest free workers in the instance first among equals: ev's
    ``order``), until they hold ``kmax_i`` workers: written to ``seq``; returns (how many,
    their free workers)."""
    rho, kmax, inter, order = ev[2], ev[4], ev[10], ev[15]
    got, m = 0, 0
    for n in order[i]:
        if got >= kmax[i] or rho[i, n] <= 0:
            break
        if free[n] > 0 and inter[n] >= bw:
            seq[m] = n
            m += 1
            got += free[n]
    return m, got


@njit(cache=True)
def _prefix(free, seq, k, nodes, counts):
    """The first ``k`` workers of the nodes ``seq`` as entries sorted by node; returns how
    many entries."""
    left, m = k, 0
    while left > 0:
        take = min(left, free[seq[m]])
        e = m                                     # insertion by node index
        while e > 0 and nodes[e - 1] > seq[m]:
            nodes[e], counts[e] = nodes[e - 1], counts[e - 1]
            e -= 1
        nodes[e], counts[e] = seq[m], take
        left -= take
        m += 1
    return m


@njit(cache=True)
def _spread(i, free, bw, ev, ws, best_nodes, best_counts):
    """Best spread placement of job i over the nodes of inter-node bandwidth >= ``bw``: its
    ``k`` fastest free workers for the best ``k``; (JCT, entries) written to
    best_nodes/best_counts, or (inf, 0).  ``ws``: the workspace (:func:`_workspace`)."""
    kmin, kmax = ev[3], ev[4]
    seq, nodes, counts = ws[0], ws[1], ws[2]
    m_seq, got = _fastest_nodes(i, free, bw, ev, seq)
    best, best_m = np.inf, 0
    for k in range(kmin[i], min(kmax[i], got) + 1):
        m = _prefix(free, seq, k, nodes, counts)
        t = _job_jct(i, nodes, counts, m, ev)
        if t < best:
            best, best_m = t, m
            best_nodes[:m], best_counts[:m] = nodes[:m], counts[:m]
    return best, best_m


@njit(cache=True)
def _candidates(i, free, ev, ws, cand):
    """Job i's candidate placements on ``free``: the best one-node placement of each class
    and the best spread one of each bandwidth threshold; returns how many were written to
    ``cand`` = (entries nodes, counts [k, kmax], sizes [k], JCTs [k])."""
    cn, cc, cm, ct = cand
    k = 0
    for c in range(ev[1]):
        t = _one_node(i, free, c, ev, ws, cn[k], cc[k])
        if np.isfinite(t):
            cm[k], ct[k] = 1, t
            k += 1
    for bw in ev[14]:
        t, m = _spread(i, free, bw, ev, ws, cn[k], cc[k])
        if np.isfinite(t):
            cm[k], ct[k] = m, t
            k += 1
    return k


@njit(cache=True)
def _best_placement(i, free, ev, ws, nodes, counts):
    """Job i's best candidate on ``free``: (JCT, entries written to nodes/counts)."""
    cand = ws[4]
    k = _candidates(i, free, ev, ws, cand)
    if k == 0:
        return np.inf, 0
    b = np.argmin(cand[3][:k])
    m = cand[2][b]
    nodes[:m], counts[:m] = cand[0][b, :m], cand[1][b, :m]
    return cand[3][b], m


@njit(cache=True)
def _candidate_buffers(ev):
    size = ev[1] + ev[14].shape[0]
    width = max(ev[4].max(), 1)
    return (np.empty((size, width), np.int64), np.empty((size, width), np.int64),
            np.empty(size, np.int64), np.empty(size))


@njit(cache=True)
def _workspace(cap, ev):
    """Scratch arrays of the kernels and the one-node table: (node sequence, entries nodes,
    counts, JCTs [S], candidates of a best placement, candidates of a pair's first job,
    one-node JCTs and counts (:func:`_one_node_table`))."""
    width = max(ev[4].max(), 1)
    table, arg = _one_node_table(ev, cap)
    return (np.empty(width, np.int64), np.empty(width, np.int64),
            np.empty(width, np.int64), np.empty(ev[3].shape[0]), _candidate_buffers(ev),
            _candidate_buffers(ev), table, arg)


@njit(cache=True)
def _score(jct, ev):
    """avg JCT x (1 + beta_f (1 - Jain(slowdowns))), as sim.smjp.sampling.score."""
    denom, beta_f = ev[12], ev[13]
    avg = jct.mean()
    if beta_f == 0.0:
        return avg
    s = jct / denom
    fair = 0.0
    if np.all(np.isfinite(s)):
        q = np.sum(s * s) * s.size
        fair = np.sum(s) ** 2 / q if q > 0 else 1.0
    return avg * (1.0 + beta_f * (1.0 - fair))


@njit(cache=True)
def _place(x, used, i, nodes, counts, m):
    for e in range(m):
        x[i, nodes[e]] += counts[e]
        used[nodes[e]] += counts[e]


@njit(cache=True)
def _take_out(x, used, i):
    used -= x[i]
    x[i] = 0


@njit(cache=True)
def _trial_score(jct, a, ta, b, tb, ev, trial):
    """The score with jobs a and b (b < 0: none) at completion times ta, tb."""
    trial[:] = jct
    trial[a] = ta
    if b >= 0:
        trial[b] = tb
    return _score(trial, ev)


@njit(cache=True)
def _try_single(x, used, cap, jct, score, i, ev, ws):
    """Re-insert job i at its best placement; keep it if the score falls.  Returns the score."""
    old = x[i].copy()
    _take_out(x, used, i)
    nodes, counts = np.empty_like(ws[1]), np.empty_like(ws[2])
    t, m = _best_placement(i, cap - used, ev, ws, nodes, counts)
    new = _trial_score(jct, i, t, -1, 0.0, ev, ws[3]) if np.isfinite(t) else np.inf
    if new < score * (1 - 1e-12):
        _place(x, used, i, nodes, counts, m)
        jct[i] = t
        return new
    x[i] = old
    used += old
    return score


@njit(cache=True)
def _overlaps(nodes, m, row):
    for e in range(m):
        if row[nodes[e]] > 0:
            return True
    return False


@njit(cache=True)
def _try_pair(x, used, cap, jct, score, a, b, ev, ws):
    """Take jobs a and b out; for each candidate placement of a (:func:`_candidates`) that
    takes a node b held, put b at its best placement on what is left; keep the best pair if
    the score falls."""
    old_a, old_b = x[a].copy(), x[b].copy()
    _take_out(x, used, a)
    _take_out(x, used, b)
    first = ws[5]
    k = _candidates(a, cap - used, ev, ws, first)
    nodes, counts = np.empty_like(ws[1]), np.empty_like(ws[2])
    best_nodes, best_counts = np.empty_like(nodes), np.empty_like(counts)
    best, best_c, best_m, best_t = score * (1 - 1e-12), -1, 0, np.inf
    for c in range(k):
        if not _overlaps(first[0][c], first[2][c], old_b):
            continue                              # no conflict: single moves cover it
        _place(x, used, a, first[0][c], first[1][c], first[2][c])
        t, m = _best_placement(b, cap - used, ev, ws, nodes, counts)
        _take_out(x, used, a)
        if not np.isfinite(t):
            continue
        new = _trial_score(jct, a, first[3][c], b, t, ev, ws[3])
        if new < best:
            best, best_c, best_m, best_t = new, c, m, t
            best_nodes[:m], best_counts[:m] = nodes[:m], counts[:m]
    if best_c < 0:
        x[a], x[b] = old_a, old_b
        used += old_a + old_b
        return score
    _place(x, used, a, first[0][best_c], first[1][best_c], first[2][best_c])
    _place(x, used, b, best_nodes, best_counts, best_m)
    jct[a], jct[b] = first[3][best_c], best_t
    return best


@njit(cache=True)
def _job_jct_row(x, i, ev):
    nodes = np.flatnonzero(x[i])
    return _job_jct(i, nodes, x[i][nodes], nodes.shape[0], ev)


@njit(cache=True)
def _partners(x, cap, jct, ev, ws):
    """bool [S, S]: ordered pairs worth a joint re-insertion.  Job a's partners are the jobs
    with workers on a node a uses, and those holding a node of a's candidate placements on
    the empty cluster; only for the jobs a slower than one of these candidates (with
    something to gain; the pair (b, a) covers b's gain)."""
    S, N = x.shape
    out = np.zeros((S, S), np.bool_)
    gain = np.zeros(S, np.bool_)
    cand = ws[5]
    for a in range(S):
        for n in range(N):
            if x[a, n] > 0:
                for b in range(S):
                    out[a, b] |= x[b, n] > 0
        k = _candidates(a, cap, ev, ws, cand)
        for c in range(k):
            gain[a] |= cand[3][c] < jct[a] * (1 - 1e-12)
            for e in range(cand[2][c]):
                n = cand[0][c, e]
                for b in range(S):
                    out[a, b] |= x[b, n] > 0
    for a in range(S):
        out[a, a] = False
        for b in range(S):
            out[a, b] &= gain[a]
    return out


@njit(cache=True)
def _repair(x, cap, passes, ev):
    S = x.shape[0]
    ws = _workspace(cap, ev)
    used = np.zeros(x.shape[1], np.int64)
    jct = np.empty(S)
    for i in range(S):
        used += x[i]
        jct[i] = _job_jct_row(x, i, ev)
    score = _score(jct, ev)
    moves = 0
    for _ in range(passes):
        kept = 0
        for i in range(S):
            new = _try_single(x, used, cap, jct, score, i, ev, ws)
            kept += new < score
            score = new
        pairs = _partners(x, cap, jct, ev, ws)
        for a in range(S):
            for b in range(S):
                if pairs[a, b]:
                    new = _try_pair(x, used, cap, jct, score, a, b, ev, ws)
                    kept += new < score
                    score = new
        moves += kept
        if kept == 0:
            break
    return moves


def repair_context(inst: Instance, beta_f: float = 0.0) -> tuple:
    """The kernels' evaluation context of ``inst`` (EV_FIELDS)."""
    cls = inst.classes
    denom = np.maximum(inst.remaining * inst.isolated, 1e-300)
    inter = inst.inter * GBIT_BYTES
    return (cls.of_node.astype(np.int64), int(cls.cap.shape[0]), np.ascontiguousarray(inst.rho, float),
            inst.kmin.astype(np.int64), inst.kmax.astype(np.int64), inst.P.astype(float),
            inst.grad.astype(float), inst.remaining.astype(float), inst.wait.astype(float),
            inst.intra * GBIT_BYTES, inter, bool(inst.model.integer_samples), denom.astype(float),
            float(beta_f), np.unique(inter)[::-1].copy(), _fastest_first(inst))


def _fastest_first(inst: Instance) -> np.ndarray:
    """int64 [S, N]: each job's nodes by falling throughput, then fewest free workers, then
    index."""
    shape = inst.rho.shape
    keys = (np.broadcast_to(np.arange(shape[1]), shape), np.broadcast_to(inst.cap, shape), -inst.rho)
    return np.lexsort(keys, axis=-1).astype(np.int64)


def repair(inst: Instance, x: np.ndarray, passes: int = 1, beta_f: float = 0.0,
           context: tuple | None = None) -> int:
    """Improve the node placement ``x`` [S, N] (int64) in place by re-inserting single jobs
    and pairs of jobs (module docstring); returns the number of moves kept.  ``context``:
    :func:`repair_context` of the same instance and beta_f, if already built."""
    if inst.n_jobs == 0 or passes <= 0:
        return 0
    ev = repair_context(inst, beta_f) if context is None else context
    return int(_repair(x, inst.cap.astype(np.int64), int(passes), ev))


def exact_jcts(x: np.ndarray, context: tuple) -> np.ndarray:
    """float64 [S]: every job's completion time on ``x`` [S, N] (Instance.jct, in Numba;
    ``context``: :func:`repair_context`)."""
    return _jcts(np.ascontiguousarray(x, np.int64), context)


@njit(cache=True)
def _jcts(x, ev):
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = _job_jct_row(x, i, ev)
    return out


def best_placement(inst: Instance, i: int, free: np.ndarray):
    """(row [N], JCT) of job i's best candidate placement on the ``free`` workers [N], or
    (None, inf) when none fits (module docstring)."""
    ev = repair_context(inst)
    ws = _workspace(inst.cap.astype(np.int64), ev)
    nodes, counts = np.empty_like(ws[1]), np.empty_like(ws[2])
    t, m = _best_placement(int(i), np.asarray(free, np.int64), ev, ws, nodes, counts)
    if not np.isfinite(t):
        return None, np.inf
    row = np.zeros(inst.cap.shape[0], np.int64)
    row[nodes[:m]] = counts[:m]
    return row, float(t)


def placement_jct(inst: Instance, i: int, row: np.ndarray) -> float:
    """Job i's completion time on ``row`` [N] as the kernels compute it (Instance.pattern_jct)."""
    x = np.zeros((inst.n_jobs, inst.cap.shape[0]), np.int64)
    x[i] = row
    return float(_job_jct_row(x, int(i), repair_context(inst)))
