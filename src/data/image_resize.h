/* Fitting a decoded image to a model's input: scaled (aspect kept) to cover (H, W), centre-cropped to it, its
 * channels converted to the model's, written planar (C, H, W) as floats on the 0..255 scale of the bytes. A pure
 * function over byte and float arrays, so that it can be tested against hand-computed values alone. */
#ifndef SNUG_DATA_IMAGE_RESIZE_H
#define SNUG_DATA_IMAGE_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "snug.h"

/* The size (*rh, *rw) an image of (sh, sw) is scaled to before the crop: the smallest scale at which it covers
 * (H, W), so one side equals the target's and the other is at least the target's, rounded to nearest (for a
 * square target: the shorter side becomes H). */
void image_resize_size(size_t sh, size_t sw, size_t H, size_t W, size_t *rh, size_t *rw);

/* Bytes of scratch image_resize_crop needs for these sizes. */
size_t image_resize_scratch_bytes(size_t sh, size_t sw, size_t C, size_t H, size_t W);

/* dst (C, H, W) floats from src (sh, sw, sc) interleaved bytes, sc and C each 1 or 3: RGB to gray by the ITU-R
 * BT.601 luma weights (0.299, 0.587, 0.114), gray to RGB replicated. Scaled to image_resize_size's (rh, rw),
 * then the centre (H, W) kept (offsets (rh - H) / 2 and (rw - W) / 2, rounded down). Per axis, mode AREA is the
 * box filter (each output pixel the average of the source area it covers, weighted by overlap), BILINEAR
 * interpolation between the two nearest source pixels with half-pixel centres (x_src = (x + 0.5) * in / out -
 * 0.5, clamped at the borders, as OpenCV's INTER_LINEAR); AUTO is AREA on an axis that shrinks and BILINEAR on
 * one that grows. An axis of the same size is copied exactly, whatever the mode. scratch: at least
 * image_resize_scratch_bytes, aligned for size_t. */
void image_resize_crop(float *dst, const uint8_t *src, size_t sh, size_t sw, size_t sc, size_t C, size_t H,
                       size_t W, snug_resize mode, void *scratch);

#endif
