/* clustersim event kernel.  See sk_engine.h for the model and the API. */
#include "sk_engine.h"
#include "engine_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sk_job is two cache lines (engine_internal.h); a compile error here if it is not. */
typedef char sk_job_is_two_lines[sizeof(sk_job) == 128 ? 1 : -1];

int ske_fail(sk_engine *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return code;
}

const char *sk_engine_message(const sk_engine *e) { return e ? e->message : "no engine"; }

/* ---------------------------------------------------------------- heap */

static int ev_less(const sk_event *a, const sk_event *b) {
    if (a->t != b->t) return a->t < b->t;
    if (a->kind != b->kind) return a->kind < b->kind;
    return a->seq < b->seq;
}

static void sift_down(sk_engine *e, int64_t i) {
    sk_event x = e->heap[i];
    int64_t n = e->heap_len;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ev_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!ev_less(&e->heap[c], &x)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    e->heap[i] = x;
}

/* Drop completion events made stale by a later change of their job (they would be popped
 * and skipped) and rebuild the heap.  Called when the heap has doubled since the last time,
 * so a run that preempts often keeps a heap of about its live events, at O(1) amortized.
 * Skipping a stale event changes nothing: it only moves the clock to its time on the way. */
static void heap_drop_stale(sk_engine *e) {
    int64_t m = 0;
    for (int64_t i = 0; i < e->heap_len; i++) {
        const sk_event *ev = &e->heap[i];
        if (ev->kind == SK_EV_COMPLETION && ev->version != e->version[ev->job]) continue;
        e->heap[m++] = *ev;
    }
    e->heap_len = m;
    for (int64_t i = m / 2 - 1; i >= 0; i--) sift_down(e, i);
    e->heap_check = 2 * m > 1024 ? 2 * m : 1024;
}

static int heap_push(sk_engine *e, double t, int32_t kind, int64_t job, int64_t version) {
    if (e->heap_len >= e->heap_check) heap_drop_stale(e);
    if (e->heap_len == e->heap_cap) {
        int64_t cap = e->heap_cap ? 2 * e->heap_cap : 64;
        sk_event *h = realloc(e->heap, (size_t)cap * sizeof *h);
        if (!h) return ske_fail(e, SK_ENOMEM, "event heap: out of memory");
        e->heap = h;
        e->heap_cap = cap;
    }
    sk_event ev = {t, kind, e->seq++, job, version};
    int64_t i = e->heap_len++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!ev_less(&ev, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = ev;
    return SK_OK;
}

static sk_event heap_pop(sk_engine *e) {
    sk_event top = e->heap[0];
    e->heap[0] = e->heap[--e->heap_len];
    if (e->heap_len > 0) sift_down(e, 0);
    return top;
}

/* ---------------------------------------------------------------- setup */

/* Stable bottom-up merge sort of n ids, by key[id] (by the id itself if key is NULL); tmp
 * holds n.  Ties keep their order.  No global state, so engines are thread-safe. */
void ske_merge_sort_ids(int64_t *ids, int64_t n, int64_t *tmp, const double *key) {
    int64_t *src = ids, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                int later = key ? key[src[b]] < key[src[a]] : src[b] < src[a];
                dst[o++] = later ? src[b++] : src[a++];
            }
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        int64_t *t = src; src = dst; dst = t;
    }
    if (src != ids) memcpy(ids, src, (size_t)n * sizeof *ids);
}

/* Job ids by arrival time (ties by id, since the ids start in increasing order). */
static int sort_by_arrival(int64_t *ids, int64_t n, const double *key) {
    int64_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) return SK_ENOMEM;
    ske_merge_sort_ids(ids, n, tmp, key);
    free(tmp);
    return SK_OK;
}

void sk_engine_free(sk_engine *e) {
    if (!e) return;
    skn_free(e->pol);
    if (e->job) {
        for (int64_t j = 0; j < e->n_jobs; j++)
            if (e->job[j].pl != e->job[j].pl_one) free(e->job[j].pl);
    }
    free(e->job_block);
    free(e->node_cap); free(e->node_used); free(e->node_shared); free(e->scratch);
    free(e->scratch_shared); free(e->shared_hist);
    free(e->arrival); free(e->work); free(e->arrival_order);
    free(e->finish); free(e->version); free(e->stamp); free(e->active); free(e->heap);
    free(e);
}

/* n job records, zeroed, the first aligned to a cache line (sk_job is two lines). */
static int alloc_jobs(sk_engine *e, size_t n) {
    enum { LINE = 64 };
    e->job_block = calloc(n * sizeof(sk_job) + LINE, 1);
    if (!e->job_block) return SK_ENOMEM;
    uintptr_t at = ((uintptr_t)e->job_block + LINE - 1) & ~(uintptr_t)(LINE - 1);
    e->job = (sk_job *)at;
    return SK_OK;
}

static double first_round_at_or_after(const sk_engine *e, double t, int64_t *k_out) {
    int64_t k = 0;
    if (t > e->start_time) k = (int64_t)floor((t - e->start_time) / e->round_period);
    while (e->start_time + (double)k * e->round_period < t) k++;
    *k_out = k;
    return e->start_time + (double)k * e->round_period;
}

