/* The data sets snug knows by name (snug_data_open), sized for the model that will read them:
 *
 *   mnist               the MNIST IDX files in dir (default data/mnist); the evaluation part is t10k
 *   mnist32             the same, centred in 1x32x32 (2 pixels of background around), for resnet20
 *   brown               the Brown corpus, dir/brown.txt (default data/brown); byte-level, context = the model's
 *                       input length; the last 10% is the held-out part
 *   text:FILE           any file, the same way
 *   shapes              synthetic shapes segmentation at the model's H x W: train_samples training samples
 *                       (seed 1), 500 evaluation samples (seed 2); the same sets in every run
 *   segmentation:DIR    PNGs in DIR/images and DIR/masks; the evaluation part is DIR/val/{images,masks} when
 *                       DIR/val exists; without it, the training set itself when no training part is asked for
 *   csv:FILE[,FILE2]    a CSV table, labels in its last column, every feature column standardised (zero mean,
 *                       unit variance over FILE: tables mix units, and a linear model trains badly on raw ones);
 *                       the evaluation part is FILE2 standardised with FILE's statistics; without it, the
 *                       training table itself when no training part is asked for
 *   images:DIR          one folder per class (snug_image_folder_open) in DIR/train and DIR/val: val is opened
 *                       with train's classes and normalisation (train's own statistics unless the options give
 *                       one), so both parts label and scale alike; without a training part, DIR/val alone
 *
 * Every failure says where snug looked. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/escape.h"
#include "core/shape.h"
#include "snug.h"

#define MNIST_PAD 2          /* 28 + 2 * 2 = 32 */
#define TEXT_HOLDOUT 0.1
#define SHAPES_EVAL_SAMPLES 500
#define SHAPES_TRAIN_SEED 1
#define SHAPES_EVAL_SEED 2
#define SHAPES_TRAIN_SAMPLES 2000

static const char *const plain_names[] = {"mnist", "mnist32", "brown", "shapes", NULL};

/* "text:FILE" -> FILE when value starts with prefix ("text:"), else NULL. */
static const char *after_prefix(const char *value, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(value, prefix, n) == 0 ? value + n : NULL;
}

bool snug_data_name_valid(const char *name, char *why, size_t len) {
    for (int i = 0; plain_names[i]; i++)
        if (strcmp(name, plain_names[i]) == 0) return true;
    const char *file = after_prefix(name, "text:"), *dir = after_prefix(name, "segmentation:");
    const char *table = after_prefix(name, "csv:");
    if (!dir) dir = after_prefix(name, "images:");
    if ((file && file[0]) || (dir && dir[0]) || (table && table[0] && table[0] != ',')) return true;
    if (file || dir || table)
        snprintf(why, len, "data set %s needs a path after the colon (%s%s)", name, name,
                 dir ? "DIR" : table ? "FILE or FILE,FILE2" : "FILE");
    else snprintf(why, len, "unknown data set '%s' (choose from mnist, mnist32, brown, text:FILE, shapes, "
                  "segmentation:DIR, images:DIR, csv:FILE[,FILE2])", name);
    return false;
}

static bool is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* ---- MNIST ---- */

static snug_status open_mnist_part(const char *dir, bool train, size_t pad, snug_dataset **out, snug_error *err) {
    return pad ? snug_mnist_open_padded(dir, train, pad, out, err) : snug_mnist_open(dir, train, out, err);
}

static snug_status open_mnist(snug_data *d, const char *dir, bool want_train, size_t pad, snug_error *err) {
    if (!dir) dir = "data/mnist";
    snprintf(d->source, sizeof d->source, "%s", dir);
    d->eval_name = "test";
    snprintf(d->unit, sizeof d->unit, "images");
    /* A missing folder is the usual first-run problem: say where snug looked. */
    if (!is_dir(dir))
        return snug_fail(err, SNUG_E_IO, "data directory '%s' does not exist: it should hold the MNIST IDX files",
                         dir);
    snug_status st = want_train ? open_mnist_part(dir, true, pad, &d->train, err) : SNUG_OK;
    return st == SNUG_OK ? open_mnist_part(dir, false, pad, &d->eval, err) : st;
}

