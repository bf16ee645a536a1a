/* Batched normalized entropy of softmax(logits); see sk_entropy.h for the rules.
 *
 * Per row, with m = max_c z_c, d_c = z_c - m <= 0, e_c = exp(d_c):
 *     k = #{c : d_c = 0} (>= 1),  r = sum_{d_c < 0} e_c,  t = sum_c d_c e_c (<= 0),
 *     s = k + r,  H = log s - t / s = log k + log1p(r / k) + (-t) / s.
 * Every term is >= 0, so nothing cancels and tiny entropies keep their relative
 * accuracy.  Two passes over a row (max, then exp); the second pass reads the row
 * from cache and prefetches the next row, so the next row's first pass hits the cache
 * too and memory reads overlap the exp arithmetic.  C <= 32 (float32): eight rows per
 * vector, one per lane, transposed in registers.  The exp is a degree-5 polynomial with
 * magic-number rounding (relative error 1.7e-7).  See docs/entropy.md for the measured
 * figures.  On x86-64 CPUs with AVX2+FMA+F16C a hand-vectorized path is picked
 * at run time; elsewhere a portable double-precision path runs.  float32 partial
 * sums are flushed into double every 256 elements, in a fixed order, so a row's
 * value depends only on the row.
 */
#include "sk_entropy.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#define SKE_X86 1
#include <immintrin.h>
#else
#define SKE_X86 0
#endif

/* logits more than this far below the row max count as probability 0 (float paths) */
#define SKE_EXP_LO (-87.3f)
/* rows per parallel region below which threads are not started */
#define SKE_PAR_MIN_ELEMS 65536

/* ---------------------------------------------------------------- common */

static double ske_finish(double k, double r, double t, double inv_logc)
{
    double s = k + r;
    double h = (k > 1.0 ? log(k) : 0.0) + log1p(r / k) - t / s;
    double v = h * inv_logc;
    if (v < 0.0) v = 0.0;
    if (v > 1.0) v = 1.0;
    return v;
}

static float ske_half_to_float(uint16_t h)
{
    union { uint32_t u; float f; } o;
    uint32_t em = (uint32_t)(h & 0x7fffu);
    o.u = em << 13;
    o.f *= 0x1.0p112f;                 /* rebias exponent; exact for subnormals */
    if (em >= 0x7c00u) o.u |= 0x7f800000u; /* inf / nan */
    o.u |= (uint32_t)(h & 0x8000u) << 16;
    return o.f;
}

static int ske_is_valid(const uint8_t *validity, int64_t bit)
{
    if (validity == NULL) return 1;
    return (validity[bit >> 3] >> (bit & 7)) & 1;
}

/* Portable double-precision path for any dtype. */
static double ske_load(const void *row, int32_t dtype, int64_t j)
{
    switch (dtype) {
    case SK_ENTROPY_F16: return (double)ske_half_to_float(((const uint16_t *)row)[j]);
    case SK_ENTROPY_F32: return (double)((const float *)row)[j];
    default: return ((const double *)row)[j];
    }
}

static double ske_row_generic(const void *row, int32_t dtype, int64_t c, double inv_logc)
{
    double m = -INFINITY, k = 0.0, r = 0.0, t = 0.0;
    int bad = 0;
    for (int64_t j = 0; j < c; j++) {
        double z = ske_load(row, dtype, j);
        if (z != z) bad = 1;
        else if (z > m) m = z;
    }
    if (bad || !isfinite(m)) return NAN;
    if (c == 1) return 0.0;
    for (int64_t j = 0; j < c; j++) {
        double d = ske_load(row, dtype, j) - m;
        if (d == 0.0) {
            k += 1.0;
        } else if (d > -INFINITY) {
            double e = exp(d);
            r += e;
            t += d * e;
        }
    }
    return ske_finish(k, r, t, inv_logc);
}

/* ------------------------------------------------------------ AVX2 path */
#if SKE_X86

#define SKE_TGT __attribute__((target("avx2,fma,f16c")))

