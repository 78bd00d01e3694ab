/* ONNX model files: the file read whole (bounded), decoded by the parser protoc-c generated from ONNX's own
 * onnx.proto (cmake/SnugOnnx.cmake), then checked (opset, one float input of static shape, one output) and
 * walked node by node: constants folded (onnx_consts.c), ops mapped onto snug's builders (onnx_ops.c). The
 * output feeds softmax cross-entropy over its class axis. The file is untrusted: every count, index and size is
 * checked before use, and every refusal names the node and says what to do. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "graph/onnx_import.h"

snug_status onnx_fail(const onnx_ctx *cx, snug_error *err, snug_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cx->node < 0) return snug_fail(err, s, "%s: %s", cx->path, msg);
    const Onnx__NodeProto *n = cx->gp->node[cx->node];
    return snug_fail(err, s, "%s: node %d '%.60s' (%.40s, opset %lld): %s", cx->path, cx->node,
                     n->name ? n->name : "", n->op_type ? n->op_type : "?", (long long)cx->opset, msg);
}

onnx_value *onnx_find(onnx_ctx *cx, const char *name) {
    for (size_t j = cx->n_values; j-- > 0;) /* the latest wins: a name given twice is the later value */
        if (strcmp(cx->values[j].name, name) == 0) return &cx->values[j];
    return NULL;
}

onnx_value *onnx_add(onnx_ctx *cx, const char *name) {
    if (cx->n_values == cx->cap_values) return NULL; /* never grown: the mappers hold pointers into it */
    onnx_value *v = &cx->values[cx->n_values++];
    *v = (onnx_value){.name = name, .t = -1};
    return v;
}

