/* ONNX ops onto snug's builders, one function per op, chosen from a table. A layer with weights is named after
 * its weight's initializer ("layer1.0.conv1.weight" -> layer "layer1.0.conv1") and its parameters take the
 * initializers' names and values, so saved weights carry the exporting module's state_dict names. What snug
 * cannot train as written is refused here, naming the node, its op and the way out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/onnx_patterns.h"

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t j = 0; j < n->n_attribute; j++)
        if (n->attribute[j]->name && strcmp(n->attribute[j]->name, name) == 0) return n->attribute[j];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t fallback) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a ? a->i : fallback;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float fallback) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a ? a->f : fallback;
}

/* An ints attribute whose entries must all equal one value (square kernels, equal strides and pads); *v keeps
 * its fallback when the attribute is absent. False for unequal entries or a value outside [lo, 2^20]. */
bool onnx_attr_uniform(const Onnx__NodeProto *n, const char *name, int64_t lo, int64_t *v) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return true;
    if (a->n_ints == 0) return false;
    for (size_t j = 0; j < a->n_ints; j++)
        if (a->ints[j] != a->ints[0]) return false;
    *v = a->ints[0];
    return *v >= lo && *v <= (1 << 20);
}

/* ---- names, inputs and outputs ---- */

static bool name_free(const onnx_ctx *cx, const char *s) {
    return s && *s && strlen(s) < SNUG_NAME_MAX && graph_find_node(cx->g, s) < 0;
}

/* The layer's name: its weight's initializer without ".weight", else the node's name, else "<OpType>_<k>". */
const char *onnx_layer_name(onnx_ctx *cx, const Onnx__NodeProto *n, const char *weight, char *buf) {
    size_t len = weight ? strlen(weight) : 0;
    if (len > 7 && len - 7 < SNUG_NAME_MAX && strcmp(weight + len - 7, ".weight") == 0) {
        memcpy(buf, weight, len - 7);
        buf[len - 7] = '\0';
        if (name_free(cx, buf)) return buf;
    }
    if (name_free(cx, n->name)) return n->name;
    do snprintf(buf, SNUG_NAME_MAX, "%.40s_%d", n->op_type, cx->fallback_names++);
    while (!name_free(cx, buf));
    return buf;
}

onnx_value *onnx_input_value(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j) {
    return j < n->n_input && n->input[j] && *n->input[j] ? onnx_find(cx, n->input[j]) : NULL;
}

/* Input j as a snug tensor of snug rank `rank` (0: any). */
snug_status onnx_tensor_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, int rank, onnx_value **v,
                             snug_error *err) {
    *v = onnx_input_value(cx, n, j);
    if (!*v || (*v)->c)
        return onnx_fail(cx, err, SNUG_E_ARG, "input %zu must be a tensor computed from the model input, not %s",
                         j, *v ? "a constant" : "missing");
    const snug_shape s = snug_tensor_shape(cx->g, (*v)->t);
    if (rank && s.rank != rank)
        return onnx_fail(cx, err, SNUG_E_ARG, "input '%s' has %d per-sample dimensions here, %d expected (snug "
                         "maps this op for %s)", (*v)->name, s.rank, rank,
                         rank == 3 ? "images (N, C, H, W)" : "vectors (N, F)");
    return SNUG_OK;
}

snug_status onnx_const_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, int rank, onnx_value **v,
                            snug_error *err) {
    *v = onnx_input_value(cx, n, j);
    if (!*v || !(*v)->c || !(*v)->c->f || (rank && (*v)->c->rank != rank))
        return onnx_fail(cx, err, SNUG_E_ARG, "input %zu must be a float initializer of rank %d (a weight): "
                         "snug trains weights held in initializers", j, rank);
    return SNUG_OK;
}

snug_status onnx_set_out(onnx_ctx *cx, const Onnx__NodeProto *n, snug_tensor t, const snug_shape *onnx_shape,
                           snug_error *err) {
    if (t < 0) {
        snug_error e = {0};
        snug_graph_check(cx->g, &e);
        return onnx_fail(cx, err, e.status, "%s", e.message);
    }
    const snug_shape shape = onnx_shape ? *onnx_shape : snug_tensor_shape(cx->g, t);
    onnx_value *v = n->n_output >= 1 && n->output[0] && *n->output[0] ? onnx_add(cx, n->output[0]) : NULL;
    if (!v) return onnx_fail(cx, err, SNUG_E_FORMAT, "the node has no output name");
    v->t = t;
    v->shape = shape;
    return SNUG_OK;
}

