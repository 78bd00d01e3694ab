/* The bfloat16 conversions of src/kernels/bf16.h. Rounding is checked against a reference written here in exact
 * double arithmetic (the two bf16 neighbours of x, the nearer one, on a tie the one with an even last bit),
 * over every upper half of a float combined with the low halves where rounding turns (0, 1, just below, at and
 * just above the midpoint, all ones) and pseudo-random ones, and over a table of special values with the
 * result spelled out. The array kernels (their AVX-512 loops where the kernels may use AVX-512, else the widest
 * VM_KERNEL clone this CPU has: test_bf16_avx2 and test_bf16_portable run those) and the parallel drivers (at
 * 1, 2 and 3 threads) must equal a scalar call compiled for the baseline bit for bit, with odd lengths and
 * unaligned starts so the vector tails run, and must write nothing outside their range. So must the bf16
 * ReLU of kernels/relu_bf16.h against relu_value then bf16_round, with and without its packed copy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/avx512.h"
#include "kernels/bf16.h"
#include "kernels/isa.h"
#include "kernels/relu_bf16.h"
#include "kernels/relu_math.h"
#include "test_util.h"

#define RANDOM_LOWS 10
#define FIXED_LOWS 6
#define PATTERNS ((size_t)65536 * (FIXED_LOWS + RANDOM_LOWS))
#define GUARD_BF16 ((bf16)0xA5A5)
#define GUARD_BITS 0xA5A5A5A5u
#define MAX_REPORTS 10

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* One call per element, baseline ISA, never vectorised. */
__attribute__((noinline)) static bf16 scalar_from_float(float x) { return bf16_from_float(x); }
__attribute__((noinline)) static float scalar_to_float(bf16 h) { return bf16_to_float(h); }
__attribute__((noinline)) static float scalar_round(float x) { return bf16_round(x); }

static bool bf16_is_nan(bf16 h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

/* The bf16 nearest x, ties to the even last bit, by distances in double (exact: both neighbours and x are
 * floats within 2^16 float ulps of each other). The neighbours are the truncated magnitude and the next bf16 up;
 * past the largest finite bf16 the next one is 2^128, which stands for infinity as IEEE overflow rounding says.
 * NaN: the same sign and top payload bits, quieted. */
static bf16 reference_from_float(float x) {
    const uint32_t u = to_bits(x);
    const bf16 sign = (bf16)((u >> 16) & 0x8000u);
    if (isnan(x)) return (bf16)((u >> 16) | 0x0040u);
    if (isinf(x)) return (bf16)(sign | 0x7F80u);
    const bf16 lo = (bf16)((u >> 16) & 0x7FFFu), hi = (bf16)(lo + 1);
    const double a = fabs((double)x);
    const double vlo = (double)from_bits((uint32_t)lo << 16);
    const double vhi = hi == 0x7F80u ? ldexp(1.0, 128) : (double)from_bits((uint32_t)hi << 16);
    const double below = a - vlo, above = vhi - a;
    const bf16 nearest = below < above ? lo : above < below ? hi : (lo & 1u) ? hi : lo;
    return (bf16)(sign | nearest);
}

/* xorshift32: the same pseudo-random low halves on every run. */
static uint32_t next_random(uint32_t *s) {
    uint32_t x = *s;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return *s = x;
}

/* Every upper half with each low half of interest and RANDOM_LOWS pseudo-random ones: PATTERNS floats. */
static float *make_patterns(void) {
    static const uint32_t fixed[FIXED_LOWS] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
    float *x = malloc(PATTERNS * sizeof *x);
    assert_non_null(x);
    uint32_t seed = 0x9E3779B9u;
    size_t k = 0;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (int j = 0; j < FIXED_LOWS; j++) x[k++] = from_bits(hi << 16 | fixed[j]);
        for (int j = 0; j < RANDOM_LOWS; j++) x[k++] = from_bits(hi << 16 | (next_random(&seed) & 0xFFFFu));
    }
    return x;
}

/* Counts a mismatch, printing the first few. */
static void mismatch(size_t *fails, const char *what, size_t i, uint32_t in, uint32_t got, uint32_t want) {
    if ((*fails)++ < MAX_REPORTS)
        print_error("%s[%zu]: input 0x%08x gave 0x%04x, expected 0x%04x\n", what, i, in, got, want);
}

