/* Whole models against PyTorch: resnet20, unet and gpt (shapes reduced where noted in tests/reference/README.md),
 * built here through the public builder API, must give PyTorch's loss and gradients within 1e-4 relative.
 *
 * tests/reference/make_references.py wrote tests/reference/<model>.ref with PyTorch (float64). Nothing large is
 * shipped: both sides draw the parameters, inputs and targets from snug's counter-based RNG (core/rng.h), the
 * parameter tensor NAME as offset + (2u - 1) * scale, u = snug_rng_uniform(seed, fnv1a64(NAME), i), rounded
 * once to float; the file gives offset and scale, and per gradient tensor its L2 norm, sum, L1 norm, max-abs,
 * and 32 sampled elements.
 *
 * Criteria (tolerance 1e-4), each against the scale its rounding error is relative to:
 *   loss:               |a - b| <= 1e-4 |b|;
 *   norm:               |a - b| <= 1e-4 ||g||_2;
 *   sum:                |a - b| <= 1e-4 ||g||_1 (a sum's error scales with the sum of magnitudes, not with
 *                       the sum, which may cancel);
 *   sampled elements:   max |a_i - b_i| <= 1e-4 max|g| (infinity-norm relative: an element-wise ratio is
 *                       meaningless for elements that are zero up to rounding);
 *   zero tensors:       a gradient that is zero in exact arithmetic (a conv bias right before BatchNorm, whose
 *                       mean subtraction cancels it) is float32 rounding noise in snug: its norm must stay
 *                       <= 1e-6 of the whole model's gradient norm.
 * BatchNorm's running statistics after the forward pass are compared the same way. unet and gpt are also run in
 * micro-batches of 1 (accumulation is exact for GroupNorm and LayerNorm); resnet20 is not, because BatchNorm's
 * statistics are per micro-batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "snug.h"
#include "test_util.h"

#define TOL 1e-4
#define ZERO_TOL 1e-6
#define NSAMPLES 32
#define STREAM_INPUTS 1
#define STREAM_TARGETS 2
#define STREAM_IGNORE 3
#define IGNORE_ONE_IN 8

/* ---- reference files ---- */

typedef struct ref_tensor {
    char name[128];
    size_t numel;
    bool buffer;        /* a non-trainable buffer: its values are compared, not a gradient */
    bool zero;          /* a gradient that is zero in exact arithmetic */
    double offset, scale;
    double norm, sum, l1, maxabs;
    size_t idx[NSAMPLES];
    double val[NSAMPLES];
} ref_tensor;

typedef struct reference {
    uint64_t seed;
    size_t batch, items;
    double loss, grad_norm;
    uint64_t rng_seed, rng_stream, rng_counter, rng_bits;
    size_t n;
    ref_tensor t[256];
} reference;

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* The 32 sampled elements; element k sits at index snug_rng_bits(seed, fnv1a64(name) + 1, k) % numel. */
static bool parse_samples(const char *line, uint64_t seed, ref_tensor *t) {
    if (strncmp(line, "samples", 7) != 0 || t->numel == 0) return false;
    const char *p = line + 7;
    for (int k = 0; k < NSAMPLES; k++) {
        char *end;
        t->val[k] = strtod(p, &end);
        if (end == p) return false;
        t->idx[k] = (size_t)(snug_rng_bits(seed, fnv1a64(t->name) + 1, (uint64_t)k) % t->numel);
        p = end;
    }
    return true;
}

/* One record line; false for a malformed one. */
static bool parse_line(const char *line, reference *r, bool *want_samples) {
    ref_tensor *t = &r->t[r->n];
    int zero = 0;
    unsigned long long a, b, c, d;
    if (*want_samples) {
        if (!parse_samples(line, r->seed, &r->t[r->n - 1])) return false;
        *want_samples = false;
        return true;
    }
    if (line[0] == '#' || strncmp(line, "model ", 6) == 0 || line[0] == '\n') return true;
    if (sscanf(line, "seed %llu", &a) == 1) return r->seed = a, true;
    if (sscanf(line, "batch %llu", &a) == 1) return r->batch = a, true;
    if (sscanf(line, "items %llu", &a) == 1) return r->items = a, true;
    if (sscanf(line, "loss %lf", &r->loss) == 1) return true;
    if (sscanf(line, "grad_norm %lf", &r->grad_norm) == 1) return true;
    if (sscanf(line, "rng %llu %llu %llu %llu", &a, &b, &c, &d) == 4) {
        r->rng_seed = a, r->rng_stream = b, r->rng_counter = c, r->rng_bits = d;
        return true;
    }
    if (r->n == sizeof r->t / sizeof r->t[0]) return false;
    if (sscanf(line, "param %127s %llu %lf %lf %lf %lf %lf %lf %d", t->name, &a, &t->offset, &t->scale, &t->norm,
               &t->sum, &t->l1, &t->maxabs, &zero) == 9) {
        t->numel = a, t->zero = zero != 0, t->buffer = false;
    } else if (sscanf(line, "buffer %127s %llu %lf %lf %lf %lf", t->name, &a, &t->norm, &t->sum, &t->l1,
                      &t->maxabs) == 6) {
        t->numel = a, t->buffer = true;
    } else {
        return false;
    }
    r->n++;
    *want_samples = true;
    return true;
}

