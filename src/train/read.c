/* The trainer's reads (read.h): the data set's fill functions, the data lock while a read-ahead thread runs, and
 * the augmentation of training samples. */
#include "train/read.h"

#include <pthread.h>

#include "data/augment.h"
#include "data/dataset.h"
#include "train/trainer.h"

/* Augmentation applies to image samples (C, H, W); per-pixel targets move with them. */
static void augment_window(const snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n, long epoch,
                           float *x, int32_t *y) {
    const snug_augment *a = &tr->cfg.augment;
    const snug_shape *s = &ds->sample_shape;
    if (!augment_active(a) || s->rank != 3) return;
    const size_t C = s->dims[0], H = s->dims[1], W = s->dims[2], per = ds->targets_per_sample;
    const bool pixels = per == H * W && per > 1;
    const augment_units u = augment_units_of(ds);
    for (size_t i = 0; i < n; i++) {
        const augment_draw d = augment_draw_for(a, tr->cfg.seed, (uint64_t)epoch, idx[i]);
        if (x) augment_image(x + i * ds->sample_numel, C, H, W, &d, &u);
        if (y && pixels) augment_pixel_targets(y + i * per, H, W, &d);
    }
}

static void lock(snug_trainer *tr) {
    if (tr->pf) pthread_mutex_lock(&tr->data_lock);
}

static void unlock(snug_trainer *tr) {
    if (tr->pf) pthread_mutex_unlock(&tr->data_lock);
}

void trainer_read_training(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n, long epoch,
                           float *x, int32_t *y) {
    lock(tr);
    ds->ops->fill_inputs(ds, idx, n, x);
    ds->ops->fill_targets(ds, idx, n, y);
    unlock(tr);
    augment_window(tr, ds, idx, n, epoch, x, y);
}

void trainer_read_training_targets(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n,
                                   long epoch, int32_t *y) {
    lock(tr);
    ds->ops->fill_targets(ds, idx, n, y);
    unlock(tr);
    augment_window(tr, ds, idx, n, epoch, NULL, y);
}

void trainer_read_plain(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n, float *x,
                        int32_t *y) {
    lock(tr);
    ds->ops->fill_inputs(ds, idx, n, x);
    ds->ops->fill_targets(ds, idx, n, y);
    unlock(tr);
}
