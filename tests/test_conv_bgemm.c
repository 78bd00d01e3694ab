/* conv2d in a bf16 call (op_call.bf16) on layers wide enough that, where bgemm's products pay and vdpbf16ps's do
 * not (AMX), they take the lowering through bgemm (src/ops/conv2d.c, conv_bgemm_pays): 3x3 stride-1 layers of
 * at least 128 input and output channels, on small planes. On every CPU and cap:
 *   - the output, the input gradient, dW and db against a float64 reference, within the float32 summation
 *     bound of their terms (k terms: k 2^-24 of the sum of the terms' magnitudes, plus the partial sums the
 *     lowering adds: col2im's 9 taps, the threads' partials, the samples), on operands that are bfloat16 values
 *     (so that whichever kernel runs, every product is exact);
 *   - on inputs that are not bfloat16 values, the forward and the input gradient multiply the operands rounded
 *     to bfloat16 exactly where kernel_bf16_products_pay (the products are bf16's: bgemm's on AMX,
 *     conv3x3_bf16's where vdpbf16ps pays), else the float32 values: the path the plan promises is the one
 *     that ran;
 *   - where the products are bf16's, each sample's output and input gradient have the same bits on 1, 2 and 3
 *     threads and alone or in a micro-batch of 3 (capped below AVX-512 the float32 lowering leaves products of
 *     this size to the BLAS, whose bits follow its threads); dW and db on a given thread count the same bits
 *     twice.
 * The workspace is bf16_workspace_bytes exactly (ASan catches an overrun). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/isa.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

typedef struct bg_case { size_t c, co, h, w; bool no_bias; } bg_case;

static const bg_case cases[] = {
    {128, 128, 5, 6, false}, /* the smallest layer the path takes */
    {160, 144, 4, 3, true},  /* channels off the tiles' multiples, no bias */
};

#define M 3 /* samples in the micro-batch */

static snug_graph *graph_of(const bg_case *k) {
    snug_graph *g = snug_graph_new("t");
    const snug_conv2d_spec s = {.out_channels = k->co, .kernel = 3, .stride = 1, .padding = 1, .no_bias = k->no_bias};
    snug_conv2d_ex(g, "conv", snug_input(g, "x", k->c, k->h, k->w), &s);
    return g; /* node 1 */
}

/* Inputs: x, W, b and dy (r), each rounded to bfloat16 where `rounded`. */
typedef struct bg_data {
    float *x, *w, *b, *dy;
    size_t xn, wn, yn; /* per sample: input, output; wn the weight's */
} bg_data;

static float *filled(size_t n, uint64_t *s, bool rounded) {
    float *v = op_test_xmalloc(n * sizeof *v);
    op_test_fill_sym(v, n, s);
    if (rounded) bf16_round_floats(v, v, n);
    return v;
}

static bg_data data_of(const bg_case *k, bool rounded, uint64_t seed) {
    bg_data d = {.xn = k->c * k->h * k->w, .wn = k->co * k->c * 9, .yn = k->co * k->h * k->w};
    d.x = filled(M * d.xn, &seed, rounded), d.w = filled(d.wn, &seed, rounded);
    d.b = filled(k->co, &seed, rounded), d.dy = filled(M * d.yn, &seed, rounded);
    return d;
}

static void data_free(bg_data *d) { free(d->x), free(d->w), free(d->b), free(d->dy); }

/* Results of one bf16 call over samples [first, first + m) of d on `threads` threads. */
typedef struct bg_out {
    float *y, *dx, *dw, *db;
} bg_out;

static bg_out run(const bg_case *k, const bg_data *d, size_t first, size_t m, int threads) {
    op_fixture f;
    op_fixture_init(&f, graph_of(k), 1, m, threads, FILL_PLAIN, 1);
    const size_t ws = f.op->bf16_workspace_bytes(f.node, m, threads);
    free(f.work);
    f.work = op_test_xmalloc(ws);
    f.c.work = f.work;
    f.c.bf16 = true;
    memcpy(f.x[0], d->x + first * d->xn, m * d->xn * sizeof(float));
    memcpy(f.r, d->dy + first * d->yn, m * d->yn * sizeof(float));
    memcpy(f.w[0], d->w, d->wn * sizeof(float));
    if (!k->no_bias) memcpy(f.w[1], d->b, k->co * sizeof(float));
    op_fixture_analytic(&f);
    bg_out o = {.y = op_test_xmalloc(m * d->yn * sizeof(float)), .dx = op_test_xmalloc(m * d->xn * sizeof(float)),
                .dw = op_test_xmalloc(d->wn * sizeof(float)), .db = op_test_xmalloc(k->co * sizeof(float))};
    memcpy(o.y, f.y, m * d->yn * sizeof(float));
    memcpy(o.dx, f.dx[0], m * d->xn * sizeof(float));
    memcpy(o.dw, f.dw[0], d->wn * sizeof(float));
    if (!k->no_bias) memcpy(o.db, f.dw[1], k->co * sizeof(float));
    else memset(o.db, 0, k->co * sizeof(float));
    op_fixture_free(&f);
    return o;
}