static reference *load_reference(const char *model) {
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/tests/reference/%s.ref", SNUG_SOURCE_DIR, model);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s: regenerate it with tests/reference/make_references.py", path);
    reference *r = calloc(1, sizeof *r);
    assert_non_null(r);
    bool want_samples = false;
    size_t lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!parse_line(line, r, &want_samples)) {
            fclose(f);
            fail_msg("%s:%zu: malformed record: %.60s", path, lineno, line);
        }
    }
    fclose(f);
    if (want_samples || r->n == 0 || r->batch == 0 || r->items == 0)
        fail_msg("%s: truncated (%zu tensors, batch %zu, items %zu)", path, r->n, r->batch, r->items);
    /* The script's port of the RNG must draw what the engine draws, or nothing below can match. */
    assert_true(snug_rng_bits(r->rng_seed, r->rng_stream, r->rng_counter) == r->rng_bits);
    return r;
}

/* ---- identical parameters and data on both sides ---- */

/* 2u - 1 in [-1, 1): exact in float (u has 24 bits). */
static double symmetric(uint64_t seed, uint64_t stream, uint64_t counter) {
    return 2.0 * (double)snug_rng_uniform(seed, stream, counter) - 1.0;
}

/* Overwrites every trainable parameter with the reference's draw; checks names and sizes against the file. */
static void fill_params(snug_trainer *tr, const reference *r) {
    assert_int_equal(snug_trainer_param_count(tr), r->n);
    for (size_t i = 0; i < r->n; i++) {
        const ref_tensor *t = &r->t[i];
        size_t numel;
        float *v, *g;
        const char *name = snug_trainer_param(tr, i, &numel, &v, &g);
        if (strcmp(name, t->name) != 0 || numel != t->numel || (g == NULL) != t->buffer)
            fail_msg("parameter %zu: snug has %s (%zu, %s), the reference %s (%zu, %s)", i, name, numel,
                     g ? "trainable" : "buffer", t->name, t->numel, t->buffer ? "buffer" : "trainable");
        if (t->buffer) continue; /* running statistics keep their defaults (0 and 1), as in PyTorch */
        const uint64_t stream = fnv1a64(name);
        for (size_t j = 0; j < numel; j++) v[j] = (float)(t->offset + symmetric(r->seed, stream, j) * t->scale);
    }
}

static int32_t draw_target(uint64_t seed, size_t i, size_t classes, bool ignore_some) {
    if (ignore_some && snug_rng_bits(seed, STREAM_IGNORE, i) % IGNORE_ONE_IN == 0) return SNUG_IGNORE_TARGET;
    return (int32_t)(snug_rng_bits(seed, STREAM_TARGETS, i) % classes);
}

/* The items a loss counts (PyTorch's mean divides by them, snug's sum / N too): the targets not ignored. */
static size_t count_items(const int32_t *y, size_t n) {  // y: (n)
    size_t items = 0;
    for (size_t i = 0; i < n; i++) items += y[i] != SNUG_IGNORE_TARGET;
    return items;
}

/* A dataset of per-item targets (pixels, tokens) over arrays: what snug_dataset_from_memory does for one label
 * per sample. */
typedef struct items_impl {
    float *x;    /* (n, sample numel) */
    int32_t *y;  /* (n, targets per sample) */
} items_impl;

static void items_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, numel)
    const items_impl *m = ds->impl;
    for (size_t i = 0; i < n; i++)
        memcpy(x + i * ds->sample_numel, m->x + idx[i] * ds->sample_numel, ds->sample_numel * sizeof *x);
}

static void items_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n, tps)
    const items_impl *m = ds->impl;
    const size_t k = ds->targets_per_sample;
    for (size_t i = 0; i < n; i++) memcpy(y + i * k, m->y + idx[i] * k, k * sizeof *y);
}

