/* Resize and centre crop (image_resize.h), separable: each axis gets a table of taps (source index and weight
 * for each output index), rows are filtered horizontally into a scratch block of (rows, W, channels) floats,
 * then columns vertically into the planar output. Only the cropped part of the scaled image is computed. Weights
 * of the box filter come from integer overlaps (in units of 1/out of a source pixel), so an axis whose size is
 * kept has one tap of weight exactly 1 and copies its pixels bit for bit. */
#include "data/image_resize.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

typedef struct axis_taps {
    size_t *first;   /* (n) the first source index of output i */
    size_t *count;   /* (n) how many taps output i has */
    float *weight;   /* (n, max_taps) */
    size_t max_taps;
} axis_taps;

static size_t max_taps(size_t n_in, size_t n_res) { return n_in / n_res + 2; }

static size_t round_up(size_t bytes) { return (bytes + 15) & ~(size_t)15; }

static size_t taps_bytes(size_t n_in, size_t n_res, size_t n) {
    return round_up(2 * n * sizeof(size_t)) + round_up(n * max_taps(n_in, n_res) * sizeof(float));
}

/* Carves a table of n outputs out of *p. */
static axis_taps taps_at(unsigned char **p, size_t n_in, size_t n_res, size_t n) {
    axis_taps t = {.max_taps = max_taps(n_in, n_res)};
    t.first = (size_t *)(void *)*p;
    t.count = t.first + n;
    t.weight = (float *)(void *)(*p + round_up(2 * n * sizeof(size_t)));
    *p += taps_bytes(n_in, n_res, n);
    return t;
}

/* Scaled index k (of n_res) averages the source interval [k * n_in, (k + 1) * n_in) / n_res. */
static void area_taps(axis_taps *t, size_t i, size_t k, size_t n_in, size_t n_res) {
    const size_t a = k * n_in, b = (k + 1) * n_in;
    const size_t j0 = a / n_res, j1 = (b - 1) / n_res;
    t->first[i] = j0;
    t->count[i] = j1 - j0 + 1;
    for (size_t j = j0; j <= j1; j++) {
        const size_t lo = a > j * n_res ? a : j * n_res, hi = b < (j + 1) * n_res ? b : (j + 1) * n_res;
        t->weight[i * t->max_taps + (j - j0)] = (float)((double)(hi - lo) / (double)n_in);
    }
}

static void bilinear_taps(axis_taps *t, size_t i, size_t k, size_t n_in, size_t n_res) {
    double x = ((double)k + 0.5) * (double)n_in / (double)n_res - 0.5;
    if (x < 0) x = 0;
    size_t j = (size_t)floor(x);
    double f = x - (double)j;
    if (j >= n_in - 1) {
        j = n_in - 1;
        f = 0;
    }
    t->first[i] = j;
    t->count[i] = f > 0 ? 2 : 1;
    t->weight[i * t->max_taps] = (float)(1.0 - f);
    t->weight[i * t->max_taps + 1] = (float)f;
}

/* Outputs [0, n) are the scaled indices [offset, offset + n) of an axis of n_in scaled to n_res. */
static void fill_taps(axis_taps *t, size_t n_in, size_t n_res, size_t offset, size_t n, snug_resize mode) {
    const bool area = mode == SNUG_RESIZE_AREA || (mode == SNUG_RESIZE_AUTO && n_res < n_in);
    for (size_t i = 0; i < n; i++) {
        if (area || n_in == n_res) area_taps(t, i, offset + i, n_in, n_res);
        else bilinear_taps(t, i, offset + i, n_in, n_res);
    }
}

void image_resize_size(size_t sh, size_t sw, size_t H, size_t W, size_t *rh, size_t *rw) {
    if (H * sw >= W * sh) {  /* H / sh >= W / sw: the height decides */
        *rh = H;
        *rw = (2 * sw * H + sh) / (2 * sh);
    } else {
        *rw = W;
        *rh = (2 * sh * W + sw) / (2 * sw);
    }
}

/* The channels filtered: the model's when the file has them, else one (gray, or luma of RGB). */
static size_t work_channels(size_t sc, size_t C) { return sc == C ? C : 1; }

size_t image_resize_scratch_bytes(size_t sh, size_t sw, size_t C, size_t H, size_t W) {
    size_t rh, rw;
    image_resize_size(sh, sw, H, W, &rh, &rw);
    return taps_bytes(sh, rh, H) + taps_bytes(sw, rw, W) + round_up(sh * W * C * sizeof(float));
}

/* Channel c (of k) of source pixel p: the byte, or the luma of an RGB pixel when k is 1 and the file RGB. */
static inline float source_value(const uint8_t *px, size_t sc, size_t k, size_t c) {
    if (sc == k) return (float)px[c];
    return 0.299f * (float)px[0] + 0.587f * (float)px[1] + 0.114f * (float)px[2];
}

/* Source rows [r0, r1) filtered along x into rows (r1 - r0, W, k). */
static void filter_rows(float *rows, const uint8_t *src, size_t sw, size_t sc, size_t k, size_t r0, size_t r1,
                        const axis_taps *tx, size_t W) {
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *line = src + r * sw * sc;
        float *out = rows + (r - r0) * W * k;
        for (size_t x = 0; x < W; x++)
            for (size_t c = 0; c < k; c++) {
                float acc = 0;
                const float *w = tx->weight + x * tx->max_taps;
                for (size_t t = 0; t < tx->count[x]; t++)
                    acc += w[t] * source_value(line + (tx->first[x] + t) * sc, sc, k, c);
                out[x * k + c] = acc;
            }
    }
}

/* Filtered rows along y into the planar output's first k planes. */
static void filter_columns(float *dst, const float *rows, size_t r0, size_t k, const axis_taps *ty, size_t H,
                           size_t W) {
    for (size_t c = 0; c < k; c++)
        for (size_t y = 0; y < H; y++) {
            const float *w = ty->weight + y * ty->max_taps;
            float *out = dst + (c * H + y) * W;
            for (size_t x = 0; x < W; x++) {
                float acc = 0;
                for (size_t t = 0; t < ty->count[y]; t++)
                    acc += w[t] * rows[((ty->first[y] + t - r0) * W + x) * k + c];
                out[x] = acc;
            }
        }
}

void image_resize_crop(float *dst, const uint8_t *src, size_t sh, size_t sw, size_t sc, size_t C, size_t H,
                       size_t W, snug_resize mode, void *scratch) {
    size_t rh, rw;
    image_resize_size(sh, sw, H, W, &rh, &rw);
    unsigned char *p = scratch;
    axis_taps ty = taps_at(&p, sh, rh, H), tx = taps_at(&p, sw, rw, W);
    fill_taps(&ty, sh, rh, (rh - H) / 2, H, mode);
    fill_taps(&tx, sw, rw, (rw - W) / 2, W, mode);
    const size_t r0 = ty.first[0], r1 = ty.first[H - 1] + ty.count[H - 1];  /* first is non-decreasing */
    const size_t k = work_channels(sc, C);
    float *rows = (float *)(void *)p;
    filter_rows(rows, src, sw, sc, k, r0, r1, &tx, W);
    filter_columns(dst, rows, r0, k, &ty, H, W);
    for (size_t c = k; c < C; c++) memcpy(dst + c * H * W, dst, H * W * sizeof *dst);  /* gray to RGB */
}
