/* The run's log (snug_run_log_* in snug.h): one line per optimizer step and one per evaluation, as JSON lines or
 * CSV rows, each written whole and flushed, so that a run killed at any moment leaves whole lines and at most one
 * partial last line, which a reader ignores. A continued run keeps the lines up to the step its state was written
 * at and appends after them: the steps it takes again are logged once. */
#define _POSIX_C_SOURCE 200809L
#include "io/run_log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"

struct snug_run_log {
    FILE *f;               /* NULL on a rank other than 0: nothing is written */
    run_log_format format;
    char *path;
    bool failed;           /* a line could not be written: none is appended after it (it may be partial) */
};

/* ---- one line ---- */

/* A line being made: JSON pairs appended to text, or CSV cells by column, joined at the end. */
typedef struct line_out {
    run_log_format format;
    char text[1024];
    size_t len;
    char cell[RUN_LOG_COLUMNS][2 * RUN_LOG_SET_MAX + 8]; /* room for a quoted name whose quotes are doubled */
} line_out;

static void append(line_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void append(line_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->text + o->len, sizeof o->text - o->len, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n < sizeof o->text - o->len ? (size_t)n : sizeof o->text - o->len - 1;
}

/* One field whose value is already text in the line's format. */
static void field(line_out *o, enum run_log_column col, const char *name, const char *value) {
    if (o->format == RUN_LOG_JSONL) append(o, ",\"%s\":%s", name, value);
    else snprintf(o->cell[col], sizeof o->cell[col], "%s", value);
}

/* The shortest text that reads back as v (as a float when is_float: at most 9 digits, a double's at most 17); a
 * value that is not finite is null in JSON, nan, inf or -inf in CSV. */
static void number_text(char *buf, size_t len, double v, bool is_float, run_log_format format) {
    if (!isfinite(v)) {
        snprintf(buf, len, "%s", format == RUN_LOG_JSONL ? "null" : isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) return;
    }
}

static void field_double(line_out *o, enum run_log_column col, const char *name, double v) {
    char text[40];
    number_text(text, sizeof text, v, false, o->format);
    field(o, col, name, text);
}

static void field_float(line_out *o, enum run_log_column col, const char *name, float v) {
    char text[40];
    number_text(text, sizeof text, v, true, o->format);
    field(o, col, name, text);
}

static void field_count(line_out *o, enum run_log_column col, const char *name, size_t v) {
    char text[24];
    snprintf(text, sizeof text, "%zu", v);
    field(o, col, name, text);
}

static void field_long(line_out *o, enum run_log_column col, const char *name, long v) {
    char text[24];
    snprintf(text, sizeof text, "%ld", v);
    field(o, col, name, text);
}

/* A name without control characters (run_log_check_name): JSON escapes " and \; CSV quotes a cell that holds a
 * comma, a quote or space at an end, doubling its quotes. */
static void field_string(line_out *o, enum run_log_column col, const char *name, const char *v) {
    char text[2 * RUN_LOG_SET_MAX + 4];
    size_t n = 0, len = strlen(v);
    bool quote = o->format == RUN_LOG_JSONL || strpbrk(v, ",\"") || (len && (v[0] == ' ' || v[len - 1] == ' '));
    if (quote) text[n++] = '"';
    for (const char *c = v; *c; c++) {
        if (*c == '"') text[n++] = o->format == RUN_LOG_JSONL ? '\\' : '"';
        else if (*c == '\\' && o->format == RUN_LOG_JSONL) text[n++] = '\\';
        text[n++] = *c;
    }
    if (quote) text[n++] = '"';
    text[n] = '\0';
    field(o, col, name, text);
}

static void line_begin(line_out *o, run_log_format format, const char *type, long step, long epoch) {
    memset(o, 0, sizeof *o);
    o->format = format;
    if (format == RUN_LOG_JSONL) append(o, "{\"type\":\"%s\"", type);
    else snprintf(o->cell[RUN_LOG_COL_TYPE], sizeof o->cell[0], "%s", type);
    field_long(o, RUN_LOG_COL_STEP, "step", step);
    field_long(o, RUN_LOG_COL_EPOCH, "epoch", epoch);
}

static void line_end(line_out *o) {
    if (o->format == RUN_LOG_JSONL) {
        append(o, "}\n");
        return;
    }
    for (int c = 0; c < RUN_LOG_COLUMNS; c++) append(o, "%s%s", c ? "," : "", o->cell[c]);
    append(o, "\n");
}

/* The line whole, then flushed: a run killed after this leaves it in the file. */
static snug_status write_line(snug_run_log *log, const line_out *o, snug_error *err) {
    if (log->failed)
        return snug_fail(err, SNUG_E_IO, "the run log '%s' is not written any more: an earlier line could not be "
                         "written", log->path);
    errno = 0;
    if (fwrite(o->text, 1, o->len, log->f) == o->len && fflush(log->f) == 0) return SNUG_OK;
    log->failed = true;
    return snug_fail(err, SNUG_E_IO, "cannot write to the run log '%s': %s (is the disk full?); no more lines are "
                     "written to it", log->path, strerror(errno ? errno : EIO));
}

/* ---- opening ---- */

/* What a continued run keeps: the lines up to and including its step, read from the old file into the new. */
typedef struct keep_job {
    run_log_reader *reader;
    long resume_step;
} keep_job;

static snug_status keep_lines(FILE *f, void *user, snug_error *err) {
    keep_job *job = user;
    run_log_reader *r = job->reader;
    if (r->format == RUN_LOG_CSV) {
        if (r->header && strcmp(r->header, RUN_LOG_CSV_HEADER "\n") != 0)
            return snug_fail(err, SNUG_E_FORMAT, "%s:1: the header is not the one snug writes ('%s'): a continued "
                             "run cannot append rows to it; start a new log", r->path, RUN_LOG_CSV_HEADER);
        if (fputs(RUN_LOG_CSV_HEADER "\n", f) == EOF)
            return snug_fail(err, SNUG_E_IO, "cannot write the run log '%s.tmp': %s", r->path, strerror(errno));
    }
    for (;;) {
        run_log_record rec;
        bool got = false;
        snug_status s = run_log_reader_next(r, &rec, &got, err);
        if (s != SNUG_OK) return s;
        if (!got || rec.step > job->resume_step) return SNUG_OK; /* the lines after belong to steps taken again */
        if (fwrite(r->line, 1, r->line_len, f) != r->line_len)
            return snug_fail(err, SNUG_E_IO, "cannot write the run log '%s.tmp': %s", r->path, strerror(errno));
    }
}

/* Rewrites the log at path with the lines a run continued after resume_step keeps. A missing file is a new
 * log. */
static snug_status keep_until(const char *path, long resume_step, snug_error *err) {
    if (access(path, F_OK) != 0 && errno == ENOENT) return SNUG_OK;
    run_log_reader r;
    snug_status s = run_log_reader_open(&r, path, err);
    keep_job job = {.reader = &r, .resume_step = resume_step};
    if (s == SNUG_OK) s = atomic_file_write(path, NULL, "run log", keep_lines, &job, err);
    run_log_reader_close(&r);
    return s;
}

static snug_status open_file(snug_run_log *log, long resume_step, snug_error *err) {
    if (resume_step >= 0) {
        snug_status s = keep_until(log->path, resume_step, err);
        if (s != SNUG_OK) return s;
    }
    bool kept = resume_step >= 0 && access(log->path, F_OK) == 0;
    log->f = fopen(log->path, kept ? "a" : "w");
    if (!log->f)
        return snug_fail(err, SNUG_E_IO, "cannot open the run log '%s': %s; check that its folder exists and is "
                         "writable", log->path, strerror(errno));
    if (kept || log->format != RUN_LOG_CSV) return SNUG_OK;
    if (fputs(RUN_LOG_CSV_HEADER "\n", log->f) != EOF && fflush(log->f) == 0) return SNUG_OK;
    return snug_fail(err, SNUG_E_IO, "cannot write the run log '%s': %s (is the disk full?)", log->path,
                     strerror(errno ? errno : EIO));
}

snug_status snug_run_log_open(const char *path, long resume_step, snug_run_log **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_run_log_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return snug_fail(err, SNUG_E_ARG, "run log: a file name is needed");
    run_log_format format = run_log_format_of(path);
    if (format == RUN_LOG_UNKNOWN)
        return snug_fail(err, SNUG_E_ARG, "run log '%s': the name must end in .jsonl (JSON lines) or .csv", path);
    snug_run_log *log = calloc(1, sizeof *log);
    if (log) log->path = strdup(path);
    if (!log || !log->path) {
        free(log);
        return snug_fail(err, SNUG_E_OOM, "out of memory opening the run log '%s'", path);
    }
    log->format = format;
    snug_status s = snug_dist_rank() == 0 ? open_file(log, resume_step, err) : SNUG_OK;
    if (s != SNUG_OK) {
        snug_run_log_close(log, NULL);
        return s;
    }
    *out = log;
    return SNUG_OK;
}

/* ---- lines ---- */

snug_status snug_run_log_step(snug_run_log *log, const snug_step_stats *st, size_t memory_bytes, snug_error *err) {
    if (!log || !st) return snug_fail(err, SNUG_E_ARG, "snug_run_log_step: the log and the step's stats are needed");
    if (!log->f) return SNUG_OK;
    if (memory_bytes == 0) snug_process_resident(&memory_bytes, NULL);
    line_out o;
    line_begin(&o, log->format, "step", st->step, st->epoch);
    field_double(&o, RUN_LOG_COL_LOSS, "loss", st->loss);
    field_float(&o, RUN_LOG_COL_LR, "lr", st->lr);
    field_float(&o, RUN_LOG_COL_GRAD_NORM, "grad_norm", st->grad_norm);
    field(&o, RUN_LOG_COL_SKIPPED, "skipped", st->skipped ? "true" : "false");
    field_count(&o, RUN_LOG_COL_ITEMS, "items", st->items);
    field_count(&o, RUN_LOG_COL_MICRO_BATCHES, "micro_batches", st->micro_batches);
    field_double(&o, RUN_LOG_COL_SAMPLES_PER_S, "samples_per_s", st->samples_per_s);
    field_double(&o, RUN_LOG_COL_ELAPSED_S, "elapsed_s", st->elapsed_s);
    if (memory_bytes) field_count(&o, RUN_LOG_COL_MEMORY_BYTES, "memory_bytes", memory_bytes);
    else field(&o, RUN_LOG_COL_MEMORY_BYTES, "memory_bytes", log->format == RUN_LOG_JSONL ? "null" : "");
    line_end(&o);
    return write_line(log, &o, err);
}

/* A set's name must fit the line and be printable: no control character, no more than RUN_LOG_SET_MAX - 1
 * bytes. */
static snug_status check_name(const snug_run_log *log, const char *name, snug_error *err) {
    size_t len = strlen(name);
    bool printable = true;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) printable &= *c >= 0x20 && *c != 0x7f;
    if (len > 0 && len < RUN_LOG_SET_MAX && printable) return SNUG_OK;
    return snug_fail(err, SNUG_E_ARG, "run log '%s': an evaluation set's name must be 1 to %d printable bytes "
                     "(\"test\", \"validation\")", log->path, RUN_LOG_SET_MAX - 1);
}

