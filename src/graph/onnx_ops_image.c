/* ONNX ops of image models (UNets) onto snug's builders: ConvTranspose, Concat of tensors on the channel axis,
 * Resize (nearest, a whole factor), InstanceNormalization, and the GroupNorm PyTorch exports, which is no ONNX
 * op but five nodes (Reshape to (groups, -1), InstanceNormalization with unit scale and zero bias, Reshape
 * back, Mul by the weight, Add of the bias): they become one snug groupnorm whose weight and bias are the
 * module's initializers, so the plan is the zoo's and the saved weights carry the state_dict's names. */
#include <string.h>

#include "core/error.h"
#include "graph/onnx_import.h"

/* ---- looking ahead in the file ---- */

/* The node that reads value `name`, when it is the one reader (no graph output either) and of type op; or -1. */
static int sole_reader(const onnx_ctx *cx, const char *name, const char *op) {
    int at = -1, readers = 0;
    for (size_t j = (size_t)cx->node + 1; j < cx->gp->n_node; j++)
        for (size_t i = 0; i < cx->gp->node[j]->n_input; i++)
            if (cx->gp->node[j]->input[i] && strcmp(cx->gp->node[j]->input[i], name) == 0) readers++, at = (int)j;
    for (size_t i = 0; i < cx->gp->n_output; i++)
        if (cx->gp->output[i]->name && strcmp(cx->gp->output[i]->name, name) == 0) readers++;
    const Onnx__NodeProto *r = at >= 0 ? cx->gp->node[at] : NULL;
    if (readers != 1 || !r || !r->op_type || strcmp(r->op_type, op) != 0 || r->n_output < 1 || !r->output[0] ||
        !*r->output[0])
        return -1;
    return at;
}

/* The node whose output `name` is, or NULL. */
static const Onnx__NodeProto *producer(const onnx_ctx *cx, const char *name) {
    if (!name) return NULL;
    for (size_t j = 0; j < cx->gp->n_node; j++)
        for (size_t i = 0; i < cx->gp->node[j]->n_output; i++)
            if (cx->gp->node[j]->output[i] && strcmp(cx->gp->node[j]->output[i], name) == 0) return cx->gp->node[j];
    return NULL;
}

/* The int64 constant `name`: known already, or a Constant node's value further on (the exporter writes the
 * affine's Unsqueeze axes after the InstanceNormalization that needs them). *owned: what the caller frees. */
static const onnx_const *ints_ahead(onnx_ctx *cx, const char *name, onnx_const **owned) {
    *owned = NULL;
    const onnx_value *v = onnx_find(cx, name);
    if (v) return v->c && v->c->i ? v->c : NULL;
    const Onnx__NodeProto *c = producer(cx, name);
    const Onnx__AttributeProto *a = c && c->op_type && strcmp(c->op_type, "Constant") == 0 ? onnx_attr(c, "value")
                                                                                            : NULL;
    snug_error ignored = {0};
    if (!a || !a->t || onnx_const_from_tensor(cx, a->t, owned, &ignored) != SNUG_OK) return NULL;
    return (*owned)->i ? *owned : NULL;
}

/* GroupNorm's weight or bias behind input `name` of its Mul or Add: an initializer of `channels` values made
 * (C, 1, 1) by Unsqueeze with axes (1, 2) so that it broadcasts per channel, or given as (C, 1, 1). NULL when
 * the input is anything else. */
static onnx_value *channel_initializer(onnx_ctx *cx, const char *name, size_t channels) {
    onnx_value *v = onnx_find(cx, name);
    if (v && v->c && v->c->f && v->c->rank == 3 && (size_t)v->c->dims[0] == channels && v->c->numel == channels)
        return v;
    const Onnx__NodeProto *u = v ? NULL : producer(cx, name);
    if (!u || !u->op_type || strcmp(u->op_type, "Unsqueeze") != 0 || u->n_input != 2 || !u->input[0] || !u->input[1])
        return NULL;
    onnx_value *w = onnx_find(cx, u->input[0]);
    if (!w || !w->c || !w->c->f || w->c->rank != 1 || w->c->numel != channels) return NULL;
    onnx_const *owned;
    const onnx_const *axes = ints_ahead(cx, u->input[1], &owned);
    bool per_channel = axes && axes->numel == 2;
    for (size_t j = 0; per_channel && j < 2; j++) per_channel = (axes->i[j] + 3) % 3 == (int64_t)j + 1;
    onnx_const_free(owned);
    return per_channel ? w : NULL;
}

