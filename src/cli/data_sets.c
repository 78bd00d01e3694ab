/* Opening the data set a --data value names (the list is in cli/data_sets.h), sized for the model that will
 * read it. Every failure says where snug looked and how to get the data. */
#define _POSIX_C_SOURCE 200809L
#include "cli/data_sets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/shape.h"

#define MNIST_PAD 2          /* 28 + 2 * 2 = 32 */
#define SHAPES_TRAIN_SEED 1
#define SHAPES_EVAL_SEED 2

static const char *const plain_names[] = {"mnist", "mnist32", "brown", "shapes", NULL};

/* "text:FILE" -> FILE when value starts with prefix ("text:"), else NULL. */
static const char *after_prefix(const char *value, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(value, prefix, n) == 0 ? value + n : NULL;
}

bool cli_data_valid(const char *value, char *msg, size_t len) {
    for (int i = 0; plain_names[i]; i++)
        if (strcmp(value, plain_names[i]) == 0) return true;
    const char *file = after_prefix(value, "text:"), *dir = after_prefix(value, "segmentation:");
    if ((file && file[0]) || (dir && dir[0])) return true;
    if (file || dir)
        snprintf(msg, len, "--data %s needs a path after the colon (%s%s)", value, value, file ? "FILE" : "DIR");
    else snprintf(msg, len, "unknown data set '%s' for --data (choose from mnist, mnist32, brown, text:FILE, shapes, "
                  "segmentation:DIR)", value);
    return false;
}

static bool is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* ---- MNIST ---- */

static snug_status open_mnist_part(const char *dir, bool train, size_t pad, snug_dataset **out, snug_error *err) {
    snug_status st = pad ? snug_mnist_open_padded(dir, train, pad, out, err) : snug_mnist_open(dir, train, out, err);
    if (st == SNUG_E_IO && !strstr(err->message, "make data")) snug_error_append(err, " (run `make data` to download "
                                                                                     "MNIST)");
    return st;
}

static snug_status open_mnist(cli_data *d, const char *dir, bool want_train, size_t pad, snug_error *err) {
    const char *env = getenv("SNUG_DATA_DIR");
    if (!dir) dir = env && env[0] ? env : "data/mnist";
    snprintf(d->source, sizeof d->source, "%s", dir);
    d->eval_name = "test";
    d->unit = "images";
    /* A missing folder is the usual first-run problem: say where snug looked and how to get the data. */
    if (!is_dir(dir))
        return snug_fail(err, SNUG_E_IO, "data directory '%s' does not exist; run `make data` to download MNIST into "
                         "data/mnist, or point --data-dir (or SNUG_DATA_DIR) at a directory with the MNIST IDX "
                         "files", dir);
    snug_status st = want_train ? open_mnist_part(dir, true, pad, &d->train, err) : SNUG_OK;
    return st == SNUG_OK ? open_mnist_part(dir, false, pad, &d->eval, err) : st;
}

/* ---- text ---- */

static snug_status text_context(const snug_graph *g, const char *value, size_t *context, snug_error *err) {
    snug_shape in = snug_tensor_shape(g, 0);
    char shape[64];
    if (in.rank == 1) {
        *context = in.dims[0];
        return SNUG_OK;
    }
    return snug_fail(err, SNUG_E_SHAPE, "--data %s is byte-level text for a language model (an input of T tokens), "
                     "but model '%s' takes %s; use a token model (e.g. --model gpt) or image data",
                     value, snug_graph_name(g), snug_shape_format(&in, shape, sizeof shape));
}

static snug_status open_text(cli_data *d, const char *path, const char *value, const snug_graph *g,
                             bool want_train, snug_error *err) {
    size_t context = 0;
    snug_status st = text_context(g, value, &context, err);
    if (st != SNUG_OK) return st;
    snprintf(d->source, sizeof d->source, "%s", path);
    snprintf(d->unit_buf, sizeof d->unit_buf, "windows of %zu bytes", context);
    d->unit = d->unit_buf;
    d->eval_name = "held-out";
    if (want_train) st = snug_text_open(path, context, CLI_TEXT_HOLDOUT, false, &d->train, err);
    if (st == SNUG_OK) st = snug_text_open(path, context, CLI_TEXT_HOLDOUT, true, &d->eval, err);
    if (st == SNUG_E_IO && strcmp(d->kind, "brown") == 0)
        snug_error_append(err, " (run `make data` to fetch the Brown corpus into data/brown, or give --data-dir)");
    return st;
}

/* ---- synthetic shapes ---- */

