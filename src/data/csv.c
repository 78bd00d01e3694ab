/* A CSV table as a data set (snug_csv_open): a header row of unique column names, then one sample per row; every
 * column but the label column is a feature, the label column holds a class per row (numbers, or names sorted into
 * class numbers). The table is read once, whole, into memory as float32 features and int32 labels, so that a
 * sample costs a copy: tables are small next to the images and text the other data sets stream from disk, and a
 * file of text numbers cannot be read at an offset without an index of its lines.
 *
 * Values are read as doubles and converted to floats in place at the end, after the column statistics (mean and
 * standard deviation over the rows, in double) and the standardisation: a column whose values sit far from zero
 * (timestamps, prices) keeps its variation, which float32 values rounded before standardising would lose. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/escape.h"
#include "data/csv_labels.h"
#include "data/csv_parse.h"
#include "data/dataset.h"

#define CSV_MAX_FEATURE_BYTES ((size_t)1 << 30)
#define CSV_FIRST_ROWS 64
#define SHOWN 40              /* the bytes of a name or a cell quoted in a message */
#define LIST_MAX 600          /* the characters of a list of columns or classes in a message */
#define UTF8_BOM "\xEF\xBB\xBF"

typedef struct csv_table {
    char *path;
    float *x;             /* (n, features), standardised when asked */
    int32_t *y;           /* (n) class numbers */
    size_t features;
    char **columns;       /* (ncols) the header's names */
    size_t ncols, label;  /* label: the label column's index */
    double *mean, *std;   /* (features) the column statistics it was standardised with (its own, or those of the
                             training table), else its own; std 1 for a constant column */
    bool standardised;
    char **names;         /* (classes) the class names in strcmp order; NULL for numeric labels */
} csv_table;

/* ---- the data set ---- */

static void csv_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, features)
    const csv_table *t = ds->impl;
    const size_t f = t->features;
    for (size_t i = 0; i < n; i++) memcpy(x + i * f, t->x + idx[i] * f, f * sizeof *x);
}

static void csv_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n)
    const csv_table *t = ds->impl;
    for (size_t i = 0; i < n; i++) y[i] = t->y[idx[i]];
}