static void test_reference_sweep(void **state) {
    (void)state;
    float *x = make_patterns();
    size_t fails = 0;
    for (size_t i = 0; i < PATTERNS; i++) {
        const bf16 got = bf16_from_float(x[i]), want = reference_from_float(x[i]);
        if (got != want) mismatch(&fails, "bf16_from_float", i, to_bits(x[i]), got, want);
        if (isnan(x[i]) && !bf16_is_nan(got)) mismatch(&fails, "NaN stays NaN", i, to_bits(x[i]), got, want);
    }
    free(x);
    assert_int_equal(fails, 0);
}

typedef struct special {
    const char *name;
    uint32_t in;
    bf16 out;
} special;

static const special specials[] = {
    {"+0", 0x00000000u, 0x0000u},
    {"-0", 0x80000000u, 0x8000u},
    {"+inf", 0x7F800000u, 0x7F80u},
    {"-inf", 0xFF800000u, 0xFF80u},
    {"quiet NaN", 0x7FC00000u, 0x7FC0u},
    {"-quiet NaN", 0xFFC00000u, 0xFFC0u},
    {"quiet NaN, low payload", 0x7FC00001u, 0x7FC0u},
    {"signalling NaN, payload only in the low half", 0x7F800001u, 0x7FC0u},
    {"-signalling NaN, payload only in the low half", 0xFF800001u, 0xFFC0u},
    {"signalling NaN, low half all ones", 0x7F80FFFFu, 0x7FC0u},
    {"signalling NaN, top payload", 0x7FA00000u, 0x7FE0u},
    {"-signalling NaN, lowest kept payload bit", 0xFF810000u, 0xFFC1u},
    {"NaN, all payload bits", 0x7FFFFFFFu, 0x7FFFu},
    {"-NaN, all bits set", 0xFFFFFFFFu, 0xFFFFu},
    {"FLT_MAX", 0x7F7FFFFFu, 0x7F80u},
    {"-FLT_MAX", 0xFF7FFFFFu, 0xFF80u},
    {"largest float rounding to the largest bf16", 0x7F7F7FFFu, 0x7F7Fu},
    {"-largest float rounding to the largest bf16", 0xFF7F7FFFu, 0xFF7Fu},
    {"tie above the largest bf16 (odd): infinity", 0x7F7F8000u, 0x7F80u},
    {"smallest subnormal", 0x00000001u, 0x0000u},
    {"-smallest subnormal", 0x80000001u, 0x8000u},
    {"half the smallest bf16 subnormal (tie, even)", 0x00008000u, 0x0000u},
    {"just above half the smallest bf16 subnormal", 0x00008001u, 0x0001u},
    {"smallest bf16 subnormal", 0x00010000u, 0x0001u},
    {"tie between bf16 subnormals 1 and 2 (odd)", 0x00018000u, 0x0002u},
    {"largest subnormal rounds to FLT_MIN", 0x007FFFFFu, 0x0080u},
    {"FLT_MIN", 0x00800000u, 0x0080u},
    {"1", 0x3F800000u, 0x3F80u},
    {"just below 1", 0x3F7FFFFFu, 0x3F80u},
    {"tie above 1 (even): down", 0x3F808000u, 0x3F80u},
    {"tie above 1 + ulp (odd): up", 0x3F818000u, 0x3F82u},
    {"-tie above 1 (even): down", 0xBF808000u, 0xBF80u},
    {"-tie above 1 + ulp (odd): up", 0xBF818000u, 0xBF82u},
    {"just above a midpoint", 0x3F808001u, 0x3F81u},
    {"tie carrying into the exponent", 0x3FFF8000u, 0x4000u},
};

