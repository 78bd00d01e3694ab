/* The bfloat16 3x3 convolution (kernels/conv3x3_bf16.h) against a double-precision reference of the same
 * bfloat16 operands, through the portable twin on every CPU and the AVX512_BF16 kernel where the CPU has it.
 * The products of two bfloat16 values are exact in float32, so the kernel differs from the reference only by
 * its float32 additions: at most K u sum |terms| with K = 9 c (or 9 co) additions and u = 2^-24 (the bound of
 * recursive summation), checked per element. The shapes hit the edges: one channel and odd channel counts (a
 * pair with a zero half), widths that are no multiple of 16, planes smaller than a vector, output counts that
 * leave partial register tiles, channel counts past a block of 16 lanes (17), a plane whose weight gradient
 * goes in two bands and whose forward and input gradient pair it in bands of rows (90 x 80, 40 x 256), widths
 * that 16-lane vectors tile row by row (16, 32, 80, 256) and ones they do not (the rest). The weight
 * gradient's bound has K = h w. The gradients must ADD to what they held. And bit for bit: the two kernels
 * where both run, a packed bfloat16 source and its float32 values, one thread and two sharing a sample, an
 * input gradient written fresh over stale memory and one added into zeros. */
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

#include "kernels/bf16.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/isa.h"
#include "op_test_util.h"

/* c, co, h, w */
static const size_t shapes[][4] = {
    {1, 1, 1, 1}, {1, 3, 5, 7}, {2, 5, 3, 17}, {3, 8, 9, 16}, {16, 16, 8, 8}, {5, 17, 13, 31}, {1, 32, 28, 28},
    {7, 20, 4, 40}, {32, 64, 14, 14}, {4, 9, 33, 15}, {2, 3, 2, 100}, {17, 5, 40, 41}, {3, 10, 90, 80},
    {5, 9, 7, 32}, {3, 4, 40, 256}, {64, 17, 12, 20}, {32, 16, 66, 93}, {64, 32, 8, 8}, {16, 48, 12, 12},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct bdata {
    conv3x3_shape s;
    size_t xn, yn, wn;
    float *x, *w, *b, *dy; /* bfloat16 values */
    uint16_t *xh;          /* x packed */
    float *y, *dx, *dx0, *dw, *dw0, *uf, *ub, *scratch, *dw_scratch;
} bdata;

/* The paired weights, in the layout of the kernel now in use (AMX tiles read theirs in blocks of 16 planes). */
static void pair_weights(bdata *d) {
    conv3x3_bf16_weights(&d->s, d->uf, d->w, false, 0, 1);
    conv3x3_bf16_weights(&d->s, d->ub, d->w, true, 0, 1);
}

/* The portable twin (on) or the CPU's kernel, with the weights paired for it. */
static void use_kernel(bdata *d, bool portable) {
    conv3x3_bf16_force_portable(portable);
    pair_weights(d);
}

static void bdata_init(bdata *d, const size_t *sh, uint64_t seed) {
    d->s = (conv3x3_shape){.c = sh[0], .co = sh[1], .h = sh[2], .w = sh[3]};
    d->xn = d->s.c * d->s.h * d->s.w, d->yn = d->s.co * d->s.h * d->s.w, d->wn = d->s.co * d->s.c * 9;
    d->x = op_test_bf16_filled(d->xn, &seed), d->w = op_test_bf16_filled(d->wn, &seed);
    d->b = op_test_bf16_filled(d->s.co, &seed), d->dy = op_test_bf16_filled(d->yn, &seed);
    d->dx0 = op_test_bf16_filled(d->xn, &seed), d->dw0 = op_test_bf16_filled(d->wn, &seed);
    d->dw = op_test_xmalloc(d->wn * sizeof(float));
    d->xh = op_test_xmalloc(d->xn * sizeof *d->xh);
    bf16_pack(d->xh, d->x, d->xn);
    d->y = op_test_xmalloc(d->yn * sizeof(float));
    d->dx = op_test_xmalloc(d->xn * sizeof(float));
    size_t n, uf = 0, ub = 0;
    assert_true(conv3x3_bf16_scratch_floats(&d->s, &n));
    for (int portable = 0; portable < 2; portable++) { /* room for either kernel's layout */
        size_t f, b;
        conv3x3_bf16_force_portable(portable);
        assert_true(conv3x3_bf16_weights_floats(&d->s, false, &f) && conv3x3_bf16_weights_floats(&d->s, true, &b));
        uf = f > uf ? f : uf, ub = b > ub ? b : ub;
    }
    conv3x3_bf16_force_portable(false);
    d->scratch = op_test_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) d->scratch[i] = NAN; /* a read of anything unwritten shows */
    d->uf = op_test_xmalloc(uf * sizeof(float));
    d->ub = op_test_xmalloc(ub * sizeof(float));
    assert_true(conv3x3_bf16_dw_scratch_floats(&d->s, &n));
    d->dw_scratch = op_test_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) d->dw_scratch[i] = NAN;
    pair_weights(d);
}

