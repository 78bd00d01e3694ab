/* Gradient accumulation is exact: for mlp and cnn at global batch 32, every split into micro-batches
 * (32x1, 8x4, 4x8, 1x32 and the uneven 5+5+5+5+5+5+2) gives the full-batch gradient, and 20 optimizer steps
 * (SGD with momentum, AdamW) give the full-batch parameters. A small GPT over padded sequences of different
 * lengths (ragged token counts across micro-batches) gives the full-batch gradient and counts only real tokens.
 *
 * Error measures, the worst over all parameter tensors: for gradients, max_i |a_i - b_i| / max_i |b_i| (the
 * infinity-norm relative error) <= 1e-5; for parameters after 20 steps, ||a - b||_2 / ||b||_2 <= 1e-4 (and
 * the infinity-norm error too for SGD). A plain element-wise ratio is meaningless for values that are zero up to
 * rounding (a cancellation leaves 1e-12 in one order of summation and -3e-12 in another). */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "train/trainer.h" /* the optimizer state, to start one trainer where another stands */
#include "snug.h"
#include "test_util.h"

#define BATCH 32
#define SAMPLES 160

typedef struct fixture {
    snug_dataset *ds;
} fixture;

/* Random images (roughly unit variance, like normalised MNIST) labelled by a fixed random linear teacher, so the
 * task is learnable like a real one. (Random labels make the network memorise noise: its training dynamics are
 * then chaotic, and a single ReLU whose input rounds to the other side of zero in one summation order grows
 * into a large difference within 20 steps, whatever the accumulation does.) */
static int make_data(void **state) {
    static fixture f;
    size_t numel = (size_t)SAMPLES * 28 * 28;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(SAMPLES * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < numel; i++) x[i] = 3.4641f * (snug_rng_uniform(7, 1, i) - 0.5f);
    for (size_t i = 0; i < SAMPLES; i++) {
        double best = -1e300;
        for (int32_t c = 0; c < 10; c++) {
            double score = 0;
            for (size_t j = 0; j < 28 * 28; j++)
                score += (snug_rng_uniform(7, 2, (size_t)c * 784 + j) - 0.5) * x[i * 784 + j];
            if (score > best) best = score, y[i] = c;
        }
    }
    snug_error err;
    assert_int_equal(snug_dataset_from_memory(x, y, SAMPLES, 1, 28, 28, 10, &f.ds, &err), SNUG_OK);
    free(x);
    free(y);
    *state = &f;
    return 0;
}

static int free_data(void **state) {
    snug_dataset_free(((fixture *)*state)->ds);
    return 0;
}

static snug_trainer *new_trainer(snug_graph *g, size_t micro_batch, snug_optim_kind kind) {
    snug_train_config cfg = snug_train_config_default();
    cfg.seed = 3;
    cfg.max_steps = 20;
    cfg.optim.kind = kind;
    cfg.optim.lr = kind == SNUG_OPTIM_SGD ? 0.05f : 1e-3f;
    cfg.optim.weight_decay = 0.01f;
    snug_trainer *tr;
    snug_error err;
    snug_status s = trainer_simple(g, BATCH, micro_batch ? micro_batch : BATCH, &cfg, &tr, &err);
    if (s != SNUG_OK) fail_msg("%s", err.message);
    return tr;
}

typedef struct rel_error {
    double inf;  /* max_i |a_i - b_i| / max_i |b_i| */
    double l2;   /* ||a - b||_2 / ||b||_2 */
} rel_error;

/* The worst relative errors over all parameter tensors, of values (grads = false) or gradients. */
static rel_error max_rel_error(const snug_trainer *a, const snug_trainer *b, bool grads) {
    rel_error worst = {0, 0};
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) {
        size_t n;
        float *av, *ag, *bv, *bg;
        snug_trainer_param(a, i, &n, &av, &ag);
        snug_trainer_param(b, i, NULL, &bv, &bg);
        const float *x = grads ? ag : av, *ref = grads ? bg : bv;
        double diff = 0, scale = 0, sq = 0, sqref = 0;
        for (size_t j = 0; j < n; j++) {
            double d = fabs((double)x[j] - ref[j]);
            diff = fmax(diff, d);
            scale = fmax(scale, fabs((double)ref[j]));
            sq += d * d;
            sqref += (double)ref[j] * ref[j];
        }
        worst.inf = fmax(worst.inf, scale > 0 ? diff / scale : diff);
        worst.l2 = fmax(worst.l2, sqref > 0 ? sqrt(sq / sqref) : sqrt(sq));
    }
    return worst;
}

