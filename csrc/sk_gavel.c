/* clustersim native Gavel rounds (see sk_gavel.h).  Each function ports one piece of the
 * Python path, named after it: sim/policies/gavel_rounds.py (GavelRounds), the Numba kernels
 * of sim/policies/gavel_kernels.py, sim/plan_diff.py and the decision loop of sim/engine.py
 * (_Run.decide, record, next_point).  Floating-point operations are the Python path's, in its
 * order. */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#include "sk_gavel.h"
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNRUN_PRIORITY 1.0e9      /* gavel_kernels.UNRUN_PRIORITY */
#define QUEUE_RUN 16              /* gavel_kernels.QUEUE_RUN */
#define QUIET_CAP 1024            /* rows a call of sk_engine_step_quiet may pass over */

enum { PHASE_DECIDE = 0, PHASE_RESUME = 1, PHASE_NEXT = 2 };

struct sk_gavel_work {
    int64_t n_jobs, entry_cap;
    int32_t m, n_nodes;
    /* the snapshot of the decision point */
    int64_t k, n_entries;
    int64_t *ids, *indptr;
    int32_t *ngpu, *nodes, *counts;
    double *remaining, *attained, *run_s, *queued_since;
    int8_t *active;               /* by job id, set for the snapshot's jobs */
    /* the round */
    double *x, *d, *got, *pri;    /* [k][m] */
    double *key0, *key1, *key2;   /* one type's sort keys [k] */
    uint32_t *bits;
    int64_t *queues, *buf, *chosen, *prev, *left, *jobs_buf, *placed;
    int8_t *placeable, *kept;
    int32_t *free;
    int64_t *type_off, *type_nodes;   /* each type's servers, in cluster order */
    int64_t *identity;                /* the cluster's type order 0, 1, ..., m-1 */
    int64_t *owner, *a_nodes, *a_counts, *pos;
    int64_t *p_indptr;
    int32_t *p_nodes, *p_counts;
    double *scale, *fin, *steps;
    int8_t *finishes;
    /* the plan's changes */
    int64_t *c_ids, *c_indptr;
    int32_t *c_nodes, *c_counts;
    double *c_rates;
    /* mid-round points passed over */
    sk_quiet_rows quiet;
    double *q_time, *q_fgd, *q_at;
    int64_t *q_used, *q_queued, *q_running, *q_completed;
};

static double clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(sk_gavel *g, int32_t what, int64_t job, int64_t count) {
    g->failure = what;
    g->failure_job = job;
    g->failure_count = count;
    return SK_GAVEL_FAILED;
}

/* ---------------------------------------------------------------- the snapshot */

static int snapshot(sk_engine *e, sk_gavel_work *w) {
    for (int64_t i = 0; i < w->k; i++) w->active[w->ids[i]] = 0;
    int rc = sk_engine_snapshot(e, 0, w->n_jobs, w->entry_cap, w->ids, w->ngpu, w->remaining,
                                w->attained, w->run_s, w->queued_since, w->indptr, w->nodes,
                                w->counts, &w->k, &w->n_entries);
    if (rc < 0) { w->k = 0; return rc; }
    for (int64_t i = 0; i < w->k; i++) w->active[w->ids[i]] = 1;
    return SK_OK;
}

static int any_running(const sk_gavel_work *w) {
    for (int64_t i = 0; i < w->k; i++)
        if (w->ngpu[i] > 0) return 1;
    return 0;
}

/* ---------------------------------------------------------------- credits (gavel_kernels) */

/* _credit_completed for one job: its elapsed seconds count for the type it was dispatched on */
static void credit_completed(sk_gavel *g, int64_t j, double elapsed) {
    if (g->ran_on[j] >= 0) {
        g->worker_time[g->ran_on[j]] += elapsed;
        g->ran_on[j] = -1;
        g->member[j] = 0;
        g->need_update = 1;
    }
}

/* _credit_finished: dispatched jobs no longer active, in id order */
static void credit_finished(sk_gavel *g, const sk_gavel_work *w, double elapsed) {
    for (int64_t j = 0; j < g->n_jobs; j++)
        if (g->ran_on[j] >= 0 && !w->active[j]) credit_completed(g, j, elapsed);
}

/* _credit_running: each active job dispatched this round received its credit */
static void credit_running(sk_gavel *g, const sk_gavel_work *w) {
    int32_t m = g->n_types;
    for (int64_t i = 0; i < w->k; i++) {
        int64_t j = w->ids[i], t = g->ran_on[j];
        if (t >= 0) {
            g->time_so_far[j * m + t] += g->credit[j];
            g->worker_time[t] += g->credit[j];
        }
    }
    for (int64_t j = 0; j < g->n_jobs; j++)
        if (g->member[j] && !w->active[j]) {
            g->member[j] = 0;
            g->need_update = 1;
        }
}

