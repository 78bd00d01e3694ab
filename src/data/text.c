/* A byte-level text dataset for language models: vocabulary 256 (a token is a byte), read window by window
 * (data/data_file.h), never mapped or copied whole. The file splits into a training part (the first 1 - holdout of its bytes) and a held-out part (the
 * rest); a sample is a window of one part, and no window crosses from one part into the other.
 *
 * Sample i of a part starts at byte s = i * context of the part: its inputs are bytes [s, s + context), its
 * targets bytes [s + 1, s + context + 1) (the next byte at each position). Windows advance by context, so every
 * byte of a part except the first is predicted exactly once per epoch. The last window may run past the end of
 * the part: its missing inputs are 0 and its missing targets SNUG_IGNORE_TARGET, so no byte is dropped and the
 * loss normaliser counts only real targets (a ragged token count, which the trainer must handle). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/data_file.h"
#include "data/dataset.h"

#define TEXT_VOCAB 256

typedef struct text_impl {
    data_file file;
    size_t start;         /* the part: bytes [start, start + len) of the file */
    size_t len;
    size_t context;
} text_impl;

/* Reads the bytes [at, at + count) of the part that exist into the last quarter of dst's count 4-byte slots, and
 * returns how many there were; widening from the front then overwrites only bytes already read (mnist.c does
 * the same). A failed read leaves zeros, and the failure for text_read_status. */
static size_t read_tail(text_impl *t, size_t at, size_t count, void *dst) {
    const size_t have = at >= t->len ? 0 : t->len - at < count ? t->len - at : count;
    uint8_t *bytes = (uint8_t *)dst + 3 * count;
    data_file_read(&t->file, t->start + at, bytes, have);
    return have;
}

static void text_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n,
                             float *x) {  // (n, context)
    text_impl *t = ds->impl;
    const size_t T = t->context;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        float *dst = x + i * T;
        const uint8_t *bytes = (const uint8_t *)dst + 3 * T;
        const size_t have = read_tail(t, idx[i] * T, T, dst);
        for (size_t p = 0; p < T; p++) dst[p] = p < have ? (float)bytes[p] : 0.0f;
    }
}

static void text_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n,
                              int32_t *y) {  // (n, context)
    text_impl *t = ds->impl;
    const size_t T = t->context;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        int32_t *dst = y + i * T;
        const uint8_t *bytes = (const uint8_t *)dst + 3 * T;
        const size_t have = read_tail(t, idx[i] * T + 1, T, dst);
        for (size_t p = 0; p < T; p++) dst[p] = p < have ? (int32_t)bytes[p] : SNUG_IGNORE_TARGET;
    }
}

static void text_destroy(snug_dataset *ds) {
    text_impl *t = ds->impl;
    if (!t) return;
    data_file_close(&t->file);
    free(t);
    ds->impl = NULL;
}

static snug_status text_read_status(const snug_dataset *ds, snug_error *err) {
    return data_file_status(&((const text_impl *)ds->impl)->file, err);
}

static const dataset_ops text_ops = {
    .fill_inputs = text_fill_inputs,
    .fill_targets = text_fill_targets,
    .destroy = text_destroy,
    .read_status = text_read_status,
};

/* Points t->part at the requested part: [0, split) for training, [split, len) held out. */
static snug_status select_part(const char *path, double holdout, bool heldout_part, text_impl *t,
                               snug_error *err) {
    const size_t len = t->file.len;
    /* floor, so that a file is split the same way on every machine; exact for files below 2^53 bytes */
    const size_t split = (size_t)floor((double)len * (1.0 - holdout));
    const size_t start = heldout_part ? split : 0, end = heldout_part ? len : split;
    t->start = start;
    t->len = end - start;
    /* A full window: context inputs and the byte that follows the last of them. */
    if (t->len < t->context + 1)
        return snug_fail(err, SNUG_E_ARG, "%s: the %s part (bytes %zu to %zu of %zu, holdout %g) has %zu bytes, "
                         "less than one window of context %zu + 1: use a shorter context, %s holdout, or a "
                         "longer file", path, heldout_part ? "held-out" : "training", start, end, len, holdout,
                         t->len, t->context, heldout_part ? "a larger" : "a smaller");
    return SNUG_OK;
}

static snug_status check_args(const char *path, size_t context, double holdout, snug_error *err) {
    if (!path) return snug_fail(err, SNUG_E_ARG, "snug_text_open: path is NULL");
    if (context == 0) return snug_fail(err, SNUG_E_ARG, "snug_text_open: %s: context must be > 0 tokens", path);
    if (!(holdout >= 0.0 && holdout < 1.0))
        return snug_fail(err, SNUG_E_ARG, "snug_text_open: %s: holdout is %g, expected a fraction in [0, 1) "
                         "(e.g. 0.1 holds out the last 10%% of the bytes)", path, holdout);
    return SNUG_OK;
}

snug_status snug_text_open(const char *path, size_t context, double holdout, bool heldout_part,
                           snug_dataset **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_text_open: out is NULL");
    *out = NULL;
    snug_status s = check_args(path, context, holdout, err);
    if (s != SNUG_OK) return s;
    snug_dataset *ds = calloc(1, sizeof *ds);
    text_impl *t = calloc(1, sizeof *t);
    if (!ds || !t) {
        free(ds);
        free(t);
        return snug_fail(err, SNUG_E_OOM, "snug_text_open: out of host memory for the dataset header");
    }
    ds->ops = &text_ops;
    ds->impl = t;
    t->context = context;
    s = data_file_open(path, "a text file", NULL, 1, &t->file, err);
    if (s == SNUG_OK) s = select_part(path, holdout, heldout_part, t, err);
    if (s != SNUG_OK) {
        snug_dataset_free(ds);
        return s;
    }
    /* Targets are bytes 1 .. len-1 of the part, context per window: ceil((len - 1) / context) windows. */
    ds->n = (t->len - 1) / context + ((t->len - 1) % context != 0);
    /* Rank 3, like the images: the graph input of every model is (C, H, W) for now. */
    ds->sample_shape = (snug_shape){.rank = 1, .dims = {context}}; /* snug_input_tokens(context) */
    ds->sample_numel = context;
    ds->classes = TEXT_VOCAB;
    ds->targets_per_sample = context;
    *out = ds;
    return SNUG_OK;
}
