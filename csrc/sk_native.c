/* Native policies inside the event kernel.  See sk_native.h for the model.
 *
 * Each step mirrors a Python twin, named in its comment; the tests hold the two
 * job by job (tests/test_native_policies.py). */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#include "sk_native.h"
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { double cross; int64_t job, slot; double tol; } crossing;   /* a Tiresias demotion */

/* A running job with what its key needs, fixed between its placements (in native runs a
 * running job's totals change only when its placement does), kept contiguous so that a
 * decision reads the running jobs in one sequential pass. */
typedef struct {
    double ka, arrival;                 /* key (kq, kflag, ka, arrival, job) */
    int64_t job;
    int32_t kq, demand, ngpu;
    int8_t kflag;
    int8_t type;                        /* its GPU type (native placements have one) */
    double gs, rem, last, begin, rate;  /* ske_live's inputs */
    double work, est;
} run_slot;

/* A sorted run a[lo, hi) of running jobs; demand > 0 when they all hold that many GPUs
 * (LAS's classes, whose keys are computed when read: las_key). */
typedef struct {
    run_slot *a;
    int64_t lo, hi, cut;        /* cut: where preemptions start (select_jobs) */
    int32_t demand;
    double t;                   /* LAS: the time its keys are read at */
} run_seg;

/* A waiting job with its key (kq, kflag, ka, arrival, job), kept in the heap entry so that
 * heap operations read contiguous memory. */
typedef struct { double ka, arrival; int64_t job; int32_t kq; int8_t kflag; } wait_key;

/* A sorted run of waiting entries, [lo, hi) in its bucket's region. */
typedef struct { int64_t lo, hi; } wait_run;
enum { MAX_RUNS = 64 };

typedef struct {            /* rate cache entry */
    int32_t model, ngpu, n_nodes, used;
    int64_t mask;
    double speed, rate;     /* rate NaN: asked of the oracle, not answered yet */
} rate_entry;

struct sk_policy {
    sk_policy_spec spec;
    double yield_s;                     /* sk_native_set_yield; < 0: never yield */
    double *thr, *thr_lo;               /* Tiresias limits and their demotion test values */
    /* inputs */
    int32_t *model, *bucket, *node_type;
    double *est, *node_speed;
    int32_t n_types, n_buckets;
    /* Tiresias memory */
    int32_t *queue;
    double *entered;
    int8_t *fresh;
    crossing *dem;
    /* queued jobs: one queue of sorted runs per bucket (distinct request and allowed types) */
    int32_t *bucket_demand;
    wait_key *wq, *wtmp;                /* the buckets' regions; merge scratch */
    int64_t *woff, *wcap, *wend, *wnew; /* region, its used top, unsorted entries below the top */
    wait_run *runs;                     /* MAX_RUNS per bucket, oldest first */
    int32_t *n_runs, *best_run, *next_run;   /* runs; the one with the smallest head, the next */
    int64_t *n_waiting;
    int64_t *cls_off;                   /* each bucket's slice of per-class arrays (its jobs) */
    /* running jobs, in the last decision's order (SRTF, Tiresias) */
    run_slot *slots, *slots_tmp;
    int64_t n_slots;
    /* LAS: running jobs by request class b, in slice b of slots (the waiting heaps' slices):
     * those past their lease sorted at its front, leased ones (ahead of every waiting job,
     * in any order) at its back */
    int64_t *cls_cap, *cls_sorted, *cls_leased, *cls_done;   /* cls_done: completions since the last look */
    double *cls_until;                  /* class order certified until then (las_refresh) */
    int64_t *done_ids;                  /* those completions, class b's at cls_off[b] */
    run_slot *las_tmp;                  /* leases that ended at this decision */
    int64_t *ins_pos;                   /* run bounds of las_tmp (merge_runs), then where merge_into put them */
    run_seg *segs;                      /* contested running jobs, one sorted run per class */
    int64_t *seg_cnt;                   /* 2 x classes: keep_in_bulk's counts */
    uint64_t *rkey, *rkey2;                 /* radix sort scratch */
    /* the pending plan: preempt[], then place[] with CSR entries, in decision order */
    int64_t *preempt, n_preempt, *place, n_place, *place_ptr, *place_pos;
    int32_t *place_nodes, *place_counts, *free, *taken;
    uint64_t *room_bits, *room_sum;     /* free GPUs per node by level (room_*) */
    int32_t *room_leaf, room_top;       /* each leaf's free GPUs; the levels (largest node) */
    int64_t room_words, room_sums;      /* words per level, summary words per level */
    int64_t *dirty, n_dirty;            /* nodes whose free GPUs changed since the bit sets' last sync */
    int8_t *is_dirty;
    int64_t *free_start, *ap_tmp;       /* counting-sort and merge-sort scratch */
    int64_t done_seen;                  /* completions when the slots were last compacted */
    int slots_stale;                    /* preemptions since then */
    int64_t *node_keys;
    int pending, pending_full;
    double pending_seconds;
    /* apply buffers (id order) */
    int64_t *ap_ids, *ap_ptr, *ap_ord;
    int32_t *ap_nodes, *ap_counts;
    double *ap_rates;
    double *place_rate;                 /* rate of each place[] entry */
    /* placement summaries of place[] */
    int32_t *sum_nn;
    int64_t *sum_mask, *sum_slot;
    double *sum_speed;
    /* rate cache (open addressing) and the keys asked of the oracle */
    rate_entry *cache;
    int64_t cache_cap, cache_len;
    int64_t *miss_slot, *miss_job, n_miss;
    /* FGD: nodes per (type, free GPUs) and their weights */
    int64_t *hist;
    double *fgd_w;
    int32_t fgd_width;
    /* GPU types (sim/placement.py): rates, allowed masks, choice rule, per-type GPU counts */
    double *trate;                      /* [n_jobs][n_types] */
    int64_t *bucket_mask;               /* allowed types of each bucket's jobs */
    int32_t *place_type;                /* the type each place[] entry takes */
    int32_t *place_demand;              /* and its GPUs */
    double *place_arrival;              /* and its job's arrival (from its queue entry or slot) */
    int64_t *moved, n_moved;            /* running jobs the plan moves to another type */
    int8_t *moving;                     /* per job: in moved[] */
    int8_t *running;                    /* per job: runs (the engine's state, a byte per job:
                                           passes over the slots read it from cache) */
    int64_t *leaf_pos, *leaf_node;      /* node <-> leaf position, leaves grouped by type */
    int64_t type_lo[64], type_hi[64];   /* each type's leaves */
    double type_first[64];              /* first-fit key: the type's first node */
    int64_t tcap[64], tused[64];        /* GPUs per type, and in use now */
    int64_t tbudget[64], tfree[64];     /* during a selection: budget, free after new placements */
    int32_t type_choice;
    uint64_t type_seed;
    /* per-job results and counters */
    int64_t *used_types;
    sk_native_counters ctr;
    int64_t *arrived, *completed;
    sk_batch batch;
    int stepped;
    /* LAS's own (allocated for LAS only; at the end so that the fields above keep their
     * offsets) */
    int64_t *expired, n_expired;        /* leases that ended at this decision, all classes
                                           (commit: las_defer_after) */
    wait_key *preempt_key;              /* preempt[]'s waiting keys (plan_add_preempt) */
    int32_t *preempt_class;             /* and their classes */
    int32_t *place_class;               /* place[]'s buckets (LAS: their classes) */
    double *cls_lease_end;              /* per class: its leased jobs' earliest lease end (or inf) */
};

/* ---------------------------------------------------------------- keys */

/* Waiting entries and running slots share one order: queue, flag, key, arrival, job id. */
#define ORDER_LESS(a, b)                                               \
    ((a)->kq != (b)->kq ? (a)->kq < (b)->kq :                          \
     (a)->kflag != (b)->kflag ? (a)->kflag < (b)->kflag :              \
     (a)->ka != (b)->ka ? (a)->ka < (b)->ka :                          \
     (a)->arrival != (b)->arrival ? (a)->arrival < (b)->arrival : (a)->job < (b)->job)

/* The same order without branches (every comparison is made, & and | join them), for the
 * waiting queues' merges and run heads, whose outcomes no branch predictor can guess
 * (running slots, compared mostly in the order they already have, keep the branches). */
#define ORDER_LESS_FLAT(a, b)                                                           \
    (((a)->kq < (b)->kq) | (((a)->kq == (b)->kq) &                                     \
     (((a)->kflag < (b)->kflag) | (((a)->kflag == (b)->kflag) &                         \
      (((a)->ka < (b)->ka) | (((a)->ka == (b)->ka) &                                    \
       (((a)->arrival < (b)->arrival) | (((a)->arrival == (b)->arrival) & ((a)->job < (b)->job)))))))))

static int key_less(const wait_key *a, const wait_key *b) { return ORDER_LESS_FLAT(a, b); }

/* SRTF's key: remaining time on the reference GPU x GPUs (queue.SRTF.order). */
static double srtf_key(const sk_engine *e, const struct sk_policy *p, int64_t j, double rem) {
    return rem / e->work[j] * p->est[j] * (double)e->job[j].demand;
}

/* Key of job j, which starts waiting now (queued keys do not change while they wait). */
static wait_key key_waiting(const sk_engine *e, const struct sk_policy *p, int64_t j) {
    wait_key w = {0.0, e->arrival[j], j, 0, 0};
    switch (p->spec.kind) {
    case SK_POL_FIFO: w.ka = e->arrival[j]; break;
    case SK_POL_SJF: w.ka = p->est[j] * (double)e->job[j].demand; break;
    case SK_POL_SRTF: w.ka = srtf_key(e, p, j, e->job[j].remaining > 0.0 ? e->job[j].remaining : 0.0); break;
    case SK_POL_LAS: w.ka = e->job[j].gpu_seconds; break;
    default:                                   /* Tiresias: queue, pending, queue entry */
        w.kq = p->queue[j];
        w.kflag = 1;
        w.ka = p->entered[j];
    }
    return w;
}

/* A slot's GPU-seconds at time t (ske_live's sum). */
static double slot_gpu_s(const run_slot *s, double t) { return s->gs + (double)s->ngpu * (t - s->last); }

/* When a slot's lease ends (LAS: min_run_s after its progress resumed). */
static double lease_end(const struct sk_policy *p, const run_slot *s) { return s->begin + p->spec.lease_s; }

/* ske_live for a slot: GPU-seconds and remaining work at time t. */
static void slot_live(const run_slot *s, double t, double *gpu_s, double *remaining) {
    *gpu_s = slot_gpu_s(s, t);
    *remaining = s->rem;
    if (t > s->begin) *remaining -= s->rate * (t - s->begin);
}

/* Key of a running job at time t (SRTF, LAS; Tiresias keys change only at demotions). */
static void key_slot(const struct sk_policy *p, run_slot *s, double t) {
    double gpu_s, rem;
    slot_live(s, t, &gpu_s, &rem);
    if (p->spec.kind == SK_POL_SRTF)
        s->ka = (rem > 0.0 ? rem : 0.0) / s->work * s->est * (double)s->demand;   /* srtf_key */
    else if (p->spec.kind == SK_POL_LAS) {         /* leased jobs first (queue.LAS.order) */
        s->kq = t < lease_end(p, s) ? -1 : 0;
        s->ka = gpu_s;
    }
}

static int slot_less(const run_slot *a, const run_slot *b) { return ORDER_LESS(a, b); }

/* Does running slot s come before waiting job w? */
static int slot_before(const run_slot *s, const wait_key *w) {
    if (s->kq != w->kq) return s->kq < w->kq;
    if (s->kflag != w->kflag) return s->kflag < w->kflag;
    if (s->ka != w->ka) return s->ka < w->ka;
    if (s->arrival != w->arrival) return s->arrival < w->arrival;
    return s->job < w->job;
}

/* A slot for job j, which arrived at arrival (the plan's, not a lookup), placed now (after
 * the kernel applied the placement). */
static void slot_fill(const sk_engine *e, const struct sk_policy *p, run_slot *s, int64_t j,
                      double arrival) {
    s->job = j;
    s->arrival = arrival;
    const sk_job *x = &e->job[j];
    s->demand = x->demand;
    s->ngpu = x->ngpu;
    s->gs = x->gpu_seconds;
    s->rem = x->remaining;
    s->last = x->last_update;
    s->begin = x->last_update > x->resume_at ? x->last_update : x->resume_at;
    s->rate = x->rate;
    s->work = p->spec.kind == SK_POL_SRTF ? e->work[j] : 0.0;   /* only SRTF's key reads them */
    s->est = p->spec.kind == SK_POL_SRTF ? p->est[j] : 0.0;
    s->kq = p->spec.kind == SK_POL_TIRESIAS ? p->queue[j] : 0;
    s->kflag = 0;
    s->type = (int8_t)p->node_type[x->pl[0]];
    s->ka = p->spec.kind == SK_POL_TIRESIAS ? p->entered[j] : 0.0;
}