/* GavelRounds._join without the check (the engine checked every job before the run) */
static void join(sk_gavel *g, const sk_gavel_work *w) {
    int32_t m = g->n_types;
    for (int64_t i = 0; i < w->k; i++) {
        int64_t j = w->ids[i];
        if (g->member[j]) continue;
        g->member[j] = 1;
        for (int32_t t = 0; t < m; t++) {
            g->time_so_far[j * m + t] = g->round_s / 2.0;
            g->deficit[j * m + t] = 0.0;
        }
        g->need_update = 1;
    }
}

/* ---------------------------------------------------------------- the queues (_queues) */

static int before(int64_t i, int64_t j, const sk_gavel_work *w) {
    if (w->key0[i] != w->key0[j]) return w->key0[i] > w->key0[j];
    if (w->key1[i] != w->key1[j]) return w->key1[i] > w->key1[j];
    return w->key2[i] > w->key2[j];
}

static void insertion_sort(int64_t *q, int64_t lo, int64_t hi, const sk_gavel_work *w) {
    for (int64_t i = lo + 1; i < hi; i++) {
        int64_t v = q[i], j = i - 1;
        while (j >= lo && before(v, q[j], w)) {
            q[j + 1] = q[j];
            j--;
        }
        q[j + 1] = v;
    }
}

static void merge(const int64_t *src, int64_t *dst, int64_t lo, int64_t mid, int64_t hi,
                  const sk_gavel_work *w) {
    int64_t a = lo, b = mid, k = lo;
    while (a < mid && b < hi) dst[k++] = before(src[b], src[a], w) ? src[b++] : src[a++];
    while (a < mid) dst[k++] = src[a++];
    while (b < hi) dst[k++] = src[b++];
}

