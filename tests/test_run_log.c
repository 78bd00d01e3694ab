/* The run's log and its curve: a log of steps and evaluations reads back field for field (through cJSON, through
 * the library's own reader for CSV, and through Python's json and csv modules); a continued run keeps the lines
 * up to its step and drops the rest; a partial last line is ignored and a malformed line elsewhere refused with
 * its line number; a failing disk is reported once and nothing is appended after; the curve of every kind of
 * log (empty, steps only, one step, non-finite losses, several sets, mean IoU, CSV) parses as XML with its
 * series named. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snug.h"
#include "io/run_log.h"

/* ---- files ---- */

static char dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/snug-run-log-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *in_dir(const char *name) {
    static char paths[4][256];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void append_text(const char *path, const char *text) {
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count_lines(const char *text) {
    size_t n = 0;
    for (const char *c = text; *c; c++) n += *c == '\n';
    return n;
}

/* python3 tests/check_run_log.py ARGS, its exit status. */
static int python_check(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/check_run_log.py' %s", SNUG_SOURCE_DIR, args);
    return system(cmd);
}

/* ---- a run's lines ---- */

static snug_step_stats step_stats(long step) {
    snug_step_stats st = {.step = step, .epoch = (step - 1) / 4, .steps_per_epoch = 4, .total_steps = 12,
                          .items = 64 + (size_t)step, .micro_batches = 4, .loss = 2.302585092994046 / (double)step,
                          .lr = 0.05f * (float)step / 3.0f, .grad_norm = 1.2f + 0.1f * (float)step,
                          .samples_per_s = 812.5 + step / 7.0, .elapsed_s = 0.08 * (double)step};
    if (step == 3) st.loss = NAN, st.grad_norm = INFINITY, st.skipped = true;
    return st;
}

static snug_eval_result eval_result(long step, bool pixels) {
    snug_eval_result r = {.items = 10000, .loss = 0.5 / (double)step, .accuracy = 0.9 + 0.001 * (double)step,
                          .kind = pixels ? SNUG_EVAL_PIXELS : SNUG_EVAL_SAMPLES, .classes = pixels ? 2 : 10};
    r.mean_iou = pixels ? 0.7 + 0.01 * (double)step : 0;
    r.foreground_iou = pixels ? 0.6 + 0.01 * (double)step : 0;
    return r;
}

/* Steps first..last, with an evaluation of `set` after every 4th step (and a second set's after the 8th). */
static void log_steps(snug_run_log *log, long first, long last, bool pixels) {
    snug_error err;
    for (long step = first; step <= last; step++) {
        snug_step_stats st = step_stats(step);
        assert_int_equal(snug_run_log_step(log, &st, (size_t)step * 1000, &err), SNUG_OK);
        if (step % 4) continue;
        snug_eval_result r = eval_result(step, pixels);
        assert_int_equal(snug_run_log_eval(log, &st, &r, "test", &err), SNUG_OK);
        if (step == 8) assert_int_equal(snug_run_log_eval(log, &st, &r, "held-out, \"b\"", &err), SNUG_OK);
    }
}

static void write_log(const char *path, long steps, bool pixels) {
    snug_run_log *log = NULL;
    snug_error err;
    assert_int_equal(snug_run_log_open(path, -1, &log, &err), SNUG_OK);
    log_steps(log, 1, steps, pixels);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
}

/* ---- JSON lines, read back with cJSON ---- */

static double json_number(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    assert_non_null(v);
    if (cJSON_IsNull(v)) return NAN;
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void check_step_json(const cJSON *o, long step) {
    snug_step_stats st = step_stats(step);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "type")->valuestring, "step");
    assert_true(json_number(o, "step") == (double)st.step);
    assert_true(json_number(o, "epoch") == (double)st.epoch);
    if (isnan(st.loss)) assert_true(isnan(json_number(o, "loss")));
    else assert_true(json_number(o, "loss") == st.loss);
    assert_true((float)json_number(o, "lr") == st.lr);
    if (isfinite(st.grad_norm)) assert_true((float)json_number(o, "grad_norm") == st.grad_norm);
    else assert_true(isnan(json_number(o, "grad_norm"))); /* null */
    assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "skipped")));
    assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "skipped")), st.skipped);
    assert_true(json_number(o, "items") == (double)st.items);
    assert_true(json_number(o, "micro_batches") == (double)st.micro_batches);
    assert_true(json_number(o, "samples_per_s") == st.samples_per_s);
    assert_true(json_number(o, "elapsed_s") == st.elapsed_s);
    assert_true(json_number(o, "memory_bytes") == (double)step * 1000);
    assert_int_equal(cJSON_GetArraySize(o), 12);
}

