/* The plan: every buffer one optimizer step needs at micro-batch size m, its category and size, computed from
 * the graph alone (planning allocates no engine memory). The executor reserves exactly these buffers, in this
 * order, so the plan's total is the run's memory to the byte. */
#ifndef SNUG_PLAN_PLAN_H
#define SNUG_PLAN_PLAN_H

#include "graph/graph.h"
#include "snug.h"

typedef enum buffer_role {
    BUF_PARAMS,    /* all parameters, one contiguous block */
    BUF_GRADS,     /* their gradients, same layout */
    BUF_OPTIM,     /* optimizer state */
    BUF_INPUT,     /* the graph input of one micro-batch */
    BUF_TARGETS,   /* its targets (int32) */
    BUF_WORKSPACE, /* one scratch buffer shared by all ops: the largest any op needs */
    BUF_VALUE,     /* a node's output */
    BUF_GRAD,      /* the gradient of a node's output */
    BUF_SAVED,     /* what a node keeps for its backward beyond its input and output */
} buffer_role;

typedef struct plan_buffer {
    int node;               /* owning node, -1 for graph-wide buffers */
    buffer_role role;
    snug_mem_category cat;
    size_t bytes;           /* rounded up to SNUG_MEM_ALIGN: what the allocator will hold */
} plan_buffer;

typedef struct plan {
    size_t m;               /* planned micro-batch size */
    int threads;            /* workspace is sized for this many threads */
    plan_buffer *bufs;      /* in reservation order */
    int n_bufs;
    int *value_buf;         /* per tensor: buffer of its value (views share their input's) */
    int *grad_buf;          /* per tensor: buffer of its gradient, -1 when none is needed */
    int *saved_buf;         /* per node: -1 when the op keeps nothing extra */
    int workspace_buf, targets_buf, params_buf, grads_buf, optim_buf;
    size_t targets_per_sample;
    size_t bytes[SNUG_MEM_NCATEGORIES];
    size_t total;
    double fwd_flops_per_sample, bwd_flops_per_sample;
} plan;

/* Plans g for micro-batch m. Fails on a graph without input or loss, or on size overflow. */
snug_status plan_build(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim, plan *p,
                       snug_error *err);
void plan_free(plan *p);

/* A short name for what a buffer holds, for messages: "activations", "saved", ... */
const char *plan_buffer_owner(const snug_graph *g, const plan_buffer *b);

#endif
