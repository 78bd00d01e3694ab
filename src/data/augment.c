/* Flip, shift (a random crop of the padded image, done as an in-place shift with fill) and brightness/contrast
 * jitter of one image sample, with the draws of (seed, epoch, sample). The geometric changes are gathers that
 * run in an order where every source element is read before it is overwritten: rows from the side the shift
 * reads from, and memmove within a row. */
#define _POSIX_C_SOURCE 200809L
#include "data/augment.h"

#include <string.h>

#include "core/rng.h"

#define AUGMENT_TAG UINT64_C(0x6175676d656e7400) /* "augment\0": no other user of the RNG draws this stream */

enum { DRAW_FLIP, DRAW_DY, DRAW_DX, DRAW_BRIGHTNESS, DRAW_CONTRAST };

bool augment_active(const snug_augment *a) {
    return a->flip || a->crop_pad || a->brightness > 0 || a->contrast > 0;
}

augment_draw augment_draw_for(const snug_augment *a, uint64_t seed, uint64_t epoch, uint64_t sample) {
    const uint64_t stream = snug_rng_bits(epoch, sample, AUGMENT_TAG);
    const uint64_t span = 2 * (uint64_t)a->crop_pad + 1;
    augment_draw d = {.brightness = 1.0f, .contrast = 1.0f};
    d.flip = a->flip && (snug_rng_bits(seed, stream, DRAW_FLIP) & 1u);
    if (a->crop_pad) {
        d.dy = (long)snug_rng_below(seed, stream, DRAW_DY, span) - (long)a->crop_pad;
        d.dx = (long)snug_rng_below(seed, stream, DRAW_DX, span) - (long)a->crop_pad;
    }
    if (a->brightness > 0)
        d.brightness = 1.0f + a->brightness * (2.0f * snug_rng_uniform(seed, stream, DRAW_BRIGHTNESS) - 1.0f);
    if (a->contrast > 0)
        d.contrast = 1.0f + a->contrast * (2.0f * snug_rng_uniform(seed, stream, DRAW_CONTRAST) - 1.0f);
    return d;
}

augment_units augment_units_of(const snug_dataset *ds) {
    augment_units u = {.scale = {1, 1, 1}};
    snug_normalise n;
    if (!snug_dataset_normalisation(ds, &n)) return u;
    for (size_t c = 0; c < 3; c++) {
        const size_t k = c < n.channels ? c : 0;  /* fewer channels: the first one's units */
        u.scale[c] = n.std[k];
        u.offset[c] = n.mean[k];
    }
    u.clamp = true;
    return u;
}

/* The columns of a row that read inside the image: x + dx in [0, W). */
static void valid_columns(size_t W, long dx, size_t *x0, size_t *x1) {
    const long w = (long)W;
    long lo = dx < 0 ? -dx : 0, hi = dx > 0 ? w - dx : w;
    if (hi < lo) hi = lo = 0;  /* a shift past the whole row */
    *x0 = (size_t)lo, *x1 = (size_t)hi;
}

/* out(y, x) = in(y + dy, x + dx), fill where that falls outside; in place over a (H, W) plane of TYPE. */
#define DEFINE_SHIFT(NAME, TYPE)                                                                               \
    static void NAME(TYPE *p, size_t H, size_t W, long dy, long dx, TYPE fill) {                               \
        size_t x0, x1;                                                                                         \
        valid_columns(W, dx, &x0, &x1);                                                                        \
        for (size_t k = 0; k < H; k++) {                                                                       \
            const size_t y = dy > 0 ? k : H - 1 - k; /* read rows before they are written */                   \
            const long sy = (long)y + dy;                                                                      \
            TYPE *row = p + y * W;                                                                             \
            size_t fill_from = 0, fill_to = W;                                                                 \
            if (sy >= 0 && sy < (long)H && x1 > x0) {                                                          \
                memmove(row + x0, p + (size_t)sy * W + (size_t)((long)x0 + dx), (x1 - x0) * sizeof *row);      \
                for (size_t x = 0; x < x0; x++) row[x] = fill;                                                 \
                fill_from = x1;                                                                                \
            }                                                                                                  \
            for (size_t x = fill_from; x < fill_to; x++) row[x] = fill;                                        \
        }                                                                                                      \
    }
DEFINE_SHIFT(shift_floats, float)
DEFINE_SHIFT(shift_targets, int32_t)

#define DEFINE_MIRROR(NAME, TYPE)                                                                              \
    static void NAME(TYPE *p, size_t H, size_t W) {                                                            \
        for (size_t y = 0; y < H; y++)                                                                         \
            for (size_t a = y * W, b = a + W - 1; a < b; a++, b--) {                                           \
                TYPE t = p[a];                                                                                 \
                p[a] = p[b];                                                                                   \
                p[b] = t;                                                                                      \
            }                                                                                                  \
    }
DEFINE_MIRROR(mirror_floats, float)
DEFINE_MIRROR(mirror_targets, int32_t)

static float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* Brightness then contrast, in pixel units: p' = p * b; p'' = (p' - mean) * c + mean, mean over the image. */
static void jitter(float *x, size_t C, size_t plane, const augment_draw *d, const augment_units *u) {
    double sum = 0;
    for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < plane; i++) {
            float p = (x[c * plane + i] * u->scale[c] + u->offset[c]) * d->brightness;
            if (u->clamp) p = clamp01(p);
            x[c * plane + i] = p;
            sum += p;
        }
    const float mean = (float)(sum / (double)(C * plane));
    for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < plane; i++) {
            float p = (x[c * plane + i] - mean) * d->contrast + mean;
            if (u->clamp) p = clamp01(p);
            x[c * plane + i] = (p - u->offset[c]) / u->scale[c];
        }
}

void augment_image(float *x, size_t C, size_t H, size_t W, const augment_draw *d, const augment_units *u) {
    const size_t plane = H * W;
    for (size_t c = 0; c < C; c++) {
        const float black = -u->offset[c < 3 ? c : 0] / u->scale[c < 3 ? c : 0];  /* the value of pixel 0 */
        if (d->dy || d->dx) shift_floats(x + c * plane, H, W, d->dy, d->dx, black);
        if (d->flip) mirror_floats(x + c * plane, H, W);
    }
    if ((d->brightness != 1.0f || d->contrast != 1.0f) && C <= 3) jitter(x, C, plane, d, u);
}

void augment_pixel_targets(int32_t *y, size_t H, size_t W, const augment_draw *d) {
    if (d->dy || d->dx) shift_targets(y, H, W, d->dy, d->dx, SNUG_IGNORE_TARGET);
    if (d->flip) mirror_targets(y, H, W);
}
