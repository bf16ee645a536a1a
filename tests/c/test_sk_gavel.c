/* C-level tests of the native Gavel rounds (csrc/sk_gavel.c), run under AddressSanitizer/UBSan
 * by tests/c/run_sanitizers.sh: a contended random workload on two GPU types (a job barred from
 * a type, jobs that span servers, a slow server) to the end with every return of sk_gavel_run
 * exercised (resets, shuffled type orders that run out, record rows that fill up), the same
 * run twice (deterministic), and the error paths (bad arguments, a job placed where its rate
 * is 0, a job no type can hold).  The reset here is a stand-in for the policy's Python
 * (sim.policies.gavel_rounds.GavelRounds._maybe_reset with an equal split of each job over
 * the types it can run on in place of the LP); tests/test_gavel_native.py holds the kernel to
 * the Python path job for job. */
#include "sk_gavel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 30
#define M 2
#define NODES 3
#define ROWS 5              /* small on purpose: SK_GAVEL_RECORDS_FULL is exercised */
#define ROUND_S 60.0

static const int32_t GPUS[NODES] = {4, 4, 2};
static const int32_t TYPES[NODES] = {0, 1, 1};
static const double SPEED[NODES] = {1.0, 1.0, 0.5};
static const double FGD_W[13] = {0, 1, 2, 3, 0, 0, 1, 2, 3, 0, 0, 1, 0};
static const int64_t FGD_BASE[NODES] = {0, 5, 10};

typedef struct {
    /* inputs */
    int64_t n;
    double arrival[N], work[N], delay[N];
    int32_t demand[N];
    double thr[N * M], rate[N * M * 2];
    /* the policy's memory */
    int8_t member[N], in_alloc[N], to_finish[N], overran[N];
    double time_so_far[N * M], deficit[N * M], alloc[N * M], credit[N], worker_time[M];
    int64_t ran_on[N];
    double scale_applied[N];
    int64_t used_types[N];
    int64_t orders[2 * M];
    /* records */
    double time[ROWS], fgd[ROWS], seconds[ROWS];
    int64_t used[ROWS], queued[ROWS], running[ROWS];
    int32_t kind[ROWS];
    sk_decision_records rec;
    sk_gavel g;
    /* what the run did */
    int64_t resets, order_refills, rows, decided, passed_over, max_used;
} world;

/* 30 random jobs of 1, 2, 4 or 6 GPUs (6: type 1 only, across its two servers); every third
 * job of at most 4 GPUs cannot run on type 1; type 0 is faster by 2 to 4 times. */
static void random_world(world *w, unsigned seed) {
    memset(w, 0, sizeof *w);
    const int32_t sizes[4] = {1, 2, 4, 6};
    double t = 0.0;
    w->n = N;
    for (int j = 0; j < N; j++) {
        seed = seed * 1103515245u + 12345u;
        t += (double)((seed >> 8) % 40);
        w->arrival[j] = t;
        w->demand[j] = sizes[(seed >> 4) % 4];
        w->work[j] = 200.0 + (double)((seed >> 12) % 3000);
        w->delay[j] = 0.0;
        w->thr[j * M + 0] = w->demand[j] == 6 ? 0.0 : 2.0 + (double)(j % 3);
        w->thr[j * M + 1] = j % 3 == 1 && w->demand[j] <= 4 ? 0.0 : 1.0;
        for (int k = 0; k < M; k++) {
            w->rate[(j * M + k) * 2 + 0] = w->thr[j * M + k] * w->demand[j];
            w->rate[(j * M + k) * 2 + 1] = 0.8 * w->thr[j * M + k] * w->demand[j];
        }
    }
}

static void init_policy(world *w, int shuffled) {
    sk_gavel *g = &w->g;
    memset(g, 0, sizeof *g);
    g->n_jobs = w->n;
    g->n_types = M;
    g->n_nodes = NODES;
    g->demand = w->demand;
    g->thr = w->thr;
    g->rate = w->rate;
    g->node_type = TYPES;
    g->node_gpus = GPUS;
    g->node_speed = SPEED;
    g->fgd_weights = FGD_W;
    g->fgd_base = FGD_BASE;
    g->round_s = ROUND_S;
    g->reset_interval_s = 0.0;
    g->round_period = 0.0;
    g->skip_zero_priority = 0;
    g->stall_limit = 1000;
    g->member = w->member;
    g->time_so_far = w->time_so_far;
    g->deficit = w->deficit;
    g->alloc = w->alloc;
    g->in_alloc = w->in_alloc;
    for (int64_t j = 0; j < w->n; j++) w->ran_on[j] = -1;
    g->ran_on = w->ran_on;
    g->credit = w->credit;
    g->to_finish = w->to_finish;
    g->overran = w->overran;
    g->worker_time = w->worker_time;
    g->scale_applied = w->scale_applied;
    g->used_types = w->used_types;
    g->orders = shuffled ? w->orders : NULL;
    g->n_orders = 0;
    g->now_seen = -INFINITY;
    g->round_end = NAN;
    g->last_round_end = NAN;
    g->stall_since = NAN;
    w->rec = (sk_decision_records){ROWS, 0, w->time, w->used, w->queued, w->running, w->fgd,
                                   w->kind, w->seconds};
}

