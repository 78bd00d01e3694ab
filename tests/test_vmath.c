/* The vectorised float exp and erf of src/kernels/vmath.h against libm's double exp and erf (exact to far below a
 * float ulp): every float of the ranges where an error would hide (the branch points, the subnormal results,
 * the overflow edge), a sweep of all bit patterns with a prime stride (tails, subnormal and huge inputs), and
 * the specials. Bounds asserted, in ulp of the exact result (the spacing of floats at its magnitude, 2^-149
 * for subnormals): expf <= 1 ulp, erff <= 1.5 ulp, and an absolute erf error below 1e-7. Each function runs
 * in a VM_KERNEL vectorised loop (the widest version this CPU has) and in a scalar call compiled for the
 * baseline: the bits must agree, so no result depends on where a vector loop splits its range. erf's near-zero
 * form called alone (vm_erff_near0) has vm_erff's bits over (-1, 1). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vmath.h"

#define EXP_MAX_ULP 1.0
#define ERF_MAX_ULP 1.5
#define ERF_MAX_ABS 1e-7
#define BATCH ((size_t)4096)

typedef enum { FN_EXP, FN_ERF } fn_id;

typedef struct stats {
    double max_ulp, max_abs;
    float worst_x;
    size_t count;
} stats;

VM_KERNEL static void run_vector(fn_id fn, float *y, const float *x, size_t n) {
    if (fn == FN_EXP) {
        #pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = vm_expf(x[i]);
    } else {
        #pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = vm_erff(x[i]);
    }
}

/* One call per element, baseline ISA, never vectorised. */
__attribute__((noinline)) static float run_scalar(fn_id fn, float x) {
    return fn == FN_EXP ? vm_expf(x) : vm_erff(x);
}

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

