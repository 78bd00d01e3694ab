/* Sequence models from ONNX: what torch.onnx.export writes for a transformer, mapped onto snug's own layers.
 * PyTorch exports nn.LayerNorm (opsets 13 to 16) and nn.GELU as chains of element-wise ops, nn.Linear on a
 * sequence as Transpose(weight) -> MatMul -> Add(bias), and attention as a dozen ops; snug matches each chain
 * and builds the one layer it came from (snug_layernorm, snug_gelu, snug_linear, snug_self_attention, fused
 * in onnx_patterns_attention.c), so an exported transformer keeps snug's memory and speed. A chain that does
 * not match is refused naming the node and what snug maps. Constants around the patterns (the mask's Slice,
 * Not and Cast, the shape arithmetic) are folded here. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "graph/onnx_patterns.h"

/* ---- the graph around a node ---- */

onnx_value *onnx_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j) {
    return j < n->n_input && n->input[j] && *n->input[j] ? onnx_find(cx, n->input[j]) : NULL;
}

/* The node after `from` that reads `value` as op `op`, or -1; *readers counts every reader (the graph's outputs
 * too), so a pattern can make sure nothing else needs a value it fuses away. */
int onnx_reader(const onnx_ctx *cx, int from, const char *value, const char *op, int *readers) {
    int found = -1, count = 0;
    for (size_t j = (size_t)from + 1; j < cx->gp->n_node; j++) {
        const Onnx__NodeProto *m = cx->gp->node[j];
        for (size_t i = 0; i < m->n_input; i++)
            if (m->input[i] && strcmp(m->input[i], value) == 0) {
                count++;
                if (found < 0 && m->op_type && strcmp(m->op_type, op) == 0 && m->n_output >= 1) found = (int)j;
            }
    }
    for (size_t i = 0; i < cx->gp->n_output; i++)
        if (cx->gp->output[i]->name && strcmp(cx->gp->output[i]->name, value) == 0) count++;
    if (readers) *readers = count;
    return found;
}

/* The one reader of node `at`'s output, of op `op`: -1 when there are others (the pattern cannot drop it). */
int onnx_next(const onnx_ctx *cx, int at, const char *op) {
    int readers;
    const int j = at < 0 ? -1 : onnx_reader(cx, at, cx->gp->node[at]->output[0], op, &readers);
    return readers == 1 ? j : -1;
}

/* A Constant node's one-element value, read ahead of the walk: a pattern looks at nodes not yet reached. */
static bool constant_ahead(onnx_ctx *cx, const char *name, double *v) {
    for (size_t j = (size_t)cx->node + 1; j < cx->gp->n_node; j++) {
        const Onnx__NodeProto *m = cx->gp->node[j];
        if (m->n_output < 1 || !m->output[0] || strcmp(m->output[0], name) != 0) continue;
        const Onnx__AttributeProto *a = strcmp(m->op_type, "Constant") == 0 ? onnx_attr(m, "value") : NULL;
        onnx_const *c = NULL;
        snug_error ignored = {0};
        if (!a || !a->t || onnx_const_from_tensor(cx, a->t, &c, &ignored) != SNUG_OK) return false;
        const bool one = c->numel == 1;
        if (one) *v = c->f ? (double)c->f[0] : (double)c->i[0];
        onnx_const_free(c);
        return one;
    }
    return false;
}

bool onnx_scalar(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, double *v) {
    const onnx_value *c = onnx_in(cx, n, j);
    if (!c) return j < n->n_input && n->input[j] && constant_ahead(cx, n->input[j], v);
    if (!c->c || c->c->numel != 1) return false;
    *v = c->c->f ? (double)c->c->f[0] : (double)c->c->i[0];
    return true;
}

/* Input j of n is the output of node `at`. */
static bool is_output_of(const onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, int at) {
    return at >= 0 && j < n->n_input && n->input[j] && strcmp(n->input[j], cx->gp->node[at]->output[0]) == 0;
}

/* A float initializer of one row per channel (a norm's weight or bias, a linear's bias) as input j of n. */
static onnx_value *vector_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, size_t channels) {
    onnx_value *v = onnx_in(cx, n, j);
    return v && v->c && v->c->f && v->c->numel == channels && !v->bound ? v : NULL;
}

/* The last axis of a tensor of ONNX per-sample rank r: -1, or r (the batch counts in ONNX's axes). */
static bool last_axis(int64_t axis, int rank) { return axis == -1 || axis == rank; }