/* q[lo:hi] sorted stably by before(): insertion runs, then merges through buf */
static void sort_range(int64_t *q, int64_t *buf, int64_t lo, int64_t hi, const sk_gavel_work *w) {
    for (int64_t a = lo; a < hi; a += QUEUE_RUN)
        insertion_sort(q, a, a + QUEUE_RUN < hi ? a + QUEUE_RUN : hi, w);
    int64_t *src = q, *dst = buf;
    for (int64_t width = QUEUE_RUN; width < hi - lo; width *= 2) {
        for (int64_t a = lo; a < hi; a += 2 * width) {
            int64_t mid = a + width < hi ? a + width : hi, end = a + 2 * width < hi ? a + 2 * width : hi;
            merge(src, dst, a, mid, end, w);
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src == buf) memcpy(q + lo, buf + lo, (size_t)(hi - lo) * sizeof *q);
}

static uint32_t descending_top_bits(double v) {
    double z = v + 0.0;
    uint64_t b;
    memcpy(&b, &z, sizeof b);
    if (!(b >> 63)) b = ~(b | ((uint64_t)1 << 63));
    return (uint32_t)(b >> 32);
}

/* q = 0..n-1 sorted stably by bits, ascending: LSD radix, 8 bits a pass, the four digit counts
   taken in one sweep; a pass whose digit all keys share is skipped */
static void radix_sort(int64_t *q, int64_t *buf, const uint32_t *bits, int64_t n) {
    int64_t count[4][257];
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint32_t b = bits[i];
        q[i] = i;
        count[0][(b & 255u) + 1]++;
        count[1][((b >> 8) & 255u) + 1]++;
        count[2][((b >> 16) & 255u) + 1]++;
        count[3][(b >> 24) + 1]++;
    }
    int64_t *src = q, *dst = buf;
    for (int pass = 0; pass < 4; pass++) {
        int64_t *c = count[pass];
        int shift = 8 * pass;
        if (n > 0 && c[((bits[0] >> shift) & 255u) + 1] == n) continue;
        for (int d = 0; d < 256; d++) c[d + 1] += c[d];
        for (int64_t k = 0; k < n; k++) {
            int64_t i = src[k];
            dst[c[(bits[i] >> shift) & 255u]++] = i;
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != q) memcpy(q, src, (size_t)n * sizeof *q);
}

static void queues(sk_gavel_work *w, int32_t m) {
    int64_t n = w->k;
    for (int32_t t = 0; t < m; t++) {
        for (int64_t i = 0; i < n; i++) {
            w->key0[i] = w->pri[i * m + t];
            w->key1[i] = w->d[i * m + t];
            w->key2[i] = w->x[i * m + t];
            w->bits[i] = descending_top_bits(w->pri[i * m + t]);
        }
        int64_t *q = w->queues + (int64_t)t * n;
        radix_sort(q, w->buf, w->bits, n);
        for (int64_t lo = 0, hi; lo < n; lo = hi) {
            for (hi = lo + 1; hi < n && w->bits[q[hi]] == w->bits[q[lo]]; hi++) {}
            if (hi - lo > 1) sort_range(q, w->buf, lo, hi, w);
        }
    }
}

/* ---------------------------------------------------------------- the round (_round_plan) */

static void priorities(const sk_gavel *g, sk_gavel_work *w) {
    int32_t m = g->n_types;
    for (int64_t i = 0; i < w->k; i++) {
        int64_t j = w->ids[i];
        w->placeable[i] = g->in_alloc[j] != 0;
        for (int32_t t = 0; t < m; t++) {
            double x = g->alloc[j * m + t], got = g->time_so_far[j * m + t];
            w->x[i * m + t] = x;
            w->d[i * m + t] = g->deficit[j * m + t];
            w->got[i * m + t] = got;
            double p = 0.0;
            if (w->placeable[i]) {
                double frac = g->worker_time[t] > 0 ? got / g->worker_time[t] : 0.0;
                p = frac > 0 ? x / frac : x * UNRUN_PRIORITY;
                if (x > 0 && g->thr[j * m + t] <= 0) p = 0.0;
            }
            w->pri[i * m + t] = p;
        }
    }
}

static void select_jobs(const sk_gavel *g, sk_gavel_work *w, const int64_t *order) {
    int32_t m = g->n_types;
    int64_t n = w->k;
    for (int64_t i = 0; i < n; i++) w->chosen[i] = -1;
    for (int32_t o = 0; o < m; o++) {
        int64_t t = order[o];
        const int64_t *q = w->queues + t * n;
        for (int64_t r = 0; r < n; r++) {
            if (w->left[t] == 0) break;
            int64_t i = q[r], j = w->ids[i];
            if (g->thr[j * m + t] <= 0.0 || (g->skip_zero_priority && !(w->pri[i * m + t] > 0.0)))
                continue;
            int64_t sf = g->demand[j];
            if (w->chosen[i] < 0 && sf <= w->left[t]) {
                w->chosen[i] = t;
                w->left[t] -= sf;
            }
        }
    }
}

static void previous_types(const sk_gavel *g, sk_gavel_work *w) {
    for (int64_t i = 0; i < w->k; i++) {
        int64_t lo = w->indptr[i], hi = w->indptr[i + 1];
        w->prev[i] = -1;
        if (hi == lo) continue;
        int64_t t = g->node_type[w->nodes[lo]];
        for (int64_t e = lo + 1; e < hi; e++)
            if (g->node_type[w->nodes[e]] != t) { t = -1; break; }
        w->prev[i] = t;
    }
}

/* _by_scale: the jobs chosen for type t by scale factor descending, stably; returns how many */
static int64_t by_scale(const sk_gavel *g, sk_gavel_work *w, int64_t t) {
    int64_t count = 0, top = -1, done = 0;
    for (int64_t i = 0; i < w->k; i++)
        if (w->chosen[i] == t) {
            int64_t s = g->demand[w->ids[i]];
            top = s > top ? s : top;
            count++;
        }
    while (done < count) {
        int64_t cur = top;
        top = -1;
        for (int64_t i = 0; i < w->k; i++) {
            if (w->chosen[i] != t) continue;
            int64_t s = g->demand[w->ids[i]];
            if (s == cur) w->jobs_buf[done++] = i;
            else if (s < cur) top = s > top ? s : top;
        }
    }
    return count;
}

static void take(sk_gavel_work *w, int64_t *used, int64_t i, int64_t node, int64_t count) {
    w->owner[*used] = i;
    w->a_nodes[*used] = node;
    w->a_counts[*used] = count;
    (*used)++;
}

/* _assign: lease extension, then the strided walk; returns the job a type ran out for, or -1 */
static int64_t assign(const sk_gavel *g, sk_gavel_work *w, const int64_t *order, int64_t *used,
                      int64_t *kept_total) {
    int32_t m = g->n_types;
    for (int32_t v = 0; v < g->n_nodes; v++) w->free[v] = g->node_gpus[v];
    for (int64_t i = 0; i < w->k; i++) w->kept[i] = 0;
    *used = 0;
    *kept_total = 0;
    for (int32_t o = 0; o < m; o++) {
        int64_t t = order[o];
        int64_t nj = by_scale(g, w, t);
        const int64_t *servers = w->type_nodes + w->type_off[t];
        int64_t n_servers = w->type_off[t + 1] - w->type_off[t], ptr = 0;
        for (int64_t g0 = 0, g1; g0 < nj; g0 = g1) {
            int64_t sf = g->demand[w->ids[w->jobs_buf[g0]]];
            for (g1 = g0; g1 < nj && g->demand[w->ids[w->jobs_buf[g1]]] == sf; g1++) {}
            for (int64_t q = g0; q < g1; q++) {                      /* lease extension */
                int64_t i = w->jobs_buf[q];
                if (w->prev[i] != t) continue;
                int ok = 1;
                for (int64_t e = w->indptr[i]; e < w->indptr[i + 1]; e++)
                    if (w->free[w->nodes[e]] < w->counts[e]) ok = 0;
                if (!ok) continue;
                for (int64_t e = w->indptr[i]; e < w->indptr[i + 1]; e++) {
                    w->free[w->nodes[e]] -= w->counts[e];
                    take(w, used, i, w->nodes[e], w->counts[e]);
                }
                w->kept[i] = 1;
                (*kept_total)++;
            }
            for (int64_t q = g0; q < g1; q++) {                      /* the strided walk */
                int64_t i = w->jobs_buf[q];
                if (w->kept[i] || !w->placeable[i]) continue;
                int64_t need = sf;
                while (need > 0) {
                    if (ptr >= n_servers) return i;
                    int64_t node = servers[ptr];
                    int64_t got = need < w->free[node] ? need : w->free[node];
                    if (got > 0) {
                        w->free[node] -= (int32_t)got;
                        take(w, used, i, node, got);
                        need -= got;
                    }
                    if (w->free[node] == 0) ptr++;
                }
            }
        }
    }
    return -1;
}

/* _plan_csr: the assignment grouped by job, entries in their order within a job */
static void plan_csr(sk_gavel_work *w, int64_t used) {
    int64_t n = w->k;
    for (int64_t i = 0; i <= n; i++) w->p_indptr[i] = 0;
    for (int64_t e = 0; e < used; e++) w->p_indptr[w->owner[e] + 1]++;
    for (int64_t i = 0; i < n; i++) w->p_indptr[i + 1] += w->p_indptr[i];
    for (int64_t i = 0; i < n; i++) w->pos[i] = w->p_indptr[i];
    for (int64_t e = 0; e < used; e++) {
        int64_t at = w->pos[w->owner[e]]++;
        w->p_nodes[at] = (int32_t)w->a_nodes[e];
        w->p_counts[at] = (int32_t)w->a_counts[e];
    }
}

/* ---------------------------------------------------------------- micro-tasks (_micro_tasks) */

static void micro_tasks(sk_gavel *g, sk_gavel_work *w, double now, int64_t n_placed) {
    int32_t m = g->n_types;
    for (int64_t i = 0; i < w->k; i++)
        if (g->to_finish[w->ids[i]]) g->overran[w->ids[i]] = 1;
    memset(g->to_finish, 0, (size_t)g->n_jobs);
    g->credit_start = isnan(g->last_round_end) ? 0.0 : g->last_round_end;
    double round_end = -INFINITY;
    for (int64_t p = 0; p < n_placed; p++) {
        int64_t i = w->placed[p], j = w->ids[i];
        double rate = g->thr[j * m + w->chosen[i]], rem = w->remaining[i];
        double full = floor(rate * g->round_s);
        if (!(full > 0)) full = rate * g->round_s;
        w->finishes[p] = rem <= full && !g->overran[j];
        w->steps[p] = w->finishes[p] ? rem : full;
        w->fin[p] = now + w->steps[p] / rate;
        if (w->finishes[p]) g->to_finish[j] = 1;
        round_end = w->fin[p] > round_end ? w->fin[p] : round_end;
    }
    for (int64_t i = 0; i < w->k; i++) w->scale[i] = 1.0;
    for (int64_t p = 0; p < n_placed; p++) {
        int64_t i = w->placed[p], j = w->ids[i];
        double rate = g->thr[j * m + w->chosen[i]];
        g->credit[j] = w->fin[p] - g->credit_start;
        if (!w->finishes[p]) w->scale[i] = w->steps[p] / (rate * (round_end - now));
    }
    g->round_end = round_end;
    g->last_round_end = round_end;
}

/* ---------------------------------------------------------------- applying the plan */

/* The rate of changed job c: the table's, at its servers' count and slowest speed. */
static double placement_rate(const sk_gavel *g, int64_t j, int64_t mask, int64_t n_nodes,
                             double min_speed) {
    double best = INFINITY;
    int64_t c = n_nodes > 1;
    for (int32_t t = 0; t < g->n_types; t++)
        if ((mask >> t) & 1) {
            double r = g->rate[(j * g->n_types + t) * 2 + c];
            best = r < best ? r : best;
        }
    if (!isfinite(best)) best = 0.0;
    return best * min_speed;
}

/* _apply_plan: the jobs whose placement changed (or whose rate scale must be re-applied), at
 * their rates times the scale; with_scale: the plan has a rate scale (w->scale). */
static int apply_plan(sk_engine *e, sk_gavel *g, sk_gavel_work *w, int with_scale) {
    int64_t n = 0, entries = 0;
    w->c_indptr[0] = 0;
    for (int64_t i = 0; i < w->k; i++) {
        int64_t j = w->ids[i], lo = w->p_indptr[i], hi = w->p_indptr[i + 1];
        int64_t olo = w->indptr[i], ohi = w->indptr[i + 1];
        int diff = (hi - lo) != (ohi - olo);
        for (int64_t q = 0; !diff && q < hi - lo; q++)
            diff = w->p_nodes[lo + q] != w->nodes[olo + q] || w->p_counts[lo + q] != w->counts[olo + q];
        int force = with_scale && w->scale[i] != g->scale_applied[j];
        if (!(diff || (force && hi > lo))) continue;
        int64_t ngpu = 0, nn = 0, mask = 0;
        double min_speed = hi > lo ? INFINITY : 1.0;
        for (int64_t q = lo; q < hi; q++) {
            int32_t node = w->p_nodes[q];
            w->c_nodes[entries] = node;
            w->c_counts[entries] = w->p_counts[q];
            entries++;
            ngpu += w->p_counts[q];
            nn++;
            mask |= (int64_t)1 << g->node_type[node];
            if (g->node_speed[node] < min_speed) min_speed = g->node_speed[node];
        }
        double rate = 0.0, applied = 1.0;
        if (ngpu > 0) {
            if (ngpu != g->demand[j])
                return ske_fail(e, SK_ESTATE, "gavel rounds: job %lld placed on %lld GPUs, asked for %d",
                                (long long)j, (long long)ngpu, g->demand[j]);
            rate = placement_rate(g, j, mask, nn, min_speed);
            if (!(rate > 0)) {
                g->failure_mask = mask;
                return fail(g, SK_GAVEL_ZERO_RATE, j, 0);
            }
            if (with_scale) applied = w->scale[i];
        }
        w->c_ids[n] = j;
        w->c_rates[n] = rate * applied;
        g->scale_applied[j] = applied;
        g->used_types[j] |= mask;
        w->c_indptr[++n] = entries;
    }
    if (n == 0) return SK_OK;
    int rc = sk_engine_apply_shared(e, n, w->c_ids, w->c_indptr, w->c_nodes, w->c_counts,
                                    w->c_rates, NULL);
    return rc < 0 ? rc : SK_OK;
}

/* ---------------------------------------------------------------- one decision */

static int rate_scale_ok(const sk_gavel_work *w) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < w->k; i++) {
        if (!(w->scale[i] >= lo)) lo = w->scale[i];
        if (!(w->scale[i] <= hi)) hi = w->scale[i];
    }
    return w->k == 0 || (lo > 0 && hi < INFINITY);
}

