/* Reading micro-batches for the trainer: the one way from a data set into the input and target buffers, for
 * training (augmented, with the draws of the window's epoch), evaluation (as stored) and the read-ahead thread
 * (prefetch.c). While a read-ahead thread runs, every read of any data set takes the trainer's data lock: a data
 * set of callbacks is promised never to be called twice at once. */
#ifndef SNUG_TRAIN_READ_H
#define SNUG_TRAIN_READ_H

#include <stddef.h>
#include <stdint.h>

#include "snug.h"

/* Samples idx[0..n) of ds into x (n, sample shape) and y (n, targets per sample), as training sees them:
 * augmented with tr's augmentation and the draws of (seed, epoch, sample). */
void trainer_read_training(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n, long epoch,
                           float *x, int32_t *y);
/* Only the targets, as training sees them (a shift moves per-pixel targets, and so the items they count). */
void trainer_read_training_targets(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n,
                                   long epoch, int32_t *y);
/* Samples as stored, for evaluation. */
void trainer_read_plain(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n, float *x,
                        int32_t *y);

#endif