static snug_status unmatched(onnx_ctx *cx, const char *what, snug_error *err) {
    return onnx_fail(cx, err, SNUG_E_ARG, "%s: snug maps this op only inside the patterns PyTorch exports for "
                     "nn.LayerNorm, nn.GELU, nn.Embedding, nn.Linear and causal self-attention (docs/onnx.md); "
                     "write the layer with those modules, or export with opset 17 (LayerNormalization)", what);
}

/* ---- LayerNorm: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul weight, Add bias ---- */

static snug_status layernorm_out(onnx_ctx *cx, const Onnx__NodeProto *out, onnx_value *x, onnx_value *w,
                                 onnx_value *b, double eps, snug_error *err) {
    if (x->shape.rank < 1 || x->shape.rank > 2 || !(eps > 0))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug's LayerNorm normalises (T, C) or (C) per sample with eps > 0");
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_layernorm(cx->g, onnx_layer_name(cx, out, w->name, buf), x->t, (float)eps);
    snug_status s = onnx_set_out(cx, out, t, &x->shape, err);
    if (s == SNUG_OK) s = onnx_bind_param(cx, t, 0, w, false, err);
    return s == SNUG_OK ? onnx_bind_param(cx, t, 1, b, false, err) : s;
}

static bool reduces_last(const Onnx__NodeProto *n, int rank) {
    const Onnx__AttributeProto *a = onnx_attr(n, "axes");
    return a && a->n_ints == 1 && last_axis(a->ints[0], rank);
}

static snug_status map_layernorm_chain(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    const int at = cx->node, rank = x->shape.rank;
    const size_t channels = rank ? x->shape.dims[rank - 1] : 0;
    int sub = onnx_next(cx, at, "Sub"), readers, pow = -1, div = -1;
    if (sub >= 0 && (onnx_in(cx, cx->gp->node[sub], 0) != x || !is_output_of(cx, cx->gp->node[sub], 1, at))) sub = -1;
    if (sub >= 0) {
        pow = onnx_reader(cx, sub, cx->gp->node[sub]->output[0], "Pow", &readers);
        div = readers == 2 ? onnx_reader(cx, sub, cx->gp->node[sub]->output[0], "Div", NULL) : -1;
    }
    double two = 0, eps = 0;
    const int mean2 = onnx_next(cx, pow, "ReduceMean"), add = onnx_next(cx, mean2, "Add");
    const int sqrt_ = onnx_next(cx, add, "Sqrt"), div2 = onnx_next(cx, sqrt_, "Div");
    const int mul = onnx_next(cx, div, "Mul"), bias = onnx_next(cx, mul, "Add");
    onnx_value *w = mul >= 0 ? vector_in(cx, cx->gp->node[mul], 1, channels) : NULL;
    onnx_value *b = bias >= 0 ? vector_in(cx, cx->gp->node[bias], 1, channels) : NULL;
    if (!reduces_last(n, rank) || div < 0 || div != div2 || !onnx_scalar(cx, cx->gp->node[pow], 1, &two) ||
        two != 2.0 || !reduces_last(cx->gp->node[mean2], rank) || !onnx_scalar(cx, cx->gp->node[add], 1, &eps) ||
        !is_output_of(cx, cx->gp->node[div], 0, sub) || !w || !b)
        return unmatched(cx, "ReduceMean that does not begin the LayerNorm pattern (mean over the last axis, "
                         "subtracted, squared, averaged, eps added, square root, divided, times the weight, plus "
                         "the bias)", err);
    const int fused[] = {sub, pow, mean2, add, sqrt_, div, mul};
    for (size_t j = 0; j < sizeof fused / sizeof fused[0]; j++) cx->skip[fused[j]] = true;
    cx->skip[bias] = true;
    return layernorm_out(cx, cx->gp->node[bias], x, w, b, eps, err);
}

static snug_status map_layernormalization(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    const int rank = x->shape.rank;
    const size_t channels = rank ? x->shape.dims[rank - 1] : 0;
    const Onnx__AttributeProto *axis = onnx_attr(n, "axis"), *eps = onnx_attr(n, "epsilon");
    onnx_value *w = vector_in(cx, n, 1, channels), *b = vector_in(cx, n, 2, channels);
    if ((axis && !last_axis(axis->i, rank)) || !w || !b || n->n_output > 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "snug maps LayerNormalization over the last axis with weight and "
                         "bias initializers of its size (nn.LayerNorm(C)) and one output");
    return layernorm_out(cx, n, x, w, b, eps ? (double)eps->f : 1e-5, err);
}

