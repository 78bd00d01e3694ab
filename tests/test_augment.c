/* Augmentation (snug_augment): the text form; flip and shift done in place equal a plain gather from a copy, for
 * every shift (past the whole image included); per-pixel targets move with their pixels; the draws are a pure
 * function of (seed, epoch, sample) with the right distribution; the jitter is the pixel-unit formula; in a
 * trainer, augmentation does not depend on the micro-batch split, reading ahead changes no bit and misses no
 * micro-batch, and a data set that is not images is refused. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "data/augment.h"
#include "snug.h"
#include "test_util.h"

static void text_form_round_trips_and_refuses(void **state) {
    (void)state;
    snug_augment a;
    char buf[96];
    snug_error err;
    assert_int_equal(snug_parse_augment("crop:4,flip,contrast:0.1,brightness:0.2", &a, &err), SNUG_OK);
    assert_true(a.flip);
    assert_int_equal(a.crop_pad, 4);
    assert_string_equal(snug_augment_format(&a, buf, sizeof buf), "flip,crop:4,brightness:0.2,contrast:0.1");
    assert_int_equal(snug_parse_augment(buf, &a, &err), SNUG_OK);
    assert_string_equal(snug_augment_format(&a, buf, sizeof buf), "flip,crop:4,brightness:0.2,contrast:0.1");
    assert_int_equal(snug_parse_augment("none", &a, &err), SNUG_OK);
    assert_false(augment_active(&a));
    assert_string_equal(snug_augment_format(&a, buf, sizeof buf), "none");
    const char *bad[] = {"flip,flip", "crop:0", "crop:65", "crop:2.5", "crop:", "blur", "brightness:1.5",
                         "contrast:-0.1", "flip,", ",flip", "crop:4,crop:2", "brightness:nan"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(snug_parse_augment(bad[i], &a, &err), SNUG_E_ARG);
        printf("# %s: %s\n", bad[i], err.message);
    }
}

/* out(y, x) = in(y + dy, xs + dx) with xs = x, or W - 1 - x after a flip; fill outside. */
static float reference(const float *in, size_t H, size_t W, const augment_draw *d, size_t y, size_t x, float fill) {
    const long xs = d->flip ? (long)(W - 1 - x) : (long)x, sy = (long)y + d->dy, sx = xs + d->dx;
    return sy < 0 || sy >= (long)H || sx < 0 || sx >= (long)W ? fill : in[(size_t)sy * W + (size_t)sx];
}

static void shifts_and_flips_equal_a_gather(void **state) {
    (void)state;
    enum { C = 2, H = 5, W = 7 };
    float in[C * H * W], x[C * H * W];
    int32_t t[H * W];
    for (size_t i = 0; i < C * H * W; i++) in[i] = (float)i + 1.0f;
    const augment_units u = {.scale = {0.5f, 0.25f, 1}, .offset = {0.25f, 0.5f, 0}, .clamp = true};
    for (long dy = -6; dy <= 6; dy++)
        for (long dx = -8; dx <= 8; dx++)
            for (int flip = 0; flip < 2; flip++) {
                const augment_draw d = {.flip = flip, .dy = dy, .dx = dx, .brightness = 1, .contrast = 1};
                memcpy(x, in, sizeof x);
                for (size_t i = 0; i < H * W; i++) t[i] = (int32_t)i;
                augment_image(x, C, H, W, &d, &u);
                augment_pixel_targets(t, H, W, &d);
                for (size_t c = 0; c < C; c++)
                    for (size_t y = 0; y < H; y++)
                        for (size_t xx = 0; xx < W; xx++) {
                            const float fill = -u.offset[c] / u.scale[c];
                            const float want = reference(in + c * H * W, H, W, &d, y, xx, fill);
                            if (x[c * H * W + y * W + xx] != want)
                                fail_msg("dy %ld dx %ld flip %d: (%zu,%zu,%zu) %g, want %g", dy, dx, flip, c, y, xx,
                                         (double)x[c * H * W + y * W + xx], (double)want);
                            /* the target of a pixel is where the pixel came from */
                            const float from = reference(in, H, W, &d, y, xx, 0);
                            const int32_t want_t = from == 0 ? SNUG_IGNORE_TARGET : (int32_t)from - 1;
                            assert_int_equal(t[y * W + xx], want_t);
                        }
            }
}