/* ---- text ---- */

static snug_status text_context(snug_shape in, const char *value, size_t *context, snug_error *err) {
    char shape[64];
    if (in.rank == 1) {
        *context = in.dims[0];
        return SNUG_OK;
    }
    return snug_fail(err, SNUG_E_SHAPE, "data set %s is byte-level text for a language model (an input of T "
                     "tokens), but the model takes %s; use a token model (e.g. gpt) or image data",
                     value, snug_shape_format(&in, shape, sizeof shape));
}

static snug_status open_text(snug_data *d, const char *path, const char *value, snug_shape in,
                             bool want_train, snug_error *err) {
    size_t context = 0;
    snug_status st = text_context(in, value, &context, err);
    if (st != SNUG_OK) return st;
    snprintf(d->source, sizeof d->source, "%s", path);
    snprintf(d->unit, sizeof d->unit, "windows of %zu bytes", context);
    d->eval_name = "held-out";
    if (want_train) st = snug_text_open(path, context, TEXT_HOLDOUT, false, &d->train, err);
    if (st == SNUG_OK) st = snug_text_open(path, context, TEXT_HOLDOUT, true, &d->eval, err);
    return st;
}

/* ---- synthetic shapes ---- */

static snug_status open_shapes(snug_data *d, snug_shape in, bool want_train, size_t train_samples,
                               snug_error *err) {
    char shape[64];
    if (in.rank != 3 || in.dims[0] != 1)
        return snug_fail(err, SNUG_E_SHAPE, "data set shapes draws 1-channel images (1, H, W) at the model's size, "
                         "but the model takes %s", snug_shape_format(&in, shape, sizeof shape));
    snprintf(d->source, sizeof d->source, "synthetic shapes (training seed %d, evaluation seed %d)",
             SHAPES_TRAIN_SEED, SHAPES_EVAL_SEED);
    snprintf(d->unit, sizeof d->unit, "images of %zux%zu", in.dims[1], in.dims[2]);
    d->eval_name = "evaluation";
    snug_status st = SNUG_OK;
    if (want_train) st = snug_shapes_new(train_samples, in.dims[1], in.dims[2], SHAPES_TRAIN_SEED, &d->train, err);
    if (st == SNUG_OK)
        st = snug_shapes_new(SHAPES_EVAL_SAMPLES, in.dims[1], in.dims[2], SHAPES_EVAL_SEED, &d->eval, err);
    return st;
}

/* ---- PNG segmentation ---- */

static snug_status open_segmentation(snug_data *d, const char *dir, bool want_train, snug_error *err) {
    char val[1040];
    snprintf(val, sizeof val, "%s/val", dir);
    bool has_val = is_dir(val);
    snprintf(d->source, sizeof d->source, "%s%s", dir,
             has_val ? " (evaluation: val/)" : want_train ? " (no val/ folder: not evaluated)"
                                                          : " (no val/ folder: its own samples are scored)");
    snprintf(d->unit, sizeof d->unit, "images");
    d->eval_name = "validation";
    snug_status st = SNUG_OK;
    if (want_train || !has_val) st = snug_segmentation_open(dir, want_train ? &d->train : &d->eval, err);
    if (st == SNUG_OK && has_val) st = snug_segmentation_open(val, &d->eval, err);
    if (!want_train && !has_val) d->eval_name = "training-set";
    return st;
}

/* ---- CSV tables ---- */

/* "FILE,FILE2" -> FILE into train (the whole value when it names a file, comma and all) and FILE2 into eval ("" when
 * none). */
static void csv_paths(const char *value, char *train, char *eval, size_t len) {
    struct stat sb;
    const char *comma = strrchr(value, ',');
    if (!comma || stat(value, &sb) == 0) {
        snprintf(train, len, "%s", value);
        eval[0] = '\0';
        return;
    }
    snprintf(train, len, "%.*s", (int)(comma - value), value);
    snprintf(eval, len, "%s", comma + 1);
}

/* The model's input is (F, 1, 1) for a table of F features (input = image F 1 1); an unknown input (rank 0) is not
 * checked. */