static void free_strings(char **s, size_t n) {
    if (!s) return;
    for (size_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

static void table_free(csv_table *t, size_t classes) {
    if (!t) return;
    free(t->path);
    free(t->x);
    free(t->y);
    free_strings(t->columns, t->ncols);
    free(t->mean);
    free(t->std);
    free_strings(t->names, classes);
    free(t);
}

static void csv_destroy(snug_dataset *ds) {
    table_free(ds->impl, ds->classes);
    ds->impl = NULL;
}

static const char *csv_class_name(const snug_dataset *ds, size_t i) {
    const csv_table *t = ds->impl;
    return t->names && i < ds->classes ? t->names[i] : NULL;
}

static bool csv_table_stats(const snug_dataset *ds, snug_table_stats *out) {
    const csv_table *t = ds->impl;
    if (!t->standardised) return false;
    *out = (snug_table_stats){.columns = t->ncols, .names = t->columns, .label = t->label, .classes = ds->classes,
                              .mean = t->mean, .std = t->std};
    return true;
}

static const dataset_ops csv_ops = {
    .fill_inputs = csv_fill_inputs,
    .fill_targets = csv_fill_targets,
    .destroy = csv_destroy,
    .class_name = csv_class_name,
    .table_stats = csv_table_stats,
};

/* ---- reading ---- */

typedef enum label_kind { LABELS_UNKNOWN = 0, LABELS_NUMBERS, LABELS_NAMES } label_kind;

typedef struct csv_build {
    csv_reader rd;
    const csv_table *train;     /* stats_from's table, or NULL */
    size_t train_classes;
    csv_table *t;
    char **cells;               /* (ncols) the current line's */
    double *x;                  /* (cap, features) as read */
    int32_t *y;                 /* (cap) */
    size_t n, cap;
    label_kind kind;
    size_t kind_line;           /* the line whose label chose kind */
    int32_t max_label;
    label_set set;
} csv_build;

/* The column's number and name for a message: "column 3 'width'". */
#define COLUMN_FMT "column %zu '%s'"
#define COLUMN_ARGS(t, c) (c) + 1, shown((t)->columns[c]).text

/* The first SHOWN bytes of text from the file, safe to print (core/escape.h). */
static escaped shown(const char *text) { return escape_range(text, strnlen(text, SHOWN)); }

/* "a, b, c" (at most LIST_MAX characters, then how many more) into buf. */
static const char *list_names(char *const *names, size_t count, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        const escaped name = shown(names[i]);
        if (at + strlen(name.text) + 2 > LIST_MAX) {
            snprintf(buf + at, len - at, "%s... (%zu more)", i ? " " : "", count - i);
            break;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", name.text);
    }
    return buf;
}

static bool is_blank_line(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return *s == '\0';
}

/* Splits the current line into b->cells; a quoting error names its cell. */
static snug_status split_line(csv_build *b, size_t max, size_t *count, snug_error *err) {
    const csv_split_status s = csv_split(b->rd.line, b->cells, max, count);
    if (s == CSV_SPLIT_OK) return SNUG_OK;
    return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: cell %zu: %s", b->rd.path, b->rd.number, *count,
                     s == CSV_SPLIT_OPEN_QUOTE
                         ? "a quote is not closed on its line: close it (a cell cannot span lines)"
                         : "text after the closing quote: write a quote inside a quoted cell as \"\"");
}

/* Every name non-empty and unique (sorted, so that a wide header is checked in n log n). */
static snug_status check_names(csv_build *b, snug_error *err) {
    const csv_table *t = b->t;
    for (size_t c = 0; c < t->ncols; c++)
        if (!t->columns[c][0])
            return snug_fail(err, SNUG_E_FORMAT, "%s:1: column %zu has no name: the first line is the header, a "
                             "unique name for every column", b->rd.path, c + 1);
    size_t *order = malloc(t->ncols * sizeof *order);
    if (!order) return snug_fail(err, SNUG_E_OOM, "%s:1: out of host memory for the header", b->rd.path);
    for (size_t c = 0; c < t->ncols; c++) order[c] = c;
    snug_status s = label_sort_indices(order, t->ncols, t->columns)
                        ? SNUG_OK : snug_fail(err, SNUG_E_OOM, "%s:1: out of host memory for the header", b->rd.path);
    for (size_t k = 1; k < t->ncols && s == SNUG_OK; k++)
        if (strcmp(t->columns[order[k - 1]], t->columns[order[k]]) == 0)
            s = snug_fail(err, SNUG_E_FORMAT, "%s:1: columns %zu and %zu are both named '%s': give every column "
                          "a unique name", b->rd.path, order[k - 1] + 1, order[k] + 1,
                          shown(t->columns[order[k]]).text);
    free(order);
    return s;
}

static snug_status find_label(csv_build *b, const char *label, snug_error *err) {
    csv_table *t = b->t;
    t->label = t->ncols - 1;
    if (label) {
        for (t->label = 0; t->label < t->ncols && strcmp(t->columns[t->label], label) != 0; t->label++) {}
        if (t->label == t->ncols) {
            char list[LIST_MAX + 32];
            return snug_fail(err, SNUG_E_FORMAT, "%s:1: no column is named '%s' for the labels; the columns "
                             "are: %s", b->rd.path, shown(label).text, list_names(t->columns, t->ncols, list,
                                                                               sizeof list));
        }
    }
    if (t->ncols < 2)
        return snug_fail(err, SNUG_E_FORMAT, "%s:1: one column ('%s', the labels) and no features: a table "
                         "needs a feature column beside the labels", b->rd.path, shown(t->columns[0]).text);
    t->features = t->ncols - 1;
    return SNUG_OK;
}

/* A validation table has the training table's columns, in its order, with the same label column. */
static snug_status check_same_columns(csv_build *b, snug_error *err) {
    const csv_table *t = b->t, *tr = b->train;
    size_t c = 0;
    while (c < t->ncols && c < tr->ncols && strcmp(t->columns[c], tr->columns[c]) == 0) c++;
    if (c == t->ncols && c == tr->ncols && t->label == tr->label) return SNUG_OK;
    if (c == t->ncols && c == tr->ncols)
        return snug_fail(err, SNUG_E_FORMAT, "%s:1: the labels are " COLUMN_FMT ", in the training table %s "
                         COLUMN_FMT ": use the same label column", b->rd.path, COLUMN_ARGS(t, t->label), tr->path,
                         COLUMN_ARGS(tr, tr->label));
    return snug_fail(err, SNUG_E_FORMAT, "%s:1: the columns differ from those of the training table %s from column %zu "
                     "('%s' here, '%s' there; %zu and %zu columns): a validation table needs the training "
                     "table's columns in its order", b->rd.path, tr->path, c + 1,
                     shown(c < t->ncols ? t->columns[c] : "").text, shown(c < tr->ncols ? tr->columns[c] : "").text,
                     t->ncols, tr->ncols);
}

/* The header's names into b->t->columns (a BOM skipped), checked, the label column found. */
static snug_status read_header(csv_build *b, const char *label, snug_error *err) {
    bool got = false;
    snug_status s = csv_reader_next(&b->rd, &got, err);
    if (s != SNUG_OK) return s;
    if (!got) return snug_fail(err, SNUG_E_FORMAT, "%s: the file is empty: the first line must be the header "
                               "(the column names), then one row per sample", b->rd.path);
    char *line = b->rd.line;
    if (strncmp(line, UTF8_BOM, 3) == 0) memmove(line, line + 3, strlen(line + 3) + 1);
    size_t commas = 0, count = 0;
    for (const char *p = line; *p; p++) commas += *p == ',';
    b->cells = malloc((commas + 1) * sizeof *b->cells);
    if (!b->cells) return snug_fail(err, SNUG_E_OOM, "%s:1: out of host memory for the header", b->rd.path);
    s = split_line(b, commas + 1, &count, err);
    if (s != SNUG_OK) return s;
    csv_table *t = b->t;
    t->columns = calloc(count, sizeof *t->columns);
    if (!t->columns) return snug_fail(err, SNUG_E_OOM, "%s:1: out of host memory for the header", b->rd.path);
    for (t->ncols = 0; t->ncols < count; t->ncols++)
        if (!(t->columns[t->ncols] = strdup(b->cells[t->ncols])))
            return snug_fail(err, SNUG_E_OOM, "%s:1: out of host memory for the header", b->rd.path);
    s = check_names(b, err);
    if (s == SNUG_OK) s = find_label(b, label, err);
    if (s == SNUG_OK && b->train) s = check_same_columns(b, err);
    return s;
}

/* Room for one more row, within the cap on features. */
static snug_status grow(csv_build *b, snug_error *err) {
    const size_t f = b->t->features;
    size_t bytes;
    if (!size_mul(b->n + 1, f * sizeof(float), &bytes) || bytes > CSV_MAX_FEATURE_BYTES)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: more than 1 GiB of features (%zu rows of %zu): a table is "
                         "read whole into memory; train on a part of it, or read it on demand with "
                         "snug_dataset_from_source", b->rd.path, b->rd.number, b->n + 1, f);
    if (b->n < b->cap) return SNUG_OK;
    const size_t cap = b->cap ? 2 * b->cap : CSV_FIRST_ROWS;
    double *x = realloc(b->x, cap * f * sizeof *x);
    if (x) b->x = x;
    int32_t *y = x ? realloc(b->y, cap * sizeof *y) : NULL;
    if (y) b->y = y;
    if (!x || !y)
        return snug_fail(err, SNUG_E_OOM, "%s:%zu: out of host memory for %zu rows of %zu features", b->rd.path,
                         b->rd.number, cap, f);
    b->cap = cap;
    return SNUG_OK;
}