static void draws_are_pure_and_uniform(void **state) {
    (void)state;
    const snug_augment a = {.flip = true, .crop_pad = 4, .brightness = 0.2f, .contrast = 0.4f};
    enum { SAMPLES = 20000 };
    size_t flips = 0, shift[9] = {0};
    for (uint64_t s = 0; s < SAMPLES; s++) {
        const augment_draw d = augment_draw_for(&a, 7, 3, s), e = augment_draw_for(&a, 7, 3, s);
        assert_true(d.flip == e.flip && d.dy == e.dy && d.dx == e.dx && d.brightness == e.brightness &&
                    d.contrast == e.contrast);
        flips += d.flip;
        assert_true(d.dy >= -4 && d.dy <= 4 && d.dx >= -4 && d.dx <= 4);
        shift[d.dy + 4]++;
        assert_true(d.brightness >= 0.8f && d.brightness <= 1.2f && d.contrast >= 0.6f && d.contrast <= 1.4f);
    }
    printf("# flips %zu of %d\n", flips, SAMPLES);
    assert_true(fabs((double)flips / SAMPLES - 0.5) < 0.02);
    for (int k = 0; k < 9; k++) assert_true(fabs((double)shift[k] / SAMPLES - 1.0 / 9) < 0.01);
    /* another epoch, sample or seed draws anew */
    const augment_draw d = augment_draw_for(&a, 7, 3, 11);
    int same = 0;
    for (uint64_t e = 4; e < 40; e++) {
        const augment_draw o = augment_draw_for(&a, 7, e, 11);
        same += o.dy == d.dy && o.dx == d.dx && o.flip == d.flip && o.brightness == d.brightness;
    }
    assert_true(same <= 1);
    const augment_draw s2 = augment_draw_for(&a, 8, 3, 11);
    assert_true(s2.brightness != d.brightness || s2.dy != d.dy || s2.dx != d.dx);
}

static void jitter_is_the_pixel_formula(void **state) {
    (void)state;
    enum { C = 3, H = 2, W = 3, P = H * W };
    const augment_units u = {.scale = {0.2f, 0.3f, 0.4f}, .offset = {0.4f, 0.5f, 0.6f}, .clamp = true};
    float x[C * P];
    for (size_t i = 0; i < C * P; i++) x[i] = (float)i / 4.0f - 2.0f;
    const augment_draw d = {.brightness = 1.3f, .contrast = 0.7f};
    double p[C * P], mean = 0;
    for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < P; i++) {
            double v = ((double)x[c * P + i] * u.scale[c] + u.offset[c]) * d.brightness;
            p[c * P + i] = v < 0 ? 0 : v > 1 ? 1 : v;
            mean += p[c * P + i] / (C * P);
        }
    augment_image(x, C, H, W, &d, &u);
    for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < P; i++) {
            double v = (p[c * P + i] - mean) * d.contrast + mean;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            assert_true(fabs((v - u.offset[c]) / u.scale[c] - x[c * P + i]) < 1e-5);
        }
}

/* ---- in a trainer ---- */

enum { N = 40, C = 1, H = 8, W = 8, CLASSES = 3, BATCH = 8 };

static snug_dataset *images(void) {
    snug_dataset *ds = pattern_images(N, C, H, W, CLASSES);
    assert_non_null(ds);
    return ds;
}

static snug_graph *model(void) {
    snug_graph *g = snug_graph_new("aug");
    snug_tensor x = snug_relu(g, "act", snug_conv2d(g, "conv", snug_input(g, "input", C, H, W), 4, 3, 1, 1));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_flatten(g, "flat", x), CLASSES));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static float *gradient(const snug_graph *g, const snug_dataset *ds, size_t m, size_t prefetch, bool augment,
                       size_t *n) {
    snug_train_config c = snug_train_config_default();
    if (augment) c.augment = (snug_augment){.flip = true, .crop_pad = 2, .brightness = 0.2f, .contrast = 0.2f};
    snug_plan_request req = request_for(BATCH, m, NO_CHECKPOINT, 0, &c);
    req.prefetch = prefetch;
    snug_trainer *tr;
    snug_error err;
    if (trainer_for(g, &req, &c, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    const size_t idx[BATCH] = {3, 17, 5, 22, 9, 31, 0, 38};
    double loss;
    assert_int_equal(snug_trainer_gradients(tr, ds, idx, BATCH, &loss, &err), SNUG_OK);
    size_t total = 0, numel;
    float *grads, *all = NULL;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &numel, NULL, &grads);
        all = realloc(all, (total + numel) * sizeof *all);
        memcpy(all + total, grads, numel * sizeof *all);
        total += numel;
    }
    *n = total;
    trainer_done(tr);
    return all;
}

static void augmentation_does_not_depend_on_the_split(void **state) {
    (void)state;
    snug_dataset *ds = images();
    snug_graph *g = model();
    size_t n;
    float *whole = gradient(g, ds, BATCH, 0, true, &n), *split = gradient(g, ds, 3, 0, true, &n);
    float *plain = gradient(g, ds, BATCH, 0, false, &n);
    double worst = 0, scale = 0, moved = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(whole[i] - split[i]));
        moved = fmax(moved, fabs(whole[i] - plain[i]));
        scale = fmax(scale, fabs(whole[i]));
    }
    printf("# split 8 vs 3+3+2: max |a-b| / max |a| = %.3g; augmentation moved the gradient by %.3g\n",
           worst / scale, moved / scale);
    assert_true(worst / scale < 1e-5);
    assert_true(moved / scale > 1e-2);
    free(whole), free(split), free(plain);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