/* GavelRounds._maybe_reset, with each job split equally over the types it can run on. */
static void reset(world *w, double now) {
    sk_gavel *g = &w->g;
    double elapsed = now - g->last_reset;
    int64_t k = 0;
    for (int64_t j = 0; j < w->n; j++) {
        if (!g->member[j]) continue;
        k++;
        int can = 0;
        for (int t = 0; t < M; t++) can += w->thr[j * M + t] > 0.0;
        for (int t = 0; t < M; t++) {
            double received = g->time_so_far[j * M + t] - ROUND_S / 2.0;
            double should = g->in_alloc[j] ? g->alloc[j * M + t] * elapsed : 0.0;
            g->deficit[j * M + t] += should - received;
            g->time_so_far[j * M + t] = ROUND_S / 2.0;
            g->alloc[j * M + t] = w->thr[j * M + t] > 0.0 ? 1.0 / can : 0.0;
        }
    }
    for (int t = 0; t < M; t++) g->worker_time[t] = (double)k * ROUND_S / 2.0;
    for (int64_t j = 0; j < w->n; j++) g->in_alloc[j] = g->member[j];
    g->last_reset = now;
    g->need_update = 0;
    w->resets++;
}

/* Alternate the two type orders, two rounds' worth at a time (SK_GAVEL_NEED_ORDERS often). */
static void refill_orders(world *w) {
    int64_t flip = w->order_refills++ % 2;
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < M; t++) w->orders[r * M + t] = (r + flip) % 2 ? M - 1 - t : t;
    w->g.n_orders = 2;
    w->g.next_order = 0;
}

static sk_engine *new_engine(world *w) {
    sk_engine *e = NULL;
    int rc = sk_engine_new(&e, NODES, GPUS, w->n, w->arrival, w->work, w->delay, w->demand, 0.0,
                           w->arrival[0], SK_WHY_ARRIVAL | SK_WHY_COMPLETION);
    CHECK(rc == SK_OK);
    return e;
}

/* Drain the record rows: their kinds and sums. */
static void drain(world *w) {
    for (int64_t r = 0; r < w->rec.n; r++) {
        CHECK(w->kind[r] == SK_POINT_SKIPPED || w->kind[r] == SK_POINT_DECIDED);
        CHECK(w->used[r] >= 0 && w->used[r] <= 10 && w->queued[r] >= 0 && w->running[r] >= 0);
        CHECK(w->fgd[r] >= 0.0 && w->seconds[r] >= 0.0);
        w->decided += w->kind[r] == SK_POINT_DECIDED;
        w->passed_over += w->kind[r] == SK_POINT_SKIPPED;
        if (w->used[r] > w->max_used) w->max_used = w->used[r];
    }
    w->rows += w->rec.n;
    w->rec.n = 0;
}

/* Run to the end (SK_DONE) or to the first other status, which it returns. */
static int run(world *w, sk_engine *e, int shuffled) {
    init_policy(w, shuffled);
    sk_gavel_work *scratch = NULL;
    CHECK(sk_gavel_work_new(&scratch, e, &w->g) == SK_OK);
    int64_t arrived[N], completed[N];
    sk_batch b = {0.0, 0, 0, 0, arrived, completed};
    int rc = sk_engine_step(e, &b);
    CHECK(rc == SK_DECISION);
    for (;;) {
        rc = sk_gavel_run(e, &b, &w->g, scratch, &w->rec);
        drain(w);
        if (rc == SK_GAVEL_NEED_ALLOCATION) reset(w, b.now);
        else if (rc == SK_GAVEL_NEED_ORDERS) refill_orders(w);
        else if (rc != SK_GAVEL_RECORDS_FULL) break;
    }
    sk_gavel_work_free(scratch);
    return rc;
}