static void check_eval_json(const cJSON *o, long step, const char *set, bool pixels) {
    snug_eval_result r = eval_result(step, pixels);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "type")->valuestring, "eval");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "set")->valuestring, set);
    assert_true(json_number(o, "step") == (double)step);
    assert_true(json_number(o, "epoch") == (double)((step - 1) / 4));
    assert_true(json_number(o, "loss") == r.loss);
    assert_true(json_number(o, "accuracy") == r.accuracy);
    assert_true(json_number(o, "items") == (double)r.items);
    if (pixels) {
        assert_true(json_number(o, "mean_iou") == r.mean_iou);
        assert_true(json_number(o, "foreground_iou") == r.foreground_iou);
    }
    assert_int_equal(cJSON_GetArraySize(o), pixels ? 9 : 7);
}

static void jsonl_reads_back(bool pixels) {
    const char *path = in_dir(pixels ? "pixels.jsonl" : "run.jsonl");
    write_log(path, 12, pixels);
    char *text = slurp(path);
    assert_int_equal(count_lines(text), 12 + 3 + 1);
    long step = 0;
    int evals = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        if (strcmp(cJSON_GetObjectItemCaseSensitive(o, "type")->valuestring, "step") == 0) {
            check_step_json(o, ++step);
        } else {
            const char *set = cJSON_GetObjectItemCaseSensitive(o, "set")->valuestring;
            check_eval_json(o, step, set, pixels);
            evals++;
        }
        cJSON_Delete(o);
    }
    assert_int_equal(step, 12);
    assert_int_equal(evals, 4);
    free(text);
    char args[512];
    snprintf(args, sizeof args, "jsonl '%s' 12 4", path);
    assert_int_equal(python_check(args), 0);
}

static void test_jsonl_fields(void **state) {
    (void)state;
    jsonl_reads_back(false);
    jsonl_reads_back(true);
}

/* The documented line, number for number, and a non-finite loss as null. */
static void test_jsonl_text(void **state) {
    (void)state;
    const char *path = in_dir("text.jsonl");
    snug_run_log *log = NULL;
    snug_error err;
    assert_int_equal(snug_run_log_open(path, -1, &log, &err), SNUG_OK);
    snug_step_stats st = {.step = 1, .epoch = 0, .loss = 2.30, .lr = 0.05f, .grad_norm = 1.2f, .items = 64,
                          .micro_batches = 4, .samples_per_s = 812.5, .elapsed_s = 0.08};
    assert_int_equal(snug_run_log_step(log, &st, 123456, &err), SNUG_OK);
    st.loss = INFINITY, st.skipped = true;
    assert_int_equal(snug_run_log_step(log, &st, 0, &err), SNUG_OK); /* 0: the process's resident bytes */
    snug_eval_result r = {.items = 10000, .loss = 0.25, .accuracy = 0.9875, .kind = SNUG_EVAL_SAMPLES};
    st.step = 100;
    assert_int_equal(snug_run_log_eval(log, &st, &r, "test", &err), SNUG_OK);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
    char *text = slurp(path);
    const char *first = "{\"type\":\"step\",\"step\":1,\"epoch\":0,\"loss\":2.3,\"lr\":0.05,\"grad_norm\":1.2,"
                        "\"skipped\":false,\"items\":64,\"micro_batches\":4,\"samples_per_s\":812.5,\"elapsed_s\":0.08,"
                        "\"memory_bytes\":123456}\n";
    assert_memory_equal(text, first, strlen(first));
    char *second = text + strlen(first);
    assert_non_null(strstr(second, "\"loss\":null,"));
    assert_non_null(strstr(second, "\"skipped\":true,"));
    assert_null(strstr(second, "\"memory_bytes\":0")); /* this process has resident bytes */
    assert_non_null(strstr(text, "{\"type\":\"eval\",\"step\":100,\"epoch\":0,\"set\":\"test\",\"loss\":0.25,"
                                 "\"accuracy\":0.9875,\"items\":10000}\n"));
    free(text);
}