/* ---------------------------------------------------------------- waiting queues */

/* Each bucket's waiting jobs are a stack of sorted runs in its region wq[woff[b], +wcap[b])
 * (oldest, largest first) and, above them, the entries added since the last decision,
 * unsorted.  A decision first settles them (wait_settle: they become a run, and the top
 * runs merge while the newer is at least half the older, so there are O(log) runs); the
 * head is the smallest run head.  Where a binary heap walks log n levels of dependent
 * loads per pop, a pop here advances one run and compares the few run heads, and every
 * entry is moved O(log n) times in sequential merges.  LAS adds each class's preempted
 * jobs as one already sorted run (its preempted tail, keyed as when it was cut).  The
 * region holds twice the bucket's jobs: run heads consumed leave gaps, squeezed out
 * (wait_compact) when the region is full. */

static wait_key *wait_region(const struct sk_policy *p, int32_t b) { return p->wq + p->woff[b]; }
static wait_run *wait_runs(const struct sk_policy *p, int32_t b) { return p->runs + (int64_t)b * MAX_RUNS; }

/* Merge the sorted na entries of x and nb of y into out. */
static void merge_keys(const wait_key *x, int64_t na, const wait_key *y, int64_t nb, wait_key *out) {
    int64_t i = 0, k = 0, o = 0;
    while (i < na && k < nb) out[o++] = key_less(&y[k], &x[i]) ? y[k++] : x[i++];
    memcpy(out + o, x + i, (size_t)(na - i) * sizeof *out);
    memcpy(out + o + na - i, y + k, (size_t)(nb - k) * sizeof *out);
}

/* Sort n entries (bottom-up merge sort; tmp holds n); one pass if they are sorted. */
static void sort_keys(wait_key *a, int64_t n, wait_key *tmp) {
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++) sorted = !key_less(&a[i], &a[i - 1]);
    if (sorted) return;
    wait_key *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            merge_keys(src + lo, mid - lo, src + mid, hi - mid, dst + lo);
        }
        wait_key *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Bucket b's run with the smallest head, and the run with the smallest head among the others
 * (-1 if none). */
static void wait_best(struct sk_policy *p, int32_t b) {
    const wait_key *q = wait_region(p, b);
    const wait_run *r = wait_runs(p, b);
    int32_t best = 0, next = -1;
    for (int32_t k = 1; k < p->n_runs[b]; k++) {
        if (key_less(&q[r[k].lo], &q[r[best].lo])) {
            next = best;
            best = k;
        } else if (next < 0 || key_less(&q[r[k].lo], &q[r[next].lo])) {
            next = k;
        }
    }
    p->best_run[b] = best;
    p->next_run[b] = next;
}

/* Squeeze the gaps out of bucket b's region (runs and unsorted entries keep their order). */
static void wait_compact(struct sk_policy *p, int32_t b) {
    wait_key *q = wait_region(p, b);
    wait_run *r = wait_runs(p, b);
    int64_t o = 0;
    for (int32_t k = 0; k < p->n_runs[b]; k++) {
        int64_t len = r[k].hi - r[k].lo;
        memmove(q + o, q + r[k].lo, (size_t)len * sizeof *q);
        r[k] = (wait_run){o, o + len};
        o += len;
    }
    memmove(q + o, q + p->wend[b] - p->wnew[b], (size_t)p->wnew[b] * sizeof *q);
    p->wend[b] = o + p->wnew[b];
}

/* A job of bucket b starts waiting with key w (settled at the next decision). */
static void wait_push(struct sk_policy *p, int32_t b, wait_key w) {
    if (p->wend[b] == p->wcap[b]) wait_compact(p, b);
    wait_region(p, b)[p->wend[b]++] = w;
    p->wnew[b]++;
    p->n_waiting[b]++;
}

/* Job j starts waiting, keyed as of now. */
static void wait_add(const sk_engine *e, struct sk_policy *p, int64_t j) {
    wait_push(p, p->bucket[j], key_waiting(e, p, j));
}

/* Bucket b's new entries become a run; the top runs merge while the newer one is at least
 * half the older (or there are too many). */
static void wait_settle(struct sk_policy *p, int32_t b) {
    if (p->wnew[b] == 0) return;
    wait_key *q = wait_region(p, b);
    wait_run *r = wait_runs(p, b);
    int64_t lo = p->wend[b] - p->wnew[b];
    sort_keys(q + lo, p->wnew[b], p->wtmp);
    r[p->n_runs[b]++] = (wait_run){lo, p->wend[b]};
    p->wnew[b] = 0;
    while (p->n_runs[b] >= 2) {
        wait_run *top = &r[p->n_runs[b] - 1], *below = top - 1;
        int64_t nt = top->hi - top->lo, nb = below->hi - below->lo;
        if (2 * nt < nb && p->n_runs[b] < MAX_RUNS) break;
        merge_keys(q + below->lo, nb, q + top->lo, nt, p->wtmp);
        memcpy(q + below->lo, p->wtmp, (size_t)(nb + nt) * sizeof *q);
        below->hi = below->lo + nb + nt;
        p->wend[b] = below->hi;
        p->n_runs[b]--;
    }
    wait_best(p, b);
}

/* Before a decision reads the queues. */
static void wait_settle_all(struct sk_policy *p) {
    for (int32_t b = 0; b < p->n_buckets; b++) wait_settle(p, b);
}

/* The head of bucket b's queue (settled, not empty). */
static const wait_key *wait_head(const struct sk_policy *p, int32_t b) {
    return &wait_region(p, b)[wait_runs(p, b)[p->best_run[b]].lo];
}

/* Take the head of bucket b's queue (settled, not empty): its entry. */
static wait_key wait_take(struct sk_policy *p, int32_t b) {
    wait_run *r = wait_runs(p, b);
    const wait_key *q = wait_region(p, b);
    int32_t k = p->best_run[b], next = p->next_run[b];
    wait_key j = q[r[k].lo++];
    p->n_waiting[b]--;
    if (r[k].lo == r[k].hi) {                   /* used up: its space is a gap (the top's is free) */
        memmove(r + k, r + k + 1, (size_t)(p->n_runs[b] - k - 1) * sizeof *r);
        p->n_runs[b]--;
        if (k == p->n_runs[b]) p->wend[b] = k > 0 ? r[k - 1].hi : 0;
        if (p->n_runs[b] > 0) wait_best(p, b);
    } else if (next >= 0 && key_less(&q[r[next].lo], &q[r[k].lo])) {
        wait_best(p, b);                        /* else run k still leads: the others did not change */
    }
    return j;
}

/* Does bucket b's request fit the budget of one of its allowed types? */
static int bucket_fits(const struct sk_policy *p, int32_t b) {
    for (int32_t t = 0; t < p->n_types; t++)
        if ((p->bucket_mask[b] >> t) & 1 && p->tbudget[t] >= p->bucket_demand[b]) return 1;
    return 0;
}

/* The bucket whose head comes first among those that fit (bucket_fits; all if any_size),
 * or -1. */
static int32_t best_bucket(const struct sk_policy *p, int any_size) {
    int32_t best = -1;
    for (int32_t b = 0; b < p->n_buckets; b++) {
        if (p->n_waiting[b] == 0 || (!any_size && !bucket_fits(p, b))) continue;
        if (best < 0 || key_less(wait_head(p, b), wait_head(p, best))) best = b;
    }
    return best;
}

void skn_on_complete(sk_engine *e, int64_t j) {
    struct sk_policy *p = e->pol;
    p->running[j] = 0;
    if (p->spec.kind != SK_POL_LAS) return;
    int32_t b = p->bucket[j];
    p->done_ids[p->cls_off[b] + p->cls_done[b]++] = j;   /* at most the class's jobs */
}

void skn_on_arrival(sk_engine *e, int64_t j) {
    struct sk_policy *p = e->pol;
    if (p->spec.kind == SK_POL_TIRESIAS) {      /* a new job enters Q0 at its arrival */
        p->queue[j] = 0;
        p->entered[j] = e->arrival[j];
        p->fresh[j] = 0;
    }
    wait_add(e, p, j);
}

/* ---------------------------------------------------------------- running jobs */

/* Stable bottom-up merge sort of slots by slot_less. */
static void merge_sort(run_slot *a, int64_t n, run_slot *tmp) {
    run_slot *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t x = lo, y = mid, o = lo;
            while (x < mid && y < hi) dst[o++] = slot_less(&src[y], &src[x]) ? src[y++] : src[x++];
            while (x < mid) dst[o++] = src[x++];
            while (y < hi) dst[o++] = src[y++];
        }
        run_slot *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Sortable bits of a double (ascending as the doubles; -0.0 as 0.0). */
static uint64_t double_bits(double x) {
    uint64_t b;
    if (x == 0.0) x = 0.0;
    memcpy(&b, &x, sizeof b);
    return (b >> 63) ? ~b : b | 0x8000000000000000ULL;
}

/* LSD radix sort of slots by ka alone (policies whose kq and kflag are constant), then
 * runs of equal ka put in slot_less order: the result is slot_less order. */
static void radix_sort(struct sk_policy *p, run_slot *a, int64_t n) {
    enum { BITS = 11, SIZE = 1 << BITS };
    uint64_t *key = p->rkey, *key2 = p->rkey2;
    run_slot *a2 = p->slots_tmp;
    int64_t count[SIZE];
    for (int64_t i = 0; i < n; i++) key[i] = double_bits(a[i].ka);
    for (int shift = 0; shift < 64; shift += BITS) {
        memset(count, 0, sizeof count);
        for (int64_t i = 0; i < n; i++) count[(key[i] >> shift) & (SIZE - 1)]++;
        if (count[(key[0] >> shift) & (SIZE - 1)] == n) continue;      /* one digit: no move */
        for (int64_t d = 0, sum = 0; d < SIZE; d++) { int64_t c = count[d]; count[d] = sum; sum += c; }
        for (int64_t i = 0; i < n; i++) {
            int64_t o = count[(key[i] >> shift) & (SIZE - 1)]++;
            a2[o] = a[i];
            key2[o] = key[i];
        }
        memcpy(a, a2, (size_t)n * sizeof *a);
        memcpy(key, key2, (size_t)n * sizeof *key);
    }
    for (int64_t i = 1; i < n; i++) {                 /* ties on ka: arrival, then job */
        run_slot s = a[i];
        int64_t k = i;
        while (k > 0 && key[k - 1] == key[i] && slot_less(&s, &a[k - 1])) { a[k] = a[k - 1]; k--; }
        a[k] = s;
    }
}

/* Sort slots by slot_less: insertion sort from their last order (nearly sorted between
 * decisions); when that would move too much, radix sort (SRTF, LAS; RADIX_MIN slots or
 * more: its passes cost O(2^11) each whatever n) or merge sort. */
static void sort_slots(struct sk_policy *p, run_slot *a, int64_t n) {
    enum { RADIX_MIN = 512 };
    int64_t budget = 4 * n + 64;
    for (int64_t i = 1; i < n; i++) {
        run_slot s = a[i];
        int64_t k = i;
        while (k > 0 && slot_less(&s, &a[k - 1])) {
            a[k] = a[k - 1];
            k--;
            if (--budget < 0) {
                a[k] = s;
                if (p->spec.kind == SK_POL_TIRESIAS || n < RADIX_MIN) merge_sort(a, n, p->slots_tmp);
                else radix_sort(p, a, n);
                return;
            }
        }
        a[k] = s;
    }
}

/* Stable natural merge sort of slots by slot_less: the runs already in order are found and
 * merged pairwise (O(n log runs)).  LAS's ended leases come in a few such runs, one per
 * decision that placed them (placed in key order; the keys since grew at one rate).  bound
 * holds n + 1 entries, tmp n slots. */
