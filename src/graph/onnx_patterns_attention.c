/* Self-attention as PyTorch exports it, fused into snug_self_attention: a (T, 3C) tensor Split into q, k, v;
 * each Reshaped to (T, H, D) and Transposed to heads first (k to (H, D, T)); MatMul q k^T; Div by sqrt(D) (or
 * Mul by its inverse); for a decoder Where(mask, -inf, scores) with the strictly upper triangle masked (causal;
 * without it, an encoder's attention over every position); Softmax
 * over the last axis; MatMul by v; Transpose back and Reshape to (T, C). Each value on the way is "pending"
 * (onnx_value.p): it says how far the pattern has come, and no snug tensor is made until the final Reshape
 * builds the one layer, which keeps only its input for backward instead of H T^2 scores. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "graph/onnx_patterns.h"

static snug_status off_pattern(onnx_ctx *cx, const char *expected, snug_error *err) {
    return onnx_fail(cx, err, SNUG_E_ARG, "the attention pattern stops here (%s expected): snug fuses "
                     "self-attention written as qkv.split -> reshape (B, T, H, D) -> transpose(1, 2) -> q @ "
                     "k.transpose(-2, -1) / sqrt(D) -> [masked_fill(~tril, -inf) ->] softmax(-1) -> @ v -> "
                     "transpose(1, 2) -> reshape (B, T, C); write the attention that way", expected);
}

static snug_status pend_out(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, onnx_pending p, snug_error *err) {
    onnx_value *v = j < n->n_output && n->output[j] && *n->output[j] ? onnx_add(cx, n->output[j]) : NULL;
    if (!v) return onnx_fail(cx, err, SNUG_E_FORMAT, "output %zu has no name", j);
    v->p = p;
    return SNUG_OK;
}

snug_status onnx_attention_split(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    const Onnx__AttributeProto *axis = onnx_attr(n, "axis");
    const onnx_value *split = onnx_in(cx, n, 1);
    const size_t c3 = x->shape.rank == 2 ? x->shape.dims[1] : 0;
    bool ok = n->n_output == 3 && c3 % 3 == 0 && axis && (axis->i == -1 || axis->i == 2);
    for (size_t j = 0; ok && split && j < 3; j++)
        ok = split->c && split->c->i && split->c->numel == 3 && (size_t)split->c->i[j] == c3 / 3;
    /* each part read once, by the Reshape into heads; any other Split is a layout op of its own */
    for (size_t j = 0; ok && j < 3; j++) {
        int readers;
        ok = n->output[j] && onnx_reader(cx, cx->node, n->output[j], "Reshape", &readers) >= 0 && readers == 1;
    }
    if (!ok) return onnx_map_split(cx, n, x, err);
    snug_status s = SNUG_OK;
    for (int j = 0; s == SNUG_OK && j < 3; j++)
        s = pend_out(cx, n, (size_t)j, (onnx_pending){.kind = ONNX_PEND_PART, .src = x->t, .part = j, .scale = 1},
                     err);
    return s;
}

static bool perm_is(const Onnx__NodeProto *n, int64_t a, int64_t b, int64_t c, int64_t d) {
    const Onnx__AttributeProto *p = onnx_attr(n, "perm");
    return p && p->n_ints == 4 && p->ints[0] == a && p->ints[1] == b && p->ints[2] == c && p->ints[3] == d;
}

/* The constant target of a Reshape: (batch, dims...) with `rank` entries after the batch. */
static const int64_t *reshape_target(onnx_ctx *cx, const Onnx__NodeProto *n, int rank) {
    const onnx_value *t = onnx_in(cx, n, 1);
    return t && t->c && t->c->i && t->c->numel == (size_t)rank + 1 ? t->c->i + 1 : NULL;
}

/* (T, 3C) of the qkv tensor */
static snug_shape src_shape(onnx_ctx *cx, const onnx_pending *p) { return snug_tensor_shape(cx->g, p->src); }

/* Where(mask, -inf, scores): the mask must hide exactly the keys after each query. */
static bool causal_mask(onnx_ctx *cx, const Onnx__NodeProto *n, size_t t) {
    const onnx_value *m = onnx_in(cx, n, 0);
    double fill = 0;
    if (!m || !m->c || !m->c->i || m->c->numel != t * t || !onnx_scalar(cx, n, 1, &fill) || !(fill <= -1e30))
        return false;
    for (size_t i = 0; i < t; i++)
        for (size_t j = 0; j < t; j++)
            if ((m->c->i[i * t + j] != 0) != (j > i)) return false;
    return true;
}

/* The final Reshape (T, C): the layer. */
static snug_status attention_out(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_pending *p, snug_error *err) {
    const snug_shape qkv = src_shape(cx, p);
    const size_t t = qkv.dims[0], c = qkv.dims[1] / 3, d = c / p->heads;
    const int64_t *to = reshape_target(cx, n, 2);
    if (!to || (to[0] != (int64_t)t && to[0] != 0) || (to[1] != (int64_t)c && to[1] != -1))
        return off_pattern(cx, "Reshape of the merged heads to (B, T, C)", err);
    if (fabs(p->scale * sqrt((double)d) - 1.0) > 1e-6)
        return onnx_fail(cx, err, SNUG_E_ARG, "the scores are scaled by %g, not 1/sqrt(D) = %g: snug's attention "
                         "scales by 1/sqrt(D)", p->scale, 1.0 / sqrt((double)d));
    char buf[SNUG_NAME_MAX];
    const snug_tensor y = snug_self_attention(cx->g, onnx_layer_name(cx, n, NULL, buf), p->src, p->heads, p->causal);
    const snug_shape shape = {.rank = 2, .dims = {t, c}};
    return onnx_set_out(cx, n, y, &shape, err);
}

