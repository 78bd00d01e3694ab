/* conv_transpose2d: the adjoint of conv2d, as torch.nn.ConvTranspose2d (no output padding, no groups).
 * Input (C, H, W), weight (C, Co, k, k), bias (Co), output (Co, Ho, Wo) with Ho = (H - 1) s - 2p + k.
 *
 * Lowering: the convolution that maps (Co, Ho, Wo) back to (C, H, W) with the same k, s, p has exactly this
 * geometry, and the transposed convolution is its adjoint. So per sample:
 *   forward:  col (Co*k*k, H*W) = W^T x;  y = b + col2im(col)
 *   backward: col = im2col(dy);  dW (C, Co*k*k) += x col^T;  din += W col;  db += row sums of dy
 * Backward lowers dy once for both GEMMs. With k = s and p = 0 (UNet's 2x2 stride-2 up-sampling) the patches do
 * not overlap: col2im is a strided copy-add and im2col a strided gather, both one pass over the output; and
 * a column matrix over CONVT_BLOCK_BYTES is built a block of input rows at a time (convt_block_rows).
 *
 * The GEMMs are gemm_direct's, as in conv2d. Threads and workspace follow conv2d (im2col.h): T =
 * lowering_threads(m, threads) slots (1 where a sample's column buffer exceeds LOWERING_SLOT_MAX), each part
 * rounded up to 64 bytes: [ column buffer (Co*k*k, H*W) floats | partial dW (C, Co*k*k) + db (Co) floats, only
 * when T > 1 ]. A 1x1 stride-1 unpadded one needs no column buffer: it is a plain GEMM into the output.
 * Where the plan stores its gradients in bfloat16 (op_call.grads), each sample goes through float32 stages
 * after that: a sample's dy and dx per slot. */
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/stream_store.h"
#include "kernels/gemm_direct.h"
#include "kernels/im2col.h"
#include "ops/op.h"
#include "ops/packed_grads.h"
#include "ops/round_output.h"

#define CONVT_ALIGN ((size_t)64)

/* Everything a sample's kernels need, derived once per call. */
typedef struct convt_ctx {
    im2col_geom g;      /* the adjoint convolution: (Co, Ho, Wo) -> (C, H, W) */
    size_t ci;          /* input channels C */
    size_t kdim;        /* Co*k*k: the rows of the column matrix */
    size_t npix;        /* H*W: the input's pixels, the columns of the column matrix */
    size_t opix;        /* Ho*Wo */
    bool pointwise;     /* 1x1, stride 1, no padding: the output is its own column matrix */
    size_t rows;        /* input rows per block of the column matrix: all H, or fewer (convt_block_rows) */
} convt_ctx;

/* The column matrix's largest block: a non-overlapping transposed convolution (k <= s, no padding: UNet's 2x2
 * stride-2 up-sampling) whose whole matrix is larger builds it a block of input rows at a time, each block's
 * patches scattered (or gathered) alone. 8 MiB keeps the unet workload's matrices whole (4 MiB at most) and its
 * blocks on the weight gradient's long-inner-dimension kernel (over 4096 pixels per block at 256 wide and up);
 * the unet-hires model's last up-sampling needed 182 MiB whole. */
#define CONVT_BLOCK_BYTES ((size_t)8 << 20)

/* Input rows per block: H where the matrix is whole (overlapping patches add up across rows, so they stay
 * whole), else as many as CONVT_BLOCK_BYTES holds, at least one. */
static size_t convt_block_rows(const convt_ctx *k) {
    const size_t row_bytes = k->kdim * k->g.wo * sizeof(float), h = k->g.ho;
    if (k->pointwise || k->g.k > k->g.stride || k->g.pad != 0 || row_bytes * h <= CONVT_BLOCK_BYTES) return h;
    const size_t rows = CONVT_BLOCK_BYTES / row_bytes;
    return rows == 0 ? 1 : rows < h ? rows : h;
}

static convt_ctx convt_ctx_of(const op_node *n) {
    const snug_shape *in = &n->in_shape[0], *out = &n->out_shape;
    const conv2d_params *p = &n->p.conv2d;
    convt_ctx k = {.g = {.c = out->dims[0], .h = out->dims[1], .w = out->dims[2], .k = p->kernel,
                         .stride = p->stride, .pad = p->padding, .ho = in->dims[1], .wo = in->dims[2]},
                   .ci = in->dims[0]};
    k.kdim = k.g.c * k.g.k * k.g.k;
    k.npix = k.g.ho * k.g.wo;
    k.opix = k.g.h * k.g.w;
    k.pointwise = k.g.k == 1 && k.g.stride == 1 && k.g.pad == 0;
    k.rows = convt_block_rows(&k); /* infer checked that kdim * npix floats fit */
    return k;
}

