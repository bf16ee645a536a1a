/* clustersim entropy kernels: public API.
 *
 * Per-row normalized entropy of softmax(logits):
 *     h(z) = -(sum_c p_c log p_c) / log C,   p = softmax(z),   h in [0, 1].
 * and the same value summed per group id in the same call.
 *
 * This header is #included by the C sources and, with its '#' lines removed,
 * handed to cffi's cdef: every type and function is declared exactly once.
 *
 * Conventions (the Python layer sim/entropy.py documents the same rules):
 *   - logits are caller-owned and never copied; row i starts at
 *     logits + i * row_stride elements and holds n_cols contiguous elements;
 *   - validity is an Arrow validity bitmap (bit i + validity_offset set = row i
 *     present) or NULL; a null row gives NaN;
 *   - C = 1: h = 0 (one class, nothing uncertain);
 *   - a row holding NaN or +inf, or only -inf, gives NaN; -inf entries are
 *     probability 0 (masked classes) and still count in C;
 *   - in the float16/float32 paths a class whose logit is more than 87.3 below the
 *     row maximum counts as probability 0 (it changes h by < 1e-30);
 *   - results are clamped to [0, 1];
 *   - every row is computed by one thread on its own, so results do not depend
 *     on n_threads (<= 0: OpenMP's default); group sums are added in row order.
 * Functions return SK_ENTROPY_OK or a negative SK_ENTROPY_E* code; they never
 * abort, print or allocate what they return.
 */
#ifndef SK_ENTROPY_H
#define SK_ENTROPY_H
#include <stdint.h>

/* element types of the logits buffer */
enum {
    SK_ENTROPY_F16 = 1,         /* IEEE binary16 passed as uint16_t bits */
    SK_ENTROPY_F32 = 2,
    SK_ENTROPY_F64 = 3
};

/* return codes */
enum {
    SK_ENTROPY_OK = 0,
    SK_ENTROPY_EINVAL = -1,     /* bad size, stride or NULL pointer */
    SK_ENTROPY_EDTYPE = -2,     /* unknown dtype code */
    SK_ENTROPY_EGROUP = -3      /* a group id < 0 or >= n_groups */
};

/* out[i] = normalized entropy of row i, for i in [0, n_rows). */
int sk_entropy_rows(const void *logits, int32_t dtype, int64_t n_rows, int64_t n_cols,
                    int64_t row_stride, const uint8_t *validity, int64_t validity_offset,
                    int32_t n_threads, double *out);

/* Adds each present row's entropy to group_sums[groups[i]] and 1 to
 * group_counts[groups[i]] (null rows are skipped; NaN rows propagate NaN).
 * The caller zeroes the sums and counts once, so successive batches accumulate.
 * row_scratch holds n_rows doubles and receives the per-row values. */
int sk_entropy_grouped(const void *logits, int32_t dtype, int64_t n_rows, int64_t n_cols,
                       int64_t row_stride, const uint8_t *validity, int64_t validity_offset,
                       const int64_t *groups, int64_t n_groups, int32_t n_threads,
                       double *row_scratch, double *group_sums, int64_t *group_counts);

/* 1 where the AVX2/FMA/F16C path is in use on this CPU, else 0. */
int32_t sk_entropy_simd_level(void);

/* the number of threads OpenMP would use by default (1 without OpenMP) */
int32_t sk_entropy_max_threads(void);

#endif