static void items_destroy(snug_dataset *ds) {
    items_impl *m = ds->impl;
    free(m->x);
    free(m->y);
    free(m);
}

static const dataset_ops items_ops = {.fill_inputs = items_fill_inputs, .fill_targets = items_fill_targets,
                                      .destroy = items_destroy};

/* n samples of `shape`, one target per element of the last `targets` positions; x and y are taken over. */
static snug_dataset *items_dataset(size_t n, snug_shape shape, size_t numel, size_t classes, size_t targets,
                                   float *x, int32_t *y) {
    snug_dataset *ds = calloc(1, sizeof *ds);
    items_impl *m = calloc(1, sizeof *m);
    assert_non_null(ds);
    assert_non_null(m);
    *m = (items_impl){.x = x, .y = y};
    *ds = (snug_dataset){.ops = &items_ops, .n = n, .sample_shape = shape, .sample_numel = numel,
                         .classes = classes, .targets_per_sample = targets, .impl = m};
    return ds;
}

static snug_dataset *image_dataset(const reference *r, size_t c, size_t h, size_t w, size_t classes) {
    const size_t n = r->batch, numel = n * c * h * w;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < numel; i++) x[i] = (float)symmetric(r->seed, STREAM_INPUTS, i);
    for (size_t i = 0; i < n; i++) y[i] = draw_target(r->seed, i, classes, false);
    assert_int_equal(count_items(y, n), r->items);
    snug_dataset *ds;
    snug_error err;
    if (snug_dataset_from_memory(x, y, n, c, h, w, classes, &ds, &err) != SNUG_OK) fail_msg("%s", err.message);
    free(x);
    free(y);
    return ds;
}

static snug_dataset *pixel_dataset(const reference *r, size_t h, size_t w, size_t classes) {
    const size_t n = r->batch, numel = n * h * w;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(numel * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < numel; i++) {
        x[i] = (float)symmetric(r->seed, STREAM_INPUTS, i);
        y[i] = draw_target(r->seed, i, classes, true);
    }
    assert_int_equal(count_items(y, numel), r->items);
    return items_dataset(n, (snug_shape){.rank = 3, .dims = {1, h, w}}, h * w, classes, h * w, x, y);
}

static snug_dataset *token_dataset(const reference *r, size_t tokens, size_t vocab) {
    const size_t numel = r->batch * tokens;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(numel * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < numel; i++) {
        x[i] = (float)(snug_rng_bits(r->seed, STREAM_INPUTS, i) % vocab);
        y[i] = draw_target(r->seed, i, vocab, true);
    }
    assert_int_equal(count_items(y, numel), r->items);
    return items_dataset(r->batch, (snug_shape){.rank = 1, .dims = {tokens}}, tokens, vocab, tokens, x, y);
}

/* ---- the models (make_references.py defines the same in PyTorch) ---- */

static const char *nm(char *buf, const char *prefix, const char *suffix) {
    snprintf(buf, 64, "%s.%s", prefix, suffix);
    return buf;
}

static snug_tensor conv_bn(snug_graph *g, const char *block, const char *conv, const char *bn, snug_tensor x,
                           size_t co, size_t k, size_t stride, size_t pad) {
    char a[64], b[64];
    x = snug_conv2d(g, nm(a, block, conv), x, co, k, stride, pad);
    return snug_batchnorm2d(g, nm(b, block, bn), x, 1e-5f, 0.1f);
}

static snug_graph *resnet20(void) {
    snug_graph *g = snug_graph_new("resnet20");
    snug_tensor h = snug_input(g, "input", 3, 32, 32);
    h = snug_relu(g, "relu1", snug_batchnorm2d(g, "bn1", snug_conv2d(g, "conv1", h, 16, 3, 1, 1), 1e-5f, 0.1f));
    size_t cin = 16;
    for (int s = 1; s <= 3; s++) {
        const size_t co = (size_t)8 << s;
        for (int b = 1; b <= 3; b++) {
            char blk[32], n1[64], n2[64], n3[64];
            snprintf(blk, sizeof blk, "s%db%d", s, b);
            const size_t stride = b == 1 && s > 1 ? 2 : 1;
            snug_tensor y = snug_relu(g, nm(n1, blk, "relu1"), conv_bn(g, blk, "conv1", "bn1", h, co, 3, stride, 1));
            y = conv_bn(g, blk, "conv2", "bn2", y, co, 3, 1, 1);
            if (stride != 1 || cin != co) h = conv_bn(g, blk, "down", "down_bn", h, co, 1, stride, 0);
            h = snug_relu(g, nm(n3, blk, "relu2"), snug_add(g, nm(n2, blk, "add"), y, h));
            cin = co;
        }
    }
    h = snug_linear(g, "fc", snug_global_avgpool(g, "pool", h), 10);
    snug_softmax_cross_entropy(g, "loss", h);
    return g;
}