static void test_specials(void **state) {
    (void)state;
    size_t fails = 0;
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        const special *s = &specials[i];
        const float x = from_bits(s->in);
        const bf16 got = bf16_from_float(x), ref = reference_from_float(x), scalar = scalar_from_float(x);
        if (got != s->out || ref != s->out || scalar != s->out) {
            fails++;
            print_error("%s (0x%08x): got 0x%04x, baseline 0x%04x, reference 0x%04x, expected 0x%04x\n", s->name,
                        s->in, got, scalar, ref, s->out);
        }
        const float back = bf16_round(x);
        if (to_bits(back) != (uint32_t)s->out << 16 && !(isnan(back) && isnan(x))) {
            fails++;
            print_error("bf16_round(%s) = 0x%08x\n", s->name, to_bits(back));
        }
    }
    assert_int_equal(fails, 0);
}

/* The expected results of the scalar functions, one baseline call per element. */
typedef struct expected {
    bf16 *packed;    /* bf16_from_float(x[i]) */
    float *rounded;  /* bf16_round(x[i]) */
    float *unpacked; /* bf16_to_float(packed[i]) */
} expected;

static expected expect_for(const float *x, size_t n) {
    expected e = {malloc(n * sizeof *e.packed), malloc(n * sizeof *e.rounded), malloc(n * sizeof *e.unpacked)};
    assert_true(e.packed && e.rounded && e.unpacked);
    for (size_t i = 0; i < n; i++) {
        e.packed[i] = scalar_from_float(x[i]);
        e.rounded[i] = scalar_round(x[i]);
        e.unpacked[i] = scalar_to_float(e.packed[i]);
    }
    return e;
}

static void expected_free(expected *e) {
    free(e->packed);
    free(e->rounded);
    free(e->unpacked);
}

typedef void (*pack_fn)(bf16 *dst, const float *src, size_t n);
typedef void (*unpack_fn)(float *dst, const bf16 *src, size_t n);
typedef void (*round_fn)(float *dst, const float *src, size_t n);

/* The three kernels over x[lo, lo + n) into buffers whose outputs start at out_off (so that source and
 * destination are misaligned differently): each result equals the expected bits and the guards around it are
 * untouched. round runs out of place and in place. */
static size_t check_span(pack_fn pack, unpack_fn unpack, round_fn round, const float *x, const expected *e,
                         size_t lo, size_t n, size_t out_off) {
    const size_t len = out_off + n + 3;
    bf16 *h = malloc(len * sizeof *h);
    float *f = malloc(len * sizeof *f);
    assert_true(h && f);
    size_t fails = 0;

    for (size_t i = 0; i < len; i++) h[i] = GUARD_BF16;
    pack(h + out_off, x + lo, n);
    for (size_t i = 0; i < len; i++) {
        const bool in = i >= out_off && i < out_off + n;
        const bf16 want = in ? e->packed[lo + i - out_off] : GUARD_BF16;
        if (h[i] != want) mismatch(&fails, "pack", i, in ? to_bits(x[lo + i - out_off]) : 0, h[i], want);
    }

    for (size_t i = 0; i < len; i++) f[i] = from_bits(GUARD_BITS);
    unpack(f + out_off, e->packed + lo, n);
    for (size_t i = 0; i < len; i++) {
        const bool in = i >= out_off && i < out_off + n;
        const uint32_t want = in ? to_bits(e->unpacked[lo + i - out_off]) : GUARD_BITS;
        if (to_bits(f[i]) != want)
            mismatch(&fails, "unpack", i, in ? e->packed[lo + i - out_off] : 0, to_bits(f[i]), want);
    }

    for (size_t i = 0; i < len; i++) f[i] = from_bits(GUARD_BITS);
    round(f + out_off, x + lo, n);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < len; i++) {
            const bool in = i >= out_off && i < out_off + n;
            const uint32_t want = in ? to_bits(e->rounded[lo + i - out_off]) : GUARD_BITS;
            if (to_bits(f[i]) != want)
                mismatch(&fails, pass ? "round in place" : "round", i, in ? to_bits(x[lo + i - out_off]) : 0,
                         to_bits(f[i]), want);
        }
        if (pass == 0) {
            memcpy(f + out_off, x + lo, n * sizeof *f);
            round(f + out_off, f + out_off, n);
        }
    }
    free(h);
    free(f);
    return fails;
}

