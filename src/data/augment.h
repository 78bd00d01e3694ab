/* Random changes to training images (snug_augment), as pure functions over one sample's arrays: the draws of a
 * sample come from (seed, epoch, sample index) alone, and every change is made in place, so augmenting needs no
 * memory beyond the micro-batch buffer it changes. */
#ifndef SNUG_DATA_AUGMENT_H
#define SNUG_DATA_AUGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

/* What was drawn for one sample in one epoch. */
typedef struct augment_draw {
    bool flip;
    long dy, dx;       /* out(y, x) = in(y + dy, x + dx) before the flip; |dy|, |dx| <= crop_pad */
    float brightness;  /* pixel factor, 1: none */
    float contrast;    /* factor of the distances from the image's mean, 1: none */
} augment_draw;

/* Whether a changes anything. */
bool augment_active(const snug_augment *a);
augment_draw augment_draw_for(const snug_augment *a, uint64_t seed, uint64_t epoch, uint64_t sample);

/* Pixel units of a normalised sample: pixel = value * scale[c] + offset[c] (the data set's std and mean), and
 * whether pixels live in [0, 1] (a known normalisation: jitter clamps there). */
typedef struct augment_units {
    float scale[3], offset[3];
    bool clamp;
} augment_units;
/* The units of a data set: its normalisation when it says one, else the identity. */
augment_units augment_units_of(const snug_dataset *ds);

/* Changes x (C, H, W) in place; C <= 3 for the jitter (more channels: the geometric changes only). */
void augment_image(float *x, size_t C, size_t H, size_t W, const augment_draw *d, const augment_units *u);
/* Moves per-pixel targets y (H, W) with their image; targets from outside it become SNUG_IGNORE_TARGET. */
void augment_pixel_targets(int32_t *y, size_t H, size_t W, const augment_draw *d);

#endif
