/* Binding one node by hand and finite-difference checks: see op_test_util.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_test_util.h"
#include "kernels/bf16.h"
#include "plan/plan.h"
#include "snug.h"

uint64_t op_test_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void op_test_fill_sym(float *v, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((double)(op_test_rng_next(s) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

op_product op_test_product(void) { return plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO).product; }

size_t op_test_workspace(const graph_node *n, size_t m, int threads) {
    const plan_variant v = {.product = op_test_product()};
    return plan_op_workspace(n, &v, m, threads);
}

void *op_test_xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

float *op_test_bf16_filled(size_t n, uint64_t *s) {
    float *v = op_test_xmalloc(n * sizeof(float));
    op_test_fill_sym(v, n, s);
    bf16_round_floats(v, v, n);
    return v;
}

static void fill_input(float *x, size_t n, fill_kind kind, uint64_t *s) {
    if (kind == FILL_DISTINCT) {
        size_t *perm = op_test_xmalloc(n * sizeof *perm);
        for (size_t i = 0; i < n; i++) perm[i] = i;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(op_test_rng_next(s) % i), t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) x[i] = ((float)perm[i] - (float)n / 2) * 0.05f;
        free(perm);
        return;
    }
    op_test_fill_sym(x, n, s);
    if (kind == FILL_AWAY_ZERO)
        for (size_t i = 0; i < n; i++) x[i] = x[i] < 0 ? x[i] * 0.9f - 0.1f : x[i] * 0.9f + 0.1f;
}

/* Input i gets its own buffers, or those of the first earlier input that is the same tensor. */
static void bind_inputs(op_fixture *f, fill_kind kind, uint64_t *s) {
    f->n_in = f->node->n_inputs;
    for (int i = 0; i < f->n_in; i++) {
        f->owner[i] = i;
        for (int j = 0; j < i; j++)
            if (f->node->inputs[j] == f->node->inputs[i]) {
                f->owner[i] = j;
                break;
            }
        f->in_n[i] = f->g->tensors[f->node->inputs[i]].numel;
        if (f->owner[i] == i) {
            f->x[i] = op_test_xmalloc(f->m_plan * f->in_n[i] * sizeof(float));
            f->dx[i] = op_test_xmalloc(f->m_plan * f->in_n[i] * sizeof(float));
            fill_input(f->x[i], f->m_plan * f->in_n[i], kind, s);
        } else {
            f->x[i] = f->x[f->owner[i]];
            f->dx[i] = f->dx[f->owner[i]];
        }
        f->c.in[i] = f->x[i];
        f->c.din[i] = f->dx[i];
    }
}

void op_fixture_init(op_fixture *f, snug_graph *g, int node, size_t m_plan, int threads, fill_kind kind,
                     uint64_t seed) {
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), SNUG_OK);
    memset(f, 0, sizeof *f);
    uint64_t s = seed;
    f->g = g;
    f->node = &g->nodes[node];
    f->op = f->node->op;
    f->m_plan = m_plan;
    f->out_n = g->tensors[f->node->output].numel;
    bind_inputs(f, kind, &s);
    f->y = op_test_xmalloc(m_plan * f->out_n * sizeof(float));
    f->r = op_test_xmalloc(m_plan * f->out_n * sizeof(float));
    op_test_fill_sym(f->r, m_plan * f->out_n, &s);
    f->n_w = f->node->n_params;
    for (int i = 0; i < f->n_w; i++) {
        f->wn[i] = g->params[f->node->params[i]].numel;
        f->w[i] = op_test_xmalloc(f->wn[i] * sizeof(float));
        f->dw[i] = op_test_xmalloc(f->wn[i] * sizeof(float));
        op_test_fill_sym(f->w[i], f->wn[i], &s);
    }
    f->saved = op_test_xmalloc((f->op->saved_bytes ? f->op->saved_bytes(f->node) : 0) * m_plan);
    f->work = op_test_xmalloc(op_test_workspace(f->node, m_plan, threads));
    f->targets = op_test_xmalloc(m_plan * sizeof(int32_t));
    f->c.node = f->node;
    f->c.m = m_plan;
    f->c.threads = threads;
    f->c.product = op_test_product();
    f->c.out = f->y;
    f->c.saved = f->saved;
    f->c.work = f->work;
    f->c.targets = f->targets;
    f->c.loss_scale = 1.0f;
    f->c.dout = (f->op->flags & OP_IS_LOSS) ? NULL : f->r;
    for (int i = 0; i < f->n_w; i++) {
        f->c.w[i] = f->w[i];
        f->c.dw[i] = f->dw[i];
    }
}

