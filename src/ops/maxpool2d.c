/* maxpool2d: (C, H, W) -> (C, Ho, Wo), Ho = (H + 2 pad - k) / stride + 1 (floor: a partial window at the
 * border is dropped, as in PyTorch's default). Padding (torch.nn.MaxPool2d's padding, at most half the kernel
 * as PyTorch requires, so every window holds an input element) is -inf: a padded position never wins, and the
 * window loop simply skips it.
 *
 * Saved for backward: per output element, one byte, the position of its maximum within its window, i*k + j for
 * the window's row i and column j (padding included): a quarter of an int32 index within the sample, and the
 * output's own coordinates give the rest back (infer rejects kernels over 16x16, whose 256 positions one byte
 * holds). Ties go to the first maximum in row-major window order and a NaN counts as the maximum (the first NaN
 * wins), both as in PyTorch.
 *
 * The 2x2 stride-2 pool of every CNN here has an AVX-512 path (a function attribute: the build has no -march),
 * 16 outputs of a row at once, with the same comparisons in the same order as the generic window loop, so it
 * writes the same values and the same argmax bits.
 *
 * op_maxpool2d_relu is the pool with the ReLU before it folded in (graph/fuse.c: that ReLU's only reader, and
 * windows that tile the input exactly): it reads the values before the ReLU and applies ReLU's own expression
 * to each as it loads it, so it writes what pooling the ReLU's output writes, bit for bit; its backward masks
 * each output's gradient by y > 0 on its way to the argmax, as ReLU's backward would have. The ReLU's full-size
 * output is neither written nor kept (backward needs the pool's own output), and no pass runs over it.
 *
 * In a bf16 plan forward writes the packed copy the plan keeps of its output (packed.copy) beside each float32
 * output as it is made: no pass of its own to pack them. It can also read an input in bfloat16 as it lies
 * (op_call.packed.in) and write its output only in bfloat16 (packed.out): the AVX-512 path widens 32 bfloat16
 * of a row at a time, the generic window loop each element as it reads it, the same values, so the same bits
 * (tests/test_maxpool_fast.c, bench/bench_pool.c). The op does not offer that to the planner
 * (OP_FORWARD_READS_PACKED | OP_WRITES_PACKED): the cnn's bf16 plan packs nothing, and on unet, whose plan
 * would take it, a bf16 step measured no faster with it (docs/precision.md).
 *
 * Backward runs plane by plane; where the plan stores the gradients in bfloat16 (op_call.grads) each plane
 * goes through a thread's float32 stages. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/avx512.h"
#include "kernels/bf16.h"
#include "kernels/gemm_direct.h"
#include "ops/op.h"
#include "ops/packed_grads.h"
#include "kernels/relu_math.h"

/* Below this many output elements a parallel loop costs more than it saves. */
#define POOL_PAR_MIN ((size_t)1 << 14)

typedef struct pool_geom { size_t c, h, w, k, s, pad, ho, wo; } pool_geom;

/* The largest kernel side whose window positions (k * k of them) one byte numbers. */
#define POOL_MAX_KERNEL 16

/* The plane index of position `at` (i*k + j) of output (oh, ow)'s window; padding never wins, so it lies in the
 * plane. */
static inline size_t pool_window_index(const pool_geom *p, size_t oh, size_t ow, uint8_t at) {
    return (oh * p->s + at / p->k - p->pad) * p->w + ow * p->s + at % p->k - p->pad;
}

static pool_geom pool_geom_of(const op_node *n) {
    const snug_shape *in = &n->in_shape[0];
    pool_geom p = {.c = in->dims[0], .h = in->dims[1], .w = in->dims[2], .k = n->p.pool2d.kernel,
                   .s = n->p.pool2d.stride, .pad = n->p.pool2d.padding};
    p.ho = (p.h + 2 * p.pad - p.k) / p.s + 1;
    p.wo = (p.w + 2 * p.pad - p.k) / p.s + 1;
    return p;
}

