/* C-level tests of the event kernel, run under AddressSanitizer/UBSan by
 * tests/c/run_sanitizers.sh (and by .ci/run).  Exercises the normal path and
 * every error path; a failing check prints and returns non-zero. */
#include "sk_engine.h"
#include "engine_internal.h"   /* ske_apply_plan, ske_push_deferred: the native policies' apply */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static void test_two_jobs_one_node(void) {
    int32_t gpus[1] = {2};
    double arrival[2] = {0.0, 1.0}, work[2] = {10.0, 4.0}, delay[2] = {5.0, 5.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 1, gpus, 2, arrival, work, delay, NULL, 0.0, 0.0,
                        SK_WHY_ARRIVAL | SK_WHY_COMPLETION) == SK_OK);
    int64_t arrived[2], completed[2];
    sk_batch b = {0};
    b.arrived = arrived;
    b.completed = completed;
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(b.now == 0.0 && b.n_arrived == 1 && arrived[0] == 0);
    int64_t ids[1] = {0}, indptr[2] = {0, 1};
    int32_t nodes[1] = {0}, counts[1] = {2};
    double rates[1] = {2.0};
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, rates) == SK_OK);
    /* job 1 arrives at t=1; no GPUs free: over-allocation must be refused */
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(b.now == 1.0 && b.n_arrived == 1 && arrived[0] == 1);
    CHECK(sk_engine_min_queued_demand(e) == 1);
    ids[0] = 1;
    counts[0] = 1;
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, rates) == SK_ECAPACITY);
    /* preempt job 0 and start job 1 in one apply: both fit after the release */
    int64_t ids2[2] = {0, 1}, indptr2[3] = {0, 1, 2};
    int32_t nodes2[2] = {0, 0}, counts2[2] = {1, 1};
    double rates2[2] = {1.0, 1.0};
    CHECK(sk_engine_apply(e, 2, ids2, indptr2, nodes2, counts2, rates2) == SK_OK);
    /* job 0: 2 units done at t=1, restart delay 5 -> resumes at 6, 8 left at rate 1 -> 14
       job 1: first start at 1, 4 units at rate 1 -> 5 */
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(b.now == 5.0 && b.n_completed == 1 && completed[0] == 1);
    CHECK(sk_engine_step(e, &b) == SK_DONE);
    CHECK(b.now == 14.0);
    double fs[2], fin[2], gs[2], rs[2];
    int64_t restarts[2];
    int32_t st[2];
    sk_results r = {fs, fin, gs, rs, restarts, st};
    CHECK(sk_engine_results(e, &r) == SK_OK);
    CHECK(fin[0] == 14.0 && fin[1] == 5.0);
    CHECK(restarts[0] == 1 && restarts[1] == 0);
    CHECK(gs[0] == 2.0 + 13.0 && gs[1] == 4.0);
    CHECK(st[0] == SK_JOB_DONE && st[1] == SK_JOB_DONE);
    sk_engine_free(e);
}

static void test_errors(void) {
    int32_t gpus[1] = {4};
    double arrival[1] = {5.0}, work[1] = {1.0}, delay[1] = {0.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 0, gpus, 1, arrival, work, delay, NULL, 0.0, 0.0, 3) == SK_EINVAL);
    sk_engine_free(e);
    double bad_work[1] = {-1.0};
    CHECK(sk_engine_new(&e, 1, gpus, 1, arrival, bad_work, delay, NULL, 0.0, 0.0, 3) == SK_EINVAL);
    sk_engine_free(e);
    double nan_arrival[1] = {NAN};
    CHECK(sk_engine_new(&e, 1, gpus, 1, nan_arrival, work, delay, NULL, 0.0, 0.0, 3) == SK_EINVAL);
    sk_engine_free(e);
    CHECK(sk_engine_new(&e, 1, gpus, 1, arrival, work, delay, NULL, -1.0, 0.0, 3) == SK_EINVAL);
    sk_engine_free(e);
    CHECK(sk_engine_new(&e, 1, gpus, 1, arrival, work, delay, NULL, 0.0, 0.0, 3) == SK_OK);
    int64_t ids[1] = {0}, indptr[2] = {0, 1};
    int32_t nodes[1] = {0}, counts[1] = {1};
    double rates[1] = {1.0};
    /* before arrival */
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, rates) == SK_ESTATE);
    int64_t a[1], c[1];
    sk_batch b = {0};
    b.arrived = a;
    b.completed = c;
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    int32_t bad_node[1] = {3};
    CHECK(sk_engine_apply(e, 1, ids, indptr, bad_node, counts, rates) == SK_EINVAL);
    int32_t zero[1] = {0};
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, zero, rates) == SK_EINVAL);
    double bad_rate[1] = {INFINITY};
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, bad_rate) == SK_EINVAL);
    int64_t bad_id[1] = {7};
    CHECK(sk_engine_apply(e, 1, bad_id, indptr, nodes, counts, rates) == SK_EINVAL);
    int64_t dup[2] = {0, 0}, ip2[3] = {0, 1, 2};
    int32_t n2[2] = {0, 0}, c2[2] = {1, 1};
    double r2[2] = {1.0, 1.0};
    CHECK(sk_engine_apply(e, 2, dup, ip2, n2, c2, r2) == SK_EINVAL);
    CHECK(sk_engine_set_timer(e, 1.0) == SK_EINVAL);  /* in the past */
    /* nothing scheduled and no events left: a stall is an error, not a hang */
    CHECK(sk_engine_step(e, &b) == SK_ESTALL);
    CHECK(sk_engine_message(e)[0] != '\0');
    sk_engine_free(e);
}