static void out_free(bg_out *o) { free(o->y), free(o->dx), free(o->dw), free(o->db); }

/* v as the products read it: rounded to bfloat16 where `round`. */
static double operand(float v, bool round) { return round ? (double)bf16_round(v) : (double)v; }

/* The worst |got - ref| over one tensor as a fraction of its bound, terms 2^-24 of the sum of the terms'
 * magnitudes (terms: the roundings in each element's float32 sum), so that 1 is the bound. */
static void note(double *worst, double got, double ref, double mag, double terms) {
    const double allowed = terms * ldexp(1.0, -24) * mag;
    const double r = allowed > 0 ? fabs(got - ref) / allowed : fabs(got - ref) > 0 ? INFINITY : 0;
    if (r > *worst) *worst = r;
}

/* Input pixel (i + a - 1, j + b - 1) of a 3x3 padding-1 window at (i, j): its index in a (h, w) plane, or -1. */
static long tap(const bg_case *k, size_t i, size_t j, size_t a, size_t b) {
    const long ih = (long)(i + a) - 1, iw = (long)(j + b) - 1;
    return ih < 0 || iw < 0 || ih >= (long)k->h || iw >= (long)k->w ? -1 : ih * (long)k->w + iw;
}

/* The worst of y and dx (worst[0], worst[1]) against float64 sums of the operands as `round` reads them. */
static void check_y_dx(const bg_case *k, const bg_data *d, const bg_out *o, bool round, double worst[2]) {
    const size_t P = k->h * k->w, C = k->c, CO = k->co;
    for (size_t n = 0; n < M; n++)
        for (size_t p = 0; p < P; p++) {
            const size_t i = p / k->w, j = p % k->w;
            for (size_t oc = 0; oc < CO; oc++) { /* y[n, oc, p] = b + sum W x */
                double acc = k->no_bias ? 0 : d->b[oc], mag = fabs(acc);
                for (size_t c = 0; c < C; c++)
                    for (size_t t = 0; t < 9; t++) {
                        const long q = tap(k, i, j, t / 3, t % 3);
                        if (q < 0) continue;
                        const double v = operand(d->w[(oc * C + c) * 9 + t], round) *
                                         operand(d->x[(n * C + c) * P + (size_t)q], round);
                        acc += v, mag += fabs(v);
                    }
                note(&worst[0], o->y[(n * CO + oc) * P + p], acc, mag, (double)(C * 9 + 1));
            }
            for (size_t c = 0; c < C; c++) { /* dx[n, c, p] = sum W dy over the outputs whose window holds p */
                double acc = 0, mag = 0;
                for (size_t oc = 0; oc < CO; oc++)
                    for (size_t t = 0; t < 9; t++) {
                        const long q = tap(k, i, j, 2 - t / 3, 2 - t % 3); /* the output whose tap t reads p */
                        if (q < 0) continue;
                        const double v = operand(d->w[(oc * C + c) * 9 + t], round) *
                                         operand(d->dy[(n * CO + oc) * P + (size_t)q], round);
                        acc += v, mag += fabs(v);
                    }
                note(&worst[1], o->dx[(n * C + c) * P + p], acc, mag, (double)(CO * 9 + 9));
            }
        }
}

/* The worst of dW and db against float64 sums over the samples (operands bfloat16 values), on `threads`
 * threads (their partials: one more rounding each). */
static void check_dw_db(const bg_case *k, const bg_data *d, const bg_out *o, int threads, double worst[2]) {
    const size_t P = k->h * k->w, C = k->c, CO = k->co;
    for (size_t oc = 0; oc < CO; oc++) {
        for (size_t c = 0; c < C; c++)
            for (size_t t = 0; t < 9; t++) {
                double acc = 0, mag = 0;
                for (size_t n = 0; n < M; n++)
                    for (size_t p = 0; p < P; p++) {
                        const long q = tap(k, p / k->w, p % k->w, t / 3, t % 3);
                        if (q < 0) continue;
                        const double v = (double)d->dy[(n * CO + oc) * P + p] * d->x[(n * C + c) * P + (size_t)q];
                        acc += v, mag += fabs(v);
                    }
                note(&worst[0], o->dw[(oc * C + c) * 9 + t], acc, mag, (double)(M * P + (size_t)threads + 1));
            }
        double acc = 0, mag = 0;
        for (size_t n = 0; n < M; n++)
            for (size_t p = 0; p < P; p++) acc += d->dy[(n * CO + oc) * P + p], mag += fabs(d->dy[(n * CO + oc) * P + p]);
        if (!k->no_bias) note(&worst[1], o->db[oc], acc, mag, (double)(M * P + (size_t)threads + 1));
    }
}

