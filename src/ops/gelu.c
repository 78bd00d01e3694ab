/* gelu: y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact form (torch.nn.GELU() default, not the tanh
 * approximation), any shape. Backward needs Phi(x) + x phi(x), a function of the input that the output alone does
 * not determine (GELU is not monotonic below about -0.75), so the op keeps its INPUT (OP_KEEPS_INPUT). That also
 * rules out running in place: the planner only writes an element-wise output over an input that dies at this
 * step, and a kept input lives on until backward. Recompute (OP_ELEMENTWISE) is still cheap.
 * Backward's dx depends element by element on dy and x alone, so it may write over dy (OP_GRAD_IN_PLACE: a
 * transformer MLP's two widest gradients share one buffer), and in bf16 it reads x straight from its packed copy
 * (OP_READS_PACKED), so no float32 instance of it is unpacked for backward. Its forward too reads x from the
 * packed copy and, where its reader reads it packed (the MLP's second linear), writes only a packed output
 * (OP_FORWARD_READS_PACKED | OP_WRITES_PACKED); its gradients it reads and writes in bfloat16 where the linear
 * layers around it do (OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED): a block at a time on the stack.
 * erf and exp come from kernels/vmath.h (within 2 ulp of libm's, tests/test_vmath.c), so both loops vectorise;
 * erf's exp form runs only over the elements beyond sqrt 2 of 0 (gelu_erf), the others take its near-zero
 * polynomial alone, the bits the full erf would select. Every element is computed alone, in the same float32
 * operations in every clone (no multiply-add is contracted), so the bits depend neither on the thread count nor
 * on the CPU. Where the input is a bfloat16 (read from its packed copy), the rounded output and the slope are
 * looked up in tables those same loops filled over all 65,536 patterns: the same bits, without an erf or exp. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/bf16.h"
#include "kernels/elementwise.h"
#include "kernels/outliers.h"
#include "ops/op.h"
#include "ops/round_output.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define GELU_PAR_MIN ((size_t)1 << 14)
/* Elements per task of the parallel loops (kernels/elementwise.h): each task is one vectorised loop. */
#define GELU_CHUNK ((size_t)4096)

#define GELU_INV_SQRT2 0.70710678118654752440f    /* 1 / sqrt(2) */
#define GELU_INV_SQRT2PI 0.39894228040143267794f  /* 1 / sqrt(2 pi) */

static snug_status gelu_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

/* Elements whose erf is computed together, on the stack (in L1). */
#define GELU_STAGE ((size_t)256)

/* e = erf's near-zero form of x / sqrt 2 over n elements: vm_erff's bits where |x / sqrt 2| < 1. */
VM_KERNEL static void erf_near0_span(float *e, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) e[i] = vm_erff_near0(x[i] * GELU_INV_SQRT2);
}

/* e = erf(x / sqrt 2) over n elements (e may be x). */
VM_KERNEL static void erf_full_span(float *e, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) e[i] = vm_erff(x[i] * GELU_INV_SQRT2);
}

/* Elements decided together where there is no vector compress (outliers_compress): one AVX-512 vector, two AVX2
 * ones. */
#define GELU_BLOCK 16

/* Whether vm_erff(x / sqrt 2) takes its near-zero form: the very comparison vm_erff makes (NaN fails it). */
static inline int gelu_near0(float x) { return fabsf(x * GELU_INV_SQRT2) < 1.0f; }

/* e = vm_erff(x / sqrt 2) over n elements, each block of GELU_BLOCK whose elements all take the near-zero form
 * computing that form alone. */