/* GavelRounds._round from the type order on (after a reset, if one was due) */
static int round_rest(sk_engine *e, sk_gavel *g, sk_gavel_work *w, double now, double next_arrival,
                      double *wakeup) {
    int32_t m = g->n_types;
    const int64_t *order;
    if (g->orders) {
        if (g->next_order >= g->n_orders) return SK_GAVEL_NEED_ORDERS;
        order = g->orders + g->next_order++ * m;
        for (int32_t t = 0; t < m; t++)
            if (order[t] < 0 || order[t] >= m)
                return ske_fail(e, SK_EINVAL, "gavel rounds: type order entry %lld is not a type",
                                (long long)order[t]);
    } else {
        order = w->identity;
    }
    priorities(g, w);
    queues(w, m);
    for (int32_t t = 0; t < m; t++) {                  /* GPUs of each type */
        w->left[t] = 0;
        for (int64_t q = w->type_off[t]; q < w->type_off[t + 1]; q++)
            w->left[t] += g->node_gpus[w->type_nodes[q]];
    }
    select_jobs(g, w, order);
    previous_types(g, w);
    int64_t used, kept;
    int64_t bad = assign(g, w, order, &used, &kept);
    if (bad >= 0) return fail(g, SK_GAVEL_CANNOT_ASSIGN, w->ids[bad], g->demand[w->ids[bad]]);
    plan_csr(w, used);
    g->lease_extensions += kept;
    g->rounds++;
    for (int64_t i = 0; i < w->k; i++) g->ran_on[w->ids[i]] = -1;
    int64_t n_placed = 0;
    for (int64_t i = 0; i < w->k; i++)
        if (w->p_indptr[i + 1] != w->p_indptr[i]) {
            w->placed[n_placed++] = i;
            g->ran_on[w->ids[i]] = w->chosen[i];
        }
    if (n_placed == 0) {
        g->round_end = NAN;
        if (w->k > 0 && !isfinite(next_arrival))
            return fail(g, SK_GAVEL_NO_SCHEDULABLE, w->ids[0], 0);
        *wakeup = NAN;
        return apply_plan(e, g, w, 0);
    }
    micro_tasks(g, w, now, n_placed);
    if (!rate_scale_ok(w)) return ske_fail(e, SK_EINVAL, "gavel rounds: a rate scale is not finite and > 0");
    *wakeup = g->round_end;
    return apply_plan(e, g, w, 1);
}

