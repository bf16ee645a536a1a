/* C-level tests of the native policies (csrc/sk_native.c), run under AddressSanitizer/UBSan
 * by tests/c/run_sanitizers.sh: every policy over a contended random workload (the rate
 * protocol, records that fill up, preemptions and Tiresias wakeups) under every type choice
 * rule, with jobs barred from a type (never placed there, never across types), LAS under
 * heavy contention (request classes, leases ending between rounds, ties, moves between
 * types), hand-worked FIFO and type-choice cases, and the error paths. */
#include "sk_native.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define ROWS 7           /* small on purpose: SK_RECORDS_FULL is exercised */

typedef struct {
    double time[ROWS], fgd[ROWS], seconds[ROWS];
    int64_t used[ROWS], queued[ROWS], running[ROWS];
    int32_t kind[ROWS];
    sk_decision_records rec;
} records;

static void records_init(records *r) {
    r->rec = (sk_decision_records){ROWS, 0, r->time, r->used, r->queued, r->running, r->fgd,
                                 r->kind, r->seconds};
}

/* Answer the kernel's rate questions: GPUs x slowest type (2 on type 0, 1 on type 1) x speed. */
static int answer_rates(sk_engine *e) {
    int64_t n = 0, job[64];
    int32_t model[64], ngpu[64], nn[64];
    int64_t mask[64];
    double speed[64], rate[64];
    if (sk_native_missing(e, 64, job, model, ngpu, nn, mask, speed, &n) != SK_OK) return -1;
    for (int64_t k = 0; k < n; k++)
        rate[k] = ngpu[k] * ((mask[k] & 2) ? 1.0 : 2.0) * speed[k] / (nn[k] > 1 ? 1.25 : 1.0);
    return sk_native_put_rates(e, n, rate);
}

static int64_t yields, calls;   /* SK_YIELD returns and sk_native_run calls in run_all */

/* Run to the end; returns the rows recorded, or -1. */
static int64_t run_all(sk_engine *e, records *r) {
    int64_t rows = 0;
    for (;;) {
        int rc = sk_native_run(e, &r->rec);
        calls++;
        if (rc == SK_NEED_RATES) {
            if (answer_rates(e) != SK_OK) return -1;
            continue;
        }
        if (rc == SK_YIELD) {
            yields++;
            continue;
        }
        rows += r->rec.n;
        for (int64_t i = 0; i < r->rec.n; i++)
            if (r->queued[i] < 0 || r->used[i] < 0 || r->kind[i] < 0 || r->kind[i] > 2) return -1;
        r->rec.n = 0;
        if (rc == SK_DONE) return rows;
        if (rc != SK_RECORDS_FULL) {
            fprintf(stderr, "sk_native_run: %d %s\n", rc, sk_engine_message(e));
            return -1;
        }
    }
}

static const int32_t GPUS[3] = {4, 4, 2};
static const int32_t TYPES[3] = {0, 1, 1};
static const double SPEED[3] = {1.0, 1.0, 0.5};
static const double FGD_W[2 * 5] = {0, 1, 2, 3, 0, 0, 1, 2, 3, 0};

/* Buckets: distinct (request, allowed mask) pairs in increasing order (sim/native.py). */
static int32_t make_buckets(int64_t n, const int32_t *demand, const double *trate, int32_t *bucket) {
    int64_t key[40], uniq[40];
    int32_t nu = 0;
    for (int64_t j = 0; j < n; j++) {
        key[j] = (int64_t)demand[j] * 4 + (trate[2 * j] > 0.0) + 2 * (trate[2 * j + 1] > 0.0);
        int32_t k = 0;
        while (k < nu && uniq[k] != key[j]) k++;
        if (k == nu) uniq[nu++] = key[j];
    }
    for (int64_t j = 0; j < n; j++) {
        int32_t rank = 0;
        for (int32_t k = 0; k < nu; k++) rank += uniq[k] < key[j];
        bucket[j] = rank;
    }
    return nu;
}

