/* conv2d: im2col per sample into a per-thread column buffer, then one GEMM per sample and group. The GEMMs are
 * gemm_direct's (kernels/gemm_direct.h), which read the column matrix in place instead of packing it: with 16 to 64
 * output channels OpenBLAS spent as long copying as multiplying. The forward GEMM starts from the bias.
 *
 * Groups (PyTorch's `groups`): input channels and output channels split into G equal groups, group j's outputs
 * see only group j's inputs; weight (Co, C/G, k, k). The column matrix of the whole input holds the groups' rows
 * one block after another, so one im2col serves all groups and group j is one GEMM over its block. G = 1 is
 * the plain convolution, one GEMM per sample, with no extra work.
 *
 * Threads: with at least as many samples as threads, an OpenMP loop runs one sample per thread at a time (the
 * OpenMP OpenBLAS runs single-threaded inside a parallel region); with fewer, a plain loop over samples lets
 * the BLAS use the threads inside each GEMM. Backward then accumulates dW and db into per-thread partial buffers
 * that are reduced in thread order, so a given thread count always gives the same bits.
 *
 * 3x3 stride-1 padding-1 convolutions with one group (most of every CNN here) take the direct path of
 * kernels/conv3x3_direct.h on CPUs with AVX-512: no lowering, and a scratch of padded planes instead of the column
 * buffer. Samples go to threads the same way; with fewer samples than threads, all threads share each sample
 * (its tiles split between them), so micro-batches of 1 use every core too. So do samples whose padded planes
 * exceed LOWERING_SLOT_MAX (high-resolution images), whatever the micro-batch: one slot of scratch, not one per
 * thread. With stride 2 (the downsampling
 * convolutions of a ResNet) both directions take the direct path too, through the phase planes of
 * conv3x3_s2_forward and conv3x3_s2_backward.
 *
 * Where it measures faster (conv_wino_pays), the stride-1 forward and input gradient take Winograd F(2x2, 3x3)
 * (kernels/conv3x3_winograd.h) instead: 2.25x fewer multiplies (the input gradient F(4x4, 3x3) on planes of 12x12
 * and up: 4x fewer). Its transformed weights are computed once per call,
 * by all threads, into the front of the workspace. Where a sample runs on one thread and its planes are small
 * (conv3x3_winograd_dw_pays), dW takes Winograd too, summed over the samples in the transformed domain (dU)
 * and turned into dW once per call and thread; db stays on the direct kernel.
 *
 * In a bf16 plan on a CPU whose vdpbf16ps pays (conv3x3_bf16_takes), the stride-1 forward and input gradient
 * take conv3x3_bf16 instead of either: the direct kernel's padded grid with channels in bfloat16 pairs, vdpbf16ps
 * at twice the multiply-adds of a float32 tile, which measured faster than Winograd on the workloads' shapes
 * (bench/bench_conv_bf16.c). Its weights, paired once per call, take Winograd's place (the workspace's front or
 * the kept block, which Winograd's sizes cover); a packed input is paired as it lies, with no float32 stage.
 * dW takes conv3x3_bf16's too where Winograd's would not take it (Winograd's measured faster where it does) and
 * at least 8 input channels fill half its lanes (else the float32 direct kernel's); where Winograd's takes it
 * with F(2x2) tiles, its products run on bfloat16 pairs of tiles (conv3x3_winograd_dw_accumulate_bf16), while
 * F(4x4)'s stay float32; at that rate it takes planes whose dU would be too large for float32's too
 * (conv3x3_winograd_dw_pays_bf16: a UNet's bottleneck). db stays on the direct kernel.
 *
 * On a CPU with AMX tiles, conv3x3_bf16 runs its three products on them (kernels/conv3x3_amx.h) and takes the
 * layers whose channel counts the tiles take, at least 16 on both sides (conv3x3_bf16_takes), dW included:
 * Winograd's dW, whose bf16 products are vdpbf16ps's, is off there (conv_amx_tiles).
 *
 * In a bf16 plan on a CPU whose bgemm pays but whose vdpbf16ps does not (AMX tiles on Intel: conv_bgemm_in_use),
 * the wide layers the tiles do not take and where the lowering measured faster (conv_bgemm_pays) take it, its
 * three products through bgemm, instead of any of the above: Y = W cols (+ bias), cols' = W^T dY then col2im, dW += dY cols^T. bgemm rounds
 * its operands to bfloat16 as it packs them (the weights, the columns, dY) and its bits depend neither on the
 * thread count nor on the tiling, so a sample's output and input gradient are the same whichever thread and
 * micro-batch computes them; dW and db go to per-thread partials reduced in thread order, as the lowering's.
 *
 * Workspace, T = threads used (threads when m >= threads and a sample's scratch and stages are at most
 * LOWERING_SLOT_MAX, else 1), each part rounded up to 64 bytes:
 *   [ Winograd's transformed weights, 16 C Co floats (36 C Co where the input gradient takes F(4x4)), only on
 *     that path; on conv3x3_bf16's, its paired weights, 9 max(Co ceil(C/2), C ceil(Co/2)) words ]
 *   T x [ column buffer (C*k*k, Ho*Wo) floats, or the direct path's scratch (about (C + Co)(H + 2)(W + 1)
 *         floats at stride 1, or (C + Co) bands of about 20 rows where the plane is taller (conv3x3_direct.h),
 *         C(H + 2)(W + 2) + Co(Ho + 2)(Wo + 1) at stride 2; with Winograd, whose weight gradient alone uses
 *         the padded planes, the larger of that and its blocks for the threads sharing a sample; with
 *         Winograd's dW, the largest of its blocks and dW's transposed planes; on conv3x3_bf16's, the
 *         larger of that and ceil(max(C, Co)/2) paired planes of (H + 2)(W + 1) words) | dU, 16 Co round_up(C, 16)
 *         floats, only with Winograd's dW | bgemm's workspace, only on the bgemm path (for all threads where
 *         T = 1) | partial dW (Co, C/G*k*k) (none with dU: dU is the partial) + db (Co) floats, only when
 *         T > 1 ].
 * On the direct path with a sample on one thread and more threads idle (a micro-batch of 1), backward runs the
 * input gradient and the weight gradient side by side, each on its own thread and slot (two slots, no
 * partials): each is the one-thread computation, so the bits are those of one thread doing both.
 * A dilated kernel (dilation > 1) or one whose kernel, stride or padding differ between the axes always takes
 * the lowering: im2col reads its taps dilation apart, each axis with its own geometry.
 * A 1x1 stride-1 unpadded convolution needs no column buffer: the input already is the column matrix. With a
 * larger stride (a ResNet's shortcut) the column matrix is x subsampled and col2im a scatter (kernels/im2col.c). */
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "core/stream_store.h"
#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/conv3x3_direct.h"
#include "kernels/conv3x3_winograd.h"
#include "kernels/gemm_direct.h"
#include "kernels/im2col.h"
#include "kernels/isa.h"
#include "ops/op.h"
#include "ops/packed_grads.h"
#include "ops/round_output.h"

#define CONV_ALIGN ((size_t)64)

/* Everything a sample's kernels need, derived once per call. */
typedef struct conv_ctx {
    im2col_geom g;
    size_t co;          /* output channels */
    size_t groups;      /* G */
    size_t cog;         /* Co/G: output channels per group, the rows of one group's GEMM */
    size_t kdim;        /* C/G*k*k: the GEMM's inner dimension (one group's rows of the column matrix) */
    size_t npix;        /* Ho*Wo */
    bool pointwise;     /* 1x1, stride 1, no padding: the input is its own column matrix */
    bool direct;        /* 3x3, stride 1, padding 1, one group, on AVX-512: conv3x3_direct, no lowering */
    bool direct_s2;     /* the same with stride 2: conv3x3_s2_forward and conv3x3_s2_backward */
    bool wino;          /* direct, and its forward and input gradient by Winograd (conv_wino_pays) */
    bool dx_fresh;      /* backward: Winograd or conv3x3_bf16 writes each sample's input gradient whole, this
                           call being its first writer (op_call.din_fresh), so nothing zeroes it first */
    bool bf16;          /* direct, in a bf16 plan where conv3x3_bf16_in_use: the forward, the input gradient and
                           (where Winograd's does not take it) the weight gradient on bfloat16 operands
                           (conv3x3_bf16.h); wino is then off */
    bool wino_dw;       /* the weight gradient may take Winograd (conv_layout_of): where a float32 plan would
                           take it for the other two (wino, before bf16 turned it off) */
    bool bgemm;         /* the lowering with its three products through bgemm (conv_bgemm_pays): a bf16 plan on a
                           CPU whose bgemm pays but whose vdpbf16ps does not (AMX); every other path is off */
} conv_ctx;

/* Where Winograd beats the direct kernel, measured on one core in both directions, forward and input gradient
 * (docs/performance.md): at least 16 input and 16 output channels (with 1 input channel its transforms cost as
 * much as the products) and planes of at least 8x8. Its transformed weights (16 or 36 C Co floats, once per op)
 * can exceed the column matrix lowering would need on small planes with many channels (8x8 with 64: 256 KiB;
 * 16x16 with 256: 9 MiB), where it is still faster: a price in workspace worth paying, and planned like every
 * other byte. */
static bool conv_wino_pays(size_t c, size_t co, size_t h, size_t w) {
    return c >= 16 && co >= 16 && h >= 8 && w >= 8;
}

/* The width axis's kernel, stride and padding: the height's where the layer leaves the axis out (kernel_w 0). */
static void conv_width_axis(const conv2d_params *p, size_t *k, size_t *s, size_t *pad) {
    *k = p->kernel_w ? p->kernel_w : p->kernel;
    *s = p->kernel_w ? p->stride_w : p->stride;
    *pad = p->kernel_w ? p->padding_w : p->padding;
}

/* Whether a bf16 plan's convolutions may take the lowering through bgemm: where bgemm's products pay but
 * vdpbf16ps's do not (kernel_isa.h: AMX tiles on Intel), so that neither conv3x3_bf16 nor the float32 kernels
 * are the faster choice everywhere. A property of the CPU (and of a test's cap), not a measurement. */
