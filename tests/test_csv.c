/* CSV tables (snug_csv_open and the csv:FILE[,FILE2] data set): small tables written here into a temporary
 * folder and read back value by value (numeric and named labels, a label column by name, standardisation against
 * a float64 reference, a validation table on its training table's statistics, CRLF, BOM and quoted names); every
 * refusal, with the line and column its message must name; and a linear model that learns a separable table
 * through snug_data_open. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"
#include "data/dataset.h"
#include "test_util.h"

#define MAX_PATHS 128

static char tmp_dir[64];
static char created[MAX_PATHS][256];  /* files and folders, removed in reverse order */
static int n_created;

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_csv_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
    (void)state;
    for (int i = n_created - 1; i >= 0; i--) remove(created[i]);
    return rmdir(tmp_dir);
}

/* tmp/name, remembered for removal. */
static const char *record(const char *name) {
    assert_true(n_created < MAX_PATHS);
    char *p = created[n_created++];
    snprintf(p, sizeof created[0], "%s/%s", tmp_dir, name);
    return p;
}

/* Writes len bytes to tmp/name; returns its path. */
static const char *put_bytes(const char *name, const void *bytes, size_t len) {
    const char *path = record(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static const char *put(const char *name, const char *text) { return put_bytes(name, text, strlen(text)); }

static snug_dataset *open_ok(const char *path, const snug_csv_options *o) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_csv_open(path, o, &ds, &err);
    if (s != SNUG_OK) print_error("%s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    assert_non_null(ds);
    return ds;
}

typedef struct table_read {
    float *x;   /* (n, features) */
    int32_t *y; /* (n) */
} table_read;

/* Every sample of ds, in order. */
static table_read read_all(const snug_dataset *ds) {
    const size_t n = ds->n;
    size_t *idx = malloc(n * sizeof *idx);
    table_read r = {malloc(n * ds->sample_numel * sizeof *r.x), malloc(n * sizeof *r.y)};
    assert_true(idx && r.x && r.y);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    ds->ops->fill_inputs(ds, idx, n, r.x);
    ds->ops->fill_targets(ds, idx, n, r.y);
    free(idx);
    return r;
}

static void release(table_read r) {
    free(r.x);
    free(r.y);
}

static void expect_floats(const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) print_error("value %zu: %g, want %g\n", i, (double)got[i], (double)want[i]);
        assert_true(got[i] == want[i]);
    }
}

/* ---- reading ---- */

static void test_numeric_labels(void **state) {
    (void)state;
    const char *path = put("numeric.csv", "a,b,label\n1,2,0\n3,4e1,2\n5.5,-6,1\n");
    snug_dataset *ds = open_ok(path, NULL);
    assert_int_equal(snug_dataset_size(ds), 3);
    const snug_shape s = snug_dataset_sample_shape(ds);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dims[0], 2);
    assert_int_equal(s.dims[1], 1);
    assert_int_equal(s.dims[2], 1);
    assert_int_equal(snug_dataset_classes(ds), 3);
    assert_int_equal(ds->targets_per_sample, 1);
    assert_int_equal(snug_dataset_memory(ds, 4), 3 * 2 * sizeof(float) + 3 * sizeof(int32_t));
    assert_null(snug_dataset_class_name(ds, 0));
    table_read r = read_all(ds);
    const float want[6] = {1, 2, 3, 40, 5.5f, -6};
    expect_floats(r.x, want, 6);
    assert_int_equal(r.y[0], 0);
    assert_int_equal(r.y[1], 2);
    assert_int_equal(r.y[2], 1);
    release(r);
    snug_dataset_free(ds);
}

