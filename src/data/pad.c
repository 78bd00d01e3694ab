/* A dataset whose images are another dataset's, centred in a larger frame: pad_h rows above and below, pad_w
 * columns left and right, every channel, filled with a constant (the normalised background of the inner data).
 * Per-sample labels pass through; per-pixel targets (targets_per_sample == H * W) are padded with
 * SNUG_IGNORE_TARGET, so the frame adds nothing to the loss.
 *
 * No scratch memory: the inner dataset fills the front of the caller's buffer, then the samples are spread to
 * their padded places from the last element backwards. A padded position is never before its unpadded one, so
 * walking backwards never overwrites an element that is still to be moved. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/dataset.h"

typedef struct pad_impl {
    snug_dataset *inner;
    size_t pad_h, pad_w;
    float value;
    bool pixel_targets;  /* targets are one per pixel of the inner image */
} pad_impl;

/* The geometry of one plane before and after padding. */
typedef struct pad_geom {
    size_t planes, h, w;      /* inner: (planes, h, w) per sample */
    size_t ph, pw, H, W;      /* padding and padded sides */
} pad_geom;

static pad_geom geometry(const pad_impl *p, size_t planes) {
    const snug_shape *s = &p->inner->sample_shape;
    return (pad_geom){.planes = planes, .h = s->dims[1], .w = s->dims[2], .ph = p->pad_h, .pw = p->pad_w,
                      .H = s->dims[1] + 2 * p->pad_h, .W = s->dims[2] + 2 * p->pad_w};
}

/* Spreads n samples packed as (n, planes, h, w) elements of elem bytes at the front of buf to (n, planes, H, W),
 * in place, and sets the frame to *fill. Planes, then rows, from the last backwards (see the top of the file). */
static void spread(void *buf, size_t elem, size_t n, pad_geom g, const void *fill) {
    uint8_t *b = buf;
    const size_t in_plane = g.h * g.w * elem, out_plane = g.H * g.W * elem;
    for (size_t plane = n * g.planes; plane-- > 0;) {
        const uint8_t *src = b + plane * in_plane;
        uint8_t *dst = b + plane * out_plane;
        for (size_t r = g.h; r-- > 0;)
            memmove(dst + ((r + g.ph) * g.W + g.pw) * elem, src + r * g.w * elem, g.w * elem);
        for (size_t r = 0; r < g.H; r++) {
            const bool frame_row = r < g.ph || r >= g.ph + g.h;
            for (size_t x = 0; x < g.W; x++)
                if (frame_row || x < g.pw || x >= g.pw + g.w) memcpy(dst + (r * g.W + x) * elem, fill, elem);
        }
    }
}

static void pad_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, C, H, W)
    const pad_impl *p = ds->impl;
    p->inner->ops->fill_inputs(p->inner, idx, n, x);
    spread(x, sizeof *x, n, geometry(p, p->inner->sample_shape.dims[0]), &p->value);
}

static void pad_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n) or (n, H, W)
    const pad_impl *p = ds->impl;
    p->inner->ops->fill_targets(p->inner, idx, n, y);
    const int32_t ignore = SNUG_IGNORE_TARGET;
    if (p->pixel_targets) spread(y, sizeof *y, n, geometry(p, 1), &ignore);
}

static void pad_destroy(snug_dataset *ds) {
    pad_impl *p = ds->impl;
    if (!p) return;
    snug_dataset_free(p->inner);
    free(p);
    ds->impl = NULL;
}

static snug_status pad_read_status(const snug_dataset *ds, snug_error *err) {
    return dataset_read_status(((const pad_impl *)ds->impl)->inner, err);
}

/* A frame or a view keeps its data set's units and class names. */
static bool pad_normalisation(const snug_dataset *ds, snug_normalise *out) {
    return snug_dataset_normalisation(((const pad_impl *)ds->impl)->inner, out);
}

static const char *pad_class_name(const snug_dataset *ds, size_t i) {
    return snug_dataset_class_name(((const pad_impl *)ds->impl)->inner, i);
}

static const dataset_ops pad_ops = {
    .fill_inputs = pad_fill_inputs,
    .fill_targets = pad_fill_targets,
    .destroy = pad_destroy,
    .read_status = pad_read_status,
    .normalisation = pad_normalisation,
    .class_name = pad_class_name,
};

/* The padded (C, H, W) and its element count, or an error when the inner data is not images or it overflows. */
static snug_status padded_shape(const snug_dataset *inner, size_t pad_h, size_t pad_w, snug_shape *shape,
                                size_t *numel, snug_error *err) {
    const snug_shape *s = &inner->sample_shape;
    if (s->rank != 3)
        return snug_fail(err, SNUG_E_SHAPE, "snug_dataset_pad: the samples have rank %d, padding needs images "
                         "(C, H, W)", s->rank);
    const size_t pixels = s->dims[1] * s->dims[2];
    if (inner->targets_per_sample != 1 && inner->targets_per_sample != pixels)
        return snug_fail(err, SNUG_E_SHAPE, "snug_dataset_pad: %zu targets per sample is neither one label nor one "
                         "per pixel (%zu): cannot tell how to pad them", inner->targets_per_sample, pixels);
    size_t twice_h, twice_w;
    *shape = (snug_shape){.rank = 3, .dims = {s->dims[0], 0, 0}};
    if (!size_mul(pad_h, 2, &twice_h) || !size_add(s->dims[1], twice_h, &shape->dims[1]) ||
        !size_mul(pad_w, 2, &twice_w) || !size_add(s->dims[2], twice_w, &shape->dims[2]) ||
        !size_prod(shape->dims, 3, numel))
        return snug_fail(err, SNUG_E_OVERFLOW, "snug_dataset_pad: padding by %zu x %zu overflows size_t", pad_h,
                         pad_w);
    return SNUG_OK;
}

snug_status snug_dataset_pad(snug_dataset *inner, size_t pad_h, size_t pad_w, float value, snug_dataset **out,
                             snug_error *err) {
    if (out) *out = NULL;
    if (!out || !inner) {
        snug_dataset_free(inner);
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_pad: inner and out must not be NULL");
    }
    snug_shape shape;
    size_t numel;
    snug_status s = padded_shape(inner, pad_h, pad_w, &shape, &numel, err);
    snug_dataset *ds = s == SNUG_OK ? calloc(1, sizeof *ds) : NULL;
    pad_impl *p = s == SNUG_OK ? calloc(1, sizeof *p) : NULL;
    if (s == SNUG_OK && (!ds || !p))
        s = snug_fail(err, SNUG_E_OOM, "snug_dataset_pad: out of host memory for the dataset header");
    if (s != SNUG_OK) {
        free(ds);
        free(p);
        snug_dataset_free(inner);
        return s;
    }
    const size_t pixels = shape.dims[1] * shape.dims[2];
    *p = (pad_impl){.inner = inner, .pad_h = pad_h, .pad_w = pad_w, .value = value,
                    .pixel_targets = inner->targets_per_sample != 1};
    ds->ops = &pad_ops;
    ds->impl = p;
    ds->n = inner->n;
    ds->sample_shape = shape;
    ds->sample_numel = numel;
    ds->classes = inner->classes;
    ds->targets_per_sample = p->pixel_targets ? pixels : 1;
    ds->memory_bytes = inner->memory_bytes; /* the frame is drawn in place: nothing more */
    ds->scratch_bytes = inner->scratch_bytes;
    *out = ds;
    return SNUG_OK;
}