static bool conv_bgemm_in_use(void) { return kernel_bf16_products_pay() && !kernel_bf16_dots_pay(); }

/* Whether conv3x3_bf16's products run on AMX tiles (conv3x3_amx.h) rather than vdpbf16ps. */
static bool conv_amx_tiles(void) { return kernel_isa_now() >= KERNEL_ISA_AMX_BF16; }

/* Where the lowering through bgemm beats the float32 kernels a bf16 plan takes otherwise (Winograd, the direct
 * kernels), one sample on one thread over the three directions (bench/bench_conv_bgemm.c): 3x3 stride-1 layers
 * of at least CONV_BGEMM_MIN_C input and output channels. The lowering's passes (im2col, bgemm packing the
 * column matrix, col2im) cost per element of a column matrix of 9 C rows, the products C_out multiply-adds per
 * element: with fewer channels on either side the passes outweigh what AMX saves (a ResNet-20's and the cnn's
 * layers, a UNet's upper levels lose to Winograd), from 128 on both they are a small part (a UNet's two lowest
 * levels, its bottleneck and the first decoder convolution, which take about half Winograd's or the direct
 * kernel's time). */
#define CONV_BGEMM_MIN_C ((size_t)128)

static bool conv_bgemm_pays(const conv_ctx *k) {
    const bool square3 = k->g.k == 3 && k->g.kw == 3 && k->g.stride == 1 && k->g.sw == 1 && k->g.pad == 1 &&
                         k->g.pw == 1 && k->g.dilation <= 1 && k->groups == 1;
    return square3 && k->g.c >= CONV_BGEMM_MIN_C && k->co >= CONV_BGEMM_MIN_C;
}

/* bf16: whether the plan is a bf16 one. Its 3x3 stride-1 convolutions take conv3x3_bf16 where
 * conv3x3_bf16_takes them (vdpbf16ps that pays, or AMX tiles), everything else as a float32 plan. */
static conv_ctx conv_ctx_of(const op_node *n, bool bf16) {
    const snug_shape *in = &n->in_shape[0];
    const conv2d_params *p = &n->p.conv2d;
    size_t kw, sw, pw, padded, span;
    conv_width_axis(p, &kw, &sw, &pw);
    conv_ctx k = {.g = {.c = in->dims[0], .h = in->dims[1], .w = in->dims[2], .k = p->kernel, .stride = p->stride,
                        .pad = p->padding, .kw = kw, .sw = sw, .pw = pw, .dilation = p->dilation},
                  .co = p->out_channels, .groups = p->groups};
    im2col_axis(k.g.h, k.g.k, k.g.stride, k.g.pad, p->dilation, &padded, &span, &k.g.ho);
    im2col_axis(k.g.w, kw, sw, pw, p->dilation, &padded, &span, &k.g.wo);
    k.cog = k.co / k.groups;
    k.kdim = k.g.c / k.groups * k.g.k * kw;
    k.npix = k.g.ho * k.g.wo;
    /* the fast paths are those of one kernel, stride and padding on both axes (the 3x3 ones without dilation; a
     * 1x1 kernel has none to speak of) */
    const bool square = kw == k.g.k && sw == k.g.stride && pw == k.g.pad;
    k.pointwise = square && k.g.k == 1 && k.g.stride == 1 && k.g.pad == 0;
    const bool d3 = square && k.g.k == 3 && k.g.pad == 1 && k.groups == 1 && p->dilation <= 1 &&
                    conv3x3_direct_available();
    k.direct = d3 && k.g.stride == 1;
    k.direct_s2 = d3 && k.g.stride == 2;
    k.wino = k.direct && conv3x3_winograd_available() && conv_wino_pays(k.g.c, k.co, k.g.h, k.g.w);
    k.wino_dw = k.wino;
    /* one input channel leaves every pair half zero: no faster than the float32 tile (the first layer, which
     * computes no input gradient) */
    k.bf16 = bf16 && k.direct && k.g.c > 1 && conv3x3_bf16_takes(k.g.c, k.co);
    if (k.bf16) k.wino = false;
    /* on AMX tiles the direct weight gradient outruns Winograd's (whose bf16 products are vdpbf16ps's) */
    if (k.bf16 && conv_amx_tiles()) k.wino_dw = false;
    k.bgemm = bf16 && !k.bf16 && conv_bgemm_in_use() && conv_bgemm_pays(&k);
    if (k.bgemm) k.direct = k.direct_s2 = k.wino = k.wino_dw = k.bf16 = false;
    return k;
}

/* Where everything lives in the workspace, for m samples and the plan's threads; false on overflow. */
typedef struct conv_layout {
    size_t pre;    /* bytes before the first slot: Winograd's transformed weights, else 0 */
    size_t T;      /* sample threads: lowering_threads(m, threads) */
    size_t slots;  /* slots in the workspace: T, or 2 where backward splits dx from dW (conv_grads_apart) */
    size_t col;    /* per slot: the column buffer, or the direct path's scratch (and on the bgemm path, bgemm's
                      workspace after the column buffer) */
    size_t bwork;  /* per slot, from its start: where bgemm's workspace begins (on the bgemm path) */
    bool wdw;      /* the weight gradient by Winograd (see conv_layout_of): its dU after the scratch in each slot */
    bool own_fwd;  /* the threads sharing a sample's Winograd forward each take a slot of their own (there are
                      slots enough: conv_grads_apart's two), instead of parts of the first */
    size_t du;     /* per slot: dU's bytes, or 0 */
    size_t part;   /* per slot when T > 1, after dU: partial dW (co, kdim) (none with dU, the partial itself)
                      then db (co) */
    size_t dbo;    /* bytes from the partials to db's */
    size_t slot;   /* bytes from one slot to the next */
} conv_layout;

/* Below this many multiply-adds per sample the direct path runs a sample on one thread: waking the others
 * costs more than they save. At 1 << 20, splitting the MNIST CNN's second conv (3.6M) and ResNet-20's convs
 * (2.4M each) over 2 threads at micro-batch 1 made those steps slower with a passive wait policy, and many
 * times slower with a spinning one when other work shares the cores (docs/performance.md). */
#define CONV_DIRECT_PAR_MIN ((size_t)1 << 22)

/* Threads that share one sample on the direct path (m < threads): all of them when the sample is large. */
static int conv_direct_inner(const conv_ctx *k, int threads) {
    return threads > 1 && k->co * k->kdim * k->npix >= CONV_DIRECT_PAR_MIN ? threads : 1;
}

/* Threads that share one sample's forward: Winograd's splits a small plane's output channels between them (each
 * transforming the whole input) from CONV_WINO_PAR_MIN multiply-adds, below the direct kernels' bar: at one
 * sample the other threads would otherwise wait through the whole forward. */
#define CONV_WINO_PAR_MIN ((size_t)1 << 20)

static int conv_forward_inner(const conv_ctx *k, int threads) {
    if (k->wino && threads > 1 && k->co * k->kdim * k->npix >= CONV_WINO_PAR_MIN) return threads;
    return conv_direct_inner(k, threads);
}

/* Whether the direct path's backward computes the input gradient and the weight gradient on two threads side
 * by side: where each sample would otherwise run on one thread while the others wait (fewer samples than
 * threads, and a sample too small to share). Two whole tasks with no barrier between them pay where splitting
 * each one's tiles did not: the cnn's second convolution at micro-batch 1 (dW about 60% of its backward). */
static bool conv_grads_apart(const conv_ctx *k, size_t m, int threads) {
    return (k->direct || k->direct_s2) && lowering_threads(m, threads) == 1 && conv_direct_inner(k, threads) == 1 &&
           threads > 1;
}

/* The floats of Winograd's transformed weights (*u) and of one slot's scratch for Tf threads sharing a
 * sample's forward in it and Tb its input gradient (*n: whichever is larger). */
static bool conv_wino_floats(const conv3x3_shape *s, size_t Tf, size_t Tb, size_t *u, size_t *n) {
    size_t uf, ub, f, b;
    if (!conv3x3_winograd_weights_floats(s, false, &uf) || !conv3x3_winograd_weights_floats(s, true, &ub) ||
        !conv3x3_winograd_scratch_floats(s, false, Tf, &f) || !conv3x3_winograd_scratch_floats(s, true, Tb, &b))
        return false;
    *u = uf > ub ? uf : ub;
    *n = f > b ? f : b;
    return true;
}

/* Bytes of a sample's float32 stages at most: its input and its output (unpacked from packed copies, or the
 * packed gradients of both). A sample per thread holds them once per thread, so they count towards whether a
 * sample gets a slot of its own (LOWERING_SLOT_MAX) as its scratch does: a high-resolution image's samples then
 * run in turn on all threads, with one set of stages. SIZE_MAX where that overflows. */
static size_t conv_sample_stage_bytes(const conv_ctx *k) {
    size_t in, out, total;
    if (!size_mul(k->g.c * k->g.h, k->g.w, &in) || !size_mul(k->co, k->npix, &out) || !size_add(in, out, &total) ||
        !size_mul(total, sizeof(float), &total))
        return SIZE_MAX;
    return total;
}

/* Whether a bf16 plan's Winograd weight gradient takes the bf16 products: on the planes where Winograd's is
 * F(2x2), the only tile they run (conv3x3_winograd.h); where float32's is F(4x4) that stays, with fewer
 * multiplies per pixel than F(2x2) on bf16 pairs would leave and more transform work per pixel saved. */
static bool wdw_bf16(const conv_ctx *k, const conv3x3_shape *s) {
    return k->bf16 && conv3x3_winograd_dw_tile(s) == 2;
}

/* Whether Winograd's weight gradient pays on this layer: where float32's does, and in a bf16 plan also where its
 * products on bfloat16 pairs do with a larger dU (conv3x3_winograd_dw_pays_bf16). */
