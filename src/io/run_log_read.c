/* Reading a run's log back (run_log.h): whole lines only, each checked, so that a resumed log keeps exactly the
 * lines it can trust and the curve draws exactly what was written. A JSON line is parsed with cJSON; a CSV row is
 * split by the quoting rules of RFC 4180 (without line breaks inside a field: the writer never puts one there). */
#define _POSIX_C_SOURCE 200809L
#include "io/run_log.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/escape.h"

#define CSV_FIELDS_MAX 64 /* fields a row may have, the columns snug does not know included */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcasecmp(s + n - k, suffix) == 0;
}

run_log_format run_log_format_of(const char *path) {
    if (!path) return RUN_LOG_UNKNOWN;
    if (ends_with(path, ".jsonl")) return RUN_LOG_JSONL;
    if (ends_with(path, ".csv")) return RUN_LOG_CSV;
    return RUN_LOG_UNKNOWN;
}

/* A record with nothing in it: every number NaN, every count 0. */
static void record_clear(run_log_record *rec) {
    memset(rec, 0, sizeof *rec);
    rec->loss = rec->lr = rec->grad_norm = rec->samples_per_s = rec->elapsed_s = NAN;
    rec->accuracy = rec->mean_iou = rec->foreground_iou = NAN;
}

static snug_status malformed(const run_log_reader *r, const char *why, snug_error *err) {
    size_t shown = r->line_len && r->line[r->line_len - 1] == '\n' ? r->line_len - 1 : r->line_len;
    return snug_fail(err, SNUG_E_FORMAT, "%s:%ld: not a run log line (%s): '%s'; a run log holds the lines "
                     "snug_run_log_step and snug_run_log_eval write, each whole; fix or remove that line",
                     r->path, r->line_no, why, escape_range(r->line, shown > 80 ? 80 : shown).text);
}

/* ---- values from text ---- */

static bool parse_long(const char *s, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno || v > SIZE_MAX) return false;
    *out = (size_t)v;
    return true;
}

/* A number, "nan", "inf" or "-inf"; an empty cell is NaN. */
static bool parse_double(const char *s, double *out) {
    if (!*s) return *out = NAN, true;
    char *end;
    double v = strtod(s, &end);
    if (*end) return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out) {
    if (!*s || strcmp(s, "false") == 0) return *out = false, true;
    if (strcmp(s, "true") == 0) return *out = true, true;
    return false;
}

static void copy_set(char *dst, const char *src) {
    snprintf(dst, RUN_LOG_SET_MAX, "%s", src);
}

static bool parse_type(const char *s, run_log_type *t) {
    if (strcmp(s, "step") == 0) return *t = RUN_LOG_STEP, true;
    if (strcmp(s, "eval") == 0) return *t = RUN_LOG_EVAL, true;
    return false;
}

/* ---- CSV ---- */

/* Splits the row s (no newline) into fields in place, unquoting "..." fields; returns their count, or -1 when a
 * quote is not closed, text follows a closing quote, or there are more than max fields. */
static int split_csv(char *s, char **fields, int max) {
    int n = 0;
    for (char *p = s;;) {
        if (n == max) return -1;
        fields[n++] = p;
        if (*p != '"') {
            char *comma = strchr(p, ',');
            if (!comma) return n;
            *comma = '\0';
            p = comma + 1;
            continue;
        }
        char *out = p++;
        for (;; p++) {
            if (!*p) return -1;
            if (*p == '"' && p[1] != '"') break;
            if (*p == '"') p++; /* a doubled quote stands for one */
            *out++ = *p;
        }
        p++;
        if (*p != ',' && *p) return -1;
        bool last = !*p;
        *out = '\0';
        if (last) return n;
        p++;
    }
}

/* The index in the header of each known column; the four every row needs must be there. */
static snug_status map_columns(run_log_reader *r, snug_error *err) {
    char known[] = RUN_LOG_CSV_HEADER, *names[RUN_LOG_COLUMNS];
    size_t header_len = strlen(r->header);
    char *row = malloc(header_len + 1);
    char *fields[CSV_FIELDS_MAX];
    if (!row) return snug_fail(err, SNUG_E_OOM, "out of memory reading the header of the run log '%s'", r->path);
    memcpy(row, r->header, header_len + 1);
    row[strcspn(row, "\r\n")] = '\0';
    int n = split_csv(row, fields, CSV_FIELDS_MAX);
    int k = split_csv(known, names, RUN_LOG_COLUMNS);
    for (int c = 0; c < k; c++) {
        r->column[c] = -1;
        for (int f = 0; f < n; f++)
            if (strcmp(fields[f], names[c]) == 0) r->column[c] = f;
    }
    free(row);
    const int *col = r->column;
    if (n > 0 && col[RUN_LOG_COL_TYPE] >= 0 && col[RUN_LOG_COL_STEP] >= 0 && col[RUN_LOG_COL_EPOCH] >= 0 &&
        col[RUN_LOG_COL_LOSS] >= 0)
        return SNUG_OK;
    return snug_fail(err, SNUG_E_FORMAT, "%s:1: not a run log's header: the columns type, step, epoch and loss are "
                     "needed; snug writes the header '%s'", r->path, RUN_LOG_CSV_HEADER);
}