/* ---- CSV ---- */

static void check_record(const run_log_record *rec, long step, const char *set, bool pixels) {
    if (!set) {
        snug_step_stats st = step_stats(step);
        assert_int_equal(rec->type, RUN_LOG_STEP);
        assert_int_equal(rec->step, step);
        assert_int_equal(rec->epoch, st.epoch);
        assert_true(isnan(st.loss) ? isnan(rec->loss) : rec->loss == st.loss);
        assert_true((float)rec->lr == st.lr);
        assert_true(isinf(st.grad_norm) ? isinf(rec->grad_norm) : (float)rec->grad_norm == st.grad_norm);
        assert_int_equal(rec->skipped, st.skipped);
        assert_int_equal(rec->items, st.items);
        assert_int_equal(rec->micro_batches, st.micro_batches);
        assert_true(rec->samples_per_s == st.samples_per_s);
        assert_true(rec->elapsed_s == st.elapsed_s);
        assert_int_equal(rec->memory_bytes, (size_t)step * 1000);
        assert_string_equal(rec->set, "");
        assert_true(isnan(rec->accuracy));
        return;
    }
    snug_eval_result r = eval_result(step, pixels);
    assert_int_equal(rec->type, RUN_LOG_EVAL);
    assert_int_equal(rec->step, step);
    assert_string_equal(rec->set, set);
    assert_true(rec->loss == r.loss);
    assert_true(rec->accuracy == r.accuracy);
    assert_int_equal(rec->items, r.items);
    assert_true(pixels ? rec->mean_iou == r.mean_iou : isnan(rec->mean_iou));
    assert_true(pixels ? rec->foreground_iou == r.foreground_iou : isnan(rec->foreground_iou));
    assert_true(isnan(rec->lr) && isnan(rec->grad_norm) && !rec->skipped && rec->micro_batches == 0);
}

static void test_csv_rows(void **state) {
    (void)state;
    const char *path = in_dir("run.csv");
    write_log(path, 12, true);
    char *text = slurp(path);
    assert_memory_equal(text, RUN_LOG_CSV_HEADER "\n", strlen(RUN_LOG_CSV_HEADER) + 1);
    /* a float in the fewest digits that read back as it */
    assert_non_null(strstr(text, "\nstep,1,0,2.302585092994046,0.016666668,1.3000001,false,65,4,812.6428571428571,"
                                 "0.08,1000,,,,\n"));
    assert_non_null(strstr(text, "\nstep,3,0,nan,0.05,inf,true,67,4,"));
    assert_non_null(strstr(text, "\neval,4,0,0.125,,,,10000,,,,,test,0.904,0.74,0.64\n"));
    assert_non_null(strstr(text, ",\"held-out, \"\"b\"\"\",")); /* quoted, quotes doubled */
    free(text);

    run_log_reader r;
    snug_error err;
    assert_int_equal(run_log_reader_open(&r, path, &err), SNUG_OK);
    long step = 0;
    int evals = 0;
    for (;;) {
        run_log_record rec;
        bool got = false;
        assert_int_equal(run_log_reader_next(&r, &rec, &got, &err), SNUG_OK);
        if (!got) break;
        if (rec.type == RUN_LOG_STEP) check_record(&rec, ++step, NULL, true);
        else check_record(&rec, step, rec.set, true), evals++;
    }
    run_log_reader_close(&r);
    assert_int_equal(step, 12);
    assert_int_equal(evals, 4);
    char args[512];
    snprintf(args, sizeof args, "csv '%s' 12 4", path);
    assert_int_equal(python_check(args), 0);
}