static bool same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* Every gradient and output within its bound on 1, 2 and 3 threads; where the products are bf16's, each sample's
 * y and dx the bits of the first run's, also alone in a micro-batch of 1; dW and db the same bits in a second run
 * on the same threads. Once
 * more with bgemm's portable micro-kernel (bgemm_force_portable), which the layer's products take where they
 * go through bgemm. */
static void matches_reference_and_bits(void **state) {
    (void)state;
    const size_t n_cases = sizeof cases / sizeof cases[0];
    const bool bits = kernel_bf16_products_pay();
    for (size_t pass = 0; pass < 2 * n_cases; pass++) {
        const size_t ci = pass % n_cases;
        bgemm_force_portable(pass >= n_cases);
        const bg_case *k = &cases[ci];
        bg_data d = data_of(k, true, 100 + ci);
        bg_out first = run(k, &d, 0, M, 1);
        for (int threads = 1; threads <= 3; threads++) {
            bg_out o = run(k, &d, 0, M, threads), again = run(k, &d, 0, M, threads);
            double w[4] = {0};
            check_y_dx(k, &d, &o, false, w);
            check_dw_db(k, &d, &o, threads, w + 2);
            printf("# c %zu co %zu %zux%zu, %d threads%s: worst error / bound: y %.3f dx %.3f dW %.3f db %.3f\n",
                   k->c, k->co, k->h, k->w, threads, pass >= n_cases ? ", bgemm portable" : "", w[0],
                   w[1], w[2], w[3]);
            for (int i = 0; i < 4; i++) assert_true(w[i] <= 1.0);
            assert_true(same_floats(o.dw, again.dw, d.wn) && same_floats(o.db, again.db, k->co));
            assert_true(!bits || (same_floats(o.y, first.y, M * d.yn) && same_floats(o.dx, first.dx, M * d.xn)));
            for (size_t n = 0; bits && n < M; n++) {
                bg_out one = run(k, &d, n, 1, threads);
                assert_true(same_floats(one.y, first.y + n * d.yn, d.yn));
                assert_true(same_floats(one.dx, first.dx + n * d.xn, d.xn));
                out_free(&one);
            }
            out_free(&o);
            out_free(&again);
        }
        out_free(&first);
        data_free(&d);
    }
    bgemm_force_portable(false);
}

/* Inputs that are not bfloat16 values: every x and dy 1 + 2^-10 (bfloat16 rounds it to 1), every weight
 * positive, so that the float32 values' sums exceed the rounded ones' by 2^-10 of their magnitude, 16 times the
 * bound of either. The forward and the input gradient then match the rounded operands' sums where the CPU's bf16
 * products pay (the path this layer takes there multiplies bfloat16 values), else the float32 values'. */
static void products_are_the_plans(void **state) {
    (void)state;
    const bg_case *k = &cases[0];
    bg_data d = data_of(k, true, 7);
    const float v = 1.0f + 0x1p-10f;
    for (size_t i = 0; i < M * d.xn; i++) d.x[i] = v;
    for (size_t i = 0; i < M * d.yn; i++) d.dy[i] = v;
    for (size_t i = 0; i < d.wn; i++) d.w[i] = fabsf(d.w[i]) + 0.25f;
    for (size_t i = 0; i < k->co; i++) d.b[i] = 0;
    const bool bf16_products = kernel_bf16_products_pay();
    bg_out o = run(k, &d, 0, M, 2);
    double rounded[2] = {0}, plain[2] = {0};
    check_y_dx(k, &d, &o, true, rounded);
    check_y_dx(k, &d, &o, false, plain);
    printf("# %s products expected (%s): error / bound against rounded operands y %.3f dx %.3f, against float32 "
           "ones y %.3f dx %.3f\n", bf16_products ? "bf16" : "float32", kernel_isa_name(kernel_isa_now()),
           rounded[0], rounded[1], plain[0], plain[1]);
    const double *match = bf16_products ? rounded : plain, *miss = bf16_products ? plain : rounded;
    for (int i = 0; i < 2; i++) {
        assert_true(match[i] <= 1.0);
        assert_true(miss[i] > 1.0);
    }
    out_free(&o);
    data_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_reference_and_bits),
        cmocka_unit_test(products_are_the_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