/* check: plans validated and applied in job-id order (spec.check_plans), else as built. */
static sk_engine *engine_checked(int32_t kind, int32_t spread, int64_t n, const double *arrival,
                                 const double *work, const int32_t *demand, double round_s,
                                 const double *trate, int32_t choice, int32_t check) {
    double delay[40];
    int32_t model[40], bucket[40];
    double est[40];
    for (int64_t j = 0; j < n; j++) {
        delay[j] = 5.0;
        model[j] = (int32_t)(j % 2);
        est[j] = work[j] / demand[j];
    }
    int32_t nb = make_buckets(n, demand, trate, bucket);
    sk_engine *e = NULL;
    int32_t why = SK_WHY_ARRIVAL | SK_WHY_COMPLETION;
    if (sk_engine_new(&e, 3, GPUS, n, arrival, work, delay, demand, round_s, arrival[0], why) != SK_OK)
        return e;
    double thr[2] = {40.0, 400.0};
    int preemptive = kind > SK_POL_SJF;
    sk_policy_spec spec = {kind, spread, preemptive, kind == SK_POL_FIFO, !preemptive, preemptive, 1,
                           kind == SK_POL_TIRESIAS ? 2 : 0, thr, 1e-9, 60.0, check};
    sk_native_inputs in = {model, est, bucket, nb, TYPES, SPEED, 2, FGD_W, 5, trate, choice, 42};
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_OK);
    return e;
}

static sk_engine *engine_typed(int32_t kind, int32_t spread, int64_t n, const double *arrival,
                               const double *work, const int32_t *demand, double round_s,
                               const double *trate, int32_t choice) {
    return engine_checked(kind, spread, n, arrival, work, demand, round_s, trate, choice, 0);
}

/* Every job may use both types (rate 2 on type 0, 1 on type 1), first fit; plans checked or not. */
static sk_engine *engine_both(int32_t kind, int32_t spread, int64_t n, const double *arrival,
                              const double *work, const int32_t *demand, double round_s, int32_t check) {
    static double both[80];
    for (int64_t j = 0; j < 2 * n; j++) both[j] = j % 2 ? 1.0 : 2.0;
    return engine_checked(kind, spread, n, arrival, work, demand, round_s, both, SK_TYPE_FIRST_FIT, check);
}

static sk_engine *engine_with(int32_t kind, int32_t spread, int64_t n, const double *arrival,
                              const double *work, const int32_t *demand, double round_s) {
    return engine_both(kind, spread, n, arrival, work, demand, round_s, 0);
}

/* 40 random jobs of 1, 2, 4 or 6 GPUs (6: type 1 only, jobs never span types).  bursty: a
 * third arrive with the job before them (ties), every fifth has the same work, the others
 * up to 2,050 s; else gaps of up to 19 s and work of 10-509 s. */
static void random_jobs(unsigned seed, int bursty, double *arrival, double *work, int32_t *demand) {
    const int32_t sizes[4] = {1, 2, 4, 6};
    double t = 0.0;
    for (int j = 0; j < 40; j++) {
        seed = seed * 1103515245u + 12345u;
        if (bursty) t += (seed >> 8) % 3 == 0 ? 0.0 : (double)((seed >> 10) % 7);
        else t += (double)((seed >> 8) % 20);
        arrival[j] = t;
        demand[j] = sizes[(seed >> 4) % 4];
        if (bursty) work[j] = j % 5 == 0 ? 200.0 : 50.0 + (double)((seed >> 12) % 2000);
        else work[j] = 10.0 + (double)((seed >> 12) % 500);
    }
}

static void test_every_policy_finishes(void) {
    double arrival[40], work[40], trate[80];
    int32_t demand[40];
    random_jobs(7, 0, arrival, work, demand);
    for (int j = 0; j < 40; j++) {
        trate[2 * j] = 2.0;                          /* type 0 (4 GPUs) */
        trate[2 * j + 1] = j % 3 == 1 && demand[j] <= 4 ? 0.0 : 1.0;   /* some barred from type 1 */
    }
    for (int32_t kind = SK_POL_FIFO; kind <= SK_POL_TIRESIAS; kind++) {
        for (int32_t spread = 0; spread < 2; spread++) {
          for (int32_t choice = SK_TYPE_FIRST_FIT; choice <= SK_TYPE_RANDOM; choice++) {
            sk_engine *e = engine_typed(kind, spread, 40, arrival, work, demand,
                                        kind == SK_POL_LAS ? 60.0 : 0.0, trate, choice);
            records r;
            records_init(&r);
            CHECK(run_all(e, &r) > 0);
            double fs[40], fin[40], gs[40], rs[40];
            int64_t restarts[40], types[40];
            int32_t st[40];
            sk_results res = {fs, fin, gs, rs, restarts, st};
            CHECK(sk_engine_results(e, &res) == SK_OK);
            CHECK(sk_native_used_types(e, types) == SK_OK);
            sk_native_counters c;
            CHECK(sk_native_counters_get(e, &c) == SK_OK);
            CHECK(c.placements >= 40 && c.decisions > 0);
            for (int j = 0; j < 40; j++) {
                CHECK(st[j] == SK_JOB_DONE && fin[j] >= arrival[j] && types[j] > 0);
                if (kind <= SK_POL_SJF) CHECK(types[j] == 1 || types[j] == 2);   /* one type */
                if (trate[2 * j + 1] == 0.0) CHECK(types[j] == 1);            /* never barred */
            }
            sk_engine_free(e);
          }
        }
    }
}