int sk_engine_new(sk_engine **out, int32_t n_nodes, const int32_t *node_gpus,
                  int64_t n_jobs, const double *arrival, const double *work,
                  const double *restart_delay, const int32_t *demand,
                  double round_period, double start_time, int32_t decide_on) {
    if (!out) return SK_EINVAL;
    *out = NULL;
    sk_engine *e = calloc(1, sizeof *e);
    if (!e) return SK_ENOMEM;
    *out = e;  /* caller frees even on error, so that the message is readable */
    if (n_nodes <= 0 || !node_gpus) return ske_fail(e, SK_EINVAL, "cluster has no nodes");
    if (n_jobs < 0 || (n_jobs > 0 && (!arrival || !work || !restart_delay)))
        return ske_fail(e, SK_EINVAL, "job arrays missing");
    if (!(round_period >= 0.0) || !isfinite(round_period))
        return ske_fail(e, SK_EINVAL, "round period must be finite and >= 0, got %g", round_period);
    if (!isfinite(start_time)) return ske_fail(e, SK_EINVAL, "start time must be finite");
    e->n_nodes = n_nodes;
    e->n_jobs = n_jobs;
    e->round_period = round_period;
    e->start_time = start_time;
    e->now = start_time;
    e->decide_on = decide_on & (SK_WHY_ARRIVAL | SK_WHY_COMPLETION);
    size_t nn = (size_t)n_nodes, nj = (size_t)(n_jobs > 0 ? n_jobs : 1);
    e->node_cap = malloc(nn * sizeof(int32_t));
    e->node_used = calloc(nn, sizeof(int32_t));
    e->node_shared = calloc(nn, sizeof(int32_t));
    e->scratch = calloc(nn, sizeof(int64_t));
    e->scratch_shared = calloc(nn, sizeof(int64_t));
    e->arrival = malloc(nj * sizeof(double));
    e->work = malloc(nj * sizeof(double));
    e->arrival_order = malloc(nj * sizeof(int64_t));
    e->finish = malloc(nj * sizeof(double));
    e->stamp = calloc(nj, sizeof(int64_t));
    e->version = calloc(nj, sizeof(int64_t));
    e->active = malloc(nj * sizeof(int64_t));
    if (alloc_jobs(e, nj) < 0 || !e->node_cap || !e->node_used || !e->node_shared || !e->scratch ||
        !e->scratch_shared || !e->arrival ||
        !e->work || !e->arrival_order || !e->finish || !e->version || !e->stamp || !e->active)
        return ske_fail(e, SK_ENOMEM, "out of memory for %lld jobs", (long long)n_jobs);
    for (int32_t n = 0; n < n_nodes; n++) {
        if (node_gpus[n] < 0) return ske_fail(e, SK_EINVAL, "node %d has %d GPUs", n, node_gpus[n]);
        e->node_cap[n] = node_gpus[n];
        e->total_gpus += node_gpus[n];
        if (node_gpus[n] + 1 > e->shared_stride) e->shared_stride = node_gpus[n] + 1;
    }
    e->shared_hist = calloc(nn * (size_t)e->shared_stride, sizeof(int32_t));
    if (!e->shared_hist) return ske_fail(e, SK_ENOMEM, "out of memory for %d nodes", n_nodes);
    for (int64_t j = 0; j < n_jobs; j++) {
        if (!isfinite(arrival[j]) || arrival[j] < start_time)
            return ske_fail(e, SK_EINVAL, "job %lld: arrival %g is not finite or before the start %g",
                        (long long)j, arrival[j], start_time);
        if (!(work[j] > 0.0) || !isfinite(work[j]))
            return ske_fail(e, SK_EINVAL, "job %lld: work %g must be finite and > 0", (long long)j, work[j]);
        if (!(restart_delay[j] >= 0.0) || !isfinite(restart_delay[j]))
            return ske_fail(e, SK_EINVAL, "job %lld: restart delay %g must be finite and >= 0",
                        (long long)j, restart_delay[j]);
        e->arrival[j] = arrival[j];
        e->work[j] = work[j];
        sk_job *x = &e->job[j];
        x->remaining = work[j];
        x->restart_delay = restart_delay[j];
        x->demand = demand ? demand[j] : 1;
        x->first_start = NAN;
        x->queued_since = NAN;
        x->pl = x->pl_one;
        x->pl_capacity = 1;
        e->finish[j] = NAN;
        e->arrival_order[j] = j;
        e->stamp[j] = -1;
    }
    if (n_jobs > 1 && sort_by_arrival(e->arrival_order, n_jobs, e->arrival) < 0)
        return ske_fail(e, SK_ENOMEM, "out of memory sorting arrivals");
    if (round_period > 0.0 && n_jobs > 0) {
        double t = first_round_at_or_after(e, e->arrival[e->arrival_order[0]], &e->round_index);
        int rc = heap_push(e, t, SK_EV_ROUND, -1, 0);
        if (rc < 0) return rc;
    }
    return SK_OK;
}

/* ---------------------------------------------------------------- jobs */

/* Job j's GPU-seconds, run seconds and remaining work at time t >= last_update, computed
 * from its state at its last update.  Reading never writes: the sums then depend only on
 * when j's own allocation changed, not on how often anyone looked (so engine shortcuts
 * that skip decisions cannot change a result by rounding). */
