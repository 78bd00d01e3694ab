/* Ops that round their own output in a bf16 forward (OP_ROUNDS_OUTPUT, op_call.packed.round): the output and
 * the packed copy they write have the bits of the unfused path, the forward without rounding followed by the
 * executor's pass (bf16_round_pack), and with no packed copy the bits of bf16_round_floats. Every op with the
 * flag on every kernel path this CPU takes (ctest runs it capped too: test_rounds_output_avx2, _portable), for
 * micro-batches of 1 and 5 on one and two threads, and in a recompute (a replay reading its saved statistics).
 * GroupNorm also reads its input from a packed copy and writes only a packed output (op_call.packed.in and
 * packed.out, OP_FORWARD_READS_PACKED | OP_WRITES_PACKED): the same statistics and packed values, bit for bit;
 * so do GELU and a linear layer of a sequence's tokens, which also read and write their activation gradients
 * in bfloat16 (op_call.grads) with the bits of rounding the float32 gradients once, and so does a convolution
 * of a high-resolution image, whose input gradient goes through stages of a few planes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "kernels/bf16.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/isa.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "snug.h"

typedef snug_graph *(*graph_fn)(void);

/* A convolution of the input (c, h, w) into co channels, kernel k, stride st, padding k / 2. */
static snug_graph *conv_graph(size_t c, size_t h, size_t co, size_t k, size_t st) {
    snug_graph *g = snug_graph_new("t");
    snug_conv2d(g, "op", snug_input(g, "x", c, h, h), co, k, st, k / 2);
    return g;
}
/* the direct kernels (conv3x3_bf16 where the CPU has AVX512_BF16); the cnn's first layer, one input channel */
static snug_graph *conv_direct(void) { return conv_graph(16, 12, 16, 3, 1); }
static snug_graph *conv_one_channel(void) { return conv_graph(1, 28, 32, 3, 1); }
static snug_graph *conv_stride2(void) { return conv_graph(8, 12, 16, 3, 2); }
static snug_graph *conv_lowered(void) { return conv_graph(4, 10, 6, 5, 1); } /* 5x5: the lowered product */
static snug_graph *conv_pointwise(void) { return conv_graph(8, 9, 12, 1, 1); }
static snug_graph *conv_transpose(void) { /* a UNet's up-convolution */
    snug_graph *g = snug_graph_new("t");
    snug_conv_transpose2d(g, "op", snug_input(g, "x", 8, 6, 6), 4, 2, 2, 0);
    return g;
}
static snug_graph *maxpool(void) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "op", snug_input(g, "x", 6, 14, 14), 2, 2);
    return g;
}
static snug_graph *maxpool_relu(void) { /* the ReLU before it folded in (op_maxpool2d_relu) */
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "op", snug_relu(g, "relu", snug_input(g, "x", 6, 14, 14)), 2, 2);
    return g;
}
static snug_graph *maxpool_odd(void) { /* the generic windows */
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "op", snug_input(g, "x", 5, 11, 11), 3, 2);
    return g;
}
static snug_graph *relu(void) {
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "op", snug_input(g, "x", 3, 40, 40));
    return g;
}
static snug_graph *gelu(void) {
    snug_graph *g = snug_graph_new("t");
    snug_gelu(g, "op", snug_input(g, "x", 3, 40, 40));
    return g;
}
static snug_graph *add(void) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 3, 40, 40);
    snug_add(g, "op", x, snug_relu(g, "r", x));
    return g;
}
static snug_graph *add_relu(void) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 3, 40, 40);
    snug_relu(g, "after", snug_add(g, "op", x, snug_gelu(g, "r", x)));
    return g;
}
static snug_graph *groupnorm(void) {
    snug_graph *g = snug_graph_new("t");
    snug_groupnorm(g, "op", snug_input(g, "x", 8, 9, 9), 4, 1e-5f);
    return g;
}
static snug_graph *groupnorm_relu(void) {
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "after", snug_groupnorm(g, "op", snug_input(g, "x", 8, 9, 9), 2, 1e-5f));
    return g;
}
static snug_graph *layernorm(void) {
    snug_graph *g = snug_graph_new("t");
    snug_layernorm(g, "op", snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 6), 11, 40), 1e-5f);
    return g;
}
static snug_graph *linear(void) { /* rows of one sample (the mlp's) */
    snug_graph *g = snug_graph_new("t");
    snug_linear(g, "op", snug_flatten(g, "flat", snug_input(g, "x", 3, 5, 7)), 40);
    return g;
}
static snug_graph *linear_tokens(void) { /* 20 rows a sample (a sequence's tokens) */
    snug_graph *g = snug_graph_new("t");
    snug_linear(g, "op", snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 20), 11, 24), 40);
    return g;
}
static snug_graph *linear_tokens32(void) { /* 32 rows a sample: whole AMX tiles of k in dW */
    snug_graph *g = snug_graph_new("t");
    snug_linear(g, "op", snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 32), 11, 24), 40);
    return g;
}
static snug_graph *attention(void) { /* 20 tokens, 2 heads of 8 */
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 20), 11, 16);
    snug_causal_self_attention(g, "op", snug_linear(g, "qkv", x, 48), 2);
    return g;
}
static snug_graph *embedding(void) {
    snug_graph *g = snug_graph_new("t");
    snug_embedding(g, "op", snug_input_tokens(g, "tokens", 20), 11, 24);
    return g;
}
static snug_graph *position_embedding(void) {
    snug_graph *g = snug_graph_new("t");
    snug_position_embedding(g, "op", snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 20), 11, 24), 32);
    return g;
}
static snug_graph *batchnorm(void) {
    snug_graph *g = snug_graph_new("t");
    snug_batchnorm2d(g, "op", snug_input(g, "x", 6, 7, 7), 1e-5f, 0.1f);
    return g;
}
static snug_graph *batchnorm_relu(void) {
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "after", snug_batchnorm2d(g, "op", snug_input(g, "x", 6, 7, 7), 1e-5f, 0.1f));
    return g;
}