static void test_named_labels_sorted(void **state) {
    (void)state;
    const char *path = put("named.csv", "x,species\n1,virginica\n2,setosa\n3,versicolor\n4,setosa\n5,Zebra\n");
    snug_dataset *ds = open_ok(path, NULL);
    assert_int_equal(snug_dataset_classes(ds), 4);
    /* strcmp order: upper case before lower case */
    const char *want[4] = {"Zebra", "setosa", "versicolor", "virginica"};
    for (size_t i = 0; i < 4; i++) assert_string_equal(snug_dataset_class_name(ds, i), want[i]);
    assert_null(snug_dataset_class_name(ds, 4));
    table_read r = read_all(ds);
    const int32_t y[5] = {3, 1, 2, 1, 0};
    for (size_t i = 0; i < 5; i++) assert_int_equal(r.y[i], y[i]);
    release(r);
    snug_dataset_free(ds);
}

static void test_label_column_by_name(void **state) {
    (void)state;
    const char *path = put("middle.csv", "a,cls,b\n1,dog,2\n3,cat,4\n 5 , dog ,6\n");
    const snug_csv_options o = {.label = "cls"};
    snug_dataset *ds = open_ok(path, &o);
    assert_int_equal(ds->sample_numel, 2);
    assert_int_equal(snug_dataset_classes(ds), 2);
    assert_string_equal(snug_dataset_class_name(ds, 0), "cat");
    table_read r = read_all(ds);
    const float want[6] = {1, 2, 3, 4, 5, 6};
    expect_floats(r.x, want, 6);
    assert_int_equal(r.y[0], 1);
    assert_int_equal(r.y[1], 0);
    assert_int_equal(r.y[2], 1);
    release(r);
    snug_dataset_free(ds);
}

/* (v - mean) / std over the column in double, std with divisor n, 1 for a constant column. */
static void standardise_ref(const double *v, size_t n, size_t f, size_t j, double *mean, double *std) {
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) m += v[i * f + j];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) s += (v[i * f + j] - m) * (v[i * f + j] - m);
    s = sqrt(s / (double)n);
    *mean = m;
    *std = s > 0 ? s : 1;
}

#define SN 40
#define SF 3

/* A table of SN rows: a column far from zero (the timestamps of a day), a small one, a constant one. */
static const char *put_spread_table(const char *name, double *v, unsigned seed) {
    char *text = malloc(64 * (SN + 1));
    size_t at = (size_t)sprintf(text, "time,small,constant,label\n");
    for (size_t i = 0; i < SN; i++) {
        v[i * SF] = 1.7e9 + (double)((i * 7919 + seed) % 86400);
        v[i * SF + 1] = ((double)((i * 37 + seed) % 101) - 50.0) / 1000.0;
        v[i * SF + 2] = 3.25;
        at += (size_t)sprintf(text + at, "%.17g,%.17g,%.17g,%zu\n", v[i * SF], v[i * SF + 1], v[i * SF + 2], i % 3);
    }
    const char *path = put(name, text);
    free(text);
    return path;
}

static void expect_standardised(const float *x, const double *v, const double *mean, const double *std) {
    for (size_t i = 0; i < SN; i++)
        for (size_t j = 0; j < SF; j++) {
            const double want = (v[i * SF + j] - mean[j]) / std[j];
            if (fabs(x[i * SF + j] - want) > 1e-6 * (1 + fabs(want)))
                print_error("row %zu column %zu: %.9g, want %.9g\n", i, j, (double)x[i * SF + j], want);
            assert_true(fabs(x[i * SF + j] - want) <= 1e-6 * (1 + fabs(want)));
        }
}

static void test_standardise(void **state) {
    (void)state;
    double v[SN * SF], mean[SF], std[SF];
    const char *path = put_spread_table("spread.csv", v, 11);
    for (size_t j = 0; j < SF; j++) standardise_ref(v, SN, SF, j, &mean[j], &std[j]);
    assert_true(std[2] == 1);
    const snug_csv_options o = {.standardise = true};
    snug_dataset *ds = open_ok(path, &o);
    table_read r = read_all(ds);
    expect_standardised(r.x, v, mean, std);
    release(r);
    snug_dataset_free(ds);
}