static bool wdw_pays(const conv_ctx *k, const conv3x3_shape *s) {
    return conv3x3_winograd_dw_pays(s) || (wdw_bf16(k, s) && conv3x3_winograd_dw_pays_bf16(s));
}

/* The floats of bgemm's workspace for the largest of the three products of a group on `threads` threads: the
 * forward (cog, npix, kdim), the input gradient's columns (kdim, npix, cog), the weight gradient
 * (cog, kdim, npix). */
static bool conv_bgemm_floats(const conv_ctx *k, int threads, size_t *n) {
    const size_t f = bgemm_workspace_floats(k->cog, k->npix, k->kdim, threads);
    const size_t dx = bgemm_workspace_floats(k->kdim, k->npix, k->cog, threads);
    const size_t dw = bgemm_workspace_floats(k->cog, k->kdim, k->npix, threads);
    *n = f > dx ? f : dx;
    *n = dw > *n ? dw : *n;
    return *n < SIZE_MAX / sizeof(float);
}

static bool conv_layout_of(const conv_ctx *k, size_t m, int threads, conv_layout *l) {
    size_t cols = 0, wn, pn;
    const conv3x3_shape s = {.c = k->g.c, .co = k->co, .h = k->g.h, .w = k->g.w};
    /* a sample's scratch: the padded planes or bands of the direct kernels (where Winograd runs the forward and
     * the input gradient, the weight gradient's alone), or the column matrix */
    const unsigned uses = k->wino_dw ? CONV3X3_DW : CONV3X3_FORWARD | CONV3X3_DX | CONV3X3_DW;
    if (k->direct ? !conv3x3_scratch_floats_for(&s, uses, &cols)
        : k->direct_s2 ? !conv3x3_s2_scratch_floats(&s, &cols)
        : !k->pointwise && !size_mul(k->kdim * k->groups, k->npix, &cols))
        return false;
    if (cols > SIZE_MAX / sizeof(float)) return false;
    /* That scratch decides whether samples get a slot each (Winograd's blocks are far smaller); a direct-path
     * sample too small to share keeps its own thread whatever its scratch (sharing it would run it serially). */
    const bool direct = k->direct || k->direct_s2;
    size_t sample_bytes; /* SIZE_MAX where it overflows: no slot of its own */
    size_add(cols * sizeof(float), conv_sample_stage_bytes(k), &sample_bytes);
    *l = (conv_layout){.T = direct && conv_direct_inner(k, threads) == 1
                                ? lowering_threads(m, threads)
                                : lowering_slot_threads(m, threads, sample_bytes)};
    /* Winograd's weight gradient where a sample runs on one thread: samples go to threads, or the sample is too
     * small to share on any thread count (so that a micro-batch of 1 gets the same bits on 1, 2 or 3 threads);
     * then no direct kernel needs a scratch */
    const bool wdw =
        k->wino_dw && wdw_pays(k, &s) && (l->T > 1 || conv_direct_inner(k, INT_MAX) == 1);
    if (wdw) cols = 0;
    l->slots = conv_grads_apart(k, m, threads) ? 2 : l->T;
    if (k->wino) {
        size_t un, wsn;
        const size_t Tf = l->T > 1 ? 1 : (size_t)conv_forward_inner(k, threads);
        const size_t Tb = l->T > 1 ? 1 : (size_t)conv_direct_inner(k, threads);
        l->own_fwd = Tf > 1 && Tf <= l->slots;
        if (!conv_wino_floats(&s, l->own_fwd ? 1 : Tf, Tb, &un, &wsn) || !size_mul(un, sizeof(float), &l->pre) ||
            !size_align(l->pre, CONV_ALIGN, &l->pre))
            return false;
        cols = wsn > cols ? wsn : cols;
    }
    if (k->bf16) { /* the forward's and the input gradient's paired planes; their paired weights in front */
        size_t bn, uf, ub;
        if (!conv3x3_bf16_scratch_floats(&s, &bn) || !conv3x3_bf16_weights_floats(&s, false, &uf) ||
            !conv3x3_bf16_weights_floats(&s, true, &ub) || !size_mul(uf > ub ? uf : ub, sizeof(float), &l->pre) ||
            !size_align(l->pre, CONV_ALIGN, &l->pre))
            return false;
        cols = bn > cols ? bn : cols;
        if (!wdw && !conv3x3_bf16_dw_scratch_floats(&s, &bn)) return false; /* and its weight gradient's */
        cols = bn > cols ? bn : cols;
    }
    if (wdw) {
        size_t dsn, dun;
        if (!conv3x3_winograd_dw_scratch_floats(&s, &dsn) || !conv3x3_winograd_dw_floats(&s, &dun) ||
            !size_mul(dun, sizeof(float), &l->du) || !size_align(l->du, CONV_ALIGN, &l->du))
            return false;
        cols = dsn > cols ? dsn : cols;
        l->wdw = true;
    }
    if (!size_mul(cols, sizeof(float), &l->col) || !size_align(l->col, CONV_ALIGN, &l->col)) return false;
    if (k->bgemm) { /* bgemm's workspace after the column buffer: its own threads' where samples share a slot */
        size_t bw;
        l->bwork = l->col;
        if (!conv_bgemm_floats(k, l->T > 1 ? 1 : threads, &bw) || !size_mul(bw, sizeof(float), &bw) ||
            !size_align(bw, CONV_ALIGN, &bw) || !size_add(l->col, bw, &l->col))
            return false;
    }
    if (!size_add(l->col, l->du, &l->slot)) return false;
    if (l->T == 1) return true;
    if (!size_mul(k->co, k->kdim, &wn) || !size_mul(wn, sizeof(float), &l->dbo)) return false;
    if (wdw) l->dbo = 0; /* dU is the thread's partial weight gradient */
    pn = l->dbo / sizeof(float) + k->co;
    return size_mul(pn, sizeof(float), &l->part) && size_align(l->part, CONV_ALIGN, &l->part) &&
           size_add(l->slot, l->part, &l->slot);
}

/* ---- shape inference ------------------------------------------------------------------------------------ */

static snug_status conv_check_sizes(const conv2d_params *p, const snug_shape *in, char *msg, size_t msg_len) {
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
    size_t kw, sw, pw;
    conv_width_axis(p, &kw, &sw, &pw);
    if (p->out_channels == 0 || p->kernel == 0 || p->stride == 0 || p->groups == 0 || sw == 0) {
        snprintf(msg, msg_len, "needs out_channels, kernel, stride and groups >= 1, got out_channels %zu, "
                 "kernel %zux%zu, stride %zux%zu, groups %zu", p->out_channels, p->kernel, kw, p->stride, sw,
                 p->groups);
        return SNUG_E_ARG;
    }
    if (in->dims[0] % p->groups || p->out_channels % p->groups) {
        snprintf(msg, msg_len, "groups %zu must divide both the input channels %zu (input %s) and the output "
                 "channels %zu", p->groups, in->dims[0], snug_shape_format(in, s, sizeof s), p->out_channels);
        return SNUG_E_SHAPE;
    }
    size_t ph, pwd, spanh, spanw, ho, wo;
    const bool hok = im2col_axis(in->dims[1], p->kernel, p->stride, p->padding, p->dilation, &ph, &spanh, &ho);
    const bool wok = im2col_axis(in->dims[2], kw, sw, pw, p->dilation, &pwd, &spanw, &wo);
    if (ph == SIZE_MAX || pwd == SIZE_MAX || spanh == SIZE_MAX || spanw == SIZE_MAX) {
        snprintf(msg, msg_len, "padding %zux%zu or dilation %zu with kernel %zux%zu is too large for input %s",
                 p->padding, pw, p->dilation, p->kernel, kw, snug_shape_format(in, s, sizeof s));
        return SNUG_E_ARG;
    }
    if (!hok || !wok) {
        snprintf(msg, msg_len, "kernel %zux%zu (dilation %zu: spanning %zux%zu pixels) is larger than its input %s "
                 "padded by %zux%zu (%zux%zu): use a smaller kernel or dilation, or more padding", p->kernel, kw,
                 p->dilation > 1 ? p->dilation : 1, spanh, spanw, snug_shape_format(in, s, sizeof s), p->padding,
                 pw, ph, pwd);
        return SNUG_E_SHAPE;
    }
    return SNUG_OK;
}

static snug_status conv_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    const conv2d_params *p = &n->p.conv2d;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    const snug_status st = conv_check_sizes(p, &in[0], msg, msg_len);
    if (st != SNUG_OK) return st;
    size_t c = in[0].dims[0], cg = c / p->groups, k = p->kernel, co = p->out_channels, kw, sw, pw, padded, span;
    size_t ho, wo;
    conv_width_axis(p, &kw, &sw, &pw);
    im2col_axis(in[0].dims[1], k, p->stride, p->padding, p->dilation, &padded, &span, &ho);
    im2col_axis(in[0].dims[2], kw, sw, pw, p->dilation, &padded, &span, &wo);
    size_t kdim, npix, wn, on, cols;
    const size_t f[] = {c, k, kw};
    /* Every GEMM dimension is an int for the BLAS; the products must address. kdim: all groups' rows. */
    if (!size_prod(f, 3, &kdim) || !size_mul(ho, wo, &npix) || !size_mul(co, kdim, &wn) ||
        !size_mul(co, npix, &on) || !size_mul(kdim, npix, &cols) || cols > SIZE_MAX / sizeof(float) ||
        kdim > INT_MAX || npix > INT_MAX || co > INT_MAX) {
        char s[96];
        snprintf(msg, msg_len, "on input %s with %zu output channels and kernel %zux%zu is too large: "
                 "a GEMM dimension exceeds %d", snug_shape_format(&in[0], s, sizeof s), co, k, kw, INT_MAX);
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 3, .dims = {co, ho, wo}};
    /* PyTorch's fan_in: weight.size(1) * kh * kw, the inputs one output sees. */
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 4, .dims = {co, cg, k, kw}},
                             .fan_in = cg * k * kw, .init = INIT_KAIMING_UNIFORM};
    params[1] = (param_decl){.suffix = "bias", .shape = {.rank = 1, .dims = {co}}, .fan_in = cg * k * kw,
                             .init = INIT_BIAS_UNIFORM};
    *n_params = p->no_bias ? 1 : 2; /* without a bias the kernels start from zero (w[1] and dw[1] NULL) */
    return SNUG_OK;
}