static void test_rounds_and_timers(void) {
    int32_t gpus[2] = {1, 1};
    double arrival[2] = {0.5, 100.0}, work[2] = {3.0, 1.0}, delay[2] = {0.0, 0.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 2, gpus, 2, arrival, work, delay, NULL, 10.0, 0.5, 0) == SK_OK);
    int64_t a[2], c[2];
    sk_batch b = {0};
    b.arrived = a;
    b.completed = c;
    CHECK(sk_engine_step(e, &b) == SK_DECISION);   /* first round at the first arrival */
    CHECK(b.now == 0.5 && (b.reasons & SK_WHY_ROUND));
    int64_t ids[1] = {0}, indptr[2] = {0, 1};
    int32_t nodes[1] = {1}, counts[1] = {1};
    double rates[1] = {1.0};
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, rates) == SK_OK);
    CHECK(sk_engine_set_timer(e, 2.0) == SK_OK);
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(b.now == 2.0 && b.reasons == SK_WHY_TIMER);
    /* job 0 finishes at 3.5 silently (completions are not triggers here); the
       idle cluster skips rounds until job 1 arrives at 100 -> round at 100.5 */
    CHECK(sk_engine_step(e, &b) == SK_DECISION);
    CHECK(b.now == 100.5 && b.n_completed == 1 && b.n_arrived == 1);
    ids[0] = 1;
    CHECK(sk_engine_apply(e, 1, ids, indptr, nodes, counts, rates) == SK_OK);
    CHECK(sk_engine_step(e, &b) == SK_DONE);
    CHECK(b.now == 101.5);
    int64_t used, nq, nr, nd;
    double next, busy;
    CHECK(sk_engine_counters(e, &used, &nq, &nr, &nd, &next, &busy) == SK_OK);
    CHECK(used == 0 && nd == 2 && busy == 4.0 && isinf(next));
    sk_engine_free(e);
}

/* One job placed by a native plan at t=0 (rate 1, work 100: completion at 100) whose plan
 * defers completions more than defer_after away; the engine has a timer at timer_t. */
static sk_engine *deferred_start(double defer_after, double timer_t, sk_batch *b) {
    int32_t gpus[1] = {2};
    double arrival[1] = {0.0}, work[1] = {100.0}, delay[1] = {0.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 1, gpus, 1, arrival, work, delay, NULL, 0.0, 0.0, SK_WHY_ARRIVAL) == SK_OK);
    CHECK(sk_engine_step(e, b) == SK_DECISION && b->now == 0.0);
    int64_t place[1] = {0}, ptr[2] = {0, 1};
    int32_t nodes[1] = {0}, counts[1] = {2};
    double rates[1] = {1.0};
    ske_plan plan = {0, 0, 1, NULL, NULL, place, ptr, nodes, counts, rates, defer_after};
    CHECK(ske_apply_plan(e, &plan) == SK_OK);
    if (timer_t > 0.0) CHECK(sk_engine_set_timer(e, timer_t) == SK_OK);
    return e;
}

