/* C-level tests of the entropy kernels, run under AddressSanitizer/UBSan by
 * tests/c/run_sanitizers.sh: hand-checkable values on every dtype path, row
 * strides, validity bitmaps, grouped means, and every error code. */
#include "sk_entropy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-5 * (fabs(b) > 1e-12 ? fabs(b) : 1.0); }

static void test_uniform_and_peaked(void) {
    /* row 0 uniform -> 1; row 1 one-hot-ish -> small; C = 37 exercises SIMD tails */
    enum { C = 37, N = 19 };
    float *f = malloc(sizeof(float) * N * C);
    double *d = malloc(sizeof(double) * N * C);
    double out[N];
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            float v = (i % 2 == 0) ? 0.0f : (c == 0 ? 50.0f : 0.0f);
            f[i * C + c] = v;
            d[i * C + c] = v;
        }
    for (int threads = 1; threads <= 2; threads++) {
        CHECK(sk_entropy_rows(f, SK_ENTROPY_F32, N, C, C, NULL, 0, threads, out) == SK_ENTROPY_OK);
        CHECK(close_to(out[0], 1.0));
        CHECK(out[1] >= 0.0 && out[1] < 1e-15);
        CHECK(sk_entropy_rows(d, SK_ENTROPY_F64, N, C, C, NULL, 0, threads, out) == SK_ENTROPY_OK);
        CHECK(close_to(out[2], 1.0));
    }
    free(f);
    free(d);
}

static void test_two_classes_stride_validity(void) {
    /* C = 2, logits (0, log 3): p = (1/4, 3/4), H = -(.25 ln .25 + .75 ln .75) / ln 2 */
    double rows[3 * 4] = {0.0, log(3.0), 99.0, 99.0, 0.0, 0.0, 99.0, 99.0, 0.0, log(3.0), 99.0, 99.0};
    uint8_t valid[1] = {0x5};  /* rows 0 and 2 valid, row 1 null */
    double out[3];
    CHECK(sk_entropy_rows(rows, SK_ENTROPY_F64, 3, 2, 4, valid, 0, 1, out) == SK_ENTROPY_OK);
    double h = -(0.25 * log(0.25) + 0.75 * log(0.75)) / log(2.0);
    CHECK(close_to(out[0], h) && isnan(out[1]) && close_to(out[2], h));
    /* float16 bits of 0.0 and 1.0 -> p = (1/(1+e), e/(1+e)) */
    uint16_t half[2] = {0x0000, 0x3C00};
    double one;
    CHECK(sk_entropy_rows(half, SK_ENTROPY_F16, 1, 2, 2, NULL, 0, 1, &one) == SK_ENTROPY_OK);
    double p = 1.0 / (1.0 + exp(1.0));
    CHECK(close_to(one, -(p * log(p) + (1 - p) * log(1 - p)) / log(2.0)));
}

static void test_grouped(void) {
    float rows[4 * 2] = {0, 0, 0, 0, 0, 0, 0, 0};  /* every row has entropy 1 */
    int64_t groups[4] = {1, 0, 1, 1};
    double scratch[4], sums[2] = {0.0, 0.0};   /* the caller zeroes the accumulators */
    int64_t counts[2] = {0, 0};
    CHECK(sk_entropy_grouped(rows, SK_ENTROPY_F32, 4, 2, 2, NULL, 0, groups, 2, 1, scratch, sums,
                             counts) == SK_ENTROPY_OK);
    CHECK(counts[0] == 1 && counts[1] == 3 && close_to(sums[1], 3.0));
    int64_t bad[4] = {0, 2, 0, 0};
    CHECK(sk_entropy_grouped(rows, SK_ENTROPY_F32, 4, 2, 2, NULL, 0, bad, 2, 1, scratch, sums,
                             counts) == SK_ENTROPY_EGROUP);
}

static void test_errors(void) {
    float x[4] = {0};
    double out[2];
    CHECK(sk_entropy_rows(x, 99, 2, 2, 2, NULL, 0, 1, out) == SK_ENTROPY_EDTYPE);
    CHECK(sk_entropy_rows(NULL, SK_ENTROPY_F32, 2, 2, 2, NULL, 0, 1, out) == SK_ENTROPY_EINVAL);
    CHECK(sk_entropy_rows(x, SK_ENTROPY_F32, 2, 0, 2, NULL, 0, 1, out) == SK_ENTROPY_EINVAL);
    CHECK(sk_entropy_rows(x, SK_ENTROPY_F32, 2, 2, 1, NULL, 0, 1, out) == SK_ENTROPY_EINVAL);
    CHECK(sk_entropy_rows(x, SK_ENTROPY_F32, 0, 2, 2, NULL, 0, 1, out) == SK_ENTROPY_OK);
    CHECK(sk_entropy_max_threads() >= 1);
    CHECK(sk_entropy_simd_level() >= 0);
}

static void test_small_c_blocks_exact_buffers(void) {
    /* The small-C float32 path transposes blocks of 8 rows with vector loads (masked
     * loads for C < 8).  Buffers of exactly N*C floats let ASan catch any read past the
     * end; every row must agree with the float64 path, on 1 and 2 threads. */
    for (int c = 1; c <= 33; c++) {
        for (int n = 1; n <= 17; n += 3) {
            float *f = malloc(sizeof(float) * (size_t)(n * c));
            double *d = malloc(sizeof(double) * (size_t)(n * c));
            double *o32 = malloc(sizeof(double) * (size_t)n);
            double *o64 = malloc(sizeof(double) * (size_t)n);
            unsigned s = 12345u + (unsigned)(c * 31 + n);
            for (int i = 0; i < n * c; i++) {
                s = s * 1103515245u + 12345u;
                f[i] = (float)((int)((s >> 8) % 2001u) - 1000) / 100.0f;
                d[i] = (double)f[i];
            }
            CHECK(sk_entropy_rows(d, SK_ENTROPY_F64, n, c, c, NULL, 0, 1, o64) == SK_ENTROPY_OK);
            for (int threads = 1; threads <= 2; threads++) {
                CHECK(sk_entropy_rows(f, SK_ENTROPY_F32, n, c, c, NULL, 0, threads, o32)
                      == SK_ENTROPY_OK);
                for (int i = 0; i < n; i++) CHECK(close_to(o32[i], o64[i]));
            }
            free(f);
            free(d);
            free(o32);
            free(o64);
        }
    }
}

int main(void) {
    test_uniform_and_peaked();
    test_small_c_blocks_exact_buffers();
    test_two_classes_stride_validity();
    test_grouped();
    test_errors();
    if (failures) {
        fprintf(stderr, "%d failed\n", failures);
        return 1;
    }
    printf("test_sk_entropy: all checks passed\n");
    return 0;
}