/* A fixture of node "op" for a bf16 forward: its inputs rounded (the values a bf16 run feeds it) and a
 * workspace sized as a bf16 plan sizes it. */
static void bf16_fixture(op_fixture *f, graph_fn make, op_product product, size_t m, int threads, uint64_t seed) {
    snug_graph *g = make();
    op_fixture_init(f, g, graph_find_node(g, "op"), m, threads, FILL_PLAIN, seed);
    assert_true(f->op->flags & OP_ROUNDS_OUTPUT);
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) bf16_round_floats(f->x[i], f->x[i], m * f->in_n[i]);
    if (f->op->flags & OP_READS_INDICES) /* tokens, every row of the table in turn */
        for (size_t j = 0; j < m * f->in_n[0]; j++) f->x[0][j] = (float)((j * 7) % f->node->p.embedding.vocab);
    f->c.product = product;
    const plan_variant v = {.product = product, .bf16 = true};
    free(f->work);
    /* with the stage of an op that reads or writes packed values a sample at a time (a linear layer's) */
    f->work = op_test_xmalloc(plan_op_workspace(f->node, &v, m, threads) + plan_op_stage(f->node, &v, m, threads));
    f->c.work = f->work;
    if (f->op->saved_batch_bytes) { /* BatchNorm's batch statistics before the per-sample bytes */
        free(f->saved);
        f->saved = op_test_xmalloc(f->op->saved_bytes(f->node) * m + f->op->saved_batch_bytes(f->node));
        f->c.saved = f->saved;
    }
    for (int i = 0; i < f->n_w; i++) /* running statistics: written, not trained */
        if (g->params[f->node->params[i]].buffer) f->c.state[i] = f->w[i], f->c.dw[i] = NULL;
    f->c.bf16 = true;
    f->c.training = true;
}

/* One forward of f as the call says (rounding itself or not), from a poisoned output. */
static void run_forward(op_fixture *f, bool recompute) {
    memset(f->y, 0xA5, f->m_plan * f->out_n * sizeof *f->y);
    f->c.recompute = recompute;
    f->op->forward(&f->c);
}