/* ---- forward -------------------------------------------------------------------------------------------- */

static float *conv_stage(const op_call *c, const conv_layout *l, size_t t); /* below, with the regenerated inputs */

/* Sample n's input in forward: in[0]'s, or where a bf16 plan keeps it only packed (op_call.packed.in: the
 * output of a concatenation), unpacked into stage `at` of the layout l by part t of the T threads that share
 * the sample, whole after the barrier: the bits of reading the float32 instance (every bfloat16 is a float). */
static const float *conv_x_forward(const op_call *c, const conv_layout *l, size_t at, size_t n, size_t t, size_t T) {
    const size_t in_n = op_in_numel(c, 0), lo = in_n * t / T, hi = in_n * (t + 1) / T;
    if (!c->packed.in[0]) return c->in[0] + n * in_n;
    float *stage = conv_stage(c, l, at);
    bf16_unpack(stage + lo, c->packed.in[0] + n * in_n + lo, hi - lo);
    if (T > 1) {
        #pragma omp barrier
    }
    return stage;
}

/* Where a lowered sample's products run: its column buffer, and on the bgemm path bgemm's workspace and the
 * threads bgemm may split a product over (1 inside a region that gives samples to threads). */
typedef struct conv_scratch {
    float *col;   // (G*kdim, npix)
    float *bwork; // bgemm_workspace_floats for `threads`, or NULL off the bgemm path
    int threads;
} conv_scratch;

static conv_scratch conv_scratch_of(const conv_ctx *k, const conv_layout *l, char *slot, int threads) {
    return (conv_scratch){.col = (float *)(void *)slot,
                          .bwork = k->bgemm ? (float *)(void *)(slot + l->bwork) : NULL, .threads = threads};
}

/* One group's forward through bgemm: y (cog, npix) = b + W cols. bgemm's start is a bias per column and a
 * convolution's is one per row (output channel), so y starts from its rows' biases and the product adds into
 * it: each element is the chain bgemm starts from its bias. */
static void conv_bgemm_forward(const conv_ctx *k, float *y, const float *w, const float *b, const float *cols,
                               const conv_scratch *s) {
    for (size_t o = 0; b && o < k->cog; o++)
        for (size_t p = 0; p < k->npix; p++) y[o * k->npix + p] = b[o];
    bgemm(k->cog, k->npix, k->kdim, (sgemm_mat){.p = w, .rs = k->kdim, .cs = 1},
          (sgemm_mat){.p = cols, .rs = k->npix, .cs = 1}, y, k->npix, NULL, b != NULL, s->bwork, s->threads);
}

/* y_n = W col(x_n) + b for one sample; group j: rows j*cog.. of y and W, rows j*kdim.. of col. The bias is the
 * GEMM's starting value, so y is written once. */
static void conv_forward_sample(const conv_ctx *k, float *y, // (co, npix)
                                const float *x,              // (c, h, w)
                                const float *w,              // (co, kdim)
                                const float *b,              // (co)
                                const conv_scratch *s) {
    const float *cols = x;
    if (!k->pointwise) {
        im2col(s->col, x, &k->g);
        cols = s->col;
    }
    for (size_t j = 0; j < k->groups; j++) {
        const float *wj = w + j * k->cog * k->kdim, *cj = cols + j * k->kdim * k->npix, *bj = b ? b + j * k->cog : NULL;
        float *yj = y + j * k->cog * k->npix;
        if (k->bgemm) conv_bgemm_forward(k, yj, wj, bj, cj, s);
        else gemm_direct(k->cog, k->npix, k->kdim, wj, k->kdim, 1, cj, k->npix, yj, k->npix, bj, false);
    }
}

/* Winograd's transformed weights for the forward (dx false) or the input gradient, by part t of T of the
 * threads of the enclosing region; the barrier makes them whole before any thread reads them. */
static void conv_derive_weights(const conv_ctx *k, const conv3x3_shape *s, float *u, const float *w, bool dx,
                                size_t t, size_t T) {
    if (k->bf16) conv3x3_bf16_weights(s, u, w, dx, t, T);
    else conv3x3_winograd_weights(s, u, w, dx, t, T);
}

static void conv_wino_weights(const conv_ctx *k, const conv3x3_shape *s, float *u, const float *w, bool dx,
                              size_t t, size_t T) {
    conv_derive_weights(k, s, u, w, dx, t, T);
    if (T > 1) {
        #pragma omp barrier
    }
}

/* Winograd's transformed weights kept across a window (op_desc.kept_bytes) where a micro-batch is this small:
 * at one sample they are derived once per sample otherwise, 15% of the cnn's master thread at micro-batch 1
 * (both directions; the input gradient's F(4x4) weights are 36 a channel pair). From 8 samples on, deriving
 * them is a few percent of a micro-batch or less, and full batches have no second micro-batch to save it. */
#define CONV_KEEP_MAX_M ((size_t)4)
/* The kept block: two 64-byte words, the weights version each direction was derived under, then the forward's
 * weights, then the input gradient's (each aligned). */
#define CONV_KEPT_HEAD ((size_t)64)

static bool conv_kept_layout(const conv_ctx *k, size_t *fwd, size_t *dx) {
    const conv3x3_shape s = {.c = k->g.c, .co = k->co, .h = k->g.h, .w = k->g.w};
    return conv3x3_winograd_weights_floats(&s, false, fwd) && conv3x3_winograd_weights_floats(&s, true, dx) &&
           size_mul(*fwd, sizeof(float), fwd) && size_align(*fwd, CONV_ALIGN, fwd) &&
           size_mul(*dx, sizeof(float), dx) && size_align(*dx, CONV_ALIGN, dx);
}

/* Where one direction's transformed (or, on conv3x3_bf16, paired) weights live: the kept block, where *derive
 * says whether they are stale (derived under another weights version), else the workspace's front, derived
 * every call. */
static float *wino_u(const op_call *c, const conv_ctx *k, bool dx, bool *derive) {
    size_t fwd, dxb;
    if (!c->kept || !conv_kept_layout(k, &fwd, &dxb)) {
        *derive = true;
        return (float *)(void *)c->work;
    }
    *derive = ((const uint64_t *)c->kept)[dx] != c->weights_version;
    return (float *)(void *)((char *)c->kept + CONV_KEPT_HEAD + (dx ? fwd : 0));
}

/* Marks one direction's kept weights as derived under the current version (once they are whole). */
static void wino_u_derived(const op_call *c, bool dx) {
    if (c->kept) ((uint64_t *)c->kept)[dx] = c->weights_version;
}

/* Thread t's part of a slot's Winograd scratch, one direction's blocks side by side. */
static float *wino_part(const conv3x3_shape *s, float *slot, bool dx, size_t t) {
    size_t per = 0;
    conv3x3_winograd_scratch_floats(s, dx, 1, &per); /* cannot overflow: conv_layout_of sized more */
    return slot + t * per;
}

/* Whether the forward kernel rounds c's output itself as it stores it (conv3x3_forward_rounded,
 * conv3x3_bf16_forward_rounded): the direct kernels in a bf16 plan, the float32 one on the layers of few input
 * channels (a first layer), whose outputs cost as much to round in a pass of their own as to compute. */
static bool conv_kernel_rounds(const op_call *c, const conv_ctx *k) {
    return (c->packed.round || c->packed.out) && k->direct && !k->wino;
}

/* op_round_output of outputs [lo, lo + n) where the kernel did not round them, else their packed copy alone. */
static void conv_round_output(const op_call *c, const conv_ctx *k, size_t lo, size_t n) {
    if (!conv_kernel_rounds(c, k)) op_round_output(c, lo, n);
    else if (c->packed.copy) bf16_pack(c->packed.copy + lo, c->out + lo, n);
}

/* ---- outputs kept only packed ----------------------------------------------------------------------------
 * Where the plan keeps the output only packed (op_call.packed.out: its readers, a GroupNorm, read it packed),
 * each sample is made in a float32 stage of its slot (op_packed_io.stage, out_stage_bytes), rounded there (by
 * the kernel or after it) and packed: the bits of the packed copy the float32 output would have had, and no
 * float32 instance of the widest tensors of a high-resolution UNet. */

/* Where sample n's float32 output is made on slot t: out, or the slot's output stage. */
static float *conv_y(const op_call *c, size_t n, size_t t) {
    const size_t out_n = op_out_numel(c);
    if (!c->packed.out) return c->out + n * out_n;
    return (float *)(void *)((char *)c->packed.stage + t * grad_stage_bytes_of(out_n));
}

/* Outputs [lo, lo + len) of sample n, made in y (conv_y), are final: rounded where the kernel did not round
 * them, and packed into the plan's packed copy, or into the only packed output. */
static void conv_sample_done(const op_call *c, const conv_ctx *k, float *y, size_t n, size_t lo, size_t len) {
    const size_t at = n * op_out_numel(c) + lo;
    if (!c->packed.out) conv_round_output(c, k, at, len);
    else if (conv_kernel_rounds(c, k)) bf16_pack(c->packed.out + at, y + lo, len);
    else bf16_round_pack(y + lo, c->packed.out + at, len);
}

/* One sample's forward on the direct path, Winograd's or the direct kernel's (scratch: Winograd's thread's own,
 * the direct kernel's shared by the T threads); round: conv_kernel_rounds. */
