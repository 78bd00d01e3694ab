/* Prediction: the logits of every sample of a data set, forward only, micro-batch by micro-batch through the
 * training buffers (as evaluation runs), copied out to the caller's array. The whole set on every rank: a
 * prediction is the caller's to keep, not a score to all-reduce. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "train/read.h"
#include "train/trainer.h"

snug_status snug_trainer_predict(snug_trainer *tr, const snug_dataset *ds, float *logits, snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    if (!logits) return snug_fail(err, SNUG_E_ARG, "snug_trainer_predict: logits is NULL");
    const size_t n = snug_dataset_size(ds), m = tr->plan->m;
    const size_t per_sample = tr->g->tensors[tr->g->nodes[tr->g->loss_node].inputs[0]].numel;
    size_t *idx = malloc(m * sizeof *idx);
    if (!idx) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the prediction index");
    const double t0 = omp_get_wtime();
    exec_weights_changed(&tr->x); /* a step or the caller may have changed them since they were derived */
    for (size_t start = 0; start < n; start += m) {
        const size_t len = n - start < m ? n - start : m;
        for (size_t i = 0; i < len; i++) idx[i] = start + i;
        trainer_read_plain(tr, ds, idx, len, tr->x.input, tr->x.targets);
        exec_key key = {.seed = tr->cfg.seed, .training = false};
        exec_forward(&tr->x, len, &key);
        memcpy(logits + start * per_sample, tr->x.logits, len * per_sample * sizeof *logits);
    }
    free(idx);
    s = dataset_read_status(ds, err);
    /* like an evaluation, a prediction between training steps is not training time */
    if (tr->start_time != 0) tr->start_time += omp_get_wtime() - t0;
    return s;
}