static snug_status pool_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)params;
    char s[96];
    const size_t k = n->p.pool2d.kernel, st = n->p.pool2d.stride, pad = n->p.pool2d.padding;
    size_t numel;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 3) {
        snprintf(msg, msg_len, "expects an input (channels, height, width), got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (k == 0 || st == 0) {
        snprintf(msg, msg_len, "needs kernel and stride >= 1, got kernel %zu, stride %zu", k, st);
        return SNUG_E_ARG;
    }
    if (k > POOL_MAX_KERNEL) {
        snprintf(msg, msg_len, "kernel %zux%zu is larger than %dx%d: the position of a window's maximum is "
                 "kept in one byte; use a kernel of at most %d (or two pools)", k, k, POOL_MAX_KERNEL,
                 POOL_MAX_KERNEL, POOL_MAX_KERNEL);
        return SNUG_E_ARG;
    }
    if (pad > k / 2) {
        snprintf(msg, msg_len, "padding %zu is more than half the kernel %zu (PyTorch's limit too: a window "
                 "of padding only has no maximum): use padding <= %zu", pad, k, k / 2);
        return SNUG_E_ARG;
    }
    if (k > in[0].dims[1] + 2 * pad || k > in[0].dims[2] + 2 * pad) {
        snprintf(msg, msg_len, "kernel %zux%zu is larger than its input %s: use a smaller kernel or "
                 "pool earlier", k, k, snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (!size_prod(in[0].dims, 3, &numel)) {
        snprintf(msg, msg_len, "input %s has too many elements per sample to count",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 3,
                        .dims = {in[0].dims[0], (in[0].dims[1] + 2 * pad - k) / st + 1,
                                 (in[0].dims[2] + 2 * pad - k) / st + 1}};
    *n_params = 0;
    return SNUG_OK;
}

/* Element i of a plane held in float32 (f) or, where a bf16 plan keeps it only packed, in bfloat16 (h): the same
 * value either way (every bfloat16 is a float). */
static inline float plane_at(const float *f, const bf16 *h, size_t i) { return f ? f[i] : bf16_to_float(h[i]); }

/* One output element: the maximum of its window and where it is (first maximum; NaN beats everything), of the
 * values or (relu) of their ReLU, in a plane of floats (f) or of bfloat16 (h). The window's rows and columns
 * clipped to the plane: padding is -inf, which never wins, so skipping it is taking it. Without padding the clip
 * is the whole window. */
static float window_max(const float *f, // (h, w), or NULL
                        const bf16 *h,  // (h, w) where f is NULL
                        const pool_geom *p, size_t oh, size_t ow, bool relu, uint8_t *where) {
    const size_t h0 = oh * p->s, w0 = ow * p->s; /* the window's corner in padded coordinates */
    const size_t i0 = h0 < p->pad ? p->pad - h0 : 0, j0 = w0 < p->pad ? p->pad - w0 : 0;
    const size_t i1 = h0 + p->k > p->h + p->pad ? p->h + p->pad - h0 : p->k;
    const size_t j1 = w0 + p->k > p->w + p->pad ? p->w + p->pad - w0 : p->k;
    const size_t c0 = w0 + j0 - p->pad; /* the first column inside the plane */
    const size_t first = (h0 + i0 - p->pad) * p->w + c0;
    size_t best_at = i0 * p->k + j0;
    float best = relu ? relu_value(plane_at(f, h, first)) : plane_at(f, h, first);
    for (size_t i = i0; i < i1; i++) {
        const size_t at = (h0 + i - p->pad) * p->w + c0; /* the row's first element inside the plane */
        for (size_t j = 0; j < j1 - j0; j++) {
            float v = relu ? relu_value(plane_at(f, h, at + j)) : plane_at(f, h, at + j);
            if (v > best || (v != v && best == best)) {
                best = v;
                best_at = i * p->k + j0 + j;
            }
        }
    }
    *where = (uint8_t)best_at;
    return best;
}

/* Where a pool reads its input and writes its outputs, for the whole micro-batch: the input in float32 (x) or,
 * in a bf16 plan that keeps it only packed, in bfloat16 (xh); the output in float32 (y), in bfloat16 (yh), or
 * both (a float32 output and the packed copy the plan keeps of it). A bf16 plan's pool reads rounded values, so
 * each output already is a bfloat16 value (or a folded ReLU's 0): its bfloat16 is that of bf16_pack, written as
 * it is made, with no pass of its own. */
typedef struct pool_io {
    const float *x;     // (planes, h, w), or NULL
    const bf16 *xh;     // (planes, h, w) where x is NULL
    size_t in_len;      // elements of the input: planes h w
    float *y;           // (planes, ho, wo), or NULL
    bf16 *yh;           // (planes, ho, wo), or NULL
    uint8_t *arg;       // (planes, ho, wo): position within the window
} pool_io;

/* Output planes [lo, hi) of the generic pool: every window through window_max. */
static void pool_planes_generic(const pool_geom *p, bool relu, const pool_io *io, size_t lo, size_t hi) {
    const size_t in_plane = p->h * p->w, out_plane = p->ho * p->wo;
    for (size_t pl = lo; pl < hi; pl++) {
        const float *xf = io->x ? io->x + pl * in_plane : NULL;
        const bf16 *xh = io->x ? NULL : io->xh + pl * in_plane;
        for (size_t oh = 0; oh < p->ho; oh++)
            for (size_t ow = 0; ow < p->wo; ow++) {
                const size_t o = pl * out_plane + oh * p->wo + ow;
                const float v = window_max(xf, xh, p, oh, ow, relu, &io->arg[o]);
                if (io->y) io->y[o] = v;
                if (io->yh) io->yh[o] = bf16_from_float(v);
            }
    }
}

#ifdef SNUG_AVX512
/* The window loop's step for one more element v at index iv: v replaces the best when greater, or when it is
 * NaN and the best is not (the first NaN wins), as in window_max. */
static inline AVX512 void pool_take(__m512 *best, __m512i *idx, __m512 v, __m512i iv) {
    const __mmask16 t = _mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) |
                        (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(*best, *best, _CMP_ORD_Q));
    *best = _mm512_mask_mov_ps(*best, t, v);
    *idx = _mm512_mask_mov_epi32(*idx, t, iv);
}

/* relu_value on 16 lanes: the same select. */
static inline AVX512 __m512 relu16(__m512 x) {
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
}

/* The 32 values of an input row from column 2o on (2n of them, n <= 16; the rest 0, or where `whole` says the
 * 32 lie in the input, whatever follows the row there: lanes no output is taken from), as two vectors of 16
 * floats: loaded as they lie, or widened from bfloat16 (exact: the bits shifted up). Plain loads where they
 * can: on this CPU a masked 64-byte load that crosses a cache line cost several times the pool's other work. A
 * row's last 2n < 32 bfloat16 at the input's end are n 32-bit words, a masked load AVX-512 F has. */
static inline AVX512 void pool22_load(__m512 *v0, __m512 *v1, const float *f, const bf16 *h, size_t n, bool whole) {
    if (f && whole) {
        *v0 = _mm512_loadu_ps(f);
        *v1 = _mm512_loadu_ps(f + 16);
        return;
    }
    if (f) {
        *v0 = _mm512_maskz_loadu_ps(avx512_lanes(2 * n), f);
        *v1 = _mm512_maskz_loadu_ps(avx512_lanes(2 * n > 16 ? 2 * n - 16 : 0), f + 16);
        return;
    }
    __m256i lo, hi;
    if (whole) {
        lo = _mm256_loadu_si256((const __m256i *)(const void *)h);
        hi = _mm256_loadu_si256((const __m256i *)(const void *)(h + 16));
    } else {
        const __m512i both = _mm512_maskz_loadu_epi32(avx512_lanes(n), (const void *)h);
        lo = _mm512_castsi512_si256(both);
        hi = _mm512_extracti64x4_epi64(both, 1);
    }
    *v0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(lo), 16));
    *v1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

/* n <= 16 outputs (the maxima) stored in float32 where y is not NULL and in bfloat16 where yh is not: the
 * bits of bf16_from_float (avx512_bf16_round's top half), with their window positions. */
static inline AVX512 void pool22_store(float *y, bf16 *yh, uint8_t *arg, __m512 best, __m512i idx, size_t n) {
    const __m512i h = _mm512_srli_epi32(_mm512_castps_si512(avx512_bf16_round(best)), 16);
    if (n == 16) { /* plain stores where they can: a masked store into a line not in cache is slow */
        if (y) _mm512_storeu_ps(y, best);
        if (yh) _mm256_storeu_si256((__m256i *)(void *)yh, _mm512_cvtepi32_epi16(h));
        _mm_storeu_si128((__m128i *)(void *)arg, _mm512_cvtepi32_epi8(idx));
        return;
    }
    const __mmask16 m = avx512_lanes(n);
    if (y) _mm512_mask_storeu_ps(y, m, best);
    if (yh) _mm512_mask_cvtepi32_storeu_epi16(yh, m, h);
    _mm512_mask_cvtepi32_storeu_epi8(arg, m, idx);
}

/* One output row of a 2x2 stride-2 pool: wo outputs from input rows 2 oh and 2 oh + 1 (at element `in` of the
 * pool_io's input), each argmax a window position 0 to 3, stored at element `out` of its outputs. Two 16-float
 * loads per input row deinterleave into the even and odd columns. */
static AVX512 void pool22_row(const pool_io *io, size_t in, size_t out, size_t w, size_t wo, bool relu) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (size_t o = 0; o < wo; o += 16) {
        const size_t n = wo - o < 16 ? wo - o : 16, i0 = in + 2 * o, i1 = i0 + w;
        __m512 a0, a1, b0, b1;
        const bool whole = i1 + 32 <= io->in_len; /* the second row's 32 lie in the input, so the first's do */
        pool22_load(&a0, &a1, io->x ? io->x + i0 : NULL, io->x ? NULL : io->xh + i0, n, whole);
        pool22_load(&b0, &b1, io->x ? io->x + i1 : NULL, io->x ? NULL : io->xh + i1, n, whole);
        if (relu) a0 = relu16(a0), a1 = relu16(a1), b0 = relu16(b0), b1 = relu16(b1);
        __m512 best = _mm512_permutex2var_ps(a0, even, a1);
        __m512i idx = _mm512_setzero_si512();
        pool_take(&best, &idx, _mm512_permutex2var_ps(a0, odd, a1), _mm512_set1_epi32(1));
        pool_take(&best, &idx, _mm512_permutex2var_ps(b0, even, b1), _mm512_set1_epi32(2));
        pool_take(&best, &idx, _mm512_permutex2var_ps(b0, odd, b1), _mm512_set1_epi32(3));
        pool22_store(io->y ? io->y + out + o : NULL, io->yh ? io->yh + out + o : NULL, io->arg + out + o, best,
                     idx, n);
    }
}

