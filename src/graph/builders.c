/* Building a graph: every builder call checks its arguments, runs the op's shape inference, declares the op's
 * parameters and appends one node (then the ReLU folds are brought up to date, fuse.c). The first error sticks:
 * later calls return -1 and change nothing, so a whole model can be built and checked once (snug_graph_check).
 * The builders of the first layers live here too; the others are builders_conv.c's and builders_norm.c's. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/grow.h"
#include "graph/fuse.h"
#include "graph/graph.h"
#include "ops/op.h"

/* Records the first error; returns -1, the "no tensor" handle. */
__attribute__((format(printf, 3, 4))) static snug_tensor graph_error(snug_graph *g, snug_status s,
                                                                      const char *fmt, ...) {
    if (g->err.status != SNUG_OK) return -1;
    g->err.status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err.message, sizeof g->err.message, fmt, ap);
    va_end(ap);
    return -1;
}

static bool shape_numel(const snug_shape *s, size_t *numel) { return size_prod(s->dims, s->rank, numel); }

/* Checks everything about a new node that does not depend on its op. */
static bool node_args_ok(snug_graph *g, const op_desc *op, const char *name, const snug_tensor *in, int n_in) {
    if (g->err.status != SNUG_OK) return false;
    if (!name || !*name) return graph_error(g, SNUG_E_ARG, "a %s layer has no name: give every layer one", op->kind), false;
    if (strlen(name) >= SNUG_NAME_MAX)
        return graph_error(g, SNUG_E_ARG, "layer name '%.40s...' is too long (at most %d characters)", name,
                           SNUG_NAME_MAX - 1), false;
    if (graph_find_node(g, name) >= 0)
        return graph_error(g, SNUG_E_ARG, "layer name '%s' is used twice: names must be unique", name), false;
    if (g->loss_node >= 0)
        return graph_error(g, SNUG_E_ARG, "%s '%s' comes after the loss '%s': the loss must be the last layer",
                           op->kind, name, g->nodes[g->loss_node].name), false;
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->n_tensors)
            return graph_error(g, SNUG_E_ARG, "%s '%s': input %d is not a tensor of this graph", op->kind, name,
                               i), false;
    return true;
}

static bool add_params(snug_graph *g, int node, const param_decl *decl, int n) {
    if (!grow_array((void **)&g->params, &g->cap_params, g->n_params + n, sizeof *g->params))
        return graph_error(g, SNUG_E_OOM, "out of memory while building the graph"), false;
    graph_node *nd = &g->nodes[node];
    for (int i = 0; i < n; i++) {
        graph_param *p = &g->params[g->n_params];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s.%s", nd->name, decl[i].suffix);
        p->shape = decl[i].shape;
        p->buffer = decl[i].buffer;
        size_t *block = p->buffer ? &g->state_numel : &g->param_numel;
        if (!shape_numel(&p->shape, &p->numel) || !size_add(*block, p->numel, block))
            return graph_error(g, SNUG_E_OVERFLOW, "%s: parameter size overflows", p->name), false;
        p->offset = *block - p->numel;
        p->fan_in = decl[i].fan_in;
        p->init = decl[i].init;
        p->init_scale = 1.0f;
        p->node = node;
        nd->params[nd->n_params++] = g->n_params++;
    }
    return true;
}

/* Node `node` reads its inputs: their reader counts, and its first input's list of first readers. */
static void note_reads(snug_graph *g, int node) {
    const graph_node *nd = &g->nodes[node];
    for (int i = 0; i < nd->n_inputs; i++) g->tensors[nd->inputs[i]].readers++;
    g->first_reader_prev[node] = -1;
    if (nd->n_inputs > 0) {
        graph_tensor *t = &g->tensors[nd->inputs[0]];
        g->first_reader_prev[node] = t->last_first_reader;
        t->last_first_reader = node;
    }
}

