/* Synthetic segmentation: sample i is a one-channel image of 1 to 6 filled circles, rotated rectangles and
 * triangles on a noisy background; the target of a pixel is 1 inside any shape, 0 outside. Nothing is stored:
 * a sample is a pure function of (seed, i) through the counter-based RNG, drawn again on every fill, so any
 * resolution works (1400x2100 is 3 M pixels per sample) and any sample can be replayed anywhere.
 *
 * What makes it a task rather than a threshold: the background is a random linear ramp (its range can exceed a
 * shape's contrast, so no global threshold separates the classes), each shape has its own intensity, brighter or
 * darker than the background around it, with contrast 0.12 to 0.45, and Gaussian-like noise of deviation 0.03 to
 * 0.10 covers everything. Contrast over noise stays above 1.2, so a small UNet that looks at edges and
 * neighbourhoods can reach an IoU of 0.9 where a per-pixel rule cannot. Pixel values are in about [0, 1] before
 * normalisation, and are written as (v - 0.5) / 0.25. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"

#define SHAPES_MAX 6
#define SHAPES_CLASSES 2
/* Below this many pixels per sample a parallel region costs more than it saves. */
#define SHAPES_PARALLEL_MIN_PIXELS ((size_t)1 << 16)

typedef enum shape_kind { SHAPE_CIRCLE = 0, SHAPE_RECT, SHAPE_TRIANGLE, SHAPE_KINDS } shape_kind;

typedef struct shape {
    shape_kind kind;
    float cx, cy;           /* centre, pixels */
    float a, b;             /* circle: radius a; rectangle: half sides a, b */
    float cos_t, sin_t;     /* rectangle: rotation */
    float vx[3], vy[3];     /* triangle: vertices, counter-clockwise */
    float x0, y0, x1, y1;   /* bounding box */
    float contrast;         /* added to the background under the shape */
} shape;

typedef struct scene {
    size_t count;
    shape shapes[SHAPES_MAX];
    float base, ramp_x, ramp_y;  /* background: base + ramp_x * x/W + ramp_y * y/H */
    float noise;                 /* deviation of the noise */
} scene;

typedef struct shapes_impl {
    uint64_t seed;
} shapes_impl;

/* Draws are addressed as (seed, 2 i, k) for the scene of sample i and (seed, 2 i + 1, pixel) for its noise. */
static float draw(uint64_t seed, size_t sample, uint64_t *k, float lo, float hi) {
    return lo + (hi - lo) * snug_rng_uniform(seed, 2 * (uint64_t)sample, (*k)++);
}

static void make_triangle(shape *s, float r, float angle) {
    for (int v = 0; v < 3; v++) {
        float t = angle + (float)v * 2.0943951f;  /* 2 pi / 3: counter-clockwise in image coordinates too */
        s->vx[v] = s->cx + r * cosf(t);
        s->vy[v] = s->cy + r * sinf(t);
    }
}

/* One shape whose size is a fraction of the shorter side; the bounding box is conservative. */
static void make_shape(shape *s, uint64_t seed, size_t sample, uint64_t *k, float h, float w) {
    const float side = fminf(h, w);
    s->kind = (shape_kind)snug_rng_below(seed, 2 * (uint64_t)sample, (*k)++, SHAPE_KINDS);
    s->cx = draw(seed, sample, k, 0.0f, w);
    s->cy = draw(seed, sample, k, 0.0f, h);
    s->a = side * draw(seed, sample, k, 0.08f, 0.25f);
    s->b = side * draw(seed, sample, k, 0.06f, 0.2f);
    float angle = draw(seed, sample, k, 0.0f, 6.2831853f);
    s->cos_t = cosf(angle);
    s->sin_t = sinf(angle);
    float sign = snug_rng_below(seed, 2 * (uint64_t)sample, (*k)++, 2) ? 1.0f : -1.0f;
    s->contrast = sign * draw(seed, sample, k, 0.12f, 0.45f);
    float reach = s->a;
    if (s->kind == SHAPE_RECT) reach = sqrtf(s->a * s->a + s->b * s->b);
    if (s->kind == SHAPE_TRIANGLE) {
        reach = s->a * 1.3f;
        make_triangle(s, reach, angle);
    }
    s->x0 = s->cx - reach - 1.0f;
    s->x1 = s->cx + reach + 1.0f;
    s->y0 = s->cy - reach - 1.0f;
    s->y1 = s->cy + reach + 1.0f;
}

static void make_scene(scene *sc, uint64_t seed, size_t sample, size_t h, size_t w) {
    uint64_t k = 0;
    sc->count = 1 + (size_t)snug_rng_below(seed, 2 * (uint64_t)sample, k++, SHAPES_MAX);
    sc->base = draw(seed, sample, &k, 0.25f, 0.75f);
    sc->ramp_x = draw(seed, sample, &k, -0.25f, 0.25f);
    sc->ramp_y = draw(seed, sample, &k, -0.25f, 0.25f);
    sc->noise = draw(seed, sample, &k, 0.03f, 0.10f);
    for (size_t s = 0; s < sc->count; s++) make_shape(&sc->shapes[s], seed, sample, &k, (float)h, (float)w);
}

/* Which side of the edge (ax, ay) -> (bx, by) the point is on: >= 0 on the left (inside for counter-clockwise). */
static float edge(float ax, float ay, float bx, float by, float px, float py) {
    return (bx - ax) * (py - ay) - (by - ay) * (px - ax);
}