/* Parameter k of the layer that made t starts from constant c (transposed for a (K, N) MatMul weight) and takes
 * its name. NULL c: the layer has no such parameter (a Conv or Gemm without bias is built without one). */
snug_status onnx_bind_param(onnx_ctx *cx, snug_tensor t, int k, onnx_value *cv, bool transpose, snug_error *err) {
    if (!cv) return SNUG_OK;
    graph_param *p = &cx->g->params[cx->g->nodes[cx->g->tensors[t].producer].params[k]];
    const onnx_const *c = cv->c;
    if (cv->bound)
        return onnx_fail(cx, err, SNUG_E_ARG, "initializer '%s' is a parameter of an earlier layer too: tied "
                         "weights are not mapped yet", cv->name);
    bool same = c->numel == p->numel; /* a bias may come as (N) or (1, N) */
    if (same && transpose)
        same = c->rank == 2 && (size_t)c->dims[0] == p->shape.dims[1] && (size_t)c->dims[1] == p->shape.dims[0];
    else if (same && p->shape.rank > 1)
        for (int d = 0; same && d < p->shape.rank; d++) same = c->rank == p->shape.rank && (size_t)c->dims[d] == p->shape.dims[d];
    if (!same)
        return onnx_fail(cx, err, SNUG_E_SHAPE, "initializer '%s' has %zu elements in a shape that is not the "
                         "%s of layer '%s' (%zu elements)", cv->name, c->numel, p->name, cx->g->nodes[p->node].name,
                         p->numel);
    if (!(p->values = malloc(p->numel * sizeof *p->values)))
        return onnx_fail(cx, err, SNUG_E_OOM, "out of memory copying initializer '%s'", cv->name);
    const size_t rows = transpose ? p->shape.dims[0] : 0, cols = transpose ? p->shape.dims[1] : 0;
    for (size_t j = 0; j < p->numel; j++)
        p->values[j] = transpose ? c->f[(j % cols) * rows + j / cols] : c->f[j];
    if (strlen(cv->name) < sizeof p->name) snprintf(p->name, sizeof p->name, "%s", cv->name);
    cv->bound = true;
    return SNUG_OK;
}

/* ---- the ops ---- */

/* A layer's inputs: x a tensor of snug rank x_rank, weight a float initializer of rank w_rank, the optional
 * bias (input 2) one too. */
static snug_status layer_inputs(onnx_ctx *cx, const Onnx__NodeProto *n, int x_rank, int w_rank, onnx_value **x,
                                onnx_value **w, onnx_value **b, snug_error *err) {
    *b = onnx_input_value(cx, n, 2);
    snug_status s = onnx_tensor_in(cx, n, 0, x_rank, x, err);
    if (s == SNUG_OK) s = onnx_const_in(cx, n, 1, w_rank, w, err);
    if (s == SNUG_OK && *b) s = onnx_const_in(cx, n, 2, 0, b, err);
    return s;
}

/* An ints attribute of exactly `count` entries, each in [lo, 2^20], into v (kept when the attribute is absent). */
static bool attr_ints(const Onnx__NodeProto *n, const char *name, size_t count, int64_t lo, int64_t *v) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return true;
    if (a->n_ints != count) return false;
    for (size_t j = 0; j < count; j++) {
        if (a->ints[j] < lo || a->ints[j] > (1 << 20)) return false;
        v[j] = a->ints[j];
    }
    return true;
}

