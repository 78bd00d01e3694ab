/* Optimizers, schedules and clipping against expected values computed here, in double, straight from the
 * PyTorch formulas (torch.optim.SGD, torch.optim.AdamW, clip_grad_norm_), independently of src/optim's loops. */
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

#include "optim/optim.h"
#include "snug.h"

#define NSMALL 4
#define NSTEPS 3

static const float p_init[NSMALL] = {0.5f, -1.25f, 2.0f, 0.0f};
/* One gradient per step, chosen so that signs flip between steps (momentum and moments then matter). */
static const float g_seq[NSTEPS][NSMALL] = {
    {0.25f, -0.5f, 1.0f, 0.125f},
    {-0.75f, 0.5f, 0.25f, 0.375f},
    {0.5f, 1.5f, -0.5f, -0.25f},
};

static void check_close(double got, double want, double rtol, double atol, const char *what, int i) {
    if (fabs(got - want) <= atol + rtol * fabs(want)) return;
    print_error("%s[%d]: got %.9g, want %.9g (diff %.3g)\n", what, i, got, want, fabs(got - want));
    fail();
}

static snug_optim_config sgd_config(float lr, float momentum, bool nesterov, float wd) {
    snug_optim_config c = {0};
    c.kind = SNUG_OPTIM_SGD;
    c.lr = lr;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    return c;
}

static snug_optim_config adamw_config(float lr, float wd) {
    snug_optim_config c = {0};
    c.kind = SNUG_OPTIM_ADAMW;
    c.lr = lr;
    c.weight_decay = wd;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.eps = 1e-8f;
    return c;
}

/* Runs NSTEPS of the implementation on p_init / g_seq; p and state are the results. */
static void run_small(const snug_optim_config *cfg, float p[NSMALL], float *state) {
    optim_state st = {.cfg = *cfg, .state = state, .n = NSMALL, .t = 0};
    memcpy(p, p_init, sizeof p_init);
    for (int s = 0; s < NSTEPS; s++) optim_step(&st, p, g_seq[s], cfg->lr);
    assert_int_equal(st.t, NSTEPS);
}

/* torch.optim.SGD, literally: the buffer is created as a copy of the gradient on the first step. */
static void ref_sgd(const snug_optim_config *c, double p[NSMALL], double buf[NSMALL]) {
    for (int i = 0; i < NSMALL; i++) p[i] = p_init[i];
    for (int s = 0; s < NSTEPS; s++) {
        for (int i = 0; i < NSMALL; i++) {
            double d = (double)g_seq[s][i] + (double)c->weight_decay * p[i];
            if (c->momentum != 0.0f) {
                buf[i] = s == 0 ? d : (double)c->momentum * buf[i] + d;
                d = c->nesterov ? d + (double)c->momentum * buf[i] : buf[i];
            }
            p[i] -= (double)c->lr * d;
        }
    }
}

static void check_sgd(const snug_optim_config *cfg) {
    float p[NSMALL], state[NSMALL] = {0};
    run_small(cfg, p, cfg->momentum != 0.0f ? state : NULL);
    double pr[NSMALL], br[NSMALL];
    ref_sgd(cfg, pr, br);
    for (int i = 0; i < NSMALL; i++) {
        check_close(p[i], pr[i], 1e-6, 1e-6, "param", i);
        if (cfg->momentum != 0.0f) check_close(state[i], br[i], 1e-6, 1e-6, "momentum buffer", i);
    }
}

static void test_state_slots(void **unused) {
    (void)unused;
    snug_optim_config plain = sgd_config(0.1f, 0.0f, false, 0.0f);
    snug_optim_config mom = sgd_config(0.1f, 0.9f, false, 0.0f);
    snug_optim_config adam = adamw_config(1e-3f, 0.0f);
    assert_int_equal(optim_state_slots(&plain), 0);
    assert_int_equal(optim_state_slots(&mom), 1);
    assert_int_equal(optim_state_slots(&adam), 2);
}

static void test_sgd_plain(void **unused) {
    (void)unused;
    snug_optim_config c = sgd_config(0.1f, 0.0f, false, 0.0f);
    check_sgd(&c);
    /* One step by hand: 0.5 - 0.1 * 0.25 = 0.475; -1.25 + 0.1 * 0.5 = -1.2. */
    float p[NSMALL];
    memcpy(p, p_init, sizeof p);
    optim_state st = {.cfg = c, .state = NULL, .n = NSMALL, .t = 0};
    optim_step(&st, p, g_seq[0], c.lr);
    check_close(p[0], 0.475, 1e-6, 0.0, "param", 0);
    check_close(p[1], -1.2, 1e-6, 0.0, "param", 1);
}

