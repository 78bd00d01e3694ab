/* im2col and its adjoint. Each column row is walked output row by output row; for a given kernel offset the
 * output rows and columns that land inside the input form ranges [lo, hi), computed once, so the inner loops
 * are branch-free copies with zero fill only at the borders. A dilated kernel is the same walk: tap (ki, kj)
 * reads at offset (ki d, kj d) from the window's corner instead of (ki, kj), so the row functions take the
 * offsets, not the tap indices. */
#include "kernels/im2col.h"

#include <omp.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/parallel.h"

/* Below this many column elements the threads cost more than they save. */
#define IM2COL_PAR_MIN ((size_t)1 << 15)

/* Along one axis of n input pixels and no outputs: the outputs [*lo, *hi) whose input o*stride + off - pad lies
 * inside [0, n) (off: the tap's offset in the window). */
static void valid_range(size_t off, size_t pad, size_t stride, size_t n, size_t no, size_t *lo, size_t *hi) {
    size_t l = 0, h = 0;
    if (off < pad) l = (pad - off + stride - 1) / stride;
    if (n - 1 + pad >= off) h = (n - 1 + pad - off) / stride + 1;
    if (h > no) h = no;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

static void valid_cols(const im2col_geom *g, size_t kj, size_t *lo, size_t *hi) {
    valid_range(kj, g->pw, g->sw, g->w, g->wo, lo, hi);
}

static void valid_rows(const im2col_geom *g, size_t ki, size_t *lo, size_t *hi) {
    valid_range(ki, g->pad, g->stride, g->h, g->ho, lo, hi);
}

/* One column row (channel c, tap offsets ki, kj in the window): the output rows outside the input are one zero
 * run at each end; each row inside is a zero edge, a copy of one input row (strided unless the width's stride is
 * 1) and a zero edge. Inline loops, not memcpy/memset calls: the rows are short (32 floats in ResNet-20) and
 * the calls cost more than the copies. */
static void im2col_row(float *dst,          // (ho*wo)
                       const float *plane,  // (h, w) of channel c
                       const im2col_geom *g, size_t ki, size_t kj) {
    size_t lo, hi, rlo, rhi;
    valid_cols(g, kj, &lo, &hi);
    valid_rows(g, ki, &rlo, &rhi);
    const size_t s = g->sw, wo = g->wo;
    if (lo == hi) rlo = rhi = g->ho;
    for (size_t i = 0; i < rlo * wo; i++) dst[i] = 0.0f;
    for (size_t i = rhi * wo; i < g->ho * wo; i++) dst[i] = 0.0f;
    for (size_t oh = rlo; oh < rhi; oh++) {
        float *d = dst + oh * wo;
        const float *src = plane + (oh * g->stride + ki - g->pad) * g->w + (lo * s + kj - g->pw);
        for (size_t ow = 0; ow < lo; ow++) d[ow] = 0.0f;
        if (s == 1) {
            float *dl = d + lo;
            for (size_t i = 0; i < hi - lo; i++) dl[i] = src[i];
        } else {
            for (size_t ow = lo; ow < hi; ow++) d[ow] = src[(ow - lo) * s];
        }
        for (size_t ow = hi; ow < wo; ow++) d[ow] = 0.0f;
    }
}

/* The adjoint of im2col_row: adds the valid entries of one column row back into the input plane. */
static void col2im_row(float *plane,      // (h, w) of channel c
                       const float *src,  // (ho*wo)
                       const im2col_geom *g, size_t ki, size_t kj) {
    size_t lo, hi, rlo, rhi;
    valid_cols(g, kj, &lo, &hi);
    valid_rows(g, ki, &rlo, &rhi);
    const size_t s = g->sw;
    if (lo == hi) return;
    for (size_t oh = rlo; oh < rhi; oh++) {
        float *dst = plane + (oh * g->stride + ki - g->pad) * g->w + (lo * s + kj - g->pw);
        const float *sr = src + oh * g->wo + lo;
        if (s == 1) {
            for (size_t i = 0; i < hi - lo; i++) dst[i] += sr[i];
        } else {
            for (size_t i = 0; i < hi - lo; i++) dst[i * s] += sr[i];
        }
    }
}

/* The patches tile the image exactly: kernel = stride, no padding, h = ho k, w = wo k (a transposed
 * convolution's 2x2 stride-2 up-sampling). Then every pixel belongs to one patch, and a channel is best walked
 * image row by image row, each row interleaving (col2im) or de-interleaving (im2col) k column rows while it sits
 * in L1, instead of k*k strided passes over the whole plane. */
static bool tiles(const im2col_geom *g) {
    return g->dilation <= 1 && g->kw == g->k && g->sw == g->stride && g->pw == g->pad && g->k == g->stride &&
           g->pad == 0 && g->h == g->ho * g->k && g->w == g->wo * g->k;
}

/* One channel of a tiled im2col. */
static void im2col_tiled(float *col,         // (k*k, ho*wo) of channel c
                         const float *plane, // (h, w) of channel c
                         const im2col_geom *g) {
    const size_t k = g->k, n = g->ho * g->wo;
    for (size_t oh = 0; oh < g->ho; oh++)
        for (size_t ki = 0; ki < k; ki++) {
            const float *src = plane + (oh * k + ki) * g->w;
            for (size_t kj = 0; kj < k; kj++) {
                float *dst = col + (ki * k + kj) * n + oh * g->wo;
                for (size_t ow = 0; ow < g->wo; ow++) dst[ow] = src[ow * k + kj];
            }
        }
}

/* One channel of a tiled col2im_add. */
static void col2im_tiled(float *plane,      // (h, w) of channel c
                         const float *col,  // (k*k, ho*wo) of channel c
                         const im2col_geom *g) {
    const size_t k = g->k, n = g->ho * g->wo;
    for (size_t oh = 0; oh < g->ho; oh++)
        for (size_t ki = 0; ki < k; ki++) {
            float *dst = plane + (oh * k + ki) * g->w;
            const float *src = col + ki * k * n + oh * g->wo;
            if (k == 2) { /* the common case, one interleaving pass */
                for (size_t ow = 0; ow < g->wo; ow++) {
                    dst[2 * ow] += src[ow];
                    dst[2 * ow + 1] += src[n + ow];
                }
                continue;
            }
            for (size_t kj = 0; kj < k; kj++)
                for (size_t ow = 0; ow < g->wo; ow++) dst[ow * k + kj] += src[kj * n + ow];
        }
}

/* A 1x1 unpadded kernel with stride s (the downsampling shortcut of a ResNet): the column matrix is x
 * subsampled, one row per channel, and col2im the matching scatter. Row by row, with stride 2 a constant so
 * that the compiler vectorises the (de)interleaving. */
static bool subsamples(const im2col_geom *g) {
    return g->k == 1 && g->kw == 1 && g->pad == 0 && g->pw == 0 && g->stride > 1 && g->sw == g->stride;
}

static void subsample_plane(float *dst,         // (ho*wo) of channel c
                            const float *plane, // (h, w) of channel c
                            const im2col_geom *g) {
    const size_t s = g->stride, wo = g->wo;
    for (size_t oh = 0; oh < g->ho; oh++, dst += wo) {
        const float *src = plane + oh * s * g->w;
        if (s == 2) {
            for (size_t ow = 0; ow < wo; ow++) dst[ow] = src[2 * ow];
        } else {
            for (size_t ow = 0; ow < wo; ow++) dst[ow] = src[ow * s];
        }
    }
}

static void scatter_plane_add(float *plane,     // (h, w) of channel c
                              const float *src, // (ho*wo) of channel c
                              const im2col_geom *g) {
    const size_t s = g->stride, wo = g->wo;
    for (size_t oh = 0; oh < g->ho; oh++, src += wo) {
        float *dst = plane + oh * s * g->w;
        if (s == 2) {
            for (size_t ow = 0; ow < wo; ow++) dst[2 * ow] += src[ow];
        } else {
            for (size_t ow = 0; ow < wo; ow++) dst[ow * s] += src[ow];
        }
    }
}

/* g with a width axis left out (kw 0) taken from the height's (im2col_geom). */
static im2col_geom resolved(const im2col_geom *g) {
    im2col_geom r = *g;
    if (!r.kw) r.kw = r.k, r.sw = r.stride, r.pw = r.pad;
    return r;
}

void im2col(float *col, const float *x, const im2col_geom *geom) {
    const im2col_geom rg = resolved(geom), *g = &rg;
    if (subsamples(g)) { /* small: ResNet-20's shortcuts copy 4096 floats; no parallel region */
        for (size_t c = 0; c < g->c; c++) subsample_plane(col + c * g->ho * g->wo, x + c * g->h * g->w, g);
        return;
    }
    const size_t kk = g->k * g->kw, n = g->ho * g->wo, plane = g->h * g->w, d = g->dilation > 1 ? g->dilation : 1;
    const bool tiled = tiles(g);
    /* Channels write disjoint rows: parallel over them when nobody above us already runs in parallel. */
    #pragma omp parallel for schedule(static) if (!omp_in_parallel() && g->c > 1 && g->c * kk * n >= IM2COL_PAR_MIN)
    for (size_t c = 0; c < g->c; c++) {
        if (tiled) {
            im2col_tiled(col + c * kk * n, x + c * plane, g);
            continue;
        }
        for (size_t r = 0; r < kk; r++)
            im2col_row(col + (c * kk + r) * n, x + c * plane, g, r / g->kw * d, r % g->kw * d);
    }
}

void col2im_add(float *x, const float *col, const im2col_geom *geom) {
    const im2col_geom rg = resolved(geom), *g = &rg;
    if (subsamples(g)) {
        for (size_t c = 0; c < g->c; c++) scatter_plane_add(x + c * g->h * g->w, col + c * g->ho * g->wo, g);
        return;
    }
    const size_t kk = g->k * g->kw, n = g->ho * g->wo, plane = g->h * g->w, d = g->dilation > 1 ? g->dilation : 1;
    const bool tiled = tiles(g);
    /* Rows of one channel overlap in x, so only channels run in parallel (each owns its plane). */
    #pragma omp parallel for schedule(static) if (!omp_in_parallel() && g->c > 1 && g->c * kk * n >= IM2COL_PAR_MIN)
    for (size_t c = 0; c < g->c; c++) {
        if (tiled) {
            col2im_tiled(x + c * plane, col + c * kk * n, g);
            continue;
        }
        for (size_t r = 0; r < kk; r++)
            col2im_row(x + c * plane, col + (c * kk + r) * n, g, r / g->kw * d, r % g->kw * d);
    }
}

size_t im2col_span(size_t k, size_t dilation) { return (dilation > 1 ? dilation : 1) * (k - 1) + 1; }

bool im2col_axis(size_t n, size_t k, size_t stride, size_t pad, size_t dilation, size_t *padded, size_t *span,
                 size_t *out) {
    const size_t d = dilation > 1 ? dilation : 1;
    *out = 0;
    *padded = SIZE_MAX;
    *span = SIZE_MAX;
    if (k == 0 || stride == 0 || pad > (SIZE_MAX - n) / 2 || k - 1 > (SIZE_MAX - 1) / d) return false;
    *padded = n + 2 * pad;
    *span = im2col_span(k, d);
    if (*span > *padded) return false;
    *out = (*padded - *span) / stride + 1;
    return true;
}

size_t lowering_threads(size_t m, int threads) {
    return threads > 1 && m >= (size_t)threads ? (size_t)threads : 1;
}

size_t lowering_slot_threads(size_t m, int threads, size_t slot_bytes) {
    return slot_bytes > LOWERING_SLOT_MAX ? 1 : lowering_threads(m, threads);
}

void lowering_reduce(float *dst, const char *work, size_t slot, size_t offset, size_t len, size_t T) {
    #pragma omp parallel for schedule(static) if (len * T >= IM2COL_PAR_MIN && par_pays_floats(len * (T + 2)))
    for (size_t i = 0; i < len; i++) {
        float s = 0.0f;
        for (size_t t = 0; t < T; t++) s += ((const float *)(const void *)(work + t * slot + offset))[i];
        dst[i] += s;
    }
}