/* ---- a continued run ---- */

/* Steps 1..12 written, the run continued from step 6 with steps 7..9: the first lines up to step 6 (and the
 * evaluation after step 4) stay, byte for byte, and the new lines follow. */
static void resume_keeps(const char *name) {
    const char *path = in_dir(name);
    write_log(path, 12, false);
    char *before = slurp(path);
    snug_run_log *log = NULL;
    snug_error err;
    assert_int_equal(snug_run_log_open(path, 6, &log, &err), SNUG_OK);
    char *kept = slurp(path);
    bool csv = strstr(name, ".csv") != NULL;
    assert_int_equal(count_lines(kept), (size_t)(csv ? 1 : 0) + 6 + 1);
    assert_memory_equal(kept, before, strlen(kept));
    log_steps(log, 7, 9, false);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
    char *after = slurp(path);
    assert_memory_equal(after, kept, strlen(kept));
    assert_int_equal(count_lines(after), (size_t)(csv ? 1 : 0) + 9 + 3);
    assert_memory_equal(after, before, strlen(after)); /* the steps taken again wrote the same lines again */
    assert_int_equal(access(in_dir(csv ? "resume.csv.tmp" : "resume.jsonl.tmp"), F_OK), -1);
    free(before), free(kept), free(after);
}

static void test_resume_truncates(void **state) {
    (void)state;
    resume_keeps("resume.jsonl");
    resume_keeps("resume.csv");
}

/* A run killed while writing a line: the partial line is dropped by the reader, the curve and a resume. */
static void test_partial_last_line(void **state) {
    (void)state;
    const char *path = in_dir("partial.jsonl");
    write_log(path, 5, false);
    append_text(path, "{\"type\":\"step\",\"step\":6,\"ep");
    snug_error err;
    assert_int_equal(snug_curve_write(path, in_dir("partial.svg"), NULL, &err), SNUG_OK);
    snug_run_log *log = NULL;
    assert_int_equal(snug_run_log_open(path, 5, &log, &err), SNUG_OK);
    log_steps(log, 6, 6, false);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
    char args[512];
    snprintf(args, sizeof args, "jsonl '%s' 6 1", path);
    assert_int_equal(python_check(args), 0);

    const char *csv = in_dir("partial.csv");
    spit(csv, "type,st"); /* killed in the header: an empty log */
    assert_int_equal(snug_curve_write(csv, in_dir("partial-csv.svg"), NULL, &err), SNUG_OK);
    assert_int_equal(snug_run_log_open(csv, 0, &log, &err), SNUG_OK);
    log_steps(log, 1, 2, false);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
    snprintf(args, sizeof args, "csv '%s' 2 0", csv);
    assert_int_equal(python_check(args), 0);
}

/* A malformed line before the last is refused, by resume and by the curve, with the file and its line number;
 * the file is left as it was. */