static void test_sgd_momentum(void **unused) {
    (void)unused;
    snug_optim_config c = sgd_config(0.1f, 0.9f, false, 0.0f);
    check_sgd(&c);
}

static void test_sgd_nesterov(void **unused) {
    (void)unused;
    snug_optim_config c = sgd_config(0.1f, 0.9f, true, 0.0f);
    check_sgd(&c);
}

static void test_sgd_weight_decay(void **unused) {
    (void)unused;
    snug_optim_config plain = sgd_config(0.1f, 0.0f, false, 0.01f);
    snug_optim_config nest = sgd_config(0.05f, 0.9f, true, 5e-4f);
    check_sgd(&plain);
    check_sgd(&nest);
}

/* torch.optim.AdamW, from the textbook form (m_hat, v_hat), not PyTorch's rearrangement. */
static void ref_adamw(const snug_optim_config *c, double p[NSMALL], double m[NSMALL], double v[NSMALL]) {
    const double b1 = c->beta1, b2 = c->beta2, lr = c->lr;
    for (int i = 0; i < NSMALL; i++) { p[i] = p_init[i]; m[i] = 0.0; v[i] = 0.0; }
    for (int s = 0; s < NSTEPS; s++) {
        const double t = s + 1;
        for (int i = 0; i < NSMALL; i++) {
            const double g = g_seq[s][i];
            p[i] *= 1.0 - lr * (double)c->weight_decay;
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            const double mh = m[i] / (1.0 - pow(b1, t)), vh = v[i] / (1.0 - pow(b2, t));
            p[i] -= lr * mh / (sqrt(vh) + (double)c->eps);
        }
    }
}

static void check_adamw(const snug_optim_config *cfg) {
    float p[NSMALL], state[2 * NSMALL] = {0};
    run_small(cfg, p, state);
    double pr[NSMALL], mr[NSMALL], vr[NSMALL];
    ref_adamw(cfg, pr, mr, vr);
    for (int i = 0; i < NSMALL; i++) {
        check_close(p[i], pr[i], 1e-6, 1e-6, "param", i);
        check_close(state[i], mr[i], 1e-5, 1e-7, "m", i);
        check_close(state[NSMALL + i], vr[i], 1e-5, 1e-9, "v", i);
    }
}

static void test_adamw_first_step(void **unused) {
    (void)unused;
    /* With bias correction, step 1 moves every parameter by lr * g / (|g| + eps), i.e. lr against the sign of
     * its gradient: 0.5 - 0.01 = 0.49, -1.25 + 0.01 = -1.24. Without the correction it would move by ~lr/sqrt(10)
     * (m = 0.1 g, sqrt(v) = 0.0316 |g|). */
    snug_optim_config c = adamw_config(0.01f, 0.0f);
    float p[NSMALL], state[2 * NSMALL] = {0};
    memcpy(p, p_init, sizeof p);
    optim_state st = {.cfg = c, .state = state, .n = NSMALL, .t = 0};
    optim_step(&st, p, g_seq[0], c.lr);
    check_close(p[0], 0.49, 1e-6, 0.0, "param", 0);
    check_close(p[1], -1.24, 1e-6, 0.0, "param", 1);
    check_close(p[2], 1.99, 1e-6, 0.0, "param", 2);
    check_close(p[3], -0.01, 1e-5, 0.0, "param", 3);
}

static void test_adamw_no_decay(void **unused) {
    (void)unused;
    snug_optim_config c = adamw_config(0.01f, 0.0f);
    check_adamw(&c);
    /* b1 < 0.5: PyTorch's lerp takes its other form (end - (end - self) * (1 - w)). */
    c.beta1 = 0.3f;
    c.beta2 = 0.9f;
    check_adamw(&c);
}

static void test_adamw_weight_decay(void **unused) {
    (void)unused;
    snug_optim_config c = adamw_config(0.01f, 0.1f);
    check_adamw(&c);
    /* Decoupled decay: a zero gradient still shrinks p by (1 - lr * wd) per step, and moves nothing else. */
    float p[1] = {2.0f}, g[1] = {0.0f}, state[2] = {0};
    optim_state st = {.cfg = c, .state = state, .n = 1, .t = 0};
    for (int s = 0; s < NSTEPS; s++) optim_step(&st, p, g, c.lr);
    check_close(p[0], 2.0 * pow(1.0 - 0.01 * 0.1, NSTEPS), 1e-6, 0.0, "param", 0);
}