static void batch_indices(size_t step, size_t *idx) {
    for (size_t i = 0; i < BATCH; i++) idx[i] = (step * BATCH + i * 7) % SAMPLES;
}

/* A residual block with dropout: masks are keyed by each element's position in the global batch, so the split
 * into micro-batches does not change them and accumulation stays exact. */
static snug_graph *dropout_model(void) {
    snug_graph *g = snug_graph_new("dropout");
    snug_tensor x = snug_linear(g, "in", snug_flatten(g, "flat", snug_input(g, "input", 1, 28, 28)), 64);
    snug_tensor h = snug_dropout(g, "drop", snug_relu(g, "relu", snug_linear(g, "fc", x, 64)), 0.3f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", snug_add(g, "add", x, h), 10));
    return g;
}

static void check_gradients(const snug_dataset *ds, const char *model) {
    static const size_t splits[] = {8, 4, 1, 5};
    snug_graph *g = strcmp(model, "dropout") == 0 ? dropout_model() : model_named(model, NULL);
    assert_non_null(g);
    size_t idx[BATCH];
    batch_indices(0, idx);
    snug_trainer *full = new_trainer(g, BATCH, SNUG_OPTIM_SGD);
    double loss_full, loss;
    snug_error err;
    assert_int_equal(snug_trainer_gradients(full, ds, idx, BATCH, &loss_full, &err), SNUG_OK);
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        snug_trainer *tr = new_trainer(g, splits[s], SNUG_OPTIM_SGD);
        assert_int_equal(snug_trainer_gradients(tr, ds, idx, BATCH, &loss, &err), SNUG_OK);
        rel_error e = max_rel_error(tr, full, true);
        printf("# %s micro-batch %zu: gradient max rel error %.3g (l2 %.3g), loss %.9f vs %.9f\n", model,
               splits[s], e.inf, e.l2, loss, loss_full);
        assert_true(e.inf <= 1e-5);
        assert_true(fabs(loss - loss_full) <= 1e-6 * fabs(loss_full));
        trainer_done(tr);
    }
    trainer_done(full);
    snug_graph_free(g);
}

/* A small GPT (the gpt model's layers at context 16, d 32, 2 heads) over padded sequences of different lengths:
 * sample i holds 1 + 5i mod 16 real tokens, the rest is padding (input 0, target -1, ignored). The micro-batches
 * of a split then hold very different token counts; the loss must still be the mean over all real tokens of the
 * global batch (N counted before the first forward), never a mean of per-micro-batch means. */
#define SEQ 16
static snug_graph *small_gpt(void) {
    snug_graph *g = snug_graph_new("small-gpt");
    snug_tensor x = snug_input_tokens(g, "input", SEQ);
    x = snug_position_embedding(g, "wpe", snug_embedding(g, "wte", x, 256, 32), SEQ);
    snug_tensor h = snug_linear(g, "qkv", snug_layernorm(g, "ln1", x, 1e-5f), 96);
    x = snug_add(g, "add1", x, snug_linear(g, "proj", snug_causal_self_attention(g, "attn", h, 2), 32));
    h = snug_gelu(g, "gelu", snug_linear(g, "fc", snug_layernorm(g, "ln2", x, 1e-5f), 128));
    x = snug_add(g, "add2", x, snug_linear(g, "fc2", h, 32));
    snug_softmax_cross_entropy(g, "loss", snug_linear_tied(g, "head", snug_layernorm(g, "ln_f", x, 1e-5f), "wte"));
    return g;
}