/* exp(x) for x in [-87.3, 0]: n = round(x log2 e) by the 1.5*2^23 "magic" add (its low
 * mantissa bits then hold n), a two-step Cody-Waite reduction r = x - n ln 2 in
 * [-0.347, 0.347], a degree-5 minimax polynomial for exp(r) (relative error 1.7e-7 in
 * float32, far inside the 1e-5 budget of the normalized entropy), and 2^n added to
 * the exponent bits.  For x >= -87.3, n >= -126 implies r > 0, so the result stays
 * a normal float.  12 vector ops. */
SKE_TGT static inline __m256 ske_exp8(__m256 x)
{
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 magic = _mm256_set1_ps(12582912.0f);      /* 1.5 * 2^23 */
    const __m256 c1 = _mm256_set1_ps(0.693359375f);
    const __m256 c2 = _mm256_set1_ps(-2.12194440e-4f);
    __m256 t = _mm256_fmadd_ps(x, log2e, magic);
    __m256 fx = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(fx, c1, x);
    r = _mm256_fnmadd_ps(fx, c2, r);
    __m256 p = _mm256_set1_ps(8.2903061231e-3f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1897976317e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6667636588e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.9999149186e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(9.9999970701e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i n = _mm256_slli_epi32(_mm256_castps_si256(t), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), n));
}

SKE_TGT static inline float ske_hmax8(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

/* float32 lanes -> double, summed in a fixed lane order */
SKE_TGT static inline __m256d ske_widen_add(__m256d acc, __m256 v)
{
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

SKE_TGT static inline double ske_hsum4d(__m256d v)
{
    __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(a, _mm_unpackhi_pd(a, a)));
}

SKE_TGT static inline __m256 ske_load8_f32(const void *p, int64_t j)
{
    return _mm256_loadu_ps((const float *)p + j);
}

SKE_TGT static inline __m256 ske_load8_f16(const void *p, int64_t j)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + j)));
}

/* the last (c % 8) elements, padded with -inf (which counts for nothing) */
SKE_TGT static inline __m256 ske_tail_f32(const void *p, int64_t j, int64_t c)
{
    static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                      0, 0, 0, 0, 0, 0, 0, 0};
    __m256i mask = _mm256_loadu_si256((const __m256i *)(lanes + 8 - (c - j)));
    __m256 v = _mm256_maskload_ps((const float *)p + j, mask);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(mask));
}

SKE_TGT static inline __m256 ske_tail_f16(const void *p, int64_t j, int64_t c)
{
    uint16_t buf[8];
    for (int i = 0; i < 8; i++) buf[i] = 0xfc00u;  /* -inf */
    memcpy(buf, (const uint16_t *)p + j, (size_t)(c - j) * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)buf));
}

/* One 8-lane step of pass 2: accumulate r, t (float) and the tie count.  Ties with
 * the maximum (d = 0) are masked out of r and t and counted in K instead. */
#define SKE_STEP(Z, R, T, K)                                                      \
    do {                                                                          \
        __m256 d_ = _mm256_sub_ps((Z), mv);                                       \
        __m256 tie_ = _mm256_cmp_ps(d_, zero, _CMP_EQ_OQ);                        \
        __m256 dc_ = _mm256_max_ps(d_, lo);                                       \
        __m256 e_ = _mm256_andnot_ps(tie_, ske_exp8(dc_));                        \
        (R) = _mm256_add_ps((R), e_);                                             \
        (T) = _mm256_fmadd_ps(dc_, e_, (T));                                      \
        (K) = _mm256_sub_epi32((K), _mm256_castps_si256(tie_));                   \
    } while (0)

