/* clustersim event kernel: public API.
 *
 * This header is #included by the C sources and, with its '#' lines removed,
 * handed to cffi's cdef: every type and function is declared exactly once.
 *
 * Model: a cluster of nodes with integer GPU capacities and a set of jobs with
 * arrival times and an amount of work.  Python decides allocations; the kernel
 * keeps time exactly (event driven), accrues progress, predicts completions,
 * enforces invariants and returns to Python only at decision points.
 * Every function returns SK_OK (0) or a positive status, or a negative SK_E*
 * code; sk_engine_message() then says what went wrong.  Nothing aborts or prints.
 */
#ifndef SK_ENGINE_H
#define SK_ENGINE_H
#include <stdint.h>

/* status and error codes */
enum {
    SK_OK = 0,
    SK_DECISION = 1,        /* sk_engine_step: a decision point was reached */
    SK_DONE = 2,            /* sk_engine_step: every job has finished */
    SK_EINVAL = -1,         /* bad argument */
    SK_ENOMEM = -2,         /* allocation failed */
    SK_ESTATE = -3,         /* an invariant would be broken */
    SK_ECAPACITY = -4,      /* more GPUs than a node has */
    SK_ESTALL = -5          /* unfinished jobs but nothing left that can happen */
};

/* event kinds; at equal times they are processed in this order */
enum {
    SK_EV_COMPLETION = 0,
    SK_EV_ARRIVAL = 1,
    SK_EV_ROUND = 2,
    SK_EV_TIMER = 3
};

/* decision reasons (bit mask) */
enum {
    SK_WHY_ARRIVAL = 1,
    SK_WHY_COMPLETION = 2,
    SK_WHY_ROUND = 4,
    SK_WHY_TIMER = 8
};

/* job states */
enum {
    SK_JOB_FUTURE = 0,      /* not yet arrived */
    SK_JOB_QUEUED = 1,      /* arrived, holds no GPU */
    SK_JOB_RUNNING = 2,     /* holds GPUs (possibly still in its restart delay) */
    SK_JOB_DONE = 3
};

typedef struct sk_engine sk_engine;

/* What happened since the last decision.  The arrays are owned by the caller
 * and must hold n_jobs entries each. */
typedef struct {
    double now;
    int32_t reasons;          /* SK_WHY_* bits */
    int64_t n_arrived;
    int64_t n_completed;
    int64_t *arrived;         /* job ids that arrived */
    int64_t *completed;       /* job ids that finished */
} sk_batch;

/* Per-job results, arrays of n_jobs entries owned by the caller. */
typedef struct {
    double *first_start;      /* NaN if never started */
    double *finish;           /* NaN if not finished */
    double *gpu_seconds;      /* GPU-seconds held */
    double *run_seconds;      /* wall seconds with at least one GPU */
    int64_t *restarts;        /* allocation changes after the first start */
    int32_t *state;           /* SK_JOB_* */
} sk_results;

/* decide_on: SK_WHY_ARRIVAL and/or SK_WHY_COMPLETION make those events
 * decision points; rounds (round_period > 0) and timers always are.
 * demand: GPUs each job requests (for sk_engine_min_queued_demand); may be NULL.
 * On error *out may still hold an engine (free it after reading the message). */
int sk_engine_new(sk_engine **out, int32_t n_nodes, const int32_t *node_gpus,
                  int64_t n_jobs, const double *arrival, const double *work,
                  const double *restart_delay, const int32_t *demand,
                  double round_period, double start_time, int32_t decide_on);
void sk_engine_free(sk_engine *e);
const char *sk_engine_message(const sk_engine *e);

/* Run until the next decision point (SK_DECISION) or until all jobs are done
 * (SK_DONE). */
int sk_engine_step(sk_engine *e, sk_batch *batch);

/* One row per decision point of a deciding kernel (sk_native_run, sk_gavel_run), in
 * caller-owned arrays of cap entries. */
typedef struct {
    int64_t cap;
    int64_t n;                      /* rows written (the caller resets it to 0) */
    double *time;
    int64_t *used_gpus;
    int64_t *queued;
    int64_t *running;
    double *fgd;
    int32_t *kind;                  /* SK_POINT_*: passed over, lone arrival placed, decided */
    double *seconds;                /* wall time of a decision (placement and apply included) */
} sk_decision_records;

enum {
    SK_POINT_SKIPPED = 0,
    SK_POINT_LONE_PLACED = 1,
    SK_POINT_DECIDED = 2
};