/* Bytes of one thread's column buffer and of its partial gradients; false on overflow. */
static bool convt_slot_parts(const convt_ctx *k, size_t *col_bytes, size_t *part_bytes) {
    size_t cols = 0, wn, pn;
    *col_bytes = *part_bytes = 0;
    if (!k->pointwise && !size_mul(k->kdim, k->rows * k->g.wo, &cols)) return false;
    if (!size_mul(cols, sizeof(float), col_bytes) || !size_align(*col_bytes, CONVT_ALIGN, col_bytes)) return false;
    if (!size_mul(k->ci, k->kdim, &wn) || !size_add(wn, k->g.c, &pn)) return false;
    return size_mul(pn, sizeof(float), part_bytes) && size_align(*part_bytes, CONVT_ALIGN, part_bytes);
}

/* Sample threads (im2col.h): one per sample where there are samples enough, unless a sample's column buffer
 * and stages exceed LOWERING_SLOT_MAX: then the samples run in turn, each product threaded inside. */
static size_t convt_threads(const convt_ctx *k, size_t m, int threads) {
    size_t col_bytes = 0, part_bytes = 0, stages, sample_bytes;
    if (!convt_slot_parts(k, &col_bytes, &part_bytes)) return 1;
    /* a sample's float32 stages (its packed gradients unpacked: its input's and its output's) count as its
     * scratch does: a high-resolution image's samples run in turn on all threads, with one set of stages */
    if (!size_mul(k->ci, k->npix, &stages) || !size_add(stages, k->g.c * k->opix, &stages) ||
        !size_mul(stages, sizeof(float), &stages) || !size_add(col_bytes, stages, &sample_bytes))
        return 1;
    return lowering_slot_threads(m, threads, sample_bytes);
}

/* ---- shape inference ------------------------------------------------------------------------------------ */