VM_KERNEL static void erf_blocks(float *e, const float *x, size_t n) {
    size_t lo = 0;
    for (; lo + GELU_BLOCK <= n; lo += GELU_BLOCK) {
        const float *xb = x + lo;
        float *eb = e + lo;
        int near0 = 1;
        #pragma omp simd reduction(&: near0)
        for (size_t i = 0; i < GELU_BLOCK; i++) near0 &= gelu_near0(xb[i]);
        if (near0) {
            #pragma omp simd
            for (size_t i = 0; i < GELU_BLOCK; i++) eb[i] = vm_erff_near0(xb[i] * GELU_INV_SQRT2);
        } else {
            #pragma omp simd
            for (size_t i = 0; i < GELU_BLOCK; i++) eb[i] = vm_erff(xb[i] * GELU_INV_SQRT2);
        }
    }
    #pragma omp simd
    for (size_t i = lo; i < n; i++) e[i] = vm_erff(x[i] * GELU_INV_SQRT2);
}

/* e = vm_erff(x / sqrt 2) over n <= GELU_STAGE elements, element by element the same bits, for a fraction of its
 * work: vm_erff computes both of its forms and selects one; here the near-zero form runs over every element and
 * the full one only over the outliers (|x / sqrt 2| >= 1, NaN, kernels/outliers.h: a few percent of a layer's
 * pre-activations), whose results then replace theirs. Without a vector compress, block by block (erf_blocks). */
static void gelu_erf(float *e, const float *x, size_t n) {
    if (!outliers_compress()) { /* gathering element by element costs more than it saves: per block instead */
        erf_blocks(e, x, n);
        return;
    }
    uint32_t idx[OUTLIERS_ROOM(GELU_STAGE)];
    float far[OUTLIERS_ROOM(GELU_STAGE)];
    const size_t k = outliers_gather(idx, far, x, n, GELU_INV_SQRT2, n / 4);
    if (k > n / 4) { /* so many that the near-zero pass over all and the scattering cost more than they save */
        erf_full_span(e, x, n);
        return;
    }
    erf_near0_span(e, x, n);
    erf_full_span(far, far, k);
    for (size_t j = 0; j < k; j++) e[idx[j]] = far[j];
}

/* y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) over n elements given the erf (y may be x). */
VM_KERNEL static void gelu_from_erf(float *y, const float *x, const float *e, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + e[i]);
}

/* y = x Phi(x) over n elements (y may be x: each stage reads its x before writing its y). */
static void gelu_span(float *y,       // (n)
                      const float *x, // (n)
                      size_t n) {
    float e[GELU_STAGE];
    for (size_t lo = 0; lo < n; lo += GELU_STAGE) {
        const size_t len = n - lo < GELU_STAGE ? n - lo : GELU_STAGE;
        gelu_erf(e, x + lo, len);
        gelu_from_erf(y + lo, x + lo, e, len);
    }
}

/* GELU's slope at x, Phi(x) + x phi(x), given erf(x / sqrt 2). */
static inline float gelu_slope(float x, float erf_x) {
    const float cdf = 0.5f * (1.0f + erf_x);
    const float pdf = GELU_INV_SQRT2PI * vm_expf(-0.5f * x * x);
    return cdf + x * pdf;
}

/* dx += dy gelu_slope(x) over n elements given the erf. dx may be dy: each element reads its dy first. */
VM_KERNEL static void gelu_backward_from_erf(float *dx, const float *x, const float *e, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * gelu_slope(x[i], e[i]);
}

/* dx = 0 + dy gelu_slope(x): the first writer of dx (op_call.din_fresh), the bits of adding into zeros. */
VM_KERNEL static void gelu_backward_fresh_from_erf(float *dx, const float *x, const float *e, const float *dy,
                                                   size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = 0.0f + dy[i] * gelu_slope(x[i], e[i]);
}

/* The backward over n elements, stage by stage as gelu_span. */
static void gelu_backward_stages(float *dx, const float *x, const float *dy, size_t n, bool fresh) {
    float e[GELU_STAGE];
    for (size_t lo = 0; lo < n; lo += GELU_STAGE) {
        const size_t len = n - lo < GELU_STAGE ? n - lo : GELU_STAGE;
        gelu_erf(e, x + lo, len);
        if (fresh) gelu_backward_fresh_from_erf(dx + lo, x + lo, e, dy + lo, len);
        else gelu_backward_from_erf(dx + lo, x + lo, e, dy + lo, len);
    }
}

