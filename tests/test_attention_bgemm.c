/* Attention whose products are bgemm's (a plan with OP_PRODUCT_BGEMM: bf16 on a CPU where vdpbf16ps pays):
 * forward and backward against a float64 reference within a bound derived from the roundings bgemm adds, the
 * AVX512_BF16 kernel against its portable twin bit for bit, backward's rebuilt probabilities equal to forward's,
 * and the same bits on any thread count.
 *
 * The inputs and the output gradient hold bfloat16 values, as in a bf16 plan, so bgemm's packing rounds only the
 * probabilities P (in P V and P^T dO) and dS (in dS K and dS^T Q); its products of two bfloat16 values are exact
 * and its sums float32. Rounding to nearest moves each such operand by at most 2^-9 of itself, so an element
 * differs from the exact one by at most 2^-9 times the sum of its terms' magnitudes, plus float32's sums (a few
 * 2^-24 of the same sum, and the float32 softmax's error carried through, whose cancellations in dS scale with
 * the largest magnitude of the tensor). The bound allows 2^-8 of the terms' magnitudes and 2^-14 of the largest. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/isa.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "snug.h"

/* Binds attention over (T, 3C) for m samples with its products through bgemm and the workspace a plan of that
 * product reserves; inputs (scaled by `spread` for a peakier softmax) and the output weighting in bfloat16. */
static void bind(op_fixture *f, size_t T, size_t C, size_t H, bool causal, size_t m, int threads, float spread,
                 uint64_t seed) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", T * 3 * C, 1, 1);
    g->tensors[x].shape = (snug_shape){.rank = 2, .dims = {T, 3 * C}};
    snug_self_attention(g, "attn", x, H, causal);
    op_fixture_init(f, g, 1, m, threads, FILL_PLAIN, seed);
    for (size_t i = 0; i < m * T * 3 * C; i++) f->x[0][i] = bf16_round(spread * f->x[0][i]);
    for (size_t i = 0; i < m * T * C; i++) f->r[i] = bf16_round(f->r[i]);
    const plan_variant v = {.bf16 = true, .product = OP_PRODUCT_BGEMM};
    free(f->work);
    f->work = op_test_xmalloc(plan_op_workspace(f->node, &v, m, threads));
    f->c.work = f->work;
    f->c.product = OP_PRODUCT_BGEMM;
}

typedef struct reference {
    double *out, *out_mag;   /* (T, C): the output and the sum of its terms' magnitudes */
    double *dqkv, *dqkv_mag; /* (T, 3C) */
} reference;

/* One head's probabilities (T, T) in double, rows over all keys (masked ones 0). */
static void ref_probs(const float *qkv, size_t T, size_t C, size_t D, size_t h, bool causal, double *p) {
    for (size_t t = 0; t < T; t++) {
        double mx = -INFINITY, sum = 0.0, *row = p + t * T;
        for (size_t s = 0; s < T; s++) {
            double dot = 0.0;
            for (size_t d = 0; d < D; d++) dot += (double)qkv[t * 3 * C + h * D + d] * qkv[s * 3 * C + C + h * D + d];
            row[s] = causal && s > t ? -INFINITY : dot / sqrt((double)D);
            mx = row[s] > mx ? row[s] : mx;
        }
        for (size_t s = 0; s < T; s++) sum += row[s] = exp(row[s] - mx);
        for (size_t s = 0; s < T; s++) row[s] /= sum;
    }
}

/* dS (T, T) of one head: P (dP - rowsum(P dP)) / sqrt(D), dP = dO V^T. */
static void ref_ds(const float *qkv, const float *dout, const double *p, size_t T, size_t C, size_t D, size_t h,
                   double *ds) {
    for (size_t t = 0; t < T; t++) {
        double dot = 0.0;
        for (size_t s = 0; s < T; s++) {
            double dp = 0.0;
            for (size_t d = 0; d < D; d++) dp += (double)dout[t * C + h * D + d] * qkv[s * 3 * C + 2 * C + h * D + d];
            ds[t * T + s] = dp;
            dot += p[t * T + s] * dp;
        }
        for (size_t s = 0; s < T; s++) ds[t * T + s] = p[t * T + s] * (ds[t * T + s] - dot) / sqrt((double)D);
    }
}