/* ---- GELU: Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5 ---- */

static snug_status map_gelu_chain(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    double root2 = 0, one = 0, half = 0;
    const int erf = onnx_next(cx, cx->node, "Erf"), add = onnx_next(cx, erf, "Add"), mul = onnx_next(cx, add, "Mul");
    const int mul2 = onnx_next(cx, mul, "Mul");
    const bool x_first = mul >= 0 && onnx_in(cx, cx->gp->node[mul], 0) == x;
    if (!onnx_scalar(cx, n, 1, &root2) || fabs(root2 - sqrt(2.0)) > 1e-6 || mul2 < 0 ||
        !onnx_scalar(cx, cx->gp->node[add], 1, &one) || one != 1.0 ||
        onnx_in(cx, cx->gp->node[mul], x_first ? 0 : 1) != x || !onnx_scalar(cx, cx->gp->node[mul2], 1, &half) ||
        half != 0.5)
        return onnx_map_arith(cx, n, err); /* x / c alone */
    cx->skip[erf] = cx->skip[add] = cx->skip[mul] = cx->skip[mul2] = true;
    char buf[SNUG_NAME_MAX];
    const Onnx__NodeProto *out = cx->gp->node[mul2];
    return onnx_set_out(cx, out, snug_gelu(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t), &x->shape, err);
}

/* ---- embeddings and Linear on sequences ---- */

/* Gather(table, token ids): nn.Embedding. */
static snug_status map_embedding(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *table, onnx_value *ids,
                                 snug_error *err) {
    const Onnx__AttributeProto *axis = onnx_attr(n, "axis");
    if (!table->c->f || table->c->rank != 2 || (axis && axis->i != 0) || ids->shape.rank != 1 ||
        snug_tensor_shape(cx->g, ids->t).rank != 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "snug maps Gather of a tensor as nn.Embedding: rows (axis 0) of a "
                         "float (vocab, dim) initializer picked by the model's token ids (N, T)");
    const size_t vocab = (size_t)table->c->dims[0], dim = (size_t)table->c->dims[1];
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_embedding(cx->g, onnx_layer_name(cx, n, table->name, buf), ids->t, vocab, dim);
    const snug_shape shape = {.rank = 2, .dims = {ids->shape.dims[0], dim}};
    snug_status s = onnx_set_out(cx, n, t, &shape, err);
    return s == SNUG_OK ? onnx_bind_param(cx, t, 0, table, false, err) : s;
}

/* x + table[0:T]: learned positions (GPT-2's wpe). */
static snug_status map_positions(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *rows,
                                 snug_error *err) {
    const onnx_const *c = rows->p.w->c;
    if (x->shape.rank != 2 || (size_t)c->dims[1] != x->shape.dims[1] || (size_t)c->dims[0] < x->shape.dims[0] ||
        (size_t)rows->p.scale != x->shape.dims[0])
        return onnx_fail(cx, err, SNUG_E_SHAPE, "snug maps x + P[:T] as learned positions: x (T, D), P (max_len, "
                         "D) with max_len >= T, rows 0 to T");
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_position_embedding(cx->g, onnx_layer_name(cx, n, rows->p.w->name, buf), x->t,
                                            (size_t)c->dims[0]);
    snug_status s = onnx_set_out(cx, n, t, &x->shape, err);
    return s == SNUG_OK ? onnx_bind_param(cx, t, 0, rows->p.w, false, err) : s;
}

/* The layer whose parameter is initializer w (bound earlier), or NULL. */
static const char *layer_of(const onnx_ctx *cx, const onnx_value *w) {
    for (size_t j = 0; j < (size_t)cx->g->n_params; j++)
        if (strcmp(cx->g->params[j].name, w->name) == 0) return cx->g->nodes[cx->g->params[j].node].name;
    return NULL;
}

/* MatMul(x (T, C), W^T) [+ bias]: snug_linear over the last axis with W (out, in) as it is, or with a (K, N)
 * initializer transposed; W already an embedding's: the tied output head (snug_linear_tied). */