static void test_array_kernels(void **state) {
    (void)state;
    float *x = make_patterns();
    expected e = expect_for(x, PATTERNS);
    size_t fails = 0;
    /* the whole sweep, at every pair of misalignments of source and destination */
    for (size_t lo = 0; lo < 3; lo++)
        for (size_t off = 0; off < 3; off++)
            fails += check_span(bf16_pack, bf16_unpack, bf16_round_floats, x, &e, lo, PATTERNS - lo - off, off);
    /* short and odd lengths, where only the vector tails (or only the scalar loop) run, from the patterns near
     * the largest bf16 (rounding to infinity and NaNs close by) */
    const size_t near_max = (FIXED_LOWS + RANDOM_LOWS) * (size_t)0x7F7F;
    for (size_t n = 0; n <= 70; n++)
        for (size_t lo = 0; lo < 4; lo++)
            fails += check_span(bf16_pack, bf16_unpack, bf16_round_floats, x, &e, near_max + lo, n, n % 3);
    expected_free(&e);
    free(x);
    assert_int_equal(fails, 0);
}

/* The drivers past their parallel threshold (several million elements, an odd count) at 1, 2 and 3 threads. */
static void test_parallel_drivers(void **state) {
    (void)state;
    float *patterns = make_patterns();
    const size_t n = 4 * PATTERNS + 12345;
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = patterns[(i * 7) % PATTERNS];
    free(patterns);
    expected e = expect_for(x, n);
    const int saved = omp_get_max_threads();
    size_t fails = 0;
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        fails += check_span(bf16_pack_par, bf16_unpack_par, bf16_round_floats_par, x, &e, 1, n - 1, 0);
    }
    omp_set_num_threads(saved);
    expected_free(&e);
    free(x);
    assert_int_equal(fails, 0);
}

/* bf16_round_pack (and its driver on 1-3 threads, an odd length) gives the bits of bf16_round_floats then
 * bf16_pack, in both of its outputs; bf16_pack_rounded over the rounded values gives the packed ones. */
static void test_round_pack(void **state) {
    (void)state;
    float *patterns = make_patterns();
    const size_t n = 2 * PATTERNS + 777;
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    bf16 *want_h = malloc(n * sizeof *want_h), *got_h = malloc(n * sizeof *got_h);
    assert_true(want && got && want_h && got_h);
    for (size_t i = 0; i < n; i++) want[i] = patterns[(i * 5) % PATTERNS];
    free(patterns);
    const int saved = omp_get_max_threads();
    for (int threads = 0; threads <= 3; threads++) { /* 0: the single-call kernel */
        memcpy(got, want, n * sizeof *got);
        if (threads) omp_set_num_threads(threads);
        if (threads) bf16_round_pack_par(got, got_h, n);
        else bf16_round_pack(got, got_h, n);
        size_t fails = 0;
        for (size_t i = 0; i < n; i++)
            fails += got_h[i] != bf16_from_float(want[i]) || to_bits(got[i]) != to_bits(bf16_round(want[i]));
        assert_int_equal(fails, 0);
        bf16_pack_rounded(want_h, got, n); /* the rounded values' top halves: bf16_pack's bits over them */
        assert_memory_equal(want_h, got_h, n * sizeof *got_h);
    }
    omp_set_num_threads(saved);
    free(want), free(got), free(want_h), free(got_h);
}

/* relu_bf16_round_pack over every pattern (negatives, a tiny negative whose rounding alone would give -0, NaN)
 * from an unaligned start and an odd length: y is bf16_round(relu_value(x)) and packed its bfloat16, bit for
 * bit, with no packed copy too and in place; the guards past the end stay. */
static void test_relu_round_pack(void **state) {
    (void)state;
    float *patterns = make_patterns();
    const size_t n = PATTERNS + 333;
    float *x = malloc((n + 2) * sizeof *x), *y = malloc((n + 2) * sizeof *y);
    bf16 *h = malloc((n + 2) * sizeof *h);
    assert_true(x && y && h);
    for (size_t i = 0; i < n + 2; i++) x[i] = patterns[(i * 7) % PATTERNS];
    free(patterns);
    for (int variant = 0; variant < 3; variant++) { /* with the copy, without, in place */
        float *out = variant == 2 ? y : y + 1;
        if (variant == 2) memcpy(y, x, (n + 2) * sizeof *y);
        y[n + 1] = from_bits(GUARD_BITS), h[n + 1] = GUARD_BF16;
        relu_bf16_round_pack(out, variant == 1 ? NULL : h + 1, variant == 2 ? y : x + 1, n);
        size_t fails = 0;
        for (size_t i = 0; i < n; i++) {
            const float want = bf16_round(relu_value(x[i + (variant == 2 ? 0 : 1)]));
            fails += to_bits(out[i]) != to_bits(want);
            if (variant != 1) fails += h[i + 1] != (bf16)(to_bits(want) >> 16);
        }
        fails += to_bits(y[n + 1]) != GUARD_BITS;
        fails += h[n + 1] != GUARD_BF16;
        assert_int_equal(fails, 0);
    }
    free(x), free(y), free(h);
}