/* RoundClock.schedule up to the reset: SK_GAVEL_NEED_ALLOCATION when one is due */
static int schedule(sk_engine *e, sk_gavel *g, sk_gavel_work *w, double now, double next_arrival,
                    double *wakeup) {
    *wakeup = NAN;
    if (now < g->now_seen) return ske_fail(e, SK_ESTATE, "gavel rounds: time went backwards");
    g->now_seen = now;
    credit_finished(g, w, now - g->credit_start);
    int running = any_running(w);
    int boundary = isnan(g->round_end) || now >= g->round_end * (1 - 1e-12) || !running;
    if (!boundary) {                                   /* _hold: every placement stays */
        for (int64_t i = 0; i <= w->k; i++) w->p_indptr[i] = w->indptr[i];
        for (int64_t q = 0; q < w->n_entries; q++) {
            w->p_nodes[q] = w->nodes[q];
            w->p_counts[q] = w->counts[q];
        }
        return apply_plan(e, g, w, 0);
    }
    credit_running(g, w);
    join(g, w);
    if (!running && !isfinite(next_arrival)) g->last_reset = 0.0;
    int due = now - g->last_reset >= g->reset_interval_s || g->last_reset == 0.0;
    if (g->need_update && due) return SK_GAVEL_NEED_ALLOCATION;
    return round_rest(e, g, w, now, next_arrival, wakeup);
}