static void conv_forward_one(const conv_ctx *k, const conv3x3_shape *s, float *y, conv3x3_bf16_src x,
                             const float *w, const float *b, const float *u, bool round, float *scratch, size_t t,
                             size_t T) {
    if (k->bf16 && round) conv3x3_bf16_forward_rounded(s, y, x, u, b, scratch, t, T);
    else if (k->bf16) conv3x3_bf16_forward(s, y, x, u, b, scratch, t, T);
    else if (k->wino) conv3x3_winograd_forward(s, y, x.f, u, b, scratch, t, T);
    else if (k->direct_s2) conv3x3_s2_forward(s, y, x.f, w, b, scratch, t, T);
    else if (round) conv3x3_forward_rounded(s, y, x.f, w, b, scratch, t, T);
    else conv3x3_forward(s, y, x.f, w, b, scratch, t, T);
}

/* Sample n's input for conv_forward_one: conv3x3_bf16 reads a packed input as it lies, the others read
 * conv_x_forward's. */
static conv3x3_bf16_src conv_src_forward(const op_call *c, const conv_ctx *k, const conv_layout *l, size_t at,
                                         size_t n, size_t t, size_t T) {
    if (k->bf16 && c->packed.in[0]) return (conv3x3_bf16_src){.h = c->packed.in[0] + n * op_in_numel(c, 0)};
    return (conv3x3_bf16_src){.f = conv_x_forward(c, l, at, n, t, T)};
}

/* The direct path: one sample per thread, each with its own scratch, or all threads on each sample in turn
 * (conv3x3_direct and conv3x3_winograd split it). Either way every output is computed whole by one thread. */
static void conv_forward_direct(const op_call *c, const conv_ctx *k, const conv_layout *l) {
    const conv3x3_shape s = {.c = k->g.c, .co = k->co, .h = k->g.h, .w = k->g.w};
    const size_t m = c->m, out_n = op_out_numel(c);
    bool derive;
    float *u = wino_u(c, k, false, &derive);
    const bool wino_u_new = (k->wino || k->bf16) && derive, round = conv_kernel_rounds(c, k);
    char *work = (char *)c->work + l->pre;
    if (l->T > 1) {
        #pragma omp parallel num_threads((int)l->T)
        {
            if (wino_u_new) conv_wino_weights(k, &s, u, c->w[0], false, (size_t)omp_get_thread_num(), l->T);
            const size_t t = (size_t)omp_get_thread_num();
            float *mine = (float *)(void *)(work + t * l->slot);
            /* Contiguous parts of the samples, as every op splits a batch: thread t writes the outputs that
             * thread t reads next (the pooling or normalisation after it), in memory the planner gave thread t
             * (plan/arena.c). Claiming samples one at a time balanced a faster vCPU's share, but handed a
             * sample's output to the other core's cache at random: static parts measured faster for the cnn's
             * micro-batches, more so with the vCPUs on separate caches (docs/performance.md). */
            #pragma omp for schedule(static)
            for (size_t n = 0; n < m; n++) {
                float *y = conv_y(c, n, t);
                conv_forward_one(k, &s, y, conv_src_forward(c, k, l, t, n, 0, 1), c->w[0], c->w[1], u, round,
                                 mine, 0, 1);
                conv_sample_done(c, k, y, n, 0, out_n);
            }
        }
    } else {
        #pragma omp parallel num_threads(conv_forward_inner(k, c->threads))
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            if (wino_u_new) conv_wino_weights(k, &s, u, c->w[0], false, t, T);
            /* the direct kernels share the slot's padded planes; Winograd's threads take scratches of their own */
            float *scratch = !k->wino ? (float *)(void *)work
                             : l->own_fwd ? (float *)(void *)(work + t * l->slot)
                                          : wino_part(&s, (float *)(void *)work, false, t);
            for (size_t n = 0; n < m; n++) {
                float *y = conv_y(c, n, 0);
                conv_forward_one(k, &s, y, conv_src_forward(c, k, l, 0, n, t, T), c->w[0], c->w[1], u, round,
                                 scratch, t, T);
                if ((c->packed.in[0] || c->packed.out) && T > 1) { /* no thread unpacks the next sample (or
                                                                      makes it in the stage) while others read
                                                                      this one */
                    #pragma omp barrier
                }
                if (c->packed.out) { /* each thread packs its part of the sample before the next is made */
                    conv_sample_done(c, k, y, n, out_n * t / T, out_n * (t + 1) / T - out_n * t / T);
                    #pragma omp barrier
                }
            }
            /* the threads shared each sample in their own split: each rounds its part once all are written */
            #pragma omp barrier
            if (!c->packed.out)
                conv_round_output(c, k, m * out_n * t / T, m * out_n * (t + 1) / T - m * out_n * t / T);
        }
    }
    if (wino_u_new) wino_u_derived(c, false);
}

static void conv_forward(const op_call *c) {
    const conv_ctx k = conv_ctx_of(c->node, c->bf16);
    const size_t m = c->m, out_n = op_out_numel(c);
    conv_layout l;
    conv_layout_of(&k, m, c->threads, &l); /* cannot overflow: the planner sized the same numbers */
    if (k.direct || k.direct_s2) {
        conv_forward_direct(c, &k, &l);
        return;
    }
    char *work = c->work;
    if (l.T > 1) {
        #pragma omp parallel for num_threads((int)l.T) schedule(static)
        for (size_t n = 0; n < m; n++) {
            const size_t t = (size_t)omp_get_thread_num();
            const conv_scratch s = conv_scratch_of(&k, &l, work + t * l.slot, 1);
            float *y = conv_y(c, n, t);
            conv_forward_sample(&k, y, conv_x_forward(c, &l, t, n, 0, 1), c->w[0], c->w[1], &s);
            conv_sample_done(c, &k, y, n, 0, out_n);
        }
    } else {
        const conv_scratch s = conv_scratch_of(&k, &l, work, c->threads);
        for (size_t n = 0; n < m; n++) {
            float *y = conv_y(c, n, 0);
            conv_forward_sample(&k, y, conv_x_forward(c, &l, 0, n, 0, 1), c->w[0], c->w[1], &s);
            conv_sample_done(c, &k, y, n, 0, out_n);
        }
    }
}

/* ---- backward ------------------------------------------------------------------------------------------- */

/* The sum of a plane of dy: 16 float partial sums (a loop the compiler vectorises, where a double accumulator
 * would not), combined in double with the tail. */
static float conv_plane_sum(const float *v, size_t n) {
    float lane[16] = {0};
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (size_t l = 0; l < 16; l++) lane[l] += v[j + l];
    double s = 0.0;
    for (size_t l = 0; l < 16; l++) s += lane[l];
    for (; j < n; j++) s += v[j];
    return (float)s;
}

/* One sample: dw += dy_n col_n^T, db += row sums of dy_n, din_n += col2im(W^T dy_n), each group over its
 * blocks. col is reused: first the columns of x_n for dW, then the column gradient for din. dw, db or din may
 * be NULL. */
static void conv_backward_sample(const conv_ctx *k, float *din, // (c, h, w) or NULL
                                 float *dw,                     // (co, kdim) or NULL
                                 float *db,                     // (co) or NULL
                                 const float *dy,               // (co, npix)
                                 const float *x,                // (c, h, w)
                                 const float *w,                // (co, kdim)
                                 const conv_scratch *s) {
    const size_t wstep = k->cog * k->kdim, ystep = k->cog * k->npix, cstep = k->kdim * k->npix;
    float *col = s->col;
    if (dw) {
        const float *cols = x;
        if (!k->pointwise) {
            im2col(col, x, &k->g);
            cols = col;
        }
        for (size_t j = 0; j < k->groups; j++) {
            if (k->bgemm) /* cols^T: B(p, i) = cols[i, p] */
                bgemm(k->cog, k->kdim, k->npix, (sgemm_mat){.p = dy + j * ystep, .rs = k->npix, .cs = 1},
                      (sgemm_mat){.p = cols + j * cstep, .rs = 1, .cs = k->npix}, dw + j * wstep, k->kdim, NULL,
                      true, s->bwork, s->threads);
            else gemm_direct_nt(k->cog, k->kdim, k->npix, dy + j * ystep, k->npix, cols + j * cstep, k->npix,
                                dw + j * wstep, k->kdim);
        }
    }
    if (db)
        for (size_t o = 0; o < k->co; o++) db[o] += conv_plane_sum(dy + o * k->npix, k->npix);
    if (din) {
        /* pointwise: the column gradient is din itself, so add straight into it */
        float *dcols = k->pointwise ? din : col;
        for (size_t j = 0; j < k->groups; j++) { /* W^T through strides: A(i, p) = W[p, i] */
            if (k->bgemm)
                bgemm(k->kdim, k->npix, k->cog, (sgemm_mat){.p = w + j * wstep, .rs = 1, .cs = k->kdim},
                      (sgemm_mat){.p = dy + j * ystep, .rs = k->npix, .cs = 1}, dcols + j * cstep, k->npix, NULL,
                      k->pointwise, s->bwork, s->threads);
            else gemm_direct(k->kdim, k->npix, k->cog, w + j * wstep, 1, k->kdim, dy + j * ystep, k->npix,
                             dcols + j * cstep, k->npix, NULL, k->pointwise);
        }
        if (!k->pointwise) col2im_add(din, col, &k->g);
    }
}

/* Whether a bf16 plan's direct weight gradient (where Winograd's does not take it) is conv3x3_bf16's: where
 * the input channels fill at least half of its 16 lanes; with fewer (an RGB image's first layer: 3 of 16) the
 * float32 kernel is faster (bench/bench_conv_bf16.c, resnet20 conv1). */
#define CONV_BF16_DW_MIN_C 8

static bool dw_bf16_direct(const conv_ctx *k) { return k->bf16 && k->g.c >= CONV_BF16_DW_MIN_C; }

/* One sample's gradients on the direct path: dW by Winograd into du where it is not NULL (then dw is not
 * read), else by conv3x3_bf16 (bf16) or the direct kernel; db by the direct kernel; dx by Winograd's,
 * conv3x3_bf16's or with them. x: floats, or (conv3x3_bf16's dW only) packed bfloat16. */