/* unpack(pack(x)) is bf16_round(x) bit for bit; bf16_to_float is the shift; pack(unpack(h)) is h for every bf16
 * pattern except NaNs, which come back quieted (same sign and payload, quiet bit set). */
static void test_round_trip(void **state) {
    (void)state;
    float *x = make_patterns();
    bf16 *h = malloc(PATTERNS * sizeof *h);
    float *back = malloc(PATTERNS * sizeof *back);
    assert_true(h && back);
    size_t fails = 0;
    bf16_pack(h, x, PATTERNS);
    bf16_unpack(back, h, PATTERNS);
    for (size_t i = 0; i < PATTERNS; i++) {
        const uint32_t want = to_bits(bf16_round(x[i]));
        if (to_bits(back[i]) != want) mismatch(&fails, "unpack(pack(x))", i, to_bits(x[i]), to_bits(back[i]), want);
    }
    free(x);
    free(back);

    static bf16 all[65536], again[65536];
    static float wide[65536];
    for (uint32_t i = 0; i < 65536; i++) all[i] = (bf16)i;
    bf16_unpack(wide, all, 65536);
    bf16_pack(again, wide, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        if (to_bits(wide[i]) != i << 16) mismatch(&fails, "bf16_to_float", i, i, to_bits(wide[i]), i << 16);
        const bf16 want = bf16_is_nan(all[i]) ? (bf16)(all[i] | 0x0040u) : all[i];
        if (again[i] != want || bf16_is_nan(all[i]) != bf16_is_nan(again[i]))
            mismatch(&fails, "pack(unpack(h))", i, i, again[i], want);
        if (bf16_from_float(bf16_to_float(all[i])) != want)
            mismatch(&fails, "bf16_from_float(bf16_to_float(h))", i, i, bf16_from_float(bf16_to_float(all[i])), want);
    }
    free(h);
    assert_int_equal(fails, 0);
}

#ifdef SNUG_AVX512
static AVX512 void register_round16(uint32_t out[16], const float in[16]) {
    _mm512_storeu_si512(out, _mm512_castps_si512(avx512_bf16_round(_mm512_loadu_ps(in))));
}
#endif

/* avx512_bf16_round (the kernels that round an output in their registers) gives bf16_round's bits on every
 * pattern of the sweep: all 65,536 upper halves, each with the fixed and pseudo-random low halves (ties at even
 * and odd, the carry into the exponent and to infinity, subnormals, every NaN's upper half). */
static void test_register_round(void **state) {
    (void)state;
    SKIP_UNLESS(kernel_isa_now() >= KERNEL_ISA_AVX512, "AVX-512 (the register rounding)");
#ifdef SNUG_AVX512
    float *x = make_patterns();
    size_t fails = 0;
    for (size_t i = 0; i < PATTERNS; i += 16) {
        uint32_t got[16];
        register_round16(got, x + i); /* PATTERNS is a multiple of 16 */
        for (size_t l = 0; l < 16; l++) {
            const uint32_t want = to_bits(bf16_round(x[i + l]));
            if (got[l] != want) mismatch(&fails, "avx512_bf16_round", i + l, to_bits(x[i + l]), got[l], want);
        }
    }
    free(x);
    assert_int_equal(fails, 0);
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_sweep),
        cmocka_unit_test(test_specials),
        cmocka_unit_test(test_array_kernels),
        cmocka_unit_test(test_parallel_drivers),
        cmocka_unit_test(test_round_pack),
        cmocka_unit_test(test_relu_round_pack),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_register_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