static void run_to_end(world *w, int shuffled, double *finish) {
    sk_engine *e = new_engine(w);
    if (!e) return;
    int rc = run(w, e, shuffled);
    CHECK(rc == SK_DONE);
    if (rc != SK_DONE) fprintf(stderr, "sk_gavel_run: %d %s (failure %d)\n", rc,
                               sk_engine_message(e), w->g.failure);
    double fs[N], gs[N], rs[N];
    int64_t restarts[N];
    int32_t st[N];
    sk_results res = {fs, finish, gs, rs, restarts, st};
    CHECK(sk_engine_results(e, &res) == SK_OK);          /* GPU-time adds up, nothing held */
    for (int64_t j = 0; j < w->n; j++) {
        CHECK(st[j] == SK_JOB_DONE && finish[j] >= w->arrival[j] && fs[j] >= w->arrival[j]);
        CHECK(w->used_types[j] > 0);
        if (w->thr[j * M + 0] == 0.0) CHECK(!(w->used_types[j] & 1));   /* never where barred */
        if (w->thr[j * M + 1] == 0.0) CHECK(!(w->used_types[j] & 2));
    }
    CHECK(w->resets > 0 && w->g.rounds > 0 && w->decided > 0 && w->rows > ROWS);
    CHECK(w->max_used > 0 && w->max_used <= 10);
    sk_engine_free(e);
}

static void test_runs_to_the_end_deterministically(void) {
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        static world a, b;
        double fa[N], fb[N];
        random_world(&a, 11);
        run_to_end(&a, shuffled, fa);
        random_world(&b, 11);
        run_to_end(&b, shuffled, fb);
        CHECK(memcmp(fa, fb, sizeof fa) == 0);
        CHECK(a.rows == b.rows && a.resets == b.resets && a.g.rounds == b.g.rounds);
        CHECK(a.g.skipped > 0 && a.g.skipped == a.passed_over);   /* mid-round points */
        if (shuffled) CHECK(a.order_refills > 1);
    }
}

static void test_bad_arguments(void) {
    static world w;
    random_world(&w, 3);
    init_policy(&w, 0);
    sk_engine *e = new_engine(&w);
    if (!e) return;
    sk_gavel_work *scratch = NULL;
    CHECK(sk_gavel_work_new(NULL, e, &w.g) == SK_EINVAL);
    CHECK(sk_gavel_work_new(&scratch, NULL, &w.g) == SK_EINVAL);
    w.g.n_types = 0;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_EINVAL);
    w.g.n_types = M;
    w.g.n_nodes = NODES - 1;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_EINVAL);
    w.g.n_nodes = NODES;
    int32_t bad_types[NODES] = {0, 2, 1};
    w.g.node_type = bad_types;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_EINVAL && scratch == NULL);
    w.g.node_type = TYPES;
    const int32_t other_gpus[NODES] = {4, 4, 4};        /* not the engine's cluster */
    w.g.node_gpus = other_gpus;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_EINVAL && scratch == NULL);
    w.g.node_gpus = GPUS;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_OK);
    int64_t arrived[N], completed[N];
    sk_batch b = {0.0, 0, 0, 0, arrived, completed};
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(sk_gavel_run(e, &b, &w.g, scratch, NULL) == SK_EINVAL);
    w.rec.n = ROWS + 1;
    CHECK(sk_gavel_run(e, &b, &w.g, scratch, &w.rec) == SK_EINVAL);
    w.rec.n = 0;
    w.rec.cap = 0;                                      /* no room: never RECORDS_FULL forever */
    CHECK(sk_gavel_run(e, &b, &w.g, scratch, &w.rec) == SK_EINVAL);
    w.rec.cap = ROWS;
    w.g.n_jobs = N - 1;
    CHECK(sk_gavel_run(e, &b, &w.g, scratch, &w.rec) == SK_EINVAL);
    sk_gavel_work_free(scratch);
    sk_gavel_work_free(NULL);
    sk_engine_free(e);
}

/* One job of `demand` GPUs that may run on type 0 only, at its table rate there times
 * rate_factor: the run's status, its failure in *failure. */
