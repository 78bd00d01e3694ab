/* Evaluation: forward only, micro-batch by micro-batch through the training buffers, so it needs no memory
 * beyond the plan. */
#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "train/trainer.h"

#include <stdlib.h>

static size_t argmax(const float *v, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Adds the loss and the correct predictions of the first len samples in the buffers. */
static void score_batch(const snug_trainer *tr, size_t len, size_t classes, double *loss, size_t *correct,
                        size_t *items) {
    const exec *x = &tr->x;
    for (size_t i = 0; i < len; i++) {
        if (x->targets[i] == SNUG_IGNORE_TARGET) continue;
        *loss += x->item_loss[i];
        *correct += argmax(x->logits + i * classes, classes) == (size_t)x->targets[i];
        (*items)++;
    }
}

snug_status snug_trainer_evaluate(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                  snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    size_t n = snug_dataset_size(ds), m = tr->plan.m;
    size_t classes = tr->g->tensors[tr->g->nodes[tr->g->loss_node].inputs[0]].numel;
    size_t idx_chunk[1024];
    size_t *idx = m <= 1024 ? idx_chunk : malloc(m * sizeof *idx);
    if (!idx) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the evaluation index");
    double loss = 0;
    size_t correct = 0, items = 0;
    for (size_t start = 0; start < n; start += m) {
        size_t len = n - start < m ? n - start : m;
        for (size_t i = 0; i < len; i++) idx[i] = start + i;
        ds->ops->fill_inputs(ds, idx, len, tr->x.input);
        ds->ops->fill_targets(ds, idx, len, tr->x.targets);
        exec_key key = {.seed = tr->cfg.seed, .training = false};
        exec_forward(&tr->x, len, &key);
        score_batch(tr, len, classes, &loss, &correct, &items);
    }
    if (idx != idx_chunk) free(idx);
    res->items = items;
    res->loss = items ? loss / (double)items : 0;
    res->accuracy = items ? (double)correct / (double)items : 0;
    return SNUG_OK;
}