/* The cell of known column c, "" where the header has no such column or the row is short. */
static const char *cell(const run_log_reader *r, char **fields, int n, int c) {
    int f = r->column[c];
    return f >= 0 && f < n ? fields[f] : "";
}

/* Fills rec from the fields of one row; returns the name of the first column that does not parse, or NULL. */
static const char *csv_record(const run_log_reader *r, char **fields, int n, run_log_record *rec) {
    if (!parse_type(cell(r, fields, n, RUN_LOG_COL_TYPE), &rec->type)) return "type (step or eval)";
    if (!parse_long(cell(r, fields, n, RUN_LOG_COL_STEP), &rec->step)) return "step";
    if (!parse_long(cell(r, fields, n, RUN_LOG_COL_EPOCH), &rec->epoch)) return "epoch";
    if (!parse_double(cell(r, fields, n, RUN_LOG_COL_LOSS), &rec->loss)) return "loss";
    static const struct { int col; size_t offset; } doubles[] = {
        {RUN_LOG_COL_LR, offsetof(run_log_record, lr)},
        {RUN_LOG_COL_GRAD_NORM, offsetof(run_log_record, grad_norm)},
        {RUN_LOG_COL_SAMPLES_PER_S, offsetof(run_log_record, samples_per_s)},
        {RUN_LOG_COL_ELAPSED_S, offsetof(run_log_record, elapsed_s)},
        {RUN_LOG_COL_ACCURACY, offsetof(run_log_record, accuracy)},
        {RUN_LOG_COL_MEAN_IOU, offsetof(run_log_record, mean_iou)},
        {RUN_LOG_COL_FOREGROUND_IOU, offsetof(run_log_record, foreground_iou)},
    };
    for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++)
        if (!parse_double(cell(r, fields, n, doubles[i].col), (double *)((char *)rec + doubles[i].offset)))
            return "a number column";
    static const struct { int col; size_t offset; } counts[] = {
        {RUN_LOG_COL_ITEMS, offsetof(run_log_record, items)},
        {RUN_LOG_COL_MICRO_BATCHES, offsetof(run_log_record, micro_batches)},
        {RUN_LOG_COL_MEMORY_BYTES, offsetof(run_log_record, memory_bytes)},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const char *s = cell(r, fields, n, counts[i].col);
        if (*s && !parse_size(s, (size_t *)((char *)rec + counts[i].offset))) return "a count column";
    }
    if (!parse_bool(cell(r, fields, n, RUN_LOG_COL_SKIPPED), &rec->skipped)) return "skipped (true or false)";
    copy_set(rec->set, cell(r, fields, n, RUN_LOG_COL_SET));
    return NULL;
}

static snug_status csv_line(const run_log_reader *r, run_log_record *rec, snug_error *err) {
    char *row = malloc(r->line_len + 1), *fields[CSV_FIELDS_MAX];
    if (!row) return snug_fail(err, SNUG_E_OOM, "out of memory reading the run log '%s'", r->path);
    memcpy(row, r->line, r->line_len + 1);
    row[strcspn(row, "\r\n")] = '\0';
    int n = split_csv(row, fields, CSV_FIELDS_MAX);
    const char *bad = n < 0 ? "a quote not closed, or too many fields" : csv_record(r, fields, n, rec);
    snug_status s = bad ? malformed(r, bad, err) : SNUG_OK;
    free(row);
    return s;
}

/* ---- JSON lines ---- */

/* A number field: absent or null is NaN (null is what the writer puts for a value that was not finite). */
static bool json_double(const cJSON *o, const char *name, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return *out = NAN, true;
    if (!cJSON_IsNumber(v)) return false;
    *out = v->valuedouble;
    return true;
}

static bool json_long(const cJSON *o, const char *name, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 0x1p53) return false;
    *out = (long)v->valuedouble;
    return true;
}

/* A count: absent or null is 0. */
static bool json_size(const cJSON *o, const char *name, size_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return *out = 0, true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 0 && d == floor(d) && d < 0x1p64)) return false;
    *out = (size_t)d;
    return true;
}