static void test_stats_from(void **state) {
    (void)state;
    double tv[SN * SF], vv[SN * SF], mean[SF], std[SF];
    const char *train_path = put_spread_table("spread-train.csv", tv, 3);
    const char *val_path = put_spread_table("spread-val.csv", vv, 500);
    for (size_t j = 0; j < SF; j++) standardise_ref(tv, SN, SF, j, &mean[j], &std[j]);
    snug_dataset *train = open_ok(train_path, &(snug_csv_options){.standardise = true});
    snug_dataset *val = open_ok(val_path, &(snug_csv_options){.standardise = true, .stats_from = train});
    table_read r = read_all(val);
    expect_standardised(r.x, vv, mean, std);
    release(r);
    snug_dataset_free(val);

    /* named labels: the training table's classes, even those the validation table lacks; freed in any order */
    const char *tn = put("names-train.csv", "x,y\n1,b\n2,a\n3,c\n4,d\n");
    const char *vn = put("names-val.csv", "x,y\n5,c\n6,b\n");
    snug_dataset *ntrain = open_ok(tn, NULL);
    val = open_ok(vn, &(snug_csv_options){.stats_from = ntrain});
    snug_dataset_free(ntrain);
    assert_int_equal(snug_dataset_classes(val), 4);
    assert_string_equal(snug_dataset_class_name(val, 3), "d");
    r = read_all(val);
    const float want[2] = {5, 6};
    expect_floats(r.x, want, 2);
    assert_int_equal(r.y[0], 2);
    assert_int_equal(r.y[1], 1);
    release(r);
    snug_dataset_free(val);

    /* numeric labels: the training table's class count */
    const char *vnum = put("numbers-val.csv", "time,small,constant,label\n1,2,3,0\n");
    val = open_ok(vnum, &(snug_csv_options){.stats_from = train});
    assert_int_equal(snug_dataset_classes(val), 3);
    r = read_all(val);
    const float raw[3] = {1, 2, 3};  /* not standardised when not asked */
    expect_floats(r.x, raw, 3);
    release(r);
    snug_dataset_free(val);
    snug_dataset_free(train);
}

static void test_crlf_bom_quotes(void **state) {
    (void)state;
    const char *path = put("crlf.csv", "\xEF\xBB\xBF\"a, b\",\"say \"\"hi\"\"\" , c\r\n1,x,2\r\n3,\"y\",4\r\n\r\n\n");
    const snug_csv_options o = {.label = "say \"hi\""};
    snug_dataset *ds = open_ok(path, &o);
    assert_int_equal(snug_dataset_size(ds), 2);
    assert_int_equal(snug_dataset_classes(ds), 2);
    table_read r = read_all(ds);
    const float want[4] = {1, 2, 3, 4};
    expect_floats(r.x, want, 4);
    assert_int_equal(r.y[1], 1);
    release(r);
    snug_dataset_free(ds);
    /* the first column's name is read without the BOM */
    ds = open_ok(put("bom.csv", "\xEF\xBB\xBF" "first,second\n0,1\n1,2\n"), &(snug_csv_options){.label = "first"});
    assert_int_equal(snug_dataset_classes(ds), 2);
    snug_dataset_free(ds);
    /* no line end after the last row */
    ds = open_ok(put("no-end.csv", "a,b\n1,0\n2,1"), NULL);
    assert_int_equal(snug_dataset_size(ds), 2);
    snug_dataset_free(ds);
}

/* ---- refusals ---- */

/* Opens path with o and expects status want and a message holding each of the NULL-terminated strings. */
static void expect_error(const char *path, const snug_csv_options *o, snug_status want, ...) {
    snug_dataset *ds = (snug_dataset *)1;
    snug_error err = {0};
    const snug_status got = snug_csv_open(path, o, &ds, &err);
    va_list ap;
    va_start(ap, want);
    bool all = true;
    for (const char *s; (s = va_arg(ap, const char *));) all = all && strstr(err.message, s);
    va_end(ap);
    if (got != want || !all) print_error("status %d (want %d), message: %s\n", got, want, err.message);
    assert_int_equal(got, want);
    assert_true(all);
    assert_null(ds);
}

