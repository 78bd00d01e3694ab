/* Reading ahead: a background thread reads (decodes, augments) the next micro-batches of an epoch into a ring of
 * micro-batch buffers while the step computes, so that a step waits for data only when decoding is slower than
 * computing. The ring is memory of the plan (its data category); the thread reads the samples in the order the
 * step takes them, and the step copies each one out of the ring into its input buffer. */
#ifndef SNUG_TRAIN_PREFETCH_H
#define SNUG_TRAIN_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

typedef struct prefetch prefetch;

/* tr->pf: a reader over the plan's ring (its ring_slots micro-batch buffers), decoding with the plan's
 * ring_threads OpenMP threads, and tr's data lock. SNUG_E_OOM when the system refuses a lock. */
snug_status prefetch_new(snug_trainer *tr, snug_error *err);
/* Stops the reader and frees tr->pf (NULL is fine) and the data lock. */
void prefetch_free(snug_trainer *tr);

/* Starts reading epoch `epoch` of ds from window w0 to per_epoch - 1, its samples in order[0..n) (borrowed until
 * prefetch_stop), this rank's shard of each window in micro-batches of the plan's m. SNUG_E_OOM when the thread
 * cannot be started (the caller then reads on demand). */
snug_status prefetch_start(prefetch *pf, const snug_dataset *ds, const size_t *order, size_t n, long epoch, long w0,
                           long per_epoch, snug_error *err);
/* Stops the reader (it finishes the micro-batch it is reading) and waits for it; the ring's contents are dropped. */
void prefetch_stop(prefetch *pf);

/* The micro-batch of samples idx[0..n) into x and y, when it is the reader's next one: waits until it is read,
 * copies it, frees its slot, true. Micro-batches the reader read before it and the step never asked for (a window
 * without any counted item) are dropped. false when the reader does not have it (not running, or past it): the
 * caller reads it itself. */
bool prefetch_take(prefetch *pf, const size_t *idx, size_t n, float *x, int32_t *y);

/* Seconds the reader spent reading, and the samples it read, since it was made (prefetch_free adds them to the
 * trainer's totals). */
void prefetch_counts(prefetch *pf, double *busy_seconds, size_t *samples);

#endif