snug_status snug_run_log_eval(snug_run_log *log, const snug_step_stats *st, const snug_eval_result *res,
                              const char *name, snug_error *err) {
    if (!log || !st || !res || !name)
        return snug_fail(err, SNUG_E_ARG, "snug_run_log_eval: the log, the step's stats, the scores and the set's "
                         "name are needed");
    snug_status s = check_name(log, name, err);
    if (s != SNUG_OK || !log->f) return s;
    line_out o;
    line_begin(&o, log->format, "eval", st->step, st->epoch);
    field_string(&o, RUN_LOG_COL_SET, "set", name);
    field_double(&o, RUN_LOG_COL_LOSS, "loss", res->loss);
    field_double(&o, RUN_LOG_COL_ACCURACY, "accuracy", res->accuracy);
    field_count(&o, RUN_LOG_COL_ITEMS, "items", res->items);
    if (res->kind == SNUG_EVAL_PIXELS) {
        field_double(&o, RUN_LOG_COL_MEAN_IOU, "mean_iou", res->mean_iou);
        if (res->classes == 2) field_double(&o, RUN_LOG_COL_FOREGROUND_IOU, "foreground_iou", res->foreground_iou);
    }
    line_end(&o);
    return write_line(log, &o, err);
}

snug_status snug_run_log_close(snug_run_log *log, snug_error *err) {
    if (!log) return SNUG_OK;
    snug_status s = SNUG_OK;
    if (log->f) {
        errno = 0;
        bool synced = fflush(log->f) == 0 && fsync(fileno(log->f)) == 0;
        int e = synced ? 0 : errno ? errno : EIO;
        if (fclose(log->f) != 0 && e == 0) e = errno ? errno : EIO;
        if (e != 0)
            s = snug_fail(err, SNUG_E_IO, "cannot finish the run log '%s': %s (is the disk full?); its last lines "
                          "may be missing", log->path, strerror(e));
    }
    free(log->path);
    free(log);
    return s;
}