static snug_status map_conv(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *w, *b;
    snug_status s = layer_inputs(cx, n, 3, 4, &x, &w, &b, err);
    if (s != SNUG_OK) return s;
    if (w->c->numel == 0) return onnx_fail(cx, err, SNUG_E_ARG, "weight '%s' is empty", w->name);
    int64_t k[2] = {w->c->dims[2], w->c->dims[3]}, stride[2] = {1, 1}, pad[4] = {0, 0, 0, 0}, dil = 1;
    const int64_t group = onnx_attr_int(n, "group", 1);
    const Onnx__AttributeProto *ap = onnx_attr(n, "auto_pad");
    if (!attr_ints(n, "kernel_shape", 2, 1, k) || k[0] != w->c->dims[2] || k[1] != w->c->dims[3])
        return onnx_fail(cx, err, SNUG_E_ARG, "kernel_shape does not match weight '%s' (%lldx%lld): export the "
                         "layer again", w->name, (long long)w->c->dims[2], (long long)w->c->dims[3]);
    if (!attr_ints(n, "strides", 2, 1, stride) || !attr_ints(n, "pads", 4, 0, pad) || pad[0] != pad[2] ||
        pad[1] != pad[3] || !onnx_attr_uniform(n, "dilations", 1, &dil) || group < 1 ||
        (ap && ap->has_s && !(ap->s.len == 6 && memcmp(ap->s.data, "NOTSET", 6) == 0)))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug's convolutions take one dilation for both axes, the same "
                         "padding at both ends of an axis and explicit pads (no auto_pad): change the layer");
    char buf[SNUG_NAME_MAX];
    const char *name = onnx_layer_name(cx, n, w->name, buf);
    const snug_conv2d_spec spec = {.out_channels = (size_t)w->c->dims[0], .kernel = (size_t)k[0],
                                   .stride = (size_t)stride[0], .padding = (size_t)pad[0], .dilation = (size_t)dil,
                                   .groups = (size_t)group, .no_bias = !b, .kernel_w = (size_t)k[1],
                                   .stride_w = (size_t)stride[1], .padding_w = (size_t)pad[1]};
    snug_tensor t = snug_conv2d_ex(cx->g, name, x->t, &spec);
    if ((s = onnx_set_out(cx, n, t, NULL, err)) != SNUG_OK) return s;
    if ((s = onnx_bind_param(cx, t, 0, w, false, err)) != SNUG_OK) return s;
    return onnx_bind_param(cx, t, 1, b, false, err);
}

/* A linear layer y = x W^T + b: Gemm's B as it is (transB = 1, PyTorch's layout) or transposed. */
static snug_status linear_layer(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *w, bool w_kn,
                                onnx_value *b, snug_error *err) {
    const size_t out = (size_t)w->c->dims[w_kn ? 1 : 0];
    if (w->c->numel == 0) return onnx_fail(cx, err, SNUG_E_ARG, "weight '%s' is empty", w->name);
    if (b && b->c->numel != out)
        return onnx_fail(cx, err, SNUG_E_SHAPE, "bias '%s' has %zu elements for %zu outputs", b->name,
                         b->c->numel, out);
    char buf[SNUG_NAME_MAX];
    const char *name = onnx_layer_name(cx, n, w->name, buf);
    snug_tensor t = b ? snug_linear(cx->g, name, x->t, out) : snug_linear_no_bias(cx->g, name, x->t, out);
    snug_status s = onnx_set_out(cx, n, t, NULL, err);
    if (s == SNUG_OK) s = onnx_bind_param(cx, t, 0, w, w_kn, err);
    return s == SNUG_OK ? onnx_bind_param(cx, t, 1, b, false, err) : s;
}

static snug_status map_gemm(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *w, *b;
    snug_status s = layer_inputs(cx, n, 1, 2, &x, &w, &b, err);
    if (s != SNUG_OK) return s;
    if (onnx_attr_int(n, "transA", 0) != 0 || attr_float(n, "alpha", 1.0f) != 1.0f || attr_float(n, "beta", 1.0f) != 1.0f)
        return onnx_fail(cx, err, SNUG_E_ARG, "snug maps Gemm with transA = 0, alpha = 1 and beta = 1 (what "
                         "torch.nn.Linear exports)");
    return linear_layer(cx, n, x, w, onnx_attr_int(n, "transB", 0) == 0, b, err);
}

