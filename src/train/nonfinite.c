/* Naming the first non-finite value of a skipped window, for the message that stops a run after too many: the
 * window's micro-batches run again with every step's output (forward) and input gradients (backward) checked as
 * they are written. Only when the run stops, so training itself pays nothing for it. */
#include <stdio.h>

#include "data/dataset.h"
#include "ops/op.h"
#include "train/read.h"
#include "train/trainer.h"

static void describe(const snug_trainer *tr, const exec_nonfinite *w, size_t sample, char *msg, size_t len) {
    const op_node *nd = w->node;
    const unsigned flags = nd->op->flags;
    if (flags & OP_IS_INPUT)
        snprintf(msg, len, "; sample %zu of the data set holds a non-finite value (%g)", sample, (double)w->value);
    else if (flags & OP_IS_LOSS && w->input < 0)
        snprintf(msg, len, "; the first non-finite value is the loss of sample %zu of the data set (layer '%s', %s)",
                 sample, nd->name, nd->op->kind);
    else if (w->input < 0)
        snprintf(msg, len, "; the first non-finite value (%g) is in the output of layer '%s' (%s) in forward, for "
                 "sample %zu of the data set", (double)w->value, nd->name, nd->op->kind, sample);
    else
        snprintf(msg, len, "; the first non-finite value (%g) is in the gradient of layer '%s' (%s) with respect to "
                 "its input %d (from '%s') in backward, for sample %zu of the data set", (double)w->value, nd->name,
                 nd->op->kind, w->input + 1, tr->g->nodes[tr->g->tensors[nd->inputs[w->input]].producer].name, sample);
}

void trainer_find_nonfinite(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n, char *msg,
                            size_t len) {
    msg[0] = '\0';
    size_t begin, part_len, m = tr->plan->m;
    dist_shard(n, tr->dist.rank, tr->dist.size, &begin, &part_len);
    const float scale = tr->window_items ? (float)(1.0 / (double)tr->window_items) : 1.0f;
    for (size_t start = 0; start < part_len; start += m) {
        const size_t part = part_len - start < m ? part_len - start : m;
        const size_t *idx = indices + begin + start;
        /* the key of the window just run: the same dropout masks */
        exec_key key = {.seed = tr->cfg.seed, .step = tr->windows - 1, .micro = begin + start, .training = true};
        trainer_read_training(tr, ds, idx, part, tr->epoch, tr->x.input, tr->x.targets);
        exec_nonfinite w;
        if (exec_find_nonfinite(&tr->x, part, scale, &key, &w)) {
            describe(tr, &w, idx[w.sample], msg, len);
            break;
        }
    }
    exec_flush(&tr->x); /* pending contributions are discarded with the gradients */
    trainer_zero_grads(tr);
    trainer_restore_buffers(tr);
}