/* Appends a node of `op` over inputs, inferring its output shape (or taking `declared`, for the input). */
static snug_tensor add_node(snug_graph *g, const op_desc *op, const char *name, const snug_tensor *in, int n_in,
                            op_params p, const snug_shape *declared) {
    if (!node_args_ok(g, op, name, in, n_in)) return -1;
    snug_shape in_shapes[NODE_MAX_INPUTS], out = {0};
    for (int i = 0; i < n_in; i++) in_shapes[i] = g->tensors[in[i]].shape;
    graph_node nd = {.op = op, .p = p, .index = g->n_nodes, .n_inputs = n_in, .output = g->n_tensors};
    snprintf(nd.name, sizeof nd.name, "%s", name);
    for (int i = 0; i < n_in; i++) {
        nd.inputs[i] = in[i];
        nd.in_shape[i] = in_shapes[i];
        nd.in_numel[i] = g->tensors[in[i]].numel;
    }
    param_decl decl[NODE_MAX_PARAMS];
    int n_decl = 0;
    char msg[512] = "";
    snug_status s = SNUG_OK;
    if (declared) out = *declared;
    else if ((s = op->infer(&nd, in_shapes, n_in, &out, decl, &n_decl, msg, sizeof msg)) != SNUG_OK)
        return graph_error(g, s, "%s '%s': %s", op->kind, name, msg);
    size_t numel;
    if (!shape_numel(&out, &numel))
        return graph_error(g, SNUG_E_OVERFLOW, "%s '%s': output size overflows", op->kind, name);
    if (!grow_array((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) ||
        !grow_array((void **)&g->first_reader_prev, &g->cap_first_reader_prev, g->n_nodes + 1,
                    sizeof *g->first_reader_prev) ||
        !grow_array((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors))
        return graph_error(g, SNUG_E_OOM, "out of memory while building the graph");
    nd.out_shape = out;
    nd.out_numel = numel;
    g->tensors[g->n_tensors] = (graph_tensor){.shape = out, .numel = numel, .producer = g->n_nodes,
                                              .last_first_reader = -1};
    g->nodes[g->n_nodes] = nd;
    if (!add_params(g, g->n_nodes, decl, n_decl)) return -1;
    const int node = g->n_nodes++;
    if (!graph_index_name(g, node)) return graph_error(g, SNUG_E_OOM, "out of memory while building the graph");
    note_reads(g, node);
    graph_fuse_added(g, node);
    return g->n_tensors++;
}

static op_params no_params(void) { return (op_params){{0}}; }

snug_tensor graph_add_node(snug_graph *g, const op_desc *op, const char *name, const snug_tensor *in, int n_in,
                           op_params p) {
    return add_node(g, op, name, in, n_in, p, NULL);
}

bool graph_share_param(snug_graph *g, int node, int param) {
    if (g->err.status != SNUG_OK) return false;
    graph_node *nd = &g->nodes[node];
    if (param < 0 || param >= g->n_params || nd->n_params >= NODE_MAX_PARAMS)
        return graph_error(g, SNUG_E_ARG, "%s '%s': cannot share parameter %d", nd->op->kind, nd->name, param), false;
    nd->params[nd->n_params++] = param;
    return true;
}

void snug_init_scale(snug_graph *g, const char *layer, float scale) {
    if (!g || g->err.status != SNUG_OK) return;
    if (!(scale >= 0.0f && scale <= 1e6f)) { /* also refuses NaN */
        graph_error(g, SNUG_E_ARG, "init scale %g for layer '%s': expected a finite number >= 0 (0 starts the "
                    "weight at zero, 1 keeps the default)", (double)scale, layer ? layer : "?");
        return;
    }
    const int i = graph_find_node(g, layer);
    if (i >= 0) {
        const graph_node *nd = &g->nodes[i];
        /* The layer's own first trainable parameter: a weight, or a norm's gain. A tied head owns none. */
        for (int k = 0; k < nd->n_params; k++) {
            graph_param *p = &g->params[nd->params[k]];
            if (p->node == i && !p->buffer) {
                p->init_scale = scale;
                return;
            }
        }
        graph_error(g, SNUG_E_ARG, "init scale for layer '%s': a %s layer has no weight of its own to scale",
                    layer, nd->op->kind);
        return;
    }
    graph_error(g, SNUG_E_ARG, "init scale: there is no layer '%s' in the graph (build the layer first)",
                layer ? layer : "(null)");
}

snug_tensor snug_input(snug_graph *g, const char *name, size_t c, size_t h, size_t w) {
    if (g->err.status == SNUG_OK && g->input_node >= 0)
        return graph_error(g, SNUG_E_ARG, "input '%s': the graph already has input '%s' (one input per graph)",
                           name ? name : "?", g->nodes[g->input_node].name);
    if (g->err.status == SNUG_OK && (!c || !h || !w))
        return graph_error(g, SNUG_E_ARG, "input '%s': every dimension must be at least 1, got (%zu, %zu, %zu)",
                           name ? name : "?", c, h, w);
    snug_shape s = {.rank = 3, .dims = {c, h, w}};
    snug_tensor t = add_node(g, &op_input, name, NULL, 0, no_params(), &s);
    if (t >= 0) g->input_node = g->n_nodes - 1;
    return t;
}

snug_tensor snug_input_tokens(snug_graph *g, const char *name, size_t tokens) {
    if (g->err.status == SNUG_OK && g->input_node >= 0)
        return graph_error(g, SNUG_E_ARG, "input '%s': the graph already has input '%s' (one input per graph)",
                           name ? name : "?", g->nodes[g->input_node].name);
    if (g->err.status == SNUG_OK && !tokens)
        return graph_error(g, SNUG_E_ARG, "input '%s': a sequence needs at least 1 token", name ? name : "?");
    snug_shape s = {.rank = 1, .dims = {tokens}};
    snug_tensor t = add_node(g, &op_input, name, NULL, 0, no_params(), &s);
    if (t >= 0) g->input_node = g->n_nodes - 1;
    return t;
}

snug_tensor snug_linear(snug_graph *g, const char *name, snug_tensor x, size_t out_features) {
    op_params p = {.linear = {.out_features = out_features}};
    return add_node(g, &op_linear, name, &x, 1, p, NULL);
}

snug_tensor snug_linear_no_bias(snug_graph *g, const char *name, snug_tensor x, size_t out_features) {
    op_params p = {.linear = {.out_features = out_features, .no_bias = true}};
    return add_node(g, &op_linear, name, &x, 1, p, NULL);
}

snug_tensor snug_conv2d(snug_graph *g, const char *name, snug_tensor x, size_t out_channels, size_t kernel,
                        size_t stride, size_t padding) {
    op_params p = {.conv2d = {.out_channels = out_channels, .kernel = kernel, .stride = stride, .padding = padding,
                              .groups = 1}};
    return add_node(g, &op_conv2d, name, &x, 1, p, NULL);
}

snug_tensor snug_relu(snug_graph *g, const char *name, snug_tensor x) {
    return add_node(g, &op_relu, name, &x, 1, no_params(), NULL);
}

snug_tensor snug_maxpool2d(snug_graph *g, const char *name, snug_tensor x, size_t kernel, size_t stride) {
    op_params p = {.pool2d = {.kernel = kernel, .stride = stride}};
    return add_node(g, &op_maxpool2d, name, &x, 1, p, NULL);
}

snug_tensor snug_flatten(snug_graph *g, const char *name, snug_tensor x) {
    return add_node(g, &op_flatten, name, &x, 1, no_params(), NULL);
}

snug_tensor snug_softmax_cross_entropy(snug_graph *g, const char *name, snug_tensor logits) {
    snug_tensor t = add_node(g, &op_softmax_xent, name, &logits, 1, no_params(), NULL);
    if (t >= 0) g->loss_node = g->n_nodes - 1;
    return t;
}

snug_tensor snug_add(snug_graph *g, const char *name, snug_tensor a, snug_tensor b) {
    snug_tensor in[2] = {a, b};
    return add_node(g, &op_add, name, in, 2, no_params(), NULL);
}

snug_tensor snug_dropout(snug_graph *g, const char *name, snug_tensor x, float p) {
    op_params params = {.dropout = {.p = p}};
    return add_node(g, &op_dropout, name, &x, 1, params, NULL);
}

