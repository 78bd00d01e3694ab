/* The executor: binds every op to the buffers of a plan once, then runs forward and backward over a
 * micro-batch of any size up to the planned m, allocating nothing. */
#ifndef SNUG_EXEC_EXEC_H
#define SNUG_EXEC_EXEC_H

#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

typedef struct exec {
    const snug_graph *g;
    const plan *p;
    void **buf;          /* per plan buffer: its memory */
    op_call *calls;      /* per node: pointers bound at plan time; m and loss_scale set per run */
    float *params, *grads, *optim_state;
    float *input;        /* (m, input shape): the batcher writes here */
    int32_t *targets;    /* (m, targets per sample) */
    const float *item_loss;   /* (m, targets per sample): the loss op's per-item output */
    const float *logits;      /* (m, classes): the loss op's input, for accuracy */
} exec;

/* Reserves every buffer of p from mem, in plan order, and binds the ops. On SNUG_E_OOM, err names the buffer
 * that did not fit (the caller adds the hint). */
snug_status exec_bind(exec *x, const snug_graph *g, const plan *p, snug_mem *mem, snug_error *err);
void exec_unbind(exec *x);

/* Forward over the first m samples of the input buffer. */
void exec_forward(exec *x, size_t m);
/* Backward from the loss, scaled by loss_scale (1/N), adding into the parameter gradients. */
void exec_backward(exec *x, size_t m, float loss_scale);

#endif