void ske_live(const sk_engine *e, int64_t j, double t, double *gpu_s, double *run_s,
                 double *remaining) {
    const sk_job *x = &e->job[j];
    double gs = x->gpu_seconds, rs = x->run_seconds, rem = x->remaining;
    if (x->state == SK_JOB_RUNNING) {
        double dt = t - x->last_update;
        gs += (x->shared ? 0.5 * (double)x->ngpu : (double)x->ngpu) * dt;
        rs += dt;
        double begin = x->last_update > x->resume_at ? x->last_update : x->resume_at;
        if (t > begin) rem -= x->rate * (t - begin);
    }
    *gpu_s = gs;
    *run_s = rs;
    *remaining = rem;
}

/* Bring job j's totals up to time t (before its allocation changes or it completes). */
static void accrue(sk_engine *e, int64_t j, double t) {
    ske_live(e, j, t, &e->job[j].gpu_seconds, &e->job[j].run_seconds, &e->job[j].remaining);
    e->job[j].last_update = t;
}

/* GPUs node n's shared placements take: two a GPU, a job's own workers on distinct GPUs
 * (a lone shared job keeps all its GPUs): max(largest placement, ceil(slots / 2)), the fewest
 * GPUs that hold them (fill 2g positions of g GPUs cyclically, a job's run in a row). */
static int32_t shared_gpus(const sk_engine *e, int32_t n) {
    const int32_t *h = e->shared_hist + (size_t)n * (size_t)e->shared_stride;
    int32_t top = e->shared_stride - 1;
    while (top > 0 && h[top] == 0) top--;
    int32_t half = (e->node_shared[n] + 1) / 2;
    return top > half ? top : half;
}

/* Tally (sign +1) or untally (-1) a shared placement of count GPUs on node n. */
static void shared_tally(sk_engine *e, int32_t n, int32_t count, int32_t sign) {
    e->shared_hist[(size_t)n * (size_t)e->shared_stride + (size_t)count] += sign;
    e->node_shared[n] += sign * count;
}

/* Node n's use changes by count GPUs of a placement (count < 0: released); shared: the
 * placement's GPUs are space-shared (shared_gpus). */
static void node_take(sk_engine *e, int32_t n, int32_t count, int shared) {
    int32_t before = e->node_used[n], delta = count;
    if (shared) {
        int32_t old = shared_gpus(e, n);
        shared_tally(e, n, count > 0 ? count : -count, count > 0 ? 1 : -1);
        delta = shared_gpus(e, n) - old;
    }
    e->node_used[n] += delta;
    e->used_gpus += delta;
    e->held_halves += (int64_t)count * (shared ? 1 : 2);
    if (e->pol && delta) skn_on_node_change(e, n, before);
}

static void release(sk_engine *e, int64_t j) {
    sk_job *x = &e->job[j];
    const int32_t *p = x->pl;
    for (int32_t k = 0; k < x->pl_len; k++) node_take(e, p[2 * k], -p[2 * k + 1], x->shared);
    x->pl_len = 0;
    x->ngpu = 0;
    x->shared = 0;
}

static void advance(sk_engine *e, double t) {
    if (t > e->now) {
        e->busy_gpu_seconds += 0.5 * (double)e->held_halves * (t - e->now);
        e->now = t;
    }
}

/* First position in the sorted active list whose id is >= j. */
static int64_t active_lower_bound(const sk_engine *e, int64_t j) {
    int64_t lo = 0, hi = e->n_active;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e->active[mid] < j) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static void active_insert(sk_engine *e, int64_t j) {
    int64_t pos = e->n_active;          /* arrivals mostly come in id order */
    if (pos > 0 && e->active[pos - 1] > j) pos = active_lower_bound(e, j);
    memmove(e->active + pos + 1, e->active + pos, (size_t)(e->n_active - pos) * sizeof(int64_t));
    e->active[pos] = j;
    e->n_active++;
}

static void active_remove(sk_engine *e, int64_t j) {
    int64_t pos = active_lower_bound(e, j);
    memmove(e->active + pos, e->active + pos + 1, (size_t)(e->n_active - pos - 1) * sizeof(int64_t));
    e->n_active--;
}

static int complete(sk_engine *e, int64_t j, sk_batch *b) {
    if (e->job[j].state != SK_JOB_RUNNING)
        return ske_fail(e, SK_ESTATE, "job %lld completes but is not running (state %d)",
                    (long long)j, e->job[j].state);
    accrue(e, j, e->now);
    e->job[j].remaining = 0.0;
    e->finish[j] = e->now;
    e->job[j].state = SK_JOB_DONE;
    release(e, j);
    e->job[j].rate = 0.0;
    e->version[j]++;
    e->n_running--;
    e->n_done++;
    active_remove(e, j);
    b->completed[b->n_completed++] = j;
    if (e->pol) skn_on_complete(e, j);
    return SK_OK;
}

static void arrive(sk_engine *e, int64_t j, sk_batch *b) {
    e->job[j].state = SK_JOB_QUEUED;
    e->job[j].last_update = e->now;
    e->job[j].queued_since = e->now;
    e->n_queued++;
    active_insert(e, j);
    b->arrived[b->n_arrived++] = j;
    if (e->pol) skn_on_arrival(e, j);
}