static void merge_runs(run_slot *a, int64_t n, run_slot *tmp, int64_t *bound) {
    int64_t runs = 0;
    bound[runs++] = 0;
    for (int64_t i = 1; i < n; i++)
        if (slot_less(&a[i], &a[i - 1])) bound[runs++] = i;
    bound[runs] = n;
    run_slot *src = a, *dst = tmp;
    while (runs > 1) {
        int64_t out = 0;
        for (int64_t r = 0; r < runs; r += 2) {
            int64_t lo = bound[r], mid = bound[r + 1], hi = r + 2 <= runs ? bound[r + 2] : mid;
            int64_t x = lo, y = mid, o = lo;
            while (x < mid && y < hi) dst[o++] = slot_less(&src[y], &src[x]) ? src[y++] : src[x++];
            memcpy(dst + o, src + x, (size_t)(mid - x) * sizeof *dst);
            memcpy(dst + o + mid - x, src + y, (size_t)(hi - y) * sizeof *dst);
            bound[out++] = lo;
        }
        bound[out] = n;
        runs = out;
        run_slot *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Keep the slots of jobs that still run (completions and preemptions leave here): each hole
 * is filled with the last slot, so a decision moves as many slots as jobs left, not every slot
 * after the first hole.  The order changes only where a hole was (the split below and the
 * sort of the contested ones take any order; their insertion sort gains from a nearly kept one). */
static void compact_running(const sk_engine *e, struct sk_policy *p) {
    int64_t n = p->n_slots;
    for (int64_t i = 0; i < n; i++) {
        if (p->running[p->slots[i].job]) continue;
        while (n > i + 1 && !p->running[p->slots[n - 1].job]) n--;
        if (n > i + 1) p->slots[i] = p->slots[--n];
        else n = i;
    }
    p->n_slots = n;
}

/* ---------------------------------------------------------------- LAS by class */

/* Class b's slice of slots.  Within a class every job holds the same GPUs, so attained
 * service grows at the same rate for all of them and their order hardly changes between
 * decisions: re-sorting a class is a pass that moves nothing, where one list of all
 * running jobs would be re-ordered at every round. */
static run_slot *las_class(struct sk_policy *p, int32_t b) { return p->slots + p->cls_off[b]; }

/* Job j of class b, placed now, joins its class's leased jobs. */
static int las_add(sk_engine *e, struct sk_policy *p, int64_t j, double arrival, int32_t b) {
    if (p->cls_sorted[b] + p->cls_leased[b] >= p->cls_cap[b])
        return ske_fail(e, SK_ESTATE, "native LAS: more running jobs of request %d than jobs",
                        p->bucket_demand[b]);
    p->cls_leased[b]++;
    run_slot *s = las_class(p, b) + p->cls_cap[b] - p->cls_leased[b];
    slot_fill(e, p, s, j, arrival);
    if (lease_end(p, s) < p->cls_lease_end[b]) p->cls_lease_end[b] = lease_end(p, s);
    return SK_OK;
}

enum { FEW_DONE = 8 };   /* completions in a class looked up by id up to this many */

/* Did job j of class b, running at the last look, finish since?  Its id among the class's
 * completions when they are few (no lookup by job), else its running flag. */
static int finished(const sk_engine *e, const struct sk_policy *p, int32_t b, int64_t j) {
    const int64_t *done = p->done_ids + p->cls_off[b];
    if (p->cls_done[b] > FEW_DONE) return !p->running[j];
    int hit = 0;
    for (int64_t k = 0; k < p->cls_done[b]; k++) hit |= done[k] == j;
    return hit;
}

static void las_key(run_slot *s, double t);

/* Where job j, finished since the last look, sits among the n sorted jobs of class b, or -1.
 * Its slot's key at its completion is its GPU-seconds then (the same sum, its totals did not
 * change while it ran), so its key now is that plus the class's GPUs times the time since,
 * up to rounding: a search for that key (the order is certified at t) and a walk over the
 * jobs within 1e-12 of it. */
static int64_t las_find(const sk_engine *e, const struct sk_policy *p, int32_t b, run_slot *a,
                        int64_t n, int64_t j, double t) {
    const sk_job *x = &e->job[j];
    double key = x->gpu_seconds + (double)p->bucket_demand[b] * (t - x->last_update);
    double tol = 1e-12 * fabs(key) + 1e-300;
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        las_key(&a[mid], t);
        if (a[mid].ka < key - tol) lo = mid + 1; else hi = mid;
    }
    for (; lo < n; lo++) {
        las_key(&a[lo], t);
        if (a[lo].ka > key + tol) break;
        if (a[lo].job == j) return lo;
    }
    return -1;
}

/* Drop class b's sorted jobs that finished: done[0, m) (the completions not found among its
 * leased jobs).  While the class's order is certified, each is found by its key and the jobs
 * above it move down in blocks; otherwise (or when one is not found) one pass keeps the rest. */
static void las_drop_finished(const sk_engine *e, struct sk_policy *p, int32_t b, double t,
                              const int64_t *done, int64_t m) {
    run_slot *a = las_class(p, b);
    int64_t n = p->cls_sorted[b], pos[FEW_DONE] = {0};
    int found = m <= FEW_DONE && t < p->cls_until[b];
    for (int64_t k = 0; k < m && found; k++) found = (pos[k] = las_find(e, p, b, a, n, done[k], t)) >= 0;
    if (!found) {
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++)
            if (!finished(e, p, b, a[i].job) && kept++ != i) a[kept - 1] = a[i];
        p->cls_sorted[b] = kept;
        return;
    }
    for (int64_t k = 1; k < m; k++)                    /* positions in increasing order */
        for (int64_t q = k; q > 0 && pos[q] < pos[q - 1]; q--) { int64_t x = pos[q]; pos[q] = pos[q - 1]; pos[q - 1] = x; }
    int64_t w = pos[0];
    for (int64_t k = 0; k < m; k++) {
        int64_t next = k + 1 < m ? pos[k + 1] : n, len = next - pos[k] - 1;
        memmove(a + w, a + pos[k] + 1, (size_t)len * sizeof *a);
        w += len;
    }
    p->cls_sorted[b] = w;
}

/* Class b at time t: jobs that finished are dropped (preempted ones were cut off when they
 * were preempted), leased jobs whose lease ended go to las_tmp (returns how many), the
 * others stay at the slice's back. */
static int64_t las_drop_and_expire(const sk_engine *e, struct sk_policy *p, int32_t b, double t) {
    run_slot *a = las_class(p, b);
    int64_t cap = p->cls_cap[b], kept = 0, ended = 0, n_done = p->cls_done[b], in_leased = 0;
    int64_t *done = p->done_ids + p->cls_off[b];
    if (n_done == 0 && t < p->cls_lease_end[b]) return 0;          /* no lease ended, none done */
    double earliest = INFINITY;
    for (int64_t i = cap - 1; i >= cap - p->cls_leased[b]; i--) {   /* top down: writes stay above i */
        if (n_done && finished(e, p, b, a[i].job)) {
            for (int64_t k = 0; k < n_done - in_leased && n_done <= FEW_DONE; k++)
                if (done[k] == a[i].job) {             /* the sorted ones' ids stay in front */
                    done[k] = done[n_done - in_leased - 1];
                    done[n_done - in_leased - 1] = a[i].job;
                    break;
                }
            in_leased++;
            continue;
        }
        double end = lease_end(p, &a[i]);
        if (t < end) {
            if (cap - 1 - kept != i) a[cap - 1 - kept] = a[i];
            kept++;
            if (end < earliest) earliest = end;
        }
        else {
            p->expired[p->n_expired++] = a[i].job;
            p->las_tmp[ended++] = a[i];
        }
    }
    if (n_done > in_leased) las_drop_finished(e, p, b, t, done, n_done - in_leased);
    p->cls_leased[b] = kept;
    p->cls_lease_end[b] = earliest;
    p->cls_done[b] = 0;
    return ended;
}

/* A LAS class's running job's key at t (key_slot past its lease), computed where it is read:
 * las_refresh re-keys a class only when its order is not certified. */
static void las_key(run_slot *s, double t) { s->ka = slot_gpu_s(s, t); }

/* How many of a[0, hi) do not come after x: galloping down from hi (the merge below inserts
 * the largest first), a's keyed at t as they are read. */
static int64_t count_not_after(run_slot *a, int64_t hi, const run_slot *x, double t) {
    int64_t lo = hi, step = 1;                  /* a[lo, hi) all come after x */
    while (lo - step >= 0 && (las_key(&a[lo - step], t), slot_less(x, &a[lo - step]))) {
        lo -= step;
        step *= 2;
    }
    int64_t bottom = lo - step + 1 > 0 ? lo - step + 1 : 0;   /* a[lo - step] (if any) does not */
    while (bottom < lo) {
        int64_t mid = bottom + (lo - bottom) / 2;
        las_key(&a[mid], t);
        if (slot_less(x, &a[mid])) lo = mid; else bottom = mid + 1;
    }
    return lo;
}

/* Merge the sorted m jobs of add (keyed at t) into the sorted n jobs of a (room for n + m):
 * each from the largest down finds its place by a search and the block of a after it moves
 * once (memmove), the order of a stable merge (a job of a before an equal one of add).  The
 * positions the jobs of add take are in pos[0, m), and their neighbours in a are keyed at t. */
static void merge_into(run_slot *a, int64_t n, const run_slot *add, int64_t m, double t, int64_t *pos) {
    int64_t hi = n, out = n + m;
    for (int64_t q = m - 1; q >= 0; q--) {
        int64_t at = count_not_after(a, hi, &add[q], t);
        memmove(a + out - (hi - at), a + at, (size_t)(hi - at) * sizeof *a);
        out -= hi - at;
        hi = at;
        a[--out] = add[q];
        pos[q] = out;
    }
    for (int64_t q = 0; q < m; q++) {
        if (pos[q] > 0) las_key(&a[pos[q] - 1], t);
        if (pos[q] + 1 < n + m) las_key(&a[pos[q] + 1], t);
    }
}

/* Until when the keys of neighbours x, y (sorted, keyed at t) stay in their order when computed
 * later: their exact values grow at one rate (the class's GPUs), so only rounding can reorder
 * neighbours, by at most 3 ulps of the larger key each (gs + n (t - last): three roundings of
 * non-negative terms).  A pair with gap g keeps its order while g > 32 u K(t), u = 2^-53, K(t)
 * the larger key at t (a margin over the 12 u needed).  Equal keys from identical inputs stay
 * equal (ties by arrival, job); equal keys from different inputs certify nothing. */
static double pair_until(const run_slot *x, const run_slot *y, double t) {
    const double u = 1.1102230246251565e-16;   /* 2^-53 */
    if (x->ka < y->ka && y->ngpu > 0) return t + ((y->ka - x->ka) / (32.0 * u) - y->ka) / (double)y->ngpu;
    return x->gs == y->gs && x->last == y->last && x->ngpu == y->ngpu ? INFINITY : t;
}

/* las_until's certificate of the n sorted jobs of a (keyed at t). */
static double las_until(const run_slot *a, int64_t n, double t) {
    double until = INFINITY;
    for (int64_t i = 1; i < n; i++) {
        double h = pair_until(&a[i - 1], &a[i], t);
        if (h < until) until = h;
    }
    return until;
}

/* The certificate of the pairs that the m merged jobs at pos[] make with their neighbours. */
static double merged_until(const run_slot *a, int64_t n, const int64_t *pos, int64_t m, double t) {
    double until = INFINITY;
    for (int64_t q = 0; q < m; q++) {
        double lo = pos[q] > 0 ? pair_until(&a[pos[q] - 1], &a[pos[q]], t) : INFINITY;
        double hi = pos[q] + 1 < n ? pair_until(&a[pos[q]], &a[pos[q] + 1], t) : INFINITY;
        if (lo < until) until = lo;
        if (hi < until) until = hi;
    }
    return until;
}

/* Class b in slot_less order at t (leased jobs apart).  Its jobs' keys grow at one rate, so
 * their order holds but for rounding: a pass re-keys and checks it only once the certificate of
 * the last pass (las_until) runs out; otherwise keys are computed where they are read (las_key).
 * Dropping jobs keeps a certificate (a new pair's gap is the sum of two certified ones); the
 * ended leases merged in are certified with their new neighbours. */
static void las_refresh(const sk_engine *e, struct sk_policy *p, int32_t b, double t) {
    int64_t ended = las_drop_and_expire(e, p, b, t), n = p->cls_sorted[b];
    run_slot *a = las_class(p, b);
    if (!(t < p->cls_until[b])) {
        int in_order = 1;
        for (int64_t i = 0; i < n; i++) {
            las_key(&a[i], t);
            if (i > 0 && in_order && !(a[i - 1].ka < a[i].ka)) in_order = !slot_less(&a[i], &a[i - 1]);
        }
        if (!in_order) sort_slots(p, a, n);
        p->cls_until[b] = las_until(a, n, t);
    }
    if (ended == 0) return;
    for (int64_t i = 0; i < ended; i++) key_slot(p, &p->las_tmp[i], t);
    merge_runs(p->las_tmp, ended, p->slots_tmp, p->ins_pos);
    merge_into(a, n, p->las_tmp, ended, t, p->ins_pos);
    double until = merged_until(a, n + ended, p->ins_pos, ended, t);
    if (until < p->cls_until[b]) p->cls_until[b] = until;
    p->cls_sorted[b] = n + ended;
}

/* A waiting job's key as a slot (slot_less(s, &x) is slot_before(s, w)). */
static run_slot waiting_slot(const wait_key *w) {
    run_slot x = {0};
    x.ka = w->ka;
    x.arrival = w->arrival;
    x.job = w->job;
    x.kq = w->kq;
    x.kflag = w->kflag;
    return x;
}