/* The whole file in memory: ONNX files below protobuf's 2 GiB limit, read in one piece. */
static snug_status read_file(const char *path, uint8_t **buf, size_t *len, snug_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return snug_fail(err, SNUG_E_IO, "%s: cannot open the ONNX model (check the path)", path);
    struct stat st;
    snug_status s = SNUG_OK;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        s = snug_fail(err, SNUG_E_IO, "%s: not a regular file: name an .onnx file", path);
    else if (st.st_size <= 0 || (uint64_t)st.st_size > ONNX_MAX_FILE_BYTES)
        s = snug_fail(err, SNUG_E_FORMAT, "%s: %lld bytes: an ONNX model holds 1 byte to 2 GiB (larger models "
                      "keep external data, which snug does not read)", path, (long long)st.st_size);
    else if (!(*buf = malloc((size_t)st.st_size)))
        s = snug_fail(err, SNUG_E_OOM, "%s: out of memory reading %lld bytes", path, (long long)st.st_size);
    else if (fread(*buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        s = snug_fail(err, SNUG_E_IO, "%s: read error", path);
    *len = (size_t)st.st_size;
    fclose(f);
    return s;
}

static snug_status check_opset(onnx_ctx *cx, const Onnx__ModelProto *m, snug_error *err) {
    for (size_t j = 0; j < m->n_opset_import; j++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[j];
        if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) cx->opset = o->version;
    }
    if (cx->opset < ONNX_OPSET_MIN || cx->opset > ONNX_OPSET_MAX)
        return onnx_fail(cx, err, SNUG_E_ARG, "ONNX opset %lld: snug reads opsets %d to %d (export with "
                         "torch.onnx.export(..., opset_version=%d))", (long long)cx->opset, ONNX_OPSET_MIN,
                         ONNX_OPSET_MAX, ONNX_OPSET_MIN);
    return SNUG_OK;
}

static snug_status read_initializers(onnx_ctx *cx, snug_error *err) {
    for (size_t j = 0; j < cx->gp->n_initializer; j++) {
        const Onnx__TensorProto *t = cx->gp->initializer[j];
        if (!t->name || !*t->name) return onnx_fail(cx, err, SNUG_E_FORMAT, "initializer %zu has no name", j);
        onnx_value *v = onnx_add(cx, t->name);
        if (!v) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
        snug_status s = onnx_const_from_tensor(cx, t, &v->c, err);
        if (s != SNUG_OK) return s;
    }
    return SNUG_OK;
}

/* The one graph input that is not an initializer: float32, (N, F) or (N, C, H, W), or int64 token ids (N, T),
 * every dimension but the batch fixed. (N, F) becomes snug's (F, 1, 1) input, flattened; (N, T) snug's tokens. */
static snug_status make_input(onnx_ctx *cx, snug_error *err) {
    const Onnx__ValueInfoProto *in = NULL;
    for (size_t j = 0; j < cx->gp->n_input; j++) {
        const Onnx__ValueInfoProto *v = cx->gp->input[j];
        if (!v->name || onnx_find(cx, v->name)) continue; /* older exports list initializers as inputs */
        if (in) return onnx_fail(cx, err, SNUG_E_ARG, "the model has inputs '%s' and '%s': snug trains models of "
                                 "one input", in->name, v->name);
        in = v;
    }
    if (!in) return onnx_fail(cx, err, SNUG_E_ARG, "the model has no input besides its initializers");
    const Onnx__TypeProto *ty = in->type;
    const Onnx__TensorShapeProto *sh = ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                                           ? ty->tensor_type->shape : NULL;
    const bool tokens = sh && ty->tensor_type->elem_type == 7 && sh->n_dim == 2; /* int64 (N, T): token ids */
    if (!sh || (ty->tensor_type->elem_type != 1 && !tokens))
        return onnx_fail(cx, err, SNUG_E_ARG, "input '%s' must be a float32 tensor, or int64 token ids (N, T), "
                         "with a shape", in->name);
    if (sh->n_dim != 2 && sh->n_dim != 4)
        return onnx_fail(cx, err, SNUG_E_ARG, "input '%s' has rank %zu: snug takes (N, features) or (N, C, H, W)",
                         in->name, sh->n_dim);
    size_t d[3] = {1, 1, 1};
    for (size_t j = 1; j < sh->n_dim; j++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[j];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || dim->dim_value < 1 ||
            dim->dim_value > (1 << 24))
            return onnx_fail(cx, err, SNUG_E_ARG, "input '%s': dimension %zu is dynamic or out of range: snug "
                             "plans static shapes; export with a fixed input size (dynamic_axes only for the "
                             "batch, axis 0)", in->name, j);
        d[j - 1] = (size_t)dim->dim_value;
    }
    onnx_value *v = onnx_add(cx, in->name);
    if (!v) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
    char name[SNUG_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", SNUG_NAME_MAX - 6, in->name);
    v->t = tokens ? snug_input_tokens(cx->g, name, d[0]) : snug_input(cx->g, name, d[0], d[1], d[2]);
    v->shape = snug_tensor_shape(cx->g, v->t);
    if (sh->n_dim == 2 && !tokens) {
        snprintf(name + strlen(name), 6, ".flat");
        v->t = snug_flatten(cx->g, name, v->t);
        v->shape = (snug_shape){.rank = 1, .dims = {d[0]}};
    }
    snug_error e = {0};
    if (snug_graph_check(cx->g, &e) != SNUG_OK) return onnx_fail(cx, err, e.status, "%s", e.message);
    return SNUG_OK;
}

/* Every node has an op and an output before any is mapped: mappers and patterns look ahead at later nodes. */
static snug_status check_nodes(onnx_ctx *cx, snug_error *err) {
    for (size_t j = 0; j < cx->gp->n_node; j++) {
        cx->node = (int)j;
        const Onnx__NodeProto *n = cx->gp->node[j];
        if (!n->op_type || n->n_output < 1) return onnx_fail(cx, err, SNUG_E_FORMAT, "a node without op or output");
    }
    return SNUG_OK;
}

static snug_status walk_nodes(onnx_ctx *cx, snug_error *err) {
    if (!(cx->skip = calloc(cx->gp->n_node + 1, sizeof *cx->skip)))
        return onnx_fail(cx, err, SNUG_E_OOM, "out of memory");
    const snug_status checked = check_nodes(cx, err);
    if (checked != SNUG_OK) return checked;
    for (size_t j = 0; j < cx->gp->n_node; j++) {
        if (cx->skip[j]) continue;
        cx->node = (int)j;
        const Onnx__NodeProto *n = cx->gp->node[j];
        for (size_t i = 0; i < n->n_input; i++)
            if (n->input[i] && *n->input[i] && !onnx_find(cx, n->input[i]))
                return onnx_fail(cx, err, SNUG_E_FORMAT, "input '%.80s' is no earlier node's output, initializer "
                                 "or model input (nodes must come in execution order)", n->input[i]);
        bool folded;
        snug_status s = onnx_fold(cx, n, &folded, err);
        if (s == SNUG_OK && !folded) s = onnx_map_node(cx, n, err);
        if (s != SNUG_OK) return s;
    }
    cx->node = -1;
    return SNUG_OK;
}

static snug_status add_loss(onnx_ctx *cx, snug_error *err) {
    if (cx->gp->n_output != 1 || !cx->gp->output[0]->name)
        return onnx_fail(cx, err, SNUG_E_ARG, "the model has %zu outputs: snug trains one output, the logits its "
                         "loss reads", cx->gp->n_output);
    const onnx_value *v = onnx_find(cx, cx->gp->output[0]->name);
    if (!v || v->c) return onnx_fail(cx, err, SNUG_E_ARG, "output '%s' is %s", cx->gp->output[0]->name,
                                     v ? "a constant" : "computed by no node");
    char name[SNUG_NAME_MAX] = "loss";
    for (int k = 1; graph_find_node(cx->g, name) >= 0; k++) snprintf(name, sizeof name, "loss_%d", k);
    snug_softmax_cross_entropy(cx->g, name, v->t);
    snug_error e = {0};
    if (snug_graph_check(cx->g, &e) != SNUG_OK) return onnx_fail(cx, err, e.status, "%s", e.message);
    return SNUG_OK;
}

/* The graph's name: the file's, without its folder and ".onnx". */
static void graph_name(const char *path, char *buf, size_t len) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".onnx") == 0) n -= 5;
    snprintf(buf, len, "%.*s", (int)(n < len - 1 ? n : len - 1), base);
}