/* MatMul by a (K, N) initializer, and the Add of a bias right after it when that Add is its only reader. */
static snug_status map_matmul(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x = onnx_input_value(cx, n, 0), *w = onnx_input_value(cx, n, 1), *b = NULL;
    if (x && w && !x->c && !w->c) return onnx_map_matmul_pair(cx, n, x, w, err); /* a @ b of activations */
    snug_status s = onnx_tensor_in(cx, n, 0, 1, &x, err);
    if (s == SNUG_OK) s = onnx_const_in(cx, n, 1, 2, &w, err);
    if (s != SNUG_OK) return s;
    const Onnx__NodeProto *reader = NULL;
    int at = -1, readers = 0;
    for (size_t j = (size_t)cx->node + 1; j < cx->gp->n_node; j++)
        for (size_t i = 0; i < cx->gp->node[j]->n_input; i++)
            if (cx->gp->node[j]->input[i] && strcmp(cx->gp->node[j]->input[i], n->output[0]) == 0)
                readers++, reader = cx->gp->node[j], at = (int)j;
    for (size_t i = 0; i < cx->gp->n_output; i++)
        if (cx->gp->output[i]->name && strcmp(cx->gp->output[i]->name, n->output[0]) == 0) readers++;
    /* one reader, a node (not the graph's output) */
    if (readers == 1 && reader && strcmp(reader->op_type, "Add") == 0 && reader->n_input == 2 &&
        reader->n_output >= 1) {
        b = onnx_input_value(cx, reader, strcmp(reader->input[0], n->output[0]) == 0 ? 1 : 0);
        if (b && (!b->c || !b->c->f || b->c->numel != (size_t)w->c->dims[1])) b = NULL;
    }
    if ((s = linear_layer(cx, n, x, w, true, b, err)) != SNUG_OK || !b) return s;
    onnx_value *sum = onnx_add(cx, reader->output[0]), *prod = onnx_find(cx, n->output[0]);
    if (!sum) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
    sum->t = prod->t;
    sum->shape = prod->shape;
    cx->skip[at] = true;
    return SNUG_OK;
}

static snug_status map_add(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *a = onnx_input_value(cx, n, 0), *b = onnx_input_value(cx, n, 1);
    /* x + c, and tensors of two shapes (broadcasting): the arithmetic's; a residual of one shape: add */
    if (!a || !b || a->c || b->c || a->p.kind != ONNX_PEND_NONE || b->p.kind != ONNX_PEND_NONE ||
        !shape_same(&a->shape, &b->shape) ||
        !shape_same(&graph_tensor_at(cx->g, a->t)->shape, &graph_tensor_at(cx->g, b->t)->shape))
        return onnx_map_arith(cx, n, err);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_add(cx->g, onnx_layer_name(cx, n, NULL, buf), a->t, b->t), &a->shape, err);
}

/* An element-wise activation of a computed tensor of any shape: the snug builder of the same name. */
static snug_status map_activation(onnx_ctx *cx, const Onnx__NodeProto *n,
                                  snug_tensor (*build)(snug_graph *, const char *, snug_tensor), snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    char buf[SNUG_NAME_MAX];
    return s != SNUG_OK ? s : onnx_set_out(cx, n, build(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t), &x->shape, err);
}

static snug_status map_relu(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    return map_activation(cx, n, snug_relu, err);
}

static snug_status map_sigmoid(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    return map_activation(cx, n, snug_sigmoid, err);
}

static snug_status map_tanh(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    return map_activation(cx, n, snug_tanh, err);
}

static snug_status map_batchnorm(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *stats[4];
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    for (size_t j = 0; s == SNUG_OK && j < 4; j++) s = onnx_const_in(cx, n, j + 1, 1, &stats[j], err);
    if (s != SNUG_OK) return s;
    /* ONNX's momentum is the share the running statistics keep, PyTorch's (snug's) the new batch's: an exported
     * 0.1 arrives as the float 0.9f, whose complement is 0.1 only to six digits, which recovers it */
    char digits[32];
    snprintf(digits, sizeof digits, "%.6g", 1.0 - (double)attr_float(n, "momentum", 0.9f));
    const float eps = attr_float(n, "epsilon", 1e-5f), momentum = strtof(digits, NULL);
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_batchnorm2d(cx->g, onnx_layer_name(cx, n, stats[0]->name, buf), x->t, eps, momentum);
    if ((s = onnx_set_out(cx, n, t, NULL, err)) != SNUG_OK) return s;
    for (int k = 0; s == SNUG_OK && k < 4; k++) s = onnx_bind_param(cx, t, k, stats[k], false, err);
    return s;
}