static snug_status feature(csv_build *b, size_t c, double *v, snug_error *err) {
    const char *cell = b->cells[c];
    const csv_table *t = b->t;
    switch (csv_number(cell, v)) {
    case CSV_NUMBER: return SNUG_OK;
    case CSV_MISSING:
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is %s%s%s, a missing value: missing values "
                         "are not supported: fill or drop the row", b->rd.path, b->rd.number, COLUMN_ARGS(t, c),
                         cell[0] ? "'" : "empty", shown(cell).text, cell[0] ? "'" : "");
    case CSV_NONFINITE:
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s', not a finite float32 value: "
                         "replace it with a finite number or drop the row", b->rd.path, b->rd.number,
                         COLUMN_ARGS(t, c), shown(cell).text);
    default:
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s', not a number: features are "
                         "numbers (encode a category as numbers or one column per value, or choose this column as "
                         "the labels)", b->rd.path, b->rd.number, COLUMN_ARGS(t, c), shown(cell).text);
    }
}

/* The kind of the first label decides the column's (a validation table's is the training table's). */
static void choose_kind(csv_build *b, csv_cell_kind k) {
    if (b->kind != LABELS_UNKNOWN) return;
    b->kind = b->train ? (b->train->names ? LABELS_NAMES : LABELS_NUMBERS)
                       : k == CSV_TEXT ? LABELS_NAMES : LABELS_NUMBERS;
    b->kind_line = b->rd.number;
}