/* The table tmp/name holding text must be refused as SNUG_E_FORMAT with the given strings. */
#define REFUSED(name, text, ...) expect_error(put(name, text), NULL, SNUG_E_FORMAT, __VA_ARGS__, NULL)

static void test_missing_values(void **state) {
    (void)state;
    REFUSED("empty-cell.csv", "a,b,y\n1,2,0\n3,,1\n", "empty-cell.csv:3:", "column 2 'b'", "is empty",
            "missing values are not supported: fill or drop the row");
    REFUSED("na.csv", "a,b,y\n1,NA,0\n", "na.csv:2:", "column 2 'b'", "'NA'", "missing values");
    REFUSED("nan.csv", "a,b,y\n1,2,0\nNaN,2,0\n", "nan.csv:3:", "column 1 'a'", "missing values");
    REFUSED("question.csv", "a,b,y\n1,2,0\n1,2,0\n1,?,0\n", "question.csv:4:", "column 2 'b'", "missing");
    REFUSED("label-missing.csv", "a,b,y\n1,2,\n", "label-missing.csv:2:", "column 3 'y'", "missing");
}

static void test_bad_numbers(void **state) {
    (void)state;
    REFUSED("text.csv", "a,b,y\n1,2,0\n1,two,0\n", "text.csv:3:", "column 2 'b'", "'two', not a number");
    REFUSED("inf.csv", "a,b,y\n1,inf,0\n", "inf.csv:2:", "column 2 'b'", "not a finite float32 value");
    REFUSED("big.csv", "a,b,y\n1e39,1,0\n", "big.csv:2:", "column 1 'a'", "not a finite float32 value");
    REFUSED("minus-inf.csv", "a,b,y\n1,-Infinity,0\n", "minus-inf.csv:2:", "column 2 'b'", "finite");
    /* text from the file is escaped: it cannot drive the terminal that shows the message */
    REFUSED("escape.csv", "a,b\x1b[2J,y\n1,\x1b[2Jx,0\n", "escape.csv:2:", "column 2 'b\\x1b[2J'",
            "'\\x1b[2Jx', not a number");
}

static void test_bad_rows(void **state) {
    (void)state;
    REFUSED("few.csv", "a,b,y\n1,2,0\n1,2\n", "few.csv:3:", "2 cells, but the header has 3 columns");
    REFUSED("many.csv", "a,b,y\n1,2,0,4\n", "many.csv:2:", "4 cells, but the header has 3 columns");
    REFUSED("blank.csv", "a,b,y\n1,2,0\n\n1,2,0\n", "blank.csv:3:", "blank line before more rows (line 4)");
    REFUSED("open-quote.csv", "a,b,y\n1,\"2,0\n", "open-quote.csv:2:", "cell 2", "quote is not closed");
    REFUSED("after-quote.csv", "a,\"b\"x,y\n1,2,0\n", "after-quote.csv:1:", "cell 2", "after the closing quote");
}

static void test_bad_headers(void **state) {
    (void)state;
    REFUSED("dup.csv", "a,b,a,y\n1,2,3,0\n", "dup.csv:1:", "columns 1 and 3 are both named 'a'", "unique");
    REFUSED("unnamed.csv", "a,,y\n1,2,0\n", "unnamed.csv:1:", "column 2 has no name");
    REFUSED("one-column.csv", "y\n0\n", "one-column.csv:1:", "no features");
    REFUSED("empty.csv", "", "empty.csv:", "empty", "header");
    REFUSED("no-rows.csv", "a,b,y\n", "no-rows.csv:", "no data rows");
    REFUSED("no-rows-blank.csv", "a,b,y\r\n\r\n", "no-rows-blank.csv:", "no data rows");
    const snug_csv_options o = {.label = "class"};
    expect_error(put("unknown-label.csv", "a,b,y\n1,2,0\n"), &o, SNUG_E_FORMAT, "unknown-label.csv:1:",
                 "no column is named 'class'", "the columns are: a, b, y", NULL);
}

