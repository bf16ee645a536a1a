/* Internal to the event kernel: the engine's state, shared by sk_engine.c and the
 * native policies in sk_native.c.  Not a public header (cffi never sees it). */
#ifndef SK_ENGINE_INTERNAL_H
#define SK_ENGINE_INTERNAL_H
#include <stdint.h>
#include "sk_engine.h"

struct sk_policy;

typedef struct {
    double t;
    int32_t kind;
    int64_t seq;
    int64_t job;
    int64_t version;
} sk_event;

/* One job's state, in one record of two cache lines: an apply, an accrual or a completion
 * reads and writes one job's state in one or two lines, not a line in each of a dozen
 * per-job arrays (at 10^5 jobs, each of those was a cache miss). */
typedef struct {
    /* line 1: progress (accrual, ske_live) and the event loop */
    double remaining;
    double rate;
    double resume_at;          /* progress starts here (restart delay) */
    double last_update;
    double gpu_seconds;
    double run_seconds;
    int64_t deferred;          /* 1: running, its completion event not pushed yet (ske_plan's
                                  defer_after; ske_push_deferred pushes it) */
    int32_t state;
    int32_t ngpu;
    /* line 2: starts, queueing, placement */
    double first_start;
    double queued_since;
    double restart_delay;
    int64_t restarts;
    int32_t *pl;               /* node, count pairs: pl_one, or an allocation for more pairs */
    int32_t pl_len;            /* entries (pairs) */
    int32_t pl_capacity;
    int32_t demand;
    int8_t moved;              /* apply: placement released, about to change */
    int8_t shared;             /* its GPUs are space-shared: two shared placements a GPU */
    int32_t pl_one[2];         /* a placement on one node */
} sk_job;

struct sk_engine {
    /* cluster */
    int32_t n_nodes;
    int32_t *node_cap;
    int32_t *node_used;        /* GPUs taken: exclusive + shared (see shared_hist) */
    int32_t *node_shared;      /* shared (space-sharing) GPU slots held, two a GPU */
    int32_t *shared_hist;      /* per node (stride shared_stride): shared placements by their
                                  GPU count there; a node's shared GPUs are
                                  max(largest such count, ceil(node_shared / 2)) */
    int32_t shared_stride;     /* largest node capacity + 1 */
    int64_t total_gpus;
    int64_t used_gpus;
    int64_t held_halves;       /* GPU halves held by jobs: 2 an exclusive GPU, 1 a shared one
                                  (busy GPU-seconds accrue held_halves / 2) */
    int64_t *scratch;          /* n_nodes, capacity checks in apply */
    int64_t *scratch_shared;   /* n_nodes, apply: 1 + a node's shared GPUs before it (0: unset) */
    /* jobs (static) */
    int64_t n_jobs;
    double *arrival;
    double *work;
    int64_t *arrival_order;    /* job ids sorted by (arrival, id) */
    int64_t next_arrival;      /* index into arrival_order */
    /* jobs: per-job state in one record each (sk_job) */
    sk_job *job;
    void *job_block;           /* job's allocation (job is aligned to a cache line in it) */
    double *finish;
    int64_t *version;          /* per job: completion events of older versions are stale (apart
                                  from the records, so that dropping stale events reads 8 bytes
                                  a job, not a line of a record) */
    int64_t *stamp;            /* duplicate detection in apply */
    int64_t *active;           /* ids of arrived, unfinished jobs, increasing */
    int64_t n_active;
    int64_t apply_count;
    /* time and events */
    double now;
    double start_time;
    double round_period;
    int64_t round_index;
    int32_t decide_on;
    int32_t first_start_delay;  /* 1: a job's first start pays its restart delay too */
    sk_event *heap;
    int64_t heap_len;
    int64_t heap_cap;
    int64_t heap_check;        /* drop stale events when the heap reaches this size */
    int64_t seq;
    /* counters */
    int64_t n_queued, n_running, n_done;
    double busy_gpu_seconds;
    char message[256];
    /* native policy (sk_native.c); NULL when Python decides */
    struct sk_policy *pol;
};


/* Set the engine's message; returns code. */
int ske_fail(sk_engine *e, int code, const char *fmt, ...);

/* Job j's GPU-seconds, run seconds and remaining work at time t (reads only). */
void ske_live(const sk_engine *e, int64_t j, double t, double *gpu_s, double *run_s,
              double *remaining);

/* Stable merge sort of n ids by key[id] (by the id if key is NULL); tmp holds n. */
void ske_merge_sort_ids(int64_t *ids, int64_t n, int64_t *tmp, const double *key);

/* A plan built by the native policy: running jobs to preempt, running jobs that move (their
 * GPUs are released; they are among place[] too), and the jobs placed, with their
 * (node, count) entries nodes/counts[place_ptr[k]:place_ptr[k + 1]] and rates[k]. */
typedef struct {
    int64_t n_preempt, n_moved, n_place;
    const int64_t *preempt, *moved, *place, *place_ptr;
    const int32_t *nodes, *counts;
    const double *rates;
    double defer_after;     /* a placed job whose completion falls more than this after its
                               resume time gets no completion event yet: its policy promises
                               a decision before then that keeps it (ske_push_deferred) or
                               preempts it; INFINITY: push every one */
} ske_plan;

/* Apply a native plan as built, trusted (see sk_engine.c); the same results as
 * sk_engine_apply of the plan in job-id order. */
int ske_apply_plan(sk_engine *e, const ske_plan *plan);

/* Push running job j's completion event if ske_apply_plan deferred it (else nothing): the
 * same event, at the same time, as an undeferred start would have pushed.  Called by the
 * policy at a decision before that time. */
int ske_push_deferred(sk_engine *e, int64_t j);

/* Hooks into the native policy (sk_native.c), called by the kernel when e->pol is set. */
void skn_on_arrival(sk_engine *e, int64_t j);
void skn_on_complete(sk_engine *e, int64_t j);
void skn_on_node_change(sk_engine *e, int32_t node, int32_t used_before);  /* after the change */
void skn_free(struct sk_policy *p);

#endif