static snug_status convt_check_sizes(const conv2d_params *p, const snug_shape *in, char *msg, size_t msg_len) {
    char s[96];
    if (in->rank != 3) {
        snprintf(msg, msg_len, "expects an input (channels, height, width), got %s",
                 snug_shape_format(in, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (in->dims[0] == 0 || in->dims[1] == 0 || in->dims[2] == 0) {
        snprintf(msg, msg_len, "input %s has a zero dimension", snug_shape_format(in, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (p->out_channels == 0 || p->kernel == 0 || p->stride == 0) {
        snprintf(msg, msg_len, "needs out_channels, kernel and stride >= 1, got out_channels %zu, "
                 "kernel %zu, stride %zu", p->out_channels, p->kernel, p->stride);
        return SNUG_E_ARG;
    }
    return SNUG_OK;
}

/* One output side, (n - 1) s - 2p + k; SNUG_E_SHAPE (and a message) when it is not at least 1 or overflows. */
static snug_status convt_side(const conv2d_params *p, const snug_shape *in, size_t n, size_t *out, char *msg,
                              size_t msg_len) {
    size_t full, pad2;
    char s[96];
    if (!size_mul(n - 1, p->stride, &full) || !size_add(full, p->kernel, &full) ||
        !size_mul(p->padding, 2, &pad2) || pad2 >= full) {
        snprintf(msg, msg_len, "padding %zu leaves no output for input %s with kernel %zu and stride %zu: "
                 "the output side (n - 1) * stride - 2 * padding + kernel must be at least 1", p->padding,
                 snug_shape_format(in, s, sizeof s), p->kernel, p->stride);
        return SNUG_E_SHAPE;
    }
    *out = full - pad2;
    return SNUG_OK;
}

static snug_status convt_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                               int *n_params, char *msg, size_t msg_len) {
    const conv2d_params *p = &n->p.conv2d;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    snug_status st = convt_check_sizes(p, &in[0], msg, msg_len);
    if (st != SNUG_OK) return st;
    size_t c = in[0].dims[0], k = p->kernel, co = p->out_channels, ho, wo;
    if ((st = convt_side(p, &in[0], in[0].dims[1], &ho, msg, msg_len)) != SNUG_OK ||
        (st = convt_side(p, &in[0], in[0].dims[2], &wo, msg, msg_len)) != SNUG_OK)
        return st;
    size_t kdim, npix, opix, wn, on, cols;
    const size_t f[] = {co, k, k};
    /* Every GEMM dimension is an int for the BLAS; the products must address. */
    if (!size_prod(f, 3, &kdim) || !size_mul(in[0].dims[1], in[0].dims[2], &npix) || !size_mul(ho, wo, &opix) ||
        !size_mul(c, kdim, &wn) || !size_mul(co, opix, &on) || !size_mul(kdim, npix, &cols) ||
        cols > SIZE_MAX / sizeof(float) || kdim > INT_MAX || npix > INT_MAX || c > INT_MAX) {
        char s[96];
        snprintf(msg, msg_len, "on input %s with %zu output channels and kernel %zu is too large: "
                 "a GEMM dimension exceeds %d", snug_shape_format(&in[0], s, sizeof s), co, k, INT_MAX);
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 3, .dims = {co, ho, wo}};
    /* PyTorch's fan_in: weight.size(1) * k * k, which for a transposed convolution is Co * k * k. */
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 4, .dims = {c, co, k, k}}, .fan_in = kdim,
                             .init = INIT_KAIMING_UNIFORM};
    params[1] = (param_decl){.suffix = "bias", .shape = {.rank = 1, .dims = {co}}, .fan_in = kdim,
                             .init = INIT_BIAS_UNIFORM};
    *n_params = 2;
    return SNUG_OK;
}

/* ---- forward -------------------------------------------------------------------------------------------- */

/* Input rows [i0, i0 + rows) of a non-overlapping transposed convolution (k <= s, no padding) against the
 * block's column matrix col (kdim, rows * W): with y_add, each patch added into its own output pixels (each gets
 * exactly one, so the sum is col2im_add's); else col gathered from y_read (im2col's). */
static void convt_block_patches(const convt_ctx *k, float *y_add, const float *y_read, float *col, size_t i0,
                                size_t rows) {
    const size_t kk = k->g.k, s = k->g.stride, w = k->g.wo, nb = rows * w;
    for (size_t o = 0; o < k->g.c; o++)
        for (size_t a = 0; a < kk; a++)
            for (size_t b = 0; b < kk; b++) {
                float *cr = col + ((o * kk + a) * kk + b) * nb;
                for (size_t i = 0; i < rows; i++) {
                    const size_t at = o * k->opix + ((i0 + i) * s + a) * k->g.w + b;
                    float *ci = cr + i * w;
                    if (y_add)
                        for (size_t j = 0; j < w; j++) y_add[at + j * s] += ci[j];
                    else
                        for (size_t j = 0; j < w; j++) ci[j] = y_read[at + j * s];
                }
            }
}

/* y_n = b + col2im(W^T x_n) for one sample. */
static void convt_forward_sample(const convt_ctx *k, float *y, // (co, opix)
                                 const float *x,               // (ci, npix)
                                 const float *w,               // (ci, kdim)
                                 const float *b,               // (co)
                                 float *col) {                 // (kdim, npix) scratch
    /* W^T through strides: A(i, p) = W[p, i] */
    if (k->pointwise) { /* y (co, npix) = b + W^T (co, ci) x (ci, npix) */
        gemm_direct(k->kdim, k->npix, k->ci, w, 1, k->kdim, x, k->npix, y, k->npix, b, false);
        return;
    }
    for (size_t o = 0; o < k->g.c; o++)
        for (size_t j = 0; j < k->opix; j++) y[o * k->opix + j] = b[o];
    if (k->rows < k->g.ho) {
        for (size_t i0 = 0; i0 < k->g.ho; i0 += k->rows) {
            const size_t nb = (k->g.ho - i0 < k->rows ? k->g.ho - i0 : k->rows) * k->g.wo;
            gemm_direct(k->kdim, nb, k->ci, w, 1, k->kdim, x + i0 * k->g.wo, k->npix, col, nb, NULL, false);
            convt_block_patches(k, y, NULL, col, i0, nb / k->g.wo);
        }
        return;
    }
    gemm_direct(k->kdim, k->npix, k->ci, w, 1, k->kdim, x, k->npix, col, k->npix, NULL, false);
    col2im_add(y, col, &k->g);
}

static void convt_forward(const op_call *c) {
    const convt_ctx k = convt_ctx_of(c->node);
    const size_t m = c->m, in_n = op_in_numel(c, 0), out_n = op_out_numel(c);
    const size_t T = convt_threads(&k, m, c->threads);
    size_t col_bytes = 0, part_bytes = 0;
    convt_slot_parts(&k, &col_bytes, &part_bytes); /* cannot overflow: the planner sized the same numbers */
    const size_t slot = T > 1 ? col_bytes + part_bytes : col_bytes;
    char *work = c->work;
    if (T > 1) {
        #pragma omp parallel for num_threads((int)T) schedule(static)
        for (size_t n = 0; n < m; n++) {
            float *col = (float *)(void *)(work + (size_t)omp_get_thread_num() * slot);
            convt_forward_sample(&k, c->out + n * out_n, c->in[0] + n * in_n, c->w[0], c->w[1], col);
            op_round_output(c, n * out_n, out_n);
        }
    } else {
        for (size_t n = 0; n < m; n++) {
            convt_forward_sample(&k, c->out + n * out_n, c->in[0] + n * in_n, c->w[0], c->w[1], (float *)c->work);
            op_round_output(c, n * out_n, out_n);
        }
    }
}

/* ---- backward ------------------------------------------------------------------------------------------- */

/* One sample: col = im2col(dy_n), dw += x_n col^T, din_n += W col (din_n = W col where din is fresh:
 * op_call.din_fresh, the product started from zero, the bits of adding into zeros), db += row sums of dy_n. dw,
 * db or din may be NULL. */
static void convt_backward_sample(const convt_ctx *k, bool fresh, float *din, // (ci, npix) or NULL
                                  float *dw,                      // (ci, kdim) or NULL
                                  float *db,                      // (co) or NULL
                                  const float *dy,                // (co, opix)
                                  const float *x,                 // (ci, npix)
                                  const float *w,                 // (ci, kdim)
                                  float *col) {                   // (kdim, npix) scratch
    if ((dw || din) && k->rows < k->g.ho) {
        for (size_t i0 = 0; i0 < k->g.ho; i0 += k->rows) {
            const size_t nb = (k->g.ho - i0 < k->rows ? k->g.ho - i0 : k->rows) * k->g.wo;
            convt_block_patches(k, NULL, dy, col, i0, nb / k->g.wo);
            if (dw) gemm_direct_nt(k->ci, k->kdim, nb, x + i0 * k->g.wo, k->npix, col, nb, dw, k->kdim);
            if (din)
                gemm_direct(k->ci, nb, k->kdim, w, k->kdim, 1, col, nb, din + i0 * k->g.wo, k->npix, NULL, !fresh);
        }
    } else if (dw || din) {
        const float *cols = dy;
        if (!k->pointwise) {
            im2col(col, dy, &k->g);
            cols = col;
        }
        if (dw) gemm_direct_nt(k->ci, k->kdim, k->npix, x, k->npix, cols, k->npix, dw, k->kdim);
        if (din) gemm_direct(k->ci, k->npix, k->kdim, w, k->kdim, 1, cols, k->npix, din, k->npix, NULL, !fresh);
    }
    if (db) {
        for (size_t o = 0; o < k->g.c; o++) {
            double s = 0.0; /* an up-sampled plane can hold 65536 pixels: sum in double */
            for (size_t j = 0; j < k->opix; j++) s += dy[o * k->opix + j];
            db[o] += (float)s;
        }
    }
}

/* Slot t's stages where the gradients are stored in bfloat16 (op_call.grads): a sample's dy, then its dx. */
static float *convt_grad_stage(const op_call *c, size_t t, bool dx) {
    if (!c->grads.stage) return NULL;
    const size_t dy_b = grad_stage_bytes_of(op_out_numel(c)), dx_b = grad_stage_bytes_of(op_in_numel(c, 0));
    return (float *)(void *)((char *)c->grads.stage + t * (dy_b + dx_b) + (dx ? dy_b : 0));
}

/* Sample n on slot t: its gradients as float32 (in place, or through the slot's stages: ops/packed_grads.h),
 * the sample's backward, and a packed input gradient rounded as it is stored. */
static void convt_backward_one(const op_call *c, const convt_ctx *k, size_t n, size_t t, float *dw, float *db,
                               float *col) {
    const size_t in_n = op_in_numel(c, 0), out_n = op_out_numel(c);
    const bool fresh = c->din_fresh & 1u;
    float *sdx = convt_grad_stage(c, t, true);
    float *dx = grad_din_wanted(c, 0) ? grad_dx(c, 0, in_n, n, sdx, false, 0, in_n) : NULL;
    convt_backward_sample(k, fresh, dx, dw, db, grad_dy(c, out_n, n, convt_grad_stage(c, t, false), 0, out_n),
                          c->in[0] + n * in_n, c->w[0], col);
    if (dx) grad_dx_store(c, 0, in_n, n, sdx, 0, in_n);
}

static void convt_backward(const op_call *c) {
    const convt_ctx k = convt_ctx_of(c->node);
    const size_t m = c->m;
    const size_t T = convt_threads(&k, m, c->threads), wn = k.ci * k.kdim;
    if (T == 1) { /* the BLAS threads each GEMM; accumulate straight into the gradients */
        for (size_t n = 0; n < m; n++) convt_backward_one(c, &k, n, 0, c->dw[0], c->dw[1], (float *)c->work);
        return;
    }
    size_t col_bytes = 0, part_bytes = 0;
    convt_slot_parts(&k, &col_bytes, &part_bytes);
    const size_t slot = col_bytes + part_bytes;
    char *work = c->work;
    #pragma omp parallel num_threads((int)T)
    {
        /* Zero every partial, including those of threads the runtime may not have started; streamed, as the
         * convolutions' (conv2d.c): the master read them in the last call's reduction. */
        #pragma omp for schedule(static)
        for (size_t t = 0; t < T; t++) {
            stream_zero_floats((float *)(void *)(work + t * slot + col_bytes), wn + k.g.c);
            stream_fence();
        }
        const size_t me = (size_t)omp_get_thread_num();
        char *mine = work + me * slot;
        float *pdw = (float *)(void *)(mine + col_bytes);
        #pragma omp for schedule(static)
        for (size_t n = 0; n < m; n++)
            convt_backward_one(c, &k, n, me, c->dw[0] ? pdw : NULL, c->dw[1] ? pdw + wn : NULL, (float *)(void *)mine);
    }
    if (c->dw[0]) lowering_reduce(c->dw[0], work, slot, col_bytes, wn, T);
    if (c->dw[1]) lowering_reduce(c->dw[1], work, slot, col_bytes + wn * sizeof(float), k.g.c, T);
}

/* ---- costs ---------------------------------------------------------------------------------------------- */

static double convt_flops(const op_node *n) {
    const convt_ctx k = convt_ctx_of(n);
    return 2.0 * (double)k.ci * (double)k.kdim * (double)k.npix;
}

static size_t convt_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads its kept input (OP_KEEPS_INPUT) for dW */
}

/* Forward and backward use the same column buffer, plus partials when T > 1. SIZE_MAX when the size overflows,
 * which no budget fits. */
static size_t convt_workspace_bytes(const op_node *n, size_t m, int threads) {
    const convt_ctx k = convt_ctx_of(n);
    const size_t T = convt_threads(&k, m, threads);
    size_t col_bytes, part_bytes, slot, total;
    if (!convt_slot_parts(&k, &col_bytes, &part_bytes)) return SIZE_MAX;
    if (T == 1) return col_bytes;
    if (!size_add(col_bytes, part_bytes, &slot) || !size_mul(slot, T, &total)) return SIZE_MAX;
    return total;
}

/* The packed gradients' stages: a sample's dy and dx per sample thread (convt_grad_stage). */
static size_t convt_grad_stage_bytes(const op_node *n, size_t m, int threads, bool input_staged) {
    (void)input_staged;
    const convt_ctx k = convt_ctx_of(n);
    const size_t dy = grad_stage_bytes_of(n->out_numel), dx = grad_stage_bytes_of(n->in_numel[0]);
    size_t total;
    if (dy == SIZE_MAX || dx == SIZE_MAX || !size_mul(dy + dx, convt_threads(&k, m, threads), &total)) return SIZE_MAX;
    return total;
}

const op_desc op_conv_transpose2d = {
    .kind = "conv_transpose2d",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED | OP_ROUNDS_OUTPUT,
    .grad_stage_bytes = convt_grad_stage_bytes,
    .infer = convt_infer,
    .forward = convt_forward,
    .backward = convt_backward,
    .flops = convt_flops,
    .saved_bytes = convt_saved_bytes,
    .workspace_bytes = convt_workspace_bytes,
};