/* Where the labels' kind comes from, for a message: "the labels are names (line 2's is one)". */
static const char *kind_origin(const csv_build *b, char *buf, size_t len, const char *kind) {
    if (b->train) snprintf(buf, len, "the labels of the training table %s are %s", b->train->path, kind);
    else snprintf(buf, len, "the labels are %s (line %zu's is one)", kind, b->kind_line);
    return buf;
}

static snug_status numeric_label(csv_build *b, const char *cell, csv_cell_kind k, double v, int32_t *y,
                                 snug_error *err) {
    char origin[1200];
    const csv_table *t = b->t;
    const size_t c = t->label, limit = b->train ? b->train_classes : CSV_MAX_CLASSES;
    if (k == CSV_TEXT)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s', a name, but %s: labels are all class "
                         "numbers or all names", b->rd.path, b->rd.number, COLUMN_ARGS(t, c), shown(cell).text,
                         kind_origin(b, origin, sizeof origin, "class numbers"));
    if (k != CSV_NUMBER || v < 0 || v != floor(v))
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s': a numeric label is a class "
                         "number 0, 1, 2, ... (or give every row a class name)", b->rd.path, b->rd.number,
                         COLUMN_ARGS(t, c), shown(cell).text);
    if (v >= (double)limit)
        return b->train ? snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is class %.0f, but the training "
                                    "table %s has classes 0 to %zu only", b->rd.path, b->rd.number,
                                    COLUMN_ARGS(t, c), v, b->train->path, limit - 1)
                        : snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is class %.0f, above the most "
                                    "there may be (%d): is this column the labels?", b->rd.path, b->rd.number,
                                    COLUMN_ARGS(t, c), v, CSV_MAX_CLASSES - 1);
    *y = (int32_t)v;
    if (*y > b->max_label) b->max_label = *y;
    return SNUG_OK;
}

static snug_status named_label(csv_build *b, const char *cell, csv_cell_kind k, int32_t *y, snug_error *err) {
    char origin[1200];
    const csv_table *t = b->t;
    const size_t c = t->label;
    if (k != CSV_TEXT)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s', a number, but %s: labels are all "
                         "class numbers or all names", b->rd.path, b->rd.number, COLUMN_ARGS(t, c), shown(cell).text,
                         kind_origin(b, origin, sizeof origin, "names"));
    if (b->train) {
        size_t id;
        if (!label_find_sorted(b->train->names, b->train_classes, cell, &id)) {
            char list[LIST_MAX + 32];
            return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " is '%s', a class the training table %s "
                             "does not have (its classes: %s)", b->rd.path, b->rd.number, COLUMN_ARGS(t, c),
                             shown(cell).text, b->train->path,
                             list_names(b->train->names, b->train_classes, list, sizeof list));
        }
        *y = (int32_t)id;
        return SNUG_OK;
    }
    size_t id;
    if (label_set_id(&b->set, cell, &id)) {
        *y = (int32_t)id;
        return SNUG_OK;
    }
    if (b->set.count >= CSV_MAX_CLASSES)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " holds more than %d different names: is this "
                         "column the labels?", b->rd.path, b->rd.number, COLUMN_ARGS(t, c), CSV_MAX_CLASSES);
    return snug_fail(err, SNUG_E_OOM, "%s:%zu: out of host memory for the class names", b->rd.path, b->rd.number);
}

static snug_status label(csv_build *b, int32_t *y, snug_error *err) {
    const char *cell = b->cells[b->t->label];
    double v = 0;
    const csv_cell_kind k = csv_number(cell, &v);
    if (k == CSV_MISSING) return feature(b, b->t->label, &v, err);
    choose_kind(b, k);
    return b->kind == LABELS_NAMES ? named_label(b, cell, k, y, err) : numeric_label(b, cell, k, v, y, err);
}

/* One data line into row b->n. */
static snug_status read_row(csv_build *b, snug_error *err) {
    const csv_table *t = b->t;
    size_t count = 0;
    snug_status s = split_line(b, t->ncols, &count, err);
    if (s != SNUG_OK) return s;
    if (count != t->ncols)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: %zu cells, but the header has %zu columns: every row needs "
                         "one cell per column (look for a missing or extra comma; quote a cell that holds one)",
                         b->rd.path, b->rd.number, count, t->ncols);
    s = grow(b, err);
    if (s != SNUG_OK) return s;
    double *x = b->x + b->n * t->features;
    for (size_t c = 0; c < t->ncols && s == SNUG_OK; c++)
        if (c != t->label) s = feature(b, c, x++, err);
    if (s == SNUG_OK) s = label(b, &b->y[b->n], err);
    if (s == SNUG_OK) b->n++;
    return s;
}

