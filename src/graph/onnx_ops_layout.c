/* Layout ops and products of activations outside the fused patterns, onto snug's layout layers: Transpose
 * (snug_permute), Slice and Split (snug_slice, one per axis or part), Softmax along an axis (snug_softmax),
 * MatMul of two computed tensors (snug_matmul), and Reshape to any shape that keeps the batch first, Squeeze and
 * Unsqueeze (snug_reshape, a view). ONNX axes count the batch as axis 0; snug's count per sample, so axis a of the file
 * is snug's a - 1, and an op along the batch axis is refused (snug's batch is the plan's, split into
 * micro-batches at will). */
#include <stdio.h>
#include <string.h>

#include "core/shape.h"
#include "graph/onnx_patterns.h"

const char *onnx_part_name(onnx_ctx *cx, const Onnx__NodeProto *n, const char *suffix, char *buf) {
    snprintf(buf, SNUG_NAME_MAX, "%.40s%.20s", n->name && *n->name ? n->name : n->op_type, suffix);
    while (graph_find_node(cx->g, buf) >= 0) snprintf(buf, SNUG_NAME_MAX, "%.40s_%d", n->op_type, cx->fallback_names++);
    return buf;
}

/* x as a snug tensor of its ONNX per-sample shape: a view where snug's differs in unit axes (GlobalAveragePool's
 * (C, 1, 1) is snug's (C)). */
static snug_tensor onnx_shaped(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_value *x) {
    const snug_shape s = snug_tensor_shape(cx->g, x->t);
    char buf[SNUG_NAME_MAX];
    return shape_same(&s, &x->shape) ? x->t : snug_reshape(cx->g, onnx_part_name(cx, n, "/view", buf), x->t, x->shape);
}

/* The name of part k of a node that becomes several layers: the node's for the first, then "<node>:k". */
static const char *part_name(onnx_ctx *cx, const Onnx__NodeProto *n, size_t k, char *buf) {
    char suffix[24];
    snprintf(suffix, sizeof suffix, ":%zu", k);
    return k == 0 ? onnx_layer_name(cx, n, NULL, buf) : onnx_part_name(cx, n, suffix, buf);
}

/* ONNX axis a of a tensor of `rank` per-sample axes (negative from the end) as snug's per-sample axis. */
static snug_status sample_axis(onnx_ctx *cx, int64_t a, int rank, int *axis, snug_error *err) {
    if (a < 0) a += rank + 1;
    if (a == 0)
        return onnx_fail(cx, err, SNUG_E_ARG, "%s along the batch axis: snug splits the batch into micro-batches "
                         "as its plan chooses, so an op must act within each sample; export the op along the "
                         "sample's axes", cx->gp->node[cx->node]->op_type);
    if (a < 0 || a > rank)
        return onnx_fail(cx, err, SNUG_E_ARG, "axis %lld is not an axis of a tensor of %d dimensions", (long long)a,
                         rank + 1);
    *axis = (int)a - 1;
    return SNUG_OK;
}

static snug_status map_transpose(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    const Onnx__AttributeProto *p = onnx_attr(n, "perm");
    const int rank = x->shape.rank;
    int perm[SNUG_MAX_DIMS];
    bool ok = p && p->n_ints == (size_t)rank + 1 && p->ints[0] == 0;
    for (int i = 0; ok && i < rank; i++) {
        ok = p->ints[i + 1] >= 1 && p->ints[i + 1] <= rank;
        perm[i] = ok ? (int)p->ints[i + 1] - 1 : 0; /* each axis once: snug_permute checks */
    }
    if (!ok)
        return onnx_fail(cx, err, SNUG_E_ARG, "perm must keep the batch axis first and list each of the %d axes "
                         "once (x.permute(0, ...) or x.transpose(i, j) with i, j >= 1)", rank + 1);
    const snug_tensor in = onnx_shaped(cx, n, x);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_permute(cx->g, onnx_layer_name(cx, n, NULL, buf), in, perm), NULL, err);
}

/* Input j of n as a constant int64 vector of `count` entries (count 0: any), or NULL. */
static const onnx_const *int_vector(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, size_t count) {
    const onnx_value *v = onnx_in(cx, n, j);
    return v && v->c && v->c->i && v->c->rank <= 1 && (count == 0 || v->c->numel == count) ? v->c : NULL;
}

/* start and end of a Slice on an axis of `dim` entries, clamped as ONNX does for a positive step. */
static size_t slice_bound(int64_t v, size_t dim) {
    if (v < 0) v += (int64_t)dim;
    return v < 0 ? 0 : (uint64_t)v > dim ? dim : (size_t)v;
}