static void test_bad_labels(void **state) {
    (void)state;
    REFUSED("negative.csv", "a,b,y\n1,2,0\n1,2,-1\n", "negative.csv:3:", "column 3 'y'", "'-1'", "class number");
    REFUSED("fraction.csv", "a,b,y\n1,2,1.5\n", "fraction.csv:2:", "column 3 'y'", "'1.5'", "class number");
    REFUSED("mixed-name.csv", "a,b,y\n1,2,0\n1,2,cat\n", "mixed-name.csv:3:", "column 3 'y'", "'cat'",
            "all class numbers or all names");
    REFUSED("mixed-number.csv", "a,b,y\n1,2,cat\n1,2,3\n", "mixed-number.csv:3:", "column 3 'y'", "'3', a number",
            "all class numbers or all names");
    REFUSED("huge-class.csv", "a,y\n1,70000\n", "huge-class.csv:2:", "column 2 'y'", "is this column the labels");
}

static void test_unreadable(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/no-such.csv", tmp_dir);
    expect_error(path, NULL, SNUG_E_IO, "no-such.csv", "No such file", NULL);
    const char *dir = record("a-folder.csv");
    assert_int_equal(mkdir(dir, 0755), 0);
    expect_error(dir, NULL, SNUG_E_IO, "a-folder.csv", "not a regular file", NULL);
    expect_error(NULL, NULL, SNUG_E_ARG, "path is NULL", NULL);
    snug_dataset *mem = NULL;
    const float x[2] = {0, 1};
    const int32_t y[2] = {0, 1};
    assert_int_equal(snug_dataset_from_memory(x, y, 2, 1, 1, 1, 2, &mem, NULL), SNUG_OK);
    expect_error(put("ok.csv", "a,y\n1,0\n"), &(snug_csv_options){.stats_from = mem}, SNUG_E_ARG,
                 "not a CSV data set", NULL);
    assert_null(snug_dataset_class_name(mem, 0));
    snug_dataset_free(mem);
}

static void test_long_line_and_nul(void **state) {
    (void)state;
    const size_t len = ((size_t)1 << 20) + 100;
    char *text = malloc(len + 32);
    size_t at = (size_t)sprintf(text, "a,y\n1,0\n");
    while (at < len) at += (size_t)sprintf(text + at, "1,");
    at += (size_t)sprintf(text + at, "0\n");
    expect_error(put_bytes("long.csv", text, at), NULL, SNUG_E_FORMAT, "long.csv:3:", "longer than 1 MiB", NULL);
    free(text);
    static const char nul[] = "a,y\n1,0\n1\0,0\n";
    expect_error(put_bytes("nul.csv", nul, sizeof nul - 1), NULL, SNUG_E_FORMAT, "nul.csv:3:", "NUL byte", NULL);
}

static void test_validation_refusals(void **state) {
    (void)state;
    snug_dataset *names = open_ok(put("v-train.csv", "x,y\n1,a\n2,b\n"), NULL);
    const snug_csv_options on_names = {.stats_from = names, .standardise = true};
    expect_error(put("v-unseen.csv", "x,y\n1,a\n2,c\n"), &on_names, SNUG_E_FORMAT, "v-unseen.csv:3:",
                 "column 2 'y'", "'c', a class the training table", "v-train.csv", "its classes: a, b", NULL);
    expect_error(put("v-number.csv", "x,y\n1,0\n"), &on_names, SNUG_E_FORMAT, "v-number.csv:2:", "column 2 'y'",
                 "a number", NULL);
    expect_error(put("v-columns.csv", "z,y\n1,a\n"), &on_names, SNUG_E_FORMAT, "v-columns.csv:1:",
                 "differ from those of the training table", "column 1", NULL);
    expect_error(put("v-label.csv", "x,y\n1,a\n"), &(snug_csv_options){.stats_from = names, .label = "x"},
                 SNUG_E_FORMAT, "v-label.csv:1:", "use the same label column", NULL);
    snug_dataset_free(names);
    snug_dataset *numbers = open_ok(put("v-train-n.csv", "x,y\n1,0\n2,1\n"), NULL);
    expect_error(put("v-beyond.csv", "x,y\n1,1\n1,2\n"), &(snug_csv_options){.stats_from = numbers},
                 SNUG_E_FORMAT, "v-beyond.csv:3:", "column 2 'y'", "classes 0 to 1", NULL);
    snug_dataset_free(numbers);
    /* a validation value that standardised by a nearly constant training column leaves float32's range */
    snug_dataset *narrow = open_ok(put("v-narrow.csv", "x,y\n1,0\n1.000001,1\n"), NULL);
    expect_error(put("v-far.csv", "x,y\n1,0\n1e38,0\n"), &(snug_csv_options){.stats_from = narrow,
                 .standardise = true}, SNUG_E_FORMAT, "v-far.csv:3:", "column 1 'x'", "beyond float32's range",
                 NULL);
    snug_dataset_free(narrow);
}