/* ---- large n: the parallel loops against a scalar loop, including the odd tail ---- */

#define NLARGE ((size_t)1000003)

static float pseudo(size_t i, unsigned salt) {
    uint32_t x = (uint32_t)i * 2654435761u ^ (salt * 40503u + 1u);
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return ((float)(x & 0xffff) / 65535.0f) * 2.0f - 1.0f;  /* [-1, 1] */
}

static void check_large(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        const double tol = 1e-6 * fmax(fabs((double)want[i]), 1.0);
        if (fabs((double)got[i] - (double)want[i]) > tol) {
            print_error("%s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
            fail();
        }
    }
}

static void scalar_sgd(const snug_optim_config *c, float *p, const float *g, float *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + c->weight_decay * p[i];
        buf[i] = c->momentum * buf[i] + d;
        d = c->nesterov ? d + c->momentum * buf[i] : buf[i];
        p[i] -= c->lr * d;
    }
}

static void scalar_adamw(const snug_optim_config *c, float *p, const float *g, float *m, float *v, size_t n,
                         long t) {
    const double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        p[i] *= 1.0f - c->lr * c->weight_decay;
        m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * g[i];
        v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * g[i] * g[i];
        const float mh = (float)(m[i] / bc1), vh = (float)(v[i] / bc2);
        p[i] -= c->lr * mh / (sqrtf(vh) + c->eps);
    }
}

static void run_large(const snug_optim_config *c) {
    const size_t n = NLARGE;
    const int slots = optim_state_slots(c);
    float *p = malloc(n * sizeof *p), *pr = malloc(n * sizeof *pr), *g = malloc(n * sizeof *g);
    float *s = calloc((size_t)slots * n, sizeof *s), *sr = calloc((size_t)slots * n, sizeof *sr);
    assert_non_null(p); assert_non_null(pr); assert_non_null(g); assert_non_null(s); assert_non_null(sr);
    for (size_t i = 0; i < n; i++) p[i] = pr[i] = pseudo(i, 1);
    optim_state st = {.cfg = *c, .state = s, .n = n, .t = 0};
    for (unsigned step = 1; step <= NSTEPS; step++) {
        for (size_t i = 0; i < n; i++) g[i] = pseudo(i, 10 + step) * (float)step;
        optim_step(&st, p, g, c->lr);
        if (c->kind == SNUG_OPTIM_SGD) scalar_sgd(c, pr, g, sr, n);
        else scalar_adamw(c, pr, g, sr, sr + n, n, (long)step);
    }
    check_large(p, pr, n, "param");
    check_large(s, sr, (size_t)slots * n, "state");
    free(p); free(pr); free(g); free(s); free(sr);
}

static void test_large_sgd(void **unused) {
    (void)unused;
    snug_optim_config c = sgd_config(0.05f, 0.9f, true, 1e-3f);
    run_large(&c);
}

static void test_large_adamw(void **unused) {
    (void)unused;
    snug_optim_config c = adamw_config(1e-3f, 0.05f);
    run_large(&c);
}

/* ---- schedules ---- */

static snug_schedule_config cosine(long warmup, float min_ratio) {
    snug_schedule_config s = {0};
    s.kind = SNUG_SCHEDULE_COSINE;
    s.warmup_steps = warmup;
    s.min_lr_ratio = min_ratio;
    return s;
}

static void test_schedule_constant(void **unused) {
    (void)unused;
    snug_schedule_config s = {0};
    s.kind = SNUG_SCHEDULE_CONSTANT;
    s.warmup_steps = 10;  /* ignored by the constant schedule */
    for (long step = 0; step < 50; step += 7)
        check_close(snug_schedule_lr(&s, 0.1f, 64, step, 50), 0.1, 1e-7, 0.0, "lr", (int)step);
}

static void test_schedule_warmup(void **unused) {
    (void)unused;
    snug_schedule_config s = cosine(10, 0.1f);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 0, 110), 0.01, 1e-6, 0.0, "lr at warmup start", 0);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 4, 110), 0.05, 1e-6, 0.0, "lr mid warmup", 4);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 9, 110), 0.1, 1e-6, 0.0, "lr at warmup end", 9);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 10, 110), 0.1, 1e-6, 0.0, "lr at cosine start", 10);
}

