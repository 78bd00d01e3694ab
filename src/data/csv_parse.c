/* The text side of a CSV table (data/csv_parse.h): a line reader over fread blocks that never holds more than
 * one capped line, an in-place cell splitter, and a number reader that tells missing values from text. */
#define _POSIX_C_SOURCE 200809L
#include "data/csv_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define CSV_BLOCK ((size_t)1 << 16)
#define CSV_LINE_START 4096

snug_status csv_reader_open(csv_reader *r, const char *path, snug_error *err) {
    memset(r, 0, sizeof *r);
    r->path = path;
    /* O_NONBLOCK: a FIFO given by mistake is refused below, not waited on here; regular files ignore it */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0) return snug_fail(err, SNUG_E_IO, "cannot open the table %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(r->f = fdopen(fd, "rb"))) {
        close(fd);
        return snug_fail(err, SNUG_E_IO, "the table %s is not a regular file (a folder, a pipe or a device): give "
                         "a CSV file", path);
    }
    r->block = malloc(CSV_BLOCK);
    r->line = malloc(CSV_LINE_START);
    r->cap = CSV_LINE_START;
    if (!r->block || !r->line) {
        csv_reader_close(r);
        return snug_fail(err, SNUG_E_OOM, "out of host memory for reading the table %s", path);
    }
    return SNUG_OK;
}

void csv_reader_close(csv_reader *r) {
    if (r->f) fclose(r->f);
    free(r->block);
    free(r->line);
    r->f = NULL;
    r->block = r->line = NULL;
}

/* Appends bytes to the line, growing it up to CSV_LINE_MAX (+ 1 for the NUL). */
static snug_status line_append(csv_reader *r, const char *bytes, size_t n, snug_error *err) {
    if (n > CSV_LINE_MAX - r->len)
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: the line is longer than 1 MiB: a table has one short row "
                         "per line (is this a CSV file?)", r->path, r->number);
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap;
        while (cap < r->len + n + 1) cap *= 2;
        if (cap > CSV_LINE_MAX + 1) cap = CSV_LINE_MAX + 1;
        char *line = realloc(r->line, cap);
        if (!line) return snug_fail(err, SNUG_E_OOM, "%s:%zu: out of host memory for the line", r->path, r->number);
        r->line = line;
        r->cap = cap;
    }
    memcpy(r->line + r->len, bytes, n);
    r->len += n;
    return SNUG_OK;
}

/* Refills the block; *more false at the end of the file. */
static snug_status refill(csv_reader *r, bool *more, snug_error *err) {
    r->pos = 0;
    r->end = r->eof ? 0 : fread(r->block, 1, CSV_BLOCK, r->f);
    if (r->end == 0 && ferror(r->f))
        return snug_fail(err, SNUG_E_IO, "cannot read the table %s after line %zu: %s", r->path,
                         r->number ? r->number - 1 : 0, strerror(errno));
    if (feof(r->f)) r->eof = true;
    *more = r->end > 0;
    return SNUG_OK;
}

/* The line as a C string: its "\r" dropped before the NUL, and a NUL inside refused. */
static snug_status line_finish(csv_reader *r, snug_error *err) {
    if (r->len && r->line[r->len - 1] == '\r') r->len--;
    r->line[r->len] = '\0';
    if (memchr(r->line, '\0', r->len))
        return snug_fail(err, SNUG_E_FORMAT, "%s:%zu: the line holds a NUL byte: a CSV table is text (is this a "
                         "binary file?)", r->path, r->number);
    return SNUG_OK;
}

snug_status csv_reader_next(csv_reader *r, bool *got, snug_error *err) {
    r->len = 0;
    r->number++;
    bool any = false;
    for (;;) {
        if (r->pos == r->end) {
            bool more = false;
            snug_status s = refill(r, &more, err);
            if (s != SNUG_OK) return s;
            if (!more) break;
        }
        if (r->after_cr) { /* "\r\n": the line ended at its '\r' */
            r->after_cr = false;
            if (r->block[r->pos] == '\n' && ++r->pos) continue;
        }
        const char *start = r->block + r->pos;
        const size_t avail = r->end - r->pos;
        size_t n = 0;
        while (n < avail && start[n] != '\n' && start[n] != '\r') n++;
        snug_status s = line_append(r, start, n, err);
        if (s != SNUG_OK) return s;
        r->pos += n;
        any = true;
        if (n < avail) {
            r->after_cr = start[n] == '\r';
            r->pos++;
            break;
        }
    }
    *got = any;
    return any ? line_finish(r, err) : SNUG_OK;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* One quoted cell from p (just after its opening quote) into w; returns where reading stopped (after the closing
 * quote and the blanks that follow), or NULL when the quote is not closed. */
static char *unquote(char *p, char **w) {
    for (;;) {
        if (*p == '\0') return NULL;
        if (*p == '"') {
            if (p[1] != '"') break;
            p++;
        }
        *(*w)++ = *p++;
    }
    p++;
    while (is_blank(*p)) p++;
    return p;
}

csv_split_status csv_split(char *line, char **cells, size_t max, size_t *count) {
    char *p = line, *w = line;  /* w never passes p: a cell only shrinks */
    size_t n = 0;
    for (;;) {
        while (is_blank(*p)) p++;
        char *cell = w;
        if (n < max) cells[n] = cell;
        n++;
        if (*p == '"') {
            p = unquote(p + 1, &w);
            *count = n;
            if (!p) return CSV_SPLIT_OPEN_QUOTE;
            if (*p != ',' && *p != '\0') return CSV_SPLIT_AFTER_QUOTE;
        } else {
            while (*p != ',' && *p != '\0') *w++ = *p++;
            while (w > cell && is_blank(w[-1])) w--;
        }
        const bool last = *p == '\0';
        *w++ = '\0';
        p++;
        if (last) break;
    }
    *count = n;
    return CSV_SPLIT_OK;
}

static bool is_missing(const char *cell) {
    static const char *const missing[] = {"", "NA", "N/A", "NaN", "?", NULL};
    for (int i = 0; missing[i]; i++)
        if (strcasecmp(cell, missing[i]) == 0) return true;
    return false;
}

csv_cell_kind csv_number(const char *cell, double *v) {
    if (is_missing(cell)) return CSV_MISSING;
    char *end = NULL;
    errno = 0;
    const double d = strtod(cell, &end);
    if (end == cell || *end != '\0') return CSV_TEXT;
    /* ERANGE on underflow gives a tiny or zero value, which is a fine feature; on overflow HUGE_VAL */
    if (!isfinite(d) || fabs(d) > FLT_MAX) return CSV_NONFINITE;
    *v = d;
    return CSV_NUMBER;
}