static snug_dataset *padded_sequences(size_t *real_tokens) {
    float x[BATCH * SEQ];
    int32_t y[BATCH * SEQ];
    *real_tokens = 0;
    for (size_t i = 0; i < BATCH; i++) {
        const size_t len = 1 + (5 * i) % SEQ;
        for (size_t t = 0; t < SEQ; t++) {
            const bool real = t < len;
            x[i * SEQ + t] = real ? (float)(snug_rng_bits(11, 1, i * SEQ + t) % 256) : 0.0f;
            y[i * SEQ + t] = real ? (int32_t)(snug_rng_bits(11, 2, i * SEQ + t) % 256) : -1;
            *real_tokens += real;
        }
    }
    snug_dataset *ds = NULL;
    snug_error err;
    const snug_shape tokens = {.rank = 1, .dims = {SEQ}};
    assert_int_equal(snug_dataset_from_arrays(x, tokens, y, SEQ, BATCH, 256, &ds, &err), SNUG_OK);
    return ds;
}

static void gpt_padded_sequences(void **state) {
    (void)state;
    static const size_t splits[] = {8, 5, 3, 1};
    size_t real;
    snug_dataset *ds = padded_sequences(&real);
    snug_graph *g = small_gpt();
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    size_t idx[BATCH];
    for (size_t i = 0; i < BATCH; i++) idx[i] = i;
    snug_trainer *full = new_trainer(g, BATCH, SNUG_OPTIM_ADAMW);
    snug_step_stats st;
    snug_error err;
    double loss_full, loss;
    assert_int_equal(snug_trainer_gradients(full, ds, idx, BATCH, &loss_full, &err), SNUG_OK);
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        snug_trainer *tr = new_trainer(g, splits[s], SNUG_OPTIM_ADAMW);
        assert_int_equal(snug_trainer_gradients(tr, ds, idx, BATCH, &loss, &err), SNUG_OK);
        rel_error e = max_rel_error(tr, full, true);
        printf("# small gpt, %zu real tokens of %d, micro-batch %zu: gradient max rel error %.3g, loss %.9f vs "
               "%.9f\n", real, BATCH * SEQ, splits[s], e.inf, loss, loss_full);
        assert_true(e.inf <= 1e-5);
        assert_true(fabs(loss - loss_full) <= 1e-6 * fabs(loss_full));
        /* one step: the window's item count is the real tokens of the whole batch */
        assert_int_equal(snug_trainer_step(tr, ds, idx, BATCH, &st, &err), SNUG_OK);
        assert_int_equal(st.items, real);
        trainer_done(tr);
    }
    trainer_done(full);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* Starts b where a stands: parameters, optimizer state and counters. */
static void sync_trainer(snug_trainer *b, const snug_trainer *a) {
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) {
        size_t n;
        float *av, *bv;
        snug_trainer_param(a, i, &n, &av, NULL);
        snug_trainer_param(b, i, NULL, &bv, NULL);
        memcpy(bv, av, n * sizeof *av);
    }
    const size_t state = (size_t)optim_state_slots(&a->opt.cfg) * a->opt.n;
    if (state) memcpy(b->opt.state, a->opt.state, state * sizeof(float));
    b->opt.t = a->opt.t;
    b->step = a->step;
    b->windows = a->windows;
}

/* Twenty optimizer steps of the full batch against the splits 8, 5 (uneven: 5+5+5+5+5+5+2) and 1.
 *
 * free_run: each trainer follows its own trajectory, and the parameters after 20 steps must agree. That holds
 * only while no ReLU input lies within rounding of zero: one that takes the other side in one summation order
 * passes or stops a whole gradient, and the next steps amplify it. The cnn computes 1.2M ReLU inputs a step,
 * and the order differs with the BLAS kernel the machine runs: its free runs agreed to 2.5e-7 with OpenBLAS's
 * Cooperlake kernel and drifted to 2.5e-2 with its Haswell kernel (a flip at step 3: 5.5e-8 -> 1.1e-5, then
 * growth), with correct accumulation in both. So a model with that many ReLUs is checked forced instead: every
 * split trainer starts each step where the full-batch trainer stands (parameters, optimizer state, counters),
 * and that step's gradients and parameter update must agree: accumulation, the uneven last micro-batch, the
 * update and the zeroed gradients of the step before are checked at 20 points of a real training run. */