/* The spacing of floats at |v|: 2^(e - 24) for v in [2^(e-1), 2^e), 2^-149 below FLT_MIN. */
static double ulp_at(double v) {
    const double a = fabs(v);
    if (a < FLT_MIN) return ldexp(1.0, -149);
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

/* Checks one result against the exact value; returns false (and prints) on a failure that is not about size
 * (a wrong NaN, infinity or sign). */
static bool check_one(fn_id fn, float x, float got, stats *st) {
    const double exact = fn == FN_EXP ? exp((double)x) : erf((double)x);
    st->count++;
    if (isnan(x)) {
        if (isnan(got)) return true;
        print_error("%s(NaN) = %a, expected NaN\n", fn == FN_EXP ? "expf" : "erff", (double)got);
        return false;
    }
    const float rounded = (float)exact; /* overflows to inf exactly where the float result must */
    if (isinf(rounded) || isinf(got)) {
        if (got == rounded) return true;
        print_error("%s(%a) = %a, expected %a\n", fn == FN_EXP ? "expf" : "erff", (double)x, (double)got,
                    (double)rounded);
        return false;
    }
    const double err = fabs((double)got - exact), ulp = err / ulp_at(exact);
    if (ulp > st->max_ulp) st->max_ulp = ulp, st->worst_x = x;
    if (err > st->max_abs) st->max_abs = err;
    return true;
}

/* Evaluates n inputs both ways; every result checked, the two ways compared bit for bit. */
static void check_batch(fn_id fn, const float *x, size_t n, stats *st) {
    float y[BATCH];
    run_vector(fn, y, x, n);
    for (size_t i = 0; i < n; i++) {
        const float s = run_scalar(fn, x[i]);
        if (to_bits(s) != to_bits(y[i]) && !(isnan(s) && isnan(y[i]))) {
            print_error("%s(%a): vector %a, scalar %a\n", fn == FN_EXP ? "expf" : "erff", (double)x[i],
                        (double)y[i], (double)s);
            fail();
        }
        assert_true(check_one(fn, x[i], y[i], st));
    }
}

/* Every bit pattern from lo to hi (inclusive, either order) with the given stride. */
static void sweep_bits(fn_id fn, uint32_t lo, uint32_t hi, uint32_t stride, stats *st) {
    if (lo > hi) {
        const uint32_t t = lo;
        lo = hi, hi = t;
    }
    float x[BATCH];
    size_t n = 0;
    for (uint64_t u = lo; u <= hi; u += stride) {
        x[n++] = from_bits((uint32_t)u);
        if (n == BATCH) check_batch(fn, x, n, st), n = 0;
    }
    if (n) check_batch(fn, x, n, st);
}

/* Every float in [a, b] (same sign), and the same magnitudes negated. */
static void sweep_range(fn_id fn, float a, float b, uint32_t stride, bool both_signs, stats *st) {
    sweep_bits(fn, to_bits(a), to_bits(b), stride, st);
    if (both_signs) sweep_bits(fn, to_bits(-a), to_bits(-b), stride, st);
}

static void sweep_specials(fn_id fn, stats *st) {
    const float x[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                       FLT_TRUE_MIN, -FLT_TRUE_MIN, 1.0f, -1.0f, 4.0f, -4.0f, 88.8f, -104.0f};
    check_batch(fn, x, sizeof x / sizeof *x, st);
}

static void report(const char *name, const stats *st) {
    printf("%s: %zu inputs, max error %.3f ulp at %a\n", name, st->count, st->max_ulp, (double)st->worst_x);
}

static void test_expf(void **state) {
    (void)state;
    stats st = {0};
    sweep_specials(FN_EXP, &st);
    sweep_bits(FN_EXP, 0, UINT32_MAX, 4099, &st);          /* everything, tails and subnormal inputs included */
    sweep_range(FN_EXP, -110.0f, -80.0f, 1, false, &st);   /* subnormal results, the flush to 0 at -104 */
    sweep_range(FN_EXP, 88.0f, 89.0f, 1, false, &st);      /* the overflow edge */
    sweep_range(FN_EXP, 0.0f, 2.0f, 257, true, &st);       /* the reduction near 0, tiny inputs */
    sweep_range(FN_EXP, 2.0f, 80.0f, 5, true, &st);
    report("expf", &st);
    assert_true(st.max_ulp <= EXP_MAX_ULP);
}

/* exp is exact at 0 and monotonic where softmax uses it; exp(-x^2/2) of large x is 0, not a subnormal. */
static void test_expf_values(void **state) {
    (void)state;
    assert_true(vm_expf(0.0f) == 1.0f);
    assert_true(vm_expf(-0.0f) == 1.0f);
    assert_true(vm_expf(-INFINITY) == 0.0f);
    assert_true(vm_expf(-1000.0f) == 0.0f);
    assert_true(isinf(vm_expf(100.0f)) && vm_expf(100.0f) > 0.0f);
    float prev = 0.0f;
    for (float x = -20.0f; x <= 20.0f; x += 0.001953125f) {
        const float y = vm_expf(x);
        assert_true(y >= prev);
        prev = y;
    }
}

static void test_erff(void **state) {
    (void)state;
    stats st = {0};
    sweep_specials(FN_ERF, &st);
    sweep_bits(FN_ERF, 0, UINT32_MAX, 4099, &st);
    sweep_range(FN_ERF, 0.875f, 1.125f, 1, true, &st);     /* the switch between the two forms at 1 */
    sweep_range(FN_ERF, 3.875f, 4.125f, 1, true, &st);     /* the clamp at 4, where erf rounds to 1 */
    sweep_range(FN_ERF, 1e-30f, 8.0f, 61, true, &st);      /* the whole curve, dense */
    sweep_range(FN_ERF, FLT_TRUE_MIN, FLT_MIN, 997, true, &st); /* subnormal inputs: erf(x) = 2x / sqrt(pi) */
    report("erff", &st);
    printf("erff: max absolute error %.3g\n", st.max_abs);
    assert_true(st.max_ulp <= ERF_MAX_ULP);
    assert_true(st.max_abs <= ERF_MAX_ABS);
}

/* erf is odd, bounded by 1, exactly 0 at 0 and +-1 beyond 4. */
static void test_erff_values(void **state) {
    (void)state;
    assert_true(vm_erff(0.0f) == 0.0f);
    assert_true(vm_erff(4.5f) == 1.0f && vm_erff(-4.5f) == -1.0f);
    assert_true(vm_erff(INFINITY) == 1.0f && vm_erff(-INFINITY) == -1.0f);
    for (float x = 0.0f; x <= 6.0f; x += 0.0009765625f) {
        const float y = vm_erff(x);
        assert_true(to_bits(vm_erff(-x)) == (to_bits(y) ^ 0x80000000u));
        assert_true(y >= 0.0f && y <= 1.0f);
    }
}

/* erf's near-zero form alone (vm_erff_near0, which GELU calls for blocks whose inputs are all in (-1, 1)) has the
 * bits vm_erff selects there: every float of [0, 1) with a prime stride, both signs, in a vector loop and in a
 * scalar call, against vm_erff's scalar call. */
VM_KERNEL static void run_near0_vector(float *y, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = vm_erff_near0(x[i]);
}

__attribute__((noinline)) static float run_near0_scalar(float x) { return vm_erff_near0(x); }

static void test_erff_near0(void **state) {
    (void)state;
    float x[BATCH], y[BATCH];
    size_t n = 0, checked = 0;
    for (uint32_t u = 0; u < to_bits(1.0f); u += 101) {
        x[n++] = from_bits(u);
        x[n++] = -from_bits(u);
        if (n + 2 <= BATCH && u + 101 < to_bits(1.0f)) continue;
        run_near0_vector(y, x, n);
        for (size_t i = 0; i < n; i++) {
            const uint32_t want = to_bits(run_scalar(FN_ERF, x[i]));
            assert_true(to_bits(y[i]) == want);
            assert_true(to_bits(run_near0_scalar(x[i])) == want);
        }
        checked += n;
        n = 0;
    }
    assert_true(checked > 1000000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf),
        cmocka_unit_test(test_erff_near0),
        cmocka_unit_test(test_expf_values),
        cmocka_unit_test(test_erff),
        cmocka_unit_test(test_erff_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