static bool inside(const shape *s, float px, float py) {
    if (px < s->x0 || px > s->x1 || py < s->y0 || py > s->y1) return false;
    const float dx = px - s->cx, dy = py - s->cy;
    switch (s->kind) {
    case SHAPE_CIRCLE:
        return dx * dx + dy * dy <= s->a * s->a;
    case SHAPE_RECT:
        return fabsf(dx * s->cos_t + dy * s->sin_t) <= s->a && fabsf(dy * s->cos_t - dx * s->sin_t) <= s->b;
    default:
        return edge(s->vx[0], s->vy[0], s->vx[1], s->vy[1], px, py) >= 0.0f &&
               edge(s->vx[1], s->vy[1], s->vx[2], s->vy[2], px, py) >= 0.0f &&
               edge(s->vx[2], s->vy[2], s->vx[0], s->vy[0], px, py) >= 0.0f;
    }
}

/* The topmost shape at the centre of pixel (x, y), or -1 for the background. Later shapes lie on top. */
static int top_shape(const scene *sc, size_t x, size_t y) {
    const float px = (float)x + 0.5f, py = (float)y + 0.5f;
    for (size_t s = sc->count; s-- > 0;)
        if (inside(&sc->shapes[s], px, py)) return (int)s;
    return -1;
}

/* Approximately Gaussian with deviation 1: the sum of four 16-bit uniforms from one draw (Irwin-Hall). */
static float noise_unit(uint64_t seed, size_t sample, size_t pixel) {
    uint64_t bits = snug_rng_bits(seed, 2 * (uint64_t)sample + 1, pixel);
    float sum = 0.0f;
    for (int q = 0; q < 4; q++) sum += (float)((bits >> (16 * q)) & 0xffff) * (1.0f / 65536.0f);
    return (sum - 2.0f) * 1.7320508f;  /* variance 4/12 -> 1 */
}

static void draw_image(const scene *sc, uint64_t seed, size_t sample, size_t h, size_t w,
                       float *x) {  // (h, w)
#pragma omp parallel for schedule(static) if (h * w >= SHAPES_PARALLEL_MIN_PIXELS)
    for (size_t y = 0; y < h; y++) {
        for (size_t c = 0; c < w; c++) {
            float v = sc->base + sc->ramp_x * (float)c / (float)w + sc->ramp_y * (float)y / (float)h;
            int s = top_shape(sc, c, y);
            if (s >= 0) v += sc->shapes[s].contrast;
            v += sc->noise * noise_unit(seed, sample, y * w + c);
            x[y * w + c] = (v - 0.5f) * 4.0f;
        }
    }
}

static void draw_mask(const scene *sc, size_t h, size_t w, int32_t *y) {  // (h, w)
#pragma omp parallel for schedule(static) if (h * w >= SHAPES_PARALLEL_MIN_PIXELS)
    for (size_t r = 0; r < h; r++)
        for (size_t c = 0; c < w; c++) y[r * w + c] = top_shape(sc, c, r) >= 0;
}

static void shapes_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n,
                               float *x) {  // (n, 1, H, W)
    const shapes_impl *m = ds->impl;
    const size_t h = ds->sample_shape.dims[1], w = ds->sample_shape.dims[2];
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        scene sc;
        make_scene(&sc, m->seed, idx[i], h, w);
        draw_image(&sc, m->seed, idx[i], h, w, x + i * ds->sample_numel);
    }
}

static void shapes_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n,
                                int32_t *y) {  // (n, H * W)
    const shapes_impl *m = ds->impl;
    const size_t h = ds->sample_shape.dims[1], w = ds->sample_shape.dims[2];
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        scene sc;
        make_scene(&sc, m->seed, idx[i], h, w);
        draw_mask(&sc, h, w, y + i * ds->targets_per_sample);
    }
}

static void shapes_destroy(snug_dataset *ds) {
    free(ds->impl);
    ds->impl = NULL;
}

static const dataset_ops shapes_ops = {
    .fill_inputs = shapes_fill_inputs,
    .fill_targets = shapes_fill_targets,
    .destroy = shapes_destroy,
};

snug_status snug_shapes_new(size_t n, size_t height, size_t width, uint64_t seed, snug_dataset **out,
                            snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_shapes_new: out is NULL");
    *out = NULL;
    if (n == 0 || height == 0 || width == 0)
        return snug_fail(err, SNUG_E_ARG, "snug_shapes_new: n, height and width must be > 0 (n %zu, %zu x %zu)", n,
                         height, width);
    /* Pixel coordinates are floats: beyond 2^24 they would no longer be exact. */
    const size_t max_side = (size_t)1 << 24;
    size_t pixels, total;
    if (height > max_side || width > max_side || !size_mul(height, width, &pixels) ||
        !size_mul(pixels, n, &total) || pixels > (size_t)INT32_MAX)
        return snug_fail(err, SNUG_E_OVERFLOW, "snug_shapes_new: %zu samples of %zu x %zu pixels are too many "
                         "(each side at most %zu, at most %d pixels per sample)", n, height, width, max_side,
                         INT32_MAX);
    snug_dataset *ds = calloc(1, sizeof *ds);
    shapes_impl *m = calloc(1, sizeof *m);
    if (!ds || !m) {
        free(ds);
        free(m);
        return snug_fail(err, SNUG_E_OOM, "snug_shapes_new: out of host memory for the dataset header");
    }
    m->seed = seed;
    ds->ops = &shapes_ops;
    ds->impl = m;
    ds->n = n;
    ds->sample_shape = (snug_shape){.rank = 3, .dims = {1, height, width}};
    ds->sample_numel = pixels;
    ds->classes = SHAPES_CLASSES;
    ds->targets_per_sample = pixels;
    *out = ds;
    return SNUG_OK;
}