#define SKE_DEFINE_ROW_AVX2(NAME, LOAD8, TAIL8)                                   \
SKE_TGT static double NAME(const void *row, const void *next, int64_t c,         \
                           double inv_logc)                                      \
{                                                                                 \
    const __m256 lo = _mm256_set1_ps(SKE_EXP_LO);                                 \
    const __m256 zero = _mm256_setzero_ps();                                      \
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;                               \
    __m256 bad = zero;                                                            \
    int64_t j = 0;                                                                \
    for (; j + 16 <= c; j += 16) {                                                \
        __m256 a = LOAD8(row, j), b = LOAD8(row, j + 8);                          \
        m0 = _mm256_max_ps(m0, a);                                                \
        m1 = _mm256_max_ps(m1, b);                                                \
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));               \
    }                                                                             \
    for (; j + 8 <= c; j += 8) {                                                  \
        __m256 a = LOAD8(row, j);                                                 \
        m0 = _mm256_max_ps(m0, a);                                                \
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));               \
    }                                                                             \
    if (j < c) {                                                                  \
        __m256 a = TAIL8(row, j, c);                                              \
        m1 = _mm256_max_ps(m1, a);                                                \
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));               \
    }                                                                             \
    float m = ske_hmax8(_mm256_max_ps(m0, m1));                                   \
    if (_mm256_movemask_ps(bad) != 0 || !isfinite(m)) return NAN;                 \
    if (c == 1) return 0.0;                                                       \
    const __m256 mv = _mm256_set1_ps(m);                                          \
    __m256d rd = _mm256_setzero_pd(), td = _mm256_setzero_pd();                   \
    __m256i ki = _mm256_setzero_si256();                                          \
    j = 0;                                                                        \
    while (j + 16 <= c) {                                                         \
        int64_t end = j + 256 < c ? j + 256 : c;                                  \
        __m256 r0 = zero, r1 = zero, t0 = zero, t1 = zero;                        \
        for (; j + 16 <= end; j += 16) {                                          \
            _mm_prefetch(SKE_PF_ADDR(next, j), _MM_HINT_T0);                      \
            SKE_STEP(LOAD8(row, j), r0, t0, ki);                                  \
            SKE_STEP(LOAD8(row, j + 8), r1, t1, ki);                              \
        }                                                                         \
        rd = ske_widen_add(rd, _mm256_add_ps(r0, r1));                            \
        td = ske_widen_add(td, _mm256_add_ps(t0, t1));                            \
    }                                                                             \
    {                                                                             \
        __m256 r0 = zero, t0 = zero;                                              \
        for (; j + 8 <= c; j += 8) SKE_STEP(LOAD8(row, j), r0, t0, ki);           \
        if (j < c) SKE_STEP(TAIL8(row, j, c), r0, t0, ki);                        \
        rd = ske_widen_add(rd, r0);                                               \
        td = ske_widen_add(td, t0);                                               \
    }                                                                             \
    __m128i k4 = _mm_add_epi32(_mm256_castsi256_si128(ki),                        \
                               _mm256_extracti128_si256(ki, 1));                  \
    k4 = _mm_add_epi32(k4, _mm_shuffle_epi32(k4, 0x4e));                          \
    k4 = _mm_add_epi32(k4, _mm_shuffle_epi32(k4, 0xb1));                          \
    double k = (double)(uint32_t)_mm_cvtsi128_si32(k4);                           \
    return ske_finish(k, ske_hsum4d(rd), ske_hsum4d(td), inv_logc);              \
}

#define SKE_PF_ADDR(next, j) ((const char *)((const float *)(next) + (j)))
SKE_DEFINE_ROW_AVX2(ske_row_f32_avx2, ske_load8_f32, ske_tail_f32)
#undef SKE_PF_ADDR
#define SKE_PF_ADDR(next, j) ((const char *)((const uint16_t *)(next) + (j)))
SKE_DEFINE_ROW_AVX2(ske_row_f16_avx2, ske_load8_f16, ske_tail_f16)
#undef SKE_PF_ADDR

