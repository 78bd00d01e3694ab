/* Holding two runs to the same ReLU and max-pool decisions: pinned_decisions.h says why. */
#include "pinned_decisions.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "ops/op.h"

static bool is_pool(const op_node *n) { return n->op == &op_maxpool2d || n->op == &op_maxpool2d_relu; }

/* A max-pool node's window geometry, from its shapes. */
typedef struct window_geom {
    size_t planes, h, w, ho, wo, k, s;
    bool relu;
} window_geom;

static window_geom geom_of(const op_node *n) {
    return (window_geom){.planes = n->in_shape[0].dims[0], .h = n->in_shape[0].dims[1], .w = n->in_shape[0].dims[2],
                         .ho = n->out_shape.dims[1], .wo = n->out_shape.dims[2], .k = n->p.pool2d.kernel,
                         .s = n->p.pool2d.stride, .relu = n->op == &op_maxpool2d_relu};
}

static float value(const window_geom *g, float v) { return g->relu && v < 0 ? 0.0f : v; }

/* The window's first maximum, as the max-pool op takes it: an index into the plane. */
static size_t window_argmax(const window_geom *g, const float *plane, size_t oy, size_t ox) {
    size_t best = oy * g->s * g->w + ox * g->s;
    for (size_t i = 0; i < g->k; i++)
        for (size_t j = 0; j < g->k; j++) {
            const size_t at = (oy * g->s + i) * g->w + ox * g->s + j;
            if (value(g, plane[at]) > value(g, plane[best])) best = at;
        }
    return best;
}

/* The pools that read node n's output. */
static int pools_reading(const snug_graph *g, const op_node *n, const op_node **out, int cap) {
    int count = 0;
    for (int i = 0; i < g->n_nodes && count < cap; i++)
        if (is_pool(&g->nodes[i]) && graph_base_tensor(g, g->nodes[i].inputs[0]) == n->output)
            out[count++] = &g->nodes[i];
    return count;
}

static void record_windows(decisions *d, const op_node *pool, const float *x, size_t m) {
    const window_geom g = geom_of(pool);
    int32_t *arg = d->argmax[pool->index] = malloc(pool->out_numel * m * sizeof *arg);
    assert_non_null(arg);
    for (size_t p = 0; p < m * g.planes; p++)
        for (size_t oy = 0; oy < g.ho; oy++)
            for (size_t ox = 0; ox < g.wo; ox++)
                arg[(p * g.ho + oy) * g.wo + ox] = (int32_t)window_argmax(&g, x + p * g.h * g.w, oy, ox);
}

static bool recorded_positive(const decisions *d, const op_node *n, size_t i) {
    return (d->positive[n->index][i / 8] >> (i % 8)) & 1;
}

/* Makes the window's first maximum the recorded one, changing as little as the decision needs: a dead window
 * (the recorded ReLU'd maximum 0) loses its positive values; otherwise the recorded pixel rises to just above the
 * others (and above zero under a ReLU). True when something changed. */
static bool impose_window(const decisions *d, const op_node *pool, const window_geom *g, float *plane, size_t p,
                          size_t oy, size_t ox) {
    const size_t o = (p * g->ho + oy) * g->wo + ox, want = (size_t)d->argmax[pool->index][o];
    if (window_argmax(g, plane, oy, ox) == want) return false;
    if (g->relu && !recorded_positive(d, pool, o)) {
        for (size_t i = 0; i < g->k; i++)
            for (size_t j = 0; j < g->k; j++) {
                float *v = &plane[(oy * g->s + i) * g->w + ox * g->s + j];
                if (*v > 0) *v = 0;
            }
        return true;
    }
    float target = plane[want], others = -INFINITY;
    for (size_t i = 0; i < g->k; i++)
        for (size_t j = 0; j < g->k; j++) {
            const size_t at = (oy * g->s + i) * g->w + ox * g->s + j;
            if (at != want) others = fmaxf(others, plane[at]);
        }
    if (g->relu && target <= 0) target = FLT_MIN;
    if (others >= target) target = nextafterf(others, INFINITY);
    plane[want] = target;
    return true;
}

/* Overlapping windows (kernel > stride) share pixels, so raising one may move another's maximum: a few passes
 * settle it, and a decision that cannot be imposed fails the test rather than pass unheld. */
static void impose_windows(decisions *d, const op_node *pool, float *x, size_t m) {
    const window_geom g = geom_of(pool);
    for (int pass = 0; pass < 8; pass++) {
        size_t changed = 0;
        for (size_t p = 0; p < m * g.planes; p++)
            for (size_t oy = 0; oy < g.ho; oy++)
                for (size_t ox = 0; ox < g.wo; ox++)
                    changed += impose_window(d, pool, &g, x + p * g.h * g.w, p, oy, ox);
        if (pass == 0) d->argmax_changed += changed;
        if (changed == 0) return;
    }
    fail_msg("%s: the recorded max-pool decisions could not all be imposed", pool->name);
}

static void watch(void *ctx, const op_node *n, float *out, size_t m) {
    decisions *d = ctx;
    if (n->op->flags & (OP_IS_VIEW | OP_IS_LOSS)) return;
    /* nothing recorded: the bf16 run kept this output only packed (a concatenation's), a copy of values whose
     * decisions their producers recorded */
    if (d->imposing && !d->positive[n->index]) return;
    const size_t count = n->out_numel * m;
    if (!d->imposing) {
        uint8_t *bits = d->positive[n->index] = calloc(count / 8 + 1, 1);
        assert_non_null(bits);
        for (size_t i = 0; i < count; i++) bits[i / 8] |= (uint8_t)((out[i] > 0) << (i % 8));
    } else {
        for (size_t i = 0; i < count; i++) {
            const bool want = recorded_positive(d, n, i);
            if ((out[i] > 0) == want) continue;
            out[i] = want ? FLT_MIN : 0.0f; /* a unit on within rounding of zero: its value is rounding's size */
            d->signs_changed++;
        }
    }
    const op_node *pools[8];
    const int k = pools_reading(d->g, n, pools, 8);
    for (int i = 0; i < k; i++) {
        if (!d->imposing) record_windows(d, pools[i], out, m);
        else impose_windows(d, pools[i], out, m);
    }
}

void decisions_record(decisions *d, snug_trainer *tr) {
    *d = (decisions){.g = tr->x.g};
    d->positive = calloc((size_t)d->g->n_nodes, sizeof *d->positive);
    d->argmax = calloc((size_t)d->g->n_nodes, sizeof *d->argmax);
    assert_true(d->positive && d->argmax);
    tr->x.watch = watch;
    tr->x.watch_ctx = d;
}

void decisions_impose(decisions *d, snug_trainer *tr) {
    assert_true(tr->x.g->n_nodes == d->g->n_nodes);
    d->imposing = 1;
    d->signs_changed = d->argmax_changed = 0;
    tr->x.watch = watch;
    tr->x.watch_ctx = d;
}

void decisions_detach(snug_trainer *tr) {
    tr->x.watch = NULL;
    tr->x.watch_ctx = NULL;
}

void decisions_free(decisions *d) {
    for (int i = 0; d->g && i < d->g->n_nodes; i++) {
        free(d->positive[i]);
        free(d->argmax[i]);
    }
    free(d->positive);
    free(d->argmax);
    *d = (decisions){0};
}