static void conv_backward_one(const conv_ctx *k, const conv3x3_shape *s, float *dx, float *dw, float *du,
                              float *db, const float *dy, conv3x3_bf16_src x, const float *w, const float *u,
                              float *scratch, size_t t, size_t T) {
    if (k->direct_s2) {
        conv3x3_s2_backward(s, dx, dw, db, dy, x.f, w, scratch, t, T);
        return;
    }
    if (du) {
        if (wdw_bf16(k, s)) conv3x3_winograd_dw_accumulate_bf16(s, du, dy, x.f, scratch);
        else conv3x3_winograd_dw_accumulate(s, du, dy, x.f, scratch);
        dw = NULL;
    }
    if (dw_bf16_direct(k) && dw) {
        conv3x3_bf16_backward_dw(s, dw, dy, x, scratch, t, T);
        dw = NULL;
    }
    conv3x3_backward(s, k->wino || k->bf16 ? NULL : dx, dw, db, dy, x.f, w, scratch, t, T);
    if (k->bf16 && dx) conv3x3_bf16_backward_dx(s, dx, dy, u, scratch, k->dx_fresh, t, T);
    if (k->wino && dx) conv3x3_winograd_backward_dx(s, dx, dy, u, wino_part(s, scratch, true, t), k->dx_fresh, t, T);
}

/* A thread's partial weight gradients (bytes, whole floats) zeroed with streaming stores: the master read them
 * in the last call's reduction, so with the cores on chiplets that share no cache a plain store would wait for
 * each line to be taken back from it. */
static void zero_partials(char *at, size_t bytes) {
    stream_zero_floats((float *)(void *)at, bytes / sizeof(float));
    stream_fence();
}

/* A slot's dU, zeroed, where this call's weight gradient takes Winograd (conv_layout.wdw); else NULL. Its
 * owner turns it into dW with conv3x3_winograd_dw_finish once its samples are done. */
static float *slot_du(const op_call *c, const conv_layout *l, char *slot) {
    if (!l->wdw || !c->dw[0]) return NULL;
    memset(slot + l->col, 0, l->du);
    return (float *)(void *)(slot + l->col);
}

static void finish_du(const conv_ctx *k, const conv3x3_shape *s, float *dw, const float *du) {
    if (du && wdw_bf16(k, s)) conv3x3_winograd_dw_finish_bf16(s, dw, du);
    else if (du) conv3x3_winograd_dw_finish(s, dw, du);
}

/* ---- regenerated inputs ----------------------------------------------------------------------------------
 * Where the plan regenerates this layer's input (op_call.regen: a normalisation's output that nothing else
 * reads), backward has no in[0]: the weight gradient asks the normalisation for each sample in turn, written
 * into a stage of one sample after the layout's slots (one per sample thread), where it stays in cache for
 * the kernel that reads it next. Nothing else in backward reads the input. In bf16, where the plan keeps the
 * input only in its packed copy (op_call.in_packed), each sample is unpacked into the same stage. */

/* Bytes of one stage: a sample of the input, rounded to the layout's alignment. */
static size_t conv_stage_bytes(size_t in_n) {
    size_t b;
    return size_mul(in_n, sizeof(float), &b) && size_align(b, CONV_ALIGN, &b) ? b : SIZE_MAX;
}

/* Stage t (of the sample threads) of a call whose layout is l. */
static float *conv_stage(const op_call *c, const conv_layout *l, size_t t) {
    const size_t at = l->pre + l->slots * l->slot + t * conv_stage_bytes(op_in_numel(c, 0));
    return (float *)(void *)((char *)c->work + at);
}

/* Sample n's input for the weight gradient, on one thread: in[0]'s, or regenerated into stage. NULL where the
 * call has no weight gradient (the input gradient and db never read the input). */
static const float *conv_x_one(const op_call *c, size_t n, float *stage) {
    const size_t in_n = op_in_numel(c, 0);
    if (!c->dw[0]) return NULL;
    if (c->in_packed) {
        bf16_unpack(stage, c->in_packed + n * in_n, in_n);
        return stage;
    }
    if (!c->regen) return c->in[0] + n * in_n;
    c->regen->node->op->regen(c->regen, n, stage, 0, 1);
    return stage;
}

/* The same by part t of the T threads that share each sample: regenerated by all of them, whole after the
 * barrier. The kernels end each sample with a barrier of their own, so no thread still reads the previous
 * sample's stage when the next is written. */
/* Whether conv3x3_bf16's weight gradient (bf16, where Winograd's does not take it) reads sample n's input
 * from the packed copy as it lies; then this is it, else NULL. */
static const uint16_t *conv_packed_x(const op_call *c, const conv_ctx *k, const conv_layout *l, size_t n) {
    return dw_bf16_direct(k) && !l->wdw && c->in_packed && c->dw[0] ? c->in_packed + n * op_in_numel(c, 0) : NULL;
}

/* conv_x_one as conv_backward_one reads it. */
static conv3x3_bf16_src conv_src_one(const op_call *c, const conv_ctx *k, const conv_layout *l, size_t n,
                                     float *stage) {
    const uint16_t *h = conv_packed_x(c, k, l, n);
    return h ? (conv3x3_bf16_src){.h = h} : (conv3x3_bf16_src){.f = conv_x_one(c, n, stage)};
}

static const float *conv_x_shared(const op_call *c, size_t n, float *stage, size_t t, size_t T) {
    const size_t in_n = op_in_numel(c, 0), lo = in_n * t / T, hi = in_n * (t + 1) / T;
    if (!c->dw[0] || (!c->regen && !c->in_packed)) return conv_x_one(c, n, stage);
    if (c->in_packed) bf16_unpack(stage + lo, c->in_packed + n * in_n + lo, hi - lo);
    else c->regen->node->op->regen(c->regen, n, stage, t, T);
    if (T > 1) {
        #pragma omp barrier
    }
    return stage;
}

/* conv_x_shared as conv_backward_one reads it. */
static conv3x3_bf16_src conv_src_shared(const op_call *c, const conv_ctx *k, const conv_layout *l, size_t n,
                                        float *stage, size_t t, size_t T) {
    const uint16_t *h = conv_packed_x(c, k, l, n);
    return h ? (conv3x3_bf16_src){.h = h} : (conv3x3_bf16_src){.f = conv_x_shared(c, n, stage, t, T)};
}

/* ---- gradients stored in bfloat16 ------------------------------------------------------------------------
 * Where the plan stores this layer's output gradient or its input's in bfloat16 (op_call.grads), each sample
 * is unpacked into (and the input gradient rounded from) float32 stages after the rest of the workspace: one
 * pair per slot, a sample's dy then its dx, so the kernels read and write float32 as they always do. */

/* The slots that may run a sample at once: the layout's sample threads, or conv_grads_apart's two. */
static size_t conv_grad_slots(const conv_layout *l) { return l->T > l->slots ? l->T : l->slots; }

/* Whether a sample's dx stage is its thread's input stage (conv_stage): where samples go to threads on the
 * direct path, each thread's weight gradients are done (with the input) before its input gradients begin. */
static bool conv_dx_in_input_stage(const conv_ctx *k, const conv_layout *l, bool input_staged) {
    return input_staged && (k->direct || k->direct_s2) && l->T > 1;
}

/* A packed input gradient of a large sample on conv3x3_bf16, where its threads share each sample (one slot):
 * made a group of input channels at a time, each group's planes in a float32 stage of at most
 * CONV_DX_GROUP_MAX bytes (at least one plane), instead of the whole sample's. Every element of dx is the same
 * float32 chain whichever group computes it (conv3x3_bf16.h: over dy's channel pairs and the taps), so the bits
 * are those of the whole sample's stage. */
#define CONV_DX_GROUP_MAX ((size_t)32 << 20)

/* Input channels in one group of conv_dx_grouped. */
static size_t conv_dx_group_channels(const conv_ctx *k) {
    const size_t plane = k->g.h * k->g.w * sizeof(float), n = CONV_DX_GROUP_MAX / (plane ? plane : 1);
    return n < 1 ? 1 : n < k->g.c ? n : k->g.c;
}

static bool conv_dx_grouped(const conv_ctx *k, const conv_layout *l) {
    return k->bf16 && l->T == 1 && l->slots == 1 && conv_dx_group_channels(k) < k->g.c;
}

/* Bytes of a slot's dx stage: none where dx goes to the input's stage, a group's planes where conv_dx_grouped,
 * else a sample's. */
static size_t conv_dx_stage_bytes(const conv_ctx *k, const conv_layout *l, size_t in_n, bool input_staged) {
    if (conv_dx_in_input_stage(k, l, input_staged)) return 0;
    if (conv_dx_grouped(k, l)) return grad_stage_bytes_of(conv_dx_group_channels(k) * k->g.h * k->g.w);
    return grad_stage_bytes_of(in_n);
}

/* Slot s's dy stage, or its dx stage; NULL where the call has no packed gradient. */
static float *conv_grad_stage(const op_call *c, size_t s, bool dx) {
    if (!c->grads.stage) return NULL;
    conv_ctx k = conv_ctx_of(c->node, c->bf16);
    conv_layout l;
    conv_layout_of(&k, c->m, c->threads, &l);
    const bool staged = c->regen || c->in_packed;
    if (dx && conv_dx_in_input_stage(&k, &l, staged)) return conv_stage(c, &l, s);
    const size_t dy_b = grad_stage_bytes_of(op_out_numel(c)), dx_b = conv_dx_stage_bytes(&k, &l, op_in_numel(c, 0), staged);
    return (float *)(void *)((char *)c->grads.stage + s * (dy_b + dx_b) + (dx ? dy_b : 0));
}

/* Sample n's packed input gradient by groups of input channels (conv_dx_grouped), by part t of the T threads
 * that share the sample: each group unpacked into the stage where the kernel adds into it (the call is not the
 * gradient's first writer: conv_ctx.dx_fresh; else the kernel writes the group whole), the kernel on the group's
 * planes with the group's rows of the paired weights u, and rounded into din. dy is the sample's whole float32 dy. */