/* How many of the first n jobs of the sorted LAS class run a come before x, keyed at t as
 * they are read (galloping search: cheap when they are few). */
static int64_t count_less(run_slot *a, int64_t n, const run_slot *x, double t) {
    int64_t lo = 0, step = 1;
    while (lo + step <= n && (las_key(&a[lo + step - 1], t), slot_less(&a[lo + step - 1], x))) {
        lo += step;
        step *= 2;
    }
    int64_t hi = lo + step - 1 < n ? lo + step - 1 : n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        las_key(&a[mid], t);
        if (slot_less(&a[mid], x)) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* split_running for LAS: leased jobs and each class's jobs before the first waiting job
 * are selected; the rest of each class is a sorted run of contested jobs (p->segs).
 * *budget becomes the GPUs the selected ones leave; returns the number of runs. */
static int32_t las_split(sk_engine *e, struct sk_policy *p, int64_t *budget) {
    int32_t head_b = best_bucket(p, 1);
    run_slot head = head_b < 0 ? (run_slot){0} : waiting_slot(wait_head(p, head_b));
    int64_t used = 0;
    for (int32_t b = 0; b < p->n_buckets; b++) {
        las_refresh(e, p, b, e->now);
        run_slot *a = las_class(p, b);
        int64_t n = p->cls_sorted[b], ahead = head_b < 0 ? n : count_less(a, n, &head, e->now);
        used += (int64_t)p->bucket_demand[b] * (ahead + p->cls_leased[b]);
        if (p->n_types > 1) {           /* each kept job charges its own type */
            for (int64_t i = 0; i < ahead; i++) p->tbudget[a[i].type] -= a[i].demand;
            for (int64_t i = p->cls_cap[b] - p->cls_leased[b]; i < p->cls_cap[b]; i++)
                p->tbudget[a[i].type] -= a[i].demand;
        }
        p->segs[b] = (run_seg){a, ahead, n, n, p->bucket_demand[b], e->now};
    }
    if (p->n_types == 1) p->tbudget[0] -= used;
    *budget = e->total_gpus - used;
    return p->n_buckets;
}

/* ---------------------------------------------------------------- Tiresias */


static int crossing_less(const void *a, const void *b) {
    const crossing *x = a, *y = b;
    if (x->cross != y->cross) return x->cross < y->cross ? -1 : 1;
    return x->job < y->job ? -1 : (x->job > y->job);
}

/* Demotions of running jobs at this decision (tiresias.Tiresias._update/_crossings,
 * promote_knob 0): a job whose attained service passed a limit joins the lower queue at
 * the time it crossed it, or now (then "fresh": behind the settled running jobs). */
static void tiresias_update(sk_engine *e, struct sk_policy *p) {
    crossing *dem = p->dem;
    int64_t nd = 0;
    double rel = p->spec.rel_tol;
    for (int64_t i = 0; i < p->n_slots; i++) {
        run_slot *s = &p->slots[i];
        double service, rem;
        s->kflag = 0;
        slot_live(s, e->now, &service, &rem);
        int32_t level = 0;
        while (level < p->spec.n_thresholds && p->thr_lo[level] <= service) level++;
        if (level <= s->kq) continue;
        double limit = p->thr[level - 1];
        double over = service - limit > 0.0 ? service - limit : 0.0;
        double g = s->ngpu > 1 ? (double)s->ngpu : 1.0;
        int at_now = over <= rel * limit || s->ngpu <= 0;
        dem[nd] = (crossing){at_now ? e->now : e->now - over / g, s->job, i, rel * limit / g};
        nd++;
        s->kq = p->queue[s->job] = level;
        s->kflag = p->fresh[s->job] = (int8_t)at_now;
    }
    if (nd > 1) qsort(dem, (size_t)nd, sizeof *dem, crossing_less);
    double lead = -INFINITY;                  /* tiresias._as_one_wakeup */
    for (int64_t k = 0; k < nd; k++) {
        if (dem[k].cross > lead + dem[k].tol) lead = dem[k].cross;
        p->entered[dem[k].job] = p->slots[dem[k].slot].ka = lead;
    }
}

/* The next demotion while a job waits (Tiresias.next_wakeup), or NaN. */
static double tiresias_wakeup(const sk_engine *e, const struct sk_policy *p) {
    if (e->n_queued == 0) return NAN;
    double best = INFINITY;
    int any = 0;
    for (int64_t i = 0; i < p->n_slots; i++) {
        const run_slot *s = &p->slots[i];
        if (s->kq >= p->spec.n_thresholds || !p->running[s->job]) continue;
        double gpu_s, rem;
        slot_live(s, e->now, &gpu_s, &rem);
        double left = p->thr[s->kq] - gpu_s;
        double t = e->now + (left > 0.0 ? left : 0.0) / (double)s->ngpu;
        if (t < best) best = t;
        any = 1;
    }
    if (!any) return NAN;
    return best > e->now ? best : nextafter(e->now, INFINITY);
}

/* ---------------------------------------------------------------- placement */

/* Nodes with free GPUs (of one type if only_type >= 0), most free first, ties by index
 * (placement._nodes_by_free): a counting sort on the free count, O(nodes + largest node). */
static int64_t nodes_by_free(const sk_engine *e, struct sk_policy *p, const int32_t *free,
                             int32_t only_type) {
    int64_t *start = p->free_start, m = 0;
    int32_t top = p->fgd_width;                    /* > every node's size */
    memset(start, 0, (size_t)(top + 1) * sizeof *start);
    for (int32_t i = 0; i < e->n_nodes; i++)
        if (free[i] > 0 && (only_type < 0 || p->node_type[i] == only_type)) start[top - free[i]]++;
    for (int32_t v = 0; v <= top; v++) { int64_t c = start[v]; start[v] = m; m += c; }
    for (int32_t i = 0; i < e->n_nodes; i++)
        if (free[i] > 0 && (only_type < 0 || p->node_type[i] == only_type))
            p->node_keys[start[top - free[i]]++] = i;
    return m;
}

/* Sort int64 values ascending (insertion sort up to 32, else merge sort; tmp holds n). */
static void sort_i64(int64_t *a, int64_t n, int64_t *tmp) {
    if (n > 32) {
        ske_merge_sort_ids(a, n, tmp, NULL);
        return;
    }
    for (int64_t i = 1; i < n; i++) {
        int64_t x = a[i], k = i;
        while (k > 0 && a[k - 1] > x) { a[k] = a[k - 1]; k--; }
        a[k] = x;
    }
}

/* Sort the (node, count) entries by node (they are few: at most the request). */
static void sort_entries(int32_t *nodes, int32_t *counts, int64_t m) {
    for (int64_t i = 1; i < m; i++) {
        int32_t a = nodes[i], c = counts[i];
        int64_t k = i;
        while (k > 0 && nodes[k - 1] > a) { nodes[k] = nodes[k - 1]; counts[k] = counts[k - 1]; k--; }
        nodes[k] = a;
        counts[k] = c;
    }
}

/* ---- the free GPUs per node as bit sets by level: first fit in O(1) word operations
 *
 * Each node has a leaf position (leaves grouped by GPU type, in node order within a type:
 * a type's nodes are the range type_lo..type_hi).  Level v (1..room_top) is a bit set over
 * the leaves, bit set when the node has at least v free GPUs, with a summary bit per
 * non-empty 64-bit word.  A first fit is the first set bit at or after a position: a word or
 * two and a count of trailing zeros, where a max-tree descent is a chain of dependent loads. */

static uint64_t *room_level(const struct sk_policy *p, int32_t v) { return p->room_bits + (int64_t)(v - 1) * p->room_words; }
static uint64_t *room_summary(const struct sk_policy *p, int32_t v) { return p->room_sum + (int64_t)(v - 1) * p->room_sums; }

/* Leaf pos's free GPUs become value (bits of the levels between the old and new value flip). */
static void room_set_leaf(struct sk_policy *p, int64_t pos, int32_t value) {
    int32_t old = p->room_leaf[pos] > 0 ? p->room_leaf[pos] : 0, now = value > 0 ? value : 0;
    p->room_leaf[pos] = value;
    int64_t w = pos >> 6;
    uint64_t bit = 1ULL << (pos & 63), sbit = 1ULL << (w & 63);
    for (int32_t v = old + 1; v <= now; v++) {              /* more free: set */
        uint64_t *word = &room_level(p, v)[w];
        if (*word == 0) room_summary(p, v)[w >> 6] |= sbit;
        *word |= bit;
    }
    for (int32_t v = now + 1; v <= old; v++) {              /* fewer free: clear */
        uint64_t *word = &room_level(p, v)[w];
        *word &= ~bit;
        if (*word == 0) room_summary(p, v)[w >> 6] &= ~sbit;
    }
}

static void room_set(struct sk_policy *p, int64_t node, int32_t value) {
    room_set_leaf(p, p->leaf_pos[node], value);
}

static void room_build(const sk_engine *e, struct sk_policy *p) {
    memset(p->room_bits, 0, (size_t)p->room_top * p->room_words * sizeof *p->room_bits);
    memset(p->room_sum, 0, (size_t)p->room_top * p->room_sums * sizeof *p->room_sum);
    for (int64_t pos = 0; pos < e->n_nodes; pos++) {
        p->room_leaf[pos] = 0;
        room_set_leaf(p, pos, p->free[p->leaf_node[pos]]);
    }
}

/* The first leaf in [lo, hi) with at least want free GPUs, or -1. */
static int64_t room_find(const struct sk_policy *p, int64_t lo, int64_t hi, int32_t want) {
    if (want > p->room_top || lo >= hi) return -1;
    if (want < 1) want = 1;
    const uint64_t *bits = room_level(p, want), *sum = room_summary(p, want);
    int64_t w = lo >> 6, pos = -1;
    uint64_t m = bits[w] & (~0ULL << (lo & 63));
    if (m) {
        pos = (w << 6) + __builtin_ctzll(m);
    } else if (++w < p->room_words) {                  /* the next non-empty word, by summary */
        int64_t s = w >> 6;
        uint64_t sm = sum[s] & (~0ULL << (w & 63));
        while (!sm && ++s < p->room_sums) sm = sum[s];
        if (sm) {
            w = (s << 6) + __builtin_ctzll(sm);
            pos = (w << 6) + __builtin_ctzll(bits[w]);
        }
    }
    return pos >= 0 && pos < hi ? pos : -1;
}

/* The lowest node of type t with at least want free GPUs, or -1. */
static int64_t room_first_fit(const struct sk_policy *p, int32_t t, int32_t want) {
    int64_t pos = room_find(p, p->type_lo[t], p->type_hi[t], want);
    return pos < 0 ? -1 : p->leaf_node[pos];
}

/* The most free GPUs on one node of type t (0 if none). */
static int32_t room_max(const struct sk_policy *p, int32_t t) {
    for (int32_t v = p->room_top; v >= 1; v--)
        if (room_find(p, p->type_lo[t], p->type_hi[t], v) >= 0) return v;
    return 0;
}

static int64_t place_spread(const sk_engine *e, struct sk_policy *p, int32_t *free, int32_t t,
                            int32_t want, int32_t *nodes, int32_t *counts) {
    int64_t m = nodes_by_free(e, p, free, t), out = 0;
    int32_t need = want;
    while (need > 0) {
        for (int64_t k = 0; k < m && need > 0; k++) {
            int64_t i = p->node_keys[k];
            if (free[i] - p->taken[i] > 0) { p->taken[i]++; need--; }
        }
    }
    for (int64_t k = 0; k < m; k++) {
        int64_t i = p->node_keys[k];
        if (p->taken[i] > 0) {
            nodes[out] = (int32_t)i;
            counts[out++] = p->taken[i];
            free[i] -= p->taken[i];
            room_set(p, i, free[i]);
            p->taken[i] = 0;
        }
    }
    sort_entries(nodes, counts, out);
    return out;
}

/* Single node of the type, first fit; else its fewest nodes: most free first, ties by index
 * (placement._nodes_by_free), each taken whole until the last.  Taking a node whole leaves it
 * no free GPUs, so the next in that order is the lowest node with the most free GPUs now:
 * a few word operations a node (room_max, room_first_fit) instead of a sort of the type's nodes. */
static int64_t place_consolidated(const sk_engine *e, struct sk_policy *p, int32_t *free,
                                  int32_t t, int32_t want, int32_t *nodes, int32_t *counts) {
    int64_t first = room_first_fit(p, t, want);
    if (first >= 0) {
        free[first] -= want;
        room_set(p, first, free[first]);
        nodes[0] = (int32_t)first;
        counts[0] = want;
        return 1;
    }
    int64_t out = 0;
    int32_t need = want;
    while (need > 0) {
        int32_t most = room_max(p, t);
        if (most <= 0) break;
        int64_t i = room_first_fit(p, t, most);
        int32_t g = free[i] < need ? free[i] : need;
        nodes[out] = (int32_t)i;
        counts[out++] = g;
        need -= g;
        free[i] -= g;
        room_set(p, i, free[i]);
    }
    sort_entries(nodes, counts, out);
    return out;
}

/* placement.place_in_type: want GPUs of type t from free (updated); returns the entries
 * (0: no room; the selection charged the type, so there is room). */
static int64_t place_one(const sk_engine *e, struct sk_policy *p, int32_t *free, int64_t *free_total,
                         int32_t t, int32_t want, int32_t *nodes, int32_t *counts) {
    if (want <= 0 || *free_total < want || t < 0) return 0;
    *free_total -= want;
    return p->spec.spread ? place_spread(e, p, free, t, want, nodes, counts)
                          : place_consolidated(e, p, free, t, want, nodes, counts);
}

/* ---- the type a job takes (placement.choose_type, keys of placement.type_keys) */

static uint64_t mix64(uint64_t x) {             /* splitmix64 (placement._splitmix64) */
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double type_key(const struct sk_policy *p, int64_t j, int32_t t, double now) {
    if (p->type_choice == SK_TYPE_FASTEST) return -p->trate[j * p->n_types + t];
    if (p->type_choice == SK_TYPE_FIRST_FIT) return p->type_first[t];
    uint64_t bits;
    memcpy(&bits, &now, sizeof bits);
    uint64_t h = mix64(mix64(mix64(mix64(p->type_seed) ^ (uint64_t)j) ^ bits) ^ (uint64_t)t);
    return (double)(h >> 11);
}

/* Among job j's allowed types, one whose free GPUs hold want (tier 0), else one whose
 * budget does (tier 1): the smallest key in the best tier, ties the lowest type; -1 if none. */
static int32_t pick_type(const sk_engine *e, const struct sk_policy *p, int64_t j, int64_t mask,
                         int32_t want) {
    int32_t best = -1, best_tier = 2;
    double best_key = 0.0;
    for (int32_t t = 0; t < p->n_types; t++) {
        if (!((mask >> t) & 1)) continue;
        int32_t tier = p->tfree[t] >= want ? 0 : p->tbudget[t] >= want ? 1 : 2;
        if (tier == 2) continue;
        double k = type_key(p, j, t, e->now);
        if (best < 0 || tier < best_tier || (tier == best_tier && k < best_key)) {
            best = t;
            best_tier = tier;
            best_key = k;
        }
    }
    return best;
}

/* Budgets of a selection: every GPU of each type (preemptive) or the free ones. */
static void type_budgets(struct sk_policy *p, int preemptive) {
    for (int32_t t = 0; t < p->n_types; t++) {
        p->tfree[t] = p->tcap[t] - p->tused[t];
        p->tbudget[t] = preemptive ? p->tcap[t] : p->tfree[t];
    }
}



/* ---------------------------------------------------------------- deciding */

static void plan_reset(struct sk_policy *p) {
    p->n_preempt = 0;
    p->n_moved = 0;
    p->n_place = 0;
    p->place_ptr[0] = 0;
}


/* Job j, of bucket b, which arrived at arrival, is placed: demand GPUs of type t. */
static void plan_add_place(struct sk_policy *p, int64_t j, double arrival, int32_t b, int32_t t,
                           int32_t demand) {
    if (p->spec.kind == SK_POL_LAS) p->place_class[p->n_place] = b;
    p->place_arrival[p->n_place] = arrival;
    p->place_type[p->n_place] = t;
    p->place_demand[p->n_place] = demand;
    p->place[p->n_place++] = j;
}

/* Running job s->job, of run seg (LAS: its class), is preempted at t.  LAS keeps its
 * waiting key (key_waiting: its GPU-seconds once the apply accrues them, the same sum as
 * las_key's) and class, made from the slot, which is in cache, so that commit reads no
 * per-job array for it. */
static void plan_add_preempt(struct sk_policy *p, const run_slot *s, int32_t seg, double t) {
    if (p->spec.kind == SK_POL_LAS) {
        p->preempt_key[p->n_preempt] = (wait_key){slot_gpu_s(s, t), s->arrival, s->job, 0, 0};
        p->preempt_class[p->n_preempt] = seg;
    }
    p->preempt[p->n_preempt++] = s->job;
}

/* The free GPUs per node once the plan's preemptions are done; returns their total.  free[]
 * and the bit sets (room_*) follow the engine's nodes between decisions (skn_on_node_change lists the
 * nodes that changed; the placements of a plan leave free[] as its apply leaves the nodes), so
 * only those nodes and the preempted jobs' are updated, not every node. */
/* The k-th job whose GPUs the plan releases: preempted ones, then moved ones. */
static int64_t released(const struct sk_policy *p, int64_t k) {
    return k < p->n_preempt ? p->preempt[k] : p->moved[k - p->n_preempt];
}

static int64_t free_after_preemptions(const sk_engine *e, struct sk_policy *p) {
    int64_t total = e->total_gpus - e->used_gpus;
    for (int64_t k = 0; k < p->n_preempt + p->n_moved; k++) {   /* records first: their misses overlap */
        const sk_job *x = &e->job[released(p, k)];
        __builtin_prefetch(x, 1);                       /* line 1, for the apply's accrual */
        __builtin_prefetch((const char *)x + 64, 1);    /* line 2: its placement, below */
    }
    for (int64_t k = 0; k < p->n_preempt + p->n_moved; k++) {
        const sk_job *x = &e->job[released(p, k)];
        for (int32_t q = 0; q < x->pl_len; q++) {
            int32_t n = x->pl[2 * q];
            p->free[n] += x->pl[2 * q + 1];
            total += x->pl[2 * q + 1];
            if (!p->is_dirty[n]) {
                p->is_dirty[n] = 1;
                p->dirty[p->n_dirty++] = n;
            }
        }
    }
    for (int64_t k = 0; k < p->n_dirty; k++) {
        int64_t n = p->dirty[k];
        p->is_dirty[n] = 0;
        if (p->room_leaf[p->leaf_pos[n]] != p->free[n]) room_set(p, n, p->free[n]);
    }
    p->n_dirty = 0;
    return total;
}

/* Place the plan's selected jobs in decision order (greedy_place's last loop). */
static int place_selected(sk_engine *e, struct sk_policy *p) {
    if (p->n_place == 0) return SK_OK;
    int64_t free_total = free_after_preemptions(e, p), o = 0;
    for (int64_t k = 0; k < p->n_place; k++) {          /* for the apply: their records */
        int64_t j = p->place[k];
        const sk_job *x = &e->job[j];
        __builtin_prefetch(x, 1);
        __builtin_prefetch((const char *)x + 64, 1);
        __builtin_prefetch(&p->model[j], 0);            /* and what the rates read of them */
        if (p->n_types > 1) __builtin_prefetch(&p->used_types[j], 1);
    }
    for (int64_t k = 0; k < p->n_place; k++) {
        int64_t j = p->place[k];
        int64_t m = place_one(e, p, p->free, &free_total, p->place_type[k], p->place_demand[k],
                              p->place_nodes + o, p->place_counts + o);
        if (m == 0)
            return ske_fail(e, SK_ESTATE, "native policy: selected job %lld does not fit",
                            (long long)j);
        o += m;
        p->place_ptr[k + 1] = o;
    }
    return SK_OK;
}

/* May select_jobs keep running jobs in bulk (keep_in_bulk)?  Its prefix argument counts
 * one budget: valid for LAS's runs of one demand each when the cluster has one GPU type
 * (its budget is the whole budget, every job may use it, and a running job that does not
 * fit it cannot move).  With several types a job's own type's budget decides, job by job. */
static int bulk_ok(const struct sk_policy *p) {
    return !p->spec.blocking && p->segs[0].demand > 0 && p->n_types == 1;
}

/* The run whose head comes first (slot_less), or -1 when all are used up; *next: the first
 * among the others (-1 if none).  LAS's heads are keyed here (demand > 0: las_key). */
static int32_t first_run(const run_seg *seg, int32_t n_seg, int32_t *next) {
    int32_t best = -1, nx = -1;
    for (int32_t k = 0; k < n_seg; k++) {
        if (seg[k].lo >= seg[k].hi) continue;
        if (seg[k].demand > 0) las_key(&seg[k].a[seg[k].lo], seg[k].t);
        if (best < 0) {
            best = k;
        } else if (slot_less(&seg[k].a[seg[k].lo], &seg[best].a[seg[best].lo])) {
            nx = best;
            best = k;
        } else if (nx < 0 || slot_less(&seg[k].a[seg[k].lo], &seg[nx].a[seg[nx].lo])) {
            nx = k;
        }
    }
    *next = nx;
    return best;
}

/* Run r (the first) gives up its head (preempted: the run's cut starts there if it has none
 * yet); returns the run whose head comes first now.  The other runs' heads did not change:
 * r still leads unless its new head comes after *next's. */
static int32_t run_pop(run_seg *seg, int32_t n_seg, int32_t r, int preempted, int32_t *next) {
    if (preempted && seg[r].cut == seg[r].hi) seg[r].cut = seg[r].lo;
    seg[r].lo++;
    if (seg[r].lo < seg[r].hi) {
        if (seg[r].demand > 0) las_key(&seg[r].a[seg[r].lo], seg[r].t);
        if (*next < 0 || slot_less(&seg[r].a[seg[r].lo], &seg[*next].a[seg[*next].lo])) return r;
    }
    return first_run(seg, n_seg, next);
}

/* GPUs of the jobs before x (all of them if x is NULL) in runs of one demand each: cnt[k]
 * of run k, searched among its first cnt[k] (in: an upper bound). */
static int64_t demand_before(const run_seg *seg, int32_t n_seg, const run_slot *x, int64_t *cnt) {
    int64_t total = 0;
    for (int32_t k = 0; k < n_seg; k++) {
        if (x && cnt[k] > 0) cnt[k] = count_less(seg[k].a + seg[k].lo, cnt[k], x, seg[k].t);
        total += (int64_t)seg[k].demand * cnt[k];
    }
    return total;
}

/* select_jobs' walk over running jobs, in bulk.  The running jobs that come before x (the
 * head of the best eligible waiting heap; NULL: none) are all walked before any waiting job:
 * a heap that becomes the best eligible one as the budget shrinks has its head after x (it
 * was eligible, and behind x, before).  So the longest prefix of them, in merged order, whose
 * GPUs fit in room (the budget) is kept, whatever its order inside.  Found by halving on the
 * run with the most candidates; stops when at most one per run is left (the walk decides
 * those).  Returns the GPUs taken.  Runs of one demand only (seg[k].demand > 0). */
static int64_t keep_in_bulk(run_seg *seg, int32_t n_seg, const run_slot *x, int64_t room,
                            int64_t *cnt, int64_t *part) {
    int64_t taken = 0;
    for (int32_t k = 0; k < n_seg; k++) cnt[k] = seg[k].hi - seg[k].lo;
    int64_t need = demand_before(seg, n_seg, x, cnt);
    for (;;) {
        if (need <= room - taken) {
            for (int32_t k = 0; k < n_seg; k++) seg[k].lo += cnt[k];
            return taken + need;
        }
        int32_t big = 0;
        for (int32_t k = 1; k < n_seg; k++) if (cnt[k] > cnt[big]) big = k;
        if (cnt[big] <= 1) return taken;
        run_slot pivot = seg[big].a[seg[big].lo + cnt[big] / 2];
        las_key(&pivot, seg[big].t);
        memcpy(part, cnt, (size_t)n_seg * sizeof *cnt);
        int64_t sum = demand_before(seg, n_seg, &pivot, part);
        if (sum <= room - taken) {          /* all before the pivot are kept */
            for (int32_t k = 0; k < n_seg; k++) { seg[k].lo += part[k]; cnt[k] -= part[k]; }
            taken += sum;
            need -= sum;
        } else {                            /* the cut comes before the pivot */
            memcpy(cnt, part, (size_t)n_seg * sizeof *cnt);
            need = sum;
        }
    }
}

/* Selection (greedy_place's first loop) as a merge of the contested running jobs (sorted
 * runs, merged in slot_less order) and the heads of the waiting heaps: a job is selected
 * when its request fits in what is left.  The best eligible heap is recomputed only when
 * its head leaves or it no longer fits (a smaller budget only removes heaps). */
static void select_jobs(sk_engine *e, struct sk_policy *p, run_seg *seg, int32_t n_seg,
                        int64_t budget) {
    int blocking = p->spec.blocking, bulk = bulk_ok(p);
    int32_t next, r = first_run(seg, n_seg, &next);
    int32_t b = best_bucket(p, blocking);
    for (;;) {
        if (budget <= 0 && !blocking) break;
        if (b >= 0 && !blocking && !bucket_fits(p, b)) {
            b = best_bucket(p, 0);
            bulk = bulk_ok(p);
        }
        if (r >= 0 && bulk && b >= 0 && !slot_before(&seg[r].a[seg[r].lo], wait_head(p, b)))
            bulk = 0;                          /* no running job before the head: none to keep */
        if (r >= 0 && bulk) {                  /* once per eligible heap head */
            run_slot x = b >= 0 ? waiting_slot(wait_head(p, b)) : (run_slot){0};
            int64_t kept = keep_in_bulk(seg, n_seg, b >= 0 ? &x : NULL, budget, p->seg_cnt, p->seg_cnt + n_seg);
            budget -= kept;
            p->tbudget[0] -= kept;             /* bulk_ok: one type, the budget's */
            r = first_run(seg, n_seg, &next);
            bulk = 0;
            continue;
        }
        if (r < 0 && b < 0) break;
        const run_slot *s = r >= 0 ? &seg[r].a[seg[r].lo] : NULL;
        int take_run = s && (b < 0 || slot_before(s, wait_head(p, b)));
        int64_t j = take_run ? s->job : wait_head(p, b)->job;
        int32_t demand = take_run ? s->demand : p->bucket_demand[b];  /* no lookup by job */
        int32_t t = take_run ? s->type : -1;                      /* a running job keeps its type, */
        int move = take_run && demand > p->tbudget[t];
        if (!take_run || move)                                    /* or moves */
            t = pick_type(e, p, j, p->bucket_mask[take_run ? p->bucket[j] : b], demand);
        if (t < 0) {
            if (blocking) break;
            plan_add_preempt(p, s, r, e->now);   /* a running job that no longer fits */
            r = run_pop(seg, n_seg, r, 1, &next);
            continue;
        }
        budget -= demand;
        p->tbudget[t] -= demand;
        if (take_run) {
            if (move) {                          /* its old GPUs are freed, it is placed anew */
                p->tfree[t] -= demand;
                p->moved[p->n_moved++] = j;
                p->moving[j] = 1;
                plan_add_place(p, j, s->arrival, p->bucket[j], t, demand);
            }
            r = run_pop(seg, n_seg, r, 0, &next);
        } else {
            p->tfree[t] -= demand;
            wait_key w = wait_take(p, b);
            plan_add_place(p, w.job, w.arrival, b, t, demand);
            b = best_bucket(p, blocking);
            bulk = bulk_ok(p);
        }
    }
    for (int32_t k = 0; k < n_seg; k++) {
        for (int64_t i = seg[k].lo; i < seg[k].hi; i++) plan_add_preempt(p, &seg[k].a[i], k, e->now);
        if (seg[k].cut > seg[k].lo) seg[k].cut = seg[k].lo;
    }
}

/* Running jobs that come before every waiting job are selected whatever their order
 * (all of them fit, since they run now): they move to the front of the running list,
 * the others ("contested", in their last order) to its end.  Returns how many are
 * contested; *budget becomes the GPUs the ahead jobs leave. */
static int64_t split_running(const sk_engine *e, struct sk_policy *p, int64_t *budget) {
    int32_t b = best_bucket(p, 1);
    const wait_key *head = b < 0 ? NULL : wait_head(p, b);
    int64_t n_ahead = 0, n_cont = 0, used = 0;
    run_slot *cont = p->slots_tmp;
    for (int64_t i = 0; i < p->n_slots; i++) {
        const run_slot *s = &p->slots[i];
        if (!head || slot_before(s, head)) {
            used += s->demand;
            p->tbudget[s->type] -= s->demand;
            if (n_ahead++ != i) p->slots[n_ahead - 1] = *s;
        } else {
            cont[n_cont++] = *s;
        }
    }
    memcpy(p->slots + n_ahead, cont, (size_t)n_cont * sizeof *cont);
    *budget = e->total_gpus - used;
    return n_cont;
}

/* The full decision: Policy.schedule for the built-in rigid policies. */
static int decide(sk_engine *e, struct sk_policy *p) {
    wait_settle_all(p);
    plan_reset(p);
    int64_t budget = e->total_gpus - e->used_gpus;
    int32_t n_seg = 1;
    type_budgets(p, p->spec.preemptive);
    p->segs[0] = (run_seg){p->slots, 0, 0, 0, 0, e->now};
    if (p->spec.kind == SK_POL_LAS) {
        n_seg = las_split(e, p, &budget);
    } else if (p->spec.preemptive) {
        if (p->slots_stale || e->n_done != p->done_seen) {
            compact_running(e, p);
            p->slots_stale = 0;
            p->done_seen = e->n_done;
        }
        if (p->spec.kind == SK_POL_TIRESIAS) tiresias_update(e, p);
        else for (int64_t i = 0; i < p->n_slots; i++) key_slot(p, &p->slots[i], e->now);
        int64_t n_cont = split_running(e, p, &budget);
        sort_slots(p, p->slots + p->n_slots - n_cont, n_cont);
        p->segs[0] = (run_seg){p->slots, p->n_slots - n_cont, p->n_slots, p->n_slots, 0, e->now};
    }
    select_jobs(e, p, p->segs, n_seg, budget);
    if (p->spec.kind == SK_POL_LAS)       /* one demand per class: its preempted jobs are its tail */
        for (int32_t b = 0; b < n_seg; b++) p->cls_sorted[b] = p->segs[b].cut;
    return place_selected(e, p);
}

/* The lone arrival (Policy.place_lone_arrivals): the only waiting job, if it fits. */
static int lone_arrival(sk_engine *e, struct sk_policy *p) {
    wait_settle_all(p);
    type_budgets(p, 0);
    int32_t b = best_bucket(p, 0);
    if (b < 0) return 0;
    plan_reset(p);
    wait_key w = wait_take(p, b);
    plan_add_place(p, w.job, w.arrival, b, pick_type(e, p, w.job, p->bucket_mask[b], p->bucket_demand[b]),
                   p->bucket_demand[b]);
    return 1;
}

/* ---------------------------------------------------------------- rates */

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static uint64_t key_hash(int32_t model, int32_t ngpu, int32_t nn, int64_t mask, double speed) {
    uint64_t bits;
    memcpy(&bits, &speed, sizeof bits);
    uint64_t h = mix(mix(mix(mix((uint64_t)model, (uint64_t)ngpu), (uint64_t)nn), (uint64_t)mask), bits);
    return h * 0xff51afd7ed558ccdULL;
}

/* Slot of the key, inserted (rate NaN) if absent; -1 when out of memory. */
static int64_t cache_slot(struct sk_policy *p, int32_t model, int32_t ngpu, int32_t nn,
                          int64_t mask, double speed) {
    if (2 * (p->cache_len + 1) > p->cache_cap) {
        int64_t cap = p->cache_cap ? 2 * p->cache_cap : 1024;
        rate_entry *old = p->cache, *c = calloc((size_t)cap, sizeof *c);
        if (!c) return -1;
        int64_t old_cap = p->cache_cap;
        p->cache = c;
        p->cache_cap = cap;
        p->cache_len = 0;
        for (int64_t s = 0; s < old_cap; s++) {
            if (!old[s].used) continue;
            int64_t t = cache_slot(p, old[s].model, old[s].ngpu, old[s].n_nodes, old[s].mask, old[s].speed);
            p->cache[t].rate = old[s].rate;
        }
        for (int64_t k = 0; k < p->n_miss; k++) {      /* re-home the asked keys */
            rate_entry *m = &old[p->miss_slot[k]];
            p->miss_slot[k] = cache_slot(p, m->model, m->ngpu, m->n_nodes, m->mask, m->speed);
        }
        free(old);
    }
    uint64_t h = key_hash(model, ngpu, nn, mask, speed);
    for (int64_t s = (int64_t)(h & (uint64_t)(p->cache_cap - 1));; s = (s + 1) & (p->cache_cap - 1)) {
        rate_entry *c = &p->cache[s];
        if (!c->used) {
            *c = (rate_entry){model, ngpu, nn, 1, mask, speed, NAN};
            p->cache_len++;
            return s;
        }
        if (c->model == model && c->ngpu == ngpu && c->n_nodes == nn && c->mask == mask &&
            memcmp(&c->speed, &speed, sizeof speed) == 0)
            return s;
    }
}

/* Summaries of the placed jobs and their cache slots; lists the keys to ask for. */
static int resolve_rates(sk_engine *e, struct sk_policy *p) {
    p->n_miss = 0;
    int64_t cap = p->cache_cap;
    for (int64_t k = 0; k < p->n_place; k++) {
        int64_t j = p->place[k], mask = 0;
        int32_t ngpu = 0, nn = 0;
        double speed = INFINITY;
        for (int64_t q = p->place_ptr[k]; q < p->place_ptr[k + 1]; q++) {
            int32_t node = p->place_nodes[q];
            ngpu += p->place_counts[q];
            nn++;
            mask |= (int64_t)1 << p->node_type[node];
            if (p->node_speed[node] < speed) speed = p->node_speed[node];
        }
        int64_t s = cache_slot(p, p->model[j], ngpu, nn, mask, speed);
        if (s < 0) return ske_fail(e, SK_ENOMEM, "rate cache: out of memory");
        p->sum_nn[k] = nn;
        p->sum_mask[k] = mask;
        p->sum_speed[k] = speed;
        p->sum_slot[k] = s;
        if (isnan(p->cache[s].rate)) {
            int seen = 0;
            for (int64_t m = 0; m < p->n_miss && !seen; m++) seen = p->miss_slot[m] == s;
            if (!seen) {
                p->miss_slot[p->n_miss] = s;
                p->miss_job[p->n_miss++] = j;
            }
        }
    }
    if (p->n_miss == 0 && p->cache_cap != cap) {    /* grown on the way: slots moved */
        for (int64_t k = 0; k < p->n_place; k++)
            p->sum_slot[k] = cache_slot(p, p->model[p->place[k]], p->place_demand[k],
                                        p->sum_nn[k], p->sum_mask[k], p->sum_speed[k]);
    }
    return p->n_miss ? SK_NEED_RATES : SK_OK;
}

/* ---------------------------------------------------------------- commit */


/* The plan in job-id order (as the Python engine lists changed jobs) through
 * sk_engine_apply, which validates it (spec.check_plans). */
static int apply_checked(sk_engine *e, struct sk_policy *p) {
    int64_t n = p->n_preempt + p->n_place;
    for (int64_t k = 0; k < p->n_place; k++) p->place_pos[p->place[k]] = k;
    for (int64_t k = 0; k < p->n_preempt; k++) p->ap_ord[k] = p->preempt[k] * 2;  /* even: preempt */
    for (int64_t k = 0; k < p->n_place; k++) p->ap_ord[p->n_preempt + k] = p->place[k] * 2 + 1;
    sort_i64(p->ap_ord, n, p->ap_tmp);
    int64_t o = 0;
    p->ap_ptr[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = p->ap_ord[i] / 2;
        p->ap_ids[i] = j;
        p->ap_rates[i] = 0.0;
        if (p->ap_ord[i] % 2) {
            int64_t k = p->place_pos[j];
            for (int64_t q = p->place_ptr[k]; q < p->place_ptr[k + 1]; q++) {
                p->ap_nodes[o] = p->place_nodes[q];
                p->ap_counts[o++] = p->place_counts[q];
            }
            p->ap_rates[i] = p->place_rate[k];
        }
        p->ap_ptr[i + 1] = o;
    }
    return sk_engine_apply(e, n, p->ap_ids, p->ap_ptr, p->ap_nodes, p->ap_counts, p->ap_rates);
}

/* LAS defers the completion events of the jobs it places (ske_plan.defer_after): a job is
 * looked at again at the first round at or after its lease ends (every round decides in
 * full, and las_drop_and_expire lists the leases that ended), no later than lease + round
 * after it resumes, where it is either preempted (its event, pushed at the start, would have
 * gone stale: most LAS stints end so under contention) or kept (its event is pushed then,
 * commit).  A completion more than lease + 2 rounds away is deferred; without rounds, none. */
static double las_defer_after(const sk_engine *e, const struct sk_policy *p) {
    if (p->spec.kind != SK_POL_LAS || !(e->round_period > 0.0)) return INFINITY;
    return p->spec.lease_s + 2.0 * e->round_period;
}

/* Apply the plan: as built (ske_apply_plan, trusted), or validated (spec.check_plans). */
static int apply_plan(sk_engine *e, struct sk_policy *p) {
    for (int64_t k = 0; k < p->n_place; k++) {
        p->place_rate[k] = p->cache[p->sum_slot[k]].rate;
        if (p->n_types > 1) p->used_types[p->place[k]] |= p->sum_mask[k];  /* one: see below */
    }
    if (p->spec.check_plans) return apply_checked(e, p);
    ske_plan plan = {p->n_preempt, p->n_moved, p->n_place, p->preempt, p->moved, p->place,
                     p->place_ptr, p->place_nodes, p->place_counts, p->place_rate,
                     las_defer_after(e, p)};
    return ske_apply_plan(e, &plan);
}

/* The n slots of a without the moving jobs; returns how many are left. */
static int64_t drop_moving(const struct sk_policy *p, run_slot *a, int64_t n) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!p->moving[a[i].job]) a[m++] = a[i];
    return m;
}

