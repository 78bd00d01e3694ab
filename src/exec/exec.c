/* Forward walks the nodes in order, backward in reverse; both only fill in m and run the op tables. */
#include "exec/exec.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static snug_status reserve_buffers(exec *x, snug_mem *mem, snug_error *err) {
    for (int i = 0; i < x->p->n_bufs; i++) {
        const plan_buffer *b = &x->p->bufs[i];
        /* The allocator's message reads "<owner> <category> need ...", e.g. "conv2 activations need". */
        x->buf[i] = snug_mem_alloc(mem, b->cat, b->bytes, plan_buffer_owner(x->g, b), err);
        if (!x->buf[i]) return err ? err->status : SNUG_E_OOM;
    }
    return SNUG_OK;
}

static void *buf_or_null(const exec *x, int i) { return i >= 0 ? x->buf[i] : NULL; }

static void bind_call(exec *x, int n) {
    const snug_graph *g = x->g;
    const plan *p = x->p;
    const graph_node *nd = &g->nodes[n];
    op_call *c = &x->calls[n];
    *c = (op_call){.g = g, .node = nd, .m = p->m, .threads = p->threads};
    for (int i = 0; i < nd->n_inputs; i++) {
        c->in[i] = buf_or_null(x, p->value_buf[nd->inputs[i]]);
        c->din[i] = buf_or_null(x, p->grad_buf[nd->inputs[i]]);
    }
    c->out = buf_or_null(x, p->value_buf[nd->output]);
    c->dout = buf_or_null(x, p->grad_buf[nd->output]);
    for (int i = 0; i < nd->n_params; i++) {
        size_t off = g->params[nd->params[i]].offset;
        c->w[i] = x->params + off;
        c->dw[i] = x->grads + off;
    }
    c->saved = buf_or_null(x, p->saved_buf[n]);
    c->work = buf_or_null(x, p->workspace_buf);
    if (nd->op->flags & OP_IS_LOSS) c->targets = x->targets;
}

snug_status exec_bind(exec *x, const snug_graph *g, const plan *p, snug_mem *mem, snug_error *err) {
    memset(x, 0, sizeof *x);
    x->g = g;
    x->p = p;
    x->buf = calloc((size_t)p->n_bufs + 1, sizeof *x->buf);
    x->calls = calloc((size_t)g->n_nodes + 1, sizeof *x->calls);
    if (!x->buf || !x->calls) {
        exec_unbind(x);
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the executor's tables");
    }
    snug_status s = reserve_buffers(x, mem, err);
    if (s != SNUG_OK) {
        exec_unbind(x);
        return s;
    }
    x->params = x->buf[p->params_buf];
    x->grads = x->buf[p->grads_buf];
    x->optim_state = buf_or_null(x, p->optim_buf);
    x->input = x->buf[p->value_buf[g->nodes[g->input_node].output]];
    x->targets = x->buf[p->targets_buf];
    for (int n = 0; n < g->n_nodes; n++) bind_call(x, n);
    const graph_node *loss = &g->nodes[g->loss_node];
    x->item_loss = x->buf[p->value_buf[loss->output]];
    x->logits = x->buf[p->value_buf[loss->inputs[0]]];
    return SNUG_OK;
}

void exec_unbind(exec *x) {
    free(x->buf);
    free(x->calls);
    x->buf = NULL;
    x->calls = NULL;
}

void exec_forward(exec *x, size_t m) {
    for (int n = 0; n < x->g->n_nodes; n++) {
        op_call c = x->calls[n];
        c.m = m;
        if (c.node->op->forward) c.node->op->forward(&c);
    }
}

/* Activation gradients are per micro-batch: zero the ones this backward will add into. Views share their
 * input's buffer, so zeroing by buffer (not by tensor) touches each once. */
static void zero_activation_grads(exec *x, size_t m) {
    const plan *p = x->p;
    for (int i = 0; i < p->n_bufs; i++) {
        const plan_buffer *b = &p->bufs[i];
        if (b->role != BUF_GRAD) continue;
        size_t numel = x->g->tensors[x->g->nodes[b->node].output].numel;
        memset(x->buf[i], 0, numel * m * sizeof(float));
    }
}

void exec_backward(exec *x, size_t m, float loss_scale) {
    zero_activation_grads(x, m);
    for (int n = x->g->n_nodes - 1; n >= 0; n--) {
        op_call c = x->calls[n];
        c.m = m;
        c.loss_scale = loss_scale;
        if (c.node->op->backward) c.node->op->backward(&c);
    }
}