/* MatMul of two pending values: q k^T (scores), or softmax times v. */
static snug_status attention_matmul(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_pending *a,
                                    const onnx_pending *b, snug_error *err) {
    if (a->src != b->src || a->heads != b->heads)
        return off_pattern(cx, "both sides from the same qkv tensor and heads", err);
    onnx_pending p = *a;
    if (a->kind == ONNX_PEND_HM && a->part == 0 && b->kind == ONNX_PEND_KT && b->part == 1)
        p.kind = ONNX_PEND_SCORES;
    else if (a->kind == ONNX_PEND_PROBS && b->kind == ONNX_PEND_HM && b->part == 2) p.kind = ONNX_PEND_OUT;
    else return off_pattern(cx, "q @ k^T or softmax @ v", err);
    return pend_out(cx, n, 0, p, err);
}

snug_status onnx_attention_step(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x = onnx_in(cx, n, 0), *y = onnx_in(cx, n, 1), *z = onnx_in(cx, n, 2);
    const char *op = n->op_type;
    if (strcmp(op, "Where") == 0 && z && z->p.kind == ONNX_PEND_SCORES) {
        onnx_pending p = z->p;
        if (!causal_mask(cx, n, src_shape(cx, &p).dims[0]))
            return off_pattern(cx, "Where(mask, -inf, scores) with the keys after each query masked", err);
        p.causal = true;
        return pend_out(cx, n, 0, p, err);
    }
    if (!x || x->p.kind == ONNX_PEND_NONE) {
        if (y && (y->p.kind == ONNX_PEND_ROWS || y->p.kind == ONNX_PEND_WT)) return onnx_rows_or_weight(cx, n, x, y, err);
        if (strcmp(op, "Mul") == 0 && y && y->p.kind == ONNX_PEND_SCORES) x = y, y = onnx_in(cx, n, 0); /* c * s */
        else return off_pattern(cx, "the pending value as the first input", err);
    }
    if (x->p.kind == ONNX_PEND_ROWS || x->p.kind == ONNX_PEND_WT) return onnx_rows_or_weight(cx, n, y, x, err);
    onnx_pending p = x->p;
    const snug_shape qkv = src_shape(cx, &p);
    double c = 0;
    switch (p.kind) {
    case ONNX_PEND_PART: {
        const int64_t *to = strcmp(op, "Reshape") == 0 ? reshape_target(cx, n, 3) : NULL;
        if (!to || to[0] != (int64_t)qkv.dims[0] || to[1] < 1 || to[2] < 1 || (size_t)(to[1] * to[2]) != qkv.dims[1] / 3)
            return off_pattern(cx, "Reshape of q, k or v to (B, T, H, D)", err);
        p.kind = ONNX_PEND_HEADS, p.heads = (size_t)to[1];
        break;
    }
    case ONNX_PEND_HEADS:
        if (strcmp(op, "Transpose") != 0) return off_pattern(cx, "Transpose(1, 2) of the heads", err);
        if (perm_is(n, 0, 2, 1, 3)) p.kind = ONNX_PEND_HM;
        else if (perm_is(n, 0, 2, 3, 1) && p.part == 1) p.kind = ONNX_PEND_KT;
        else return off_pattern(cx, "Transpose(1, 2) of the heads", err);
        break;
    case ONNX_PEND_HM:
        if (strcmp(op, "MatMul") == 0 && y) return attention_matmul(cx, n, &x->p, &y->p, err);
        if (strcmp(op, "Transpose") != 0 || !perm_is(n, 0, 1, 3, 2) || p.part != 1)
            return off_pattern(cx, "k.transpose(-2, -1), or q @ k^T", err);
        p.kind = ONNX_PEND_KT;
        break;
    case ONNX_PEND_SCORES:
        if (strcmp(op, "Div") == 0 && onnx_scalar(cx, n, 1, &c) && c != 0) p.scale /= c;
        else if (strcmp(op, "Mul") == 0 && onnx_scalar(cx, n, 1, &c)) p.scale *= c;
        else if (strcmp(op, "Softmax") == 0) {
            const Onnx__AttributeProto *axis = onnx_attr(n, "axis");
            if (axis && axis->i != -1 && axis->i != 3) return off_pattern(cx, "Softmax over the keys (axis -1)", err);
            p.kind = ONNX_PEND_PROBS;
        } else return off_pattern(cx, "the scores scaled by a constant, masked, or Softmax", err);
        break;
    case ONNX_PEND_PROBS:
        if (strcmp(op, "MatMul") == 0 && y) return attention_matmul(cx, n, &x->p, &y->p, err);
        return off_pattern(cx, "softmax @ v", err);
    case ONNX_PEND_OUT:
        if (strcmp(op, "Transpose") != 0 || !perm_is(n, 0, 2, 1, 3))
            return off_pattern(cx, "Transpose(1, 2) of the heads' outputs", err);
        p.kind = ONNX_PEND_OUT_T;
        break;
    case ONNX_PEND_OUT_T:
        if (strcmp(op, "Reshape") == 0) return attention_out(cx, n, &p, err);
        return off_pattern(cx, "Reshape to (B, T, C)", err);
    default:
        return off_pattern(cx, "a step of the pattern", err);
    }
    return pend_out(cx, n, 0, p, err);
}
