/* The text side of a CSV table (data/csv.c): lines read one at a time with a length cap, split into cells
 * (RFC 4180 quoting), and cells read as numbers. Nothing here knows what the columns mean; csv.c does. */
#ifndef SNUG_DATA_CSV_PARSE_H
#define SNUG_DATA_CSV_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snug.h"

/* The longest line read, without its line end: a longer one is a file that is not a table of rows (or one row
 * of a size no model here takes), refused before it fills memory. */
#define CSV_LINE_MAX ((size_t)1 << 20)

typedef struct csv_reader {
    FILE *f;
    const char *path;   /* for messages */
    char *block;        /* what fread brought in, [pos, end) not yet consumed */
    size_t pos, end;
    bool eof;
    bool after_cr;      /* the last line ended at a '\r': a '\n' right after it belongs to that line end */
    char *line;         /* the current line, NUL-terminated, without "\n", "\r\n" or "\r" */
    size_t len, cap;
    size_t number;      /* 1-based number of the current line */
} csv_reader;

/* Opens path. SNUG_E_IO when it cannot be opened or is not a regular file (a pipe would wait forever), naming it.
 * Lines end in "\n", "\r\n" or a lone "\r" (old Mac files). */
snug_status csv_reader_open(csv_reader *r, const char *path, snug_error *err);
/* The next line into r->line (*got false at the end of the file). SNUG_E_IO for a failed read, SNUG_E_FORMAT
 * for a line longer than CSV_LINE_MAX or one holding a NUL byte. */
snug_status csv_reader_next(csv_reader *r, bool *got, snug_error *err);
void csv_reader_close(csv_reader *r);

typedef enum csv_split_status {
    CSV_SPLIT_OK = 0,
    CSV_SPLIT_OPEN_QUOTE,   /* a quoted cell not closed on its line */
    CSV_SPLIT_AFTER_QUOTE,  /* text after a quoted cell's closing quote */
} csv_split_status;

/* Splits line (NUL-terminated, rewritten in place) at commas into NUL-terminated cells: spaces and tabs around
 * a cell dropped, a quoted cell's quotes removed and its "" read as one ". The first max cell pointers go into
 * cells, *count = every cell of the line. On a quoting error *count is the (1-based) cell where it is. */
csv_split_status csv_split(char *line, char **cells, size_t max, size_t *count);

typedef enum csv_cell_kind {
    CSV_NUMBER = 0,  /* a finite number within float32's range */
    CSV_MISSING,     /* empty, "NA", "N/A", "NaN" or "?" (any case) */
    CSV_NONFINITE,   /* inf, nan(...), or beyond float32's range */
    CSV_TEXT,        /* anything else */
} csv_cell_kind;

/* What cell is; *v its value when a number. */
csv_cell_kind csv_number(const char *cell, double *v);

#endif