static int schedule_next_round(sk_engine *e) {
    if (e->n_done == e->n_jobs) return SK_OK;
    int64_t k = e->round_index + 1;
    double t = e->start_time + (double)k * e->round_period;
    if (e->n_queued + e->n_running == 0 && e->next_arrival < e->n_jobs) {
        int64_t k2;
        double ta = first_round_at_or_after(e, e->arrival[e->arrival_order[e->next_arrival]], &k2);
        if (k2 > k) { k = k2; t = ta; }
    }
    e->round_index = k;
    return heap_push(e, t, SK_EV_ROUND, -1, 0);
}

/* ---------------------------------------------------------------- step */

int sk_engine_step(sk_engine *e, sk_batch *b) {
    if (!e || !b || (e->n_jobs > 0 && (!b->arrived || !b->completed))) return SK_EINVAL;
    b->n_arrived = 0;
    b->n_completed = 0;
    b->reasons = 0;
    for (;;) {
        int have_arrival = e->next_arrival < e->n_jobs;
        double ta = have_arrival ? e->arrival[e->arrival_order[e->next_arrival]] : INFINITY;
        int use_heap = 0;
        if (e->heap_len > 0) {
            const sk_event *top = &e->heap[0];
            use_heap = !have_arrival || top->t < ta ||
                       (top->t == ta && top->kind < SK_EV_ARRIVAL);
        }
        if (!use_heap && !have_arrival) {
            b->now = e->now;
            if (e->n_done == e->n_jobs) return SK_DONE;
            if (b->reasons) return SK_DECISION;
            return ske_fail(e, SK_ESTALL,
                        "stalled at t=%.17g: %lld jobs queued, %lld running and nothing left "
                        "that can happen (no arrival, completion, round or timer)",
                        e->now, (long long)e->n_queued, (long long)e->n_running);
        }
        double t = use_heap ? e->heap[0].t : ta;
        if (b->reasons && t > e->now) {
            b->now = e->now;
            return SK_DECISION;
        }
        advance(e, t);
        if (!use_heap) {
            arrive(e, e->arrival_order[e->next_arrival++], b);
            b->reasons |= e->decide_on & SK_WHY_ARRIVAL;
            continue;
        }
        sk_event ev = heap_pop(e);
        int rc = SK_OK;
        switch (ev.kind) {
        case SK_EV_COMPLETION:
            if (ev.version != e->version[ev.job] || e->job[ev.job].state != SK_JOB_RUNNING) break;
            rc = complete(e, ev.job, b);
            b->reasons |= e->decide_on & SK_WHY_COMPLETION;
            break;
        case SK_EV_ROUND:
            if (e->n_queued + e->n_running > 0) b->reasons |= SK_WHY_ROUND;
            rc = schedule_next_round(e);
            break;
        case SK_EV_TIMER:
            if (e->n_done < e->n_jobs) b->reasons |= SK_WHY_TIMER;
            break;
        default:
            rc = ske_fail(e, SK_ESTATE, "unknown event kind %d", ev.kind);
        }
        if (rc < 0) return rc;
        if (e->n_done == e->n_jobs) {
            b->now = e->now;
            return SK_DONE;
        }
    }
}

static int quiet_point(const sk_engine *e, const sk_batch *b, double until,
                       const sk_quiet_rows *q) {
    return !(b->reasons & ~(SK_WHY_ARRIVAL | SK_WHY_COMPLETION)) && e->n_running > 0 &&
           b->now < until && q->n < q->cap && q->n_completed + b->n_completed <= q->job_cap;
}

static void record_quiet(const sk_engine *e, const sk_batch *b, const double *fgd_weights,
                         const int64_t *fgd_base, sk_quiet_rows *q) {
    double fgd = 0.0;
    for (int32_t n = 0; n < e->n_nodes; n++)
        fgd += fgd_weights[fgd_base[n] + e->node_cap[n] - e->node_used[n]];
    int64_t i = q->n++;
    q->time[i] = b->now;
    q->used_gpus[i] = e->used_gpus;
    q->queued[i] = e->n_queued;
    q->running[i] = e->n_running;
    q->fgd[i] = fgd;
    for (int64_t k = 0; k < b->n_completed; k++) {
        q->completed[q->n_completed] = b->completed[k];
        q->completed_at[q->n_completed++] = b->now;
    }
}

int sk_engine_step_quiet(sk_engine *e, sk_batch *b, double until, const double *fgd_weights,
                         const int64_t *fgd_base, sk_quiet_rows *q) {
    if (!e || !b || !fgd_weights || !fgd_base || !q || q->cap < 0 || q->job_cap < 0 ||
        (q->cap > 0 && (!q->time || !q->used_gpus || !q->queued || !q->running || !q->fgd)) ||
        (q->job_cap > 0 && (!q->completed || !q->completed_at)))
        return SK_EINVAL;
    q->n = 0;
    q->n_completed = 0;
    for (;;) {
        int rc = sk_engine_step(e, b);
        if (rc != SK_DECISION || !quiet_point(e, b, until, q)) return rc;
        record_quiet(e, b, fgd_weights, fgd_base, q);
    }
}

/* ---------------------------------------------------------------- apply */