/* Output planes [lo, hi) of a 2x2 stride-2 pool, row by row. */
static AVX512 void pool_planes_22(const pool_geom *p, bool relu, const pool_io *io, size_t lo, size_t hi) {
    const size_t in_plane = p->h * p->w, out_plane = p->ho * p->wo;
    for (size_t pl = lo; pl < hi; pl++)
        for (size_t oh = 0; oh < p->ho; oh++)
            pool22_row(io, pl * in_plane + 2 * oh * p->w, pl * out_plane + oh * p->wo, p->w, p->wo, relu);
}
#endif

static void pool_planes(const pool_geom *p, bool fast, bool relu, const pool_io *io, size_t lo, size_t hi) {
#ifdef SNUG_AVX512
    if (fast) {
        pool_planes_22(p, relu, io, lo, hi);
        return;
    }
#endif
    (void)fast;
    pool_planes_generic(p, relu, io, lo, hi);
}

static bool pool_is_relu(const op_call *c) { return c->node->op == &op_maxpool2d_relu; }

/* Where c reads and writes. In a bf16 plan its input is rounded (every output is, and the input batch), so each
 * output is one of those values (or a folded ReLU's 0) and rounding leaves it as it is (op_round_output's
 * work): only its bfloat16 is left to write, into the only packed output (op_call.packed.out) or the packed copy
 * beside the float32 one (packed.copy), as each output is made. */