static void test_malformed_line(void **state) {
    (void)state;
    static const char *const bad[] = {
        "{\"type\":\"step\",\"step\":3,\"epoch\":0}\n",            /* no loss */
        "{\"type\":\"jump\",\"step\":3,\"epoch\":0,\"loss\":1}\n", /* an unknown type */
        "{\"type\":\"step\",\"step\":3.5,\"epoch\":0,\"loss\":1}\n",
        "{\"type\":\"step\",\"step\":3,\"epoch\":0,\"loss\":\"x\"}\n",
        "{\"type\":\"step\",\"step\":3,\"epoch\":0,\"loss\":1} x\n",
        "[1, 2]\n",
        "\n",
        "step,3,0,1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = in_dir("bad.jsonl");
        write_log(path, 2, false);
        append_text(path, bad[i]);
        append_text(path, "{\"type\":\"step\",\"step\":4,\"epoch\":0,\"loss\":1}\n");
        char *before = slurp(path);
        snug_error err;
        snug_run_log *log = (snug_run_log *)&err;
        assert_int_equal(snug_run_log_open(path, 10, &log, &err), SNUG_E_FORMAT);
        assert_null(log);
        char where[300];
        snprintf(where, sizeof where, "%s:3:", path);
        assert_non_null(strstr(err.message, where));
        assert_int_equal(snug_curve_write(path, in_dir("bad.svg"), NULL, &err), SNUG_E_FORMAT);
        assert_non_null(strstr(err.message, where));
        char *after = slurp(path);
        assert_string_equal(after, before);
        free(before), free(after);
    }
    const char *csv = in_dir("bad.csv");
    spit(csv, RUN_LOG_CSV_HEADER "\nstep,1,0,1\nstep,x,0,1\nstep,3,0,1\n");
    snug_error err;
    assert_int_equal(snug_curve_write(csv, in_dir("bad.svg"), NULL, &err), SNUG_E_FORMAT);
    assert_non_null(strstr(err.message, "bad.csv:3:"));
    spit(csv, "time,value\n1,2\n");
    assert_int_equal(snug_curve_write(csv, in_dir("bad.svg"), NULL, &err), SNUG_E_FORMAT);
    assert_non_null(strstr(err.message, "bad.csv:1:"));
    snug_run_log *log = NULL;
    spit(csv, "step,type,epoch,loss\n1,step,0,1\n"); /* readable, but not the header rows are appended under */
    assert_int_equal(snug_curve_write(csv, in_dir("bad.svg"), NULL, &err), SNUG_OK);
    assert_int_equal(snug_run_log_open(csv, 5, &log, &err), SNUG_E_FORMAT);
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    snug_error err;
    snug_run_log *log = NULL;
    assert_int_equal(snug_run_log_open(in_dir("run.txt"), -1, &log, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, ".jsonl"));
    assert_non_null(strstr(err.message, ".csv"));
    assert_int_equal(snug_curve_write(in_dir("run.log"), in_dir("x.svg"), NULL, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, ".jsonl"));
    assert_int_equal(snug_curve_write(in_dir("missing.jsonl"), in_dir("x.svg"), NULL, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "missing.jsonl"));
    assert_int_equal(snug_run_log_open(in_dir("no/such/folder.jsonl"), -1, &log, &err), SNUG_E_IO);
    assert_int_equal(snug_curve_write(in_dir("run.jsonl"), in_dir("no/such/x.svg"), NULL, &err), SNUG_E_IO);

    assert_int_equal(snug_run_log_open(in_dir("names.jsonl"), -1, &log, &err), SNUG_OK);
    snug_step_stats st = step_stats(1);
    snug_eval_result r = eval_result(1, false);
    assert_int_equal(snug_run_log_eval(log, &st, &r, "", &err), SNUG_E_ARG);
    assert_int_equal(snug_run_log_eval(log, &st, &r, "a\nb", &err), SNUG_E_ARG);
    assert_int_equal(snug_run_log_eval(log, &st, &r, "a\\b", &err), SNUG_OK);
    assert_int_equal(snug_run_log_close(log, &err), SNUG_OK);
    assert_int_equal(snug_run_log_close(NULL, &err), SNUG_OK);
    char args[512];
    snprintf(args, sizeof args, "jsonl '%s' 0 1", in_dir("names.jsonl"));
    assert_int_equal(python_check(args), 0);
}

/* A full disk: the failed line is reported, and no line is appended after a possibly partial one. */
static void test_full_disk(void **state) {
    (void)state;
    if (access("/dev/full", W_OK) != 0) skip();
    const char *path = in_dir("full.jsonl");
    assert_int_equal(symlink("/dev/full", path), 0);
    snug_error err;
    snug_run_log *log = NULL;
    assert_int_equal(snug_run_log_open(path, -1, &log, &err), SNUG_OK);
    snug_step_stats st = step_stats(1);
    assert_int_equal(snug_run_log_step(log, &st, 1, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "full.jsonl"));
    assert_int_equal(snug_run_log_step(log, &st, 1, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "earlier line"));
    snug_run_log_close(log, &err);
    remove(path);
}