static void expect_fused_equals_unfused(graph_fn make, op_product product) {
    const size_t ms[] = {1, 5};
    for (size_t im = 0; im < 2; im++)
        for (int threads = 1; threads <= 2; threads++) {
            const size_t m = ms[im];
            op_fixture f;
            bf16_fixture(&f, make, product, m, threads, 4200 + m + (uint64_t)threads);
            const size_t n = m * f.out_n;
            float *want = op_test_xmalloc(n * sizeof *want);
            bf16 *want_packed = op_test_xmalloc(n * sizeof *want_packed);
            bf16 *packed = op_test_xmalloc(n * sizeof *packed);
            for (int recompute = 0; recompute <= 1; recompute++) { /* the first forward saves, the replay reads */
                f.c.packed.round = false, f.c.packed.copy = NULL;
                run_forward(&f, recompute);
                memcpy(want, f.y, n * sizeof *want);
                bf16_round_pack(want, want_packed, n); /* the executor's pass */

                f.c.packed.round = true, f.c.packed.copy = packed;
                memset(packed, 0x5A, n * sizeof *packed);
                run_forward(&f, true); /* statistics as saved, so both forwards normalise alike */
                assert_memory_equal(f.y, want, n * sizeof *want);
                assert_memory_equal(packed, want_packed, n * sizeof *packed);

                f.c.packed.copy = NULL; /* no packed copy kept: rounded in place only */
                run_forward(&f, true);
                assert_memory_equal(f.y, want, n * sizeof *want);
            }
            free(want), free(want_packed), free(packed);
            op_fixture_free(&f);
        }
}

/* The bytes an op keeps across a window (a bf16 linear layer's weights in bf16) in its plan's product at m. */
static size_t kept_bytes_of(const op_fixture *f, op_product product, size_t m) {
    const op_product_sizes *s = f->op->by_product;
    return s && s->kept_bytes ? s->kept_bytes(f->node, m, product) : 0;
}

/* f's forward reading its input packed (and, out_packed, writing only its packed output) against the float32
 * forward that rounds its output and packs a copy: the same statistics and values, bit for bit. Where the op
 * keeps bytes across a window (a linear layer's weights in bf16), also with them bound: the float32 forward
 * makes them, the packed forwards read them (out_packed), or find them stale and make them again. */
static void expect_packed_io_at(graph_fn make, op_product product, const size_t ms[2]) {
    for (size_t im = 0; im < 2; im++)
        for (int threads = 1; threads <= 2; threads++)
            for (int with_kept = 0; with_kept <= 1; with_kept++) {
                const size_t m = ms[im];
                op_fixture f;
                bf16_fixture(&f, make, product, m, threads, 4300 + m + (uint64_t)threads);
                const size_t kept = kept_bytes_of(&f, product, m);
                if (with_kept && !kept) {
                    op_fixture_free(&f);
                    continue;
                }
                if (with_kept) f.c.kept = calloc(1, kept), f.c.weights_version = 1; /* version 0: stale */
                assert_true(f.op->flags & OP_FORWARD_READS_PACKED && f.op->flags & OP_WRITES_PACKED);
                const size_t n = m * f.out_n, in = m * f.in_n[0], saved = m * f.op->saved_bytes(f.node);
                float *want = op_test_xmalloc(n * sizeof *want), *x = f.x[0];
                bf16 *want_packed = op_test_xmalloc(n * sizeof *want_packed);
                bf16 *packed = op_test_xmalloc(n * sizeof *packed);
                bf16 *x_packed = op_test_xmalloc(in * sizeof *x_packed);
                unsigned char *want_saved = op_test_xmalloc(saved);
                /* the float32 stage an op that makes its output before packing it writes only packed through */
                void *out_stage =
                    f.op->out_stage_bytes ? op_test_xmalloc(f.op->out_stage_bytes(f.node, m, threads)) : NULL;
                bf16_pack(x_packed, x, in);
                f.c.packed.round = true, f.c.packed.copy = want_packed;
                run_forward(&f, false);
                memcpy(want, f.y, n * sizeof *want);
                memcpy(want_saved, f.saved, saved);
                for (int out_packed = 0; out_packed <= 1; out_packed++) {
                    memset(f.saved, 0x5A, saved);
                    memset(packed, 0x5A, n * sizeof *packed);
                    f.c.in[0] = NULL, f.c.packed.in[0] = x_packed;
                    f.c.packed.copy = packed;
                    if (out_packed) f.c.out = NULL, f.c.packed.round = false, f.c.packed.out = packed;
                    if (out_packed) f.c.packed.copy = NULL, f.c.packed.stage = out_stage;
                    if (with_kept && !out_packed) *(uint64_t *)f.c.kept = 0; /* stale: the first sample makes it */
                    f.op->forward(&f.c);
                    f.c.in[0] = x, f.c.packed.in[0] = NULL, f.c.out = f.y, f.c.packed.out = NULL;
                    f.c.packed.stage = NULL, f.c.packed.round = true;
                    assert_memory_equal(f.saved, want_saved, saved);
                    assert_memory_equal(packed, want_packed, n * sizeof *packed);
                    if (!out_packed) assert_memory_equal(f.y, want, n * sizeof *want);
                }
                free(want), free(want_packed), free(packed), free(x_packed), free(want_saved), free(out_stage);
                free(f.c.kept);
                op_fixture_free(&f);
            }
}