/* ---- the named data set ---- */

static const snug_shape TWO_FEATURES = {.rank = 3, .dims = {2, 1, 1}};

static void test_named_data_set(void **state) {
    (void)state;
    const char *train = put("d-train.csv", "a,b,y\n0,10,0\n2,30,1\n");
    put("d-val.csv", "a,b,y\n1,20,1\n");
    char name[600], why[256];
    snprintf(name, sizeof name, "csv:%s,%s/d-val.csv", train, tmp_dir);
    assert_true(snug_data_name_valid(name, why, sizeof why));
    assert_true(snug_data_name_valid("csv:x.csv", why, sizeof why));
    assert_false(snug_data_name_valid("csv:", why, sizeof why));
    assert_non_null(strstr(why, "FILE"));
    assert_false(snug_data_name_valid("csv:,b.csv", why, sizeof why));
    assert_false(snug_data_name_valid("table", why, sizeof why));
    assert_non_null(strstr(why, "csv:FILE"));

    snug_data d;
    snug_error err = {0};
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, true, 0, &d, &err), SNUG_OK);
    assert_string_equal(d.kind, "csv");
    assert_string_equal(d.eval_name, "validation");
    assert_string_equal(d.unit, "rows of 2 features");
    assert_non_null(strstr(d.source, "d-val.csv"));
    table_read r = read_all(d.train);
    const float standard[4] = {-1, -1, 1, 1};  /* on by default */
    expect_floats(r.x, standard, 4);
    release(r);
    r = read_all(d.eval);
    const float middle[2] = {0, 0};  /* the training table's mean */
    expect_floats(r.x, middle, 2);
    release(r);
    snug_data_close(&d);

    /* no validation table: none when training, the table itself when only evaluating */
    snprintf(name, sizeof name, "csv:%s", train);
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, true, 0, &d, &err), SNUG_OK);
    assert_non_null(d.train);
    assert_null(d.eval);
    snug_data_close(&d);
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, false, 0, &d, &err), SNUG_OK);
    assert_null(d.train);
    assert_int_equal(snug_dataset_size(d.eval), 2);
    assert_string_equal(d.eval_name, "training-set");
    snug_data_close(&d);
    /* only evaluating a validation table: standardised by the training table, which is not kept */
    snprintf(name, sizeof name, "csv:%s,%s/d-val.csv", train, tmp_dir);
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, false, 0, &d, &err), SNUG_OK);
    assert_null(d.train);
    r = read_all(d.eval);
    expect_floats(r.x, middle, 2);
    release(r);
    snug_data_close(&d);

    /* a file whose name holds a comma is one table when it exists under the whole name */
    const char *comma = put("d,comma.csv", "a,b,y\n0,10,0\n2,30,1\n");
    snprintf(name, sizeof name, "csv:%s", comma);
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, true, 0, &d, &err), SNUG_OK);
    assert_int_equal(snug_dataset_size(d.train), 2);
    assert_null(d.eval);
    snug_data_close(&d);

    const snug_shape three = {.rank = 3, .dims = {3, 1, 1}};
    assert_int_equal(snug_data_open(name, NULL, three, true, 0, &d, &err), SNUG_E_SHAPE);
    assert_non_null(strstr(err.message, "image 2 1 1"));
    assert_null(d.train);
    snprintf(name, sizeof name, "csv:%s,%s/no-such-val.csv", train, tmp_dir);
    assert_int_equal(snug_data_open(name, NULL, TWO_FEATURES, true, 0, &d, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "no-such-val.csv"));
}