static const char *json_fields(const cJSON *o, run_log_record *rec) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsString(type) || !parse_type(type->valuestring, &rec->type))
        return "\"type\" is not \"step\" or \"eval\"";
    if (!json_long(o, "step", &rec->step)) return "\"step\" is not a whole number";
    if (!json_long(o, "epoch", &rec->epoch)) return "\"epoch\" is not a whole number";
    if (!cJSON_GetObjectItemCaseSensitive(o, "loss")) return "no \"loss\"";
    if (!json_double(o, "loss", &rec->loss) || !json_double(o, "lr", &rec->lr) ||
        !json_double(o, "grad_norm", &rec->grad_norm) || !json_double(o, "samples_per_s", &rec->samples_per_s) ||
        !json_double(o, "elapsed_s", &rec->elapsed_s) || !json_double(o, "accuracy", &rec->accuracy) ||
        !json_double(o, "mean_iou", &rec->mean_iou) || !json_double(o, "foreground_iou", &rec->foreground_iou))
        return "a field that should be a number is not";
    if (!json_size(o, "items", &rec->items) || !json_size(o, "micro_batches", &rec->micro_batches) ||
        !json_size(o, "memory_bytes", &rec->memory_bytes))
        return "a count that is not a whole number >= 0";
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(o, "skipped");
    if (skipped && !cJSON_IsBool(skipped)) return "\"skipped\" is not true or false";
    rec->skipped = cJSON_IsTrue(skipped);
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(o, "set");
    if (set && !cJSON_IsString(set)) return "\"set\" is not a string";
    copy_set(rec->set, set ? set->valuestring : "");
    return NULL;
}

static snug_status json_line(const run_log_reader *r, run_log_record *rec, snug_error *err) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(r->line, r->line_len, &end, false);
    const char *bad = NULL;
    if (!o || !cJSON_IsObject(o)) bad = "not a JSON object";
    else if (end && strspn(end, " \t\r\n") != r->line_len - (size_t)(end - r->line)) bad = "text after the object";
    else bad = json_fields(o, rec);
    cJSON_Delete(o);
    return bad ? malformed(r, bad, err) : SNUG_OK;
}

/* ---- lines ---- */

/* The next whole line into r->line: false at the end of the file or at a partial last line. */
static snug_status read_line(run_log_reader *r, bool *got, snug_error *err) {
    errno = 0;
    ssize_t n = getline(&r->line, &r->line_cap, r->f);
    *got = false;
    if (n < 0) {
        if (ferror(r->f))
            return snug_fail(err, SNUG_E_IO, "cannot read the run log '%s': %s", r->path,
                             strerror(errno ? errno : EIO));
        return SNUG_OK;
    }
    r->line_len = (size_t)n;
    r->line_no++;
    if (r->line[n - 1] != '\n') return SNUG_OK; /* a partial last line: the run was killed while writing it */
    if (memchr(r->line, '\0', r->line_len)) return malformed(r, "a NUL byte", err);
    if (strspn(r->line, " \t\r\n") == r->line_len) return malformed(r, "an empty line", err);
    *got = true;
    return SNUG_OK;
}

snug_status run_log_reader_open(run_log_reader *r, const char *path, snug_error *err) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->format = run_log_format_of(path);
    if (r->format == RUN_LOG_UNKNOWN)
        return snug_fail(err, SNUG_E_ARG, "run log '%s': the name must end in .jsonl (JSON lines) or .csv", path);
    r->f = fopen(path, "r");
    if (!r->f) return snug_fail(err, SNUG_E_IO, "cannot open the run log '%s': %s", path, strerror(errno));
    if (r->format != RUN_LOG_CSV) return SNUG_OK;
    bool got = false;
    snug_status s = read_line(r, &got, err);
    if (s != SNUG_OK || !got) return s;
    r->header = malloc(r->line_len + 1);
    if (!r->header) return snug_fail(err, SNUG_E_OOM, "out of memory reading the run log '%s'", path);
    memcpy(r->header, r->line, r->line_len + 1);
    return map_columns(r, err);
}

snug_status run_log_reader_next(run_log_reader *r, run_log_record *rec, bool *got, snug_error *err) {
    *got = false;
    if (r->format == RUN_LOG_CSV && !r->header) return SNUG_OK; /* no whole header: an empty log */
    snug_status s = read_line(r, got, err);
    if (s != SNUG_OK || !*got) return s;
    record_clear(rec);
    s = r->format == RUN_LOG_CSV ? csv_line(r, rec, err) : json_line(r, rec, err);
    if (s != SNUG_OK) *got = false;
    return s;
}

void run_log_reader_close(run_log_reader *r) {
    if (r->f) fclose(r->f);
    free(r->line);
    free(r->header);
    memset(r, 0, sizeof *r);
}