/* dx += dy gelu_slope(x) over n elements. */
static void gelu_backward_span(float *dx,       // (n)
                               const float *x,  // (n)
                               const float *dy, // (n)
                               size_t n) {
    gelu_backward_stages(dx, x, dy, n, false);
}

/* dx = 0 + dy gelu_slope(x), fresh. */
static void gelu_backward_fresh_span(float *dx,       // (n)
                                     const float *x,  // (n)
                                     const float *dy, // (n)
                                     size_t n) {
    gelu_backward_stages(dx, x, dy, n, true);
}

/* Elements unpacked at a time from a packed input: a stack block that stays in L1. */
#define GELU_UNPACK ((size_t)256)

/* ---- bfloat16 inputs: GELU as a table ------------------------------------------------------------------------
 * In a bf16 run GELU's input is a bfloat16 (the linear layer before it rounds its output), one of 65,536 bit
 * patterns, and GELU is a function of the pattern alone: its rounded output and its slope can be looked up
 * instead of computed (an erf, and an exp for the slope, per element). The tables are filled once per process by
 * the very spans above over every pattern, so a lookup gives the bits the computation gives (every element is
 * computed alone in the same float32 operations on every path: tests/test_ops_zoo_a.c checks it pattern by
 * pattern). They are constants of the process, like libm's tables, not state of a run: 384 KiB, of which a
 * layer's pre-activations (a few dozen exponents) touch a few KiB. */
#define GELU_PATTERNS ((size_t)1 << 16)

static bf16 gelu_rounded_of[GELU_PATTERNS]; /* bf16_from_float(GELU(x)) for the bfloat16 x of each pattern */
static float gelu_slope_of[GELU_PATTERNS];  /* gelu_slope(x, erf(x / sqrt 2)) for the same x */
static pthread_once_t gelu_tables_once = PTHREAD_ONCE_INIT;

/* s = gelu_slope(x, e) over n elements: the factor the backward spans multiply dy by. */
VM_KERNEL static void gelu_slope_from_erf(float *s, const float *x, const float *e, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) s[i] = gelu_slope(x[i], e[i]);
}

static void gelu_tables_fill(void) {
    float x[GELU_STAGE], y[GELU_STAGE], e[GELU_STAGE];
    for (size_t lo = 0; lo < GELU_PATTERNS; lo += GELU_STAGE) {
        for (size_t i = 0; i < GELU_STAGE; i++) x[i] = bf16_to_float((bf16)(lo + i));
        gelu_span(y, x, GELU_STAGE);
        bf16_pack(gelu_rounded_of + lo, y, GELU_STAGE);
        gelu_erf(e, x, GELU_STAGE);
        gelu_slope_from_erf(gelu_slope_of + lo, x, e, GELU_STAGE);
    }
}

static void gelu_tables(void) { pthread_once(&gelu_tables_once, gelu_tables_fill); }

/* y = bf16_from_float(GELU(x)) over n bfloat16 inputs: gelu_span then bf16_pack, looked up. */
static void gelu_rounded_lookup(bf16 *y, const bf16 *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = gelu_rounded_of[x[i]];
}

/* The same as floats (y = bf16_to_float of it, gelu_span then bf16_round_floats) and, where packed is not
 * NULL, in bfloat16 too (bf16_round_pack's two outputs). */
static void gelu_rounded_lookup_floats(float *y, bf16 *packed, const bf16 *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = bf16_to_float(gelu_rounded_of[x[i]]);
    if (packed) gelu_rounded_lookup(packed, x, n);
}

/* dx = bf16_from_float(dx + dy gelu_slope(x)) (fresh: 0 + dy gelu_slope(x)) over n elements, all in bfloat16:
 * the bits of unpacking x, dy and dx, gelu_backward_span (or its fresh form) and bf16_pack. dx may be dy. */