static snug_status map_maxpool(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    if (s != SNUG_OK) return s;
    int64_t k = 0, stride = 1, pad = 0, dil = 1;
    if (!onnx_attr(n, "kernel_shape") || !onnx_attr_uniform(n, "kernel_shape", 1, &k) ||
        !onnx_attr_uniform(n, "strides", 1, &stride) || !onnx_attr_uniform(n, "dilations", 1, &dil) || dil != 1 ||
        onnx_attr_int(n, "ceil_mode", 0) != 0 || !onnx_attr_uniform(n, "pads", 0, &pad) || pad > k / 2 ||
        onnx_attr(n, "auto_pad") || n->n_output > 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "snug's max pooling takes a square kernel, one stride, the same "
                         "padding on every side (at most half the kernel), no dilation, no ceil_mode and no "
                         "Indices output: change the layer");
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_maxpool2d_padded(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, (size_t)k, (size_t)stride,
                                          (size_t)pad);
    return onnx_set_out(cx, n, t, NULL, err);
}

/* GlobalAveragePool, and AveragePool whose window is the whole plane: snug's (C), ONNX's (C, 1, 1). */
static snug_status map_avgpool(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    if (s != SNUG_OK) return s;
    if (strcmp(n->op_type, "AveragePool") == 0) {
        const Onnx__AttributeProto *k = onnx_attr(n, "kernel_shape");
        int64_t pad = 0;
        if (!k || k->n_ints != 2 || (size_t)k->ints[0] != x->shape.dims[1] || (size_t)k->ints[1] != x->shape.dims[2] ||
            !onnx_attr_uniform(n, "pads", 0, &pad) || pad != 0 || onnx_attr_int(n, "ceil_mode", 0) != 0)
            return onnx_fail(cx, err, SNUG_E_ARG, "snug maps AveragePool only over the whole plane (global "
                             "average pooling) yet");
    }
    char buf[SNUG_NAME_MAX];
    snug_tensor t = snug_global_avgpool(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t);
    const snug_shape s3 = {.rank = 3, .dims = {x->shape.dims[0], 1, 1}};
    return onnx_set_out(cx, n, t, &s3, err);
}

/* A view to (numel): snug_flatten, or the tensor itself when snug already holds it flat. */
static snug_status flat_out(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err) {
    char buf[SNUG_NAME_MAX];
    const snug_tensor t = snug_tensor_shape(cx->g, x->t).rank == 1
                              ? x->t : snug_flatten(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t);
    return onnx_set_out(cx, n, t, NULL, err);
}

static snug_status map_flatten(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    int64_t axis = onnx_attr_int(n, "axis", 1);
    if (axis < 0) axis += x->shape.rank + 1;
    if (axis != 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "Flatten with axis %lld: snug flattens each sample (axis 1)",
                         (long long)onnx_attr_int(n, "axis", 1));
    return flat_out(cx, n, x, err);
}

/* Reshape to (batch, -1) or (batch, numel) is a flatten; to the same shape, nothing. The first entry is the
 * batch: Shape's folded batch, 0 (copy), -1 or the exported batch size. */
static snug_status map_reshape(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *sv = onnx_input_value(cx, n, 1);
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    const onnx_const *c = sv ? sv->c : NULL;
    if (!c || !c->i || c->rank != 1 || c->numel < 1 || c->numel > SNUG_MAX_DIMS + 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "the target shape must be a constant int64 vector once the shape "
                         "computations are folded: a shape that depends on data is dynamic, which snug cannot plan");
    size_t numel = 1, known = 1;
    for (int d = 0; d < x->shape.rank; d++) numel *= x->shape.dims[d];
    int infer = -1;
    snug_shape out = {.rank = (int)c->numel - 1};
    for (int d = 1; d < (int)c->numel; d++) {
        int64_t v = c->i[d];
        if (v == 0 && d - 1 < x->shape.rank) v = (int64_t)x->shape.dims[d - 1];
        if (v == -1 && infer < 0) infer = d - 1;
        else if (v < 1) return onnx_fail(cx, err, SNUG_E_ARG, "target shape entry %d is %lld", d, (long long)v);
        else out.dims[d - 1] = (size_t)v, known *= (size_t)v;
    }
    if (infer >= 0 && known && numel % known == 0) out.dims[infer] = numel / known, known = numel;
    if (known != numel || c->i[0] == -1 || out.rank > SNUG_MAX_DIMS)
        return onnx_fail(cx, err, SNUG_E_SHAPE, "the target shape does not keep the batch first and each "
                         "sample's %zu elements", numel);
    if (out.rank == 1) return flat_out(cx, n, x, err);
    bool same = out.rank == x->shape.rank;
    for (int d = 0; same && d < out.rank; d++) same = out.dims[d] == x->shape.dims[d];
    if (same) return onnx_set_out(cx, n, x->t, &x->shape, err);
    if (onnx_group_view(cx, n, x, &out)) return onnx_set_out(cx, n, x->t, &out, err);
    if (onnx_unit_axes_view(cx, x, &out)) return onnx_set_out(cx, n, x->t, &out, err);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_reshape(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, out), NULL, err);
}