static pool_io pool_io_of(const op_call *c, const pool_geom *p) {
    return (pool_io){.x = c->packed.in[0] ? NULL : c->in[0], .xh = c->packed.in[0],
                     .in_len = c->m * p->c * p->h * p->w, .y = c->packed.out ? NULL : c->out,
                     .yh = c->packed.out ? c->packed.out : c->packed.round ? c->packed.copy : NULL,
                     .arg = c->saved};
}

/* Small calls (one sample of a micro-batch of 1) run without an OpenMP region: starting one costs more than
 * the pool itself. Planes are independent, so the bits do not depend on the split. */
static void pool_forward(const op_call *c) {
    const pool_geom p = pool_geom_of(c->node);
    const pool_io io = pool_io_of(c, &p);
    const size_t planes = c->m * p.c;
    bool fast = false;
#ifdef SNUG_AVX512
    fast = p.k == 2 && p.s == 2 && p.pad == 0 && gemm_direct_has_avx512();
#endif
    if (planes * p.ho * p.wo < POOL_PAR_MIN || !par_pays_floats(planes * p.ho * p.wo * (p.k * p.k + 2))) {
        pool_planes(&p, fast, pool_is_relu(c), &io, 0, planes);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        pool_planes(&p, fast, pool_is_relu(c), &io, planes * t / T, planes * (t + 1) / T);
    }
}