/* ---- the curve ---- */

static void curve_has(const char *log_path, const char *svg_name, const char *title, const char *ids) {
    snug_error err;
    const char *svg = in_dir(svg_name);
    assert_int_equal(snug_curve_write(log_path, svg, title, &err), SNUG_OK);
    char args[1024];
    snprintf(args, sizeof args, "svg '%s' %s", svg, ids);
    assert_int_equal(python_check(args), 0);
}

static void test_curve(void **state) {
    (void)state;
    const char *path = in_dir("curve.jsonl");
    write_log(path, 12, false);
    curve_has(path, "curve.svg", NULL,
              "train-loss train-loss-smoothed eval-loss eval-accuracy eval-loss-2 eval-accuracy-2");
    char *svg = slurp(in_dir("curve.svg"));
    assert_non_null(strstr(svg, "<title>curve.jsonl</title>"));   /* the file's name when no title is given */
    assert_non_null(strstr(svg, "held-out, &quot;b&quot; loss")); /* a set's name escaped */
    assert_non_null(strstr(svg, "epoch 3"));                       /* 12 steps, 4 per epoch */
    assert_non_null(strstr(svg, "bias-corrected"));
    free(svg);
    assert_int_equal(access(in_dir("curve.svg.tmp"), F_OK), -1);

    const char *csv = in_dir("curve.csv");
    write_log(csv, 12, true);
    curve_has(csv, "curve-csv.svg", "<b>&amp; a title",
              "train-loss train-loss-smoothed eval-loss eval-mean-iou eval-loss-2 eval-mean-iou-2");
    svg = slurp(in_dir("curve-csv.svg"));
    assert_non_null(strstr(svg, "&lt;b&gt;&amp;amp; a title"));
    assert_non_null(strstr(svg, "mean IoU (%)"));
    free(svg);
}

/* Logs with little in them draw too: empty, one step, steps only, every loss NaN, evaluations only. */
static void test_curve_sparse(void **state) {
    (void)state;
    const char *empty = in_dir("empty.jsonl");
    spit(empty, "");
    curve_has(empty, "empty.svg", NULL, "");
    char *svg = slurp(in_dir("empty.svg"));
    assert_non_null(strstr(svg, "nothing logged yet"));
    free(svg);
    const char *empty_csv = in_dir("empty.csv");
    spit(empty_csv, RUN_LOG_CSV_HEADER "\n");
    curve_has(empty_csv, "empty-csv.svg", "", "");

    const char *one = in_dir("one.jsonl");
    write_log(one, 1, false);
    curve_has(one, "one.svg", NULL, "train-loss train-loss-smoothed");
    svg = slurp(in_dir("one.svg"));
    assert_non_null(strstr(svg, " h0")); /* a point alone is drawn as a dot */
    free(svg);

    const char *steps = in_dir("steps.jsonl");
    write_log(steps, 3, false); /* step 3's loss is NaN: a gap */
    curve_has(steps, "steps.svg", NULL, "train-loss train-loss-smoothed");

    const char *nan = in_dir("nan.jsonl");
    spit(nan, "{\"type\":\"step\",\"step\":0,\"epoch\":0,\"loss\":null}\n"
              "{\"type\":\"step\",\"step\":0,\"epoch\":0,\"loss\":null}\n");
    curve_has(nan, "nan.svg", NULL, "train-loss train-loss-smoothed");

    const char *evals = in_dir("evals.csv");
    spit(evals, RUN_LOG_CSV_HEADER "\neval,0,0,2.3,,,,100,,,,,test,0.1,,\n");
    curve_has(evals, "evals.svg", NULL, "eval-loss eval-accuracy");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jsonl_fields),
        cmocka_unit_test(test_jsonl_text),
        cmocka_unit_test(test_csv_rows),
        cmocka_unit_test(test_resume_truncates),
        cmocka_unit_test(test_partial_last_line),
        cmocka_unit_test(test_malformed_line),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_curve),
        cmocka_unit_test(test_curve_sparse),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