static snug_tensor double_conv(snug_graph *g, const char *blk, snug_tensor h, size_t c) {
    char a[64];
    for (int i = 1; i <= 2; i++) {
        char conv[16], gn[16], relu[16];
        snprintf(conv, sizeof conv, "conv%d", i);
        snprintf(gn, sizeof gn, "gn%d", i);
        snprintf(relu, sizeof relu, "relu%d", i);
        h = snug_conv2d(g, nm(a, blk, conv), h, c, 3, 1, 1);
        h = snug_groupnorm(g, nm(a, blk, gn), h, 8, 1e-5f);
        h = snug_relu(g, nm(a, blk, relu), h);
    }
    return h;
}

#define UNET_SIZE 64

static snug_graph *unet(void) {
    snug_graph *g = snug_graph_new("unet");
    snug_tensor h = snug_input(g, "input", 1, UNET_SIZE, UNET_SIZE), skips[4];
    char a[64];
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "enc%d", i + 1);
        h = skips[i] = double_conv(g, a, h, (size_t)16 << i);
        snprintf(a, sizeof a, "pool%d", i + 1);
        h = snug_maxpool2d(g, a, h, 2, 2);
    }
    h = double_conv(g, "mid", h, 256);
    for (int i = 3; i >= 0; i--) {
        const size_t c = (size_t)16 << i;
        snprintf(a, sizeof a, "up%d", i + 1);
        snug_tensor up = snug_conv_transpose2d(g, a, h, c, 2, 2, 0);
        snprintf(a, sizeof a, "cat%d", i + 1);
        h = snug_concat(g, a, skips[i], up);
        snprintf(a, sizeof a, "dec%d", i + 1);
        h = double_conv(g, a, h, c);
    }
    snug_softmax_cross_entropy(g, "loss", snug_conv2d(g, "head", h, 2, 1, 1, 0));
    return g;
}

#define GPT_VOCAB 256
#define GPT_CONTEXT 256
#define GPT_LAYERS 4
#define GPT_HEADS 4
#define GPT_D 256

static snug_graph *gpt(void) {
    snug_graph *g = snug_graph_new("gpt");
    snug_tensor h = snug_embedding(g, "wte", snug_input_tokens(g, "tokens", GPT_CONTEXT), GPT_VOCAB, GPT_D);
    h = snug_position_embedding(g, "wpe", h, GPT_CONTEXT);
    for (int l = 0; l < GPT_LAYERS; l++) {
        char blk[16], a[64];
        snprintf(blk, sizeof blk, "h%d", l);
        snug_tensor y = snug_layernorm(g, nm(a, blk, "ln1"), h, 1e-5f);
        y = snug_linear(g, nm(a, blk, "qkv"), y, 3 * GPT_D);
        y = snug_causal_self_attention(g, nm(a, blk, "attn"), y, GPT_HEADS);
        y = snug_linear(g, nm(a, blk, "proj"), y, GPT_D);
        h = snug_add(g, nm(a, blk, "add1"), h, y);
        y = snug_layernorm(g, nm(a, blk, "ln2"), h, 1e-5f);
        y = snug_gelu(g, nm(a, blk, "gelu"), snug_linear(g, nm(a, blk, "fc"), y, 4 * GPT_D));
        y = snug_linear(g, nm(a, blk, "fc2"), y, GPT_D);
        h = snug_add(g, nm(a, blk, "add2"), h, y);
    }
    h = snug_linear_tied(g, "head", snug_layernorm(g, "ln_f", h, 1e-5f), "wte");
    snug_softmax_cross_entropy(g, "loss", h);
    return g;
}

/* ---- comparison ---- */

typedef struct worst {
    double loss, norm, sum, sample, zero; /* the largest error of each kind, over its own scale */
} worst;