/* Run one engine to the end; its per-job results into res (40 jobs) and its counters. */
static void run_to_results(sk_engine *e, sk_results *res, sk_native_counters *c) {
    records r;
    records_init(&r);
    CHECK(run_all(e, &r) > 0);
    CHECK(sk_engine_results(e, res) == SK_OK);         /* GPU-time adds up, nothing held */
    CHECK(sk_native_counters_get(e, c) == SK_OK);
}

/* LAS with bursts of identical arrivals (ties), four request classes, 10 s rounds under a
 * 60 s lease (leases end between rounds) and more work than GPUs: the class runs, their
 * merge, the bulk keeps and the cut of preempted tails.  Every job finishes, jobs are
 * preempted, and a second run whose plans are validated and applied in job-id order
 * (check_plans) gives the same results bit for bit as the first (plans applied as built);
 * so does a third that yields to its caller after every decision point (yield budget 0). */
static void test_las_contended(void) {
    double arrival[40], work[40];
    int32_t demand[40];
    random_jobs(11, 1, arrival, work, demand);
    double fs[3][40], fin[3][40], gs[3][40], rs[3][40];
    int64_t restarts[3][40];
    int32_t st[3][40];
    sk_native_counters c[3];
    for (int k = 0; k < 3; k++) {
        sk_engine *e = engine_both(SK_POL_LAS, 0, 40, arrival, work, demand, 10.0, k == 1);
        if (k == 2) CHECK(sk_native_set_yield(e, 0.0) == SK_OK);
        yields = calls = 0;
        sk_results res = {fs[k], fin[k], gs[k], rs[k], restarts[k], st[k]};
        run_to_results(e, &res, &c[k]);
        /* every decision point ends a call: a yield, records full, rates asked, or the end */
        CHECK(k < 2 ? yields == 0 : yields > 0 && calls >= c[k].decisions + c[k].lone_placed + c[k].skipped);
        sk_engine_free(e);
    }
    CHECK(c[0].preemptions > 0 && c[0].preemptions == c[1].preemptions && c[0].preemptions == c[2].preemptions);
    CHECK(c[0].decisions == c[1].decisions && c[0].decisions == c[2].decisions);
    for (int j = 0; j < 40; j++) {
        CHECK(st[0][j] == SK_JOB_DONE && fin[0][j] >= arrival[j]);
        for (int k = 1; k < 3; k++)
            CHECK(fin[0][j] == fin[k][j] && gs[0][j] == gs[k][j] && restarts[0][j] == restarts[k][j]);
    }
}

static void test_fifo_by_hand(void) {
    /* nodes 4 (type 0), 4 and 2 (type 1, the 2-GPU node at speed 0.5); jobs of 6 (t=0), 4
       (t=1), 2 (t=2) */
    double arrival[3] = {0.0, 1.0, 2.0}, work[3] = {48.0, 40.0, 10.0};
    int32_t demand[3] = {6, 4, 2};
    sk_engine *e = engine_with(SK_POL_FIFO, 0, 3, arrival, work, demand, 0.0);
    records r;
    records_init(&r);
    CHECK(run_all(e, &r) > 0);
    double fs[3], fin[3], gs[3], rs[3];
    int64_t restarts[3];
    int32_t st[3];
    sk_results res = {fs, fin, gs, rs, restarts, st};
    CHECK(sk_engine_results(e, &res) == SK_OK);
    /* job 0 cannot take type 0 (4 GPUs) and never mixes types: nodes 1+2 of type 1, rate
       6 x 1 x 0.5 / 1.25 = 2.4, 48 / 2.4 = 20 s; job 1 takes node 0 (type 0, rate 8): 1-6 s;
       job 2 finds no type with 2 free GPUs until job 1 ends, then node 0: rate 4, 6-8.5 s */
    CHECK(fs[0] == 0.0 && fabs(fin[0] - 20.0) < 1e-9);
    CHECK(fs[1] == 1.0 && fin[1] == 6.0);
    CHECK(fs[2] == 6.0 && fin[2] == 8.5);
    sk_engine_free(e);
}