/* One plane's backward: its input gradient's plane, its output gradient's, the pool's output's (read where a
 * ReLU is folded in) and its argmax positions. The plane may lie in the gradient buffers or in a thread's
 * stages. */
typedef struct pool_plane {
    float *dx;          // (h, w)
    const float *dy;    // (ho, wo)
    const float *y;     // (ho, wo), or NULL
    const uint8_t *arg; // (ho, wo)
} pool_plane;

/* dx += dy at each output's argmax. The first writer of dx (fresh) zeroes the plane just before its scatter,
 * while it is in cache, instead of the executor zeroing all of dx in a pass of its own. */
static void pool_backward_plane(const pool_geom *p, pool_plane q, bool fresh) {
    if (fresh) memset(q.dx, 0, p->h * p->w * sizeof *q.dx);
    for (size_t oh = 0, o = 0; oh < p->ho; oh++)
        for (size_t ow = 0; ow < p->wo; ow++, o++) q.dx[pool_window_index(p, oh, ow, q.arg[o])] += q.dy[o];
}

/* The folded ReLU's backward too: ReLU's gradient of the pool's scatter, 0 + dy where y > 0 (the scatter's
 * fresh buffer held 0 + dy at the argmax), else +0. Fresh: the plane zeroed, then that at each argmax. Adding:
 * every input element gets its term (+0 off the argmax), as ReLU's backward added one to each; the windows tile
 * the input exactly, so each element is in one window. */
static void pool_relu_backward_plane(const pool_geom *p, pool_plane q, bool fresh) {
    const size_t out_plane = p->ho * p->wo;
    if (fresh) memset(q.dx, 0, p->h * p->w * sizeof *q.dx);
    for (size_t o = 0; o < out_plane; o++) {
        const float g = 0.0f + relu_grad(q.y[o], q.dy[o]);
        const size_t oh = o / p->wo, ow = o % p->wo;
        if (fresh) {
            q.dx[pool_window_index(p, oh, ow, q.arg[o])] = 0.0f + g;
            continue;
        }
        for (size_t i = 0; i < p->k; i++)
            for (size_t j = 0; j < p->k; j++) {
                const size_t at = (oh * p->s + i) * p->w + ow * p->s + j;
                q.dx[at] = q.dx[at] + (q.arg[o] == i * p->k + j ? g : 0.0f);
            }
    }
}

#ifdef SNUG_AVX512
/* The backward's masked byte loads (a row's last argmax bytes) take AVX-512 BW and VL, which every AVX-512 CPU
 * has (kernels/isa.h). */
#define AVX512_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The lanes m of v to p: a plain store where all 16 are (a masked store into a line not in cache is slow). */
static inline AVX512 void store_lanes(float *p, __mmask16 m, __m512 v) {
    if (m == 0xFFFF) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, m, v);
}
/* A fresh dx of a 2x2 stride-2 pool tiling its input exactly, one output row (16 outputs at a time): each
 * output's window gets 0 + its gradient at the argmax and +0 elsewhere, written as the two input rows'
 * even and odd columns interleaved, the bits of zeroing the rows and adding the gradient at the argmax (or,
 * relu, of doing so with y > 0 ? 0 + dy : 0, the ReLU's gradient). No zeroing pass, no scattered stores.
 * spill (rows of at most 32 values, one block of outputs): each row's last vector is stored whole, its lanes
 * past the row's end landing in the next row, which is stored after it (rows in address order), so every
 * store is a plain one: on this CPU a masked store cost as much as the rest of the row's work. */