static void expect_packed_io_equals_float(graph_fn make, op_product product) {
    expect_packed_io_at(make, product, (const size_t[2]){1, 5});
}

/* A convolution reading its input packed and writing only packed (for a GroupNorm after it): on each kernel
 * path this CPU takes, sample per thread and threads sharing a sample. */
static void test_conv_packed_io(void **state) {
    (void)state;
    expect_packed_io_equals_float(conv_direct, op_test_product());
    expect_packed_io_equals_float(conv_one_channel, op_test_product());
    expect_packed_io_equals_float(conv_lowered, op_test_product());
    expect_packed_io_equals_float(conv_pointwise, op_test_product());
}

/* The add with its ReLU folded in reading its kept output from the packed copy its forward wrote
 * (op_call.out_packed, OP_READS_OUTPUT_PACKED; out NULL): the input gradients of reading the float32 output,
 * bit for bit, written fresh over NaN and added into earlier values, and with dout's memory continued as
 * din[0] (masked in place, din[1] from it). */
static void test_add_relu_packed_output(void **state) {
    (void)state;
    for (size_t m = 1; m <= 5; m += 4)
        for (int threads = 1; threads <= 2; threads++) {
            op_fixture f;
            bf16_fixture(&f, add_relu, op_test_product(), m, threads, 4500 + m + (uint64_t)threads);
            assert_true(f.op->flags & OP_READS_OUTPUT_PACKED && f.op->flags & OP_KEEPS_OUTPUT);
            const size_t n = m * f.out_n;
            bf16 *copy = op_test_xmalloc(n * sizeof *copy);
            float *want = op_test_xmalloc(4 * n * sizeof *want), *got = want + 2 * n;
            f.c.packed.round = true, f.c.packed.copy = copy;
            run_forward(&f, false);
            for (int way = 0; way < 3; way++) { /* fresh, added into, in place over dout */
                op_call c = f.c;
                for (int r = 0; r < 2; r++) {
                    float *d = r ? got : want;
                    for (size_t i = 0; i < n; i++) {
                        d[i] = way == 0 ? NAN : 0.25f * f.r[i];
                        d[n + i] = way == 0 ? NAN : -0.5f * f.r[i];
                    }
                    if (way == 2) memcpy(d, f.r, n * sizeof *d);
                    c.din[0] = d, c.din[1] = d + n, c.dout = way == 2 ? d : f.r;
                    c.din_fresh = way == 1 ? 0u : 3u;
                    c.out = r ? NULL : f.y, c.out_packed = r ? copy : NULL;
                    f.op->backward(&c);
                }
                assert_memory_equal(got, want, 2 * n * sizeof *got);
            }
            free(copy), free(want);
            op_fixture_free(&f);
        }
}

static void test_groupnorm_packed_io(void **state) {
    (void)state;
    expect_packed_io_equals_float(groupnorm, op_test_product());
    expect_packed_io_equals_float(groupnorm_relu, op_test_product());
}

/* A transformer's MLP: GELU reading the fc layer's output packed and writing only packed, the next linear
 * reading it packed (a sample at a time through its stage: on snug's products, at 17 rows a sample and more). */