void op_fixture_free(op_fixture *f) {
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) free(f->x[i]), free(f->dx[i]);
    free(f->y), free(f->r), free(f->saved), free(f->work), free(f->targets);
    for (int i = 0; i < f->n_w; i++) free(f->w[i]), free(f->dw[i]);
    snug_graph_free(f->g);
}

double op_fixture_loss(op_fixture *f) {
    f->op->forward(&f->c);
    const size_t n = f->c.m * f->out_n;
    double l = 0.0;
    for (size_t i = 0; i < n; i++)
        l += (f->op->flags & OP_IS_LOSS) ? (double)f->y[i] * f->c.loss_scale : (double)f->y[i] * f->r[i];
    return l;
}

void op_fixture_zero_grads(op_fixture *f) {
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) memset(f->dx[i], 0, f->m_plan * f->in_n[i] * sizeof(float));
    for (int i = 0; i < f->n_w; i++) memset(f->dw[i], 0, f->wn[i] * sizeof(float));
}

void op_fixture_analytic(op_fixture *f) {
    op_fixture_zero_grads(f);
    f->op->forward(&f->c);
    f->op->backward(&f->c);
}

void op_check_fd(op_fixture *f, float *v, const float *grad, size_t n, float h, double tol, const char *what) {
    double *fd = op_test_xmalloc(n * sizeof *fd), mean = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float keep = v[i], up = keep + h, down = keep - h;
        v[i] = up;
        double lp = op_fixture_loss(f);
        v[i] = down;
        double lm = op_fixture_loss(f);
        v[i] = keep;
        fd[i] = (lp - lm) / ((double)up - (double)down);
        mean += fabs(fd[i]) / (double)n;
    }
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)grad[i] - fd[i]), bound = tol * (fabs(fd[i]) + mean + 1e-6);
        if (diff / (fabs(fd[i]) + mean + 1e-6) > worst) worst = diff / (fabs(fd[i]) + mean + 1e-6);
        if (diff > bound)
            fail_msg("%s %s[%zu]: analytic %.7g, finite difference %.7g (tolerance %.1e)", f->op->kind, what, i,
                     (double)grad[i], fd[i], tol);
    }
    print_message("%-22s %-7s n=%-4zu m=%zu/%zu: max relative error %.2e\n", f->op->kind, what, n, f->c.m,
                  f->m_plan, worst);
    free(fd);
}

/* A copy of n floats. */
static float *copy_of(const float *v, size_t n) {
    float *c = op_test_xmalloc(n * sizeof(float));
    memcpy(c, v, n * sizeof(float));
    return c;
}

void op_check_all(op_fixture *f, size_t m_run, float h, double tol) {
    f->c.m = m_run;
    op_fixture_analytic(f);
    float *dx[NODE_MAX_INPUTS] = {0}, *dw[NODE_MAX_PARAMS] = {0};
    for (int i = 0; i < f->n_in; i++) {
        if (f->owner[i] != i) continue;
        dx[i] = copy_of(f->dx[i], m_run * f->in_n[i]);
        /* Rows past m_run belong to nobody: the op must not have touched them. */
        for (size_t j = m_run * f->in_n[i]; j < f->m_plan * f->in_n[i]; j++) assert_true(f->dx[i][j] == 0.0f);
    }
    for (int i = 0; i < f->n_w; i++) dw[i] = copy_of(f->dw[i], f->wn[i]);
    static const char *const names[NODE_MAX_INPUTS] = {"input", "input1", "input2", "input3"};
    for (int i = 0; i < f->n_in; i++) {
        if (f->owner[i] != i) continue;
        op_check_fd(f, f->x[i], dx[i], m_run * f->in_n[i], h, tol, names[i]);
        free(dx[i]);
    }
    for (int i = 0; i < f->n_w; i++) {
        op_check_fd(f, f->w[i], dw[i], f->wn[i], h, tol, f->g->params[f->node->params[i]].name);
        free(dw[i]);
    }
}