static snug_status map_linear_seq(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *w,
                                  bool w_kn, snug_error *err) {
    const onnx_const *c = w->c;
    if (!c || !c->f || c->rank != 2 || c->numel == 0)
        return unmatched(cx, "MatMul of a sequence by something other than a float 2-D initializer", err);
    const size_t out = (size_t)c->dims[w_kn ? 1 : 0];
    int readers, add = onnx_reader(cx, cx->node, n->output[0], "Add", &readers);
    onnx_value *b = NULL;
    if (add >= 0 && readers == 1) {
        const Onnx__NodeProto *a = cx->gp->node[add];
        b = vector_in(cx, a, strcmp(a->input[0], n->output[0]) == 0 ? 1 : 0, out);
    }
    char buf[SNUG_NAME_MAX];
    const snug_shape shape = {.rank = x->shape.rank, .dims = {x->shape.dims[0], out}};
    if (w->bound) {
        const char *emb = layer_of(cx, w);
        if (w_kn || b || !emb)
            return onnx_fail(cx, err, SNUG_E_ARG, "weight '%s' is an earlier layer's: snug ties only an "
                             "embedding's table to a bias-free output head (F.linear(x, wte.weight))", w->name);
        snprintf(buf, sizeof buf, "%.*s", SNUG_NAME_MAX - 1, n->name && *n->name ? n->name : "head");
        return onnx_set_out(cx, n, snug_linear_tied(cx->g, buf, x->t, emb), &shape, err);
    }
    const char *name = onnx_layer_name(cx, n, w->name, buf);
    snug_tensor t = b ? snug_linear(cx->g, name, x->t, out) : snug_linear_no_bias(cx->g, name, x->t, out);
    snug_status s = onnx_set_out(cx, b ? cx->gp->node[add] : n, t, &shape, err);
    if (s == SNUG_OK) s = onnx_bind_param(cx, t, 0, w, w_kn, err);
    if (s == SNUG_OK && b) s = onnx_bind_param(cx, t, 1, b, false, err), cx->skip[add] = true;
    return s;
}

/* map_linear_seq for x of any rank: a tensor of more per-sample axes than (T, C) (nn.Linear on attention's heads
 * (H, T, D)) is viewed as its rows (H T, D), and the product (H T, out) viewed back as (H, T, out). */
static snug_status map_linear_rows(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *w, bool w_kn,
                                   snug_error *err) {
    if (x->shape.rank <= 2) return map_linear_seq(cx, n, x, w, w_kn, err);
    const snug_shape in = x->shape;
    onnx_value rows = *x;
    rows.shape = (snug_shape){.rank = 2, .dims = {1, in.dims[in.rank - 1]}};
    for (int i = 0; i < in.rank - 1; i++) rows.shape.dims[0] *= in.dims[i];
    char buf[SNUG_NAME_MAX];
    rows.t = snug_reshape(cx->g, onnx_part_name(cx, n, "/rows", buf), x->t, rows.shape);
    if (rows.t < 0) return onnx_set_out(cx, n, rows.t, NULL, err); /* the builder's message */
    snug_status s = map_linear_seq(cx, n, &rows, w, w_kn, err);
    /* the product is n's output, or that of the bias Add fused into it */
    const int add = cx->skip ? onnx_reader(cx, cx->node, n->output[0], "Add", NULL) : -1;
    onnx_value *y = add >= 0 && cx->skip[add] ? onnx_find(cx, cx->gp->node[add]->output[0]) : onnx_find(cx, n->output[0]);
    if (s != SNUG_OK || !y) return s;
    y->shape = in;
    y->shape.dims[in.rank - 1] = snug_tensor_shape(cx->g, y->t).dims[1];
    y->t = snug_reshape(cx->g, onnx_part_name(cx, n, "/back", buf), y->t, y->shape);
    return y->t < 0 ? onnx_set_out(cx, n, y->t, NULL, err) : SNUG_OK;
}

/* ---- constants: Slice, Not, Transpose of initializers, arithmetic on shapes ---- */

static bool is_initializer(const onnx_ctx *cx, const char *name) {
    for (size_t j = 0; j < cx->gp->n_initializer; j++)
        if (strcmp(cx->gp->initializer[j]->name, name) == 0) return true;
    return false;
}

/* Slice with steps 1 of a constant; rows [0, T) of a float initializer stay a pending "rows" value (the
 * position table, trained as a parameter). */