static void conv_dx_groups(const op_call *c, const conv_ctx *k, const conv3x3_shape *s, size_t n, const float *dy,
                           const float *u, float *scratch, size_t t, size_t T) {
    const size_t plane = s->h * s->w, per = conv_dx_group_channels(k);
    uint16_t *din = c->grads.din[0] + n * op_in_numel(c, 0);
    float *stage = conv_grad_stage(c, 0, true);
    for (size_t i0 = 0; i0 < s->c; i0 += per) {
        const size_t nc = per < s->c - i0 ? per : s->c - i0, len = nc * plane;
        const size_t lo = len * t / T, hi = len * (t + 1) / T;
        if (!k->dx_fresh) bf16_unpack(stage + lo, din + i0 * plane + lo, hi - lo);
        if (T > 1) {
            #pragma omp barrier
        }
        const conv3x3_shape g = {.c = nc, .co = s->co, .h = s->h, .w = s->w};
        const float *ug = u + conv3x3_bf16_weights_offset(s, true, i0);
        conv3x3_bf16_backward_dx(&g, stage, dy, ug, scratch, k->dx_fresh, t, T); /* ends in a barrier */
        bf16_pack(din + i0 * plane + lo, stage + lo, hi - lo);
        if (T > 1) { /* the next group overwrites the stage */
            #pragma omp barrier
        }
    }
}

/* Sample n's dy on slot s, part [lo, hi) of it unpacked where it is packed. */
static const float *conv_dy(const op_call *c, size_t n, size_t s, size_t lo, size_t hi) {
    return grad_dy(c, op_out_numel(c), n, conv_grad_stage(c, s, false), lo, hi);
}

/* Sample n's input gradient on slot s (part [lo, hi) made ready), zeroed first where this call is its first
 * writer (op_call.din_fresh) and the kernel adds into it (not Winograd's or conv3x3_bf16's, conv_ctx.dx_fresh):
 * each sample is zeroed by the thread about to add into it, while it is in cache, instead of all of din in a
 * pass of the executor's own (the same bits: the kernels add into zeros either way). NULL without an input
 * gradient. */
static float *sample_dx(const op_call *c, const conv_ctx *k, size_t n, size_t s, size_t lo, size_t hi) {
    if (!grad_din_wanted(c, 0)) return NULL;
    return grad_dx(c, 0, op_in_numel(c, 0), n, conv_grad_stage(c, s, true), !k->dx_fresh, lo, hi);
}

/* Sample n's input gradient done on slot s: part [lo, hi) rounded into the packed gradient where it is one. */
static void sample_dx_done(const op_call *c, size_t n, size_t s, size_t lo, size_t hi) {
    if (c->grads.din[0]) grad_dx_store(c, 0, op_in_numel(c, 0), n, conv_grad_stage(c, s, true), lo, hi);
}

/* A whole sample's input gradient by one thread on slot s: sample_dx, the kernel, sample_dx_done. */
static void conv_dx_one(const op_call *c, const conv_ctx *k, const conv3x3_shape *s, size_t n, size_t slot,
                        const float *u, float *scratch) {
    const size_t in_n = op_in_numel(c, 0), out_n = op_out_numel(c);
    conv_backward_one(k, s, sample_dx(c, k, n, slot, 0, in_n), NULL, NULL, NULL, conv_dy(c, n, slot, 0, out_n),
                      (conv3x3_bf16_src){0}, c->w[0], u, scratch, 0, 1);
    sample_dx_done(c, n, slot, 0, in_n);
}

/* conv_grads_apart's backward: thread 0 the input gradient (with Winograd's weights for it), thread 1 the
 * weight and bias gradients, each sample by sample on its own slot; one thread does both in turn. */
static void conv_backward_apart(const op_call *c, const conv_ctx *k, const conv3x3_shape *s, float *u,
                                bool wino_u_new, char *slots, const conv_layout *l) {
    const size_t m = c->m, out_n = op_out_numel(c);
    #pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        float *mine = (float *)(void *)(slots + (size_t)t * l->slot);
        if (t == 0) {
            if (wino_u_new) conv_derive_weights(k, s, u, c->w[0], true, 0, 1);
            for (size_t n = 0; n < m; n++) conv_dx_one(c, k, s, n, 0, u, mine);
        }
        if (t == 1 || T == 1) {
            float *du = slot_du(c, l, (char *)mine);
            for (size_t n = 0; n < m; n++)
                conv_backward_one(k, s, NULL, c->dw[0], du, c->dw[1], conv_dy(c, n, 1, 0, out_n),
                                  conv_src_one(c, k, l, n, conv_stage(c, l, 0)), c->w[0], u, mine, 0, 1);
            finish_du(k, s, c->dw[0], du);
        }
    }
}

/* The direct path's backward, threads as its forward; with T > 1 sample threads, dW and db go to per-thread
 * partials reduced in thread order. */
static void conv_backward_direct(const op_call *c, const conv_ctx *k, const conv_layout *l) {
    const conv3x3_shape s = {.c = k->g.c, .co = k->co, .h = k->g.h, .w = k->g.w};
    const size_t m = c->m, in_n = op_in_numel(c, 0), out_n = op_out_numel(c), wn = k->co * k->kdim;
    bool derive;
    float *u = wino_u(c, k, true, &derive);
    const bool want_dx = grad_din_wanted(c, 0);
    const bool wino_dx = (k->wino || k->bf16) && want_dx && derive; /* the input gradient's weights to derive */
    char *slots = (char *)c->work + l->pre;
    if (l->T > 1) {
        #pragma omp parallel num_threads((int)l->T)
        {
            if (wino_dx) conv_wino_weights(k, &s, u, c->w[0], true, (size_t)omp_get_thread_num(), l->T);
            /* every thread's dU and partials, also those of threads the runtime may not have started; streamed
             * (core/stream_store.h): the last call's reduction read them on the master */
            #pragma omp for schedule(static)
            for (size_t t = 0; t < l->T; t++) zero_partials(slots + t * l->slot + l->col, l->du + l->part);
            char *mine = slots + (size_t)omp_get_thread_num() * l->slot, *part = mine + l->col + l->du;
            float *du = l->wdw && c->dw[0] ? (float *)(void *)(mine + l->col) : NULL;
            float *pdw = c->dw[0] && !du ? (float *)(void *)part : NULL;
            float *pdb = c->dw[1] ? (float *)(void *)(part + l->dbo) : NULL;
            /* The weight and bias gradients go to this thread's partials, over samples fixed by the shape (the
             * bits depend on which samples a partial sums); each sample's input gradient is whole by one
             * thread, in the same contiguous parts as the forward's (and so on the thread whose cache holds
             * that sample's gradient and the memory it is written to). */
            const size_t me = (size_t)omp_get_thread_num();
            if (c->dw[0] || c->dw[1]) {
                #pragma omp for schedule(static) nowait
                for (size_t n = 0; n < m; n++)
                    conv_backward_one(k, &s, NULL, pdw, du, pdb, conv_dy(c, n, me, 0, out_n),
                                      conv_src_one(c, k, l, n, conv_stage(c, l, me)), c->w[0], u,
                                      (float *)(void *)mine, 0, 1);
            }
            if (want_dx) {
                #pragma omp for schedule(static)
                for (size_t n = 0; n < m; n++) conv_dx_one(c, k, &s, n, me, u, (float *)(void *)mine);
            }
        }
        if (wino_dx) wino_u_derived(c, true);
        const size_t part = l->col + l->du;
        if (c->dw[0] && l->wdw) /* each thread's dU into dW, in thread order */
            for (size_t t = 0; t < l->T; t++)
                finish_du(k, &s, c->dw[0], (const float *)(void *)(slots + t * l->slot + l->col));
        else if (c->dw[0]) lowering_reduce(c->dw[0], slots, l->slot, part, wn, l->T);
        if (c->dw[1]) lowering_reduce(c->dw[1], slots, l->slot, part + l->dbo, k->co, l->T);
        return;
    }
    if (l->slots == 2 && want_dx && (c->dw[0] || c->dw[1]) && par_pays_macs(m * k->co * k->kdim * k->npix)) {
        conv_backward_apart(c, k, &s, u, wino_dx, slots, l);
        if (wino_dx) wino_u_derived(c, true);
        return;
    }
    /* the threads share each sample here: zero all of a fresh din before any of them adds into it */
    if (c->din[0] && (c->din_fresh & 1u) && !k->dx_fresh) memset(c->din[0], 0, m * in_n * sizeof *c->din[0]);
    #pragma omp parallel num_threads(conv_direct_inner(k, c->threads))
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t lo = in_n * t / T, hi = in_n * (t + 1) / T, ylo = out_n * t / T, yhi = out_n * (t + 1) / T;
        const bool staged = c->grads.dout || c->grads.din[0]; /* each thread readies and stores its part */
        const bool grouped = c->grads.din[0] && conv_dx_grouped(k, l);
        if (wino_dx) conv_wino_weights(k, &s, u, c->w[0], true, t, T);
        float *du = slot_du(c, l, slots); /* only where one thread runs here (conv_layout_of) */
        for (size_t n = 0; n < m; n++) {
            const float *dy = conv_dy(c, n, 0, ylo, yhi);
            float *dx = grouped ? NULL
                        : c->grads.din[0] ? sample_dx(c, k, n, 0, lo, hi) : c->din[0] ? c->din[0] + n * in_n : NULL;
            if (staged && T > 1) {
                #pragma omp barrier
            }
            conv_backward_one(k, &s, dx, c->dw[0], du, c->dw[1], dy,
                              conv_src_shared(c, k, l, n, conv_stage(c, l, 0), t, T), c->w[0], u,
                              (float *)(void *)slots, t, T);
            if (grouped) conv_dx_groups(c, k, &s, n, dy, u, (float *)(void *)slots, t, T);
            if (staged && T > 1) {
                #pragma omp barrier
            }
            if (!grouped) sample_dx_done(c, n, 0, lo, hi);
        }
        finish_du(k, &s, c->dw[0], du);
    }
    if (wino_dx) wino_u_derived(c, true);
}