static snug_status csv_fits(const snug_dataset *ds, const char *name, snug_shape in, snug_error *err) {
    const snug_shape want = snug_dataset_sample_shape(ds);
    char shape[64];
    if (in.rank == 0 || (in.rank == 3 && in.dims[0] == want.dims[0] && in.dims[1] == 1 && in.dims[2] == 1))
        return SNUG_OK;
    return snug_fail(err, SNUG_E_SHAPE, "data set %s has rows of %zu features, for a model whose input is (%zu, 1, "
                     "1) (input = image %zu 1 1 in a model file), but the model takes %s", name, want.dims[0],
                     want.dims[0], want.dims[0], snug_shape_format(&in, shape, sizeof shape));
}

static snug_status open_csv(snug_data *d, const char *value, const char *name, snug_shape in, bool want_train,
                            const snug_weights_data *trained, snug_error *err) {
    char train[sizeof d->source / 2], eval[sizeof d->source / 2]; /* shown cut to 500 bytes each in d->source */
    csv_paths(value, train, eval, sizeof train);
    snprintf(d->source, sizeof d->source, "%.500s%s%.500s%s", train, eval[0] ? " (validation: " : "", eval,
             eval[0] ? ")" : want_train ? " (no validation table: not evaluated)"
                                        : " (no validation table: its own rows are scored)");
    d->eval_name = eval[0] || want_train ? "validation" : "training-set";
    /* scored alone, a table is read as the weights' training table was */
    const snug_csv_options table = {.standardise = true, .trained = want_train || eval[0] ? NULL : trained};
    snug_dataset *ds = NULL;
    snug_status st = snug_csv_open(train, &table, &ds, err);
    if (st == SNUG_OK) st = csv_fits(ds, name, in, err);
    if (st == SNUG_OK) {
        const snug_shape s = snug_dataset_sample_shape(ds);
        snprintf(d->unit, sizeof d->unit, "rows of %zu features", s.dims[0]);
    }
    if (st == SNUG_OK && eval[0]) {
        const snug_csv_options validation = {.standardise = true, .stats_from = ds};
        st = snug_csv_open(eval, &validation, &d->eval, err);
    }
    if (st == SNUG_OK && (want_train || !eval[0])) {
        *(want_train ? &d->train : &d->eval) = ds;
        ds = NULL;
    }
    snug_dataset_free(ds);
    return st;
}

/* ---- image folders ---- */

/* The evaluation part: dir/val with the training part's classes and normalisation, or alone. */
static snug_status open_images_val(snug_data *d, const char *val, snug_image_folder_options o, snug_error *err) {
    if (!d->train) return snug_image_folder_open(val, &o, &d->eval, err);
    o.class_count = snug_dataset_classes(d->train);
    const char **names = malloc(o.class_count * sizeof *names);
    if (!names) return snug_fail(err, SNUG_E_OOM, "out of host memory for %zu class names", o.class_count);
    for (size_t c = 0; c < o.class_count; c++) names[c] = snug_dataset_class_name(d->train, c);
    snug_normalise norm;
    snug_dataset_normalisation(d->train, &norm);
    o.classes = names;
    o.normalise = &norm;
    snug_status st = snug_image_folder_open(val, &o, &d->eval, err);
    free(names);
    return st;
}

static snug_status open_images(snug_data *d, const char *dir, snug_shape in, bool want_train,
                               const snug_data_options *opt, snug_error *err) {
    char train[1040], val[1040];
    snprintf(train, sizeof train, "%s/train", dir);
    snprintf(val, sizeof val, "%s/val", dir);
    const bool has_val = is_dir(val);
    d->eval_name = "validation";
    snprintf(d->unit, sizeof d->unit, "images of %zux%zux%zu", in.dims[0], in.dims[1], in.dims[2]);
    if (want_train ? !is_dir(train) : !has_val)
        return snug_fail(err, SNUG_E_IO, "%s does not exist: images:%s expects %s/%s/CLASS/*.png|jpg|jpeg (one "
                         "folder per class)%s", want_train ? train : val, dir, dir, want_train ? "train" : "val",
                         want_train ? ", and the same layout in val/ for evaluation" : "");
    snug_image_folder_options o = {.input = in, .resize = opt->resize, .normalise = opt->normalise,
                                   .read_limit = opt->read_limit};
    snug_status st = want_train ? snug_image_folder_open(train, &o, &d->train, err) : SNUG_OK;
    if (st == SNUG_OK && has_val) st = open_images_val(d, val, o, err);
    if (st != SNUG_OK) return st;
    const snug_dataset *named = d->train ? d->train : d->eval;
    snprintf(d->source, sizeof d->source, "%s (%zu classes; %s)", dir, snug_dataset_classes(named),
             !has_val ? "no val/ folder: not evaluated" : want_train ? "evaluation: val/" : "val/");
    return SNUG_OK;
}