static snug_status map_identity(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    return s != SNUG_OK ? s : onnx_set_out(cx, n, x->t, &x->shape, err);
}

static snug_status map_dropout(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *ratio = onnx_input_value(cx, n, 1);
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &x, err);
    if (s != SNUG_OK) return s;
    if (ratio && (!ratio->c || !ratio->c->f || ratio->c->numel != 1))
        return onnx_fail(cx, err, SNUG_E_ARG, "the ratio must be a constant float");
    const float p = ratio ? ratio->c->f[0] : 0.5f;
    if (p == 0.0f) return onnx_set_out(cx, n, x->t, &x->shape, err);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_dropout(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, p), &x->shape, err);
}

typedef struct op_map {
    const char *op_type;
    snug_status (*map)(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
} op_map;

static const op_map OP_MAPS[] = {
    {"Conv", map_conv},         {"Gemm", map_gemm},
    {"MatMul", map_matmul},     {"Add", map_add},
    {"Relu", map_relu},         {"BatchNormalization", map_batchnorm},
    {"MaxPool", map_maxpool},   {"GlobalAveragePool", map_avgpool},
    {"AveragePool", map_avgpool}, {"Flatten", map_flatten},
    {"Reshape", map_reshape},   {"Identity", map_identity},
    {"Dropout", map_dropout},   {"Sigmoid", map_sigmoid},
    {"Tanh", map_tanh},
    /* image models (onnx_ops_image.c) */
    {"ConvTranspose", onnx_map_conv_transpose}, {"Concat", onnx_map_concat},
    {"InstanceNormalization", onnx_map_instance_norm}, {"Resize", onnx_map_resize},
    {"Upsample", onnx_refuse_upsample},
    /* sequence models (onnx_ops_sequence.c): onnx_map_sequence takes these ops where a pattern begins or goes
     * on; met anywhere else they are refused by onnx_map_pattern_only, which says which pattern snug maps */
    {"Gather", onnx_map_pattern_only}, {"Where", onnx_map_pattern_only},
    /* layout ops outside the patterns (onnx_ops_layout.c) */
    {"Slice", onnx_map_layout}, {"Split", onnx_map_layout}, {"Transpose", onnx_map_layout},
    {"Softmax", onnx_map_layout}, {"Squeeze", onnx_map_layout}, {"Unsqueeze", onnx_map_layout},
    {"ReduceMean", onnx_map_pattern_only}, {"Sub", onnx_map_arith}, {"Mul", onnx_map_arith},
    {"Div", onnx_map_arith}, {"Pow", onnx_map_pattern_only}, {"Sqrt", onnx_map_pattern_only},
    {"Erf", onnx_map_pattern_only}, {"Not", onnx_map_pattern_only},
    {"LayerNormalization", onnx_map_pattern_only},
};

snug_status onnx_map_node(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
        return onnx_fail(cx, err, SNUG_E_ARG, "domain '%s' is not ONNX's own: export without custom ops",
                         n->domain);
    bool taken = false; /* sequence models: patterns first (onnx_ops_sequence.c) */
    const snug_status s = onnx_map_sequence(cx, n, &taken, err);
    if (taken) return s;
    for (size_t j = 0; j < sizeof OP_MAPS / sizeof OP_MAPS[0]; j++)
        if (strcmp(n->op_type, OP_MAPS[j].op_type) == 0) return OP_MAPS[j].map(cx, n, err);
    return onnx_fail(cx, err, SNUG_E_ARG, "snug does not train this op yet (docs/onnx.md lists those it maps): "
                     "change the layer, or export with training=torch.onnx.TrainingMode.TRAINING and "
                     "do_constant_folding=False so that the exporter writes layers as PyTorch has them");
}