static snug_status open_shapes(cli_data *d, const snug_graph *g, bool want_train, size_t train_samples,
                               snug_error *err) {
    snug_shape in = snug_tensor_shape(g, 0);
    char shape[64];
    if (in.rank != 3 || in.dims[0] != 1)
        return snug_fail(err, SNUG_E_SHAPE, "--data shapes draws 1-channel images (1, H, W) at the model's size, "
                         "but model '%s' takes %s", snug_graph_name(g), snug_shape_format(&in, shape, sizeof shape));
    snprintf(d->source, sizeof d->source, "synthetic shapes (training seed %d, evaluation seed %d)",
             SHAPES_TRAIN_SEED, SHAPES_EVAL_SEED);
    snprintf(d->unit_buf, sizeof d->unit_buf, "images of %zux%zu", in.dims[1], in.dims[2]);
    d->unit = d->unit_buf;
    d->eval_name = "evaluation";
    snug_status st = SNUG_OK;
    if (want_train) st = snug_shapes_new(train_samples, in.dims[1], in.dims[2], SHAPES_TRAIN_SEED, &d->train, err);
    if (st == SNUG_OK)
        st = snug_shapes_new(CLI_SHAPES_EVAL_SAMPLES, in.dims[1], in.dims[2], SHAPES_EVAL_SEED, &d->eval, err);
    return st;
}

/* ---- PNG segmentation ---- */

static snug_status open_segmentation(cli_data *d, const char *dir, bool want_train, snug_error *err) {
    char val[1040];
    snprintf(val, sizeof val, "%s/val", dir);
    bool has_val = is_dir(val);
    snprintf(d->source, sizeof d->source, "%s%s", dir,
             has_val ? " (evaluation: val/)" : want_train ? " (no val/ folder: not evaluated)"
                                                          : " (no val/ folder: its own samples are scored)");
    d->unit = "images";
    d->eval_name = "validation";
    snug_status st = SNUG_OK;
    if (want_train || !has_val) st = snug_segmentation_open(dir, want_train ? &d->train : &d->eval, err);
    if (st == SNUG_OK && has_val) st = snug_segmentation_open(val, &d->eval, err);
    if (!want_train && !has_val) d->eval_name = "training-set";
    return st;
}

snug_status cli_data_open(const char *value, const char *dir, const snug_graph *g, bool want_train,
                          size_t train_samples, cli_data *d, snug_error *err) {
    memset(d, 0, sizeof *d);
    const char *text = after_prefix(value, "text:"), *seg = after_prefix(value, "segmentation:");
    char brown[1040];
    snug_status st;
    if (strcmp(value, "mnist") == 0 || strcmp(value, "mnist32") == 0) {
        d->kind = value[5] ? "mnist32" : "mnist";
        st = open_mnist(d, dir, want_train, value[5] ? MNIST_PAD : 0, err);
    } else if (strcmp(value, "brown") == 0) {
        d->kind = "brown";
        snprintf(brown, sizeof brown, "%s/brown.txt", dir ? dir : "data/brown");
        st = open_text(d, brown, value, g, want_train, err);
    } else if (text) {
        d->kind = "text";
        st = open_text(d, text, value, g, want_train, err);
    } else if (strcmp(value, "shapes") == 0) {
        d->kind = "shapes";
        st = open_shapes(d, g, want_train, train_samples, err);
    } else if (seg) {
        d->kind = "segmentation";
        st = open_segmentation(d, seg, want_train, err);
    } else {
        st = snug_fail(err, SNUG_E_ARG, "unknown data set '%s'", value);
    }
    if (st != SNUG_OK) cli_data_close(d);
    return st;
}

/* The MNIST variant whose samples have the model's input shape, if one does. */
static const char *mnist_that_fits(const snug_graph *g) {
    snug_shape in = snug_tensor_shape(g, 0);
    if (in.rank != 3 || in.dims[0] != 1 || in.dims[1] != in.dims[2]) return NULL;
    if (in.dims[1] == 28) return "mnist";
    return in.dims[1] == 28 + 2 * MNIST_PAD ? "mnist32" : NULL;
}

snug_status cli_data_check(const cli_data *d, const snug_trainer *tr, const snug_graph *g, snug_error *err) {
    snug_status st = d->train ? snug_trainer_check_dataset(tr, d->train, err) : SNUG_OK;
    if (st == SNUG_OK && d->eval) st = snug_trainer_check_dataset(tr, d->eval, err);
    if (st != SNUG_OK) {
        const char *fits = mnist_that_fits(g);
        if (fits && strncmp(d->kind, "mnist", 5) == 0 && strcmp(fits, d->kind) != 0)
            snug_error_append(err, "; use --data %s", fits);
        else snug_error_append(err, " (--data %s does not fit this model; `snug train --help` lists the data sets)",
                               d->kind);
    }
    return st;
}

void cli_data_close(cli_data *d) {
    if (d->train) snug_dataset_free(d->train);
    if (d->eval) snug_dataset_free(d->eval);
    d->train = d->eval = NULL;
}