/* Every data line; blank lines only at the end. */
static snug_status read_rows(csv_build *b, snug_error *err) {
    size_t blank = 0;  /* the first blank line of a run, 0 when none */
    for (;;) {
        bool got = false;
        snug_status s = csv_reader_next(&b->rd, &got, err);
        if (s != SNUG_OK || !got) return s;
        if (is_blank_line(b->rd.line)) {
            if (!blank) blank = b->rd.number;
            continue;
        }
        if (blank)
            return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: a blank line before more rows (line %zu): remove it "
                             "(blank lines may only end the file)", b->rd.path, blank, b->rd.number);
        s = read_row(b, err);
        if (s != SNUG_OK) return s;
    }
}

/* ---- after reading ---- */

/* Mean and standard deviation of every feature column over the rows (two passes, in double). */
static snug_status column_stats(csv_build *b, snug_error *err) {
    csv_table *t = b->t;
    const size_t f = t->features, n = b->n;
    t->mean = calloc(f, sizeof *t->mean);
    t->std = calloc(f, sizeof *t->std);
    if (!t->mean || !t->std) return snug_fail(err, SNUG_E_OOM, "%s: out of host memory for column statistics",
                                              t->path);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < f; j++) t->mean[j] += b->x[i * f + j];
    for (size_t j = 0; j < f; j++) t->mean[j] /= (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < f; j++) {
            const double d = b->x[i * f + j] - t->mean[j];
            t->std[j] += d * d;
        }
    /* a constant column stays at 0 once centred, rather than dividing by 0 */
    for (size_t j = 0; j < f; j++) {
        t->std[j] = sqrt(t->std[j] / (double)n);
        if (!(t->std[j] > 0)) t->std[j] = 1.0;
    }
    return SNUG_OK;
}

/* The doubles into float32 in place (each float lands before the double it comes from is overwritten: byte 4i
 * from byte 8i), standardised when stats is given. Through memcpy: the buffer changes type under the loop. */
static snug_status to_floats(csv_build *b, const csv_table *stats, snug_error *err) {
    const size_t f = b->t->features, total = b->n * f;
    unsigned char *bytes = (unsigned char *)b->x;
    for (size_t i = 0; i < total; i++) {
        double d;
        memcpy(&d, bytes + i * sizeof d, sizeof d);
        if (stats) d = (d - stats->mean[i % f]) / stats->std[i % f];
        if (!(fabs(d) <= FLT_MAX))
            return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: " COLUMN_FMT " standardised with the statistics of the "
                             "training table %s is beyond float32's range: check that the tables match", b->rd.path,
                             i / f + 2, COLUMN_ARGS(b->t, i % f + (i % f >= b->t->label)), stats->path);
        const float v = (float)d;
        memcpy(bytes + i * sizeof v, &v, sizeof v);
    }
    return SNUG_OK;
}

/* Class names sorted by strcmp and the labels renumbered to match; a validation table takes the training
 * table's names. */
static snug_status class_names(csv_build *b, size_t *classes, snug_error *err) {
    csv_table *t = b->t;
    if (b->kind != LABELS_NAMES) {
        *classes = b->train ? b->train_classes : (size_t)b->max_label + 1;
        return SNUG_OK;
    }
    *classes = b->train ? b->train_classes : b->set.count;
    bool ok = b->train ? label_copy(b->train->names, b->train_classes, &t->names)
                       : label_set_sort(&b->set, b->y, b->n, &t->names);
    return ok ? SNUG_OK : snug_fail(err, SNUG_E_OOM, "%s: out of host memory for the class names", t->path);
}

/* The rows into t (features as floats, labels, statistics); t keeps the arrays. */
static snug_status finish(csv_build *b, const snug_csv_options *o, size_t *classes, snug_error *err) {
    csv_table *t = b->t;
    if (b->n == 0)
        return snug_fail(err, SNUG_E_FORMAT, "%s: no data rows after the header: add one row per sample",
                         b->rd.path);
    snug_status s = class_names(b, classes, err);
    if (s == SNUG_OK) s = column_stats(b, err);
    if (s == SNUG_OK) s = to_floats(b, o->standardise ? (b->train ? b->train : t) : NULL, err);
    if (s != SNUG_OK) return s;
    t->standardised = o->standardise;
    if (t->standardised && b->train) { /* what it was read with, kept past the training table */
        memcpy(t->mean, b->train->mean, t->features * sizeof *t->mean);
        memcpy(t->std, b->train->std, t->features * sizeof *t->std);
    }
    float *x = realloc(b->x, b->n * t->features * sizeof *x);
    t->x = x ? x : (float *)b->x;
    t->y = b->y;
    b->x = NULL;
    b->y = NULL;
    return SNUG_OK;
}