static snug_status fold_slice(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *data, snug_error *err) {
    const onnx_value *sv = onnx_in(cx, n, 1), *ev = onnx_in(cx, n, 2), *av = onnx_in(cx, n, 3), *pv = onnx_in(cx, n, 4);
    const onnx_const *d = data->c;
    int64_t lo[ONNX_MAX_RANK] = {0}, hi[ONNX_MAX_RANK];
    for (int k = 0; k < d->rank; k++) hi[k] = d->dims[k];
    const size_t m = sv && sv->c && sv->c->i ? sv->c->numel : 0;
    bool ok = m > 0 && ev && ev->c && ev->c->i && ev->c->numel == m && (!av || (av->c && av->c->i && av->c->numel == m));
    for (size_t j = 0; ok && j < m; j++) {
        int64_t ax = av ? av->c->i[j] : (int64_t)j;
        if (ax < 0) ax += d->rank;
        ok = ax >= 0 && ax < d->rank && (!pv || (pv->c && pv->c->i && pv->c->numel == m && pv->c->i[j] == 1));
        if (!ok) break;
        int64_t s = sv->c->i[j], e = ev->c->i[j];
        s = s < 0 ? s + d->dims[ax] : s, e = e < 0 ? e + d->dims[ax] : e;
        lo[ax] = s < 0 ? 0 : s > d->dims[ax] ? d->dims[ax] : s;
        hi[ax] = e < lo[ax] ? lo[ax] : e > d->dims[ax] ? d->dims[ax] : e;
    }
    if (!ok) return onnx_fail(cx, err, SNUG_E_ARG, "a Slice of a constant with constant starts, ends and axes and "
                              "steps 1 folds; this one does not");
    if (d->f && is_initializer(cx, data->name)) {
        bool rows = d->rank == 2 && lo[0] == 0 && lo[1] == 0 && hi[1] == d->dims[1];
        if (!rows) return onnx_fail(cx, err, SNUG_E_ARG, "snug maps a Slice of a weight only as rows 0 to T of a "
                                    "position table (wpe.weight[:T])");
        onnx_value *v = onnx_add(cx, n->output[0]);
        if (!v) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
        v->p = (onnx_pending){.kind = ONNX_PEND_ROWS, .w = data, .scale = (double)hi[0]};
        return SNUG_OK;
    }
    int64_t dims[ONNX_MAX_RANK];
    for (int k = 0; k < d->rank; k++) dims[k] = hi[k] - lo[k];
    onnx_const *c = onnx_const_new(d->rank, dims, d->f != NULL);
    for (size_t j = 0; c && j < c->numel; j++) {
        size_t rest = j, src = 0, stride = 1;
        for (int k = d->rank - 1; k >= 0; k--) {
            src += ((size_t)lo[k] + rest % (size_t)dims[k]) * stride;
            rest /= (size_t)dims[k], stride *= (size_t)d->dims[k];
        }
        if (c->f) c->f[j] = d->f[src];
        else c->i[j] = d->i[src];
    }
    return onnx_set_const(cx, n, c, err);
}

/* Element-wise Not, and Add/Sub/Mul/Div of integer constants of one shape or by a scalar (C // heads). */
static snug_status fold_arith(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_const *a, const onnx_const *b,
                              snug_error *err) {
    const char op = strcmp(n->op_type, "Not") == 0 ? '!' : strcmp(n->op_type, "Add") == 0 ? '+'
                    : strcmp(n->op_type, "Sub") == 0 ? '-' : strcmp(n->op_type, "Mul") == 0 ? '*' : '/';
    if (!a->i || (op != '!' && (!b || !b->i || (b->numel != 1 && b->numel != a->numel))))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug folds %s of integer constants of one shape (or by a scalar) "
                         "only", n->op_type);
    onnx_const *c = onnx_const_new(a->rank, a->dims, false);
    for (size_t j = 0; c && j < a->numel; j++) {
        const int64_t x = a->i[j], y = op == '!' ? 0 : b->i[b->numel == 1 ? 0 : j];
        if (op == '/' && y == 0) return onnx_const_free(c), onnx_fail(cx, err, SNUG_E_ARG, "division by zero");
        c->i[j] = op == '!' ? !x : op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
    }
    return onnx_set_const(cx, n, c, err);
}