/* A linear model learns a separable table, features far from zero and in different units, through the
 * csv:FILE,FILE2 data set (standardised): every validation row right. */
static const char *put_separable(const char *name, size_t n, unsigned seed) {
    char *text = malloc(64 * (n + 1));
    size_t at = (size_t)sprintf(text, "height_mm,weight_g,kind\n");
    for (size_t i = 0; i < n; i++) {
        const double u = (double)((i * 2654435761u + seed) % 1000) / 1000.0;  /* in [0, 1) */
        const double v = (double)((i * 40503u + 7 * seed) % 1000) / 1000.0;
        const bool tall = u + v > 1.0;
        const double margin = tall ? 0.1 : -0.1;  /* pushed away from the line u + v = 1 */
        at += (size_t)sprintf(text + at, "%.4f,%.4f,%s\n", 1500 + 400 * (u + margin / 2), 60000 + 30000 *
                              (v + margin / 2), tall ? "tall" : "short");
    }
    const char *path = put(name, text);
    free(text);
    return path;
}

static void test_trains_to_full_accuracy(void **state) {
    (void)state;
    const char *train = put_separable("sep-train.csv", 96, 1);
    const char *val = put_separable("sep-val.csv", 32, 99);
    static const char model[] = "[model]\nname = table\ninput = image 2 1 1\n\n[flatten]\ntype = flatten\n\n"
                                "[fc]\ntype = linear\nout = 2\n\n[loss]\ntype = softmax_cross_entropy\n";
    const char *model_path = put("table.ini", model);
    snug_error err = {0};
    snug_graph *g = model_file(model_path, &err);
    if (!g) print_error("%s\n", err.message);
    assert_non_null(g);
    char name[600];
    snprintf(name, sizeof name, "csv:%s,%s", train, val);
    snug_data d;
    assert_int_equal(snug_data_open(name, NULL, snug_tensor_shape(g, 0), true, 0, &d, &err), SNUG_OK);
    assert_string_equal(snug_dataset_class_name(d.train, 1), "tall");
    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = 60;
    cfg.optim.lr = 0.2f;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 16, 16, &cfg, &tr, &err), SNUG_OK);
    snug_status s = snug_trainer_fit(tr, d.train, &err);
    if (s != SNUG_OK) print_error("%s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    snug_eval_result res;
    assert_int_equal(snug_trainer_evaluate(tr, d.eval, &res, &err), SNUG_OK);
    print_message("validation: loss %.4f, accuracy %.4f over %zu rows\n", res.loss, res.accuracy, res.items);
    assert_int_equal(res.items, 32);
    assert_true(res.accuracy == 1.0);
    assert_int_equal(snug_trainer_evaluate(tr, d.train, &res, &err), SNUG_OK);
    assert_true(res.accuracy == 1.0);
    trainer_done(tr);
    snug_data_close(&d);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numeric_labels),
        cmocka_unit_test(test_named_labels_sorted),
        cmocka_unit_test(test_label_column_by_name),
        cmocka_unit_test(test_standardise),
        cmocka_unit_test(test_stats_from),
        cmocka_unit_test(test_crlf_bom_quotes),
        cmocka_unit_test(test_missing_values),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_bad_labels),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_long_line_and_nul),
        cmocka_unit_test(test_validation_refusals),
        cmocka_unit_test(test_named_data_set),
        cmocka_unit_test(test_trains_to_full_accuracy),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