VM_KERNEL static void gelu_backward_lookup16(bf16 *dx, const bf16 *x, const bf16 *dy, size_t n, bool fresh) {
    const float *slope = gelu_slope_of;
    if (fresh)
        for (size_t i = 0; i < n; i++) dx[i] = bf16_from_float(0.0f + bf16_to_float(dy[i]) * slope[x[i]]);
    else
        for (size_t i = 0; i < n; i++)
            dx[i] = bf16_from_float(bf16_to_float(dx[i]) + bf16_to_float(dy[i]) * slope[x[i]]);
}

/* The backward spans over a packed input (op_call.in_packed): the slope looked up, the bits of the spans over
 * the unpacked instance (every bfloat16 is a float). dx may be dy. */
VM_KERNEL static void gelu_backward_packed(float *dx, const bf16 *xp, const float *dy, size_t n, bool fresh) {
    const float *slope = gelu_slope_of;
    if (fresh)
        for (size_t i = 0; i < n; i++) dx[i] = 0.0f + dy[i] * slope[xp[i]];
    else
        for (size_t i = 0; i < n; i++) dx[i] += dy[i] * slope[xp[i]];
}

static void gelu_backward_packed_span(float *dx, const bf16 *xp, const float *dy, size_t n) {
    gelu_backward_packed(dx, xp, dy, n, false);
}

static void gelu_backward_packed_fresh_span(float *dx, const bf16 *xp, const float *dy, size_t n) {
    gelu_backward_packed(dx, xp, dy, n, true);
}

static const ew_split gelu_split = {.par_min = GELU_PAR_MIN, .chunk = GELU_CHUNK};

/* A forward that reads its input from the packed copy (op_call.packed.in): the bits of reading the float32
 * instance (every bfloat16 is a float). Where the output is rounded (kept only packed, packed.out, or rounded in
 * out, packed.round) it is looked up; else computed a block at a time on the stack. */
static void gelu_forward_packed_span(const void *args, size_t lo, size_t n) {
    const op_call *c = args;
    if (c->packed.out) {
        gelu_rounded_lookup(c->packed.out + lo, c->packed.in[0] + lo, n);
        return;
    }
    if (c->packed.round) {
        bf16 *copy = c->packed.copy ? c->packed.copy + lo : NULL;
        gelu_rounded_lookup_floats(c->out + lo, copy, c->packed.in[0] + lo, n);
        return;
    }
    float x[GELU_UNPACK], y[GELU_UNPACK];
    for (size_t b = lo; b < lo + n; b += GELU_UNPACK) {
        const size_t len = lo + n - b < GELU_UNPACK ? lo + n - b : GELU_UNPACK;
        bf16_unpack(x, c->packed.in[0] + b, len);
        if (c->packed.out) {
            gelu_span(y, x, len);
            bf16_round_pack(y, c->packed.out + b, len);
        } else {
            gelu_span(c->out + b, x, len);
            op_round_output(c, b, len);
        }
    }
}

static void gelu_forward(const op_call *c) {
    const size_t len = c->m * op_in_numel(c, 0);
    if (c->packed.in[0]) gelu_tables();
    if (c->packed.in[0]) ew_apply_spans(gelu_split, len, 2 * len, gelu_forward_packed_span, c);
    else op_forward_unary(c, gelu_split, gelu_span, len);
}

/* Gradients in bfloat16 (op_call.grads): [lo, lo + n) in blocks on the stack, dy (and x where it is packed, and
 * dx's earlier share where it is not fresh) unpacked, dx computed by the float32 spans and rounded once as it is
 * stored. dx may be dy's memory (OP_GRAD_IN_PLACE): a block reads its dy before it writes its dx. */