static AVX512_BW void pool22_backward_row(float *r0,          // (2, w): the window rows of dx
                                          const float *dy,    // (wo)
                                          const float *y,     // (wo), read when relu
                                          const uint8_t *arg, // (wo): window positions 0 to 3
                                          size_t w, size_t wo, bool relu, bool spill) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2), three = _mm512_set1_epi32(3);
    const __m512 zero = _mm512_setzero_ps();
    for (size_t o = 0; o < wo; o += 16) {
        const size_t n = wo - o < 16 ? wo - o : 16;
        const __mmask16 m = avx512_lanes(n);
        __m512 g = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, dy + o));
        if (relu) g = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, y + o), zero, _CMP_GT_OQ), g);
        g = _mm512_add_ps(zero, g);
        const __m512i rel = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, arg + o)); /* none past the row's end */
        const __m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, _mm512_setzero_si512()), g);
        const __m512 o0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, one), g);
        const __m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, two), g);
        const __m512 o1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(rel, three), g);
        const __mmask16 m0 = avx512_lanes(2 * n), m1 = avx512_lanes(2 * n > 16 ? 2 * n - 16 : 0);
        float *d0 = r0 + 2 * o, *d1 = d0 + w;
        if (spill) {
            _mm512_storeu_ps(d0, _mm512_permutex2var_ps(e0, lo, o0));
            if (m1) _mm512_storeu_ps(d0 + 16, _mm512_permutex2var_ps(e0, hi, o0));
            _mm512_storeu_ps(d1, _mm512_permutex2var_ps(e1, lo, o1));
            if (m1) _mm512_storeu_ps(d1 + 16, _mm512_permutex2var_ps(e1, hi, o1));
            continue;
        }
        store_lanes(d0, m0, _mm512_permutex2var_ps(e0, lo, o0));
        store_lanes(d1, m0, _mm512_permutex2var_ps(e1, lo, o1));
        if (m1) {
            store_lanes(d0 + 16, m1, _mm512_permutex2var_ps(e0, hi, o0));
            store_lanes(d1 + 16, m1, _mm512_permutex2var_ps(e1, hi, o1));
        }
    }
}

/* A fresh dx plane of a 2x2 stride-2 pool tiling its input, row by row. Spilling whole vectors: the rows are
 * consecutive memory, written in order, and each spill (under 16 values) stays within the next row pair
 * (2w >= 16); past the plane's last pair only where the caller writes the next plane after it (spill_on). */
static AVX512_BW void pool22_backward_plane(const pool_geom *p, pool_plane q, bool relu, bool spill_on) {
    const bool narrow = p->wo <= 16 && p->w >= 8;
    for (size_t oh = 0; oh < p->ho; oh++) {
        const size_t o = oh * p->wo;
        pool22_backward_row(q.dx + 2 * oh * p->w, q.dy + o, relu ? q.y + o : NULL, q.arg + o, p->w, p->wo, relu,
                            narrow && (spill_on || oh + 1 < p->ho));
    }
}
#endif

static void pool_backward_one(const op_call *c, const pool_geom *p, pool_plane q, bool fresh, bool spill_on) {
#ifdef SNUG_AVX512
    if (fresh && p->k == 2 && p->s == 2 && p->pad == 0 && p->h % 2 == 0 && p->w % 2 == 0 && gemm_direct_has_avx512()) {
        pool22_backward_plane(p, q, pool_is_relu(c), spill_on);
        return;
    }
#endif
    (void)spill_on;
    if (pool_is_relu(c)) pool_relu_backward_plane(p, q, fresh);
    else pool_backward_plane(p, q, fresh);
}

/* Planes [lo, hi) of the micro-batch; where the gradients are stored in bfloat16 (op_call.grads), each plane
 * goes through the stages (dy's plane, then dx's) at `stage`: dy unpacked, dx unpacked where this call adds
 * into it, and rounded as it is stored. Each plane's gradient lands only in its own input plane, so planes run
 * in parallel without races. */
static void pool_backward_part(const op_call *c, const pool_geom *p, bool fresh, size_t lo, size_t hi, float *stage) {
    const size_t in_plane = p->h * p->w, out_plane = p->ho * p->wo;
    float *sdy = stage, *sdx = stage ? stage + grad_stage_bytes_of(out_plane) / sizeof(float) : NULL;
    for (size_t pl = lo; pl < hi; pl++) {
        const pool_plane q = {.dx = c->din[0] ? c->din[0] + pl * in_plane : sdx,
                              .dy = c->dout ? c->dout + pl * out_plane : sdy,
                              .y = c->out ? c->out + pl * out_plane : NULL,
                              .arg = (const uint8_t *)c->saved + pl * out_plane};
        if (!c->dout) bf16_unpack(sdy, c->grads.dout + pl * out_plane, out_plane);
        if (!c->din[0] && !fresh) bf16_unpack(sdx, c->grads.din[0] + pl * in_plane, in_plane);
        pool_backward_one(c, p, q, fresh, c->din[0] && pl + 1 < hi);
        if (!c->din[0]) bf16_pack(c->grads.din[0] + pl * in_plane, sdx, in_plane);
    }
}