static int store_placement(sk_engine *e, int64_t j, const int32_t *nodes,
                           const int32_t *counts, int64_t len, int shared) {
    sk_job *x = &e->job[j];
    if (len > x->pl_capacity) {
        int32_t *p = realloc(x->pl == x->pl_one ? NULL : x->pl, (size_t)len * 2 * sizeof(int32_t));
        if (!p) return ske_fail(e, SK_ENOMEM, "placement of job %lld: out of memory", (long long)j);
        x->pl = p;
        x->pl_capacity = (int32_t)len;
    }
    int32_t total = 0;
    for (int64_t k = 0; k < len; k++) {
        x->pl[2 * k] = nodes[k];
        x->pl[2 * k + 1] = counts[k];
        node_take(e, nodes[k], counts[k], shared);
        total += counts[k];
    }
    x->pl_len = (int32_t)len;
    x->ngpu = total;
    x->shared = (int8_t)(shared != 0);
    return SK_OK;
}

static int same_placement(const sk_engine *e, int64_t j, const int32_t *nodes,
                          const int32_t *counts, int64_t len, int shared) {
    if (e->job[j].pl_len != len || e->job[j].shared != (shared != 0)) return 0;
    for (int64_t k = 0; k < len; k++)
        if (e->job[j].pl[2 * k] != nodes[k] || e->job[j].pl[2 * k + 1] != counts[k]) return 0;
    return 1;
}

static int validate_capacity(sk_engine *e, int64_t n, const int64_t *ids, const int64_t *indptr,
                             const int32_t *nodes, const int32_t *counts, const int8_t *shared);

static int validate_apply(sk_engine *e, int64_t n, const int64_t *ids, const int64_t *indptr,
                          const int32_t *nodes, const int32_t *counts, const double *rates,
                          const int8_t *shared) {
    e->apply_count++;
    if (indptr[0] != 0) return ske_fail(e, SK_EINVAL, "indptr[0] must be 0");
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ids[i];
        if (j < 0 || j >= e->n_jobs) return ske_fail(e, SK_EINVAL, "job id %lld out of range", (long long)j);
        if (e->stamp[j] == e->apply_count)
            return ske_fail(e, SK_EINVAL, "job %lld listed twice", (long long)j);
        e->stamp[j] = e->apply_count;
        if (e->job[j].state == SK_JOB_FUTURE)
            return ske_fail(e, SK_ESTATE, "job %lld allocated at t=%.17g before its arrival %.17g",
                        (long long)j, e->now, e->arrival[j]);
        if (e->job[j].state == SK_JOB_DONE)
            return ske_fail(e, SK_ESTATE, "job %lld allocated after it finished", (long long)j);
        if (indptr[i + 1] < indptr[i])
            return ske_fail(e, SK_EINVAL, "indptr decreases at job %lld", (long long)j);
        for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
            if (nodes[k] < 0 || nodes[k] >= e->n_nodes)
                return ske_fail(e, SK_EINVAL, "job %lld: node %d out of range", (long long)j, nodes[k]);
            if (counts[k] <= 0)
                return ske_fail(e, SK_EINVAL, "job %lld: GPU count %d on node %d", (long long)j,
                            counts[k], nodes[k]);
            if (k > indptr[i] && nodes[k] <= nodes[k - 1])
                return ske_fail(e, SK_EINVAL, "job %lld: nodes not strictly increasing", (long long)j);
            if (counts[k] > e->node_cap[nodes[k]])      /* more than the node has, whatever else */
                return ske_fail(e, SK_ECAPACITY, "node %d would hold %d GPUs of %d (job %lld at t=%.17g)",
                                nodes[k], counts[k], e->node_cap[nodes[k]], (long long)j, e->now);
        }
        if (indptr[i + 1] > indptr[i] && !(rates[i] > 0.0 && isfinite(rates[i])))
            return ske_fail(e, SK_EINVAL, "job %lld: rate %g must be finite and > 0",
                        (long long)j, rates[i]);
    }
    return validate_capacity(e, n, ids, indptr, nodes, counts, shared);
}

/* Remember node n's shared GPUs before an apply's tentative changes (once per node). */
static void note_shared_before(sk_engine *e, int32_t n) {
    if (e->scratch_shared[n] == 0) e->scratch_shared[n] = 1 + shared_gpus(e, n);
}

/* Tally (sign +1) or untally (-1) the old shared placements of the listed jobs and their new
 * ones with the opposite sign: the shared tallies as they would be after the apply (+1), or
 * back as they were (-1). */
static void tally_apply(sk_engine *e, int64_t n, const int64_t *ids, const int64_t *indptr,
                        const int32_t *nodes, const int32_t *counts, const int8_t *shared,
                        int32_t sign) {
    for (int64_t i = 0; i < n; i++) {
        const sk_job *x = &e->job[ids[i]];
        if (x->shared)
            for (int32_t k = 0; k < x->pl_len; k++) shared_tally(e, x->pl[2 * k], x->pl[2 * k + 1], -sign);
        if (shared && shared[i])
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) shared_tally(e, nodes[k], counts[k], sign);
    }
}

/* Capacity: a node's new use = used - old placements + new placements, exclusive GPUs
 * (scratch) and shared ones (tallied tentatively, shared_gpus) apart. */