static void bdata_free(bdata *d) {
    float *bufs[] = {d->x, d->w, d->b, d->dy, d->y, d->dx, d->dx0, d->dw, d->dw0, d->uf, d->ub, d->scratch, d->dw_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(d->xh);
}

/* src[ch][y + dy][x + dx] or 0 outside the plane. */
static double at(const float *src, size_t ch, size_t h, size_t w, long y, long x) {
    if (y < 0 || x < 0 || y >= (long)h || x >= (long)w) return 0.0;
    return src[(ch * h + (size_t)y) * w + (size_t)x];
}

/* One output of the forward (dx false: plane o = output channel) or the input gradient (plane o = input
 * channel), in double: *sum and the sum of the terms' magnitudes. */
static void reference(const bdata *d, bool dx, size_t o, size_t y, size_t x, double *sum, double *mag) {
    const size_t chans = dx ? d->s.co : d->s.c, h = d->s.h, w = d->s.w;
    const float *src = dx ? d->dy : d->x;
    *sum = 0.0, *mag = 0.0;
    for (size_t k = 0; k < chans; k++)
        for (size_t kh = 0; kh < 3; kh++)
            for (size_t kw = 0; kw < 3; kw++) {
                /* forward: x[k][y + kh - 1][x + kw - 1] w[o][k][kh][kw]; input gradient: dy at the mirrored
                 * tap with w[k][o] rotated */
                const double wt = dx ? d->w[(k * d->s.c + o) * 9 + (2 - kh) * 3 + (2 - kw)]
                                     : d->w[(o * d->s.c + k) * 9 + kh * 3 + kw];
                const double t = wt * at(src, k, h, w, (long)(y + kh) - 1, (long)(x + kw) - 1);
                *sum += t;
                *mag += fabs(t);
            }
}

/* Every output of one direction within K u sum|terms| of the reference (plus start: the bias, or dx0). */
static void check_against_reference(const bdata *d, bool dx) {
    const size_t planes = dx ? d->s.c : d->s.co, K = 9 * (dx ? d->s.co : d->s.c), h = d->s.h, w = d->s.w;
    const double u = ldexp(1.0, -24);
    for (size_t o = 0; o < planes; o++)
        for (size_t y = 0; y < h; y++)
            for (size_t x = 0; x < w; x++) {
                double sum, mag;
                reference(d, dx, o, y, x, &sum, &mag);
                const size_t i = (o * h + y) * w + x;
                const double start = dx ? d->dx0[i] : d->b[o], got = dx ? d->dx[i] : d->y[i];
                const double bound = (double)(K + 1) * u * (mag + fabs(start)) + 1e-30;
                if (fabs(got - (start + sum)) > bound)
                    fail_msg("%s (%zu, %zu, %zu, %zu) plane %zu at (%zu, %zu): %.9g, reference %.9g, bound %.3g",
                             dx ? "input gradient" : "forward", d->s.c, d->s.co, d->s.h, d->s.w, o, y, x, got,
                             start + sum, bound);
            }
}

/* dW[o][k][tap] against sum over pixels of dy[o] x[k] shifted by the tap, within (K + 1) u sum|terms|, K the
 * plane's pixels (the additions of one element's chain). */
static void check_dw_against_reference(const bdata *d) {
    const size_t h = d->s.h, w = d->s.w;
    const double u = ldexp(1.0, -24);
    for (size_t o = 0; o < d->s.co; o++)
        for (size_t k = 0; k < d->s.c; k++)
            for (size_t tap = 0; tap < 9; tap++) {
                double sum = 0.0, mag = 0.0;
                for (size_t y = 0; y < h; y++)
                    for (size_t x = 0; x < w; x++) {
                        const double t = (double)d->dy[(o * h + y) * w + x] *
                                         at(d->x, k, h, w, (long)(y + tap / 3) - 1, (long)(x + tap % 3) - 1);
                        sum += t;
                        mag += fabs(t);
                    }
                const size_t i = (o * d->s.c + k) * 9 + tap;
                const double bound = (double)(h * w + 2) * u * (mag + fabs(d->dw0[i])) + 1e-30;
                if (fabs(d->dw[i] - (d->dw0[i] + sum)) > bound)
                    fail_msg("weight gradient (%zu, %zu, %zu, %zu) (%zu, %zu, %zu): %.9g, reference %.9g, bound %.3g",
                             d->s.c, d->s.co, h, w, o, k, tap, d->dw[i], d->dw0[i] + sum, bound);
            }
}

static void run_dw(bdata *d, conv3x3_bf16_src x, float *dw) {
    memcpy(dw, d->dw0, d->wn * sizeof(float));
    conv3x3_bf16_backward_dw(&d->s, dw, d->dy, x, d->dw_scratch, 0, 1);
}

static void run_forward(bdata *d, conv3x3_bf16_src x, float *y) {
    conv3x3_bf16_forward(&d->s, y, x, d->uf, d->b, d->scratch, 0, 1);
}

static void run_dx(bdata *d, float *dx) {
    memcpy(dx, d->dx0, d->xn * sizeof(float));
    conv3x3_bf16_backward_dx(&d->s, dx, d->dy, d->ub, d->scratch, false, 0, 1);
}

/* Both directions against the reference on one kernel (portable or not). */
static void check_kernel(bool portable) {
    conv3x3_bf16_force_portable(portable);
    for (size_t i = 0; i < N_SHAPES; i++) {
        bdata d;
        bdata_init(&d, shapes[i], 100 + i);
        use_kernel(&d, portable);
        run_forward(&d, (conv3x3_bf16_src){.f = d.x}, d.y);
        check_against_reference(&d, false);
        run_dx(&d, d.dx);
        check_against_reference(&d, true);
        run_dw(&d, (conv3x3_bf16_src){.f = d.x}, d.dw);
        check_dw_against_reference(&d);
        bdata_free(&d);
    }
    conv3x3_bf16_force_portable(false);
}

static void test_portable_matches_reference(void **state) {
    (void)state;
    check_kernel(true);
}

/* The CPU's kernel: AMX tiles where it has them (and they take the channels), else vdpbf16ps. */
static void test_hardware_matches_reference(void **state) {
    (void)state;
    if (kernel_isa_now() < KERNEL_ISA_AVX512_BF16) {
        printf("# this CPU has no AVX512_BF16 (or the test caps it): the portable twin stands in\n");
        skip();
    }
    check_kernel(false);
}

/* The same bits from a packed source and its floats and from two threads sharing each sample, on the CPU's
 * kernel; and from the vdpbf16ps kernel and the portable twin where vdpbf16ps is the CPU's (on AMX tiles the
 * chains differ from the twin's: the reference bounds them, and the twin test_conv3x3_bf16_avx512_bf16 checks
 * vdpbf16ps against the twin). */
static void test_same_bits_every_way(void **state) {
    (void)state;
    const bool hw = kernel_isa_now() >= KERNEL_ISA_AVX512_BF16 && kernel_isa_now() < KERNEL_ISA_AMX_BF16;
    for (size_t i = 0; i < N_SHAPES; i++) {
        bdata d;
        bdata_init(&d, shapes[i], 200 + i);
        float *y2 = op_test_xmalloc(d.yn * sizeof(float)), *dx2 = op_test_xmalloc(d.xn * sizeof(float));
        float *dw2 = op_test_xmalloc(d.wn * sizeof(float));
        run_forward(&d, (conv3x3_bf16_src){.f = d.x}, d.y);
        run_dx(&d, d.dx);
        run_dw(&d, (conv3x3_bf16_src){.f = d.x}, d.dw);
        run_dw(&d, (conv3x3_bf16_src){.h = d.xh}, dw2);
        assert_memory_equal(d.dw, dw2, d.wn * sizeof(float));
        memcpy(dw2, d.dw0, d.wn * sizeof(float));
        #pragma omp parallel num_threads(2)
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            conv3x3_bf16_backward_dw(&d.s, dw2, d.dy, (conv3x3_bf16_src){.f = d.x}, d.dw_scratch, t, T);
        }
        assert_memory_equal(d.dw, dw2, d.wn * sizeof(float));
        run_forward(&d, (conv3x3_bf16_src){.h = d.xh}, y2);
        assert_memory_equal(d.y, y2, d.yn * sizeof(float));
        #pragma omp parallel num_threads(2)
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            conv3x3_bf16_forward(&d.s, y2, (conv3x3_bf16_src){.f = d.x}, d.uf, d.b, d.scratch, t, T);
        }
        assert_memory_equal(d.y, y2, d.yn * sizeof(float));
        memcpy(dx2, d.dx0, d.xn * sizeof(float));
        #pragma omp parallel num_threads(2)
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            conv3x3_bf16_backward_dx(&d.s, dx2, d.dy, d.ub, d.scratch, false, t, T);
        }
        assert_memory_equal(d.dx, dx2, d.xn * sizeof(float));
        if (hw) { /* the other kernel */
            use_kernel(&d, true);
            run_forward(&d, (conv3x3_bf16_src){.h = d.xh}, y2);
            run_dx(&d, dx2);
            run_dw(&d, (conv3x3_bf16_src){.h = d.xh}, dw2);
            use_kernel(&d, false);
            assert_memory_equal(d.dw, dw2, d.wn * sizeof(float));
            assert_memory_equal(d.y, y2, d.yn * sizeof(float));
            assert_memory_equal(d.dx, dx2, d.xn * sizeof(float));
        }
        free(y2);
        free(dx2);
        free(dw2);
        bdata_free(&d);
    }
}