/* log(x) for finite x >= 1 (Cephes logf). */
SKE_TGT static inline __m256 ske_log8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256i xi = _mm256_castps_si256(x);
    __m256i ei = _mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(126));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(xi, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
    __m256 e = _mm256_cvtepi32_ps(ei);                       /* x = m * 2^e, m in [0.5, 1) */
    __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm256_sub_ps(e, _mm256_and_ps(one, small));
    m = _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(m, small)), one);
    __m256 z = _mm256_mul_ps(m, m);
    __m256 y = _mm256_set1_ps(7.0376836292e-2f);
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.1514610310e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(1.1676998740e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.2420140846e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(1.4249322787e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-1.6668057665e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(2.0000714765e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(-2.4999993993e-1f));
    y = _mm256_fmadd_ps(y, m, _mm256_set1_ps(3.3333331174e-1f));
    y = _mm256_mul_ps(_mm256_mul_ps(y, m), z);
    y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
    y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
    return _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), _mm256_add_ps(m, y));
}

#define SKE_LANE_MAXC 32

/* buf[j] = column j of the 8 rows rp[0..7] (c <= SKE_LANE_MAXC): 8x8 in-register
 * transposes of contiguous loads (gathers are slow).  For c >= 8 the last block
 * starts at c - 8 and overlaps the previous one (it rewrites equal values); for
 * c < 8 masked loads read only the c elements of each row (the other lanes are 0). */
SKE_TGT static inline void ske_transpose_rows8(const float *const rp[8], int64_t c, __m256 *buf)
{
    static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                      0, 0, 0, 0, 0, 0, 0, 0};
    const __m256i mask = _mm256_loadu_si256((const __m256i *)(lanes + 8 - (c < 8 ? c : 8)));
    for (int64_t j0 = 0; j0 < c; j0 += 8) {
        if (j0 + 8 > c) j0 = c >= 8 ? c - 8 : 0;
        __m256 r[8];
        for (int l = 0; l < 8; l++)
            r[l] = c >= 8 ? _mm256_loadu_ps(rp[l] + j0) : _mm256_maskload_ps(rp[l] + j0, mask);
        __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
        __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        /* all 8 columns are stored (j0 + 8 <= max(c, 8) <= SKE_LANE_MAXC); for c < 8 the
         * columns >= c are never read */
        buf[j0 + 0] = _mm256_permute2f128_ps(u0, u4, 0x20);
        buf[j0 + 1] = _mm256_permute2f128_ps(u1, u5, 0x20);
        buf[j0 + 2] = _mm256_permute2f128_ps(u2, u6, 0x20);
        buf[j0 + 3] = _mm256_permute2f128_ps(u3, u7, 0x20);
        buf[j0 + 4] = _mm256_permute2f128_ps(u0, u4, 0x31);
        buf[j0 + 5] = _mm256_permute2f128_ps(u1, u5, 0x31);
        buf[j0 + 6] = _mm256_permute2f128_ps(u2, u6, 0x31);
        buf[j0 + 7] = _mm256_permute2f128_ps(u3, u7, 0x31);
    }
}

/* Small C, float32: eight rows at once, one row per lane (transposed), so no
 * horizontal work per row.  Lanes >= n_lanes are masked off.  A row's value
 * depends only on the row. */
