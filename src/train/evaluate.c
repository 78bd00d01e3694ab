/* Evaluation: forward only, micro-batch by micro-batch through the training buffers, so it needs no memory
 * beyond the plan. Over several ranks each scores its contiguous shard of the data set and the sums are
 * all-reduced, so every rank returns the result over the whole set. */
#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "train/trainer.h"

#include <stdlib.h>

/* The class whose logit is largest; the classes are `stride` apart. */
static size_t argmax(const float *v, size_t n, size_t stride) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i * stride] > v[best * stride]) best = i;
    return best;
}

/* Adds the loss and the correct predictions of the first len samples in the buffers: one item per target
 * (a sample, a token or a pixel; see softmax_xent.c), ignored targets skipped. Per sample the logits are
 * (outer, classes, inner): (classes), (T, classes) or (classes, H, W); logits_numel is their count. */
static void score_batch(const snug_trainer *tr, size_t len, size_t logits_numel, double *loss, size_t *correct,
                        size_t *items) {
    const exec *x = &tr->x;
    const snug_shape *s = &tr->g->tensors[tr->g->nodes[tr->g->loss_node].inputs[0]].shape;
    const size_t classes = s->rank == 2 ? s->dims[1] : s->dims[0];
    const size_t inner = s->rank == 3 ? s->dims[1] * s->dims[2] : 1;
    const size_t per = logits_numel / classes, n = len * per; /* items per sample, items in the buffers */
    for (size_t i = 0; i < n; i++) {
        const int32_t t = x->targets[i];
        if (t == SNUG_IGNORE_TARGET) continue;
        /* item i: sample-and-row i / inner, pixel i % inner */
        const float *logits = x->logits + (i / inner) * classes * inner + i % inner;
        *loss += x->item_loss[i];
        *correct += argmax(logits, classes, inner) == (size_t)t;
        (*items)++;
    }
}

snug_status snug_trainer_evaluate(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                  snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    size_t begin, n, m = tr->plan.m;
    dist_shard(snug_dataset_size(ds), tr->dist.rank, tr->dist.size, &begin, &n);
    size_t classes = tr->g->tensors[tr->g->nodes[tr->g->loss_node].inputs[0]].numel;
    size_t idx_chunk[1024];
    size_t *idx = m <= 1024 ? idx_chunk : malloc(m * sizeof *idx);
    if (!idx) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the evaluation index");
    double loss = 0;
    size_t correct = 0, items = 0;
    for (size_t start = 0; start < n; start += m) {
        size_t len = n - start < m ? n - start : m;
        for (size_t i = 0; i < len; i++) idx[i] = begin + start + i;
        ds->ops->fill_inputs(ds, idx, len, tr->x.input);
        ds->ops->fill_targets(ds, idx, len, tr->x.targets);
        exec_key key = {.seed = tr->cfg.seed, .training = false};
        exec_forward(&tr->x, len, &key);
        score_batch(tr, len, classes, &loss, &correct, &items);
    }
    if (idx != idx_chunk) free(idx);
    size_t counts[2] = {correct, items};
    if ((s = dist_allreduce_doubles(&loss, 1, err)) != SNUG_OK) return s;
    if ((s = dist_allreduce_sizes(counts, 2, DIST_SUM, err)) != SNUG_OK) return s;
    correct = counts[0], items = counts[1];
    res->items = items;
    res->loss = items ? loss / (double)items : 0;
    res->accuracy = items ? (double)correct / (double)items : 0;
    return SNUG_OK;
}