static int validate_capacity(sk_engine *e, int64_t n, const int64_t *ids, const int64_t *indptr,
                             const int32_t *nodes, const int32_t *counts, const int8_t *shared) {
    int64_t *delta = e->scratch;
    for (int64_t i = 0; i < n; i++) {
        const sk_job *x = &e->job[ids[i]];
        for (int32_t k = 0; k < x->pl_len; k++) {
            if (x->shared) note_shared_before(e, x->pl[2 * k]);
            else delta[x->pl[2 * k]] -= x->pl[2 * k + 1];
        }
        for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
            if (shared && shared[i]) note_shared_before(e, nodes[k]);
            else delta[nodes[k]] += counts[k];
        }
    }
    tally_apply(e, n, ids, indptr, nodes, counts, shared, 1);
    int rc = SK_OK;
    for (int64_t i = 0; i < n && rc == SK_OK; i++) {
        for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
            int32_t node = nodes[k];
            int64_t before = e->scratch_shared[node] ? e->scratch_shared[node] - 1 : 0;
            int64_t after = e->scratch_shared[node] ? shared_gpus(e, node) : 0;
            int64_t use = e->node_used[node] + delta[node] - before + after;
            if (use > e->node_cap[node]) {
                rc = ske_fail(e, SK_ECAPACITY,
                          "node %d would hold %lld GPUs of %d (job %lld at t=%.17g)", node,
                          (long long)use, e->node_cap[node], (long long)ids[i], e->now);
                break;
            }
        }
    }
    tally_apply(e, n, ids, indptr, nodes, counts, shared, -1);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ids[i];
        for (int32_t k = 0; k < e->job[j].pl_len; k++) delta[e->job[j].pl[2 * k]] = e->scratch_shared[e->job[j].pl[2 * k]] = 0;
        for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) delta[nodes[k]] = e->scratch_shared[nodes[k]] = 0;
    }
    return rc;
}

/* Job j runs at rate from now on: a new version (unless it has no live completion event:
 * fresh), and its completion event, unless that falls more than defer_after after its
 * progress resumes (then deferred: ske_push_deferred).
 *
 * Versions: an event in the heap is live when its version is its job's.  A job has a live
 * event only while it runs, its event pushed (not deferred); a new version is needed only to
 * retire such an event, so a job that waits (wait_again: none if it was deferred) or a
 * deferred one keeps its version.  At 10^5 jobs each version is a cache miss, and most LAS
 * placements and preemptions are of deferred jobs. */
static int push_completion(sk_engine *e, int64_t j, double rate, double defer_after, int fresh) {
    sk_job *x = &e->job[j];
    x->rate = rate;
    if (!fresh) e->version[j]++;
    double begin = x->resume_at > e->now ? x->resume_at : e->now;
    double rem = x->remaining > 0.0 ? x->remaining : 0.0;
    x->deferred = rem / rate > defer_after;
    if (x->deferred) return SK_OK;
    return heap_push(e, begin + rem / rate, SK_EV_COMPLETION, j, e->version[j]);
}

/* Only start_on defers, and it sets resume_at >= now (restart delays are >= 0), so the
 * event's begin is resume_at, as push_completion took it; remaining and rate have not
 * changed since (they change only with a new version, which clears the flag). */
int ske_push_deferred(sk_engine *e, int64_t j) {
    sk_job *x = &e->job[j];
    if (!x->deferred) return SK_OK;
    x->deferred = 0;
    double rem = x->remaining > 0.0 ? x->remaining : 0.0;
    double t = x->resume_at + rem / x->rate;
    if (!(t > e->now))
        return ske_fail(e, SK_ESTATE, "job %lld: its deferred completion (t=%.17g) was not pushed "
                        "before it (now %.17g)", (long long)j, t, e->now);
    return heap_push(e, t, SK_EV_COMPLETION, j, e->version[j]);
}

/* Phase 1 of apply: release the GPUs of running jobs whose placement changes. */
static void release_changed(sk_engine *e, int64_t n, const int64_t *ids, const int64_t *indptr,
                            const int32_t *nodes, const int32_t *counts, const int8_t *shared) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ids[i];
        int64_t len = indptr[i + 1] - indptr[i];
        if (e->job[j].state != SK_JOB_RUNNING) continue;
        if (len > 0 && same_placement(e, j, nodes + indptr[i], counts + indptr[i], len,
                                      shared && shared[i])) continue;
        accrue(e, j, e->now);
        release(e, j);
        e->job[j].moved = 1;
    }
}

/* Running job j, whose GPUs were released (moved), waits again. */
static void wait_again(sk_engine *e, int64_t j) {
    sk_job *x = &e->job[j];
    x->state = SK_JOB_QUEUED;
    x->queued_since = e->now;
    e->n_running--;
    e->n_queued++;
    x->rate = 0.0;
    if (!x->deferred) e->version[j]++;      /* its event retired (push_completion) */
    x->deferred = 0;
}