SKE_TGT static void ske_rows8_f32_avx2(const float *base, int64_t stride, int64_t c,
                                       int n_lanes, double inv_logc, double *out)
{
    const __m256 lo = _mm256_set1_ps(SKE_EXP_LO);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 buf[SKE_LANE_MAXC];
    /* rows of dead lanes (l >= n_lanes) re-read row 0; their values are dropped */
    const float *rp[8];
    for (int l = 0; l < 8; l++) rp[l] = base + (l < n_lanes ? l : 0) * stride;
    ske_transpose_rows8(rp, c, buf);
    __m256 m = ninf, bad = zero;
    for (int64_t j = 0; j < c; j++) {
        __m256 v = buf[j];
        m = _mm256_max_ps(m, v);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    const __m256 absm = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), m);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(absm, _mm256_set1_ps(INFINITY), _CMP_NLT_UQ));
    const __m256 mv = m;
    __m256 r = zero, t = zero;
    __m256i ki = _mm256_setzero_si256();
    for (int64_t j = 0; j < c; j++) SKE_STEP(buf[j], r, t, ki);
    /* H = log k + log1p(r / k) + (-t) / (k + r); log1p by Goldberg's trick */
    __m256 k = _mm256_cvtepi32_ps(ki);
    k = _mm256_max_ps(k, one);                 /* bad lanes may have k = 0 */
    __m256 q = _mm256_div_ps(r, k);
    __m256 u = _mm256_add_ps(one, q);
    __m256 um1 = _mm256_sub_ps(u, one);
    __m256 l1p = _mm256_div_ps(_mm256_mul_ps(ske_log8(u), q),
                               _mm256_blendv_ps(um1, one, _mm256_cmp_ps(um1, zero, _CMP_EQ_OQ)));
    l1p = _mm256_blendv_ps(l1p, q, _mm256_cmp_ps(um1, zero, _CMP_EQ_OQ));
    __m256 h = _mm256_sub_ps(_mm256_add_ps(ske_log8(k), l1p), _mm256_div_ps(t, _mm256_add_ps(k, r)));
    h = _mm256_max_ps(h, zero);
    h = _mm256_blendv_ps(h, _mm256_set1_ps(NAN), bad);
    __m256d sc = _mm256_set1_pd(c > 1 ? inv_logc : 0.0);
    __m256d h0 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(h)), sc);
    __m256d h1 = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(h, 1)), sc);
    h0 = _mm256_min_pd(h0, _mm256_set1_pd(1.0));  /* min_pd(a, b) returns b when a is NaN */
    h1 = _mm256_min_pd(h1, _mm256_set1_pd(1.0));
    double res[8];
    _mm256_storeu_pd(res, h0);
    _mm256_storeu_pd(res + 4, h1);
    for (int l = 0; l < n_lanes; l++) {
        int is_bad = (_mm256_movemask_ps(bad) >> l) & 1;
        out[l] = is_bad ? NAN : res[l];
    }
}

static int ske_have_avx2(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                  && __builtin_cpu_supports("f16c")) ? 1 : 0;
    }
    return cached;
}
#else
static int ske_have_avx2(void) { return 0; }
#endif /* SKE_X86 */

/* ------------------------------------------------------------- drivers */

static int ske_check(const void *logits, int32_t dtype, int64_t n_rows, int64_t n_cols,
                     int64_t row_stride, int64_t validity_offset, const double *out)
{
    if (dtype != SK_ENTROPY_F16 && dtype != SK_ENTROPY_F32 && dtype != SK_ENTROPY_F64)
        return SK_ENTROPY_EDTYPE;
    if (n_rows < 0 || n_cols < 1 || validity_offset < 0) return SK_ENTROPY_EINVAL;
    if (n_rows > 1 && row_stride < n_cols) return SK_ENTROPY_EINVAL;
    if (n_rows > 0 && (logits == NULL || out == NULL)) return SK_ENTROPY_EINVAL;
    return SK_ENTROPY_OK;
}

static size_t ske_elem_size(int32_t dtype)
{
    return dtype == SK_ENTROPY_F16 ? 2 : (dtype == SK_ENTROPY_F32 ? 4 : 8);
}