snug_data_options snug_data_options_default(void) {
    return (snug_data_options){.train_samples = SHAPES_TRAIN_SAMPLES, .normalise = NULL,
                               .resize = SNUG_RESIZE_AUTO};
}

/* Data scored by weights that name their classes must name the same, in the same order (class folders, a table's
 * label names). */
static snug_status same_classes(const snug_data *d, const snug_weights_data *w, snug_error *err) {
    for (size_t c = 0; w && d->eval && c < w->classes && snug_dataset_class_name(d->eval, 0); c++) {
        const char *mine = snug_dataset_class_name(d->eval, c);
        if (!mine || strcmp(mine, w->class_names[c]) != 0)
            return snug_fail(err, SNUG_E_ARG, "class %zu of the weights is '%s', of the data '%s': score the data the "
                             "weights were trained for (the same class folders or labels)", c,
                             escape_text(w->class_names[c]).text, mine ? escape_text(mine).text : "(none)");
    }
    return SNUG_OK;
}

snug_status snug_data_open(const char *name, const char *dir, snug_shape input, bool want_train,
                           const snug_data_options *opt, snug_data *d, snug_error *err) {
    memset(d, 0, sizeof *d);
    const snug_data_options defaults = snug_data_options_default();
    if (!opt) opt = &defaults;
    const char *text = after_prefix(name, "text:"), *seg = after_prefix(name, "segmentation:");
    const char *table = after_prefix(name, "csv:");
    const char *images = after_prefix(name, "images:");
    char brown[1040];
    snug_status st;
    if (strcmp(name, "mnist") == 0 || strcmp(name, "mnist32") == 0) {
        d->kind = name[5] ? "mnist32" : "mnist";
        st = open_mnist(d, dir, want_train, name[5] ? MNIST_PAD : 0, err);
    } else if (strcmp(name, "brown") == 0) {
        d->kind = "brown";
        snprintf(brown, sizeof brown, "%s/brown.txt", dir ? dir : "data/brown");
        st = open_text(d, brown, name, input, want_train, err);
    } else if (text) {
        d->kind = "text";
        st = open_text(d, text, name, input, want_train, err);
    } else if (strcmp(name, "shapes") == 0) {
        d->kind = "shapes";
        st = open_shapes(d, input, want_train, opt->train_samples, err);
    } else if (seg) {
        d->kind = "segmentation";
        st = open_segmentation(d, seg, want_train, err);
    } else if (table) {
        d->kind = "csv";
        st = open_csv(d, table, name, input, want_train, opt->trained, err);
    } else if (images) {
        d->kind = "images";
        st = open_images(d, images, input, want_train, opt, err);
    } else {
        st = snug_fail(err, SNUG_E_ARG, "unknown data set '%s'", name);
    }
    if (st == SNUG_OK && !want_train) st = same_classes(d, opt->trained, err);
    if (st != SNUG_OK) snug_data_close(d);
    return st;
}

void snug_data_close(snug_data *d) {
    if (d->train) snug_dataset_free(d->train);
    if (d->eval) snug_dataset_free(d->eval);
    d->train = d->eval = NULL;
}

size_t snug_data_read_ahead(const snug_data *d) {
    /* decoding a file per sample is slow enough for the step to wait on it; the others are copies */
    return d && d->kind && (strcmp(d->kind, "images") == 0 || strcmp(d->kind, "segmentation") == 0) ? 2 : 0;
}