/* Every element of now is twice the one of once. */
static void expect_doubled(const float *now, const float *once, size_t n) {
    for (size_t i = 0; i < n; i++) assert_float_equal(now[i], 2.0f * once[i], 1e-5f * (1.0f + fabsf(once[i])));
}

/* Whether input i owns a gradient buffer no other input shares (add(x, x) adds twice into one). */
static bool sole_owner(const op_fixture *f, int i) {
    if (f->owner[i] != i) return false;
    for (int j = 0; j < f->n_in; j++)
        if (j != i && f->owner[j] == i) return false;
    return true;
}

/* An op with OP_WRITES_FRESH, told that its input gradients hold no gradient yet (op_call.din_fresh), writes
 * them whole, over stale memory (NaN and huge values here), with the bits of adding into zeros; the parameter
 * gradients still add. */
static void check_fresh(op_fixture *f) {
    if (!(f->op->flags & OP_WRITES_FRESH)) return;
    op_fixture_analytic(f);
    float *want[NODE_MAX_INPUTS] = {0}, *wwant[NODE_MAX_PARAMS] = {0};
    unsigned fresh = 0;
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) want[i] = copy_of(f->dx[i], f->c.m * f->in_n[i]);
    for (int i = 0; i < f->n_w; i++) wwant[i] = copy_of(f->dw[i], f->wn[i]);
    op_fixture_zero_grads(f);
    for (int i = 0; i < f->n_in; i++) {
        if (!sole_owner(f, i)) continue;
        fresh |= 1u << i;
        for (size_t j = 0; j < f->c.m * f->in_n[i]; j++) f->dx[i][j] = j % 2 ? NAN : 3e38f;
    }
    f->c.din_fresh = fresh;
    f->op->backward(&f->c);
    f->c.din_fresh = 0;
    for (int i = 0; i < f->n_in; i++) {
        if (!want[i]) continue;
        if (memcmp(f->dx[i], want[i], f->c.m * f->in_n[i] * sizeof(float)) != 0)
            fail_msg("%s: input %d's gradient written fresh differs from the one added into zeros", f->op->kind, i);
        free(want[i]);
    }
    for (int i = 0; i < f->n_w; i++) {
        if (memcmp(f->dw[i], wwant[i], f->wn[i] * sizeof(float)) != 0)
            fail_msg("%s: parameter %d's gradient differs with fresh input gradients", f->op->kind, i);
        free(wwant[i]);
    }
}

/* An op with OP_WRITES_DW_FRESH, told that its parameter gradients hold a stale window's values
 * (op_call.dw_fresh), writes them whole over that memory (NaN and huge values here), with the bits of adding into
 * zeros; the input gradients are unchanged. */
static void check_dw_fresh(op_fixture *f) {
    if (!(f->op->flags & OP_WRITES_DW_FRESH) || f->n_w == 0) return;
    op_fixture_analytic(f);
    float *want[NODE_MAX_INPUTS] = {0}, *wwant[NODE_MAX_PARAMS] = {0};
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) want[i] = copy_of(f->dx[i], f->c.m * f->in_n[i]);
    for (int i = 0; i < f->n_w; i++) wwant[i] = copy_of(f->dw[i], f->wn[i]);
    op_fixture_zero_grads(f);
    for (int i = 0; i < f->n_w; i++)
        for (size_t j = 0; j < f->wn[i]; j++) f->dw[i][j] = j % 2 ? NAN : 3e38f;
    f->c.dw_fresh = (1u << f->n_w) - 1u;
    f->op->backward(&f->c);
    f->c.dw_fresh = 0;
    for (int i = 0; i < f->n_w; i++) {
        if (memcmp(f->dw[i], wwant[i], f->wn[i] * sizeof(float)) != 0)
            fail_msg("%s: parameter %d's gradient written fresh differs from the one added into zeros", f->op->kind, i);
        free(wwant[i]);
    }
    for (int i = 0; i < f->n_in; i++) {
        if (!want[i]) continue;
        if (memcmp(f->dx[i], want[i], f->c.m * f->in_n[i] * sizeof(float)) != 0)
            fail_msg("%s: input %d's gradient differs with fresh parameter gradients", f->op->kind, i);
        free(want[i]);
    }
}