/* Every term x of an element adds x to the value and |x| to the magnitude. */
static void add_term(double *value, double *mag, double x) { *value += x, *mag += fabs(x); }

/* The reference of one sample: qkv (T, 3C), dout (T, C). */
static void reference_of(reference *r, const float *qkv, const float *dout, size_t T, size_t C, size_t H,
                         bool causal) {
    const size_t D = C / H;
    double *p = op_test_xmalloc(T * T * sizeof *p), *ds = op_test_xmalloc(T * T * sizeof *ds);
    memset(r->out, 0, T * C * sizeof *r->out), memset(r->out_mag, 0, T * C * sizeof *r->out_mag);
    memset(r->dqkv, 0, T * 3 * C * sizeof *r->dqkv), memset(r->dqkv_mag, 0, T * 3 * C * sizeof *r->dqkv_mag);
    for (size_t h = 0; h < H; h++) {
        ref_probs(qkv, T, C, D, h, causal, p);
        ref_ds(qkv, dout, p, T, C, D, h, ds);
        for (size_t t = 0; t < T; t++)
            for (size_t s = 0; s < T; s++)
                for (size_t d = 0; d < D; d++) {
                    const size_t hd = h * D + d, ts = t * T + s, tq = t * 3 * C + hd, sq = s * 3 * C + hd;
                    add_term(&r->out[t * C + hd], &r->out_mag[t * C + hd], p[ts] * qkv[sq + 2 * C]);
                    add_term(&r->dqkv[tq], &r->dqkv_mag[tq], ds[ts] * qkv[sq + C]);
                    add_term(&r->dqkv[sq + C], &r->dqkv_mag[sq + C], ds[ts] * qkv[tq]);
                    add_term(&r->dqkv[sq + 2 * C], &r->dqkv_mag[sq + 2 * C], p[ts] * dout[t * C + hd]);
                }
    }
    free(p), free(ds);
}

static void expect_within(const float *got, const double *want, const double *mag, size_t n, const char *what) {
    double worst = 0.0, largest = 0.0;
    for (size_t i = 0; i < n; i++) largest = fmax(largest, mag[i]);
    /* float32's sums and softmax carried through: a few 2^-24 of the largest magnitude in the tensor (dS's rows
     * cancel, P dP's row sum against each dP), allowed as 2^-14 of it */
    const double floor_error = ldexp(largest, -14);
    for (size_t i = 0; i < n; i++) {
        const double bound = ldexp(mag[i], -8) + floor_error, err = fabs(got[i] - want[i]);
        worst = fmax(worst, err / bound);
        if (err > bound) fail_msg("%s[%zu]: got %.8g, want %.8g (bound %.3g)", what, i, got[i], want[i], bound);
    }
    printf("# %s: worst error %.2f of the bound\n", what, worst);
}