static void test_schedule_cosine(void **unused) {
    (void)unused;
    const double peak = 0.1, min = peak * 0.1;
    snug_schedule_config s = cosine(10, 0.1f);
    /* Halfway through the 100 decay steps the cosine term is 0: the mean of peak and min. */
    check_close(snug_schedule_lr(&s, 0.1f, 64, 60, 110), (peak + min) / 2, 1e-6, 0.0, "lr mid cosine", 60);
    /* A quarter of the way: 0.5 * (1 + cos(pi/4)). */
    check_close(snug_schedule_lr(&s, 0.1f, 64, 35, 110), min + (peak - min) * 0.5 * (1 + sqrt(0.5)), 1e-6, 0.0,
                "lr quarter cosine", 35);
    /* The last step (109) is 99/100 of the way; min is reached at step 110, one past the end, and held. */
    check_close(snug_schedule_lr(&s, 0.1f, 64, 109, 110),
                min + (peak - min) * 0.5 * (1 + cos(3.14159265358979323846 * 0.99)), 1e-6, 0.0, "lr last", 109);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 110, 110), min, 1e-6, 0.0, "lr at end", 110);
    check_close(snug_schedule_lr(&s, 0.1f, 64, 500, 110), min, 1e-6, 0.0, "lr past end", 500);
    /* No warmup: the first step is the peak. */
    snug_schedule_config s0 = cosine(0, 0.0f);
    check_close(snug_schedule_lr(&s0, 0.1f, 64, 0, 100), peak, 1e-6, 0.0, "lr no warmup", 0);
    check_close(snug_schedule_lr(&s0, 0.1f, 64, 50, 100), peak / 2, 1e-6, 0.0, "lr no warmup mid", 50);
}

static void test_schedule_linear_scaling(void **unused) {
    (void)unused;
    snug_schedule_config s = cosine(10, 0.0f);
    s.linear_scaling = true;
    s.reference_batch = 0;  /* means 256 */
    /* batch 1024 = 4x the reference: peak 0.4; warmup end reaches it, first step is a tenth. */
    check_close(snug_schedule_lr(&s, 0.1f, 1024, 0, 110), 0.04, 1e-6, 0.0, "scaled warmup start", 0);
    check_close(snug_schedule_lr(&s, 0.1f, 1024, 9, 110), 0.4, 1e-6, 0.0, "scaled warmup end", 9);
    check_close(snug_schedule_lr(&s, 0.1f, 1024, 60, 110), 0.2, 1e-6, 0.0, "scaled mid cosine", 60);
    s.reference_batch = 128;
    s.kind = SNUG_SCHEDULE_CONSTANT;
    check_close(snug_schedule_lr(&s, 0.1f, 64, 3, 110), 0.05, 1e-6, 0.0, "scaled constant", 3);
}

/* ---- global norm and clipping ---- */

static void test_norm_known(void **unused) {
    (void)unused;
    const float g[2] = {3.0f, 4.0f};
    assert_true(grad_global_norm(g, 2, NULL, 0) == 5.0);
    assert_true(grad_global_norm(g, 0, NULL, 0) == 0.0);
    const float h[5] = {1.0f, -2.0f, 2.0f, 0.0f, -4.0f};  /* 1 + 4 + 4 + 16 = 25 */
    assert_true(grad_global_norm(h, 5, NULL, 0) == 5.0);
}