/* The ONNX shape is snug's (no pending view of another shape). */
static bool plain(const onnx_ctx *cx, const onnx_value *v) {
    const snug_shape s = snug_tensor_shape(cx->g, v->t);
    bool same = s.rank == v->shape.rank;
    for (int d = 0; same && d < s.rank; d++) same = s.dims[d] == v->shape.dims[d];
    return same;
}

/* ---- the ops ---- */

snug_status onnx_map_conv_transpose(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *w, *b = onnx_input_value(cx, n, 2);
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    if (s == SNUG_OK) s = onnx_const_in(cx, n, 1, 4, &w, err);
    if (s == SNUG_OK && b) s = onnx_const_in(cx, n, 2, 1, &b, err);
    if (s != SNUG_OK) return s;
    if (!b)
        return onnx_fail(cx, err, SNUG_E_ARG, "a ConvTranspose without bias: snug's transposed convolution has "
                         "one; use torch.nn.ConvTranspose2d(..., bias=True)");
    int64_t k = w->c->dims[2], stride = 1, pad = 0, dil = 1, out_pad = 0;
    const Onnx__AttributeProto *ap = onnx_attr(n, "auto_pad");
    if (w->c->numel == 0 || w->c->dims[2] != w->c->dims[3] || !onnx_attr_uniform(n, "kernel_shape", 1, &k) ||
        k != w->c->dims[2] || !onnx_attr_uniform(n, "strides", 1, &stride) || !onnx_attr_uniform(n, "pads", 0, &pad) ||
        !onnx_attr_uniform(n, "dilations", 1, &dil) || dil != 1 || !onnx_attr_uniform(n, "output_padding", 0, &out_pad) ||
        out_pad != 0 || onnx_attr_int(n, "group", 1) != 1 || onnx_attr(n, "output_shape") ||
        (ap && ap->has_s && !(ap->s.len == 6 && memcmp(ap->s.data, "NOTSET", 6) == 0)))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug's transposed convolution takes a square kernel, one stride, "
                         "the same padding on every side, no dilation, no output_padding or output_shape, one "
                         "group and explicit pads (no auto_pad): change the layer");
    char buf[SNUG_NAME_MAX];
    const snug_tensor t = snug_conv_transpose2d(cx->g, onnx_layer_name(cx, n, w->name, buf), x->t,
                                                (size_t)w->c->dims[1], (size_t)k, (size_t)stride, (size_t)pad);
    if ((s = onnx_set_out(cx, n, t, NULL, err)) != SNUG_OK) return s;
    if ((s = onnx_bind_param(cx, t, 0, w, false, err)) != SNUG_OK) return s;
    return onnx_bind_param(cx, t, 1, b, false, err);
}

/* torch.cat(dim=1) of computed tensors: snug_concat, pairwise from the left when there are more than two. */
snug_status onnx_map_concat(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *a, *b;
    snug_status s = onnx_tensor_in(cx, n, 0, 0, &a, err);
    if (s != SNUG_OK) return s;
    int64_t axis = onnx_attr_int(n, "axis", 1);
    if (axis < 0) axis += a->shape.rank + 1;
    if (n->n_input < 2 || axis != 1 || !plain(cx, a))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug concatenates two or more computed tensors along the axis after "
                         "the batch (torch.cat(dim=1): the channels), not axis %lld of %zu input(s)",
                         (long long)onnx_attr_int(n, "axis", 1), n->n_input);
    snug_tensor t = a->t;
    for (size_t j = 1; j < n->n_input && t >= 0; j++) {
        if ((s = onnx_tensor_in(cx, n, j, 0, &b, err)) != SNUG_OK) return s;
        if (!plain(cx, b))
            return onnx_fail(cx, err, SNUG_E_ARG, "input '%s' is a reshaped view snug cannot concatenate", b->name);
        char buf[SNUG_NAME_MAX];
        t = snug_concat(cx->g, onnx_layer_name(cx, n, NULL, buf), t, b->t);
    }
    return onnx_set_out(cx, n, t, NULL, err);
}

bool onnx_group_view(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_value *x, const snug_shape *target) {
    const snug_shape s = snug_tensor_shape(cx->g, x->t);
    if (!n->output[0] || s.rank != 3 || !plain(cx, x) || target->rank != 2 || target->dims[0] == 0 ||
        s.dims[0] % target->dims[0] || target->dims[0] * target->dims[1] != s.dims[0] * s.dims[1] * s.dims[2])
        return false;
    return sole_reader(cx, n->output[0], "InstanceNormalization") >= 0;
}

