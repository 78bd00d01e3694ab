/* Holding two runs of one model to the same discrete decisions, so that their gradients differ only by what the
 * arithmetic changes.
 *
 * A ReLU network's gradient is discontinuous: a unit whose pre-activation lies within rounding of zero is on in
 * one run and off in the other, and its whole backward path appears or vanishes (in vgg16 at batch 1, one unit of
 * fc2 at 1.6e-4 of its layer's rms moves conv4.weight's gradient by 60%); a max-pool window whose two largest
 * values lie within rounding sends its gradient to another pixel. Which units flip depends on the last bits of
 * float32 sums, so on the CPU and the kernels it picks: a bound on the raw difference of two precisions holds by
 * luck. Recording the decisions of one run (which outputs are exactly zero, each max-pool window's argmax) and
 * imposing them on the other as its forward makes them (a flipped unit's value becomes zero or FLT_MIN; the pixel
 * the first run chose is raised to just above its window's maximum) leaves both runs on one smooth branch of the
 * network, where the difference is continuous in the rounding and a bound can be argued (tests/test_precision.c).
 * What the imposing changes is counted, so a test can say how many decisions differed.
 *
 * Usage: decisions_record(&d, tr_a) before a's gradients, decisions_impose(&d, tr_b) before b's, decisions_free. */
#ifndef SNUG_TESTS_PINNED_DECISIONS_H
#define SNUG_TESTS_PINNED_DECISIONS_H

#include <stddef.h>
#include <stdint.h>

#include "train/trainer.h"

typedef struct decisions {
    const snug_graph *g;
    int imposing;            /* 0 while recording, 1 while imposing */
    uint8_t **positive;       /* per node: one bit per output element, set where the recorded run's was > 0 */
    int32_t **argmax;        /* per max-pool node: the recorded run's argmax of each window, within its sample */
    size_t signs_changed;    /* imposing: outputs on the other side of zero (ReLU units that flipped) */
    size_t argmax_changed;   /* imposing: windows whose argmax differed */
} decisions;

/* The next forward of tr records its decisions into d (d zeroed first). */
void decisions_record(decisions *d, snug_trainer *tr);
/* The next forward of tr takes the decisions recorded in d (the same graph, the same batch). */
void decisions_impose(decisions *d, snug_trainer *tr);
/* Detaches d from tr (the trainer's forward is plain again). */
void decisions_detach(snug_trainer *tr);
void decisions_free(decisions *d);

#endif
