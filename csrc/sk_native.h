/* clustersim native policies: the built-in rigid policies decided inside the event
 * kernel, without a return to Python per decision.
 *
 * With a policy installed (sk_native_set_policy), sk_native_run runs the event loop
 * and decides every decision point in C: the same order, selection, greedy placement
 * and shortcuts as the Python policies in sim/policies/queue.py and tiresias.py and
 * the placer in sim/placement.py, held to them job by job by the tests.
 *
 * Work per decision: queued jobs wait in one queue (a stack of sorted runs) per distinct
 * GPU request and allowed-type mask (buckets in increasing request order),
 * keyed once when they start waiting (their keys do not change while they wait);
 * running jobs are re-keyed and re-sorted (adaptively: insertion sort from the last
 * order, merge sort when that is far off).  A decision walks the running jobs and the
 * heads of the heaps whose request still fits, so it costs
 * O(running + placed x requests + moved x log queued), never O(queued).  LAS keeps its
 * running jobs by request class (attained service grows at one rate per class, so a
 * class keeps its order) and, on a cluster of one GPU type, keeps the running jobs ahead
 * of each waiting head in bulk (with several types, job by job under per-type budgets).
 *
 * Rates come from a cache keyed by the placement summary (model, GPUs, nodes spanned,
 * GPU-type mask, slowest server speed): on a miss sk_native_run returns
 * SK_NEED_RATES with the decision pending; the caller asks the throughput oracle for
 * the keys listed by sk_native_missing, hands them back with sk_native_put_rates and
 * calls sk_native_run again, which finishes the pending decision.
 */
#ifndef SK_NATIVE_H
#define SK_NATIVE_H
#include <stdint.h>
#include "sk_engine.h"

/* sk_native_run statuses besides SK_DONE and errors */
enum {
    SK_NEED_RATES = 3,      /* rates for new placement summaries are needed */
    SK_RECORDS_FULL = 4,    /* the record buffers are full: drain and call again */
    SK_YIELD = 5            /* the call's time budget (sk_native_set_yield) ran out: call again */
};

/* policies */
enum {
    SK_POL_FIFO = 1,
    SK_POL_SJF = 2,
    SK_POL_SRTF = 3,
    SK_POL_LAS = 4,
    SK_POL_TIRESIAS = 5
};

typedef struct {
    int32_t kind;                   /* SK_POL_* */
    int32_t spread;                 /* placement: 0 consolidated, 1 spread */
    int32_t preemptive;
    int32_t blocking;
    int32_t skip_if_nothing_fits;   /* the Policy shortcuts of sim/policies/base.py */
    int32_t skip_idle_completions;
    int32_t place_lone_arrivals;
    int32_t n_thresholds;           /* Tiresias queue limits (GPU-s), increasing */
    const double *thresholds;
    double rel_tol;                 /* Tiresias: relative slack of the demotion test */
    double lease_s;                 /* LAS: a job keeps its GPUs this long after its restart delay */
    int32_t check_plans;            /* 1: each plan goes through sk_engine_apply's validation, in
                                       job-id order (tests); 0: applied as built, trusted */
} sk_policy_spec;

/* Per-job and per-node inputs, arrays owned by the caller for the call only. */
typedef struct {
    const int32_t *model;           /* n_jobs: model index (rate cache key) */
    const double *est_duration;     /* n_jobs: oracle duration at the request (SJF, SRTF) */
    const int32_t *bucket;          /* n_jobs: index of its (request, allowed types) among the distinct
                                       ones, requests non-decreasing with the index */
    int32_t n_buckets;
    const int32_t *node_type;       /* n_nodes */
    const double *node_speed;       /* n_nodes */
    int32_t n_types;
    const double *fgd_weights;      /* [n_types][fgd_width]: FGD's F term by free GPUs */
    int32_t fgd_width;              /* > the largest node */
    /* GPU types (sim/placement.py): a job runs on one type, where its rate is > 0 */
    const double *type_rate;        /* [n_jobs][n_types]: throughput at the request (0: cannot run) */
    int32_t type_choice;            /* SK_TYPE_*: which type with room a job takes */
    uint64_t type_seed;             /* SK_TYPE_RANDOM's seed */
} sk_native_inputs;

/* type choice rules (sim.placement.TYPE_CHOICES): smallest key among the types with room */
enum {
    SK_TYPE_FIRST_FIT = 0,          /* key: the type's first node */
    SK_TYPE_FASTEST = 1,            /* key: minus the job's rate on the type */
    SK_TYPE_RANDOM = 2              /* key: hash(seed, job, now, type) */
};


/* Counters of a native run so far. */
typedef struct {
    int64_t decisions;              /* decision points the policy decided */
    int64_t skipped;                /* decision points skipped as provably idle */
    int64_t lone_placed;            /* lone arrivals placed by the engine */
    int64_t placements;             /* jobs placed */
    int64_t preemptions;            /* jobs preempted */
    int64_t rate_misses;            /* placement summaries sent to the oracle */
    double decide_seconds;          /* wall time inside decisions */
} sk_native_counters;

/* Install a native policy on a fresh engine (before its first step). */
int sk_native_set_policy(sk_engine *e, const sk_policy_spec *spec, const sk_native_inputs *in);

/* Run decision points in C until SK_DONE, SK_NEED_RATES, SK_RECORDS_FULL, SK_YIELD or an error. */
int sk_native_run(sk_engine *e, sk_decision_records *rec);

/* Give control back (SK_YIELD) once a call of sk_native_run has run `seconds` of wall time and
 * made at least one decision point, so that the caller can see signals (Ctrl-C) during a long
 * run; the run's results do not depend on where it yields.  seconds < 0 (the default): never. */
int sk_native_set_yield(sk_engine *e, double seconds);

/* The placement summaries whose rates are missing, with a job that needs each
 * (n_missing entries; if cap is too small *n_missing is the size needed and
 * SK_EINVAL is returned). */
int sk_native_missing(const sk_engine *e, int64_t cap, int64_t *job, int32_t *model, int32_t *ngpu,
                      int32_t *n_nodes, int64_t *type_mask, double *min_speed,
                      int64_t *n_missing);

/* Rates of the missing summaries, in the order sk_native_missing listed them. */
int sk_native_put_rates(sk_engine *e, int64_t n, const double *rates);

int sk_native_counters_get(const sk_engine *e, sk_native_counters *out);

/* Per-job bit masks of the GPU types each job ran on (n_jobs entries). */
int sk_native_used_types(const sk_engine *e, int64_t *out);

#endif