/* _Run._mid_round: a point inside a round, on arrivals and completions alone with jobs running */
static int mid_round(const sk_engine *e, const sk_batch *b, const sk_gavel *g) {
    int64_t used, queued, running, done;
    double next_arrival, busy;
    sk_engine_counters(e, &used, &queued, &running, &done, &next_arrival, &busy);
    if ((b->reasons & ~(SK_WHY_ARRIVAL | SK_WHY_COMPLETION)) || running == 0) return 0;
    if (isnan(g->round_end) || !(g->now_seen <= b->now)) return 0;
    return b->now < g->round_end * (1 - 1e-12);
}

static double fgd_now(const sk_engine *e, const sk_gavel *g) {
    double fgd = 0.0;
    for (int32_t v = 0; v < e->n_nodes; v++)
        fgd += g->fgd_weights[g->fgd_base[v] + e->node_cap[v] - e->node_used[v]];
    return fgd;
}

/* _Run.record (and _check_stall) for the point at hand */
static int record(const sk_engine *e, sk_gavel *g, sk_decision_records *rec, double now, int kind,
                  double seconds, double wakeup) {
    int64_t used, queued, running, done;
    double next_arrival, busy;
    sk_engine_counters(e, &used, &queued, &running, &done, &next_arrival, &busy);
    int64_t r = rec->n++;
    rec->time[r] = now;
    rec->used_gpus[r] = used;
    rec->queued[r] = queued;
    rec->running[r] = running;
    rec->fgd[r] = fgd_now(e, g);
    rec->kind[r] = kind;
    rec->seconds[r] = seconds;
    if (queued > 0 && running == 0 && !isfinite(next_arrival) && isnan(wakeup) && g->round_period <= 0)
        return fail(g, SK_GAVEL_IDLE_QUEUED, -1, queued);
    int stalled = queued > 0 && running == 0 && !isfinite(next_arrival);
    g->idle_decisions = stalled ? g->idle_decisions + 1 : 0;
    if (g->idle_decisions == 1) g->stall_since = now;
    if (g->idle_decisions >= g->stall_limit) return fail(g, SK_GAVEL_STALLED, -1, queued);
    return SK_OK;
}