/* Compares one tensor (a gradient, or a buffer's values) with its reference; prints a line like llm.c. */
static bool compare_tensor(const ref_tensor *t, const float *a, double grad_norm, worst *w) {
    double sq = 0, sum = 0, maxdiff = 0;
    for (size_t j = 0; j < t->numel; j++) sq += (double)a[j] * a[j], sum += a[j];
    const double norm = sqrt(sq);
    for (int k = 0; k < NSAMPLES; k++) maxdiff = fmax(maxdiff, fabs(a[t->idx[k]] - t->val[k]));
    if (t->zero) {
        const double e = norm / grad_norm;
        w->zero = fmax(w->zero, e);
        printf("#   %-22s zero in exact arithmetic: |g| %.3g = %.3g of |grad|%s\n", t->name, norm, e,
               e <= ZERO_TOL ? "" : "  NOT OK");
        return e <= ZERO_TOL;
    }
    const double en = fabs(norm - t->norm) / t->norm, es = fabs(sum - t->sum) / t->l1, ex = maxdiff / t->maxabs;
    w->norm = fmax(w->norm, en);
    w->sum = fmax(w->sum, es);
    w->sample = fmax(w->sample, ex);
    const bool ok = en <= TOL && es <= TOL && ex <= TOL;
    printf("#   %-22s %-7s maxdiff %.3e (%.2e of max|%s| %.3e)  norm %.2e  sum %.2e%s\n", t->name,
           t->buffer ? "value" : "grad", maxdiff, ex, t->buffer ? "v" : "g", t->maxabs, en, es, ok ? "" : "  NOT OK");
    return ok;
}

/* Builds the trainer at micro-batch m, draws the parameters, computes one global batch's gradient and compares
 * loss, gradients and buffers with the reference. */
static void check_model(snug_graph *g, const snug_dataset *ds, const reference *r, size_t micro_batch) {
    snug_error err;
    if (snug_graph_check(g, &err) != SNUG_OK) fail_msg("building %s: %s", snug_graph_name(g), err.message);
    snug_train_config cfg = snug_train_config_default();
    cfg.shuffle = false;
    snug_trainer *tr;
    if (trainer_simple(g, r->batch, micro_batch ? micro_batch : r->batch, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    fill_params(tr, r);
    size_t idx[64];
    assert_true(r->batch <= sizeof idx / sizeof idx[0]);
    for (size_t i = 0; i < r->batch; i++) idx[i] = i;
    double loss;
    if (snug_trainer_gradients(tr, ds, idx, r->batch, &loss, &err) != SNUG_OK) fail_msg("%s", err.message);

    printf("# %s, batch %zu in micro-batches of %zu: loss %.9f, PyTorch %.9f (mean over %zu items)\n",
           snug_graph_name(g), r->batch, micro_batch, loss, r->loss, r->items);
    worst w = {.loss = fabs(loss - r->loss) / fabs(r->loss)};
    bool ok = w.loss <= TOL;
    for (size_t i = 0; i < r->n; i++) {
        float *v, *gr;
        snug_trainer_param(tr, i, NULL, &v, &gr);
        ok &= compare_tensor(&r->t[i], r->t[i].buffer ? v : gr, r->grad_norm, &w);
    }
    printf("# %s micro-batch %zu: max relative differences: loss %.2e, gradient elements %.2e, norms %.2e, "
           "sums %.2e, zero gradients %.2e of |grad|: %s\n", snug_graph_name(g), micro_batch, w.loss, w.sample,
           w.norm, w.sum, w.zero, ok ? "OK" : "NOT OK");
    trainer_done(tr);
    assert_true(ok);
}

static void resnet20_matches_pytorch(void **state) {
    (void)state;
    reference *r = load_reference("resnet20");
    snug_graph *g = resnet20();
    snug_dataset *ds = image_dataset(r, 3, 32, 32, 10);
    /* Only the full batch: BatchNorm normalises with each micro-batch's statistics. */
    check_model(g, ds, r, r->batch);
    snug_dataset_free(ds);
    snug_graph_free(g);
    free(r);
}

static void unet_matches_pytorch(void **state) {
    (void)state;
    reference *r = load_reference("unet");
    snug_graph *g = unet();
    snug_dataset *ds = pixel_dataset(r, UNET_SIZE, UNET_SIZE, 2);
    check_model(g, ds, r, r->batch);
    check_model(g, ds, r, 1);
    snug_dataset_free(ds);
    snug_graph_free(g);
    free(r);
}

static void gpt_matches_pytorch(void **state) {
    (void)state;
    reference *r = load_reference("gpt");
    snug_graph *g = gpt();
    snug_dataset *ds = token_dataset(r, GPT_CONTEXT, GPT_VOCAB);
    check_model(g, ds, r, r->batch);
    check_model(g, ds, r, 1);
    snug_dataset_free(ds);
    snug_graph_free(g);
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resnet20_matches_pytorch),
        cmocka_unit_test(unet_matches_pytorch),
        cmocka_unit_test(gpt_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