snug_status onnx_fold_sequence(onnx_ctx *cx, const Onnx__NodeProto *n, bool *taken, snug_error *err) {
    onnx_value *a = onnx_in(cx, n, 0), *b = onnx_in(cx, n, 1);
    const char *op = n->op_type;
    *taken = true;
    if (strcmp(op, "Slice") == 0) return fold_slice(cx, n, a, err);
    if (strcmp(op, "Transpose") == 0 && a->c->f && a->c->rank == 2 && is_initializer(cx, a->name)) {
        const Onnx__AttributeProto *perm = onnx_attr(n, "perm");
        if (perm && !(perm->n_ints == 2 && perm->ints[0] == 1 && perm->ints[1] == 0))
            return onnx_fail(cx, err, SNUG_E_ARG, "a Transpose of a 2-D weight swaps its axes");
        onnx_value *v = onnx_add(cx, n->output[0]);
        if (!v) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
        v->p = (onnx_pending){.kind = ONNX_PEND_WT, .w = a};
        return SNUG_OK;
    }
    if (strcmp(op, "Not") == 0 || ((strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0 ||
                                    strcmp(op, "Div") == 0) && b && b->c))
        return fold_arith(cx, n, a->c, b ? b->c : NULL, err);
    *taken = false;
    return SNUG_OK;
}

/* ---- the entry: patterns first ---- */

snug_status onnx_map_sequence(onnx_ctx *cx, const Onnx__NodeProto *n, bool *taken, snug_error *err) {
    bool pending = false, all_const = n->n_input > 0;
    for (size_t j = 0; j < n->n_input; j++) {
        const onnx_value *v = onnx_in(cx, n, j);
        pending |= v && v->p.kind != ONNX_PEND_NONE;
        all_const &= !v || v->c != NULL;
    }
    *taken = true;
    if (pending) return onnx_attention_step(cx, n, err);
    if (all_const && onnx_in(cx, n, 0)) return onnx_fold_sequence(cx, n, taken, err);
    onnx_value *x = onnx_in(cx, n, 0), *y = onnx_in(cx, n, 1);
    const char *op = n->op_type;
    if (strcmp(op, "ReduceMean") == 0 && x && !x->c) return map_layernorm_chain(cx, n, x, err);
    if (strcmp(op, "LayerNormalization") == 0 && x && !x->c) return map_layernormalization(cx, n, x, err);
    if (strcmp(op, "Div") == 0 && x && !x->c && y && y->c) return map_gelu_chain(cx, n, x, err);
    if (strcmp(op, "Gather") == 0 && x && x->c && y && !y->c) return map_embedding(cx, n, x, y, err);
    if (strcmp(op, "Split") == 0 && x && !x->c) return onnx_attention_split(cx, n, x, err);
    if (strcmp(op, "MatMul") == 0 && x && !x->c && x->shape.rank >= 2 && y && y->c)
        return map_linear_rows(cx, n, x, y, true, err);
    *taken = false;
    return SNUG_OK;
}

/* Pending values met by MatMul and Add (their other input a tensor): the patterns' steps outside the
 * attention pattern. */
snug_status onnx_rows_or_weight(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *p,
                                snug_error *err) {
    if (strcmp(n->op_type, "Add") == 0 && p->p.kind == ONNX_PEND_ROWS && x && !x->c && x->p.kind == ONNX_PEND_NONE)
        return map_positions(cx, n, x, p, err);
    if (strcmp(n->op_type, "MatMul") == 0 && p->p.kind == ONNX_PEND_WT && x && !x->c &&
        x->p.kind == ONNX_PEND_NONE && p == onnx_in(cx, n, 1))
        return map_linear_rows(cx, n, x, p->p.w, false, err);
    return unmatched(cx, p->p.kind == ONNX_PEND_ROWS ? "rows of a weight read other than as x + P[:T]"
                                                     : "a transposed weight read other than by MatMul(x, W^T)", err);
}

snug_status onnx_map_pattern_only(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    /* A classifier exported for inference ends in a Softmax: snug's loss takes logits and applies its own */
    if (strcmp(n->op_type, "Softmax") == 0 && cx->gp->n_output == 1 && cx->gp->output[0]->name &&
        strcmp(n->output[0], cx->gp->output[0]->name) == 0)
        return onnx_fail(cx, err, SNUG_E_ARG, "a Softmax as the model's output: snug trains a model that ends in "
                         "logits, its loss applies the softmax; export the module without its final Softmax");
    return unmatched(cx, "not part of a pattern snug maps here", err);
}