static snug_status map_slice(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    const onnx_const *starts = int_vector(cx, n, 1, 0);
    const size_t k = starts ? starts->numel : 0;
    const onnx_const *ends = int_vector(cx, n, 2, k), *axes = int_vector(cx, n, 3, k), *steps = int_vector(cx, n, 4, k);
    if (!starts || !ends || (onnx_in(cx, n, 3) && !axes) || (onnx_in(cx, n, 4) && !steps))
        return onnx_fail(cx, err, SNUG_E_ARG, "starts, ends, axes and steps must be constant int64 vectors of one "
                         "length: a slice that depends on data has a dynamic shape, which snug cannot plan");
    snug_tensor t = onnx_shaped(cx, n, x);
    snug_shape shape = x->shape;
    size_t made = 0;
    for (size_t j = 0; j < k && s == SNUG_OK; j++) {
        int axis = 0;
        if ((s = sample_axis(cx, axes ? axes->i[j] : (int64_t)j, shape.rank, &axis, err)) != SNUG_OK) return s;
        const int64_t step = steps ? steps->i[j] : 1;
        if (step < 1)
            return onnx_fail(cx, err, SNUG_E_ARG, "step %lld: snug slices with positive steps only (x[a:b:c], c >= "
                             "1); reverse with another op", (long long)step);
        const size_t dim = shape.dims[axis], lo = slice_bound(starts->i[j], dim), hi = slice_bound(ends->i[j], dim);
        if (hi <= lo)
            return onnx_fail(cx, err, SNUG_E_SHAPE, "the slice [%zu, %zu) of axis %d is empty", lo, hi, axis + 1);
        const size_t len = (hi - lo + (size_t)step - 1) / (size_t)step;
        if (len == dim) continue; /* the whole axis: nothing to do */
        char buf[SNUG_NAME_MAX];
        t = snug_slice(cx->g, part_name(cx, n, made++, buf), t, axis, lo, len, (size_t)step);
        shape.dims[axis] = len;
    }
    return onnx_set_out(cx, n, t, &shape, err);
}

/* Split with constant sizes (input 1), or into n_output equal parts; one snug_slice per output. */
snug_status onnx_map_split(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    int axis = 0;
    snug_status s = sample_axis(cx, onnx_attr_int(n, "axis", 0), x->shape.rank, &axis, err);
    if (s != SNUG_OK) return s;
    const onnx_const *sizes = int_vector(cx, n, 1, n->n_output);
    const size_t dim = x->shape.dims[axis], parts = n->n_output;
    if ((onnx_in(cx, n, 1) && !sizes) || parts == 0 || (!sizes && dim % parts != 0))
        return onnx_fail(cx, err, SNUG_E_ARG, "the split sizes must be a constant int64 vector, one per output, or "
                         "absent with the axis's %zu entries divisible by the %zu outputs", dim, parts);
    size_t at = 0;
    const snug_tensor t = onnx_shaped(cx, n, x);
    for (size_t j = 0; j < parts && s == SNUG_OK; j++) {
        const int64_t len = sizes ? sizes->i[j] : (int64_t)(dim / parts);
        if (len < 1 || (uint64_t)len > dim - at)
            return onnx_fail(cx, err, SNUG_E_SHAPE, "split sizes do not add up to the %zu entries of axis %d", dim,
                             axis + 1);
        char buf[SNUG_NAME_MAX];
        snug_shape shape = x->shape;
        shape.dims[axis] = (size_t)len;
        int readers = 0;
        if (n->output[j] && *n->output[j]) onnx_reader(cx, cx->node, n->output[j], "", &readers);
        if (readers == 0) { /* a part nothing reads (x[:, :4] of a split in two) is no layer */
            at += (size_t)len;
            continue;
        }
        onnx_value *out = onnx_add(cx, n->output[j]);
        if (!out) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
        out->t = (size_t)len == dim ? t : snug_slice(cx->g, part_name(cx, n, j, buf), t, axis, at, (size_t)len, 1);
        out->shape = shape;
        if (out->t < 0) return onnx_set_out(cx, n, out->t, NULL, err); /* the builder's message */
        at += (size_t)len;
    }
    if (at != dim)
        return onnx_fail(cx, err, SNUG_E_SHAPE, "split sizes add up to %zu, not the %zu entries of axis %d", at, dim,
                         axis + 1);
    return SNUG_OK;
}

static snug_status map_split(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    return s != SNUG_OK ? s : onnx_map_split(cx, n, x, err);
}