/* A variant of a kernel's call against the plain call: want computes the bits the variant must give (one
 * thread), got the variant as thread t of T. out: the output's floats are the input's (dx) or the output's. */
typedef struct variant {
    void (*want)(bdata *d, float *out);
    void (*got)(bdata *d, float *out, size_t t, size_t T);
    bool dx;
} variant;

/* The variant gives want's bits on every shape, on both kernels (where the CPU has AVX512_BF16), on 1 and 2
 * threads, over an output of stale memory (NaN: a read of it shows). */
static void check_variant(const variant *v, uint64_t seed) {
    const int kernels = kernel_isa_now() >= KERNEL_ISA_AVX512_BF16 ? 2 : 1;
    for (size_t i = 0; i < N_SHAPES; i++) {
        bdata d;
        bdata_init(&d, shapes[i], seed + i);
        const size_t n = v->dx ? d.xn : d.yn;
        float *want = op_test_xmalloc(n * sizeof(float)), *got = op_test_xmalloc(n * sizeof(float));
        for (int k = 0; k < kernels; k++) {
            use_kernel(&d, k == 1 || kernels == 1);
            v->want(&d, want);
            for (int T = 1; T <= 2; T++) {
                for (size_t j = 0; j < n; j++) got[j] = NAN;
                #pragma omp parallel num_threads(T)
                v->got(&d, got, (size_t)omp_get_thread_num(), (size_t)omp_get_num_threads());
                assert_memory_equal(want, got, n * sizeof(float));
            }
        }
        conv3x3_bf16_force_portable(false);
        free(want);
        free(got);
        bdata_free(&d);
    }
}