/* The GroupNorm after InstanceNormalization n of x's (groups, rest) view: the Reshape back to x's image (to
 * Shape of it, or to a constant of its shape), then Mul and Add by per-channel initializers, each node the
 * previous one's only reader. The nodes' indices (Reshape, Mul, Add) and the weight and bias; false otherwise. */
static bool groupnorm_tail(onnx_ctx *cx, const Onnx__NodeProto *n, size_t channels, int at[3], onnx_value **w,
                           onnx_value **b) {
    const Onnx__NodeProto *view = producer(cx, n->input[0]);
    if (!n->output[0] || (at[0] = sole_reader(cx, n->output[0], "Reshape")) < 0) return false;
    const Onnx__NodeProto *back = cx->gp->node[at[0]];
    const Onnx__NodeProto *shape = back->n_input == 2 ? producer(cx, back->input[1]) : NULL;
    if (!view || view->n_input < 1 || !view->input[0] || !shape || !shape->op_type ||
        strcmp(shape->op_type, "Shape") != 0 || shape->n_input != 1 || !shape->input[0] ||
        strcmp(shape->input[0], view->input[0]) != 0)
        return false;
    if ((at[1] = sole_reader(cx, back->output[0], "Mul")) < 0) return false;
    const Onnx__NodeProto *mul = cx->gp->node[at[1]];
    if ((at[2] = sole_reader(cx, mul->output[0], "Add")) < 0 || mul->n_input != 2 || !mul->input[0] ||
        !mul->input[1])
        return false;
    const Onnx__NodeProto *add = cx->gp->node[at[2]];
    if (add->n_input != 2 || !add->input[0] || !add->input[1]) return false;
    const int mi = strcmp(mul->input[0], back->output[0]) == 0, ai = strcmp(add->input[0], mul->output[0]) == 0;
    *w = channel_initializer(cx, mul->input[mi], channels);
    *b = channel_initializer(cx, add->input[ai], channels);
    return *w && *b;
}

static bool all_equal(const onnx_const *c, float v) {
    for (size_t j = 0; j < c->numel; j++)
        if (c->f[j] != v) return false;
    return true;
}

snug_status onnx_map_instance_norm(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x, *scale, *bias;
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    if (s == SNUG_OK) s = onnx_const_in(cx, n, 1, 1, &scale, err);
    if (s == SNUG_OK) s = onnx_const_in(cx, n, 2, 1, &bias, err);
    if (s != SNUG_OK) return s;
    const Onnx__AttributeProto *ea = onnx_attr(n, "epsilon");
    const float eps = ea ? ea->f : 1e-5f;
    const size_t channels = snug_tensor_shape(cx->g, x->t).dims[0];
    char buf[SNUG_NAME_MAX];
    if (plain(cx, x)) { /* torch.nn.InstanceNorm2d(affine=True): a groupnorm of one channel per group */
        const snug_tensor t = snug_groupnorm(cx->g, onnx_layer_name(cx, n, scale->name, buf), x->t, channels, eps);
        if ((s = onnx_set_out(cx, n, t, NULL, err)) != SNUG_OK) return s;
        if ((s = onnx_bind_param(cx, t, 0, scale, false, err)) != SNUG_OK) return s;
        return onnx_bind_param(cx, t, 1, bias, false, err);
    }
    const size_t groups = x->shape.dims[0];
    int at[3];
    onnx_value *w = NULL, *b = NULL;
    if (scale->c->numel != groups || bias->c->numel != groups || !all_equal(scale->c, 1.0f) ||
        !all_equal(bias->c, 0.0f) || !groupnorm_tail(cx, n, channels, at, &w, &b))
        return onnx_fail(cx, err, SNUG_E_ARG, "snug maps InstanceNormalization of a (groups, -1) view as the "
                         "GroupNorm PyTorch exports: unit scale and zero bias, then Reshape back to the image, Mul "
                         "by the weight and Add of the bias (initializers of one value per channel), each the "
                         "previous node's only reader; use torch.nn.GroupNorm(groups, channels, affine=True)");
    const snug_tensor t = snug_groupnorm(cx->g, onnx_layer_name(cx, n, w->name, buf), x->t, groups, eps);
    if ((s = onnx_set_out(cx, cx->gp->node[at[2]], t, NULL, err)) != SNUG_OK) return s;
    if ((s = onnx_bind_param(cx, t, 0, w, false, err)) != SNUG_OK) return s;
    for (int j = 0; j < 3; j++) cx->skip[at[j]] = true;
    return onnx_bind_param(cx, t, 1, b, false, err);
}