static snug_status map_softmax(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    if (cx->gp->n_output == 1 && cx->gp->output[0]->name && strcmp(n->output[0], cx->gp->output[0]->name) == 0)
        return onnx_map_pattern_only(cx, n, err); /* the model's output: refused, the loss applies its own */
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    int axis = 0;
    if (s == SNUG_OK) s = sample_axis(cx, onnx_attr_int(n, "axis", -1), x->shape.rank, &axis, err);
    if (s != SNUG_OK) return s;
    const snug_tensor in = onnx_shaped(cx, n, x);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_softmax(cx->g, onnx_layer_name(cx, n, NULL, buf), in, axis), NULL, err);
}

/* Which per-sample axes Squeeze drops (Unsqueeze adds: axes of the output) into `marked`: input 1's constant
 * axes, or for a Squeeze without them every axis of size 1. The output's per-sample rank into *out_rank. */
static snug_status squeezed_axes(onnx_ctx *cx, const Onnx__NodeProto *n, const snug_shape *in, bool add,
                                 bool *marked, int *out_rank, snug_error *err) {
    const onnx_const *axes = int_vector(cx, n, 1, 0);
    if ((add || onnx_in(cx, n, 1)) && !axes)
        return onnx_fail(cx, err, SNUG_E_ARG, "axes must be a constant int64 vector (input 1, opset 13 and "
                         "later): axes that depend on data make a dynamic shape, which snug cannot plan");
    int drop = 0;
    for (int d = 0; !axes && d < in->rank; d++) drop += marked[d] = in->dims[d] == 1;
    *out_rank = add ? in->rank + (int)axes->numel : in->rank - (axes ? (int)axes->numel : drop);
    if (*out_rank < 1 || *out_rank > SNUG_MAX_DIMS)
        return onnx_fail(cx, err, SNUG_E_SHAPE, "the result would have %d axes per sample; snug's tensors have 1 "
                         "to %d", *out_rank, SNUG_MAX_DIMS);
    for (size_t j = 0; axes && j < axes->numel; j++) {
        int axis = 0;
        snug_status s = sample_axis(cx, axes->i[j], add ? *out_rank : in->rank, &axis, err);
        if (s != SNUG_OK) return s;
        if (marked[axis]) return onnx_fail(cx, err, SNUG_E_ARG, "axis %d is listed twice", axis + 1);
        if (!add && in->dims[axis] != 1)
            return onnx_fail(cx, err, SNUG_E_SHAPE, "axis %d has %zu entries: Squeeze drops axes of size 1 only",
                             axis + 1, in->dims[axis]);
        marked[axis] = true;
    }
    return SNUG_OK;
}

/* Squeeze and Unsqueeze of a computed tensor (x.squeeze(-1), s[:, :, None, None]): the same elements with axes
 * of size 1 dropped or added, onto snug_reshape (a view: no copy, no kernel). The batch axis stays. */
static snug_status map_squeeze(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    const bool add = strcmp(n->op_type, "Unsqueeze") == 0;
    bool marked[SNUG_MAX_DIMS + 1] = {false};
    int out_rank = 0;
    if ((s = squeezed_axes(cx, n, &x->shape, add, marked, &out_rank, err)) != SNUG_OK) return s;
    snug_shape out = {.rank = out_rank};
    for (int o = 0, i = 0; add && o < out_rank; o++) out.dims[o] = marked[o] ? 1 : x->shape.dims[i++];
    for (int d = 0, o = 0; !add && d < x->shape.rank; d++)
        if (!marked[d]) out.dims[o++] = x->shape.dims[d];
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_reshape(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, out), NULL, err);
}

/* MatMul of two computed tensors of one rank: snug_matmul over each sample. */
snug_status onnx_map_matmul_pair(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *a, onnx_value *b,
                                 snug_error *err) {
    if (a->shape.rank != b->shape.rank || a->shape.rank < 2)
        return onnx_fail(cx, err, SNUG_E_ARG, "MatMul of two computed tensors of %d and %d dimensions: snug "
                         "multiplies tensors of one rank, at least 3 with the batch (unsqueeze the smaller)",
                         a->shape.rank + 1, b->shape.rank + 1);
    const snug_tensor ta = onnx_shaped(cx, n, a), tb = onnx_shaped(cx, n, b);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_matmul(cx->g, onnx_layer_name(cx, n, NULL, buf), ta, tb), NULL, err);
}

snug_status onnx_map_layout(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    const char *op = n->op_type;
    if (strcmp(op, "Transpose") == 0) return map_transpose(cx, n, err);
    if (strcmp(op, "Slice") == 0) return map_slice(cx, n, err);
    if (strcmp(op, "Split") == 0) return map_split(cx, n, err);
    if (strcmp(op, "Softmax") == 0) return map_softmax(cx, n, err);
    if (strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0) return map_squeeze(cx, n, err);
    return onnx_map_pattern_only(cx, n, err);
}
