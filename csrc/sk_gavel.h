/* clustersim native Gavel rounds: the round mechanism of sim/policies/gavel_rounds.py
 * decided inside the event kernel.
 *
 * Between two allocation resets a Gavel round policy is a fixed procedure on the policy's
 * per-job memory: credit the time jobs received, compute each type's priorities, pick the
 * jobs greedily, assign workers (lease extension, then the strided walk), cut each job's
 * round into its micro-task, apply the changed placements.  sk_gavel_run runs that, and the
 * event loop between rounds (passing over mid-round points as sk_engine_step_quiet does),
 * and returns to the caller only where Python is needed:
 *   SK_GAVEL_NEED_ALLOCATION  a reset is due (the job set changed and the reset interval
 *                             passed): the caller runs the policy's reset (deficits, time
 *                             counters, the allocation LP) on the same arrays and calls again;
 *   SK_GAVEL_NEED_ORDERS      the shuffled type orders ran out: the caller adds more;
 *   SK_GAVEL_RECORDS_FULL     the record rows are full: the caller drains them;
 *   SK_GAVEL_FAILED           the run must stop with the policy's error (g->failure and
 *                             g->failure_job say which; the caller words it);
 *   SK_DONE                   every job finished.
 * The policy's arrays are the policy's own (numpy, updated in place); the arithmetic is the
 * Python path's, operation for operation, so a native run equals the Python run job for
 * job (tests/test_gavel_native.py).  Rates come from a table of each job's rate on each type
 * on one server and on several, at speed 1 (the throughput table's rates depend on nothing
 * else of a placement but the slowest server's speed, which multiplies them).
 */
#ifndef SK_GAVEL_H
#define SK_GAVEL_H
#include <stdint.h>
#include "sk_engine.h"

enum {
    SK_GAVEL_NEED_ALLOCATION = 6,
    SK_GAVEL_NEED_ORDERS = 7,
    SK_GAVEL_RECORDS_FULL = 8,
    SK_GAVEL_FAILED = 9
};

/* g->failure: what stopped the run (SK_GAVEL_FAILED) */
enum {
    SK_GAVEL_NO_SCHEDULABLE = 1,    /* no active job can be placed and none is left to arrive */
    SK_GAVEL_CANNOT_ASSIGN = 2,     /* a type ran out of GPUs for failure_job */
    SK_GAVEL_ZERO_RATE = 3,         /* failure_job placed where its rate is 0 */
    SK_GAVEL_IDLE_QUEUED = 4,       /* jobs queued on an idle cluster, nothing left to happen */
    SK_GAVEL_STALLED = 5            /* stall_limit idle decisions in a row */
};

typedef struct {
    /* the run (fixed) */
    int64_t n_jobs;
    int32_t n_types;
    int32_t n_nodes;
    const int32_t *demand;          /* n_jobs: GPUs (Gavel's scale factor) */
    const double *thr;              /* [n_jobs][n_types]: the policy's throughput matrix */
    const double *rate;             /* [n_jobs][n_types][2]: the engine's rate at speed 1, on one
                                       server ([..][0]) and on several ([..][1]) */
    const int32_t *node_type;
    const int32_t *node_gpus;
    const double *node_speed;
    const double *fgd_weights;      /* the FGD term (sk_engine_step_quiet's) */
    const int64_t *fgd_base;
    double round_s;                 /* Gavel's time_per_iteration */
    double reset_interval_s;
    double round_period;            /* the engine's round period (the idle-queue check) */
    int32_t skip_zero_priority;
    int64_t stall_limit;            /* idle decisions in a row that stop the run */
    /* the policy's per-job memory, in place */
    int8_t *member;
    double *time_so_far;            /* [n_jobs][n_types] */
    double *deficit;                /* [n_jobs][n_types] */
    double *alloc;                  /* [n_jobs][n_types] */
    int8_t *in_alloc;
    int64_t *ran_on;
    double *credit;
    int8_t *to_finish;
    int8_t *overran;
    double *worker_time;            /* n_types */
    /* the engine side's per-job memory, in place */
    double *scale_applied;
    int64_t *used_types;
    /* type orders of the rounds to come (rows of n_types), NULL for the cluster's order */
    const int64_t *orders;
    int64_t n_orders;
    int64_t next_order;
    /* the policy's scalars (the caller mirrors them; NaN stands for None) */
    double now_seen;
    double last_reset;
    int32_t need_update;
    double round_end;
    double credit_start;
    double last_round_end;
    int64_t rounds;
    int64_t lease_extensions;
    /* the loop */
    int32_t phase;                  /* 0: decide the point at hand; 1: resume after a reset;
                                       2: go on to the next point */
    int64_t idle_decisions;
    double stall_since;
    double paused_seconds;          /* wall time of the pending decision before it returned for
                                       a reset or orders, plus the caller's (the caller adds its
                                       reset's): counted in the decision's seconds */
    int64_t skipped;                /* decision points skipped (mid-round) */
    int32_t failure;                /* SK_GAVEL_* failure, with the job and a count */
    int64_t failure_job;
    int64_t failure_count;
    int64_t failure_mask;
} sk_gavel;


typedef struct sk_gavel_work sk_gavel_work;

/* Scratch for a run on engine e (its sizes); free with sk_gavel_work_free. */
int sk_gavel_work_new(sk_gavel_work **out, const sk_engine *e, const sk_gavel *g);
void sk_gavel_work_free(sk_gavel_work *w);

/* Run from the decision point in batch (after sk_engine_step) until one of the statuses
 * above or an error. */
int sk_gavel_run(sk_engine *e, sk_batch *batch, sk_gavel *g, sk_gavel_work *w,
                 sk_decision_records *rec);

#endif