/* Job j, queued or released (moved), starts on its new placement (len > 0) at rate. */
static int start_on(sk_engine *e, int64_t j, const int32_t *nodes, const int32_t *counts,
                    int64_t len, double rate, double defer_after, int shared) {
    sk_job *x = &e->job[j];
    accrue(e, j, e->now);
    int fresh = x->state == SK_JOB_QUEUED;      /* a waiting job has no live event */
    if (fresh) {
        x->state = SK_JOB_RUNNING;
        e->n_queued--;
        e->n_running++;
    }
    if (isnan(x->first_start)) {
        x->first_start = e->now;
        x->resume_at = e->now + (e->first_start_delay ? x->restart_delay : 0.0);
    } else {
        x->restarts++;
        x->resume_at = e->now + x->restart_delay;
    }
    int rc = store_placement(e, j, nodes, counts, len, shared);
    if (rc < 0) return rc;
    return push_completion(e, j, rate, defer_after, fresh);
}

/* Phase 2 of apply: give job j its new placement (len may be 0: preempt). */
static int take_new(sk_engine *e, int64_t j, const int32_t *nodes, const int32_t *counts,
                    int64_t len, double rate, int shared) {
    int moved = e->job[j].moved;
    e->job[j].moved = 0;
    accrue(e, j, e->now);
    if (len == 0) {
        if (moved) {
            wait_again(e, j);
            return SK_OK;
        }
        e->job[j].rate = 0.0;
        e->job[j].deferred = 0;
        e->version[j]++;
        return SK_OK;
    }
    if (e->job[j].state == SK_JOB_RUNNING && !moved)   /* same placement, new rate */
        return push_completion(e, j, rate, INFINITY, 0);
    return start_on(e, j, nodes, counts, len, rate, INFINITY, shared);
}

/* A plan built by the native policy (sk_native.c), applied as built: no validation (its
 * preempted and moved jobs run, its placed ones wait or move, the placements fit: the
 * policy built them from the kernel's own state) and no sort by job id (each job's changes
 * are its own; only the order of equal-time completion events could differ, and those are
 * processed together before the next decision, in an order nothing depends on).  Results
 * are those of sk_engine_apply on the same plan (tests: the policy's check_plans). */
int ske_apply_plan(sk_engine *e, const ske_plan *plan) {
    for (int64_t k = 0; k < plan->n_preempt + plan->n_moved; k++) {   /* phase 1: release */
        int64_t j = k < plan->n_preempt ? plan->preempt[k] : plan->moved[k - plan->n_preempt];
        accrue(e, j, e->now);
        release(e, j);
    }
    for (int64_t k = 0; k < plan->n_preempt; k++) wait_again(e, plan->preempt[k]);
    for (int64_t k = 0; k < plan->n_place; k++) {
        int64_t lo = plan->place_ptr[k];
        int rc = start_on(e, plan->place[k], plan->nodes + lo, plan->counts + lo,
                          plan->place_ptr[k + 1] - lo, plan->rates[k], plan->defer_after, 0);
        if (rc < 0) return rc;
    }
    return SK_OK;
}

int sk_engine_apply(sk_engine *e, int64_t n, const int64_t *job_ids,
                    const int64_t *indptr, const int32_t *nodes,
                    const int32_t *counts, const double *rates) {
    return sk_engine_apply_shared(e, n, job_ids, indptr, nodes, counts, rates, NULL);
}

int sk_engine_apply_shared(sk_engine *e, int64_t n, const int64_t *job_ids,
                           const int64_t *indptr, const int32_t *nodes,
                           const int32_t *counts, const double *rates, const int8_t *shared) {
    if (!e || n < 0) return SK_EINVAL;
    if (n == 0) return SK_OK;
    if (!job_ids || !indptr || !rates || (indptr[n] > 0 && (!nodes || !counts)))
        return ske_fail(e, SK_EINVAL, "apply: missing arrays");
    int rc = validate_apply(e, n, job_ids, indptr, nodes, counts, rates, shared);
    if (rc < 0) return rc;
    release_changed(e, n, job_ids, indptr, nodes, counts, shared);
    for (int64_t i = 0; i < n; i++) {
        rc = take_new(e, job_ids[i], nodes + indptr[i], counts + indptr[i],
                      indptr[i + 1] - indptr[i], rates[i], shared && shared[i]);
        if (rc < 0) return rc;
    }
    return SK_OK;
}

int sk_engine_set_timer(sk_engine *e, double t) {
    if (!e) return SK_EINVAL;
    if (!(t > e->now) || !isfinite(t))
        return ske_fail(e, SK_EINVAL, "timer at %.17g is not after now (%.17g)", t, e->now);
    return heap_push(e, t, SK_EV_TIMER, -1, 0);
}

int sk_engine_set_first_start_delay(sk_engine *e, int32_t on) {
    if (!e) return SK_EINVAL;
    e->first_start_delay = on != 0;
    return SK_OK;
}

/* ---------------------------------------------------------------- queries */

/* Live state of the n given jobs at the current time (read only, see live()). */
static int query(sk_engine *e, int64_t n, const int64_t *ids,
                    int32_t *ngpu, double *remaining, double *attained_gpu_s,
                    double *run_seconds, double *queued_since) {
    if (!e) return SK_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ids[i];
        if (j < 0 || j >= e->n_jobs) return ske_fail(e, SK_EINVAL, "query: job id %lld", (long long)j);
        double gpu_s, run_s, rem;
        ske_live(e, j, e->now, &gpu_s, &run_s, &rem);
        if (ngpu) ngpu[i] = e->job[j].ngpu;
        if (remaining) remaining[i] = rem > 0.0 ? rem : 0.0;
        if (attained_gpu_s) attained_gpu_s[i] = gpu_s;
        if (run_seconds) run_seconds[i] = run_s;
        if (queued_since) queued_since[i] = e->job[j].state == SK_JOB_QUEUED ? e->job[j].queued_since : NAN;
    }
    return SK_OK;
}

