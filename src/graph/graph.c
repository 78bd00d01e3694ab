/* The static graph as data: creating and freeing it, its first error, tensor shapes, what it reads and gives out,
 * its parameters, and what a view aliases.
 * Appending nodes is builders.c's. */
#define _POSIX_C_SOURCE 200809L
#include "graph/graph.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "ops/op.h"

snug_graph *snug_graph_new(const char *name) {
    snug_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    snprintf(g->name, sizeof g->name, "%s", name ? name : "model");
    g->input_node = -1;
    g->loss_node = -1;
    return g;
}

void snug_graph_free(snug_graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->tensors);
    for (int i = 0; i < g->n_params; i++) free(g->params[i].values);
    free(g->params);
    for (int i = 0; i < g->n_constants; i++) free(g->constants[i]);
    free(g->constants);
    free(g->names.slots);
    free(g->first_reader_prev);
    free(g);
}

const char *snug_graph_name(const snug_graph *g) { return g->name; }

int graph_unread_node(const snug_graph *g) {
    bool *read = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *read);
    if (!read) return -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) read[g->nodes[i].inputs[k]] = true;
    int unread = -1;
    for (int i = 0; i < g->n_nodes && unread < 0; i++)
        if (i != g->loss_node && !read[g->nodes[i].output]) unread = i;
    free(read);
    return unread;
}

snug_status snug_graph_check(const snug_graph *g, snug_error *err) {
    if (!g) return snug_fail(err, SNUG_E_OOM, "out of memory while building the graph");
    if (g->err.status != SNUG_OK) {
        if (err) *err = g->err;
        return g->err.status;
    }
    /* Only a graph with its loss is complete: until then a later layer may still read any output. */
    const int unread = g->loss_node >= 0 ? graph_unread_node(g) : -1;
    if (unread >= 0)
        return snug_fail(err, SNUG_E_ARG, "model '%s': the output of layer '%s' (%s) is never read: every layer "
                         "but the loss must feed a later one (an unread layer holds parameters and memory for "
                         "nothing); did a later layer mean to read it?", g->name, g->nodes[unread].name,
                         g->nodes[unread].op->kind);
    return SNUG_OK;
}

snug_shape snug_tensor_shape(const snug_graph *g, snug_tensor t) {
    if (!g || t < 0 || t >= g->n_tensors) return (snug_shape){0};
    return g->tensors[t].shape;
}

snug_shape snug_graph_input_shape(const snug_graph *g) {
    if (!g || g->input_node < 0) return (snug_shape){0};
    return g->tensors[g->nodes[g->input_node].output].shape;
}

snug_shape snug_graph_output_shape(const snug_graph *g) {
    if (!g || g->loss_node < 0) return (snug_shape){0};
    return g->tensors[g->nodes[g->loss_node].inputs[0]].shape;
}

size_t snug_graph_param_count(const snug_graph *g) { return g ? (size_t)g->n_params : 0; }

const char *snug_graph_param(const snug_graph *g, size_t i, snug_shape *shape, bool *trainable) {
    if (!g || i >= (size_t)g->n_params) return NULL;
    const graph_param *p = &g->params[i];
    if (shape) *shape = p->shape;
    if (trainable) *trainable = !p->buffer;
    return p->name;
}