static void conv_backward(const op_call *c) {
    conv_ctx k = conv_ctx_of(c->node, c->bf16);
    k.dx_fresh = (k.wino || k.bf16) && (c->din_fresh & 1u);
    const size_t m = c->m, in_n = op_in_numel(c, 0), out_n = op_out_numel(c), wn = k.co * k.kdim;
    conv_layout l;
    conv_layout_of(&k, m, c->threads, &l);
    if (k.direct || k.direct_s2) {
        conv_backward_direct(c, &k, &l);
        return;
    }
    if (l.T == 1) { /* the BLAS threads each GEMM; accumulate straight into the gradients */
        const conv_scratch s = conv_scratch_of(&k, &l, c->work, c->threads);
        for (size_t n = 0; n < m; n++) {
            conv_backward_sample(&k, sample_dx(c, &k, n, 0, 0, in_n), c->dw[0], c->dw[1],
                                 conv_dy(c, n, 0, 0, out_n), conv_x_one(c, n, conv_stage(c, &l, 0)), c->w[0], &s);
            sample_dx_done(c, n, 0, 0, in_n);
        }
        return;
    }
    char *work = c->work;
    #pragma omp parallel num_threads((int)l.T)
    {
        /* Zero every partial, including those of threads the runtime may not have started. */
        #pragma omp for schedule(static)
        for (size_t t = 0; t < l.T; t++) zero_partials(work + t * l.slot + l.col, l.part);
        const size_t me = (size_t)omp_get_thread_num();
        char *mine = work + me * l.slot;
        const conv_scratch s = conv_scratch_of(&k, &l, mine, 1);
        float *pdw = (float *)(void *)(mine + l.col);
        #pragma omp for schedule(static)
        for (size_t n = 0; n < m; n++) {
            conv_backward_sample(&k, sample_dx(c, &k, n, me, 0, in_n), c->dw[0] ? pdw : NULL,
                                 c->dw[1] ? pdw + wn : NULL, conv_dy(c, n, me, 0, out_n),
                                 conv_x_one(c, n, conv_stage(c, &l, me)), c->w[0], &s);
            sample_dx_done(c, n, me, 0, in_n);
        }
    }
    if (c->dw[0]) lowering_reduce(c->dw[0], work, l.slot, l.col, wn, l.T);
    if (c->dw[1]) lowering_reduce(c->dw[1], work, l.slot, l.col + wn * sizeof(float), k.co, l.T);
}

/* ---- costs ---------------------------------------------------------------------------------------------- */

static double conv_flops(const op_node *n) {
    const conv_ctx k = conv_ctx_of(n, false);
    return 2.0 * (double)k.kdim * (double)k.co * (double)k.npix;
}

static size_t conv_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward re-lowers its kept input instead of keeping the (k*k times larger) columns */
}

/* Backward needs at least what forward does (the same slots, plus partials when T > 1). SIZE_MAX when the size
 * overflows, which no budget fits. */
static size_t conv_layout_bytes_at(const conv_ctx *k, size_t m, int threads) {
    conv_layout l;
    size_t total;
    if (!conv_layout_of(k, m, threads, &l) || !size_mul(l.slot, l.slots, &total) || !size_add(total, l.pre, &total))
        return SIZE_MAX;
    return total;
}

/* The most any call up to micro-batch m needs: on the bgemm path a smaller one (a window's last) may run its
 * samples one at a time with bgemm's workspace for all threads in its one slot, which a pointwise layer's
 * slots (no column buffer) need not cover. The layout depends on m only up to the thread count. */
static size_t conv_layout_bytes(const conv_ctx *k, size_t m, int threads) {
    size_t most = conv_layout_bytes_at(k, m, threads);
    for (size_t j = 1; k->bgemm && j < m && j <= (size_t)(threads > 0 ? threads : 1) && most != SIZE_MAX; j++) {
        const size_t b = conv_layout_bytes_at(k, j, threads);
        most = b > most ? b : most;
    }
    return most;
}

static size_t conv_workspace_bytes(const op_node *n, size_t m, int threads) {
    const conv_ctx k = conv_ctx_of(n, false);
    return conv_layout_bytes(&k, m, threads);
}

static size_t conv_bf16_workspace_bytes(const op_node *n, size_t m, int threads) {
    const conv_ctx k = conv_ctx_of(n, true);
    return conv_layout_bytes(&k, m, threads);
}

/* Winograd's transformed weights of both directions, kept across a window at micro-batches of at most
 * CONV_KEEP_MAX_M; SIZE_MAX on overflow. */
static size_t conv_kept_bytes(const op_node *n, size_t m) {
    const conv_ctx k = conv_ctx_of(n, false);
    size_t fwd, dx, total;
    if (!k.wino || m > CONV_KEEP_MAX_M) return 0;
    if (!conv_kept_layout(&k, &fwd, &dx) || !size_add(fwd, dx, &total) || !size_add(total, CONV_KEPT_HEAD, &total))
        return SIZE_MAX;
    return total;
}

/* A stage per sample thread (one where threads share a sample or the BLAS threads each product), after the
 * layout's slots: see conv_stage. */
static size_t conv_regen_stage_bytes(const op_node *n, size_t m, int threads) {
    const conv_ctx k = conv_ctx_of(n, false), h = conv_ctx_of(n, true);
    conv_layout l, lh;
    size_t total;
    /* a bf16 plan's layer may take another path (bgemm's lowering) with other sample threads: stages for both */
    if (!conv_layout_of(&k, m, threads, &l) || !conv_layout_of(&h, m, threads, &lh)) return SIZE_MAX;
    const size_t T = l.T > lh.T ? l.T : lh.T;
    if (!size_mul(conv_stage_bytes(n->in_numel[0]), T > 1 ? T : 1, &total)) return SIZE_MAX;
    return total;
}

/* In a bf16 plan whose input is only read from its packed copy: conv3x3_bf16 reads it as it lies, in the
 * forward and (where the weight gradient is its own, not Winograd's) in backward, so no stage where every call
 * up to micro-batch m runs its samples one at a time (T 1: no input gradient goes to the input's stage, as it
 * does with sample threads); else conv_regen_stage_bytes. The layout depends on m only up to the threads. */
static size_t conv_bf16_packed_stage_bytes(const op_node *n, size_t m, int threads) {
    const conv_ctx k = conv_ctx_of(n, true);
    bool as_it_lies = k.bf16 && dw_bf16_direct(&k);
    for (size_t j = 1; as_it_lies && j <= m; j++) {
        conv_layout l;
        if (!conv_layout_of(&k, j, threads, &l)) return SIZE_MAX;
        as_it_lies = l.T == 1 && !l.wdw;
        if (j >= (size_t)(threads > 0 ? threads : 1)) break;
    }
    return as_it_lies ? 0 : conv_regen_stage_bytes(n, m, threads);
}

/* The packed gradients' stages at micro-batch m: a sample's dy and dx per slot (conv_grad_stage), dx in the
 * input's stage where it can be. */
static size_t conv_grad_stage_at(const conv_ctx *k, const op_node *n, size_t m, int threads, bool input_staged) {
    conv_layout l;
    if (!conv_layout_of(k, m, threads, &l)) return SIZE_MAX;
    const size_t dy = grad_stage_bytes_of(n->out_numel), dx = conv_dx_stage_bytes(k, &l, n->in_numel[0], input_staged);
    size_t total;
    if (dy == SIZE_MAX || dx == SIZE_MAX || !size_mul(dy + dx, conv_grad_slots(&l), &total)) return SIZE_MAX;
    return total;
}

/* The most any call up to micro-batch m needs: a smaller one (a window's last) may take another path (fewer
 * sample threads, conv_grads_apart's two slots), whose dx has no input stage to go to. The layout depends on m
 * only up to the thread count. */
static size_t conv_grad_stage_bytes(const op_node *n, size_t m, int threads, bool input_staged) {
    const conv_ctx k = conv_ctx_of(n, true);
    size_t most = conv_grad_stage_at(&k, n, m, threads, input_staged);
    for (size_t j = 1; j < m && j <= (size_t)(threads > 0 ? threads : 1) && most != SIZE_MAX; j++) {
        const size_t b = conv_grad_stage_at(&k, n, j, threads, input_staged);
        most = b > most ? b : most;
    }
    return most;
}

/* The output stages of a forward that writes only packed values (conv_y): a sample's output per sample
 * thread, the most any call up to micro-batch m takes. */
static size_t conv_out_stage_bytes(const op_node *n, size_t m, int threads) {
    const conv_ctx k = conv_ctx_of(n, true);
    const size_t per = grad_stage_bytes_of(n->out_numel);
    size_t most = 0;
    for (size_t j = 1; j <= m && most != SIZE_MAX; j++) {
        conv_layout l;
        size_t b;
        b = conv_layout_of(&k, j, threads, &l) && size_mul(per, l.T, &b) ? b : SIZE_MAX;
        most = b > most ? b : most;
        if (j >= (size_t)(threads > 0 ? threads : 1)) break;
    }
    return most;
}

const op_desc op_conv2d = {
    .kind = "conv2d",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_REGEN_INPUT | OP_READS_PACKED | OP_FORWARD_READS_PACKED |
             OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED | OP_ROUNDS_OUTPUT | OP_WRITES_PACKED,
    .infer = conv_infer,
    .forward = conv_forward,
    .backward = conv_backward,
    .flops = conv_flops,
    .saved_bytes = conv_saved_bytes,
    .workspace_bytes = conv_workspace_bytes,
    .bf16_workspace_bytes = conv_bf16_workspace_bytes,
    .kept_bytes = conv_kept_bytes,
    .regen_stage_bytes = conv_regen_stage_bytes,
    .bf16_packed_stage_bytes = conv_bf16_packed_stage_bytes,
    .grad_stage_bytes = conv_grad_stage_bytes,
    .out_stage_bytes = conv_out_stage_bytes,
};