void op_expect_packed_input_same_bits(const op_fixture *f, const uint16_t *packed, float *want, float *got, size_t n,
                                      float scale) {
    for (int fresh = 0; fresh <= 1; fresh++) {
        for (size_t i = 0; i < n; i++) want[i] = got[i] = fresh ? NAN : scale * f->r[i]; /* stale, or summed into */
        op_call c = f->c;
        c.din_fresh = fresh ? 1u : 0u;
        c.din[0] = want;
        f->op->backward(&c);
        c.in[0] = NULL;
        c.in_packed = packed;
        c.din[0] = got;
        f->op->backward(&c);
        assert_memory_equal(got, want, n * sizeof *got);
    }
}

void op_expect_packed_regen_same_bits(const op_fixture *f, const uint16_t *packed, float *want, float *got) {
    op_call c = f->c;
    c.bf16 = true;
    f->op->forward(&c);
    bf16_round_floats(want, f->y + f->out_n, f->out_n);
    c.in[0] = NULL;
    c.in_packed = packed;
    for (size_t t = 0; t < 3; t++) f->op->regen(&c, 1, got, t, 3);
    assert_memory_equal(got, want, f->out_n * sizeof *got);
}

void op_check_backward_adds(op_fixture *f) {
    check_fresh(f);
    check_dw_fresh(f);
    op_fixture_analytic(f);
    float *once[NODE_MAX_INPUTS] = {0}, *wonce[NODE_MAX_PARAMS] = {0};
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) once[i] = copy_of(f->dx[i], f->c.m * f->in_n[i]);
    for (int i = 0; i < f->n_w; i++) wonce[i] = copy_of(f->dw[i], f->wn[i]);
    f->op->backward(&f->c);
    for (int i = 0; i < f->n_in; i++) {
        if (f->owner[i] != i) continue;
        expect_doubled(f->dx[i], once[i], f->c.m * f->in_n[i]);
        free(once[i]);
    }
    for (int i = 0; i < f->n_w; i++) {
        expect_doubled(f->dw[i], wonce[i], f->wn[i]);
        free(wonce[i]);
    }
}

void op_expect_error(snug_graph *g, snug_status status, const char *const *needles) {
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), status);
    print_message("error: %s\n", err.message);
    for (; *needles; needles++)
        if (!strstr(err.message, *needles)) fail_msg("'%s' not in the message: %s", *needles, err.message);
    snug_graph_free(g);
}

void op_expect_large_sample_one_slot(snug_graph *(*make)(void), uint64_t seed) {
    op_fixture f[2];
    for (int t = 0; t < 2; t++) {
        snug_graph *g = make();
        const size_t one = op_test_workspace(&g->nodes[1], 1, 2);
        assert_true(one > ((size_t)64 << 20));
        assert_int_equal(op_test_workspace(&g->nodes[1], 2, 2), one);
        op_fixture_init(&f[t], g, 1, 2, t + 1, FILL_PLAIN, seed);
        op_fixture_analytic(&f[t]);
    }
    op_expect_same_results(&f[0], &f[1]);
    for (int t = 0; t < 2; t++) op_fixture_free(&f[t]);
}

void op_expect_same_results(const op_fixture *a, const op_fixture *b) {
    const size_t m = a->c.m;
    assert_memory_equal(b->y, a->y, m * a->out_n * sizeof(float));
    for (int i = 0; i < a->n_in; i++)
        if (a->owner[i] == i) assert_memory_equal(b->dx[i], a->dx[i], m * a->in_n[i] * sizeof(float));
    for (int p = 0; p < a->n_w; p++) assert_memory_equal(b->dw[p], a->dw[p], a->wn[p] * sizeof(float));
}