/* The decision points sk_engine_step_quiet passes over, one row each, in arrays of cap entries
 * owned by the caller (n rows written); completed / completed_at (job_cap entries) hold the
 * jobs that finished at them, in order, with their times. */
typedef struct {
    int64_t cap;
    int64_t n;
    double *time;
    int64_t *used_gpus;
    int64_t *queued;
    int64_t *running;
    double *fgd;              /* sum over nodes of fgd_weights[fgd_base[node] + free GPUs] */
    int64_t job_cap;
    int64_t n_completed;
    int64_t *completed;
    double *completed_at;
} sk_quiet_rows;

/* sk_engine_step, passing over the decision points that a round policy holds through: those
 * made by arrivals and completions alone, with jobs still running, before time `until`.  Each
 * one passed over is recorded in rows; the first other one (or SK_DONE, or an error) is
 * returned as sk_engine_step returns it, as is a quiet one that finds rows full. */
int sk_engine_step_quiet(sk_engine *e, sk_batch *batch, double until, const double *fgd_weights,
                         const int64_t *fgd_base, sk_quiet_rows *rows);

/* Change allocations at the current time.  For each of the n listed jobs,
 * job_ids[i] gets the placement nodes[indptr[i]:indptr[i+1]] with GPU counts
 * counts[...] (an empty range preempts it) and the progress rate rates[i]
 * (work units per second, > 0 when the placement is not empty).  All old
 * placements of the listed jobs are released before any new one is taken.
 * A job whose placement changes after its first start pays its restart delay. */
int sk_engine_apply(sk_engine *e, int64_t n, const int64_t *job_ids,
                    const int64_t *indptr, const int32_t *nodes,
                    const int32_t *counts, const double *rates);

/* sk_engine_apply with space sharing: shared[i] != 0 places job_ids[i] on space-shared GPUs
 * (Gavel's packing, Gandiva): a node holds its exclusive GPUs plus ceil(shared slots / 2),
 * two shared placements a GPU.  A shared job holds half of each of its GPUs (its GPU-seconds
 * accrue at half its GPU count); its rate is the caller's (the co-located rate).  Turning a
 * running job's sharing on or off changes its placement (a restart).  shared may be NULL
 * (none shared: sk_engine_apply). */
int sk_engine_apply_shared(sk_engine *e, int64_t n, const int64_t *job_ids,
                           const int64_t *indptr, const int32_t *nodes,
                           const int32_t *counts, const double *rates, const int8_t *shared);

/* Ask for a decision point at time t (> now). */
int sk_engine_set_timer(sk_engine *e, double t);

/* on != 0: a job's first start also pays its restart delay (the Pollux and Sia simulators'
 * re-scale delay on every allocation); restarts still count only later starts.  Default 0. */
int sk_engine_set_first_start_delay(sk_engine *e, int32_t on);

/* Everything a decision needs in one call: the active jobs (in id order) with
 * their live state and current placements (CSR, indptr has n + 1 entries);
 * with queued_only != 0, only the queued jobs (for non-preemptive policies).
 * Returns SK_OK and sets *n_active and *n_entries, or SK_EINVAL with both set to
 * the sizes needed when job_cap or entry_cap is too small. */
int sk_engine_snapshot(sk_engine *e, int32_t queued_only, int64_t job_cap, int64_t entry_cap,
                       int64_t *ids,
                       int32_t *ngpu, double *remaining, double *attained_gpu_s,
                       double *run_seconds, double *queued_since, int64_t *indptr,
                       int32_t *nodes, int32_t *counts, int64_t *n_active,
                       int64_t *n_entries);

/* The current simulated time. */
double sk_engine_now(const sk_engine *e);

/* Smallest GPU request among queued jobs (INT64_MAX if none is queued). */
int64_t sk_engine_min_queued_demand(const sk_engine *e);

/* Free GPUs per node (n_nodes entries). */
int sk_engine_node_free(const sk_engine *e, int32_t *free_out);

/* Cluster-wide counters: GPUs in use, jobs queued / running / done,
 * next arrival time (inf if none), busy GPU-seconds so far. */
int sk_engine_counters(const sk_engine *e, int64_t *used_gpus, int64_t *n_queued,
                       int64_t *n_running, int64_t *n_done, double *next_arrival,
                       double *busy_gpu_seconds);

/* Copy per-job results and check end-of-run invariants (every job finished
 * exactly once, GPU-time adds up); returns SK_ESTATE if they do not hold. */
int sk_engine_results(sk_engine *e, sk_results *out);

#endif