static void check_training(const snug_dataset *ds, const char *model, snug_optim_kind kind, bool free_run) {
    static const size_t splits[] = {8, 5, 1};
    snug_graph *g = model_named(model, NULL);
    snug_trainer *full = new_trainer(g, BATCH, kind);
    snug_trainer *parts[3];
    for (int s = 0; s < 3; s++) parts[s] = new_trainer(g, splits[s], kind);
    size_t idx[BATCH];
    snug_step_stats st;
    snug_error err;
    rel_error worst[3] = {{0, 0}, {0, 0}, {0, 0}};
    for (size_t step = 0; step < 20; step++) {
        batch_indices(step, idx);
        if (!free_run)
            for (int s = 0; s < 3; s++) sync_trainer(parts[s], full);
        for (int s = 0; s < 3; s++) assert_int_equal(snug_trainer_step(parts[s], ds, idx, BATCH, &st, &err), SNUG_OK);
        assert_int_equal(snug_trainer_step(full, ds, idx, BATCH, &st, &err), SNUG_OK);
        assert_false(st.skipped);
        for (int s = 0; s < 3 && !free_run; s++) {
            rel_error e = max_rel_error(parts[s], full, false);
            worst[s].l2 = fmax(worst[s].l2, e.l2);
            worst[s].inf = fmax(worst[s].inf, e.inf);
        }
    }
    for (int s = 0; s < 3; s++) {
        rel_error e = free_run ? max_rel_error(parts[s], full, false) : worst[s];
        printf("# %s %s micro-batch %zu: parameters after %s rel error l2 %.3g (max %.3g)\n", model,
               kind == SNUG_OPTIM_SGD ? "sgd" : "adamw", splits[s],
               free_run ? "20 steps" : "each of 20 forced steps, the worst", e.l2, e.inf);
        /* Element-wise, AdamW divides each gradient by its own running RMS, so an element whose gradient is
         * a near-cancelling sum (rounding-level, order-dependent) moves by up to lr per step in either
         * run; SGD does not amplify, so it is held to the element-wise bound too. Winograd's weight gradient
         * (the cnn's conv2) rounds such a tap relative to the transformed sums it is the difference of, not
         * to its own terms: AdamW's first steps turn that into 2-3e-6 of conv2's weights (2.4e-7 with the
         * direct kernel), hence its own l2 bound; SGD's forced runs stay at 5.6e-8. */
        assert_true(e.l2 <= (free_run ? 1e-4 : kind == SNUG_OPTIM_SGD ? 1e-6 : 1e-5));
        if (kind == SNUG_OPTIM_SGD) assert_true(e.inf <= (free_run ? 1e-4 : 1e-6));
        else assert_true(e.inf <= 2e-3);
        trainer_done(parts[s]);
    }
    trainer_done(full);
    snug_graph_free(g);
}

static void mlp_gradients(void **state) { check_gradients(((fixture *)*state)->ds, "mlp"); }
static void cnn_gradients(void **state) { check_gradients(((fixture *)*state)->ds, "cnn"); }
static void dropout_gradients(void **state) { check_gradients(((fixture *)*state)->ds, "dropout"); }
static void mlp_sgd_steps(void **state) { check_training(((fixture *)*state)->ds, "mlp", SNUG_OPTIM_SGD, true); }
static void mlp_adamw_steps(void **state) { check_training(((fixture *)*state)->ds, "mlp", SNUG_OPTIM_ADAMW, true); }
static void mlp_sgd_forced(void **state) { check_training(((fixture *)*state)->ds, "mlp", SNUG_OPTIM_SGD, false); }
static void cnn_sgd_forced(void **state) { check_training(((fixture *)*state)->ds, "cnn", SNUG_OPTIM_SGD, false); }
static void cnn_adamw_forced(void **state) { check_training(((fixture *)*state)->ds, "cnn", SNUG_OPTIM_ADAMW, false); }

/* The accumulator after each micro-batch holds exactly the partial sum: after the first micro-batch of 8 out
 * of 32, the gradient equals the full-batch gradient of those 8 samples scaled by 8/32. */