static void test_norm_nonfinite(void **unused) {
    (void)unused;
    float g[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
    g[2] = NAN;
    assert_true(isnan(grad_global_norm(g, 5, NULL, 0)));
    g[2] = -INFINITY;
    assert_false(isfinite(grad_global_norm(g, 5, NULL, 0)));
    /* Far apart in a large array, on the parallel path: the last element, then one in the middle. */
    float *big = calloc(NLARGE, sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < NLARGE; i++) big[i] = pseudo(i, 3);
    assert_true(isfinite(grad_global_norm(big, NLARGE, NULL, 0)));
    big[NLARGE - 1] = NAN;
    assert_true(isnan(grad_global_norm(big, NLARGE, NULL, 0)));
    big[NLARGE - 1] = 0.0f;
    big[NLARGE / 2] = INFINITY;
    assert_false(isfinite(grad_global_norm(big, NLARGE, NULL, 0)));
    free(big);
}

static void test_norm_large(void **unused) {
    (void)unused;
    float *g = malloc(NLARGE * sizeof *g);
    assert_non_null(g);
    double sum = 0.0;
    for (size_t i = 0; i < NLARGE; i++) {
        g[i] = pseudo(i, 7);
        sum += (double)g[i] * (double)g[i];
    }
    check_close(grad_global_norm(g, NLARGE, NULL, 0), sqrt(sum), 1e-12, 0.0, "norm", 0);
    /* The same bits for any thread count, so a clip factor does not depend on the machine's core count. */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const double one = grad_global_norm(g, NLARGE, NULL, 0);
    omp_set_num_threads(3);
    const double three = grad_global_norm(g, NLARGE, NULL, 0);
    omp_set_num_threads(threads);
    assert_memory_equal(&one, &three, sizeof one);
    free(g);
}

static void test_clip_above(void **unused) {
    (void)unused;
    float g[2] = {3.0f, 4.0f};
    const double norm = grad_global_norm(g, 2, NULL, 0);
    const float f = grad_clip(g, 2, norm, 1.0f);
    const double want = 1.0 / (5.0 + 1e-6);
    check_close(f, want, 1e-7, 0.0, "factor", 0);
    check_close(g[0], 3.0 * want, 1e-7, 0.0, "clipped grad", 0);
    check_close(g[1], 4.0 * want, 1e-7, 0.0, "clipped grad", 1);
    check_close(grad_global_norm(g, 2, NULL, 0), 1.0, 1e-6, 0.0, "norm after clip", 0);
    /* Large n: every element, the tail included, gets the factor. */
    float *big = malloc(NLARGE * sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < NLARGE; i++) big[i] = pseudo(i, 5);
    const double bn = grad_global_norm(big, NLARGE, NULL, 0);
    const float bf = grad_clip(big, NLARGE, bn, 2.0f);
    check_close(bf, 2.0 / (bn + 1e-6), 1e-7, 0.0, "factor", 1);
    for (size_t i = 0; i < NLARGE; i += 1) {
        if (big[i] != pseudo(i, 5) * bf) {
            print_error("clipped big[%zu] = %.9g, want %.9g\n", i, big[i], pseudo(i, 5) * bf);
            fail();
        }
    }
    free(big);
}

static void test_clip_below(void **unused) {
    (void)unused;
    float g[2] = {3.0f, 4.0f};
    assert_true(grad_clip(g, 2, grad_global_norm(g, 2, NULL, 0), 10.0f) == 1.0f);
    assert_true(g[0] == 3.0f && g[1] == 4.0f);
    /* Exactly at the threshold the factor is 5 / (5 + 1e-6) < 1, as in PyTorch. */
    const float f = grad_clip(g, 2, 5.0, 5.0f);
    check_close(f, 5.0 / (5.0 + 1e-6), 1e-7, 0.0, "factor at threshold", 0);
    /* Off (max_norm 0) and non-finite norms leave the gradients alone. */
    float h[2] = {3.0f, 4.0f};
    assert_true(grad_clip(h, 2, 5.0, 0.0f) == 1.0f);
    assert_true(grad_clip(h, 2, NAN, 1.0f) == 1.0f);
    assert_true(grad_clip(h, 2, INFINITY, 1.0f) == 1.0f);
    assert_true(h[0] == 3.0f && h[1] == 4.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_slots),
        cmocka_unit_test(test_sgd_plain),
        cmocka_unit_test(test_sgd_momentum),
        cmocka_unit_test(test_sgd_nesterov),
        cmocka_unit_test(test_sgd_weight_decay),
        cmocka_unit_test(test_adamw_first_step),
        cmocka_unit_test(test_adamw_no_decay),
        cmocka_unit_test(test_adamw_weight_decay),
        cmocka_unit_test(test_large_sgd),
        cmocka_unit_test(test_large_adamw),
        cmocka_unit_test(test_schedule_constant),
        cmocka_unit_test(test_schedule_warmup),
        cmocka_unit_test(test_schedule_cosine),
        cmocka_unit_test(test_schedule_linear_scaling),
        cmocka_unit_test(test_norm_known),
        cmocka_unit_test(test_norm_nonfinite),
        cmocka_unit_test(test_norm_large),
        cmocka_unit_test(test_clip_above),
        cmocka_unit_test(test_clip_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