static int run_one_job_on_type_0(int32_t demand, double rate_factor, int32_t *failure) {
    static world w;
    random_world(&w, 5);
    w.n = 1;
    w.demand[0] = demand;
    w.thr[0] = 1.0;
    w.thr[1] = 0.0;
    for (int q = 0; q < 4; q++) w.rate[q] = q < 2 ? rate_factor * demand : 0.0;
    sk_engine *e = new_engine(&w);
    if (!e) return SK_EINVAL;
    int rc = run(&w, e, 0);
    *failure = w.g.failure;
    if (rc == SK_GAVEL_FAILED) CHECK(w.g.failure_job == 0);
    if (w.g.failure == SK_GAVEL_ZERO_RATE) CHECK(w.g.failure_mask == 1);
    sk_engine_free(e);
    return rc;
}

/* Placed where its table rate is 0: the run stops with SK_GAVEL_ZERO_RATE; a 6-GPU job only
 * type 0 (4 GPUs) may hold, nothing left to arrive: SK_GAVEL_NO_SCHEDULABLE. */
static void test_failures_stop_the_run(void) {
    int32_t failure = 0;
    CHECK(run_one_job_on_type_0(2, 1.0, &failure) == SK_DONE && failure == 0);
    CHECK(run_one_job_on_type_0(2, 0.0, &failure) == SK_GAVEL_FAILED && failure == SK_GAVEL_ZERO_RATE);
    CHECK(run_one_job_on_type_0(6, 1.0, &failure) == SK_GAVEL_FAILED &&
          failure == SK_GAVEL_NO_SCHEDULABLE);
}

/* A type order naming no type stops the run with SK_EINVAL and a message. */
static void test_a_bad_type_order_is_an_error(void) {
    static world w;
    random_world(&w, 3);
    init_policy(&w, 1);
    sk_engine *e = new_engine(&w);
    if (!e) return;
    sk_gavel_work *scratch = NULL;
    CHECK(sk_gavel_work_new(&scratch, e, &w.g) == SK_OK);
    int64_t arrived[N], completed[N];
    sk_batch b = {0.0, 0, 0, 0, arrived, completed};
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    const int64_t bad[2 * M] = {0, 1, 1, 2};
    w.g.orders = bad;
    w.g.n_orders = 2;
    int rc, calls = 0;
    do {
        rc = sk_gavel_run(e, &b, &w.g, scratch, &w.rec);
        drain(&w);
        if (rc == SK_GAVEL_NEED_ALLOCATION) reset(&w, b.now);
        if (rc == SK_GAVEL_NEED_ORDERS) w.g.next_order = 1;   /* the bad row again */
    } while ((rc == SK_GAVEL_NEED_ALLOCATION || rc == SK_GAVEL_RECORDS_FULL ||
              rc == SK_GAVEL_NEED_ORDERS) && ++calls < 1000);
    CHECK(rc == SK_EINVAL && strstr(sk_engine_message(e), "type order") != NULL);
    sk_gavel_work_free(scratch);
    sk_engine_free(e);
}

/* A lone job on 1 GPU keeps its server round after round (lease extensions, no restart): it
 * finishes after work / rate on the faster type, where its priority is highest. */
static void test_lone_job_runs_through(void) {
    static world w;
    random_world(&w, 5);
    w.n = 1;
    w.arrival[0] = 7.0;
    w.work[0] = 1000.0;
    w.demand[0] = 1;
    w.thr[0] = 2.0;
    w.thr[1] = 1.0;
    const double rate[4] = {2.0, 1.6, 1.0, 0.8};
    memcpy(w.rate, rate, sizeof rate);
    sk_engine *e = new_engine(&w);
    if (!e) return;
    CHECK(run(&w, e, 0) == SK_DONE);
    double fs[1], fin[1], gs[1], rs[1];
    int64_t restarts[1];
    int32_t st[1];
    sk_results res = {fs, fin, gs, rs, restarts, st};
    CHECK(sk_engine_results(e, &res) == SK_OK);
    CHECK(w.used_types[0] == 1 && restarts[0] == 0 && fs[0] == 7.0);
    CHECK(fabs(fin[0] - (7.0 + 500.0)) < 1e-9);
    CHECK(w.g.rounds >= 500 / ROUND_S && w.g.lease_extensions >= w.g.rounds - 1);
    sk_engine_free(e);
}

int main(void) {
    test_runs_to_the_end_deterministically();
    test_lone_job_runs_through();
    test_bad_arguments();
    test_a_bad_type_order_is_an_error();
    test_failures_stop_the_run();
    if (failures) {
        fprintf(stderr, "test_sk_gavel: %d checks failed\n", failures);
        return 1;
    }
    printf("test_sk_gavel: all checks passed\n");
    return 0;
}