static void forward_then_round(bdata *d, float *y) {
    run_forward(d, (conv3x3_bf16_src){.f = d->x}, y);
    bf16_round_floats(y, y, d->yn);
}

/* from floats on one thread, from the packed source on two */
static void forward_rounded(bdata *d, float *y, size_t t, size_t T) {
    const conv3x3_bf16_src x = T == 1 ? (conv3x3_bf16_src){.f = d->x} : (conv3x3_bf16_src){.h = d->xh};
    conv3x3_bf16_forward_rounded(&d->s, y, x, d->uf, d->b, d->scratch, t, T);
}

/* The forward that rounds its output as it stores it gives the bits of the forward then bf16_round_floats. */
static void test_rounded_forward_same_bits(void **state) {
    (void)state;
    const variant v = {.want = forward_then_round, .got = forward_rounded, .dx = false};
    check_variant(&v, 300);
}

static void dx_into_zeros(bdata *d, float *dx) {
    memset(dx, 0, d->xn * sizeof(float));
    conv3x3_bf16_backward_dx(&d->s, dx, d->dy, d->ub, d->scratch, false, 0, 1);
}

static void dx_fresh(bdata *d, float *dx, size_t t, size_t T) {
    conv3x3_bf16_backward_dx(&d->s, dx, d->dy, d->ub, d->scratch, true, t, T);
}

/* The input gradient written fresh over stale memory gives the bits of adding into zeros. */
static void test_fresh_dx_same_bits(void **state) {
    (void)state;
    const variant v = {.want = dx_into_zeros, .got = dx_fresh, .dx = true};
    check_variant(&v, 400);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_portable_matches_reference),
        cmocka_unit_test(test_hardware_matches_reference),
        cmocka_unit_test(test_same_bits_every_way),
        cmocka_unit_test(test_rounded_forward_same_bits),
        cmocka_unit_test(test_fresh_dx_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