static void test_gelu_linear_packed_io(void **state) {
    (void)state;
    expect_packed_io_equals_float(gelu, op_test_product());
    expect_packed_io_equals_float(linear_tokens, OP_PRODUCT_BGEMM);
    if (op_test_product() == OP_PRODUCT_SGEMM) expect_packed_io_equals_float(linear_tokens, OP_PRODUCT_SGEMM);
}

/* f's backward with its output's and input's gradients in bfloat16 (op_call.grads) against the float32
 * backward whose input gradient is then rounded: the same packed gradient and the same weight gradients, bit
 * for bit, fresh and added into an earlier share. */
static void expect_packed_grads_at(graph_fn make, op_product product, const size_t ms[2]) {
    for (size_t im = 0; im < 2; im++)
        for (int threads = 1; threads <= 2; threads++)
            for (unsigned fresh = 0; fresh <= 1; fresh++) {
                const size_t m = ms[im];
                op_fixture f;
                bf16_fixture(&f, make, product, m, threads, 4400 + m + (uint64_t)threads);
                assert_true(f.op->flags & OP_GRAD_READS_PACKED && f.op->flags & OP_GRAD_WRITES_PACKED);
                run_forward(&f, false);
                const size_t n = m * f.out_n, in = m * f.in_n[0];
                uint64_t seed = 4500 + m;
                float *dy = op_test_bf16_filled(n, &seed), *earlier = op_test_bf16_filled(in, &seed);
                bf16 *dy_packed = op_test_xmalloc(n * sizeof *dy_packed);
                bf16 *want = op_test_xmalloc(in * sizeof *want), *got = op_test_xmalloc(in * sizeof *got);
                float *want_dw[NODE_MAX_PARAMS];
                bf16_pack(dy_packed, dy, n);
                f.c.dout = dy, f.c.din_fresh = fresh;
                memcpy(f.dx[0], earlier, in * sizeof *earlier);
                for (int i = 0; i < f.n_w; i++) memset(f.dw[i], 0, f.wn[i] * sizeof *f.dw[i]);
                f.op->backward(&f.c);
                bf16_pack(want, f.dx[0], in); /* rounded once, as the packed path stores it */
                for (int i = 0; i < f.n_w; i++) {
                    want_dw[i] = op_test_xmalloc(f.wn[i] * sizeof *want_dw[i]);
                    memcpy(want_dw[i], f.dw[i], f.wn[i] * sizeof *want_dw[i]);
                    memset(f.dw[i], 0, f.wn[i] * sizeof *f.dw[i]);
                }
                bf16_pack(got, earlier, in);
                const size_t stage_bytes = f.op->grad_stage_bytes ? f.op->grad_stage_bytes(f.node, m, threads, false) : 0;
                void *stage = op_test_xmalloc(stage_bytes); /* none for GELU: blocks on its stack */
                f.c.dout = NULL, f.c.din[0] = NULL;
                f.c.grads = (op_packed_grads){.dout = dy_packed, .din = {got}, .stage = stage};
                f.op->backward(&f.c);
                assert_memory_equal(got, want, in * sizeof *got);
                for (int i = 0; i < f.n_w; i++) {
                    assert_memory_equal(f.dw[i], want_dw[i], f.wn[i] * sizeof *want_dw[i]);
                    free(want_dw[i]);
                }
                f.c.grads = (op_packed_grads){0};
                free(dy), free(earlier), free(dy_packed), free(want), free(got), free(stage);
                op_fixture_free(&f);
            }
}

static void expect_packed_grads_equal_float(graph_fn make, op_product product) {
    expect_packed_grads_at(make, product, (const size_t[2]){1, 5});
}

/* On AMX a product's bits depend on how K is cut into calls of whole tiles (kernels/bgemm.h): the packed path's
 * dW, a sample's rows a call, has the bits of one call over all rows where a sample's rows fill whole tiles (32
 * k), and the chain tiles (vdpbf16ps, the portable twin) give them at any count. */