static void gelu_backward_grads_span(const void *args, size_t lo, size_t n) {
    const op_call *c = args;
    const bool fresh = c->din_fresh & 1u;
    if (c->in_packed && c->grads.dout && c->grads.din[0]) {
        gelu_backward_lookup16(c->grads.din[0] + lo, c->in_packed + lo, c->grads.dout + lo, n, fresh);
        return;
    }
    float x[GELU_UNPACK], dy[GELU_UNPACK], dx[GELU_UNPACK];
    for (size_t b = lo; b < lo + n; b += GELU_UNPACK) {
        const size_t len = lo + n - b < GELU_UNPACK ? lo + n - b : GELU_UNPACK;
        const float *xs = c->in_packed ? x : c->in[0] + b;
        if (c->in_packed) bf16_unpack(x, c->in_packed + b, len);
        const float *dys = c->grads.dout ? dy : c->dout + b;
        if (c->grads.dout) bf16_unpack(dy, c->grads.dout + b, len);
        float *dxs = c->grads.din[0] ? dx : c->din[0] + b;
        if (c->grads.din[0] && !fresh) bf16_unpack(dx, c->grads.din[0] + b, len);
        if (fresh) gelu_backward_fresh_span(dxs, xs, dys, len);
        else gelu_backward_span(dxs, xs, dys, len);
        if (c->grads.din[0]) bf16_pack(c->grads.din[0] + b, dx, len);
    }
}

/* din[0] may be dout itself (OP_GRAD_IN_PLACE, then fresh): each element reads its dy before writing its dx. */
static void gelu_backward(const op_call *c) {
    const size_t len = c->m * op_in_numel(c, 0);
    const bool fresh = c->din_fresh & 1u;
    if (c->in_packed) gelu_tables();
    if (c->grads.dout || c->grads.din[0]) {
        if (c->din[0] || c->grads.din[0]) ew_apply_spans(gelu_split, len, 2 * len, gelu_backward_grads_span, c);
        return;
    }
    if (!c->din[0]) return;
    if (c->in_packed)
        ew_apply_binary_packed(gelu_split, fresh ? gelu_backward_packed_fresh_span : gelu_backward_packed_span,
                               c->din[0], c->in_packed, c->dout, len);
    else
        ew_apply_binary(gelu_split, fresh ? gelu_backward_fresh_span : gelu_backward_span, c->din[0], c->in[0],
                        c->dout, len);
}

/* Sample n of the forward's output (op_desc.regen), its elements split over T: the forward's span kernel, an
 * expression per element, so the same bits. */
static void gelu_regen(const op_call *c, size_t n, float *dst, size_t t, size_t T) {
    const size_t numel = op_in_numel(c, 0), lo = numel * t / T, hi = numel * (t + 1) / T;
    if (c->in_packed && c->bf16) { /* the input only packed, the output rounded: looked up */
        gelu_tables();
        gelu_rounded_lookup_floats(dst + lo, NULL, c->in_packed + n * numel + lo, hi - lo);
        return;
    }
    if (c->in_packed) { /* the input only packed: unpacked into dst, then the span over it in place */
        bf16_unpack(dst + lo, c->in_packed + n * numel + lo, hi - lo);
        gelu_span(dst + lo, dst + lo, hi - lo);
    } else {
        gelu_span(dst + lo, c->in[0] + n * numel + lo, hi - lo);
    }
    if (c->bf16) bf16_round_floats(dst + lo, dst + lo, hi - lo);
}

static double gelu_flops(const op_node *n) {
    /* A nominal 8 per element (an erf and a few multiplies): element-wise work is memory-bound, and this only
     * ranks recompute costs against the GEMMs, which dwarf it either way. */
    return 8.0 * (double)n->out_numel;
}

static size_t gelu_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads the kept input (OP_KEEPS_INPUT) */
}

static size_t gelu_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_gelu = {
    .kind = "gelu",
    .flags = OP_KEEPS_INPUT | OP_ELEMENTWISE | OP_WRITES_FRESH | OP_READS_PACKED | OP_GRAD_IN_PLACE |
             OP_ROUNDS_OUTPUT | OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED | OP_FORWARD_READS_PACKED |
             OP_WRITES_PACKED,
    .infer = gelu_infer,
    .forward = gelu_forward,
    .backward = gelu_backward,
    .flops = gelu_flops,
    .saved_bytes = gelu_saved_bytes,
    .workspace_bytes = gelu_workspace_bytes,
    .regen = gelu_regen,
};