static void partial_sums(void **state) {
    const snug_dataset *ds = ((fixture *)*state)->ds;
    snug_graph *g = model_named("mlp", NULL);
    size_t idx[BATCH];
    batch_indices(0, idx);
    snug_trainer *a = new_trainer(g, 8, SNUG_OPTIM_SGD), *b = new_trainer(g, 8, SNUG_OPTIM_SGD);
    double loss;
    snug_error err;
    assert_int_equal(snug_trainer_gradients(a, ds, idx, 8, &loss, &err), SNUG_OK);
    assert_int_equal(snug_trainer_gradients(b, ds, idx, BATCH, &loss, &err), SNUG_OK);
    /* b holds sum over 32 / 32; recompute the first 8 of them in b scaled by 1/32 by hand from a (1/8). */
    snug_trainer *c = new_trainer(g, 8, SNUG_OPTIM_SGD);
    size_t rest[BATCH - 8];
    memcpy(rest, idx + 8, sizeof rest);
    assert_int_equal(snug_trainer_gradients(c, ds, rest, BATCH - 8, &loss, &err), SNUG_OK);
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) {
        size_t n;
        float *ga, *gb, *gc;
        snug_trainer_param(a, i, &n, NULL, &ga);
        snug_trainer_param(b, i, NULL, NULL, &gb);
        snug_trainer_param(c, i, NULL, NULL, &gc);
        double diff = 0, scale = 0;
        for (size_t j = 0; j < n; j++) {
            double combined = ga[j] * (8.0 / BATCH) + gc[j] * ((BATCH - 8.0) / BATCH);
            diff = fmax(diff, fabs(combined - gb[j]));
            scale = fmax(scale, fabs((double)gb[j]));
        }
        assert_true(diff <= 1e-5 * scale + 1e-12);
    }
    trainer_done(a);
    trainer_done(b);
    trainer_done(c);
    snug_graph_free(g);
}

/* A window without counted items after a step contributes nothing: the gradients the step left for their first
 * writer (a linear layer's, op_call.dw_fresh) are not read as this window's, since no backward writes them. */
static void empty_window_after_step(void **state) {
    const snug_dataset *ds = ((fixture *)*state)->ds;
    snug_graph *g = model_named("mlp", NULL);
    enum { EMPTY = 8 };
    float *x = calloc((size_t)EMPTY * 28 * 28, sizeof *x);
    int32_t y[EMPTY];
    assert_non_null(x);
    for (int i = 0; i < EMPTY; i++) y[i] = SNUG_IGNORE_TARGET;
    snug_dataset *ignored;
    snug_error err;
    assert_int_equal(snug_dataset_from_memory(x, y, EMPTY, 1, 28, 28, 10, &ignored, &err), SNUG_OK);
    size_t idx[BATCH], none[EMPTY];
    batch_indices(0, idx);
    for (size_t i = 0; i < EMPTY; i++) none[i] = i;
    snug_trainer *tr = new_trainer(g, 8, SNUG_OPTIM_SGD);
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, idx, BATCH, &st, &err), SNUG_OK);
    assert_true(st.grad_norm > 0.0f);
    assert_int_equal(snug_trainer_step(tr, ignored, none, EMPTY, &st, &err), SNUG_OK);
    assert_int_equal(st.items, 0);
    assert_true(st.grad_norm == 0.0f);
    trainer_done(tr);
    snug_dataset_free(ignored);
    free(x);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_gradients),   cmocka_unit_test(cnn_gradients),   cmocka_unit_test(dropout_gradients),
        cmocka_unit_test(partial_sums),      cmocka_unit_test(gpt_padded_sequences),
        cmocka_unit_test(mlp_sgd_steps),   cmocka_unit_test(mlp_adamw_steps), cmocka_unit_test(mlp_sgd_forced),
        cmocka_unit_test(cnn_sgd_forced),  cmocka_unit_test(cnn_adamw_forced), cmocka_unit_test(empty_window_after_step),
    };
    return cmocka_run_group_tests(tests, make_data, free_data);
}