static void read_ahead_is_bitwise_and_misses_nothing(void **state) {
    (void)state;
    snug_dataset *ds = images();
    snug_graph *g = model();
    float *params[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        snug_train_config c = snug_train_config_default();
        c.epochs = 3;
        c.augment = (snug_augment){.flip = true, .crop_pad = 1};
        snug_plan_request req = request_for(BATCH, 3, NO_CHECKPOINT, 0, &c);
        req.prefetch = k ? 2 : 0;
        snug_trainer *tr;
        snug_error err;
        if (trainer_for(g, &req, &c, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
        assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_OK);
        snug_data_timing t;
        snug_trainer_data_timing(tr, &t);
        printf("# prefetch %d: %ld micro-batches, %ld missed, %zu samples read ahead, waited %.3f ms\n", k ? 2 : 0,
               t.micro_batches, t.read_ahead_misses, t.read_ahead_samples, 1e3 * t.wait_seconds);
        assert_int_equal(t.micro_batches, 3 * 5 * 3);
        assert_int_equal(t.read_ahead_misses, 0);
        assert_int_equal(t.read_ahead_samples, k ? 3 * N : 0);
        size_t numel, at = 0;
        float *v;
        params[k] = NULL;
        for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
            snug_trainer_param(tr, i, &numel, &v, NULL);
            params[k] = realloc(params[k], (at + numel) * sizeof *v);
            memcpy(params[k] + at, v, numel * sizeof *v);
            at += numel;
        }
        n = at;
        trainer_done(tr);
    }
    assert_memory_equal(params[0], params[1], n * sizeof(float));
    free(params[0]), free(params[1]);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

static void the_ring_is_planned_data(void **state) {
    (void)state;
    snug_graph *g = model();
    snug_train_config c = snug_train_config_default();
    snug_plan_request req = request_for(BATCH, 4, NO_CHECKPOINT, 0, &c);
    snug_plan *p0, *p3;
    snug_error err;
    assert_int_equal(snug_plan_new(g, &req, &p0, NULL, &err), SNUG_OK);
    req.prefetch = 3;
    assert_int_equal(snug_plan_new(g, &req, &p3, NULL, &err), SNUG_OK);
    snug_plan_summary s0, s3;
    snug_plan_summarize(p0, &s0);
    snug_plan_summarize(p3, &s3);
    /* a micro-batch's input (4 x 64 floats) and targets (4 int32), each block 64-byte aligned, three times */
    assert_int_equal(s3.bytes[SNUG_MEM_DATA] - s0.bytes[SNUG_MEM_DATA], 3 * (1024 + 64));
    assert_int_equal(s3.total - s0.total, 3 * (1024 + 64));
    snug_plan_free(p0);
    req.prefetch = 1000;
    assert_int_equal(snug_plan_new(g, &req, &p0, NULL, &err), SNUG_E_ARG);
    printf("# %s\n", err.message);
    snug_plan_free(p3);
    snug_graph_free(g);
}

static void tokens_are_not_augmented(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("tok");
    snug_tensor e = snug_embedding(g, "emb", snug_input_tokens(g, "input", 4), 8, 2);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_flatten(g, "flat", e), 2));
    (void)snug_graph_check(g, NULL);
    snug_train_config c = snug_train_config_default();
    c.augment.flip = true;
    snug_trainer *tr;
    snug_error err;
    /* refused when the trainer is made, before any data is read */
    assert_int_equal(trainer_simple(g, 2, 2, &c, &tr, &err), SNUG_E_ARG);
    assert_null(tr);
    assert_non_null(strstr(err.message, "augmentation (flip) changes images"));
    printf("# %s\n", err.message);
    snug_graph_free(g);
}

/* Nor are a table's rows, (F, 1, 1): crop would blank them. */
static void table_rows_are_not_augmented(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("table");
    const snug_tensor rows = snug_flatten(g, "flat", snug_input(g, "input", 4, 1, 1));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", rows, 2));
    (void)snug_graph_check(g, NULL);
    snug_train_config c = snug_train_config_default();
    c.augment.crop_pad = 4;
    snug_trainer *tr;
    snug_error err;
    assert_int_equal(trainer_simple(g, 2, 2, &c, &tr, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "a table's rows"));
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_form_round_trips_and_refuses),
        cmocka_unit_test(shifts_and_flips_equal_a_gather),
        cmocka_unit_test(draws_are_pure_and_uniform),
        cmocka_unit_test(jitter_is_the_pixel_formula),
        cmocka_unit_test(augmentation_does_not_depend_on_the_split),
        cmocka_unit_test(read_ahead_is_bitwise_and_misses_nothing),
        cmocka_unit_test(the_ring_is_planned_data),
        cmocka_unit_test(tokens_are_not_augmented),
        cmocka_unit_test(table_rows_are_not_augmented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