static void test_deferred_completion(void) {
    int64_t a[1], c[1];
    sk_batch b = {0};
    b.arrived = a;
    b.completed = c;
    /* pushed at a decision before it: the same completion as an undeferred start */
    sk_engine *e = deferred_start(10.0, 50.0, &b);
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 50.0);
    CHECK(ske_push_deferred(e, 0) == SK_OK);
    CHECK(ske_push_deferred(e, 0) == SK_OK);          /* pushed once: the second does nothing */
    CHECK(sk_engine_step(e, &b) == SK_DONE && b.now == 100.0 && b.n_completed == 1);
    sk_engine_free(e);
    /* within defer_after: pushed at the start */
    e = deferred_start(1000.0, 0.0, &b);
    CHECK(sk_engine_step(e, &b) == SK_DONE && b.now == 100.0);
    sk_engine_free(e);
    /* a policy that breaks its promise: found in the past, or nothing left to happen */
    e = deferred_start(10.0, 150.0, &b);
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 150.0 && b.n_completed == 0);
    CHECK(ske_push_deferred(e, 0) == SK_ESTATE);
    sk_engine_free(e);
    e = deferred_start(10.0, 0.0, &b);
    CHECK(sk_engine_step(e, &b) == SK_ESTALL);
    sk_engine_free(e);
}

/* Job 0 (work 100) preempted and placed again by native plans at one instant. */
static void replace_job(sk_engine *e, double rate, double defer_after) {
    int64_t preempt[1] = {0}, place[1] = {0}, ptr[2] = {0, 1};
    int32_t nodes[1] = {0}, counts[1] = {2};
    double rates[1] = {rate};
    ske_plan out = {1, 0, 0, preempt, NULL, NULL, ptr, nodes, counts, rates, INFINITY};
    CHECK(ske_apply_plan(e, &out) == SK_OK);
    ske_plan in = {0, 0, 1, NULL, NULL, place, ptr, nodes, counts, rates, defer_after};
    CHECK(ske_apply_plan(e, &in) == SK_OK);
}

/* A job's pushed completion event is retired when it waits again, also after a deferred
 * placement kept its version: only the last start's event completes it. */
static void test_versions_retire_events(void) {
    int64_t a[1], c[1];
    sk_batch b = {0};
    b.arrived = a;
    b.completed = c;
    sk_engine *e = deferred_start(INFINITY, 10.0, &b);  /* its event at 100 is pushed */
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 10.0);
    replace_job(e, 1.0, 10.0);                          /* 90 left, deferred: no event */
    CHECK(sk_engine_set_timer(e, 20.0) == SK_OK);
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 20.0 && b.n_completed == 0);
    replace_job(e, 0.5, INFINITY);                      /* 80 left at rate 0.5: done at 180 */
    CHECK(sk_engine_step(e, &b) == SK_DONE && b.now == 180.0 && b.n_completed == 1);
    sk_engine_free(e);
}

/* Four jobs of the given work arriving at 0 on one 2-GPU node, no restart delays, stepped to
 * their arrival; b's arrays are arrived and completed (4 entries each). */
static sk_engine *four_jobs_on_two_gpus(const double *work, sk_batch *b, int64_t *arrived,
                                        int64_t *completed) {
    int32_t gpus[1] = {2};
    double arrival[4] = {0.0, 0.0, 0.0, 0.0}, delay[4] = {0.0, 0.0, 0.0, 0.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 1, gpus, 4, arrival, work, delay, NULL, 0.0, 0.0,
                        SK_WHY_ARRIVAL | SK_WHY_COMPLETION) == SK_OK);
    b->arrived = arrived;
    b->completed = completed;
    CHECK(sk_engine_step(e, b) == SK_DECISION && b->n_arrived == 4);
    return e;
}

/* Space sharing (sk_engine_apply_shared): two shared placements a GPU, half GPU-seconds each,
 * a lone shared job still blocks its GPU, flag changes are restarts. */