static void test_gelu_linear_packed_grads(void **state) {
    (void)state;
    expect_packed_grads_equal_float(gelu, op_test_product());
    const kernel_isa top = kernel_isa_now();
    expect_packed_grads_equal_float(linear_tokens32, OP_PRODUCT_BGEMM);
    if (top >= KERNEL_ISA_AMX_BF16) kernel_isa_cap(KERNEL_ISA_AVX512_BF16);
    expect_packed_grads_equal_float(linear_tokens, OP_PRODUCT_BGEMM);
    kernel_isa_cap(top);
    if (op_test_product() == OP_PRODUCT_SGEMM) expect_packed_grads_equal_float(linear_tokens, OP_PRODUCT_SGEMM);
}

/* A sample of a high-resolution image (16 channels of 840x840 into 8): its stages exceed a slot of its own, so
 * the threads share each sample, and its input gradient goes a group of input channels at a time through a
 * stage of a few planes (conv2d.c, conv_dx_grouped) where conv3x3_bf16 runs: the bits of the whole sample's
 * input gradient, rounded once. */
static snug_graph *conv_hires(void) { return conv_graph(16, 840, 8, 3, 1); }
/* the same with channels AMX tiles take on both sides: groups of 11 planes, not whole blocks of 16 */
static snug_graph *conv_hires_wide(void) { return conv_graph(32, 840, 16, 3, 1); }

static void test_conv_hires_packed_grads(void **state) {
    (void)state;
    if (!conv3x3_bf16_in_use()) skip(); /* the float32 paths have no groups */
    expect_packed_grads_at(conv_hires, op_test_product(), (const size_t[2]){1, 2});
    expect_packed_io_at(conv_hires, op_test_product(), (const size_t[2]){1, 2});
    expect_packed_grads_at(conv_hires_wide, op_test_product(), (const size_t[2]){1, 2});
}

#define ROUNDS(name)                                                                                            \
    static void test_##name(void **state) { (void)state, expect_fused_equals_unfused(name, op_test_product()); }
ROUNDS(conv_direct)
ROUNDS(conv_one_channel)
ROUNDS(conv_stride2)
ROUNDS(conv_lowered)
ROUNDS(conv_pointwise)
ROUNDS(conv_transpose)
ROUNDS(maxpool)
ROUNDS(maxpool_relu)
ROUNDS(maxpool_odd)
ROUNDS(relu)
ROUNDS(gelu)
ROUNDS(add)
ROUNDS(add_relu)
ROUNDS(groupnorm)
ROUNDS(groupnorm_relu)
ROUNDS(layernorm)
ROUNDS(batchnorm)
ROUNDS(linear)
ROUNDS(attention)
ROUNDS(embedding)
ROUNDS(position_embedding)
ROUNDS(linear_tokens)
/* a bf16 plan's product where the CPU has AVX512_BF16 (the portable kernel elsewhere) */
static void test_linear_bgemm(void **state) {
    (void)state;
    expect_fused_equals_unfused(linear, OP_PRODUCT_BGEMM);
    expect_fused_equals_unfused(linear_tokens, OP_PRODUCT_BGEMM);
}
ROUNDS(batchnorm_relu)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_direct),  cmocka_unit_test(test_conv_one_channel),
        cmocka_unit_test(test_conv_stride2), cmocka_unit_test(test_conv_lowered),
        cmocka_unit_test(test_conv_pointwise), cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_maxpool_relu), cmocka_unit_test(test_maxpool_odd),
        cmocka_unit_test(test_relu),          cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_add),           cmocka_unit_test(test_add_relu),
        cmocka_unit_test(test_groupnorm),     cmocka_unit_test(test_groupnorm_relu),
        cmocka_unit_test(test_layernorm),     cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_batchnorm_relu), cmocka_unit_test(test_linear),
        cmocka_unit_test(test_linear_tokens), cmocka_unit_test(test_linear_bgemm),
        cmocka_unit_test(test_attention),     cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_position_embedding), cmocka_unit_test(test_groupnorm_packed_io),
        cmocka_unit_test(test_gelu_linear_packed_io), cmocka_unit_test(test_gelu_linear_packed_grads),
        cmocka_unit_test(test_conv_hires_packed_grads), cmocka_unit_test(test_conv_packed_io),
        cmocka_unit_test(test_add_relu_packed_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