/* LAS: moved jobs were contested ones kept (before their class's cut), so they leave the
 * sorted part of their class; they rejoin it as leased jobs (a move is a restart). */
static void las_drop_moving(struct sk_policy *p) {
    for (int32_t b = 0; b < p->n_buckets; b++)
        p->cls_sorted[b] = drop_moving(p, las_class(p, b), p->cls_sorted[b]);
}

/* LAS's k-th preempted job waits again with the key and class its slot gave
 * (plan_add_preempt); with check_plans, held to key_waiting's. */
static int las_wait_again(sk_engine *e, struct sk_policy *p, int64_t k) {
    int64_t j = p->preempt[k];
    if (p->spec.check_plans && p->preempt_key[k].ka != key_waiting(e, p, j).ka)
        return ske_fail(e, SK_ESTATE, "native LAS: job %lld's slot key %.17g is not its "
                        "GPU-seconds %.17g", (long long)j, p->preempt_key[k].ka, key_waiting(e, p, j).ka);
    wait_push(p, p->preempt_class[k], p->preempt_key[k]);
    return SK_OK;
}

/* Finish the pending plan: rates, apply, bookkeeping.  *wake: a timer was set. */
static int commit(sk_engine *e, struct sk_policy *p, int *wake) {
    *wake = 0;
    int rc = resolve_rates(e, p);
    if (rc != SK_OK) return rc;
    rc = apply_plan(e, p);
    if (rc < 0) return rc;
    p->slots_stale |= p->n_preempt > 0;
    if (p->n_moved > 0) {               /* moved jobs get new slots below: drop the old ones */
        if (p->spec.kind == SK_POL_LAS) las_drop_moving(p);
        else p->n_slots = drop_moving(p, p->slots, p->n_slots);
        for (int64_t k = 0; k < p->n_moved; k++) p->moving[p->moved[k]] = 0;
    }
    for (int64_t k = 0; k < p->n_preempt; k++) {       /* they wait again, keyed as of now */
        if (p->spec.kind != SK_POL_LAS) wait_add(e, p, p->preempt[k]);
        else if ((rc = las_wait_again(e, p, k)) < 0) return rc;
        p->running[p->preempt[k]] = 0;
    }
    for (int64_t k = 0; k < p->n_place; k++) p->running[p->place[k]] = 1;
    for (int64_t k = 0; k < p->n_expired; k++) {       /* ended leases kept: their events now */
        if (!p->running[p->expired[k]]) continue;
        rc = ske_push_deferred(e, p->expired[k]);
        if (rc < 0) return rc;
    }
    p->n_expired = 0;
    for (int64_t k = 0; k < p->n_place && p->spec.kind == SK_POL_LAS; k++) {
        rc = las_add(e, p, p->place[k], p->place_arrival[k], p->place_class[k]);
        if (rc < 0) return rc;
    }
    if (p->spec.preemptive && p->spec.kind != SK_POL_LAS)
        for (int64_t k = 0; k < p->n_place; k++)
            slot_fill(e, p, &p->slots[p->n_slots++], p->place[k], p->place_arrival[k]);
    p->ctr.placements += p->n_place;
    p->ctr.preemptions += p->n_preempt;
    p->pending = 0;
    if (p->pending_full && p->spec.kind == SK_POL_TIRESIAS) {
        double t = tiresias_wakeup(e, p);
        if (!isnan(t) && t > e->now) {
            rc = sk_engine_set_timer(e, t);
            if (rc < 0) return rc;
            *wake = 1;
        }
    }
    return SK_OK;
}