int sk_entropy_rows(const void *logits, int32_t dtype, int64_t n_rows, int64_t n_cols,
                    int64_t row_stride, const uint8_t *validity, int64_t validity_offset,
                    int32_t n_threads, double *out)
{
    int rc = ske_check(logits, dtype, n_rows, n_cols, row_stride, validity_offset, out);
    if (rc != SK_ENTROPY_OK || n_rows == 0) return rc;
    const double inv_logc = n_cols > 1 ? 1.0 / log((double)n_cols) : 0.0;
    const size_t row_bytes = (size_t)row_stride * ske_elem_size(dtype);
    const char *base = (const char *)logits;
    const int simd = ske_have_avx2() && dtype != SK_ENTROPY_F64;
    int nt = n_threads;
#ifdef _OPENMP
    if (nt <= 0) nt = omp_get_max_threads();
    if ((double)n_rows * (double)n_cols < (double)SKE_PAR_MIN_ELEMS) nt = 1;
#endif
#if SKE_X86
    if (simd && dtype == SK_ENTROPY_F32 && n_cols <= SKE_LANE_MAXC) {
        const int64_t n_blocks = (n_rows + 7) / 8;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 256) num_threads(nt)
#endif
        for (int64_t b = 0; b < n_blocks; b++) {
            int64_t i0 = b * 8;
            int lanes = n_rows - i0 < 8 ? (int)(n_rows - i0) : 8;
            ske_rows8_f32_avx2((const float *)logits + i0 * row_stride, row_stride, n_cols,
                               lanes, inv_logc, out + i0);
        }
        if (validity != NULL)
            for (int64_t i = 0; i < n_rows; i++)
                if (!ske_is_valid(validity, validity_offset + i)) out[i] = NAN;
        return SK_ENTROPY_OK;
    }
#endif
    /* rows are independent, so a dynamic schedule (which copes with a loaded machine:
     * a thread that is descheduled does not hold the others up) cannot change a value */
    const int64_t chunk = n_cols >= SKE_PAR_MIN_ELEMS ? 1 : SKE_PAR_MIN_ELEMS / n_cols;
    (void)chunk;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, chunk) num_threads(nt)
#endif
    for (int64_t i = 0; i < n_rows; i++) {
        const void *row = base + (size_t)i * row_bytes;
        double v;
        if (!ske_is_valid(validity, validity_offset + i)) {
            v = NAN;
        }
#if SKE_X86
        else if (simd) {
            /* pass 2 of this row prefetches the next row, so its pass 1 hits the cache */
            const void *next = i + 1 < n_rows ? (const void *)(base + (size_t)(i + 1) * row_bytes)
                                              : row;
            v = dtype == SK_ENTROPY_F32 ? ske_row_f32_avx2(row, next, n_cols, inv_logc)
                                        : ske_row_f16_avx2(row, next, n_cols, inv_logc);
        }
#endif
        else {
            v = ske_row_generic(row, dtype, n_cols, inv_logc);
        }
        out[i] = v;
    }
    (void)nt;
    (void)simd;
    return SK_ENTROPY_OK;
}

int sk_entropy_grouped(const void *logits, int32_t dtype, int64_t n_rows, int64_t n_cols,
                       int64_t row_stride, const uint8_t *validity, int64_t validity_offset,
                       const int64_t *groups, int64_t n_groups, int32_t n_threads,
                       double *row_scratch, double *group_sums, int64_t *group_counts)
{
    int rc = ske_check(logits, dtype, n_rows, n_cols, row_stride, validity_offset,
                       row_scratch);
    if (rc != SK_ENTROPY_OK) return rc;
    if (n_groups < 0) return SK_ENTROPY_EINVAL;
    if (n_rows == 0) return SK_ENTROPY_OK;
    if (groups == NULL || group_sums == NULL || group_counts == NULL)
        return SK_ENTROPY_EINVAL;
    for (int64_t i = 0; i < n_rows; i++)
        if (groups[i] < 0 || groups[i] >= n_groups) return SK_ENTROPY_EGROUP;
    rc = sk_entropy_rows(logits, dtype, n_rows, n_cols, row_stride, validity,
                         validity_offset, n_threads, row_scratch);
    if (rc != SK_ENTROPY_OK) return rc;
    /* serial, in row order: the sums do not depend on the thread count */
    for (int64_t i = 0; i < n_rows; i++) {
        if (!ske_is_valid(validity, validity_offset + i)) continue;
        group_sums[groups[i]] += row_scratch[i];
        group_counts[groups[i]] += 1;
    }
    return SK_ENTROPY_OK;
}

int32_t sk_entropy_simd_level(void)
{
    return (int32_t)ske_have_avx2();
}

int32_t sk_entropy_max_threads(void)
{
#ifdef _OPENMP
    return (int32_t)omp_get_max_threads();
#else
    return 1;
#endif
}