static snug_status check_open_args(const char *path, const snug_csv_options *o, snug_dataset **out,
                                   snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_csv_open: out is NULL");
    *out = NULL;
    if (!path) return snug_fail(err, SNUG_E_ARG, "snug_csv_open: path is NULL");
    if (o->stats_from && o->stats_from->ops != &csv_ops)
        return snug_fail(err, SNUG_E_ARG, "snug_csv_open: %s: stats_from is not a CSV data set (snug_csv_open's)",
                         path);
    return SNUG_OK;
}

static snug_status read_table(csv_build *b, const char *path, const snug_csv_options *o, size_t *classes,
                              snug_error *err) {
    b->t = calloc(1, sizeof *b->t);
    if (!b->t || !(b->t->path = strdup(path)))
        return snug_fail(err, SNUG_E_OOM, "snug_csv_open: out of host memory for %s", path);
    snug_status s = csv_reader_open(&b->rd, path, err);
    if (s == SNUG_OK) s = read_header(b, o->label, err);
    if (s == SNUG_OK) s = read_rows(b, err);
    if (s == SNUG_OK) s = finish(b, o, classes, err);
    return s;
}

/* The training table as weights recorded it (snug_csv_options.trained): a table without rows that another is read
 * by, borrowing the record's arrays. Its class names are a CSV table's (sorted, one per class) or none. */
static snug_status recorded_table(const snug_weights_data *w, char *where, csv_table *ref, snug_error *err) {
    const snug_table_stats *s = &w->table;
    *ref = (csv_table){.path = where, .columns = s->names, .ncols = s->columns, .label = s->label,
                       .features = s->columns - 1, .mean = s->mean, .std = s->std,
                       .names = w->classes ? w->class_names : NULL};
    bool sorted = w->classes == 0 || w->classes == s->classes;
    for (size_t c = 1; sorted && c < w->classes; c++) sorted = strcmp(w->class_names[c - 1], w->class_names[c]) < 0;
    return sorted ? SNUG_OK : snug_fail(err, SNUG_E_FORMAT, "%s: the class names are not a CSV table's (%zu names "
                                        "for %zu classes, each once, sorted)", where, w->classes, s->classes);
}

snug_status snug_csv_open(const char *path, const snug_csv_options *o, snug_dataset **out, snug_error *err) {
    const snug_csv_options none = {0};
    if (!o) o = &none;
    snug_status s = check_open_args(path, o, out, err);
    if (s != SNUG_OK) return s;
    csv_table recorded;
    char where[] = "recorded with the weights";
    const bool by_record = !o->stats_from && o->trained && o->trained->table.columns > 1;
    if (by_record && (s = recorded_table(o->trained, where, &recorded, err)) != SNUG_OK) return s;
    csv_build b = {.train = o->stats_from ? o->stats_from->impl : by_record ? &recorded : NULL,
                   .train_classes = o->stats_from ? o->stats_from->classes
                                                  : by_record ? o->trained->table.classes : 0};
    size_t classes = 0;
    s = read_table(&b, path, o, &classes, err);
    snug_dataset *ds = s == SNUG_OK ? calloc(1, sizeof *ds) : NULL;
    if (s == SNUG_OK && !ds) s = snug_fail(err, SNUG_E_OOM, "snug_csv_open: out of host memory for %s", path);
    csv_reader_close(&b.rd);
    free(b.cells);
    free(b.x);
    free(b.y);
    label_set_free(&b.set);
    if (s != SNUG_OK) {
        table_free(b.t, classes);
        return s;
    }
    const size_t f = b.t->features;
    *ds = (snug_dataset){.ops = &csv_ops, .n = b.n, .sample_shape = {.rank = 3, .dims = {f, 1, 1}},
                         .sample_numel = f, .classes = classes, .targets_per_sample = 1,
                         .memory_bytes = b.n * f * sizeof(float) + b.n * sizeof(int32_t), .impl = b.t};
    *out = ds;
    return SNUG_OK;
}