/* ---------------------------------------------------------------- the loop */

static int64_t min_waiting_demand(const struct sk_policy *p) {
    for (int32_t b = 0; b < p->n_buckets; b++)
        if (p->n_waiting[b] > 0) return p->bucket_demand[b];
    return INT64_MAX;
}

/* Engine._Run.decide's choice: 0 skip, 1 lone arrival, 2 full decision. */
static int triage(sk_engine *e, struct sk_policy *p) {
    int32_t why = p->batch.reasons;
    if (p->spec.skip_if_nothing_fits && !(why & (SK_WHY_ROUND | SK_WHY_TIMER)) &&
        min_waiting_demand(p) > e->total_gpus - e->used_gpus)
        return 0;
    if (p->spec.skip_idle_completions && why == SK_WHY_COMPLETION && e->n_queued == 0) return 0;
    if (p->spec.place_lone_arrivals && why == SK_WHY_ARRIVAL && e->n_queued == 1 && lone_arrival(e, p))
        return 1;
    return 2;
}

static double fgd_value(const sk_engine *e, const struct sk_policy *p) {
    double f = 0.0;
    for (int64_t k = 0; k < (int64_t)p->n_types * p->fgd_width; k++)
        if (p->hist[k]) f += (double)p->hist[k] * p->fgd_w[k];
    return f;
}