static snug_status build(onnx_ctx *cx, const Onnx__ModelProto *m, snug_error *err) {
    if (!m->graph) return onnx_fail(cx, err, SNUG_E_FORMAT, "the model holds no graph");
    cx->gp = m->graph;
    if (cx->gp->n_node > ONNX_MAX_NODES)
        return onnx_fail(cx, err, SNUG_E_ARG, "%zu nodes: snug reads at most %d", cx->gp->n_node, ONNX_MAX_NODES);
    /* every value there can be, reserved once: the initializers, the input, one output per node and one per
     * fused Add (whose own node is then skipped) */
    cx->cap_values = cx->gp->n_initializer + 2 * cx->gp->n_node + 2;
    if (!(cx->values = calloc(cx->cap_values, sizeof *cx->values)))
        return onnx_fail(cx, err, SNUG_E_OOM, "out of memory for %zu values", cx->cap_values);
    snug_status s = check_opset(cx, m, err);
    if (s == SNUG_OK) s = read_initializers(cx, err);
    if (s == SNUG_OK) s = make_input(cx, err);
    if (s == SNUG_OK) s = walk_nodes(cx, err);
    return s == SNUG_OK ? add_loss(cx, err) : s;
}

snug_status snug_graph_from_onnx(const char *path, snug_graph **out, snug_error *err) {
    *out = NULL;
    if (!path) return snug_fail(err, SNUG_E_ARG, "no ONNX file named");
    uint8_t *buf = NULL;
    size_t len = 0;
    snug_status s = read_file(path, &buf, &len, err);
    Onnx__ModelProto *m = s == SNUG_OK ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    if (s == SNUG_OK && !m)
        s = snug_fail(err, SNUG_E_FORMAT, "%s: not an ONNX model (its protobuf does not decode as a ModelProto: "
                      "a damaged or truncated file?)", path);
    char name[SNUG_NAME_MAX];
    graph_name(path, name, sizeof name);
    onnx_ctx cx = {.path = path, .node = -1, .g = s == SNUG_OK ? snug_graph_new(name) : NULL};
    if (s == SNUG_OK && !cx.g) s = snug_fail(err, SNUG_E_OOM, "out of memory");
    if (s == SNUG_OK) s = build(&cx, m, err);
    for (size_t j = 0; j < cx.n_values; j++) onnx_const_free(cx.values[j].c);
    free(cx.values);
    free(cx.skip);
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    free(buf);
    if (s != SNUG_OK) snug_graph_free(cx.g);
    else *out = cx.g, cx.g->batchnorm_counters = true; /* the exporting module's state_dict has them */
    return s;
}