static void within_bound_of_float64(void **state) {
    (void)state;
    static const struct {
        size_t T, C, H;
        bool causal;
        float spread;
    } cases[] = {{40, 48, 4, true, 2.0f}, {33, 48, 3, false, 1.0f}, {70, 64, 2, true, 3.0f}, {5, 6, 3, true, 2.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t T = cases[k].T, C = cases[k].C, H = cases[k].H, m = 2;
        op_fixture f;
        bind(&f, T, C, H, cases[k].causal, m, omp_get_max_threads(), cases[k].spread, 700 + k);
        op_fixture_analytic(&f);
        reference r = {op_test_xmalloc(T * C * sizeof(double)), op_test_xmalloc(T * C * sizeof(double)),
                       op_test_xmalloc(T * 3 * C * sizeof(double)), op_test_xmalloc(T * 3 * C * sizeof(double))};
        for (size_t n = 0; n < m; n++) {
            reference_of(&r, f.x[0] + n * T * 3 * C, f.r + n * T * C, T, C, H, cases[k].causal);
            expect_within(f.y + n * T * C, r.out, r.out_mag, T * C, "output");
            expect_within(f.dx[0] + n * T * 3 * C, r.dqkv, r.dqkv_mag, T * 3 * C, "input gradient");
        }
        free(r.out), free(r.out_mag), free(r.dqkv), free(r.dqkv_mag);
        op_fixture_free(&f);
    }
}

/* The AVX512_BF16 kernel and the portable twin give the same bits (where the CPU has it; else both runs are
 * the twin; on an AMX CPU the AVX512_BF16 kernel under a cap), and one thread and several the same bits on the
 * kernel this CPU runs: every element is one chain whatever runs it. */
static void same_bits_portable_and_threads(void **state) {
    (void)state;
    const kernel_isa top = kernel_isa_now();
    for (int causal = 0; causal <= 1; causal++) {
        op_fixture a, b, c, d;
        kernel_isa_cap(top < KERNEL_ISA_AMX_BF16 ? top : KERNEL_ISA_AVX512_BF16); /* the tile the twin models */
        bind(&a, 45, 64, 2, causal, 3, omp_get_max_threads(), 2.0f, 720 + (uint64_t)causal);
        bind(&b, 45, 64, 2, causal, 3, omp_get_max_threads(), 2.0f, 720 + (uint64_t)causal);
        op_fixture_analytic(&a);
        bgemm_force_portable(true);
        op_fixture_analytic(&b);
        bgemm_force_portable(false);
        op_expect_same_results(&a, &b);
        kernel_isa_cap(top);
        bind(&c, 45, 64, 2, causal, 3, 1, 2.0f, 720 + (uint64_t)causal);
        bind(&d, 45, 64, 2, causal, 3, omp_get_max_threads(), 2.0f, 720 + (uint64_t)causal);
        op_fixture_analytic(&c);
        op_fixture_analytic(&d);
        op_expect_same_results(&c, &d);
        op_fixture_free(&a), op_fixture_free(&b), op_fixture_free(&c), op_fixture_free(&d);
    }
}

/* Backward rebuilds P through the same products and must see forward's P bit for bit: one head with V and dO
 * the identity makes output row t P's row t rounded as P V rounds it (every other term an exact 0), and dV's
 * column t the same (dV = P^T dO, the same rounding of P): both must match bitwise. */
static void backward_rebuilds_forward_probs(void **state) {
    (void)state;
    const size_t T = 40, C = 48;
    op_fixture f;
    bind(&f, T, C, 1, true, 2, omp_get_max_threads(), 3.0f, 730);
    for (size_t n = 0; n < 2; n++)
        for (size_t t = 0; t < T; t++)
            for (size_t d = 0; d < C; d++) {
                f.x[0][(n * T + t) * 3 * C + 2 * C + d] = t == d ? 1.0f : 0.0f;
                f.r[(n * T + t) * C + d] = t == d ? 1.0f : 0.0f;
            }
    op_fixture_analytic(&f);
    for (size_t n = 0; n < 2; n++)
        for (size_t t = 0; t < T; t++)
            for (size_t s = 0; s < T; s++) {
                const float fwd = f.y[(n * T + t) * C + s], bwd = f.dx[0][(n * T + s) * 3 * C + 2 * C + t];
                if (memcmp(&fwd, &bwd, sizeof fwd) != 0) fail_msg("P[%zu][%zu]: %.9g vs %.9g", t, s, fwd, bwd);
            }
    op_fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(within_bound_of_float64),
        cmocka_unit_test(same_bits_portable_and_threads),
        cmocka_unit_test(backward_rebuilds_forward_probs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