void skn_on_node_change(sk_engine *e, int32_t node, int32_t used_before) {
    struct sk_policy *p = e->pol;
    p->free[node] = e->node_cap[node] - e->node_used[node];
    if (!p->is_dirty[node]) {
        p->is_dirty[node] = 1;
        p->dirty[p->n_dirty++] = node;
    }
    int64_t base = (int64_t)p->node_type[node] * p->fgd_width;
    p->hist[base + e->node_cap[node] - used_before]--;
    p->hist[base + e->node_cap[node] - e->node_used[node]]++;
    p->tused[p->node_type[node]] += e->node_used[node] - used_before;
}

/* Engine._Run.record: one row per decision point; stops a run that cannot go on. */
static int record(sk_engine *e, struct sk_policy *p, sk_decision_records *rec, int wake,
                  int32_t kind, double seconds) {
    int64_t i = rec->n++;
    rec->kind[i] = kind;
    rec->seconds[i] = seconds;
    rec->time[i] = e->now;
    rec->used_gpus[i] = e->used_gpus;
    rec->queued[i] = e->n_queued;
    rec->running[i] = e->n_running;
    rec->fgd[i] = fgd_value(e, p);
    if (e->n_queued > 0 && e->n_running == 0 && e->next_arrival >= e->n_jobs && !wake &&
        e->round_period <= 0.0)
        return ske_fail(e, SK_ESTALL, "left %lld jobs queued on an idle cluster at t=%.17g with "
                        "nothing left to happen", (long long)e->n_queued, e->now);
    return SK_OK;
}

static double clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int sk_native_run(sk_engine *e, sk_decision_records *rec) {
    if (!e || !e->pol || !rec || rec->n < 0 || rec->n > rec->cap) return SK_EINVAL;
    struct sk_policy *p = e->pol;
    double call_start = p->yield_s >= 0.0 ? clock_s() : 0.0;
    int stepped = 0;
    for (;;) {
        if (p->pending) {
            double t0 = clock_s();
            int wake, rc = commit(e, p, &wake);
            p->pending_seconds += clock_s() - t0;
            if (rc == SK_NEED_RATES) {
                p->ctr.rate_misses += p->n_miss;
                return rc;
            }
            if (rc < 0) return rc;
            p->ctr.decide_seconds += p->pending_seconds;
            rc = record(e, p, rec, wake, p->pending_full ? SK_POINT_DECIDED : SK_POINT_LONE_PLACED,
                        p->pending_seconds);
            if (rc < 0) return rc;
        }
        if (rec->n == rec->cap) return SK_RECORDS_FULL;
        if (stepped && p->yield_s >= 0.0 && clock_s() - call_start >= p->yield_s) return SK_YIELD;
        int rc = sk_engine_step(e, &p->batch);
        if (rc != SK_DECISION) return rc;
        stepped = 1;
        double t0 = clock_s();
        int what = triage(e, p);
        if (what == 0) {
            double dt = clock_s() - t0;
            p->ctr.skipped++;
            p->ctr.decide_seconds += dt;
            rc = record(e, p, rec, 0, SK_POINT_SKIPPED, dt);
            if (rc < 0) return rc;
            continue;
        }
        if (what == 1) {
            p->ctr.lone_placed++;
            rc = place_selected(e, p);
        } else {
            p->ctr.decisions++;
            rc = decide(e, p);
        }
        p->pending_seconds = clock_s() - t0;
        if (rc < 0) return rc;
        p->pending = 1;
        p->pending_full = what == 2;
    }
}

/* ---------------------------------------------------------------- setup and queries */

void skn_free(struct sk_policy *p) {
    if (!p) return;
    free(p->thr); free(p->thr_lo); free(p->model); free(p->bucket); free(p->node_type);
    free(p->est); free(p->node_speed); 
    free(p->queue); free(p->entered); free(p->fresh); free(p->bucket_demand); free(p->wq); free(p->wtmp);
    free(p->woff); free(p->wcap); free(p->wend); free(p->wnew); free(p->runs); free(p->n_runs);
    free(p->best_run); free(p->next_run);
    free(p->cls_off); free(p->n_waiting); free(p->slots); free(p->slots_tmp); free(p->preempt);
    free(p->place); free(p->place_ptr); free(p->place_nodes); free(p->place_counts); free(p->free);
    free(p->taken); free(p->node_keys); free(p->ap_ids); free(p->ap_ptr); free(p->ap_ord);
    free(p->ap_nodes); free(p->ap_counts); free(p->ap_rates); free(p->place_rate); free(p->sum_nn); free(p->sum_mask);
    free(p->sum_slot); free(p->sum_speed); free(p->cache); free(p->miss_slot); free(p->miss_job);
    free(p->hist); free(p->fgd_w); free(p->dem); free(p->place_pos); free(p->rkey); free(p->rkey2); free(p->room_bits); free(p->room_sum); free(p->room_leaf); free(p->free_start); free(p->ap_tmp); free(p->used_types); free(p->arrived); free(p->completed);
    free(p->cls_cap); free(p->cls_sorted); free(p->cls_leased); free(p->cls_done); free(p->cls_until); free(p->cls_lease_end); free(p->done_ids); free(p->las_tmp); free(p->expired); free(p->preempt_key); free(p->preempt_class); free(p->place_class); free(p->ins_pos); free(p->segs); free(p->seg_cnt);
    free(p->trate); free(p->bucket_mask); free(p->place_type); free(p->place_demand); free(p->place_arrival); free(p->leaf_pos); free(p->leaf_node); free(p->dirty); free(p->is_dirty);
    free(p->moved); free(p->moving); free(p->running);
    free(p);
}

static int check_spec(sk_engine *e, const sk_policy_spec *s, const sk_native_inputs *in) {
    if (s->kind == SK_POL_LAS && !(s->lease_s > 0.0 && isfinite(s->lease_s)))
        return ske_fail(e, SK_EINVAL, "native policy: LAS lease %g must be finite and > 0", s->lease_s);
    if (s->kind < SK_POL_FIFO || s->kind > SK_POL_TIRESIAS)
        return ske_fail(e, SK_EINVAL, "native policy: unknown kind %d", s->kind);
    if ((s->kind <= SK_POL_SJF) == (s->preemptive != 0))
        return ske_fail(e, SK_EINVAL, "native policy %d: FIFO and SJF are the non-preemptive ones", s->kind);
    if (s->n_thresholds < 0 || (s->n_thresholds > 0 && !s->thresholds))
        return ske_fail(e, SK_EINVAL, "native policy: thresholds missing");
    if (in->n_types <= 0 || in->n_types > 63 || in->n_buckets <= 0 || in->fgd_width <= 0 ||
        !in->model || !in->est_duration || !in->bucket || !in->node_type || !in->node_speed ||
        !in->fgd_weights || !in->type_rate || in->type_choice < SK_TYPE_FIRST_FIT ||
        in->type_choice > SK_TYPE_RANDOM)
        return ske_fail(e, SK_EINVAL, "native policy: inputs missing or out of range");
    for (int32_t n = 0; n < e->n_nodes; n++) {
        if (in->node_type[n] < 0 || in->node_type[n] >= in->n_types || e->node_cap[n] >= in->fgd_width)
            return ske_fail(e, SK_EINVAL, "native policy: node %d type or size out of range", n);
    }
    for (int64_t j = 0; j < e->n_jobs; j++) {
        if (in->bucket[j] < 0 || in->bucket[j] >= in->n_buckets || e->job[j].demand <= 0)
            return ske_fail(e, SK_EINVAL, "native policy: job %lld request bucket out of range", (long long)j);
    }
    return SK_OK;
}