static void test_shared_gpus(void) {
    double work[4] = {10.0, 4.0, 6.0, 100.0};
    int64_t arrived[4], completed[4];
    sk_batch b = {0};
    sk_engine *e = four_jobs_on_two_gpus(work, &b, arrived, completed);
    int64_t ids[3] = {0, 1, 2}, indptr[4] = {0, 1, 2, 3};
    int32_t nodes[3] = {0, 0, 0}, counts[3] = {1, 1, 1};
    double rates[3] = {1.0, 2.0, 1.0};
    int8_t shared[3] = {1, 1, 0};
    CHECK(sk_engine_apply_shared(e, 3, ids, indptr, nodes, counts, rates, shared) == SK_OK);
    int32_t free_gpus[1];
    int64_t used, nq, nr, nd;
    double next, busy;
    CHECK(sk_engine_node_free(e, free_gpus) == SK_OK && free_gpus[0] == 0);
    CHECK(sk_engine_counters(e, &used, &nq, &nr, &nd, &next, &busy) == SK_OK && used == 2);
    int64_t id3[1] = {3}, ip1[2] = {0, 1};
    int8_t yes[1] = {1}, no[1] = {0};
    /* full: neither an exclusive nor a third shared placement fits */
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, counts, rates, no) == SK_ECAPACITY);
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, counts, rates, yes) == SK_ECAPACITY);
    /* job 1 (4 at rate 2) ends at 2; job 0 alone still blocks the shared GPU */
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 2.0 && completed[0] == 1);
    CHECK(sk_engine_node_free(e, free_gpus) == SK_OK && free_gpus[0] == 0);
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, counts, rates, no) == SK_ECAPACITY);
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, counts, rates, yes) == SK_OK);
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 6.0 && completed[0] == 2);
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.now == 10.0 && completed[0] == 0);
    /* job 3 turns exclusive on the same GPU: a restart (no delay here) */
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, counts, rates, no) == SK_OK);
    CHECK(sk_engine_counters(e, &used, &nq, &nr, &nd, &next, &busy) == SK_OK && used == 1);
    CHECK(sk_engine_step(e, &b) == SK_DONE && b.now == 102.0);
    double fs[4], fin[4], gs[4], rs[4];
    int64_t restarts[4];
    int32_t st[4];
    sk_results r = {fs, fin, gs, rs, restarts, st};
    CHECK(sk_engine_results(e, &r) == SK_OK);
    CHECK(gs[0] == 5.0 && gs[1] == 1.0 && gs[2] == 6.0 && gs[3] == 4.0 + 92.0);
    CHECK(restarts[3] == 1 && restarts[0] == 0);
    CHECK(sk_engine_counters(e, &used, &nq, &nr, &nd, &next, &busy) == SK_OK);
    CHECK(used == 0 && busy == 5.0 + 1.0 + 6.0 + 96.0);
    sk_engine_free(e);
}

/* A node's shared GPUs: max(largest shared placement, ceil(slots / 2)). */
static void test_shared_placement_sizes(void) {
    double work[4] = {10.0, 10.0, 10.0, 10.0};
    int64_t arrived[4], completed[4];
    sk_batch b = {0};
    sk_engine *e = four_jobs_on_two_gpus(work, &b, arrived, completed);
    int64_t ids[3] = {0, 1, 2}, indptr[4] = {0, 1, 2, 3};
    int32_t nodes[3] = {0, 0, 0}, counts[3] = {2, 1, 1};
    double rates[3] = {1.0, 1.0, 1.0};
    int8_t shared[3] = {1, 1, 1};
    int32_t free_gpus[1];
    /* a lone 2-GPU shared job keeps both GPUs: nothing exclusive fits beside it */
    CHECK(sk_engine_apply_shared(e, 1, ids, indptr, nodes, counts, rates, shared) == SK_OK);
    CHECK(sk_engine_node_free(e, free_gpus) == SK_OK && free_gpus[0] == 0);
    int64_t id3[1] = {3}, ip1[2] = {0, 1};
    int32_t one[1] = {1};
    int8_t no[1] = {0};
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, one, rates, no) == SK_ECAPACITY);
    /* two 1-GPU shared jobs fill its other halves; a fourth shared slot does not fit */
    CHECK(sk_engine_apply_shared(e, 3, ids, indptr, nodes, counts, rates, shared) == SK_OK);
    CHECK(sk_engine_node_free(e, free_gpus) == SK_OK && free_gpus[0] == 0);
    int8_t yes[1] = {1};
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, one, rates, yes) == SK_ECAPACITY);
    /* the failed applies left the tallies intact: preempting job 0 leaves the two 1-GPU
     * shared jobs on one GPU, and the other is free */
    int64_t ip0[2] = {0, 0};
    CHECK(sk_engine_apply_shared(e, 1, ids, ip0, nodes, counts, rates, shared) == SK_OK);
    CHECK(sk_engine_node_free(e, free_gpus) == SK_OK && free_gpus[0] == 1);
    CHECK(sk_engine_apply_shared(e, 1, id3, ip1, nodes, one, rates, no) == SK_OK);
    sk_engine_free(e);
}