static void test_type_choice_by_hand(void) {
    /* one 2-GPU job at t=0, rate 1 on type 0 and 3 on type 1, work 30: first fit takes node 0
       (type 0 comes first) and ends at 30 s; fastest takes type 1 (node 1) and ends at 10 s;
       barred from type 0, first fit takes type 1 too */
    double arrival[1] = {0.0}, work[1] = {30.0};
    int32_t demand[1] = {2};
    double trate[2] = {1.0, 3.0}, barred[2] = {0.0, 3.0};
    struct { const double *rate; int32_t choice; int64_t type; } cases[3] = {
        {trate, SK_TYPE_FIRST_FIT, 1}, {trate, SK_TYPE_FASTEST, 2}, {barred, SK_TYPE_FIRST_FIT, 2}};
    for (int c = 0; c < 3; c++) {
        sk_engine *e = engine_typed(SK_POL_FIFO, 0, 1, arrival, work, demand, 0.0, cases[c].rate,
                                    cases[c].choice);
        records r;
        records_init(&r);
        CHECK(run_all(e, &r) > 0);
        int64_t types[1];
        CHECK(sk_native_used_types(e, types) == SK_OK);
        CHECK(types[0] == cases[c].type);
        sk_engine_free(e);
    }
}

static void test_errors(void) {
    double arrival[1] = {0.0}, work[1] = {1.0}, delay[1] = {0.0};
    int32_t demand[1] = {1}, model[1] = {0}, bucket[1] = {0};
    double est[1] = {1.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 3, GPUS, 1, arrival, work, delay, demand, 0.0, 0.0, 3) == SK_OK);
    sk_policy_spec spec = {99, 0, 0, 1, 1, 0, 1, 0, NULL, 0.0, 0.0, 0};
    double trate[2] = {1.0, 1.0}, dead[2] = {0.0, 0.0};
    sk_native_inputs in = {model, est, bucket, 1, TYPES, SPEED, 2, FGD_W, 5, trate, 0, 0};
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* unknown kind */
    spec.kind = SK_POL_FIFO;
    spec.preemptive = 1;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* FIFO is not preemptive */
    spec.preemptive = 0;
    in.fgd_width = 2;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* nodes of 4 GPUs */
    in.fgd_width = 5;
    bucket[0] = 3;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* bucket out of range */
    bucket[0] = 0;
    in.type_rate = NULL;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* no type rates */
    in.type_rate = dead;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* runs on no type */
    in.type_rate = trate;
    in.type_choice = 3;
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_EINVAL);           /* unknown rule */
    in.type_choice = SK_TYPE_RANDOM;
    sk_decision_records none = {0};
    CHECK(sk_native_run(e, &none) == SK_EINVAL);                      /* no policy yet */
    CHECK(sk_native_set_yield(e, 0.1) == SK_EINVAL);                   /* no policy yet */
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_OK);
    CHECK(sk_native_set_policy(e, &spec, &in) == SK_ESTATE);          /* only once */
    CHECK(sk_native_set_yield(e, 0.0 / 0.0) == SK_EINVAL);             /* NaN */
    CHECK(sk_native_set_yield(NULL, 0.1) == SK_EINVAL);
    records r;
    records_init(&r);
    CHECK(sk_native_run(e, &r.rec) == SK_NEED_RATES);
    double bad[1] = {0.0};
    CHECK(sk_native_put_rates(e, 1, bad) == SK_EINVAL);               /* rate 0 */
    CHECK(sk_native_put_rates(e, 2, bad) == SK_EINVAL);               /* count differs */
    CHECK(sk_native_run(e, NULL) == SK_EINVAL);
    sk_engine_free(e);
}

int main(void) {
    test_every_policy_finishes();
    test_las_contended();
    test_fifo_by_hand();
    test_type_choice_by_hand();
    test_errors();
    if (failures) {
        fprintf(stderr, "test_sk_native: %d checks failed\n", failures);
        return 1;
    }
    printf("test_sk_native: all checks passed\n");
    return 0;
}