/* Thread t's stages (pool_grad_stage_bytes), or NULL without packed gradients. */
static float *pool_stage(const op_call *c, const pool_geom *p, size_t t) {
    if (!c->grads.stage) return NULL;
    const size_t one = grad_stage_bytes_of(p->ho * p->wo) + grad_stage_bytes_of(p->h * p->w);
    return (float *)(void *)((char *)c->grads.stage + t * one);
}

static void pool_backward(const op_call *c) {
    const pool_geom p = pool_geom_of(c->node);
    const size_t planes = c->m * p.c;
    const bool fresh = c->din_fresh & 1u;
    if (!grad_din_wanted(c, 0)) return;
    if (planes * p.ho * p.wo < POOL_PAR_MIN || !par_pays_floats(planes * p.ho * p.wo * 4)) {
        pool_backward_part(c, &p, fresh, 0, planes, pool_stage(c, &p, 0));
        return;
    }
    #pragma omp parallel num_threads(c->threads > 0 ? c->threads : 1)
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        pool_backward_part(c, &p, fresh, planes * t / T, planes * (t + 1) / T, pool_stage(c, &p, t));
    }
}

/* A plane's two stages per thread where the gradients are stored packed (pool_stage). */
static size_t pool_grad_stage_bytes(const op_node *n, size_t m, int threads, bool input_staged) {
    (void)m, (void)input_staged;
    const pool_geom p = pool_geom_of(n);
    const size_t a = grad_stage_bytes_of(p.ho * p.wo), b = grad_stage_bytes_of(p.h * p.w);
    size_t bytes;
    return a != SIZE_MAX && b != SIZE_MAX && size_mul(a + b, (size_t)(threads > 0 ? threads : 1), &bytes) ? bytes
                                                                                                          : SIZE_MAX;
}

static double pool_flops(const op_node *n) {
    const pool_geom p = pool_geom_of(n);
    return (double)p.c * (double)p.ho * (double)p.wo * (double)(p.k * p.k); /* one comparison per element */
}

static size_t pool_saved_bytes(const op_node *n) {
    size_t bytes;
    return size_mul(n->out_numel, sizeof(uint8_t), &bytes) ? bytes : SIZE_MAX;
}

static size_t pool_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

/* Whether a pool of this node's geometry takes a ReLU before it in (op_desc.fold): windows that tile the input
 * exactly, so that every ReLU output is in exactly one window and the masked scatter reaches each. */
static bool pool_takes_relu(const op_node *n) {
    const pool_geom p = pool_geom_of(n);
    return p.k == p.s && p.pad == 0 && p.h % p.k == 0 && p.w % p.k == 0;
}

#define POOL_OP(FLAGS)                                                                                          \
    .kind = "maxpool2d", .flags = (FLAGS), .infer = pool_infer, .forward = pool_forward,                        \
    .backward = pool_backward, .flops = pool_flops, .saved_bytes = pool_saved_bytes,                            \
    .workspace_bytes = pool_workspace_bytes, .grad_stage_bytes = pool_grad_stage_bytes
/* What the pools do in bf16 plans: gradients read and written packed, outputs rounded in their own loop. */
#define POOL_BF16 (OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED | OP_ROUNDS_OUTPUT)
const op_desc op_maxpool2d = {POOL_OP(OP_WRITES_FRESH | POOL_BF16),
                              .fold = {.relu_before = &op_maxpool2d_relu, .relu_before_fits = pool_takes_relu}};
/* Backward reads its own output: the ReLU's mask is y > 0. */
const op_desc op_maxpool2d_relu = {POOL_OP(OP_WRITES_FRESH | OP_KEEPS_OUTPUT | POOL_BF16),
                                   .fold.unfolded = &op_maxpool2d};