static void test_step_quiet(void) {
    /* jobs 0, 1 start at 0 (done at 10 and 100); 2 arrives at 20, 3 at 50, 4 at 60 */
    int32_t gpus[1] = {4};
    double arrival[5] = {0.0, 0.0, 20.0, 50.0, 60.0}, work[5] = {10.0, 100.0, 5.0, 5.0, 5.0};
    double delay[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    sk_engine *e = NULL;
    CHECK(sk_engine_new(&e, 1, gpus, 5, arrival, work, delay, NULL, 0.0, 0.0,
                        SK_WHY_ARRIVAL | SK_WHY_COMPLETION) == SK_OK);
    int64_t arrived[5], completed[5];
    sk_batch b = {0};
    b.arrived = arrived;
    b.completed = completed;
    CHECK(sk_engine_step(e, &b) == SK_DECISION && b.n_arrived == 2);
    int64_t ids[2] = {0, 1}, indptr[3] = {0, 1, 2};
    int32_t nodes[2] = {0, 0}, counts[2] = {1, 1};
    double rates[2] = {1.0, 1.0};
    CHECK(sk_engine_apply(e, 2, ids, indptr, nodes, counts, rates) == SK_OK);
    double weights[5] = {0.0, 1.5, 3.0, 4.5, 6.0}, t[4], fgd[4], at[5];
    int64_t base[1] = {0}, used[4], queued[4], running[4], done[5];
    sk_quiet_rows q = {4, 0, t, used, queued, running, fgd, 5, 0, done, at};
    CHECK(sk_engine_step_quiet(e, &b, 40.0, weights, base, NULL) == SK_EINVAL);
    CHECK(sk_engine_step_quiet(e, &b, 40.0, NULL, base, &q) == SK_EINVAL);
    /* passes over 10 (job 0 done, job 1 runs) and 20 (job 2 arrives); 50 is not before 40 */
    CHECK(sk_engine_step_quiet(e, &b, 40.0, weights, base, &q) == SK_DECISION);
    CHECK(b.now == 50.0 && b.n_arrived == 1 && arrived[0] == 3 && b.n_completed == 0);
    CHECK(q.n == 2 && t[0] == 10.0 && t[1] == 20.0);
    CHECK(used[0] == 1 && used[1] == 1 && queued[0] == 0 && queued[1] == 1);
    CHECK(running[0] == 1 && running[1] == 1 && fgd[0] == 4.5 && fgd[1] == 4.5);
    CHECK(q.n_completed == 1 && done[0] == 0 && at[0] == 10.0);
    /* rows full: the point at 60 (a quiet one) comes back as a decision */
    q.cap = 0;
    CHECK(sk_engine_step_quiet(e, &b, 1000.0, weights, base, &q) == SK_DECISION);
    CHECK(b.now == 60.0 && q.n == 0 && q.n_completed == 0);
    /* a timer is not quiet */
    q.cap = 2;
    CHECK(sk_engine_set_timer(e, 70.0) == SK_OK);
    CHECK(sk_engine_step_quiet(e, &b, 1000.0, weights, base, &q) == SK_DECISION);
    CHECK(b.now == 70.0 && (b.reasons & SK_WHY_TIMER) && q.n == 0);
    /* job 1's completion leaves nothing running: not quiet */
    CHECK(sk_engine_step_quiet(e, &b, 1000.0, weights, base, &q) == SK_DECISION);
    CHECK(b.now == 100.0 && b.n_completed == 1 && completed[0] == 1 && q.n == 0);
    sk_engine_free(e);
}

int main(void) {
    test_two_jobs_one_node();
    test_errors();
    test_rounds_and_timers();
    test_deferred_completion();
    test_versions_retire_events();
    test_shared_gpus();
    test_shared_placement_sizes();
    test_step_quiet();
    sk_engine_free(NULL);
    if (failures) {
        fprintf(stderr, "%d failed\n", failures);
        return 1;
    }
    printf("test_sk_engine: all checks passed\n");
    return 0;
}