/* _Run.next_point: the kernel passes over the mid-round points (their rows and completions) */
static int next_point(sk_engine *e, sk_batch *b, sk_gavel *g, sk_gavel_work *w, sk_decision_records *rec) {
    if (isnan(g->round_end) || !(g->now_seen <= b->now)) return sk_engine_step(e, b);
    int64_t room = rec->cap - rec->n;
    w->quiet.cap = room < QUIET_CAP ? room : QUIET_CAP;
    w->quiet.n = 0;
    w->quiet.n_completed = 0;
    int status = sk_engine_step_quiet(e, b, g->round_end * (1 - 1e-12), g->fgd_weights, g->fgd_base,
                                      &w->quiet);
    if (status < 0) return status;
    if (w->quiet.n > 0) {
        for (int64_t q = 0; q < w->quiet.n_completed; q++)
            credit_completed(g, w->quiet.completed[q], w->quiet.completed_at[q] - g->credit_start);
        g->now_seen = w->quiet.time[w->quiet.n - 1];
        for (int64_t q = 0; q < w->quiet.n; q++) {
            int64_t r = rec->n++;
            rec->time[r] = w->quiet.time[q];
            rec->used_gpus[r] = w->quiet.used_gpus[q];
            rec->queued[r] = w->quiet.queued[q];
            rec->running[r] = w->quiet.running[q];
            rec->fgd[r] = w->quiet.fgd[q];
            rec->kind[r] = SK_POINT_SKIPPED;
            rec->seconds[r] = 0.0;
        }
        g->idle_decisions = 0;
        g->skipped += w->quiet.n;
    }
    return status;
}

/* One decision point: _Run.decide and record; SK_GAVEL_NEED_ALLOCATION leaves it pending. */
static int decide(sk_engine *e, sk_batch *b, sk_gavel *g, sk_gavel_work *w, sk_decision_records *rec) {
    double now = b->now, wakeup = NAN, t0 = clock_s();
    int64_t used, queued, running, done;
    double next_arrival, busy;
    sk_engine_counters(e, &used, &queued, &running, &done, &next_arrival, &busy);
    int rc;
    if (g->phase == PHASE_RESUME) {
        rc = round_rest(e, g, w, now, next_arrival, &wakeup);
    } else if (mid_round(e, b, g)) {
        for (int64_t q = 0; q < b->n_completed; q++)
            credit_completed(g, b->completed[q], now - g->credit_start);
        g->now_seen = now;
        g->skipped++;
        return record(e, g, rec, now, SK_POINT_SKIPPED, 0.0, NAN);
    } else {
        rc = snapshot(e, w);
        if (rc < 0) return rc;
        rc = schedule(e, g, w, now, next_arrival, &wakeup);
    }
    if (rc == SK_GAVEL_NEED_ALLOCATION || rc == SK_GAVEL_NEED_ORDERS) {
        g->phase = PHASE_RESUME;
        g->paused_seconds += clock_s() - t0;
        return rc;
    }
    if (rc != SK_OK) return rc;
    if (!isnan(wakeup) && wakeup > now) {
        rc = sk_engine_set_timer(e, wakeup);
        if (rc < 0) return rc;
    }
    g->phase = PHASE_DECIDE;
    double seconds = clock_s() - t0 + g->paused_seconds;
    g->paused_seconds = 0.0;
    return record(e, g, rec, now, SK_POINT_DECIDED, seconds, wakeup);
}

int sk_gavel_run(sk_engine *e, sk_batch *b, sk_gavel *g, sk_gavel_work *w, sk_decision_records *rec) {
    if (!e || !b || !g || !w || !rec)
        return SK_EINVAL;
    if (rec->cap < 1 || rec->n < 0 || rec->n > rec->cap || g->n_jobs != w->n_jobs ||
        g->n_types != w->m || g->n_nodes != w->n_nodes)
        return ske_fail(e, SK_EINVAL, "sk_gavel_run: records or sizes do not match the work area");
    for (;;) {
        if (g->phase == PHASE_NEXT) {
            int status = next_point(e, b, g, w, rec);
            if (status < 0 || status == SK_DONE) return status;
            g->phase = PHASE_DECIDE;
        }
        if (rec->n >= rec->cap) return SK_GAVEL_RECORDS_FULL;
        int rc = decide(e, b, g, w, rec);
        if (rc != SK_OK) return rc;
        g->phase = PHASE_NEXT;
        if (rec->n >= rec->cap) return SK_GAVEL_RECORDS_FULL;
    }
}

/* ---------------------------------------------------------------- set-up */

#define NEW(ptr, count) ((ptr) = calloc((size_t)((count) > 0 ? (count) : 1), sizeof *(ptr)))