#define NEW(ptr, count) ((ptr) = calloc((size_t)((count) > 0 ? (count) : 1), sizeof *(ptr)))

static int alloc_policy(sk_engine *e, struct sk_policy *p, int32_t nb) {
    int64_t nj = e->n_jobs, nn = e->n_nodes, g = e->total_gpus > 0 ? e->total_gpus : 1;
    int32_t nt = p->n_types, w = p->fgd_width, k = p->spec.n_thresholds;
    int64_t las = p->spec.kind == SK_POL_LAS ? nj : 0;     /* LAS's own per-job arrays */
    int ok = NEW(p->thr, k) && NEW(p->thr_lo, k) && NEW(p->model, nj) && NEW(p->bucket, nj) &&
             NEW(p->node_type, nn) && NEW(p->est, nj) && NEW(p->node_speed, nn) && 
             NEW(p->queue, nj) && NEW(p->entered, nj) &&
             NEW(p->fresh, nj) && NEW(p->bucket_demand, nb) && NEW(p->wq, 2 * nj) &&
             NEW(p->wtmp, nj) && NEW(p->woff, nb) && NEW(p->wcap, nb) && NEW(p->wend, nb) &&
             NEW(p->wnew, nb) && NEW(p->runs, (int64_t)nb * MAX_RUNS) && NEW(p->n_runs, nb) &&
             NEW(p->best_run, nb) && NEW(p->next_run, nb) &&
             NEW(p->cls_off, nb) && NEW(p->n_waiting, nb) && NEW(p->slots, nj) &&
             NEW(p->slots_tmp, nj) && NEW(p->preempt, nj) && NEW(p->place, nj) &&
             NEW(p->place_ptr, nj + 1) && NEW(p->place_nodes, g) && NEW(p->place_counts, g) &&
             NEW(p->free, nn) && NEW(p->taken, nn) && NEW(p->node_keys, nn) && NEW(p->ap_ids, nj) &&
             NEW(p->ap_ptr, nj + 1) && NEW(p->ap_ord, nj) && NEW(p->ap_nodes, g) &&
             NEW(p->ap_counts, g) && NEW(p->ap_rates, nj) && NEW(p->place_rate, nj) && NEW(p->dem, nj) && NEW(p->place_pos, nj) && NEW(p->rkey, nj) && NEW(p->rkey2, nj) &&
             NEW(p->room_bits, (int64_t)p->room_top * p->room_words) && NEW(p->room_sum, (int64_t)p->room_top * p->room_sums) && NEW(p->room_leaf, nn) && NEW(p->free_start, p->fgd_width + 1) &&
             NEW(p->ap_tmp, nj) && NEW(p->sum_nn, nj) &&
             NEW(p->sum_mask, nj) && NEW(p->sum_slot, nj) && NEW(p->sum_speed, nj) &&
             NEW(p->miss_slot, nj) && NEW(p->miss_job, nj) && NEW(p->hist, (int64_t)nt * w) &&
             NEW(p->fgd_w, (int64_t)nt * w) && NEW(p->used_types, nj) && NEW(p->arrived, nj) &&
             NEW(p->completed, nj) && NEW(p->cls_cap, nb) && NEW(p->cls_sorted, nb) &&
             NEW(p->cls_leased, nb) && NEW(p->cls_done, nb) && NEW(p->cls_until, nb) && NEW(p->cls_lease_end, nb) && NEW(p->done_ids, nj) && NEW(p->las_tmp, nj) && NEW(p->expired, las) && NEW(p->preempt_key, las) && NEW(p->preempt_class, las) && NEW(p->place_class, las) && NEW(p->ins_pos, nj + 1) &&
             NEW(p->segs, nb) && NEW(p->seg_cnt, 2 * nb) && NEW(p->trate, nj * nt) &&
             NEW(p->bucket_mask, nb) && NEW(p->place_type, nj) && NEW(p->place_demand, nj) && NEW(p->place_arrival, nj) && NEW(p->leaf_pos, nn) &&
             NEW(p->leaf_node, nn) && NEW(p->dirty, nn) && NEW(p->is_dirty, nn) && NEW(p->moved, nj) && NEW(p->moving, nj) && NEW(p->running, nj);
    return ok ? SK_OK : ske_fail(e, SK_ENOMEM, "native policy: out of memory for %lld jobs", (long long)nj);
}

/* Rates, allowed masks per bucket, GPUs per type, and the nodes' leaf positions grouped by type
 * (in node order within a type) so that a type's first fit is a range query. */
static int fill_types(sk_engine *e, struct sk_policy *p, const sk_native_inputs *in) {
    int32_t nt = p->n_types;
    memcpy(p->trate, in->type_rate, (size_t)e->n_jobs * nt * sizeof(double));
    p->type_choice = in->type_choice;
    p->type_seed = in->type_seed;
    for (int32_t b = 0; b < p->n_buckets; b++) p->bucket_mask[b] = -1;
    for (int64_t j = 0; j < e->n_jobs; j++) {
        int64_t mask = 0, *bm = &p->bucket_mask[p->bucket[j]];
        for (int32_t t = 0; t < nt; t++)
            if (p->trate[j * nt + t] > 0.0) mask |= (int64_t)1 << t;
        if (mask == 0)
            return ske_fail(e, SK_EINVAL, "native policy: job %lld cannot run on any GPU type",
                            (long long)j);
        if (*bm >= 0 && *bm != mask)
            return ske_fail(e, SK_EINVAL, "native policy: request bucket %d mixes allowed types",
                            (int)p->bucket[j]);
        *bm = mask;
    }
    int64_t pos = 0;
    for (int32_t t = 0; t < nt; t++) {
        p->type_first[t] = (double)e->n_nodes;
        p->type_lo[t] = pos;
        for (int32_t n = 0; n < e->n_nodes; n++) {
            if (p->node_type[n] != t) continue;
            if (pos == p->type_lo[t]) p->type_first[t] = (double)n;
            p->leaf_pos[n] = pos;
            p->leaf_node[pos++] = n;
            p->tcap[t] += e->node_cap[n];
            p->tused[t] += e->node_used[n];
        }
        p->type_hi[t] = pos;
    }
    for (int32_t n = 0; n < e->n_nodes; n++) p->free[n] = e->node_cap[n] - e->node_used[n];
    room_build(e, p);
    return SK_OK;
}

static void fill_inputs(sk_engine *e, struct sk_policy *p, const sk_native_inputs *in) {
    int64_t nj = e->n_jobs;
    for (int32_t t = 0; t < p->spec.n_thresholds; t++) {
        p->thr[t] = p->spec.thresholds[t];
        p->thr_lo[t] = p->thr[t] * (1.0 - p->spec.rel_tol);
    }
    p->spec.thresholds = NULL;
    memcpy(p->model, in->model, (size_t)nj * sizeof(int32_t));
    memcpy(p->bucket, in->bucket, (size_t)nj * sizeof(int32_t));
    memcpy(p->est, in->est_duration, (size_t)nj * sizeof(double));
    memcpy(p->node_type, in->node_type, (size_t)e->n_nodes * sizeof(int32_t));
    memcpy(p->node_speed, in->node_speed, (size_t)e->n_nodes * sizeof(double));
    memcpy(p->fgd_w, in->fgd_weights, (size_t)p->n_types * p->fgd_width * sizeof(double));
    for (int64_t j = 0; j < nj; j++) {          /* heaps: one slice per request */
        p->bucket_demand[p->bucket[j]] = e->job[j].demand;
        p->n_waiting[p->bucket[j]]++;
    }
    for (int32_t b = 1; b < p->n_buckets; b++) p->cls_off[b] = p->cls_off[b - 1] + p->n_waiting[b - 1];
    for (int32_t b = 0; b < p->n_buckets; b++) {
        p->cls_cap[b] = p->n_waiting[b];
        p->cls_until[b] = -INFINITY;        /* no certificate: the first look re-keys */
        p->cls_lease_end[b] = INFINITY;     /* no leased job */
    }
    for (int32_t b = 0; b < p->n_buckets; b++) {     /* waiting regions: twice the jobs */
        p->woff[b] = 2 * p->cls_off[b];
        p->wcap[b] = 2 * p->cls_cap[b];
    }
    for (int32_t b = 0; b < p->n_buckets; b++) p->n_waiting[b] = 0;
    for (int32_t n = 0; n < e->n_nodes; n++)
        p->hist[(int64_t)p->node_type[n] * p->fgd_width + e->node_cap[n] - e->node_used[n]]++;
    p->batch.arrived = p->arrived;
    p->batch.completed = p->completed;
}

static int buckets_sorted(sk_engine *e, struct sk_policy *p) {
    for (int32_t b = 1; b < p->n_buckets; b++)
        if (p->bucket_demand[b] < p->bucket_demand[b - 1])
            return ske_fail(e, SK_EINVAL, "native policy: request buckets must be in non-decreasing order");
    return SK_OK;
}

int sk_native_set_policy(sk_engine *e, const sk_policy_spec *spec, const sk_native_inputs *in) {
    if (!e || !spec || !in) return SK_EINVAL;
    if (e->pol || e->now != e->start_time || e->next_arrival > 0)
        return ske_fail(e, SK_ESTATE, "native policy: install it once, before the first step");
    int rc = check_spec(e, spec, in);
    if (rc < 0) return rc;
    struct sk_policy *p = calloc(1, sizeof *p);
    if (!p) return ske_fail(e, SK_ENOMEM, "native policy: out of memory");
    p->spec = *spec;
    p->yield_s = -1.0;
    p->n_types = in->n_types;
    p->n_buckets = in->n_buckets;
    p->fgd_width = in->fgd_width;
    for (int32_t n = 0; n < e->n_nodes; n++)
        if (e->node_cap[n] > p->room_top) p->room_top = e->node_cap[n];
    p->room_words = (e->n_nodes + 63) / 64;
    p->room_sums = (p->room_words + 63) / 64;
    rc = alloc_policy(e, p, in->n_buckets);
    if (rc < 0) { skn_free(p); return rc; }
    fill_inputs(e, p, in);
    rc = fill_types(e, p, in);
    if (rc == SK_OK) rc = buckets_sorted(e, p);
    if (rc < 0) { skn_free(p); return rc; }
    e->pol = p;
    return SK_OK;
}

int sk_native_set_yield(sk_engine *e, double seconds) {
    if (!e || !e->pol || seconds != seconds) return SK_EINVAL;
    e->pol->yield_s = seconds;
    return SK_OK;
}

int sk_native_missing(const sk_engine *e, int64_t cap, int64_t *job, int32_t *model, int32_t *ngpu,
                      int32_t *n_nodes, int64_t *type_mask, double *min_speed, int64_t *n_missing) {
    if (!e || !e->pol || !n_missing) return SK_EINVAL;
    const struct sk_policy *p = e->pol;
    *n_missing = p->n_miss;
    if (p->n_miss > cap) return SK_EINVAL;
    for (int64_t k = 0; k < p->n_miss; k++) {
        const rate_entry *c = &p->cache[p->miss_slot[k]];
        job[k] = p->miss_job[k];
        model[k] = c->model;
        ngpu[k] = c->ngpu;
        n_nodes[k] = c->n_nodes;
        type_mask[k] = c->mask;
        min_speed[k] = c->speed;
    }
    return SK_OK;
}

int sk_native_put_rates(sk_engine *e, int64_t n, const double *rates) {
    if (!e || !e->pol || (n > 0 && !rates)) return SK_EINVAL;
    struct sk_policy *p = e->pol;
    if (n != p->n_miss)
        return ske_fail(e, SK_EINVAL, "native policy: %lld rates for %lld missing keys",
                        (long long)n, (long long)p->n_miss);
    for (int64_t k = 0; k < n; k++) {
        if (!(rates[k] > 0.0) || !isfinite(rates[k]))
            return ske_fail(e, SK_EINVAL, "native policy: rate %g for job %lld must be finite and > 0",
                            rates[k], (long long)p->miss_job[k]);
        p->cache[p->miss_slot[k]].rate = rates[k];
    }
    p->n_miss = 0;
    return SK_OK;
}

int sk_native_counters_get(const sk_engine *e, sk_native_counters *out) {
    if (!e || !e->pol || !out) return SK_EINVAL;
    *out = e->pol->ctr;
    return SK_OK;
}

/* Each job's GPU types as a bit mask.  With one type, apply_plan records none (a miss per
 * placement saved): every job that started used it. */
int sk_native_used_types(const sk_engine *e, int64_t *out) {
    if (!e || !e->pol || !out) return SK_EINVAL;
    if (e->pol->n_types > 1) {
        memcpy(out, e->pol->used_types, (size_t)e->n_jobs * sizeof(int64_t));
    } else {
        for (int64_t j = 0; j < e->n_jobs; j++) out[j] = isnan(e->job[j].first_start) ? 0 : 1;
    }
    return SK_OK;
}