/* Whether string attribute name is absent (the default, when fallback_ok) or equals one of the values. */
static bool attr_is(const Onnx__NodeProto *n, const char *name, bool fallback_ok, const char *a, const char *b) {
    const Onnx__AttributeProto *at = onnx_attr(n, name);
    if (!at || !at->has_s) return fallback_ok;
    const size_t len = at->s.len;
    return (len == strlen(a) && memcmp(at->s.data, a, len) == 0) ||
           (b && len == strlen(b) && memcmp(at->s.data, b, len) == 0);
}

/* Resize's whole up-sampling factor of x's plane, from constant scales (1, 1, s, s) or sizes (_, C, sH, sW); 0
 * when it is anything else. */
static size_t resize_factor(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_value *x) {
    const onnx_value *scales = onnx_input_value(cx, n, 2), *sizes = onnx_input_value(cx, n, 3);
    const snug_shape s = x->shape;
    double f[2] = {0, 0};
    if (scales && scales->c && scales->c->f && scales->c->numel == 4 && !sizes) {
        if (scales->c->f[0] != 1.0f || scales->c->f[1] != 1.0f) return 0;
        f[0] = scales->c->f[2], f[1] = scales->c->f[3];
    } else if (sizes && sizes->c && sizes->c->i && sizes->c->numel == 4 &&
               (!scales || !scales->c || !scales->c->numel)) {
        if (sizes->c->i[1] != (int64_t)s.dims[0] || sizes->c->i[2] < 1 || sizes->c->i[3] < 1) return 0;
        if (sizes->c->i[2] % (int64_t)s.dims[1] || sizes->c->i[3] % (int64_t)s.dims[2]) return 0;
        f[0] = (double)(sizes->c->i[2] / (int64_t)s.dims[1]), f[1] = (double)(sizes->c->i[3] / (int64_t)s.dims[2]);
    }
    if (f[0] != f[1] || f[0] < 1 || f[0] > 64 || f[0] != (double)(size_t)f[0]) return 0;
    return (size_t)f[0];
}

/* Resize, nearest, by a whole factor on both axes: torch.nn.Upsample(scale_factor=s, mode="nearest") exports it
 * with coordinate_transformation_mode "asymmetric" and nearest_mode "floor"; "half_pixel" with rounding to the
 * nearest picks the same pixels for a whole factor. */
snug_status onnx_map_resize(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *x;
    snug_status s = onnx_tensor_in(cx, n, 0, 3, &x, err);
    if (s != SNUG_OK) return s;
    const bool asymmetric = attr_is(n, "coordinate_transformation_mode", false, "asymmetric", NULL) &&
                            attr_is(n, "nearest_mode", false, "floor", NULL);
    const bool half_pixel = attr_is(n, "coordinate_transformation_mode", true, "half_pixel", NULL) &&
                            attr_is(n, "nearest_mode", true, "round_prefer_floor", "round_prefer_ceil");
    const size_t factor = plain(cx, x) ? resize_factor(cx, n, x) : 0;
    if (!attr_is(n, "mode", true, "nearest", NULL) || !(asymmetric || half_pixel) || factor == 0)
        return onnx_fail(cx, err, SNUG_E_ARG, "snug maps Resize as nearest up-sampling of the plane by one whole "
                         "factor (torch.nn.Upsample(scale_factor=2, mode=\"nearest\")): mode nearest, "
                         "coordinate_transformation_mode asymmetric with nearest_mode floor (or half_pixel with "
                         "round_prefer_floor or round_prefer_ceil), constant scales (1, 1, s, s) or sizes; not "
                         "bilinear or bicubic interpolation, nor other factors");
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_upsample_nearest2d(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, factor), NULL, err);
}

snug_status onnx_refuse_upsample(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    (void)n;
    return onnx_fail(cx, err, SNUG_E_ARG, "Upsample is ONNX's op before opset 10: export with opset_version=13, "
                     "which writes torch.nn.Upsample as Resize, which snug maps (nearest, a whole factor)");
}