int sk_gavel_work_new(sk_gavel_work **out, const sk_engine *e, const sk_gavel *g) {
    if (!out || !e || !g || g->n_jobs < 0 || g->n_types < 1 || g->n_types > 62 ||
        g->n_nodes != e->n_nodes || g->n_jobs != e->n_jobs)
        return SK_EINVAL;
    *out = NULL;
    for (int32_t v = 0; v < g->n_nodes; v++)            /* the engine's cluster */
        if (g->node_gpus[v] != e->node_cap[v]) return SK_EINVAL;
    sk_gavel_work *w = calloc(1, sizeof *w);
    if (!w) return SK_ENOMEM;
    int64_t n = g->n_jobs, m = g->n_types, cap = e->total_gpus + 1;
    w->n_jobs = n;
    w->m = g->n_types;
    w->n_nodes = g->n_nodes;
    w->entry_cap = cap;
    int ok = NEW(w->ids, n) && NEW(w->indptr, n + 1) && NEW(w->ngpu, n) && NEW(w->nodes, cap) &&
             NEW(w->counts, cap) && NEW(w->remaining, n) && NEW(w->attained, n) && NEW(w->run_s, n) &&
             NEW(w->queued_since, n) && NEW(w->active, n) && NEW(w->x, n * m) && NEW(w->d, n * m) &&
             NEW(w->got, n * m) && NEW(w->pri, n * m) && NEW(w->key0, n) && NEW(w->key1, n) &&
             NEW(w->key2, n) && NEW(w->bits, n) && NEW(w->queues, n * m) && NEW(w->buf, n) &&
             NEW(w->chosen, n) && NEW(w->prev, n) && NEW(w->left, m) && NEW(w->jobs_buf, n) &&
             NEW(w->placed, n) && NEW(w->placeable, n) && NEW(w->kept, n) && NEW(w->free, g->n_nodes) &&
             NEW(w->type_off, m + 1) && NEW(w->identity, m) && NEW(w->type_nodes, g->n_nodes) &&
             NEW(w->owner, cap) &&
             NEW(w->a_nodes, cap) && NEW(w->a_counts, cap) && NEW(w->pos, n) &&
             NEW(w->p_indptr, n + 1) && NEW(w->p_nodes, cap) && NEW(w->p_counts, cap) &&
             NEW(w->scale, n) && NEW(w->fin, n) && NEW(w->steps, n) && NEW(w->finishes, n) &&
             NEW(w->c_ids, n) && NEW(w->c_indptr, n + 1) && NEW(w->c_nodes, cap) &&
             NEW(w->c_counts, cap) && NEW(w->c_rates, n) && NEW(w->q_time, QUIET_CAP) &&
             NEW(w->q_fgd, QUIET_CAP) && NEW(w->q_used, QUIET_CAP) && NEW(w->q_queued, QUIET_CAP) &&
             NEW(w->q_running, QUIET_CAP) && NEW(w->q_completed, n) && NEW(w->q_at, n);
    if (!ok) {
        sk_gavel_work_free(w);
        return SK_ENOMEM;
    }
    /* each type's servers in cluster order */
    for (int32_t v = 0; v < g->n_nodes; v++) {
        int32_t t = g->node_type[v];
        if (t < 0 || t >= m) {
            sk_gavel_work_free(w);
            return SK_EINVAL;
        }
        w->type_off[t + 1]++;
    }
    for (int64_t t = 0; t < m; t++) w->type_off[t + 1] += w->type_off[t];
    for (int64_t t = 0; t < m; t++) {
        w->left[t] = w->type_off[t];
        w->identity[t] = t;
    }
    for (int32_t v = 0; v < g->n_nodes; v++) w->type_nodes[w->left[g->node_type[v]]++] = v;
    w->quiet = (sk_quiet_rows){.cap = QUIET_CAP, .n = 0, .time = w->q_time, .used_gpus = w->q_used,
                               .queued = w->q_queued, .running = w->q_running, .fgd = w->q_fgd,
                               .job_cap = n, .n_completed = 0, .completed = w->q_completed,
                               .completed_at = w->q_at};
    *out = w;
    return SK_OK;
}

void sk_gavel_work_free(sk_gavel_work *w) {
    if (!w) return;
    void *all[] = {w->ids, w->indptr, w->ngpu, w->nodes, w->counts, w->remaining, w->attained,
                   w->run_s, w->queued_since, w->active, w->x, w->d, w->got, w->pri, w->key0,
                   w->key1, w->key2, w->bits, w->queues, w->buf, w->chosen, w->prev, w->left,
                   w->jobs_buf, w->placed, w->placeable, w->kept, w->free, w->type_off,
                   w->identity, w->type_nodes, w->owner, w->a_nodes, w->a_counts, w->pos, w->p_indptr,
                   w->p_nodes, w->p_counts, w->scale, w->fin, w->steps, w->finishes, w->c_ids,
                   w->c_indptr, w->c_nodes, w->c_counts, w->c_rates, w->q_time,
                   w->q_fgd, w->q_used, w->q_queued, w->q_running, w->q_completed, w->q_at};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    free(w);
}