static int placements(const sk_engine *e, int64_t n, const int64_t *ids,
                      int64_t *indptr, int32_t *nodes, int32_t *counts);

int sk_engine_snapshot(sk_engine *e, int32_t queued_only, int64_t job_cap, int64_t entry_cap,
                       int64_t *ids, int32_t *ngpu, double *remaining, double *attained_gpu_s,
                       double *run_seconds, double *queued_since, int64_t *indptr,
                       int32_t *nodes, int32_t *counts, int64_t *n_active,
                       int64_t *n_entries) {
    if (!e || !n_active || !n_entries) return SK_EINVAL;
    int64_t k = queued_only ? e->n_queued : e->n_active, entries = 0;
    if (!queued_only)
        for (int64_t i = 0; i < k; i++) entries += e->job[e->active[i]].pl_len;
    *n_active = k;
    *n_entries = entries;
    if (k > job_cap || entries > entry_cap) return SK_EINVAL;
    if (queued_only) {
        int64_t m = 0;
        for (int64_t i = 0; i < e->n_active; i++)
            if (e->job[e->active[i]].state == SK_JOB_QUEUED) ids[m++] = e->active[i];
        if (m != k) return ske_fail(e, SK_ESTATE, "queued count %lld but %lld queued jobs found",
                                (long long)k, (long long)m);
    } else {
        memcpy(ids, e->active, (size_t)k * sizeof(int64_t));
    }
    int rc = query(e, k, ids, ngpu, remaining, attained_gpu_s, run_seconds, queued_since);
    if (rc < 0) return rc;
    return placements(e, k, ids, indptr, nodes, counts);
}

/* Placement CSR of the n given jobs (indptr has n + 1 entries). */
static int placements(const sk_engine *e, int64_t n, const int64_t *ids,
                         int64_t *indptr, int32_t *nodes, int32_t *counts) {
    if (!e) return SK_EINVAL;
    indptr[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = ids[i];
        if (j < 0 || j >= e->n_jobs) return SK_EINVAL;
        int64_t o = indptr[i];
        for (int32_t k = 0; k < e->job[j].pl_len; k++) {
            nodes[o + k] = e->job[j].pl[2 * k];
            counts[o + k] = e->job[j].pl[2 * k + 1];
        }
        indptr[i + 1] = o + e->job[j].pl_len;
    }
    return SK_OK;
}

double sk_engine_now(const sk_engine *e) { return e ? e->now : NAN; }

int64_t sk_engine_min_queued_demand(const sk_engine *e) {
    if (!e) return SK_EINVAL;
    int64_t best = INT64_MAX;
    for (int64_t i = 0; i < e->n_active; i++) {
        int64_t j = e->active[i];
        if (e->job[j].state == SK_JOB_QUEUED && e->job[j].demand < best) best = e->job[j].demand;
    }
    return best;
}

int sk_engine_node_free(const sk_engine *e, int32_t *free_out) {
    if (!e) return SK_EINVAL;
    for (int32_t n = 0; n < e->n_nodes; n++) free_out[n] = e->node_cap[n] - e->node_used[n];
    return SK_OK;
}

int sk_engine_counters(const sk_engine *e, int64_t *used_gpus, int64_t *n_queued,
                       int64_t *n_running, int64_t *n_done, double *next_arrival,
                       double *busy_gpu_seconds) {
    if (!e) return SK_EINVAL;
    *used_gpus = e->used_gpus;
    *n_queued = e->n_queued;
    *n_running = e->n_running;
    *n_done = e->n_done;
    *next_arrival = e->next_arrival < e->n_jobs ? e->arrival[e->arrival_order[e->next_arrival]]
                                                : INFINITY;
    *busy_gpu_seconds = e->busy_gpu_seconds;
    return SK_OK;
}

int sk_engine_results(sk_engine *e, sk_results *out) {
    if (!e || !out) return SK_EINVAL;
    double total = 0.0;
    for (int64_t j = 0; j < e->n_jobs; j++) {
        out->first_start[j] = e->job[j].first_start;
        out->finish[j] = e->finish[j];
        out->gpu_seconds[j] = e->job[j].gpu_seconds;
        out->run_seconds[j] = e->job[j].run_seconds;
        out->restarts[j] = e->job[j].restarts;
        out->state[j] = e->job[j].state;
        total += e->job[j].gpu_seconds;
    }
    if (e->n_done != e->n_jobs) return SK_OK;
    if (e->used_gpus != 0)
        return ske_fail(e, SK_ESTATE, "all jobs done but %lld GPUs still in use", (long long)e->used_gpus);
    double tol = 1e-9 * (e->busy_gpu_seconds > 1.0 ? e->busy_gpu_seconds : 1.0);
    if (fabs(total - e->busy_gpu_seconds) > tol)
        return ske_fail(e, SK_ESTATE, "GPU-time does not add up: jobs %.17g, cluster %.17g",
                    total, e->busy_gpu_seconds);
    return SK_OK;
}
